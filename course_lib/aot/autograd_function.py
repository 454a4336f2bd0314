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

A plain function handed to ``aot_function`` (no Dynamo) calls ``Function.apply`` itself while it is
traced. Run as it stands, the trace of plain tensors records the forward's ops and differentiates
them: a straight-through ``round`` got round's derivative, 0. :func:`capture_autograd_functions`
wraps such a function so that, while it runs, each ``apply`` becomes the same custom op, with the
class's own ``forward`` and ``backward`` (and a context object standing in for autograd's ``ctx``)
in place of Dynamo's two graphs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import itertools
import operator
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.checkpoint

__all__ = ["autograd_function", "capture_autograd_functions", "inline_autograd_functions"]

_HOP = "autograd_function_apply"


@dataclasses.dataclass
class _Function:
    fwd: Callable  # (*args) -> (outputs, saved values); a GraphModule from Dynamo, or a _Captured's
    bwd: Callable  # (*output gradients, *saved values) -> argument gradients
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
        outputs, saved = _run(f.fwd, args)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    if not copy:
        return [*outputs, *saved]
    # a custom op's results are new, distinct tensors: a saved input (ctx.save_for_backward(x)) or a
    # saved output is copied
    results: list[torch.Tensor] = []
    for t in (*outputs, *saved):
        results.append(t.clone() if any(_aliases(t, a) for a in (*args, *results)) else t)
    return results


def _run(fn: Callable, args) -> Any:
    """A Dynamo subgraph through the FX interpreter (its ops as the tracer sees them), else a call."""
    return torch.fx.Interpreter(fn).run(*args) if isinstance(fn, torch.fx.GraphModule) else fn(*args)


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
        got = _run(bwd, tensors)
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


# ---------------------------------------------------------------------------
# Function.apply inside a plain function (no Dynamo)
# ---------------------------------------------------------------------------


