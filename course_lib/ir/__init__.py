"""Module 1: a working optimising compiler in miniature (front end -> IR -> SSA -> passes -> back end).

Pipeline (one file per stage)::

    Python function (subset)
      -> frontend.py   from_python: three-address code in basic blocks (explicit CFG)
      -> core.py       the IR dataclasses and the deterministic printer (str(fn))
      -> textparse.py  parse(text): the printer's inverse, errors with line and column
      -> interp.py     interpret / execute: the reference semantics, counts dynamic instructions
      -> cfg.py        dominators (Cooper-Harvey-Kennedy), dominator tree, frontiers, natural loops
      -> dataflow.py   worklist framework: liveness, reaching defs, available exprs, const prop
      -> ssa.py        to_ssa (phis at iterated DF, renaming), from_ssa (copies), is_ssa
      -> passes.py     SCCP, DCE, copy propagation, LVN, CSE, LICM, simplify_cfg; PassManager; optimize
      -> backend.py    instruction selection, linear scan, Chaitin-Briggs, allocation checker, list scheduling
    loopnest.py        loop-nest IR: tile, interchange, unroll, fuse; legality from dependence distances
    cache.py           simulate_cache(trace, size_bytes, line_bytes=64, ways=8): set-associative LRU
    pictures.py        CFG / dom tree / liveness / interference / schedule / tiling-miss pictures
    randprog.py        random programs of the subset for differential tests

Stable API: ``from_python(fn)``, ``parse(text)``, ``str(fn_ir)``, ``interpret(fn_ir, *args)``,
``to_ssa``, ``from_ssa``, ``is_ssa``, ``optimize``. ``COURSE_IR_DEBUG=1`` prints every pass's output.

The instruction set (the contract Module 2's LLVM lowering relies on; it will not change)
------------------------------------------------------------------------------------------
Types: ``int`` (64-bit signed in LLVM; Python int in the interpreter), ``float`` (double),
``list[int]`` / ``list[float]`` (1-D arrays passed by reference; a length travels with them),
``void`` (return type only). Bools are ``int`` 0/1. Every variable has one type; a function
names its parameters' types and its return type. Operands are variable names or constants
(``3``, ``-2``, ``2.5``; a float constant always prints with ``.`` or ``e``).

Instructions (``Op`` unless said; ``dest: type = ...``)::

    copy a                      move (a variable or a constant)
    neg a | not a | abs a       not gives int 0/1
    float a | int a             int -> float; float -> int truncating toward zero
    len a                       length of a list (int)
    add sub mul a, b            same-typed operands (the front end inserts ``float``)
    div a, b                    true division, float result (operands float)
    floordiv mod a, b           Python semantics: round toward -infinity, sign of the divisor
    min max a, b
    lt le gt ge eq ne a, b      int 0/1 result; operands of one type
    phi [v1, b1], [v2, b2]      Phi: the value from the predecessor block taken (SSA only)
    load arr, i                 Load: arr[i] (0 <= i < len)
    alloc n, init               Alloc: a fresh list of n copies of init
    call f(a, b)                Call: to another function of the program (``call f(..)`` alone if void)
    store arr, i, v             Store: arr[i] = v (no dest)
    jump L | br c, L1, L2 | ret [v]   terminators: Jump, Branch (to L1 when c != 0), Return

A function is ``func name(p: type, ...) -> type { label: instr* terminator ... }``; the first
block is the entry; CFG edges are the terminators' targets (``fn.succs()``, ``fn.preds()``).
A program prints its callees (sorted by name) before the function itself, and ``parse`` returns
the last function with the others in ``.callees``.
"""

from course_lib.ir.core import (
    Alloc,
    BasicBlock,
    Branch,
    Call,
    Const,
    Function,
    Jump,
    Load,
    Op,
    Phi,
    Return,
    Store,
)
from course_lib.ir.frontend import UnsupportedError, from_python, from_source
from course_lib.ir.interp import Execution, execute, interpret
from course_lib.ir.passes import PassManager, optimize, run_pipeline
from course_lib.ir.ssa import from_ssa, is_ssa, to_ssa
from course_lib.ir.textparse import IRParseError, parse, parse_program

__all__ = [
    "Alloc",
    "BasicBlock",
    "Branch",
    "Call",
    "Const",
    "Execution",
    "Function",
    "IRParseError",
    "Jump",
    "Load",
    "Op",
    "Phi",
    "Return",
    "Store",
    "UnsupportedError",
    "execute",
    "from_python",
    "from_source",
    "interpret",
    "parse",
    "parse_program",
    "PassManager",
    "optimize",
    "run_pipeline",
    "from_ssa",
    "is_ssa",
    "to_ssa",
]
