"""Graph pictures: a Graph drawn with course_lib.viz's FX picture, plus what ShapeProp found.

Like torch/fx/passes/graph_drawer.py (FxGraphDrawer) but smaller: one box per node with its
name, opcode and target (and ``meta["tensor_meta"]`` after ShapeProp), one edge per use. The
picture itself is :func:`course_lib.viz.fx_graph`, the same one every notebook uses for
torch.fx graphs, so a course_lib.fx graph and a torch.fx graph look alike.
"""

from __future__ import annotations

from course_lib.fx.graph import Graph


def tensor_meta_text(node) -> str:
    """The ``tensor_meta`` ShapeProp stored on ``node`` (``float32[2, 3]``), or ``""``."""
    meta = node.meta.get("tensor_meta")
    if meta is None or isinstance(meta, (list, tuple)) and type(meta).__name__ != "TensorMeta":
        return ""
    return repr(meta)


def to_dot(graph: Graph, title: str = "") -> str:
    """DOT text for the graph; deterministic (node order, names from the graph)."""
    from course_lib import viz

    return viz.fx_graph(graph, title, detail=tensor_meta_text).source


def draw(graph: Graph, title: str = ""):
    """The graph as a picture (inline SVG in JupyterLab; DOT text without Graphviz)."""
    from course_lib import viz

    return viz.fx_graph(graph, title, detail=tensor_meta_text)