class _Ctx:
    """What a Function's ``forward`` and ``backward`` see as ``ctx``: the attributes the author sets,
    ``save_for_backward`` / ``saved_tensors``, ``needs_input_grad``, ``mark_non_differentiable``."""

    def __init__(self, needs_input_grad: tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad
        self.to_save: tuple = ()
        self.non_differentiable: list = []
        self.dirty: list = []
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def save_for_forward(self, *tensors):  # forward-mode AD only
        pass

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable += tensors

    def mark_dirty(self, *tensors):
        self.dirty += tensors

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = value  # the course always hands the backward zeros (cotangents)

    @property
    def saved_tensors(self) -> tuple:
        return self.to_save

    saved_variables = saved_tensors


_OWN = ("needs_input_grad", "to_save", "non_differentiable", "dirty", "materialize_grads")


@dataclasses.dataclass
class _Captured:
    """One ``cls.apply(*args)`` call: ``fwd(*tensors)`` and ``bwd(*grads, *saved)`` as Dynamo's two
    graphs would be. The saved values are the ``save_for_backward`` tensors, then the tensors the
    author kept as ``ctx`` attributes; the other attributes (a dimension, a shape) are kept here from
    the last forward run and handed to the backward's ``ctx``."""

    cls: type
    args: tuple  # with None where a tensor goes
    where: tuple[int, ...]  # the positions of the tensors
    single: bool = False  # forward returned one tensor, not a tuple
    layout: tuple = ()  # (None positions in save_for_backward, names of tensor attributes)
    attrs: dict = dataclasses.field(default_factory=dict)
    n_saved: int = 0

    def full(self, tensors) -> list:
        args = list(self.args)
        for i, t in zip(self.where, tensors, strict=True):
            args[i] = t
        return args

    def fwd(self, *tensors):
        from course_lib.aot.joint import _differentiable  # (joint imports this module)

        args = self.full(tensors)
        ctx = _Ctx(tuple(_differentiable(a) for a in args))
        if _has_setup_context(self.cls):
            out = self.cls.forward(*args)
            self.cls.setup_context(ctx, tuple(args), out)
        else:
            out = self.cls.forward(ctx, *args)
        if ctx.dirty:
            raise NotImplementedError(f"a torch.autograd.Function that writes its input in place ({self.cls.__name__}, "
                                      "ctx.mark_dirty) has no functional form here")  # fmt: skip
        self.single = isinstance(out, torch.Tensor)
        outs = [out] if self.single else list(out)
        if not all(isinstance(o, torch.Tensor) for o in outs):
            raise NotImplementedError(f"{self.cls.__name__}.forward returns something other than tensors")
        own = {k: v for k, v in vars(ctx).items() if k not in _OWN}
        tensor_attrs = [k for k, v in own.items() if isinstance(v, torch.Tensor)]
        self.layout = (tuple(i for i, t in enumerate(ctx.to_save) if t is None), tuple(tensor_attrs))
        self.attrs = {k: v for k, v in own.items() if k not in tensor_attrs}
        non_diff = tuple(i for i, o in enumerate(outs) if any(o is m for m in ctx.non_differentiable))
        saved = [t for t in ctx.to_save if t is not None] + [own[k] for k in tensor_attrs]
        self.n_saved = len(saved)
        return outs, saved, non_diff

    def bwd(self, *tensors):
        grads, saved = tensors[: len(tensors) - self.n_saved], list(tensors[len(tensors) - self.n_saved :])
        nones, names = self.layout
        n_saved = len(saved) - len(names)
        it = iter(saved[:n_saved])
        ctx = _Ctx(tuple(i in self.where for i in range(len(self.args))))  # every tensor argument asked
        ctx.to_save = tuple(None if i in nones else next(it) for i in range(n_saved + len(nones)))
        vars(ctx).update(self.attrs)
        vars(ctx).update(zip(names, saved[n_saved:]))
        got = self.cls.backward(ctx, *grads)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        return [got[i] if i < len(got) else None for i in self.where]  # the tensors' gradients only


def _has_setup_context(cls) -> bool:
    return torch.autograd.function._is_setup_context_defined(cls.setup_context)


def _apply_captured(cls, *args, **kwargs):
    """``cls.apply(*args)`` as :func:`autograd_function` of its tensor arguments."""
    if kwargs:  # bound to positions, as Function.apply binds them for a setup_context forward
        sig = inspect.signature(cls.forward)
        skip = () if _has_setup_context(cls) else (None,)
        bound = sig.bind(*skip, *args, **kwargs)
        bound.apply_defaults()
        args = bound.args[len(skip) :]
    where = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    if not where:  # nothing to differentiate: as eager runs it
        return _ORIGINAL_APPLY.__func__(cls, *args)
    cap = _Captured(cls, tuple(None if i in where else a for i, a in enumerate(args)), where)
    key = next(_keys)

    def fwd(*tensors):
        outs, saved, non_diff = cap.fwd(*tensors)
        f = _FUNCTIONS[key]
        f.num_outputs, f.non_differentiable = len(outs), non_diff
        return outs, saved

    def bwd(*tensors):
        got = cap.bwd(*tensors)
        # whether an argument gets None is read by the joint's no-gradient pass; kept per class too,
        # for the calls of later traces whose backward has not run yet
        _FUNCTIONS[key].no_gradient = _NO_GRADIENT[cls] = frozenset(i for i, g in enumerate(got) if g is None)
        return got

    _FUNCTIONS[key] = _Function(fwd, bwd, 0, (), _NO_GRADIENT.get(cls, frozenset()))
    results = autograd_function(key, [args[i] for i in where])
    outs = results[: _FUNCTIONS[key].num_outputs]
    return outs[0] if cap.single else tuple(outs)


_ORIGINAL_APPLY = torch.autograd.Function.__dict__["apply"]  # the classmethod itself, restored as it was
_NO_GRADIENT: dict[type, frozenset[int]] = {}
_thread = threading.local()  # .depth: captures open in this thread
_lock = threading.Lock()
_open = 0  # captures open in any thread: Function.apply is replaced while there is one


def _dispatch_apply(cls, *args, **kwargs):
    # torch's own Functions exist for memory, not for another derivative: traced through, as Dynamo does
    # not hand them over as autograd_function_apply either. Reentrant checkpointing is its function called
    # (its forward runs it under no_grad, which the trace would keep, and its backward reruns it under
    # autograd); what to save or recompute is the partitioner's choice. Another thread's: as eager runs them.
    if getattr(_thread, "depth", 0):
        if cls is torch.utils.checkpoint.CheckpointFunction:
            run_function, _preserve_rng_state, *inputs = args
            return run_function(*inputs)
        if not cls.__module__.startswith("torch."):
            return _apply_captured(cls, *args, **kwargs)
    return _ORIGINAL_APPLY.__func__(cls, *args, **kwargs)


@contextlib.contextmanager
def _capturing_apply():
    """``torch.autograd.Function.apply`` replaced by :func:`_apply_captured` for the duration, in
    this thread (a Function of another thread meanwhile runs as it would)."""
    global _open
    with _lock:
        if _open == 0:
            torch.autograd.Function.apply = classmethod(_dispatch_apply)
        _open += 1
    _thread.depth = getattr(_thread, "depth", 0) + 1
    try:
        yield
    finally:
        _thread.depth -= 1
        with _lock:
            _open -= 1
            if _open == 0:
                torch.autograd.Function.apply = _ORIGINAL_APPLY


def capture_autograd_functions(fn: Callable) -> Callable:
    """``fn`` with every ``torch.autograd.Function.apply`` it makes, while it runs, turned into
    :func:`autograd_function` (so the joint graph records the author's backward). A Function with
    no tensor argument runs as eager runs it."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _capturing_apply():
            return fn(*args, **kwargs)

    return run
