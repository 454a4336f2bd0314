"""CFG analyses: reverse postorder, dominators, dominator tree, dominance frontiers, natural loops.

Teaches what LLVM computes in ``llvm/include/llvm/Support/GenericDomTreeConstruction.h``
(LLVM uses Semi-NCA; we use the simpler iterative algorithm) and ``LoopInfo``.

References: Cooper, Harvey, Kennedy, "A Simple, Fast Dominance Algorithm" (2001), whose
``intersect`` walks two fingers up the tree by postorder number; Cytron et al. (1991) for
dominance frontiers. Only blocks reachable from the entry are analysed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from course_lib.ir.core import Function


def reverse_postorder(fn: Function) -> list[str]:
    """Blocks in reverse postorder of a depth-first walk from the entry (successor order)."""
    succs = fn.succs()
    seen, post = set(), []

    def walk(b):
        seen.add(b)
        for s in succs[b]:
            if s not in seen:
                walk(s)
        post.append(b)

    walk(fn.entry)
    return post[::-1]


def idoms(fn: Function) -> dict[str, str | None]:
    """Immediate dominator of every reachable block (entry -> None). Cooper-Harvey-Kennedy.

    Iterate in reverse postorder: idom(b) = intersect of the processed predecessors' idoms,
    until nothing changes. O(N^2) worst case, nearly linear in practice.
    """
    rpo = reverse_postorder(fn)
    order = {b: k for k, b in enumerate(rpo)}
    preds = fn.preds()
    idom: dict[str, str | None] = {fn.entry: fn.entry}

    def intersect(a, b):
        while a != b:
            while order[a] > order[b]:
                a = idom[a]
            while order[b] > order[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            done = [p for p in preds[b] if p in idom]
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    idom[fn.entry] = None
    return {b: idom[b] for b in rpo}


def dominators(fn: Function) -> dict[str, set[str]]:
    """The set of blocks dominating each block (itself included)."""
    idom = idoms(fn)
    out = {}
    for b in idom:
        s, x = set(), b
        while x is not None:
            s.add(x)
            x = idom[x]
        out[b] = s
    return out


def dom_tree(fn: Function) -> dict[str, list[str]]:
    """Children of each block in the dominator tree (in reverse postorder)."""
    idom = idoms(fn)
    kids = {b: [] for b in idom}
    for b, d in idom.items():
        if d is not None:
            kids[d].append(b)
    return kids


def dominance_frontiers(fn: Function) -> dict[str, set[str]]:
    """DF(b): blocks where b's dominance stops. For each join j, walk up from each pred to idom(j)."""
    idom = idoms(fn)
    preds = fn.preds()
    df = {b: set() for b in idom}
    for j in idom:
        ps = [p for p in preds[j] if p in idom]
        if len(ps) < 2:
            continue
        for p in ps:
            runner = p
            while runner != idom[j]:
                df[runner].add(j)
                runner = idom[runner]
    return df


def iterated_df(df: dict[str, set[str]], blocks) -> set[str]:
    """DF+(S): the fixpoint of DF over a set of blocks (where phis go)."""
    result, work = set(), list(blocks)
    while work:
        b = work.pop()
        for d in df.get(b, ()):
            if d not in result:
                result.add(d)
                work.append(d)
    return result


@dataclass
class Loop:
    """A natural loop: header, body blocks (header included), back-edge sources, parent, depth."""

    header: str
    body: set = field(default_factory=set)
    latches: list = field(default_factory=list)
    parent: str | None = None
    depth: int = 1

    def __str__(self):
        return f"loop {self.header} depth {self.depth} body {sorted(self.body)}"


def natural_loops(fn: Function) -> dict[str, Loop]:
    """Loops keyed by header. A back edge t->h has h dominating t; the body is what reaches t
    without passing h. Loops sharing a header merge (as LLVM's LoopInfo does); nesting by
    body inclusion."""
    dom = dominators(fn)
    preds = fn.preds()
    loops: dict[str, Loop] = {}
    for t in reverse_postorder(fn):
        for h in fn.block(t).succs():
            if h in dom[t]:
                loop = loops.setdefault(h, Loop(h, {h}))
                loop.latches.append(t)
                work = [t]
                while work:
                    x = work.pop()
                    if x not in loop.body:
                        loop.body.add(x)
                        work.extend(p for p in preds[x] if p in dom)
    for h, loop in loops.items():
        enclosing = [o for o in loops.values() if o.header != h and h in o.body and loop.body <= o.body]
        if enclosing:
            loop.parent = min(enclosing, key=lambda o: len(o.body)).header
    for loop in loops.values():
        d, p = 1, loop.parent
        while p is not None:
            d, p = d + 1, loops[p].parent
        loop.depth = d
    return loops


def dom_tree_dot(fn: Function) -> str:
    """DOT source of the dominator tree."""
    lines = ["digraph domtree {", '  node [shape=box, fontname="monospace"];']
    for b, kids in dom_tree(fn).items():
        lines.append(f'  "{b}";')
        for k in kids:
            lines.append(f'  "{b}" -> "{k}";')
    lines.append("}")
    return "\n".join(lines)


def cfg_dot(fn: Function, annotate: dict[str, str] | None = None) -> str:
    """DOT source of the CFG with each block's code (``annotate`` adds a line per block)."""

    def esc(s):
        return (
            s.replace("\\", "\\\\")
            .replace('"', '\\"')
            .replace("{", "\\{")
            .replace("}", "\\}")
            .replace("<", "\\<")
            .replace(">", "\\>")
            .replace("|", "\\|")
        )

    lines = ["digraph cfg {", '  node [shape=record, fontname="monospace", fontsize=10];']
    for b in fn.blocks:
        body = "\\l".join(esc(str(i)) for i in b.all()) + "\\l"
        extra = f"|{esc(annotate[b.label])}\\l" if annotate and b.label in annotate else ""
        lines.append(f'  "{b.label}" [label="{{{esc(b.label)}:|{body}{extra}}}"];')
    for b in fn.blocks:
        t = b.succs()
        for k, s in enumerate(t):
            lab = "" if len(t) == 1 else (' [label="T"]' if k == 0 else ' [label="F"]')
            lines.append(f'  "{b.label}" -> "{s}"{lab};')
    lines.append("}")
    return "\n".join(lines)
