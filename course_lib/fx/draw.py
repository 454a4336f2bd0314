"""Graph pictures: a Graph as Graphviz DOT, shown through course_lib.viz.graph.

Like torch/fx/passes/graph_drawer.py (FxGraphDrawer) but smaller: one box per node with its
name, opcode and target (and ``meta["tensor_meta"]`` after ShapeProp), one edge per use.
"""

from __future__ import annotations

from course_lib.fx.graph import Graph, target_name

COLORS = {
    "placeholder": "#cfe8ff", "get_attr": "#fff2b3", "call_function": "#e8e8e8",
    "call_method": "#e0f0d8", "call_module": "#f5d9f0", "output": "#ffd6cc",
}  # fmt: skip


def _esc(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


def to_dot(graph: Graph, title: str = "") -> str:
    """DOT text for the graph; deterministic (node order, names from the graph)."""
    lines = ["digraph fx {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", fontname="Helvetica"];']
    if title:
        lines.append(f'  label="{_esc(title)}"; labelloc=t;')
    for node in graph.nodes:
        label = f"{node.name}\\n{node.op}"
        if node.op not in ("placeholder", "output"):
            label += f"\\n{_esc(target_name(node.target))}"
        meta = node.meta.get("tensor_meta")
        if meta is not None and not isinstance(meta, (list, tuple)) or type(meta).__name__ == "TensorMeta":
            label += f"\\n{_esc(repr(meta))}"
        lines.append(f'  "{node.name}" [label="{label}", fillcolor="{COLORS[node.op]}"];')
    for node in graph.nodes:
        for inp in node.all_input_nodes:
            lines.append(f'  "{inp.name}" -> "{node.name}";')
    lines.append("}")
    return "\n".join(lines)


def draw(graph: Graph, title: str = ""):
    """The graph as a picture (inline SVG in JupyterLab; DOT text without Graphviz)."""
    from course_lib import viz

    return viz.graph(to_dot(graph, title))
