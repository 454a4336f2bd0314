"""The reference interpreter: runs any form of the course IR (plain or SSA, with phis).

Teaches what "the semantics of an IR" means: every pass must preserve what this function
computes (LLVM's ``lli`` and torch.fx's ``Interpreter`` play the same role). Arithmetic follows
Python (``floordiv``/``mod`` round toward negative infinity, ``div`` is true division,
``int`` truncates toward zero); lists are Python lists shared by reference, so ``store``
mutates the caller's argument just as the Python function would.

Phis are evaluated together on entry to a block, reading the values from the edge taken
(all reads happen before any write, the "parallel copy" semantics of SSA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from course_lib.ir.core import Alloc, Branch, Call, Const, Function, Jump, Load, Op, Phi, Return, Store

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "min": lambda a, b: min(a, b),
    "max": lambda a, b: max(a, b),
    "lt": lambda a, b: int(a < b),
    "le": lambda a, b: int(a <= b),
    "gt": lambda a, b: int(a > b),
    "ge": lambda a, b: int(a >= b),
    "eq": lambda a, b: int(a == b),
    "ne": lambda a, b: int(a != b),
}
UNARY = {
    "copy": lambda a: a,
    "neg": lambda a: -a,
    "not": lambda a: int(not a),
    "abs": lambda a: abs(a),
    "float": lambda a: float(a),
    "int": lambda a: int(a) if not (isinstance(a, float) and not math.isfinite(a)) else int(a),
    "len": lambda a: len(a),
}


class InterpError(Exception):
    """Raised for an undefined variable, a missing block or too many steps."""


@dataclass
class Execution:
    """Result of :func:`execute`: the value, dynamic instruction count, counts per opcode."""

    value: object
    steps: int
    op_counts: dict = field(default_factory=dict)
    blocks_visited: int = 0


def _opname(i) -> str:
    if isinstance(i, Op):
        return i.op
    return {
        Phi: "phi",
        Load: "load",
        Store: "store",
        Alloc: "alloc",
        Call: "call",
        Jump: "jump",
        Branch: "br",
        Return: "ret",
    }[type(i)]


def execute(fn: Function, *args, max_steps: int = 10_000_000, _depth: int = 0) -> Execution:
    """Run ``fn`` on ``args``; counts every executed instruction (phis and terminators too)."""
    if len(args) != len(fn.params):
        raise InterpError(f"{fn.name} takes {len(fn.params)} arguments, got {len(args)}")
    if _depth > 200:
        raise InterpError("call depth above 200")
    env = {name: a for (name, _), a in zip(fn.params, args)}
    blocks = {b.label: b for b in fn.blocks}
    counts: dict[str, int] = {}
    steps = 0
    visited = 0
    prev, label = None, fn.entry

    def val(x):
        if isinstance(x, Const):
            return x.value
        try:
            return env[x]
        except KeyError:
            raise InterpError(f"{fn.name}: variable {x!r} used before it is defined (block {label})") from None

    while True:
        visited += 1
        block = blocks[label]
        phis = block.phis()
        if phis:
            if prev not in phis[0].incoming:
                raise InterpError(f"{fn.name}: phi in {label} has no input for predecessor {prev}")
            new = {p.dest: val(p.incoming[prev]) for p in phis}  # read all, then write all
            env.update(new)
            steps += len(phis)
            counts["phi"] = counts.get("phi", 0) + len(phis)
        for i in block.instrs:
            if isinstance(i, Phi):
                continue
            steps += 1
            name = _opname(i)
            counts[name] = counts.get(name, 0) + 1
            if isinstance(i, Op):
                vals = [val(a) for a in i.args]
                env[i.dest] = UNARY[i.op](*vals) if len(vals) == 1 else BINARY[i.op](*vals)
            elif isinstance(i, Load):
                env[i.dest] = val(i.array)[val(i.index)]
            elif isinstance(i, Store):
                val(i.array)[val(i.index)] = val(i.value)
            elif isinstance(i, Alloc):
                env[i.dest] = [val(i.init)] * val(i.size)
            elif isinstance(i, Call):
                callee = fn if i.func == fn.name else fn.callees.get(i.func)
                if callee is None:
                    raise InterpError(f"{fn.name}: call of unknown function {i.func}")
                sub = execute(callee, *[val(a) for a in i.args], max_steps=max_steps - steps, _depth=_depth + 1)
                steps += sub.steps
                for k, v in sub.op_counts.items():
                    counts[k] = counts.get(k, 0) + v
                if i.dest is not None:
                    env[i.dest] = sub.value
        t = block.term
        steps += 1
        name = _opname(t)
        counts[name] = counts.get(name, 0) + 1
        if steps > max_steps:
            raise InterpError(f"{fn.name}: more than {max_steps} steps")
        if isinstance(t, Return):
            value = None if t.value is None else val(t.value)
            return Execution(value, steps, dict(sorted(counts.items())), visited)
        if isinstance(t, Jump):
            prev, label = label, t.target
        elif isinstance(t, Branch):
            prev, label = label, (t.true if val(t.cond) else t.false)
        else:
            raise InterpError(f"{fn.name}: block {label} has no terminator")


def interpret(fn: Function, *args, max_steps: int = 10_000_000):
    """Run ``fn`` on ``args`` and return its value (see :func:`execute` for the counts)."""
    return execute(fn, *args, max_steps=max_steps).value


def dynamic_count(fn: Function, *args) -> int:
    """How many instructions one run executes."""
    return execute(fn, *args).steps
