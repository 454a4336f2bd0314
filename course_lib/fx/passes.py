"""Graph passes: dead-code elimination, CSE, subgraph rewriting (teaches torch/fx/subgraph_rewriter.py,
torch/fx/passes/dialect/common/cse_pass.py and ``Graph.eliminate_dead_code`` in torch/fx/graph.py).

Position: Graph --> Graph (each pass edits the graph in place and returns what it did, so a
notebook can print the graph before and after).

* :func:`dce` removes pure nodes whose value nobody uses.
* :func:`cse` merges nodes that compute the same thing from the same inputs.
* :func:`replace_pattern` finds every occurrence of a pattern (written as a Python function,
  traced) and splices in a replacement (another function with the same inputs). The matcher
  walks backwards from the pattern's output through its arguments, the way FX's
  ``SubgraphMatcher`` does; pattern placeholders match any node (or constant) consistently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from course_lib.fx.graph import Graph, Node, map_arg


def dce(graph: Graph) -> list[str]:
    """Dead-code elimination; returns the names of the erased nodes (in erase order)."""
    erased = []
    changed = True
    while changed:
        changed = False
        for node in reversed(graph.nodes):
            if not node.users and not node.is_impure():
                erased.append(node.name)
                graph.erase_node(node)
                changed = True
    return erased


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", _freeze(value.start), _freeze(value.stop), _freeze(value.step))
    hash(value)  # raises TypeError for unhashable constants: such nodes are not CSE'd
    return (type(value).__name__, value)


def cse(graph: Graph) -> dict[str, str]:
    """Common-subexpression elimination; returns {removed node name: kept node name}.

    Two nodes are the same expression when op, target, args and kwargs are equal (args that
    are nodes compare by identity, after earlier merges). Impure nodes (in-place methods,
    placeholders, output) and get_attr are never merged. One forward pass: O(n).
    """
    seen: dict[Any, Node] = {}
    merged: dict[str, str] = {}
    for node in graph.nodes:
        if node.is_impure() or node.op in ("get_attr", "placeholder", "output"):
            continue
        try:
            key = (node.op, node.target, _freeze(node.args), _freeze(node.kwargs))
            hash(key)
        except TypeError:
            continue
        if key in seen:
            node.replace_all_uses_with(seen[key])
            merged[node.name] = seen[key].name
            graph.erase_node(node)
        else:
            seen[key] = node
    return merged


@dataclasses.dataclass
class Match:
    """One occurrence of a pattern: the anchor (pattern output) and pattern-node -> graph-node map."""

    anchor: Node
    nodes_map: dict[Node, Any]

    @property
    def replaced(self) -> list[str]:
        return sorted(n.name for p, n in self.nodes_map.items() if p.op != "placeholder" and isinstance(n, Node))


def _match(p: Any, g: Any, env: dict[Node, Any]) -> bool:
    if isinstance(p, Node) and p.op == "placeholder":
        if p in env:
            return env[p] is g or (not isinstance(g, Node) and env[p] == g)
        env[p] = g
        return True
    if isinstance(p, Node):
        if not isinstance(g, Node) or p.op != g.op or p.target != g.target:
            return False
        if p in env:
            return env[p] is g
        if len(p.args) != len(g.args) or set(p.kwargs) != set(g.kwargs):
            return False
        env[p] = g
        pairs = list(zip(p.args, g.args)) + [(p.kwargs[k], g.kwargs[k]) for k in p.kwargs]
        return all(_match(a, b, env) for a, b in pairs)
    if isinstance(p, (tuple, list)):
        return isinstance(g, (tuple, list)) and len(p) == len(g) and all(_match(a, b, env) for a, b in zip(p, g))
    return not isinstance(g, Node) and type(p) is type(g) and p == g


def find_matches(graph: Graph, pattern: Graph) -> list[Match]:
    """Non-overlapping matches of ``pattern`` (single output) in ``graph``, in graph order."""
    out = pattern.output_node()
    if out is None or not isinstance(out.args[0], Node):
        raise ValueError("a pattern must return exactly one value")
    anchor_p = out.args[0]
    matches, used = [], set()
    for node in graph.nodes:
        env: dict[Node, Any] = {}
        if not _match(anchor_p, node, env):
            continue
        inner = [g for p, g in env.items() if p.op != "placeholder"]
        if any(g in used for g in inner):
            continue
        # Interior nodes may not be read from outside the match, or erasing them breaks the graph.
        inner_set = set(inner)
        if any(u not in inner_set for g in inner if g is not node for u in g.users):
            continue
        used.update(inner)
        matches.append(Match(node, env))
    return matches


def replace_pattern(graph: Graph, pattern: Callable | Graph, replacement: Callable | Graph) -> list[Match]:
    """Replace every match of ``pattern`` by ``replacement`` (torch.fx.replace_pattern).

    Both are functions (traced with symbolic_trace) or Graphs with the same placeholders, in
    the same order. Returns the matches made; the graph is linted afterwards.
    """
    from course_lib.fx.proxy import symbolic_trace

    pat = pattern if isinstance(pattern, Graph) else symbolic_trace(pattern)
    rep = replacement if isinstance(replacement, Graph) else symbolic_trace(replacement)
    pat_inputs = [n for n in pat.nodes if n.op == "placeholder"]
    rep_inputs = [n for n in rep.nodes if n.op == "placeholder"]
    if len(pat_inputs) != len(rep_inputs):
        raise ValueError("pattern and replacement must take the same inputs")
    matches = find_matches(graph, pat)
    replaced_by: dict[Node, Any] = {}  # an earlier match's anchor may be a later match's input
    for m in matches:
        env = {r: replaced_by.get(m.nodes_map[p], m.nodes_map[p]) for p, r in zip(pat_inputs, rep_inputs)}
        with graph.inserting_before(m.anchor):
            for node in rep.nodes:
                if node.op == "placeholder":
                    continue
                if node.op == "output":
                    new_value = map_arg(node.args[0], env.__getitem__)
                    break
                env[node] = graph.node_copy(node, env.__getitem__)
        m.anchor.replace_all_uses_with(new_value)
        replaced_by[m.anchor] = new_value
        inner = [g for p, g in m.nodes_map.items() if p.op != "placeholder"]
        for g in sorted(inner, key=graph._index, reverse=True):
            if not g.users:
                graph.erase_node(g)
    graph.lint()
    return matches
