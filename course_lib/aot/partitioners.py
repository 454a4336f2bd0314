"""Partitioners: split a joint graph into forward and backward (teaches torch/_functorch/partitioners.py).

Position: joint graph --> **partition** --> forward graph ``primals -> (outputs, saved)`` and
backward graph ``(saved, tangents) -> grads``.

The question a partitioner answers: which forward values does the backward read, and should it
*save* them (memory between forward and backward) or *recompute* them from fewer saved values
(extra work in backward)?

* ``"default"`` (torch's ``default_partition``): the forward computes what the outputs need;
  every forward value the backward reads is saved. Nothing is recomputed.
* ``"min_cut"`` (torch's ``min_cut_rematerialization_partition``): a flow network where each
  forward value ``v`` is an edge ``v_in -> v_out`` with capacity = its size in bytes, data flow
  edges are infinite, the source feeds the primals, and every node that depends on a tangent
  drains to the sink. A minimum s-t cut is the cheapest set of values whose saving separates
  the backward from the inputs: save those, recompute everything between them and the backward.
  Values that must not be recomputed (matmuls; reductions that shrink their input more than
  4x, as torch's ``should_ban_recomputation``) are tied to the source.

Simplifications: torch also weighs recompute cost by distance to the backward, handles
symbolic sizes and mutation, may prefer to save inputs with a static lifetime, and can replay a
random op in the backward from a saved RNG state (we only refuse to recompute random ops).
"""

from __future__ import annotations

import dataclasses
import math
import operator

import torch

from course_lib.decomp import kind
from course_lib.fx import Graph, Node

INF = math.inf


def nbytes(node: Node) -> int:
    """Size of a node's value from ``meta["val"]`` (0 for non-tensors)."""
    val = node.meta.get("val")
    if val is None or not hasattr(val, "numel"):
        return 0
    return int(val.numel()) * val.element_size()


def _descendants(roots: list[Node]) -> set[Node]:
    seen, stack = set(), list(roots)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(u for u in n.users if u.op != "output")
    return seen


def _ancestors(roots: list[Node], stop: set[Node]) -> set[Node]:
    seen, stack = set(), [r for r in roots if isinstance(r, Node)]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            if n not in stop:
                stack.extend(n.all_input_nodes)
    return seen


def subgraph(graph: Graph, inputs: list[Node], outputs: list[Node]) -> Graph:
    """A new Graph with ``inputs`` as placeholders computing ``outputs`` (a tuple output).

    Raises ValueError if an output needs a placeholder of ``graph`` that is not in ``inputs``.
    """
    stop = set(inputs)
    needed = _ancestors(outputs, stop)
    new = Graph(graph.owning_module)  # get_attr nodes (tensor constants) still resolve
    env: dict[Node, Node] = {}
    for node in inputs:
        env[node] = new.placeholder(node.name)
        env[node].meta = dict(node.meta)
    for node in graph.nodes:
        if node in needed and node not in stop:
            if node.op == "placeholder":
                raise ValueError(f"partition is not valid: {node.name} is needed but neither saved nor an input")
            env[node] = new.node_copy(node, lambda n: env[n])
    new.output(tuple(env[o] for o in outputs))
    return new


@dataclasses.dataclass
class Partition:
    """Forward and backward graphs and what crosses between them."""

    method: str
    forward: Graph
    backward: Graph
    saved: list[str]
    saved_bytes: int
    recomputed: list[str]
    num_outputs: int

    def summary(self) -> str:
        return (f"{self.method}: saves {len(self.saved)} tensors ({self.saved_bytes} bytes): "
                f"{', '.join(self.saved)}; recomputes {len(self.recomputed)} ops"
                + (f": {', '.join(self.recomputed)}" if self.recomputed else ""))  # fmt: skip

    def __str__(self) -> str:
        return self.summary()


def _split(joint) -> tuple[list[Node], set[Node], list[Node], list[Node]]:
    outs = joint.outputs
    fw_outs, grads = outs[: joint.num_outputs], outs[joint.num_outputs :]
    bw = _descendants(joint.tangents)
    return fw_outs, bw, grads, joint.primals


def saved_for_default(joint) -> list[Node]:
    """Forward values (primals included) that a backward node reads."""
    fw_outs, bw, grads, primals = _split(joint)
    fw = _ancestors(fw_outs, set()) | set(primals)
    users_outside = lambda n: any(u not in fw and u.op != "output" for u in n.users) or n in grads  # noqa: E731
    return [n for n in joint.graph.nodes if n in fw and users_outside(n)]


def banned(node: Node) -> bool:
    """Values min-cut must not recompute: extern calls, reductions that shrink >4x, and random
    draws (dropout's mask): a second draw in the backward would be another mask, so the gradient
    would belong to a different forward (torch's partitioner bans ops tagged
    ``nondeterministic_seeded`` the same way, unless it functionalizes the RNG state)."""
    if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
        return True
    k = kind(node.target)
    if k == "extern":
        return True
    if k == "reduction":
        inp = sum(nbytes(a) for a in node.all_input_nodes)
        return nbytes(node) * 4 < inp
    return False


def _depths(graph: Graph) -> dict[Node, int]:
    """Longest path from a placeholder: used to break ties towards saving earlier values."""
    depth: dict[Node, int] = {}
    for node in graph.nodes:
        depth[node] = 1 + max((depth[a] for a in node.all_input_nodes), default=-1)
    return depth


