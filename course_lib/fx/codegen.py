"""Python code generation from a Graph (teaches torch/fx/graph.py: ``CodeGen._gen_python_code``).

Position: Graph --> Python source text --> a callable (``GraphModule.forward`` in torch.fx).

One line per node, in graph order. ``operator.add`` becomes ``a + b``, ``torch.relu`` stays
``torch.relu(x)``, methods become ``x.sum(dim = 0)``, modules ``self.l(x)``, attributes
``self.p``. Any other callable is bound to a global named after it (FX does the same with
its ``globals`` dict), so the text stays readable and never contains an address.

Simplification: FX also emits ``x = None`` after a value's last use so memory is freed early;
we leave that out to keep the text short.
"""

from __future__ import annotations

from typing import Any

from course_lib.fx.graph import INFIX, PREFIX, Graph, Node, target_name


def _arg(value: Any) -> str:
    if isinstance(value, Node):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(_arg(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_arg(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_arg(v)}" for k, v in value.items()) + "}"
    if isinstance(value, slice):
        return f"slice({_arg(value.start)}, {_arg(value.stop)}, {_arg(value.step)})"
    if type(value).__name__ == "dtype":
        return str(value)
    if type(value).__name__ == "device":
        return f"torch.device({str(value)!r})"
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return f"float({str(value)!r})"  # repr() gives inf / nan, which are not Python names
    return repr(value)


def _call_args(args: tuple, kwargs: dict) -> str:
    parts = [_arg(a) for a in args] + [f"{k} = {_arg(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _callable_name(target: Any, globals_: dict[str, Any]) -> str:
    """A name under which generated code can call ``target``, registering it in globals_."""
    printed = target_name(target)
    if printed.startswith("torch.") and (printed.count(".") == 1 or printed.startswith("torch.ops.")):
        import torch

        globals_["torch"] = torch
        return printed
    if printed.startswith("operator."):
        import operator

        globals_["operator"] = operator
        return printed
    import builtins

    if getattr(builtins, printed, None) is target:
        return printed
    base = "_" + "".join(c if c.isalnum() else "_" for c in printed.split(".")[-1])
    name, i = base, 0
    while name in globals_ and globals_[name] is not target:
        i += 1
        name = f"{base}_{i}"
    globals_[name] = target
    return name


def node_line(node: Node, globals_: dict[str, Any]) -> str | None:
    """The statement for one node (placeholders become parameters, so they return None)."""
    if node.op == "placeholder":
        return None
    if node.op == "output":
        return f"return {_arg(node.args[0])}"
    if node.op == "get_attr":
        return f"{node.name} = self.{node.target}"
    if node.op == "call_module":
        return f"{node.name} = self.{node.target}({_call_args(node.args, node.kwargs)})"
    if node.op == "call_method":
        obj, *rest = node.args
        return f"{node.name} = {_arg(obj)}.{node.target}({_call_args(tuple(rest), node.kwargs)})"
    t = node.target
    if t in INFIX and len(node.args) == 2 and not node.kwargs:
        return f"{node.name} = {_arg(node.args[0])} {INFIX[t]} {_arg(node.args[1])}"
    if t in PREFIX and len(node.args) == 1 and not node.kwargs:
        return f"{node.name} = {PREFIX[t]}{_arg(node.args[0])}"
    if target_name(t) == "operator.getitem" and len(node.args) == 2:
        return f"{node.name} = {_arg(node.args[0])}[{_arg(node.args[1])}]"
    return f"{node.name} = {_callable_name(t, globals_)}({_call_args(node.args, node.kwargs)})"


def python_code_and_globals(graph: Graph, fn_name: str = "forward") -> tuple[str, dict[str, Any]]:
    """The source of ``def forward(self, x, ...)`` and the globals it needs."""
    globals_: dict[str, Any] = {}
    params = ["self"]
    for node in graph.nodes:
        if node.op == "placeholder":
            params.append(node.name if not node.args else f"{node.name} = {node.args[0]!r}")
    body = [line for n in graph.nodes if (line := node_line(n, globals_)) is not None]
    if not any(n.op == "output" for n in graph.nodes):
        body.append("return None")
    src = f"def {fn_name}({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
    return src, globals_


def python_code(graph: Graph, fn_name: str = "forward") -> str:
    return python_code_and_globals(graph, fn_name)[0]


def compile_graph(graph: Graph, module: Any = None):
    """``exec`` the generated source; returns a plain function of the graph's inputs.

    ``module`` (default ``graph.owning_module``) is passed as ``self`` for get_attr/call_module.
    """
    src, globals_ = python_code_and_globals(graph)
    namespace = dict(globals_)
    exec(compile(src, "<course_lib.fx generated>", "exec"), namespace)  # noqa: S102 - our own text
    fn = namespace["forward"]
    owner = module if module is not None else graph.owning_module

    def forward(*args, **kwargs):
        return fn(owner, *args, **kwargs)

    forward.__doc__ = src
    return forward
