"""SSA construction and destruction: ``to_ssa``, ``from_ssa``, ``is_ssa``.

Teaches what LLVM's ``mem2reg`` (``llvm/lib/Transforms/Utils/PromoteMemoryToRegister.cpp``)
does, and why an FX graph is already SSA (every Node is defined once). Construction follows
Cytron et al. (1991): phis at the iterated dominance frontier of each variable's definition
blocks (pruned by liveness: only where the variable is live-in), then renaming in a preorder
walk of the dominator tree with a stack of current names per variable.

Names: the first definition of ``v`` keeps the name ``v`` (a parameter is that first
definition), later ones are ``v.1``, ``v.2``, ... . A path on which a variable has no
definition reads the constant 0 of its type (LLVM would write ``undef``).

Destruction (Sreedhar et al. 1999, "method I"): each phi ``x = phi [a, p], ...`` gets its own
fresh variable ``x.phi``; every predecessor ``p`` ends with ``x.phi = copy a`` and the phi
becomes ``x = copy x.phi``. Because the predecessor copies write only fresh names, no value
live on another edge is overwritten (the lost-copy problem) and phis that permute values read
all old values first (the swap problem). Copy propagation and coalescing remove most copies.
"""

from __future__ import annotations

from course_lib.ir.cfg import dom_tree, dominance_frontiers, idoms, iterated_df
from course_lib.ir.core import FLOAT, Const, Function, Op, Phi, remove_unreachable
from course_lib.ir.dataflow import liveness


def _undef(t: str) -> Const:
    return Const(0.0) if t == FLOAT else Const(0)


def def_blocks(fn: Function) -> dict[str, set[str]]:
    """Variable -> blocks defining it (the entry defines the parameters)."""
    out = {p: {fn.entry} for p, _ in fn.params}
    for label, i in fn.instructions():
        for d in i.defs():
            out.setdefault(d, set()).add(label)
    return out


def phi_placement(fn: Function) -> dict[str, set[str]]:
    """Block -> variables needing a phi there: DF+(defs(v)), pruned to where v is live-in."""
    df = dominance_frontiers(fn)
    live_in = liveness(fn).into
    need: dict[str, set[str]] = {b: set() for b in fn.labels()}
    for v, blocks in sorted(def_blocks(fn).items()):
        for b in iterated_df(df, blocks):
            if v in live_in[b]:
                need[b].add(v)
    return need


def insert_phis(fn: Function) -> Function:
    """A copy of ``fn`` with empty-named phis (``v = phi [v, p], ...``) placed; not yet renamed."""
    new = remove_unreachable(fn.copy())
    types = new.var_types()
    preds = new.preds()
    for label, vs in phi_placement(new).items():
        b = new.block(label)
        b.instrs[:0] = [Phi(v, types[v], {p: v for p in preds[label]}) for v in sorted(vs)]
    return new


def rename(fn: Function) -> Function:
    """Renames in place (the function must already have its phis): each definition gets a new name."""
    types = fn.var_types()
    stacks: dict[str, list[str]] = {v: [] for v in types}
    counter: dict[str, int] = {v: 0 for v in types}
    orig: dict[int, str] = {}  # id(phi) -> variable it merges
    for b in fn.blocks:
        for p in b.phis():
            orig[id(p)] = p.dest

    def fresh(v):
        n = counter[v]
        counter[v] += 1
        name = v if n == 0 else f"{v}.{n}"
        stacks[v].append(name)
        return name

    def current(x):
        if isinstance(x, Const):
            return x
        s = stacks.get(x)
        return s[-1] if s else _undef(types.get(x, "int"))

    for p, _ in fn.params:
        fresh(p)
    kids = dom_tree(fn)

    def walk(label):
        b = fn.block(label)
        pushed = []
        for i in b.instrs:
            if isinstance(i, Phi):
                v = orig[id(i)]
            else:
                i.replace_uses(current)
                v = i.dest
            if v is not None:
                i.dest = fresh(v)
                pushed.append(v)
        b.term.replace_uses(current)
        for s in b.succs():
            for p in fn.block(s).phis():
                p.incoming[label] = current(orig[id(p)])
        for k in kids[label]:
            walk(k)
        for v in pushed:
            stacks[v].pop()

    walk(fn.entry)
    return fn


def to_ssa(fn: Function) -> Function:
    """A new function in SSA form (the input is not changed). Already-SSA input is fine too."""
    if any(b.phis() for b in fn.blocks):
        return remove_unreachable(fn.copy())
    return rename(insert_phis(fn))


def from_ssa(fn: Function) -> Function:
    """A new phi-free function computing the same thing (copies on the incoming edges)."""
    new = fn.copy()
    for b in new.blocks:
        phis = b.phis()
        if not phis:
            continue
        heads = []
        for p in phis:
            tmp = f"{p.dest}.phi"
            for pred, v in p.incoming.items():
                pb = new.block(pred)
                pb.instrs.append(Op(tmp, p.type, "copy", [v]))
            heads.append(Op(p.dest, p.type, "copy", [tmp]))
        b.instrs = heads + [i for i in b.instrs if not isinstance(i, Phi)]
    return new


def ssa_violations(fn: Function) -> list[str]:
    """Why ``fn`` is not SSA: a second definition, or a use its definition does not dominate."""
    problems = []
    where: dict[str, tuple[str, int]] = {p: (fn.entry, -1) for p, _ in fn.params}
    for b in fn.blocks:
        for k, i in enumerate(b.all()):
            for d in i.defs():
                if d in where:
                    problems.append(f"{d} defined twice ({where[d][0]} and {b.label})")
                where[d] = (b.label, k)
    idom = idoms(fn)

    def dominates(a, b):
        while b is not None:
            if a == b:
                return True
            b = idom.get(b)
        return False

    for b in fn.blocks:
        if b.label not in idom:
            continue
        for k, i in enumerate(b.all()):
            if isinstance(i, Phi):
                for pred, v in i.incoming.items():
                    if isinstance(v, str) and (v not in where or not dominates(where[v][0], pred)):
                        problems.append(f"{i.dest}: phi input {v} from {pred} is not defined on that edge")
                continue
            for u in i.uses():
                if u not in where:
                    problems.append(f"{u} used in {b.label} but never defined")
                    continue
                db, dk = where[u]
                if not (dominates(db, b.label) and (db != b.label or dk < k)):
                    problems.append(f"{u} used in {b.label} is not dominated by its definition in {db}")
    return problems


def is_ssa(fn: Function) -> bool:
    """Single definition of every variable, and every use dominated by its definition."""
    return not ssa_violations(fn)
