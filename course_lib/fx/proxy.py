"""Proxy-based symbolic tracing (teaches torch/fx/proxy.py and torch/fx/_symbolic_trace.py).

Position: Python function or ``nn.Module`` --> :class:`~course_lib.fx.Graph`.

The trick: call the function once with :class:`Proxy` objects instead of tensors. Every
operation on a proxy records a node and returns a new proxy:

* ``x + 1``                -> Python calls ``Proxy.__add__``             -> ``call_function[operator.add]``
* ``torch.relu(x)``        -> torch calls ``Proxy.__torch_function__``   -> ``call_function[torch.relu]``
* ``x.sum(dim=0)``         -> ``Proxy.__getattr__('sum')`` then a call   -> ``call_method[sum]``
* ``self.linear(x)``       -> patched ``nn.Module.__call__`` on a leaf   -> ``call_module[linear]``
* ``self.weight``          -> patched ``nn.Module.__getattr__``          -> ``get_attr[weight]``

Leaf modules are those defined in ``torch.nn`` (as FX's default ``Tracer.is_leaf_module``);
a user module's ``forward`` is traced through. Python control flow on a proxy
(``if x.sum() > 0``) cannot be recorded: ``Proxy.__bool__`` raises :class:`TraceError`, the
limitation Dynamo exists to remove (see course_lib.dynamo).
"""

from __future__ import annotations

import contextlib
import inspect
import operator
from typing import Any

from course_lib.fx.graph import Graph, Node


class TraceError(RuntimeError):
    """Raised when the traced code needs a concrete value (control flow, len, iteration)."""


class Tracer:
    """Owns the graph being built and turns proxies into nodes (torch.fx.Tracer)."""

    def __init__(self, root: Any = None):
        self.graph = Graph(owning_module=root)
        self.root = root
        self.module_names: dict[int, str] = {}
        if root is not None and hasattr(root, "named_modules"):
            self.module_names = {id(m): name for name, m in root.named_modules()}

    def create_proxy(self, op: str, target: Any, args: tuple, kwargs: dict) -> Proxy:
        node = self.graph.create_node(op, target, self.unproxy(args), self.unproxy(kwargs))
        return Proxy(node, self)

    def unproxy(self, value: Any) -> Any:
        """Replace proxies by their nodes inside nested containers."""
        if isinstance(value, Proxy):
            return value.node
        if isinstance(value, (tuple, list)):
            return type(value)(self.unproxy(v) for v in value)
        if isinstance(value, dict):
            return {k: self.unproxy(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(self.unproxy(value.start), self.unproxy(value.stop), self.unproxy(value.step))
        return value

    def is_leaf_module(self, module: Any) -> bool:
        cls = type(module)
        return cls.__module__.startswith("torch.nn") and not cls.__name__ == "Sequential"

    # -- the entry point ----------------------------------------------------------------
    def trace(self, fn_or_module: Any) -> Graph:
        fn = fn_or_module.forward if hasattr(fn_or_module, "forward") and callable(fn_or_module) else fn_or_module
        sig = inspect.signature(fn)
        args = []
        for name, param in sig.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TraceError(f"symbolic_trace does not support *args/**kwargs (parameter {name!r})")
            default = ... if param.default is inspect.Parameter.empty else param.default
            args.append(Proxy(self.graph.placeholder(name, default), self))
        with self._patch_modules():
            result = fn(*args)
        self.graph.output(self.unproxy(result))
        return self.graph

    @contextlib.contextmanager
    def _patch_modules(self):
        """Route nn.Module calls and parameter reads through the tracer while tracing."""
        try:
            import torch
        except ImportError:  # pragma: no cover - the course always has torch
            yield
            return
        tracer = self
        orig_call = torch.nn.Module.__call__
        orig_getattr = torch.nn.Module.__getattr__

        def module_call(mod, *args, **kwargs):
            name = tracer.module_names.get(id(mod))
            if name is not None and name != "" and tracer.is_leaf_module(mod):
                return tracer.create_proxy("call_module", name, args, kwargs)
            return orig_call(mod, *args, **kwargs)

        def module_getattr(mod, attr):
            value = orig_getattr(mod, attr)
            owner = tracer.module_names.get(id(mod))
            if owner is not None and isinstance(value, torch.Tensor):
                return tracer.create_proxy("get_attr", f"{owner}.{attr}" if owner else attr, (), {})
            return value

        torch.nn.Module.__call__ = module_call
        torch.nn.Module.__getattr__ = module_getattr
        try:
            yield
        finally:  # always restore, also when the traced code raises
            torch.nn.Module.__call__ = orig_call
            torch.nn.Module.__getattr__ = orig_getattr


class Proxy:
    """Stands in for a value while tracing; every operation on it records a node."""

    def __init__(self, node: Node, tracer: Tracer):
        self.node = node
        self.tracer = tracer

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, name: str) -> Attribute:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_function", operator.call, (self, *args), kwargs)

    def __bool__(self):
        raise TraceError(
            f"symbolically traced value {self.node.name} was used in Python control flow; "
            "symbolic_trace records no branches (torch.fx raises the same error)"
        )

    def __iter__(self):
        raise TraceError(f"cannot iterate over the traced value {self.node.name}: its length is unknown")

    def __len__(self):
        raise TraceError(f"len() of the traced value {self.node.name} is not known while tracing")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tracer = _find_tracer((args, kwargs))
        name = getattr(func, "__name__", "")
        import torch

        if getattr(torch.Tensor, name, None) is func or (
            inspect.ismethoddescriptor(func) and getattr(func, "__objclass__", None) is torch._C.TensorBase
        ):
            return tracer.create_proxy("call_method", name, args, kwargs)
        return tracer.create_proxy("call_function", func, args, kwargs)


class Attribute(Proxy):
    """``proxy.name``: a method call if it is called next, else a ``getattr`` node (made lazily)."""

    def __init__(self, root: Proxy, attr: str):
        self.root, self.attr, self.tracer = root, attr, root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)


