"""Convert between course_lib.fx.Graph and the real torch.fx.GraphModule (public torch.fx API).

Both directions keep node names, opcodes, targets, args and kwargs, so ``print`` of either side
shows the same lines. ``to_torch_fx`` uses the graph's ``owning_module`` as the GraphModule's
root (an empty ``nn.Module`` when there is none), so the result runs and can be handed to any
torch.fx tool or to ``torch.compile`` backends.
"""

from __future__ import annotations

from typing import Any

from course_lib.fx.graph import Graph, Node, map_arg


def to_torch_fx(graph: Graph):
    """course_lib Graph -> ``torch.fx.GraphModule``."""
    import torch
    import torch.fx

    tg = torch.fx.Graph()
    env: dict[Node, Any] = {}
    for node in graph.nodes:
        args = map_arg(node.args, lambda n: env[n])
        kwargs = map_arg(node.kwargs, lambda n: env[n])
        new = tg.create_node(node.op, node.target, args, kwargs, name=node.name)
        new.meta.update(node.meta)
        env[node] = new
    root = graph.owning_module if graph.owning_module is not None else torch.nn.Module()
    gm = torch.fx.GraphModule(root, tg)
    return gm


def from_torch_fx(graph_module: Any) -> Graph:
    """``torch.fx.GraphModule`` (or ``torch.fx.Graph``) -> course_lib Graph.

    The GraphModule becomes the graph's ``owning_module``, so get_attr/call_module still work.
    """
    import torch.fx

    if isinstance(graph_module, torch.fx.Graph):
        tgraph, owner = graph_module, graph_module.owning_module
    else:
        tgraph, owner = graph_module.graph, graph_module
    g = Graph(owning_module=owner)
    env: dict[Any, Node] = {}
    for node in tgraph.nodes:
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
        new = g.create_node(node.op, node.target, args, kwargs, name=node.name)
        new.meta.update(node.meta)
        env[node] = new
    return g
