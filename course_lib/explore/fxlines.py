"""FX graphs as pane lines: one short line per node, ``name = target(args)``."""

from __future__ import annotations

import re

from course_lib.explore.model import Line
from course_lib.explore.source import Source, line_of_stack_trace


def short_target(node) -> str:
    t = node.target
    if node.op == "placeholder":
        return "input"
    if node.op == "output":
        return "return"
    if node.op == "get_attr":
        return f"self.{t}"
    if node.op in ("call_method", "call_module"):
        return f".{t}" if node.op == "call_method" else f"self.{t}"
    name = getattr(t, "__name__", str(t))
    text = str(t)
    if text.startswith("aten.") or "::" in text:
        return text.replace("aten::", "aten.")
    module = getattr(t, "__module__", "") or ""
    if module.startswith("torch") and not module.startswith("torch._ops"):
        return f"torch.{name}"
    return {"getitem": "getitem"}.get(name, re.sub(r"^<built-in function (\w+)>$", r"\1", name))


def _arg(a) -> str:
    if hasattr(a, "name") and hasattr(a, "op"):
        return a.name
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_arg(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, float):
        return f"{a:.6g}"
    text = repr(a) if not hasattr(a, "shape") else "<tensor>"
    return text if len(text) < 40 else text[:37] + "..."


def node_text(node) -> str:
    args = [_arg(a) for a in node.args] + [f"{k}={_arg(v)}" for k, v in node.kwargs.items()]
    if node.op == "placeholder":
        return f"{node.name} = input"
    if node.op == "output":
        return f"return {', '.join(args)}"
    return f"{node.name} = {short_target(node)}({', '.join(args)})"


def input_nodes(node) -> list:
    """The nodes ``node`` reads (args and kwargs, nested)."""
    found = []

    def visit(a):
        if hasattr(a, "name") and hasattr(a, "op"):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            for x in a:
                visit(x)
        elif isinstance(a, dict):
            for x in a.values():
                visit(x)

    visit(node.args)
    visit(node.kwargs)
    return list(dict.fromkeys(found))


def graph_lines(graph, prefix: str, sources_of) -> list[Line]:
    """One :class:`Line` per node; ``sources_of(node) -> (sources, exact)``.

    A node whose only sources are nodes of its own graph (its inputs: no recorded origin) is
    marked ``via="data"``, an upstream-only link.
    """
    out = []
    for node in graph.nodes:
        sources, exact = sources_of(node)
        own = bool(sources) and all(s.startswith(prefix + ":") for s in sources) and node.op != "output"
        # a placeholder linked to its users (a lifted parameter) is "data" too
        out.append(Line(f"{prefix}:{node.name}", node_text(node), tuple(dict.fromkeys(sources)), exact,
                        via="data" if own and not exact else ""))  # fmt: skip
    return out


def dynamo_graph_lines(graph, prefix: str, src: Source) -> list[Line]:
    """:func:`graph_lines` of a graph Dynamo captured (the course's or torch's): a node links to
    the Python line in its ``stack_trace`` (exact), the output to the nodes it returns, any
    other node to the function's ``def`` line (not exact)."""

    def sources(node):
        line = line_of_stack_trace(node.meta.get("stack_trace"), src)
        if line:
            return [line], True
        if node.op == "output":
            return [f"{prefix}:{n.name}" for n in input_nodes(node)], True
        return [src.def_id], False

    return graph_lines(graph, prefix, sources)
