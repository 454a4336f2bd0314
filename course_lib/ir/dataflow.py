"""One worklist dataflow framework and four analyses built on it.

Teaches the idea behind LLVM's ``LiveVariables``/``MemorySSA`` and Inductor's buffer liveness
(``torch/_inductor/scheduler.py`` computes last uses the same way): an analysis is a direction,
an initial value, a merge (meet) and a per-block transfer function; the solver iterates to a
fixpoint. Bril's ``df.py`` has the same shape.

Analyses: liveness (backward, union), reaching definitions (forward, union), available
expressions (forward, intersection), constant propagation (forward, lattice meet).
Facts are frozensets (or dicts for constants), keyed by block label: ``result.into[b]`` and
``result.out[b]`` in program order (``into`` is before the block even for backward problems).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from course_lib.ir.core import Const, Function, Op, Phi


@dataclass
class Analysis:
    """``transfer(block, fact_in_direction) -> fact``; ``merge(list_of_facts) -> fact``."""

    name: str
    direction: str  # "forward" | "backward"
    init: object  # the fact at the boundary (entry for forward, exits for backward)
    merge: Callable
    transfer: Callable
    top: object = None  # the starting value of interior facts (defaults to init)


@dataclass
class Result:
    into: dict
    out: dict
    iterations: int


def solve(fn: Function, a: Analysis) -> Result:
    """Worklist algorithm. Terminates when the lattice has finite height and transfers are monotone."""
    labels = fn.labels()
    succs, preds = fn.succs(), fn.preds()
    fwd = a.direction == "forward"
    before, after = (preds, succs) if fwd else (succs, preds)
    start = a.top if a.top is not None else a.init
    inp = {b: start for b in labels}  # fact flowing into the transfer function
    outp = {b: start for b in labels}
    work = list(labels if fwd else reversed(labels))
    iters = 0
    while work:
        b = work.pop(0)
        iters += 1
        srcs = before[b]
        inp[b] = a.merge([outp[s] for s in srcs]) if srcs else a.init
        new = a.transfer(fn.block(b), inp[b])
        if new != outp[b]:
            outp[b] = new
            for s in after[b]:
                if s not in work:
                    work.append(s)
    if fwd:
        return Result(inp, outp, iters)
    return Result(outp, inp, iters)  # backward: 'into' is live-in (the transfer's output)


def _union(facts):
    out = frozenset()
    for f in facts:
        out |= f
    return out


def _intersection(facts):
    facts = list(facts)
    out = facts[0]
    for f in facts[1:]:
        out &= f
    return out


# --- liveness -----------------------------------------------------------------------------
def use_def(block) -> tuple[frozenset, frozenset]:
    """(upward-exposed uses, definitions) of a block, phis excluded (their uses live on edges)."""
    uses, defs = set(), set()
    for i in block.all():
        if isinstance(i, Phi):
            defs.add(i.dest)
            continue
        uses |= {u for u in i.uses() if u not in defs}
        defs |= set(i.defs())
    return frozenset(uses), frozenset(defs)


def liveness_transfer(block, live_out: frozenset) -> frozenset:
    """live_in = use ∪ (live_out − def)."""
    use, d = use_def(block)
    return use | (live_out - d)


def liveness(fn: Function) -> Result:
    """Live variables: ``into[b]`` is live-in, ``out[b]`` live-out. A phi's input is live out of
    its predecessor only, and a phi's result is defined at the top of its block (the SSA
    convention LLVM uses too)."""
    edge_uses = {b: frozenset() for b in fn.labels()}
    for b in fn.blocks:
        for p in b.phis():
            for pred, v in p.incoming.items():
                if isinstance(v, str) and pred in edge_uses:
                    edge_uses[pred] |= {v}

    def transfer(block, live_out):
        return liveness_transfer(block, live_out | edge_uses[block.label])

    r = solve(fn, Analysis("liveness", "backward", frozenset(), _union, transfer))
    return Result(r.into, {b: r.out[b] | edge_uses[b] for b in r.out}, r.iterations)


# --- reaching definitions -------------------------------------------------------------------
def reaching_definitions(fn: Function) -> Result:
    """Facts are sets of (variable, block, index) definition sites; parameters are (p, 'param', -1)."""
    sites = {}
    for b in fn.blocks:
        for k, i in enumerate(b.all()):
            for d in i.defs():
                sites.setdefault(d, set()).add((d, b.label, k))

    def transfer(block, fact):
        cur = set(fact)
        for k, i in enumerate(block.all()):
            for d in i.defs():
                cur = {s for s in cur if s[0] != d}
                cur.add((d, block.label, k))
        return frozenset(cur)

    init = frozenset((p, "param", -1) for p, _ in fn.params)
    return solve(fn, Analysis("reaching definitions", "forward", init, _union, transfer, top=frozenset()))


# --- available expressions ------------------------------------------------------------------
def expr_key(i) -> tuple | None:
    """A pure Op's expression as a hashable key (commutative operands sorted), else None."""
    if not isinstance(i, Op) or i.op == "copy":
        return None
    args = tuple(str(a) for a in i.args)
    if i.op in ("add", "mul", "min", "max", "eq", "ne"):
        args = tuple(sorted(args))
    return (i.op, i.type) + args


def available_expressions(fn: Function) -> Result:
    """Expressions computed on every path and not killed (an operand redefined) since."""
    universe = frozenset(k for _, i in fn.instructions() if (k := expr_key(i)) is not None)

    def transfer(block, fact):
        cur = set(fact)
        for i in block.all():
            k = expr_key(i)
            if k is not None:
                cur.add(k)
            for d in i.defs():
                cur = {e for e in cur if d not in e[2:]}
        return frozenset(cur)

    return solve(fn, Analysis("available expressions", "forward", frozenset(), _intersection, transfer, top=universe))


# --- constant propagation ------------------------------------------------------------------
NAC = "NAC"  # not a constant (bottom); a missing key means "undefined yet" (top)


def _meet_consts(facts):
    out: dict = {}
    keys = set().union(*[f.keys() for f in facts]) if facts else set()
    for k in keys:
        vals = {f[k] for f in facts if k in f}
        out[k] = vals.pop() if len(vals) == 1 else NAC
    return out


def constant_propagation(fn: Function) -> Result:
    """Facts map variables to a constant value or NAC (facts are dicts; compared by value)."""
    from course_lib.ir.interp import BINARY, UNARY

    def value(a, env):
        if isinstance(a, Const):
            return a.value
        return env.get(a, NAC)

    def transfer(block, fact):
        env = dict(fact)
        for i in block.instrs:
            if isinstance(i, Op):
                vals = [value(a, env) for a in i.args]
                if NAC in vals or i.op == "len":
                    env[i.dest] = NAC
                else:
                    try:
                        env[i.dest] = UNARY[i.op](*vals) if len(vals) == 1 else BINARY[i.op](*vals)
                    except (ZeroDivisionError, OverflowError, ValueError):
                        env[i.dest] = NAC
            elif isinstance(i, Phi):
                vals = {value(v, env) for v in i.incoming.values()}
                env[i.dest] = vals.pop() if len(vals) == 1 else NAC
            else:
                for d in i.defs():
                    env[d] = NAC
        return env

    init = {p: NAC for p, _ in fn.params}
    return solve(fn, Analysis("constant propagation", "forward", init, _meet_consts, transfer, top={}))
