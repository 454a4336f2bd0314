"""Run a Graph node by node (teaches torch/fx/interpreter.py and torch/fx/passes/shape_prop.py).

Position: Graph + inputs --> outputs (and, for ShapeProp, ``node.meta`` filled in).

:class:`Interpreter` dispatches on the opcode exactly as torch.fx does:
``getattr(self, node.op)(node.target, args, kwargs)``. Subclass it and override one method
(``call_function``, say) to observe or change every call: that is how ShapeProp, FX's
profilers and many debugging tools are written.
"""

from __future__ import annotations

from typing import Any

from course_lib.fx.graph import Graph, Node, fetch_attr, map_arg


class Interpreter:
    """Evaluate a graph; ``env`` maps each node to its value while running."""

    def __init__(self, graph: Graph, module: Any = None):
        self.graph = graph
        self.module = module if module is not None else graph.owning_module
        self.env: dict[Node, Any] = {}

    def run(self, *args, **kwargs) -> Any:
        self.env = {}
        self._inputs = list(args)
        self._kwinputs = dict(kwargs)
        for node in self.graph.nodes:
            value = self.run_node(node)
            if node.op == "output":
                return value
            self.env[node] = value
        return None

    def run_node(self, node: Node) -> Any:
        args = map_arg(node.args, lambda n: self.env[n])
        kwargs = map_arg(node.kwargs, lambda n: self.env[n])
        try:
            return getattr(self, node.op)(node.target, args, kwargs)
        except Exception as exc:
            exc.add_note(f"while running FX node {node.name}: {node.format_node()}")
            raise

    # -- one method per opcode ----------------------------------------------------------
    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Any:
        if self._inputs:
            return self._inputs.pop(0)
        if target in self._kwinputs:
            return self._kwinputs.pop(target)
        if args:
            return args[0]  # the default value
        raise TypeError(f"missing input for placeholder {target!r}")

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Any:
        return fetch_attr(self._owner(target), target)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        obj, *rest = args
        return getattr(obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        return fetch_attr(self._owner(target), target)(*args, **kwargs)

    def output(self, target: Any, args: tuple, kwargs: dict) -> Any:
        return args[0]

    def _owner(self, target: str) -> Any:
        if self.module is None:
            raise RuntimeError(f"node reads {target!r} but the graph has no owning_module to read it from")
        return self.module


def describe(value: Any) -> Any:
    """A tensor's (shape, dtype) summary, recursively; other values unchanged."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return value
    if isinstance(value, torch.Tensor):
        return TensorMeta(tuple(value.shape), value.dtype, str(value.device), value.requires_grad)
    if isinstance(value, (tuple, list)):
        return type(value)(describe(v) for v in value)
    return value


class TensorMeta(tuple):
    """(shape, dtype, device, requires_grad), like FX's TensorMetadata but smaller."""

    def __new__(cls, shape, dtype, device, requires_grad):
        return super().__new__(cls, (shape, dtype, device, requires_grad))

    shape = property(lambda self: self[0])
    dtype = property(lambda self: self[1])
    device = property(lambda self: self[2])
    requires_grad = property(lambda self: self[3])

    def __repr__(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        return f"{dt}[{', '.join(map(str, self.shape))}]"


class ShapeProp(Interpreter):
    """Run on example inputs and store each node's result summary in ``node.meta``.

    After ``ShapeProp(graph).propagate(x)`` every node has ``meta["tensor_meta"]`` (shape,
    dtype, device, requires_grad) and ``meta["val"]`` (the example value itself). The real
    one (torch/fx/passes/shape_prop.py) can also run on fake tensors; course_lib.fake does that.
    """

    def run_node(self, node: Node) -> Any:
        value = super().run_node(node)
        node.meta["tensor_meta"] = describe(value)
        node.meta["val"] = value
        return value

    def propagate(self, *args) -> Any:
        return self.run(*args)