def _find_tracer(value: Any) -> Tracer:
    found: list[Tracer] = []

    def visit(v):
        if isinstance(v, Proxy):
            found.append(v.tracer)
        elif isinstance(v, (tuple, list)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)

    visit(value)
    if not found:
        raise TraceError("no Proxy among the arguments")
    return found[0]


def _binary(op):
    def forward(self, other):
        return self.tracer.create_proxy("call_function", op, (self, other), {})

    def reflected(self, other):
        return self.tracer.create_proxy("call_function", op, (other, self), {})

    return forward, reflected


for _name in (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "matmul",
    "and",
    "or",
    "xor",
    "lshift",
    "rshift",
):
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    _fwd, _rev = _binary(_op)
    setattr(Proxy, f"__{_name}__", _fwd)
    setattr(Proxy, f"__r{_name}__", _rev)
for _name in ("lt", "le", "gt", "ge", "eq", "ne", "getitem"):
    setattr(Proxy, f"__{_name}__", _binary(getattr(operator, _name))[0])
for _name in ("neg", "pos", "invert", "abs"):
    setattr(
        Proxy, f"__{_name}__",
        (lambda op: lambda self: self.tracer.create_proxy("call_function", op, (self,), {}))(getattr(operator, _name)),
    )  # fmt: skip
Proxy.__hash__ = object.__hash__  # __eq__ records a node, so keep identity hashing


def symbolic_trace(fn_or_module: Any) -> Graph:
    """Trace a function or ``nn.Module`` into a :class:`Graph` (torch.fx.symbolic_trace).

    For a module the graph's ``owning_module`` is the module, so ``get_attr`` / ``call_module``
    nodes can be run (``graph(x)``) and converted (``to_torch_fx(graph)``).
    """
    root = fn_or_module if hasattr(fn_or_module, "named_modules") else None
    return Tracer(root).trace(fn_or_module)
