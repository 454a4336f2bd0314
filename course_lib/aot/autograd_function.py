"""A ``torch.autograd.Function`` inside a Dynamo graph, with its author's backward.

Dynamo traces a Function's ``forward`` and ``backward`` into two subgraphs and calls them through
one higher-order op, ``torch.ops.higher_order.autograd_function_apply(fwd, bwd, *args, ...)``
(``torch/_functorch/autograd_function.py``). Called as it stands, that op runs ``fwd`` inside a
Function of its own; a trace of plain tensors then records ``fwd``'s ops behind ``detach`` nodes
and the gradient stops there: every parameter before it gets none. torch's AOT Autograd traces
with autograd on, so the author's ``bwd`` is what it records for the backward.

The course keeps the author's backward by making the pair one custom op,
``course_lib::autograd_function(key, tensors)``: its value is ``fwd``'s outputs followed by the
values ``fwd`` saves for ``bwd``, and its derivative (``torch.library.register_autograd``) runs
``bwd`` on them. :func:`course_lib.aot.joint` differentiates custom ops by asking autograd, so
``bwd``'s ops are what the joint graph records. :func:`inline_autograd_functions` rewrites a
Dynamo graph's ``autograd_function_apply`` calls into this op before the trace.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from typing import Any

import torch

__all__ = ["autograd_function", "inline_autograd_functions"]

_HOP = "autograd_function_apply"


@dataclasses.dataclass(frozen=True)
class _Function:
    fwd: torch.fx.GraphModule  # (*args) -> (outputs, saved values)
    bwd: torch.fx.GraphModule  # (*output gradients, *saved values) -> argument gradients
    num_outputs: int
    non_differentiable: tuple[int, ...]
    no_gradient: frozenset[int]  # arguments the backward returns None for, as written


def _returns_none(bwd: torch.fx.GraphModule) -> frozenset[int]:
    out = bwd.graph.output_node().args[0]
    return frozenset(i for i, a in enumerate(out if isinstance(out, (tuple, list)) else [out]) if a is None)


_FUNCTIONS: dict[int, _Function] = {}
_keys = itertools.count()


def forward(key: int, args: list[torch.Tensor], copy: bool = True) -> list[torch.Tensor]:
    """The Function's forward: its outputs, then the values it saves (``copy``: each one new)."""
    f = _FUNCTIONS[key]
    with torch.no_grad():  # as autograd.Function.forward runs
        outputs, saved = torch.fx.Interpreter(f.fwd).run(*args)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    if not copy:
        return [*outputs, *saved]
    # a custom op's results are new, distinct tensors: a saved input (ctx.save_for_backward(x)) or a
    # saved output is copied
    results: list[torch.Tensor] = []
    for t in (*outputs, *saved):
        results.append(t.clone() if any(_aliases(t, a) for a in (*args, *results)) else t)
    return results


def _aliases(t: torch.Tensor, a: Any) -> bool:
    return isinstance(a, torch.Tensor) and torch._C._is_alias_of(t, a)


@torch.library.custom_op("course_lib::autograd_function", mutates_args=())
def autograd_function(key: int, args: list[torch.Tensor]) -> list[torch.Tensor]:
    """The Function registered under ``key``: its outputs, then the values its backward reads."""
    return forward(key, args)


@autograd_function.register_fake
def _(key, args):
    return forward(key, args)


def _setup_context(ctx, inputs, output) -> None:
    key, _ = inputs
    f = _FUNCTIONS[key]
    ctx.key = key
    ctx.save_for_backward(*output[f.num_outputs :])
    ctx.mark_non_differentiable(*(output[i] for i in f.non_differentiable), *output[f.num_outputs :])


def _backward(ctx, grads):
    return None, backward(ctx.key)(*grads[: _FUNCTIONS[ctx.key].num_outputs], *ctx.saved_tensors)


autograd_function.register_autograd(_backward, setup_context=_setup_context)
OP = torch.ops.course_lib.autograd_function.default


def carries(key: int, args: list, value) -> bool:
    """Whether ``value``, as one of ``args``, gets a gradient from the Function's backward (torch
    gives None to an argument whose backward returns None)."""
    return any(a is value and i not in _FUNCTIONS[key].no_gradient for i, a in enumerate(args))


def cotangents(key: int, grads: list, results: list) -> list[torch.Tensor]:
    """The inputs of the author's backward, from the op's ``results`` and their gradients ``grads``:
    a gradient for each output (zeros where none came, as autograd materialises them), then the
    saved values."""
    n = _FUNCTIONS[key].num_outputs
    return [g if g is not None else torch.zeros_like(r) for g, r in zip(grads[:n], results[:n])] + list(results[n:])


def backward(key: int):
    """The author's backward for ``key``: ``(*output gradients, *saved values) -> argument gradients``."""
    bwd = _FUNCTIONS[key].bwd

    def run(*tensors):
        got = torch.fx.Interpreter(bwd).run(*tensors)
        return list(got) if isinstance(got, (tuple, list)) else [got]

    return run


def inline_autograd_functions(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with each ``autograd_function_apply`` replaced by :func:`autograd_function` (a copy;
    ``gm`` itself when it has none). Refuses, with the reason, a Function that marks outputs dirty
    (writes its input in place) or takes an argument that is not a tensor."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "_name", None) == _HOP]
    if not calls:
        return gm
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())
    for node in [n for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "_name", None) == _HOP]:
        fwd, bwd, *args = node.args
        if node.kwargs.get("dirty_idx"):
            raise NotImplementedError(f"a torch.autograd.Function that writes its input in place ({node.name}, "
                                      "ctx.mark_dirty) has no functional form here")  # fmt: skip
        if not all(
            isinstance(a, torch.fx.Node) and isinstance(a.meta.get("example_value"), torch.Tensor) for a in args
        ):
            raise NotImplementedError(f"a torch.autograd.Function with an argument that is not a tensor ({node.name})")
        fwd, bwd = getattr(gm, fwd.target), getattr(gm, bwd.target)
        value = node.meta.get("example_value")
        many = isinstance(value, (tuple, list))
        key = next(_keys)
        constant = tuple(node.kwargs.get("non_differentiable_idx", ()))
        _FUNCTIONS[key] = _Function(fwd, bwd, len(value) if many else 1, constant, _returns_none(bwd))
        with gm.graph.inserting_before(node):
            call = gm.graph.call_function(torch.ops.course_lib.autograd_function.default, (key, list(args)))
            call.meta = dict(node.meta)
            outs = [gm.graph.call_function(operator.getitem, (call, i)) for i in range(_FUNCTIONS[key].num_outputs)]
            new = gm.graph.call_function(tuple, (outs,)) if many else outs[0]
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
    gm.recompile()
    return gm
