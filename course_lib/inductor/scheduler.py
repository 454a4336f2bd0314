"""Scheduler: dependencies, fusion, kernel plans, memory planning, bytes and a roofline.

Teaches ``torch/_inductor/scheduler.py`` (``SchedulerNode``, ``FusedSchedulerNode``,
``can_fuse``, ``score_fusion``, ``fuse_nodes``) and ``torch/_inductor/codegen/wrapper.py``'s
buffer reuse (``reuse`` / ``in-place`` lines in the output code).

Position: :class:`GraphIR` -> :class:`Schedule` (a list of :class:`Kernel` steps, each with a
:class:`KernelPlan` the C++ and Triton generators print).

A kernel iterates a *group* ``(outer sizes, inner sizes)``: outer loops run in parallel, inner
loops are the reduction (or the contiguous last dimension of a pointwise kernel). A node fits
a group when its sizes (size-1 dimensions dropped) are ``outer + inner`` ("inner" node, one
value per inner iteration) or ``outer`` ("outer" node, one value per outer iteration, like a
row's max). A pointwise node of a reduction's input shape also fits the reduction's group: its
kept dimensions run on the outer loops, its reduced ones on the inner loops (:func:`permuted_map`:
a batch norm's ``[N, C, H, W]`` nodes join the per-channel ``(C, N*H*W)`` reduction). Inside a kernel a pointwise producer is *inlined* (recomputed) into its
consumers, and a reduction's result is a local accumulator, so neither touches memory unless
another kernel or the graph output needs it. Fusion is legal when the group fits, no path
leaves and re-enters the pair (no cycle), and every read of an in-kernel reduction is at the
reader's own outer index (no thread reads another thread's row).

Simplified against Inductor: no general loop reordering (only :func:`permuted_map`) or tiling, no
``config.max_fusion_size``, exact-size buffer reuse only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from course_lib.inductor.ir import Buffer, GraphIR, Load, Op, compute_dtype, count_ops, loads, walk
from course_lib.inductor.sizevars import (
    body_in_kernel,
    flat_index,
    group_ranges,
    kernel_vars,
    prod,
    store_index,
    subs_index,
    sym,
    unflatten,
)


class Illegal(Exception):
    """A fusion that would be wrong; the message says which rule it breaks."""


@dataclass(frozen=True)
class Acc:
    """The value of a reduction computed earlier in the same kernel (a local accumulator)."""

    buf: str
    dtype: str

    def __str__(self):
        return f"acc({self.buf})"


# ---------------------------------------------------------------------------
# groups and index variables
# ---------------------------------------------------------------------------


def node_group(buf: Buffer):
    """``(outer, inner)`` sizes of a node, size-1 dimensions dropped."""
    sizes = tuple(s for s in buf.shape if s != 1)
    if buf.kind == "reduction":
        return sizes, tuple(s for s in buf.reduction_ranges if s != 1)
    return (sizes[:-1], sizes[-1:]) if sizes else ((), ())


def fits(buf: Buffer, group, kept: tuple | None = None) -> str | None:
    """How ``buf`` sits in a kernel of ``group``: "inner", "outer" or None (it does not fit).

    ``kept``: the shape of the kernel's reduction (reduced dimensions kept as 1), when it has
    one; then a pointwise node of the reduction's input shape fits as "inner" too, its
    dimensions taken out of order (:func:`permuted_map`).
    """
    outer, inner = group
    if buf.kind == "reduction":
        return "inner" if node_group(buf) == group else None
    sizes = tuple(s for s in buf.shape if s != 1)
    if sizes == outer + inner:
        return "inner"
    if sizes == outer:
        return "outer"
    if kept is not None and permuted_map(buf, group, kept) is not None:
        return "inner"
    return None


def kept_shape(bufs: list[Buffer]) -> tuple | None:
    """The shape of the reduction among ``bufs`` (None without one)."""
    return next((tuple(b.shape) for b in bufs if b.kind == "reduction"), None)


def permuted_map(buf: Buffer, group, kept: tuple) -> dict | None:
    """Loop symbols for a pointwise node of a reduction's input shape, or None.

    A per-channel reduction of an NCHW tensor has shape ``[1, C, 1, 1]`` and group
    ``(C, N*H*W)``: the outer loop is dimension 1, the inner loops dimensions 0, 2, 3. A
    pointwise node of shape ``[N, C, H, W]`` then runs in the same loops, its dimension 1 on
    ``x0`` and 0, 2, 3 on ``r0, r1, r2``, as the reduction reads its input (the rank must be
    the reduction's, the kept dimensions equal).
    """
    shape = tuple(buf.shape)
    if len(shape) != len(kept) or any(k != 1 and k != s for k, s in zip(kept, shape, strict=True)):
        return None
    outer = [d for d, s in enumerate(shape) if s != 1 and kept[d] != 1]
    inner = [d for d, s in enumerate(shape) if s != 1 and kept[d] == 1]
    if (tuple(shape[d] for d in outer), tuple(shape[d] for d in inner)) != tuple(group):
        return None
    xs, rs = kernel_vars(group)
    mine = buf.index_vars()
    mapping = {v: sympy.Integer(0) for v, s in zip(mine, shape, strict=True) if s == 1}
    mapping.update({mine[d]: x for d, x in zip(outer, xs, strict=True)})
    mapping.update({mine[d]: r for d, r in zip(inner, rs, strict=True)})
    return mapping


def _in_kernel(buf: Buffer, group, kept: tuple | None):
    """``(store index, body)`` of a node in the kernel's loop symbols."""
    if kept is None or buf.kind == "reduction" or fits(buf, group) is not None:
        return store_index(buf, group), body_in_kernel(buf, group)
    mapping = permuted_map(buf, group, kept)
    tmp = {k: sym(f"_t_{k}") for k in mapping}  # renamed through temporaries, as body_in_kernel
    body = subs_index(subs_index(buf.body, tmp), {tmp[k]: v for k, v in mapping.items()}, group_ranges(group))
    return sympy.expand(flat_index(buf.index_vars(), buf.stride).xreplace(mapping)), body


def merged_group(bufs: list[Buffer], hint=int):
    """The group of a kernel holding ``bufs``, or None when they do not share one."""
    reds = {node_group(b) for b in bufs if b.kind == "reduction"}
    if len(reds) > 1 or not bufs:
        return None
    if reds:
        group = reds.pop()
    else:
        group = node_group(max(bufs, key=lambda b: hint(b.numel)))
    kept = kept_shape(bufs)
    return group if all(fits(b, group, kept) for b in bufs) else None


def kernel_group(bufs: list[Buffer], needed: set[str], hint=int) -> tuple[tuple | None, frozenset]:
    """The group of a kernel holding ``bufs``, and the members it only *inlines*.

    When the members share no group, a pointwise member that nothing outside the kernel reads (not
    in ``needed``) need not have a place in the loops: it is never stored, only recomputed where
    its readers read it (:func:`expand`), as Inductor's lowering inlines an unrealized pointwise
    node into its users. So a linear layer's bias add, ``[B*T, C]``, joins the ``[B, T, C]`` layer
    norm or the ``[B, H, T, D]`` head split that reads it. ``(None, frozenset())`` where even the
    other members share no group."""
    group = merged_group(bufs, hint)
    if group is not None:
        return group, frozenset()
    loose = {b.name for b in bufs if b.kind == "pointwise" and b.name not in needed}
    group = merged_group([b for b in bufs if b.name not in loose], hint)
    if group is None:
        return None, frozenset()
    kept = kept_shape(bufs)
    return group, frozenset(b.name for b in bufs if b.name in loose and not fits(b, group, kept))


# ---------------------------------------------------------------------------
# inlining: one node's element, in kernel loop symbols, with in-kernel producers expanded
# ---------------------------------------------------------------------------


def expand(expr, members: dict, group, memo: dict, kept: tuple | None = None, inline: frozenset = frozenset()):
    """Replace loads of in-kernel buffers: pointwise producers by their (recomputed) body,
    reductions by :class:`Acc` (legal only at the reader's own outer index). ``inline``: members
    with no place in the loops (:func:`kernel_group`), always recomputed at the index read."""
    if isinstance(expr, Op):
        return Op(expr.op, tuple(expand(a, members, group, memo, kept, inline) for a in expr.args), expr.dtype)
    if not isinstance(expr, Load):
        return expr
    ind = tuple((s, expand(e, members, group, memo, kept, inline)) for s, e in expr.indirect)
    if expr.buf not in members:
        return Load(expr.buf, expr.index, expr.dtype, ind)
    key = (expr.buf, expr.index, ind)
    if key in memo:
        return memo[key]
    producer = members[expr.buf]
    natural, body = (None, None) if expr.buf in inline else _in_kernel(producer, group, kept)
    if producer.kind == "reduction":
        if ind or sympy.expand(expr.index - natural) != 0:
            raise Illegal(f"{expr.buf} (a reduction) is read at {expr.index}, not at its own row {natural}")
        out = Acc(producer.name, compute_dtype(producer.dtype))
        if out.dtype != expr.dtype:  # a half result read as stored: rounded, as its store rounds it
            out = Op("to_dtype", (out,), expr.dtype)
    elif natural is not None and not ind and sympy.expand(expr.index - natural) == 0:
        out = expand(body, members, group, memo, kept, inline)
    else:
        if ind:
            raise Illegal(f"{expr.buf} is read through an indirect index")
        idx = unflatten(expr.index, producer.shape, producer.stride, group_ranges(group))
        if idx is None:
            raise Illegal(f"{expr.buf} is read at {expr.index}, which its layout {producer.stride} cannot undo")
        body = subs_index(producer.body, {v: sym(f"_u{d}") for d, v in enumerate(producer.index_vars())})
        body = subs_index(body, {sym(f"_u{d}"): e for d, e in enumerate(idx)}, group_ranges(group))
        out = expand(body, members, group, memo, kept, inline)
    memo[key] = out
    return out


def acc_refs(expr) -> set:
    """The accumulators (earlier reductions of the kernel) ``expr`` reads."""
    return {e.buf for e in walk(expr) if isinstance(e, Acc)}


# ---------------------------------------------------------------------------
# kernels and their plans
# ---------------------------------------------------------------------------


@dataclass
class Phase:
    """One pass over the inner loops: reductions that accumulate and inner values stored."""

    reductions: list = field(default_factory=list)  # (buf name, reduction_type, expr, dtype)
    stores: list = field(default_factory=list)  # (buf name, index, expr, dtype)


@dataclass
class KernelPlan:
    group: tuple
    phases: list
    outer_stores: list  # (buf name, index, expr, dtype): after all phases, once per outer index
    reads: list  # buffers read from memory
    writes: list  # buffers written to memory
    flops: int = 0


@dataclass
class Kernel:
    """One step of the schedule: a generated kernel (``nodes`` fused) or an extern/alias call."""

    name: str
    kind: str  # "kernel" | "extern" | "alias"
    nodes: list  # buffer names, in graph order
    plan: KernelPlan | None = None


def plan_kernel(graph: GraphIR, names: list[str], needed: set[str]) -> KernelPlan:
    """Build the loop plan of a fused kernel; raises :class:`Illegal` when it cannot exist.

    ``needed``: buffers of this kernel that must be written to memory (read by another step
    or returned from the graph).
    """
    every = sorted((graph.buffer(n) for n in names), key=lambda b: graph.position(b.name))
    group, inline = kernel_group(every, needed, graph.sizevars.hint)
    if group is None:
        raise Illegal(
            "the nodes do not share an iteration space: " + ", ".join(f"{b.name}{list(b.shape)}" for b in every)
        )
    members = {b.name: b for b in every}
    memo: dict = {}
    kept = kept_shape(every)
    bufs = [b for b in every if b.name not in inline]  # the rest is recomputed where it is read
    exprs = {b.name: expand(_in_kernel(b, group, kept)[1], members, group, memo, kept, inline) for b in bufs}
    level: dict[str, int] = {}
    for b in bufs:  # graph order is a topological order
        deps = [level[a] for a in acc_refs(exprs[b.name])]
        level[b.name] = 1 + max(deps, default=0) if b.kind == "reduction" else max(deps, default=0) + 1
    n_phases = max([level[b.name] for b in bufs if b.kind == "reduction"] + [0])
    phases = [Phase() for _ in range(max(n_phases, 1))]
    outer_stores, writes = [], []
    for b in bufs:
        if b.kind == "reduction":
            acc = Acc(b.name, compute_dtype(b.dtype))  # a half-precision result accumulates in float32
            phases[level[b.name] - 1].reductions.append((b.name, b.reduction_type, exprs[b.name], acc.dtype))
            if b.name in needed:
                value = acc if acc.dtype == b.dtype else Op("to_dtype", (acc,), b.dtype)
                outer_stores.append((b.name, _in_kernel(b, group, kept)[0], value, b.dtype))
                writes.append(b.name)
        elif b.name in needed:
            entry = (b.name, _in_kernel(b, group, kept)[0], exprs[b.name], b.dtype)
            if fits(b, group, kept) == "outer" and group[1]:
                outer_stores.append(entry)
            else:
                p = level[b.name] - 1
                if p >= len(phases):
                    phases.append(Phase())
                phases[min(p, len(phases) - 1)].stores.append(entry)
            writes.append(b.name)
    reads = list(dict.fromkeys(ld.buf for e in exprs.values() for ld in loads(e)))
    iters = graph.sizevars.hint(prod(group[0] + group[1]))
    flops = sum(count_ops(e) for e in exprs.values()) * iters
    return KernelPlan(group, phases, outer_stores, reads, writes, flops)


# ---------------------------------------------------------------------------
# fusion: legality, score, ladder
# ---------------------------------------------------------------------------


@dataclass
class Schedule:
    graph: GraphIR
    kernels: list
    strategy: str
    plan: dict = field(default_factory=dict)  # memory plan: buffer -> ("alloc"|"reuse"|"inplace", other)
    frees: dict = field(default_factory=dict)  # step index -> buffers whose last use it is

    def __str__(self):
        lines = [f"# strategy: {self.strategy}, {sum(k.kind == 'kernel' for k in self.kernels)} kernels"]
        for k in self.kernels:
            if k.kind == "kernel":
                st = kernel_stats(self.graph, k)
                lines.append(
                    f"{k.name}: fused {'+'.join(k.nodes)}  group={_gstr(k.plan.group)}  "
                    f"reads={k.plan.reads} writes={k.plan.writes}  bytes={st['bytes']}"
                )
            else:
                lines.append(f"{k.name}: {k.kind} {k.nodes[0]}")
        return "\n".join(lines)


def _gstr(group):
    return f"({'x'.join(map(str, group[0])) or '1'}, {'x'.join(map(str, group[1])) or '1'})"


def consumers(graph: GraphIR) -> dict[str, set[str]]:
    users: dict[str, set[str]] = {b.name: set() for b in graph.buffers}
    for b in graph.buffers:
        for r in b.reads():
            users.setdefault(r, set()).add(b.name)
    return users


def output_buffers(graph: GraphIR) -> set[str]:
    return {o[1] for o in graph.outputs if o[0] == "buf"}


def needed_outside(names: list[str], users: dict, outs: set[str]) -> set[str]:
    """The buffers among a kernel's ``names`` it must write to memory: returned from the graph or read
    by a node outside the kernel (``users``: :func:`consumers`; ``outs``: :func:`output_buffers`)."""
    inside = set(names)
    return {n for n in names if n in outs or users.get(n, set()) - inside}


def build(graph: GraphIR, groups: list[list[str]], strategy: str) -> Schedule:
    """Turn a partition of the computed buffers into a Schedule (kernel plans included)."""
    owner = {n: gi for gi, g in enumerate(groups) for n in g}
    outs = output_buffers(graph)
    users = consumers(graph)
    kernels = []
    counter = 0
    order = sorted(range(len(groups)), key=lambda gi: min(graph.position(n) for n in groups[gi]))
    for gi in _topo(graph, groups, owner, order):
        names = sorted(groups[gi], key=graph.position)
        first = graph.buffer(names[0])
        if first.kind in ("extern", "alias"):
            kernels.append(
                Kernel(f"extern{counter}" if first.kind == "extern" else f"alias{counter}", first.kind, names)
            )
        else:
            needed = needed_outside(names, users, outs)
            kernels.append(Kernel(f"kernel{counter}", "kernel", names, plan_kernel(graph, names, needed)))
        counter += 1
    sched = Schedule(graph, kernels, strategy)
    plan_memory(sched)
    return sched


def _topo(graph, groups, owner, order):
    deps = {gi: set() for gi in range(len(groups))}
    for gi, g in enumerate(groups):
        for n in g:
            for r in graph.buffer(n).reads():
                if r in owner and owner[r] != gi:
                    deps[gi].add(owner[r])
    done, out = set(), []
    pending = list(order)
    while pending:
        for gi in pending:
            if deps[gi] <= done:
                out.append(gi)
                done.add(gi)
                pending.remove(gi)
                break
        else:
            raise Illegal("fusion created a cycle between kernels")
    return out


def computed(graph: GraphIR) -> list[Buffer]:
    return [b for b in graph.buffers if b.kind != "input"]


def unfused(graph: GraphIR) -> Schedule:
    """Rung 0: one kernel per buffer (every intermediate goes through memory)."""
    return build(graph, [[b.name] for b in computed(graph)], "unfused")


def _reachable(graph, groups, owner, src, dst, users: dict | None = None) -> bool:
    """Is there a path src -> ... -> dst through some third group? (fusing would make a cycle)."""
    users = consumers(graph) if users is None else users
    stack = list(groups[src])
    inside = set(groups[src])
    seen = set()
    while stack:
        n = stack.pop()
        for u in users.get(n, ()):
            g = owner.get(u)
            if g is None or g in seen:
                continue
            if g == dst:
                if n not in inside:
                    return True
                continue
            if g == src:
                continue
            seen.add(g)
            stack.extend(groups[g])
    return False


def can_fuse(graph, groups, owner, a, b, users: dict | None = None, apart=frozenset()) -> tuple[bool, str]:
    """Inductor's ``can_fuse``: the rules, in the order they are checked, with the reason.

    ``users`` (:func:`consumers`, computed once by :func:`fuse`) saves walking the graph per pair.
    ``apart``: nodes that stay in kernels of their own (a compiler rejected a kernel they were fused in).
    """
    names = groups[a] + groups[b]
    kinds = {graph.buffer(n).kind for n in names}
    if kinds & {"extern", "alias"}:
        return False, "extern calls are not fused"
    if apart.intersection(names):
        return False, "kept apart: the compiler rejected a kernel this node was fused into"
    users = consumers(graph) if users is None else users
    needed = needed_outside(names, users, output_buffers(graph))
    if kernel_group([graph.buffer(n) for n in names], needed, graph.sizevars.hint)[0] is None:
        return False, "iteration spaces differ"
    if _reachable(graph, groups, owner, a, b, users) or _reachable(graph, groups, owner, b, a, users):
        return False, "a path through another kernel would make a cycle"
    try:
        plan_kernel(graph, names, needed)
    except Illegal as exc:
        return False, str(exc)
    return True, "ok"


def score_fusion(graph, groups, a, b, reads: dict | None = None) -> int:
    """Bytes of memory traffic the fusion can save: buffers one writes and the other reads,
    plus inputs both read (Inductor's ``score_fusion_memory``). ``reads``: group -> the
    buffers it reads, when the caller has them already."""
    ra = (reads[a] if reads else {r for n in groups[a] for r in graph.buffer(n).reads()}) | set(groups[a])
    rb = (reads[b] if reads else {r for n in groups[b] for r in graph.buffer(n).reads()}) | set(groups[b])
    return sum(graph.nbytes(n) for n in ra & rb)


def _candidates(groups, owner, reads: dict, vertical_only: bool) -> list[tuple]:
    """Pairs worth trying: producer -> consumer, and siblings that read a common buffer.

    Siblings are found through an index buffer -> groups reading it, not by trying every pair
    of groups: the pairs are the same, the cost grows with the reads instead of the square of
    the number of groups (MobileNetV2's backward graph has about 700 nodes).
    """
    cands = []
    readers: dict[str, list[int]] = {}
    for gi in range(len(groups)):
        for r in reads[gi]:
            if r in owner and owner[r] != gi:
                cands.append((owner[r], gi, "vertical"))
            readers.setdefault(r, []).append(gi)
    if vertical_only:
        return cands
    pairs = {(gi, gj) for gs in readers.values() for i, gi in enumerate(gs) for gj in gs[i + 1 :]}
    for gi, gj in pairs:  # gi < gj: readers lists are built in group order
        if not any(owner.get(r) == gi for r in reads[gj]) and not any(owner.get(r) == gj for r in reads[gi]):
            cands.append((gi, gj, "sibling"))
    return cands


def fuse(graph: GraphIR, vertical_only: bool = False, max_rounds: int = 10, log: list | None = None,
         apart=frozenset()) -> Schedule:  # fmt: skip
    """Greedy fusion (``Scheduler.fuse_nodes``): repeatedly take the best-scoring legal pair.

    ``vertical_only``: consider only producer-consumer pairs (rung 1 of the ladder); otherwise
    siblings that share an input are candidates too (rung 2). ``apart``: nodes never fused.
    """
    groups = [[b.name] for b in computed(graph)]
    node_reads = {b.name: set(b.reads()) for b in graph.buffers}  # walked once, not once per pair
    users = consumers(graph)
    for _ in range(max_rounds):
        owner = {n: gi for gi, g in enumerate(groups) for n in g}
        reads = {gi: set().union(*(node_reads[n] for n in g)) for gi, g in enumerate(groups)}
        cands = _candidates(groups, owner, reads, vertical_only)
        cands = sorted(set(cands), key=lambda c: (-score_fusion(graph, groups, c[0], c[1], reads), c[0], c[1]))
        merged = False
        for a, b, why in cands:
            if not groups[a] or not groups[b]:
                continue
            ok, reason = can_fuse(graph, groups, owner, a, b, users, apart)
            if log is not None:
                log.append((why, "+".join(groups[a]), "+".join(groups[b]), ok, reason))
            if ok:
                groups[a] = groups[a] + groups[b]
                for n in groups[b]:
                    owner[n] = a
                groups[b] = []
                merged = True
        groups = [g for g in groups if g]
        if not merged:
            break
    return build(graph, groups, "vertical" if vertical_only else "greedy")


def ladder(graph: GraphIR) -> dict[str, Schedule]:
    """The three rungs: unfused, vertical, greedy (each is checked against unfused in tests)."""
    return {"unfused": unfused(graph), "vertical": fuse(graph, vertical_only=True), "greedy": fuse(graph)}


# ---------------------------------------------------------------------------
# memory planning, bytes, roofline
# ---------------------------------------------------------------------------


def plan_memory(sched: Schedule) -> None:
    """Decide, per written buffer, ``alloc`` / ``reuse`` of a dead buffer of the same size and
    dtype / ``inplace`` over an input that dies in this pointwise kernel; and where to free.

    Graph inputs, extern results and outputs are never recycled (their storage is not ours).
    An extern whose result may be a view of an argument (``split``, ``unbind``: the schema says
    ``Tensor(a)``) keeps that argument's storage alive as long as the view lives, and never
    recycled if the view is returned.
    """
    graph = sched.graph
    outs = output_buffers(graph)
    last_use = {}
    for step, k in enumerate(sched.kernels):
        for r in k.plan.reads if k.plan else graph.buffer(k.nodes[0]).reads():
            last_use[r] = step
    defined = {n: step for step, k in enumerate(sched.kernels) for n in k.nodes}
    recyclable = {b.name for b in graph.buffers if b.kind in ("pointwise", "reduction")} - outs
    for name, bases in viewed_storage(graph).items():
        end = last_use.get(name, defined.get(name, -1))  # a view read by nobody lives to its own step
        for base in bases:
            last_use[base] = max(last_use.get(base, -1), end)
            if name in outs:
                recyclable.discard(base)
    pool: list[str] = []
    for step, k in enumerate(sched.kernels):
        dying = [r for r in (k.plan.reads if k.plan else []) if last_use.get(r) == step and r in recyclable]
        for w in k.plan.writes if k.plan else []:
            wb = graph.buffer(w)
            inplace = _inplace_candidate(graph, k, w, dying)
            if inplace:
                sched.plan[w] = ("inplace", inplace)
                dying.remove(inplace)
                continue
            match = next((p for p in pool if _same_layout(graph.buffer(p), wb)), None)
            if match:
                pool.remove(match)
                sched.plan[w] = ("reuse", match)
            else:
                sched.plan[w] = ("alloc", None)
        freed = sorted(r for r, s in last_use.items() if s == step and r in recyclable)
        sched.frees[step] = freed
        taken = {v[1] for v in sched.plan.values() if v[0] == "inplace"}
        pool.extend(f for f in freed if f not in taken)


def viewed_storage(graph: GraphIR) -> dict[str, set[str]]:
    """Buffer -> the buffers whose storage it may view: the arguments of an extern whose schema
    returns an alias of them (``split.Tensor(Tensor(a -> *) self, ...) -> Tensor(a)[]``), through
    chains of such externs and the items taken from them. Buffers that view nothing are left out."""
    from course_lib.inductor.codegen.wrapper import extern_aliased_inputs

    views: dict[str, set[str]] = {}
    for b in graph.buffers:
        if b.kind == "alias":
            bases = [b.extern["base"]]
        elif b.kind == "extern":
            bases = extern_aliased_inputs(b.extern)
        else:
            continue
        if bases:
            views[b.name] = set().union(*({x} | views.get(x, set()) for x in bases))
    return views


def _same_layout(a: Buffer, b: Buffer) -> bool:
    """May ``b`` take over ``a``'s tensor? Same shape, dtype and strides: the wrapper hands the
    tensor object itself on, so an NCHW tensor must not carry a channels-last buffer's data."""
    return a.shape == b.shape and a.dtype == b.dtype and tuple(a.stride) == tuple(b.stride)


def _inplace_candidate(graph, k: Kernel, w: str, dying: list[str]) -> str | None:
    plan = k.plan
    if len(plan.phases) != 1 or plan.phases[0].reductions or plan.outer_stores:
        return None
    wb = graph.buffer(w)
    idx = {n: (i, e) for n, i, e, _ in plan.phases[0].stores}
    if w not in idx:
        return None
    index = idx[w][0]
    for cand in dying:
        cb = graph.buffer(cand)
        if not _same_layout(cb, wb):
            continue
        stores = plan.phases[0].stores
        every = [ld for _, _, e, _ in stores for ld in loads(e) if ld.buf == cand]
        # stores run in order: one emitted after w's must not read cand, whose element w overwrote
        position = [name for name, *_ in stores].index(w)
        read_later = any(ld.buf == cand for _, _, e, _ in stores[position + 1 :] for ld in loads(e))
        if every and not read_later and all(not ld.indirect and sympy.expand(ld.index - index) == 0 for ld in every):
            return cand
    return None


def kernel_stats(graph: GraphIR, k: Kernel, bandwidth: float = 20e9, peak_flops: float = 100e9) -> dict:
    """Bytes read and written by one kernel and a roofline time estimate (seconds)."""
    if k.plan is None:
        return {"bytes_read": 0, "bytes_written": 0, "bytes": 0, "flops": 0, "roofline_s": 0.0}
    br = sum(graph.nbytes(r) for r in k.plan.reads)
    bw = sum(graph.nbytes(w) for w in k.plan.writes)
    t = max((br + bw) / bandwidth, k.plan.flops / peak_flops)
    return {"bytes_read": br, "bytes_written": bw, "bytes": br + bw, "flops": k.plan.flops, "roofline_s": t}


def schedule_stats(sched: Schedule, bandwidth: float = 20e9, peak_flops: float = 100e9) -> dict:
    ks = [kernel_stats(sched.graph, k, bandwidth, peak_flops) for k in sched.kernels if k.kind == "kernel"]
    return {"kernels": len(ks), "bytes": sum(s["bytes"] for s in ks), "roofline_s": sum(s["roofline_s"] for s in ks)}
