"""Optimisation passes on SSA and a pass manager that keeps every intermediate.

Teaches what LLVM's new pass manager (``llvm/include/llvm/IR/PassManager.h``) runs at -O1:
``SCCPPass`` (``lib/Transforms/Scalar/SCCP.cpp``), ``ADCEPass``/``DCEPass``, ``EarlyCSEPass``
(dominator-scoped value numbering), copy propagation (done inside InstCombine in LLVM) and
``LICMPass``, plus ``SimplifyCFGPass``'s block merging. Every pass is a pure function
``Function -> Function`` (the input is copied, never changed), so a notebook can show any two
stages side by side.

All passes expect SSA (``to_ssa`` first) except ``simplify_cfg``. Simplifications: no alias
analysis (loads are never moved or merged), a pass that finds a loop without a preheader skips it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from course_lib.ir.cfg import dom_tree, natural_loops, reverse_postorder
from course_lib.ir.core import Branch, Const, Function, Jump, Op, Phi, remove_unreachable
from course_lib.ir.dataflow import expr_key
from course_lib.ir.interp import BINARY, UNARY
from course_lib.ir.ssa import to_ssa

TOP, BOTTOM = "TOP", "BOTTOM"  # SCCP lattice: undefined yet / not a constant


def _fold(op: str, vals):
    """Evaluate an Op on constants; BOTTOM when it would trap (division by zero) or is not foldable."""
    if op == "len":
        return BOTTOM
    try:
        return UNARY[op](*vals) if len(vals) == 1 else BINARY[op](*vals)
    except (ZeroDivisionError, OverflowError, ValueError):
        return BOTTOM


def sccp_lattice(fn: Function) -> tuple[dict, set]:
    """Sparse conditional constant propagation (Wegman and Zadeck 1991), solved by iterating
    over executable blocks until no value or edge changes. Returns (value of each variable,
    executable edges as (pred, succ); ("", entry) for the entry)."""
    val: dict[str, object] = {p: BOTTOM for p, _ in fn.params}
    edges = {("", fn.entry)}
    rpo = reverse_postorder(fn)

    def get(a):
        return a.value if isinstance(a, Const) else val.get(a, TOP)

    def meet(a, b):
        if a == TOP:
            return b
        if b == TOP:
            return a
        return a if (a == b and type(a) is type(b)) else BOTTOM

    changed = True
    while changed:
        changed = False
        live_blocks = {s for _, s in edges}
        for label in rpo:
            if label not in live_blocks:
                continue
            b = fn.block(label)
            for i in b.instrs:
                if isinstance(i, Phi):
                    new = TOP
                    for pred, v in i.incoming.items():
                        if (pred, label) in edges:
                            new = meet(new, get(v))
                elif isinstance(i, Op):
                    args = [get(a) for a in i.args]
                    new = BOTTOM if BOTTOM in args else TOP if TOP in args else _fold(i.op, args)
                elif i.dest is not None:
                    new = BOTTOM
                else:
                    continue
                if val.get(i.dest, TOP) != new or type(val.get(i.dest)) is not type(new):
                    if val.get(i.dest, TOP) != new:
                        changed = True
                    val[i.dest] = new
            t = b.term
            if isinstance(t, Branch):
                c = get(t.cond)
                outs = [] if c == TOP else [t.true, t.false] if c == BOTTOM else [t.true if c else t.false]
            else:
                outs = t.targets()
            for s in outs:
                if (label, s) not in edges:
                    edges.add((label, s))
                    changed = True
    return val, edges


def sccp(fn: Function) -> Function:
    """Replace constant variables by constants, fold constant branches into jumps, drop
    unreachable blocks and the phi inputs of dead edges."""
    val, edges = sccp_lattice(fn)
    new = fn.copy()
    consts = {v: c for v, c in val.items() if c not in (TOP, BOTTOM)}

    def sub(a):
        return Const(consts[a]) if isinstance(a, str) and a in consts else a

    for b in new.blocks:
        for i in b.instrs:
            i.replace_uses(sub)
            if isinstance(i, Phi):
                i.incoming = {p: v for p, v in i.incoming.items() if (p, b.label) in edges}
        b.term.replace_uses(sub)
        t = b.term
        if isinstance(t, Branch) and isinstance(t.cond, Const):
            b.term = Jump(t.true if t.cond.value else t.false)
        elif isinstance(t, Branch):
            live = [s for s in t.targets() if (b.label, s) in edges]
            if len(live) == 1:
                b.term = Jump(live[0])
    # a constant definition becomes a copy of the constant (DCE removes it if unused)
    for b in new.blocks:
        for k, i in enumerate(b.instrs):
            if i.dest in consts and isinstance(i, (Op, Phi)):
                b.instrs[k] = Op(i.dest, i.type, "copy", [Const(_as_type(consts[i.dest], i.type))])
    remove_unreachable(new)
    _single_input_phis_to_copies(new)
    return new


def _as_type(v, t):
    return float(v) if t == "float" else v


def _single_input_phis_to_copies(fn: Function):
    for b in fn.blocks:
        for k, i in enumerate(b.instrs):
            if isinstance(i, Phi) and len(i.incoming) == 1:
                b.instrs[k] = Op(i.dest, i.type, "copy", [next(iter(i.incoming.values()))])
    # phis must stay first: move copies made from phis after the remaining phis
    for b in fn.blocks:
        phis = [i for i in b.instrs if isinstance(i, Phi)]
        rest = [i for i in b.instrs if not isinstance(i, Phi)]
        b.instrs = phis + rest


def dce(fn: Function) -> Function:
    """Dead-code elimination by marking (as LLVM's ADCE, without control dependence): stores,
    calls and terminators are live, and so is every definition a live instruction uses."""
    new = fn.copy()
    defs = {i.dest: i for _, i in new.instructions() if i.dest is not None}
    live: set[int] = set()
    work = []
    for _, i in new.instructions():
        if i.is_terminator or i.has_side_effects():
            live.add(id(i))
            work.append(i)
    while work:
        i = work.pop()
        for u in i.uses():
            d = defs.get(u)
            if d is not None and id(d) not in live:
                live.add(id(d))
                work.append(d)
    for b in new.blocks:
        b.instrs = [i for i in b.instrs if id(i) in live]
    return new


def copy_propagation(fn: Function) -> Function:
    """``x = copy y`` in SSA: every use of x reads y instead, and the copy goes."""
    new = fn.copy()
    copies = {}
    for _, i in new.instructions():
        if isinstance(i, Op) and i.op == "copy":
            copies[i.dest] = i.args[0]

    def resolve(a):
        seen = set()
        while isinstance(a, str) and a in copies and a not in seen:
            seen.add(a)
            a = copies[a]
        return a

    for b in new.blocks:
        for i in b.all():
            i.replace_uses(resolve)
        b.instrs = [i for i in b.instrs if not (isinstance(i, Op) and i.op == "copy")]
    return new


def lvn(fn: Function) -> Function:
    """Local value numbering: within each block, a pure Op recomputing an expression already
    held in a variable becomes a copy of that variable."""
    new = fn.copy()
    for b in new.blocks:
        _number_block(b, {})  # every block starts from an empty table
    return new


def _number_block(block, table: dict) -> None:
    """Value-number ``block`` in place against ``table`` (expression key -> the variable holding
    it), which it extends: a pure Op whose key is known becomes a copy of that variable."""
    for k, i in enumerate(block.instrs):
        key = expr_key(i)
        if key is None:
            continue
        if key in table:
            block.instrs[k] = Op(i.dest, i.type, "copy", [table[key]])
        else:
            table[key] = i.dest


# Sample operand pairs for deciding commutativity by running the interpreter's own operations.
_SAMPLES = [(3, 5), (-2, 7), (0, 4), (9, -9), (6, 2), (1.5, -0.25)]


def semantically_commutative() -> frozenset:
    """Binary ops whose interpreter function gives f(a, b) == f(b, a) on every sample pair."""

    def same(f, a, b):
        try:
            return f(a, b) == f(b, a)
        except ZeroDivisionError:
            return False

    return frozenset(op for op, f in BINARY.items() if all(same(f, a, b) for a, b in _SAMPLES))


def redundant_pairs(block) -> dict:
    """An oracle for local value numbering, written without ``expr_key`` or a hash table: compare
    every pure Op with each earlier one (O(n^2)) for the same op, type and operands (in either
    order when the interpreter says the op is commutative). ``{later dest: first dest}``."""
    comm = semantically_commutative()
    ops = [i for i in block.instrs if isinstance(i, Op) and i.op != "copy"]
    out: dict = {}
    for n, later in enumerate(ops):
        args = [str(a) for a in later.args]
        for first in ops[:n]:
            if first.dest in out or (first.op, first.type) != (later.op, later.type):
                continue
            other = [str(a) for a in first.args]
            if other == args or (later.op in comm and sorted(other) == sorted(args)):
                out[later.dest] = first.dest
                break
    return out


def apply_value_numbers(fn: Function, numbers: dict) -> Function:
    """``fn`` with each redundant definition ``d`` (a key of ``numbers``) turned into ``d = copy e``."""
    new = fn.copy()
    for b in new.blocks:
        b.instrs = [Op(i.dest, i.type, "copy", [numbers[i.dest]]) if getattr(i, "dest", None) in numbers else i
                    for i in b.instrs]  # fmt: skip
    return new


def cse(fn: Function) -> Function:
    """Dominator-scoped value numbering (LLVM's EarlyCSE): an expression computed in a
    dominating block is reused instead of recomputed."""
    new = fn.copy()
    kids = dom_tree(new)

    def walk(label, table):
        table = dict(table)  # a block sees its dominators' expressions, never a sibling's
        _number_block(new.block(label), table)
        for c in kids[label]:
            walk(c, table)

    walk(new.entry, {})
    return new


SAFE_TO_SPECULATE = {
    "add",
    "sub",
    "mul",
    "min",
    "max",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "neg",
    "not",
    "abs",
    "float",
    "copy",
}


def _preheader(fn: Function, loop) -> str | None:
    outside = [p for p in fn.preds()[loop.header] if p not in loop.body]
    if len(outside) == 1 and fn.block(outside[0]).succs() == [loop.header]:
        return outside[0]
    return None


def licm(fn: Function) -> Function:
    """Loop-invariant code motion: a pure, non-trapping Op whose operands are all defined
    outside the loop moves to the loop's preheader (inner loops first)."""
    new = fn.copy()
    loops = sorted(natural_loops(new).values(), key=lambda lp: (-lp.depth, lp.header))
    for loop in loops:
        pre = _preheader(new, loop)
        if pre is None:
            continue
        defined_inside = {i.dest for lb in loop.body for i in new.block(lb).instrs if i.dest is not None}
        moved = True
        while moved:
            moved = False
            for lb in sorted(loop.body):
                b = new.block(lb)
                for i in list(b.instrs):
                    ok = (
                        isinstance(i, Op)
                        and i.op in SAFE_TO_SPECULATE
                        and not any(u in defined_inside for u in i.uses())
                    )
                    if ok:
                        b.instrs.remove(i)
                        new.block(pre).instrs.append(i)
                        defined_inside.discard(i.dest)
                        moved = True
    return new


def simplify_cfg(fn: Function) -> Function:
    """Merge a block into its only predecessor when that predecessor jumps straight to it."""
    new = fn.copy()
    changed = True
    while changed:
        changed = False
        preds = new.preds()
        for b in new.blocks:
            if not isinstance(b.term, Jump):
                continue
            c = new.block(b.term.target)
            if c.label == new.entry or c is b or preds[c.label] != [b.label] or c.phis():
                continue
            b.instrs += c.instrs
            b.term = c.term
            new.blocks.remove(c)
            for s in b.succs():
                for p in new.block(s).phis():
                    p.incoming = {(b.label if k == c.label else k): v for k, v in p.incoming.items()}
            changed = True
            break
    return new


# --- the pass manager ----------------------------------------------------------------------
@dataclass
class Stage:
    name: str
    fn: Function
    instructions: int

    def __str__(self):
        return f"; after {self.name} ({self.instructions} instructions)\n{self.fn.text()}"


@dataclass
class PipelineResult:
    """Every stage's IR, in order; ``final`` is the last."""

    stages: list = field(default_factory=list)

    @property
    def final(self) -> Function:
        return self.stages[-1].fn

    def __getitem__(self, name: str) -> Function:
        for s in reversed(self.stages):
            if s.name == name:
                return s.fn
        raise KeyError(name)

    def table(self) -> list[tuple[str, int, int]]:
        """(stage, blocks, static instructions) per stage."""
        return [(s.name, len(s.fn.blocks), s.instructions) for s in self.stages]

    def __str__(self):
        return "\n\n".join(str(s) for s in self.stages) + "\n"


def count_instructions(fn: Function) -> int:
    return sum(len(b.all()) for b in fn.blocks)


PASSES: dict[str, Callable[[Function], Function]] = {
    "to_ssa": to_ssa,
    "sccp": sccp,
    "copyprop": copy_propagation,
    "lvn": lvn,
    "cse": cse,
    "dce": dce,
    "licm": licm,
    "simplifycfg": simplify_cfg,
}
DEFAULT_PIPELINE = ["to_ssa", "sccp", "copyprop", "cse", "copyprop", "dce", "licm", "simplifycfg", "dce"]


class PassManager:
    """Runs named passes in order and keeps every intermediate (``COURSE_IR_DEBUG=1`` prints them)."""

    def __init__(self, pipeline=None, debug: bool | None = None):
        from course_lib import env

        self.pipeline = list(pipeline or DEFAULT_PIPELINE)
        self.debug = env.debug("ir") if debug is None else debug  # COURSE_DEBUG=ir

    def run(self, fn: Function) -> PipelineResult:
        res = PipelineResult([Stage("input", fn, count_instructions(fn))])
        for name in self.pipeline:
            try:
                fn = PASSES[name](fn)
            except Exception as e:  # say which pass failed
                raise RuntimeError(f"pass {name} failed on function {fn.name}: {e}") from e
            res.stages.append(Stage(name, fn, count_instructions(fn)))
            if self.debug:
                print(res.stages[-1])
        return res


def optimize(fn: Function, pipeline=None) -> Function:
    """The default pipeline (to_ssa, sccp, copyprop, cse, dce, licm, simplifycfg); returns SSA."""
    return PassManager(pipeline).run(fn).final


def run_pipeline(fn: Function, pipeline=None) -> PipelineResult:
    return PassManager(pipeline).run(fn)