def capacity(node: Node, depth: int) -> float:
    """Cost of saving ``node``: its bytes, plus a tiny tie-breaker favouring values near the inputs.

    A view's saving is charged a little more than its base's, so the base is saved and the
    view recomputed (views are free to recompute).
    """
    view_penalty = 1.0 if kind(node.target) == "view" else 0.0
    return nbytes(node) * (1.0 + 1e-3 * depth) + view_penalty


def flow_network(joint):
    """The networkx DiGraph min-cut runs on (node names ``<name>_in`` / ``<name>_out``)."""
    import networkx as nx

    _, bw, _, primals = _split(joint)
    depth = _depths(joint.graph)
    g = nx.DiGraph()
    for node in joint.graph.nodes:
        if node.op == "output":
            continue
        if node in bw:
            g.add_edge(node.name + "_in", "sink", capacity=INF)
            continue
        if node in primals or banned(node):
            g.add_edge("source", node.name + "_in", capacity=INF)
        g.add_edge(node.name + "_in", node.name + "_out", capacity=capacity(node, depth[node]))
        for user in node.users:
            if user.op != "output":
                g.add_edge(node.name + "_out", user.name + "_in", capacity=INF)
    return g


def saved_for_min_cut(joint) -> list[Node]:
    """The values on the cheapest cut between the source and the backward."""
    import networkx as nx

    g = flow_network(joint)
    _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    saved = {n.name for n in joint.graph.nodes if n.name + "_in" in reachable and n.name + "_out" not in reachable}
    fw_outs, bw, grads, _ = _split(joint)
    saved |= {n.name for n in grads if n not in bw}  # a gradient that is a forward value
    return [n for n in joint.graph.nodes if n.name in saved]


SAVERS = {"default": saved_for_default, "min_cut": saved_for_min_cut}


def _tensors_only(saved: list[Node]) -> list[Node]:
    """A multi-output op (max pooling's values and indices) is saved as its ``getitem`` outputs:
    only tensors cross from forward to backward (torch saves the same way)."""
    out: list[Node] = []
    for n in saved:
        items = [u for u in n.users if u.op == "call_function" and u.target is operator.getitem]
        pick = items if isinstance(n.meta.get("val"), (tuple, list)) and items else [n]
        out.extend(p for p in pick if p not in out)
    return out


def partition(joint, method: str = "default") -> Partition:
    """Split ``joint`` with ``method`` ("default" or "min_cut") and report what it saves."""
    if method not in SAVERS:
        raise ValueError(f"unknown partition method {method!r}; expected one of {sorted(SAVERS)}")
    saved = _tensors_only(SAVERS[method](joint))
    fw_outs, bw, grads, primals = _split(joint)
    forward = subgraph(joint.graph, primals, fw_outs + saved)
    backward = subgraph(joint.graph, saved + joint.tangents, grads)
    fw_names = {n.name for n in forward.nodes if n.op == "call_function"}
    recomputed = [n.name for n in backward.nodes if n.op == "call_function" and n.name in fw_names]
    return Partition(method, forward, backward, [n.name for n in saved], sum(nbytes(n) for n in saved),
                     recomputed, len(fw_outs))  # fmt: skip


HIGHLIGHT = {"saved": "#f4a261", "recomputed": "#a8dadc", "backward": "#e0e0f8"}


def draw_joint(joint, part: Partition | None = None, title: str = ""):
    """The joint graph: backward nodes tinted, saved tensors (the cut) orange, recomputed ops teal."""
    from course_lib import viz

    _, bw, _, _ = _split(joint)
    colours = {n.name: HIGHLIGHT["backward"] for n in bw}
    if part is not None:
        colours.update({name: HIGHLIGHT["recomputed"] for name in part.recomputed})
        colours.update({name: HIGHLIGHT["saved"] for name in part.saved})
    legend = {"forward op": viz._OP_COLOURS["call_function"], "backward op": HIGHLIGHT["backward"]}
    if part is not None:
        legend.update({"saved for backward": HIGHLIGHT["saved"], "recomputed in backward": HIGHLIGHT["recomputed"]})
    title = title or (part.summary() if part else "joint graph")
    return viz.fx_graph(joint.graph, title=title, highlight=colours, legend=legend)


def torch_saved(joint, method: str = "min_cut") -> tuple[list[str], int]:
    """Run torch's partitioner (through compat) on *our* joint graph; (saved names, saved bytes)."""
    from course_lib import compat
    from course_lib.fx import to_torch_fx

    inputs = [n.meta["val"] for n in joint.graph.nodes if n.op == "placeholder"]
    fw, _ = compat.torch_partition(to_torch_fx(joint.graph), inputs, joint.num_outputs, method)
    out = [n for n in fw.graph.nodes if n.op == "output"][0].args[0][joint.num_outputs :]
    vals = [n.meta.get("val") for n in out]
    return [n.name for n in out], sum(int(v.numel()) * v.element_size() for v in vals if hasattr(v, "numel"))


def backward_nodes(joint) -> set[Node]:
    """The joint graph's nodes that depend on a tangent (they can only run in the backward)."""
    return _descendants(joint.tangents)


depths = _depths
