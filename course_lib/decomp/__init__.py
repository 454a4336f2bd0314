"""course_lib.decomp: decompose ATen graphs into a small primitive set (teaches torch/_decomp).

Position: ATen-level Graph (from make_fx / AOT tracing) --> **decompose** --> primitive Graph.

API::

    DECOMPOSITIONS            {OpOverload: python function}, filled by @register(aten.op)
    FUSED_ATTENTION           device types on which fused attention kernels stay whole (default {"cuda"})
    fused_attention(devices)  context: attention whole on ``devices`` only, for the block
    PRIMITIVES                the ops that remain after decomposing (pointwise, reductions, views, mm/bmm)
    register(*ops)            decorator adding an entry
    decompose(graph, *example_inputs, table=None) -> Graph   only primitives left (checked)
    trace(fn, *args, table=None) -> Graph   ATen graph of fn (make_fx), decomposed with ``table``
    torch_decomposition(op) -> fn | None    torch's own entry for op (what course_lib.aot borrows)
    non_primitive(graph) -> [op names]      ops in the graph that are not primitives
    primitive_counts(graph) -> {"pointwise": n, "reduction": n, "view": n, "extern": n, "aten": n}

How ``decompose`` works: it re-traces the graph with ``make_fx(..., decomposition_table=table)``,
which is what AOT Autograd does. The tracer meets each ATen op; if the table has an entry, the
entry runs instead (on tracing tensors), and the ops *it* calls go through the same check, so
entries may use other entries (``silu`` calls ``sigmoid``). Real torch's tables are in
torch/_decomp/decompositions.py and torch/_refs/; ``core_aten_decompositions()`` is the set
Inductor starts from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from course_lib.decomp import models as _models  # noqa: F401  (registers the entries real models need)
from course_lib.decomp import table as _table
from course_lib.decomp.table import DECOMPOSITIONS, FUSED_ATTENTION, KIND, PRIMITIVES, fused_attention, kind, register

__all__ = ["BEFORE_DISPATCH", "DECOMPOSITIONS", "FUSED_ATTENTION", "KIND", "PRIMITIVES", "decompose", "fused_attention", "kind", "non_primitive",
           "primitive_counts", "register", "torch_decomposition", "trace"]  # fmt: skip


def trace(fn: Callable, *args: Any, table: dict | None = None, provenance: bool = False, tracing_mode: str = "real"):
    """``fn`` traced to an ATen course_lib.fx Graph with ``table`` applied (default: ours).

    Pass ``table={}`` for the undecomposed ATen graph. Ops in :data:`BEFORE_DISPATCH` are
    rewritten before they reach the dispatcher (see :class:`BeforeDispatch`), whatever the table.
    ``provenance``: each node's ``meta["original_aten"]`` is the op whose decomposition made it (the
    outermost one: ``prims.erfcx`` from torch's entry for ``erfcx``, called by the one for ``log_ndtr``,
    says ``log_ndtr``), as torch's tracer records it under ``torch.fx.traceback.preserve_node_meta``.
    ``tracing_mode="fake"`` traces FakeTensors: code that reads a value (``.tolist()``) raises
    instead of leaving this call's values in the graph as constants.
    """
    import contextlib

    import torch.fx.traceback as fx_traceback

    from course_lib import compat
    from course_lib.fx import from_torch_fx

    table = DECOMPOSITIONS if table is None else table

    def traced(*a):
        with BeforeDispatch():
            return fn(*a)

    with fx_traceback.preserve_node_meta() if provenance else contextlib.nullcontext():
        return from_torch_fx(compat.make_fx(traced, *args, decompositions=table, tracing_mode=tracing_mode))


def torch_decomposition(op) -> Callable | None:
    """torch's own decomposition of ``op`` (``torch._decomp.decomposition_table``), or None.

    course_lib.aot borrows one when an op on the gradient path has neither a derivative rule nor
    an entry in the course's table (see :func:`course_lib.aot.joint_graph`).
    """
    from torch._decomp import decomposition_table

    return decomposition_table.get(op)


def one_hot(x: torch.Tensor, num_classes: int = -1):
    """``F.one_hot`` as torch traces it for a FakeTensor: ``x[..., None] == iota(num_classes)``, as int64.

    Eager one_hot first checks ``0 <= x < num_classes`` by reading the values (``.item()``);
    here an index out of range gives a row of zeros instead of an error, as a compiled one_hot
    without torch's ``_assert_async`` checks does. Without ``num_classes`` the width is
    ``x.max() + 1``, a value no static trace can know: that call is left to fail as before.
    """
    if num_classes < 0:
        return NotImplemented
    iota = torch.ops.prims.iota.default(num_classes, start=0, step=1, dtype=x.dtype, device=x.device,
                                        requires_grad=False)  # fmt: skip
    hot = torch.ops.aten.eq.Tensor(torch.ops.aten.unsqueeze.default(x, -1), iota)
    return torch.ops.aten._to_copy.default(hot, dtype=torch.int64)


def attention_with_dense_mask(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                              enable_gqa=False):  # fmt: skip
    """``scaled_dot_product_attention`` with its mask's last dimension made dense, where attention
    stays whole (:data:`FUSED_ATTENTION`).

    torch picks the kernel inside this CompositeImplicit op, from the arguments' layouts: the fused
    kernels read a mask row by row, so a mask whose last stride is not 1 sends the call to the math
    path (bmm, softmax, bmm) and nothing later can undo it. Under ``torch.compile`` transformers'
    BERT and ViT hand over such a mask, a ``[B, 1, L, S]`` broadcast (stride 0 along keys; ViT's is
    all True), where eager drops the mask and gets the fused kernel. Inductor rebuilds attention
    from the math with its pattern matcher (``torch/_inductor/fx_passes/fuse_attention.py``); the
    course copies the mask (``B x L x S`` booleans) before torch chooses, which changes no value.
    """
    if attn_mask is None or q.device.type not in _table.FUSED_ATTENTION or attn_mask.stride(-1) == 1:
        return NotImplemented
    return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask.contiguous(), dropout_p, is_causal,
                                                     scale=scale, enable_gqa=enable_gqa)  # fmt: skip


#: torch-level functions :class:`BeforeDispatch` rewrites, {function: replacement}
#: (``torch.nn.functional.one_hot`` is ``torch._C._nn.one_hot``)
BEFORE_DISPATCH: dict = {torch._C._nn.one_hot: one_hot,
                         torch._C._nn.scaled_dot_product_attention: attention_with_dense_mask}  # fmt: skip


class BeforeDispatch(TorchFunctionMode):
    """Rewrites the functions of :data:`BEFORE_DISPATCH` as they are called (a ``TorchFunctionMode``).

    Why a second table: an op that is ``CompositeImplicitAutograd`` (one_hot, in Switch
    Transformers' router) has no kernel of its own; its C++ body runs *before* the dispatcher,
    so the tracer, and the decomposition table it consults, only see the ops that body calls.
    one_hot's body reads values to check them (``x.min().item()``), which a trace cannot
    record: make_fx stops with "trying to get value out of a tracing tensor". torch's AOT
    Autograd traces FakeTensors, for which the same C++ takes a traceable branch; the course
    traces real tensors, so it swaps the call at the ``__torch_function__`` layer, above the C++
    body, for that traceable form.

    Second job: grad mode. A trace records ATen ops, and ATen ops do not say whether gradients
    were on when they ran; the course differentiates the graph by its own rules, which would go
    straight through a ``with torch.no_grad():`` block (Dynamo keeps the block as
    ``torch._C._set_grad_enabled`` calls; HRM runs all but its last reasoning steps in one). So
    where gradients were on when the trace began and are off now, every tensor a call returns is
    passed through ``detach``, which the derivative rules read as "no gradient", as autograd would.
    An in-place op there writes through ``detach`` of its tensor (``y.mul_(2)`` becomes
    ``y.detach().mul_(2)``): autograd does not record it, so functionalization makes the new value a
    ``hidden_write`` (:mod:`course_lib.aot.functionalize`), whose derivative goes straight to ``y``.
    """

    def __init__(self):
        super().__init__()
        self.grad_at_start = torch.is_grad_enabled()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        hidden = self.grad_at_start and not torch.is_grad_enabled() and _writes_in_place(func, args)
        if hidden:  # under no_grad: a write autograd does not see, as a write through detach
            target, args = args[0], (args[0].detach(), *args[1:])
        rewrite = BEFORE_DISPATCH.get(func)
        out = rewrite(*args, **kwargs) if rewrite is not None else NotImplemented
        if out is NotImplemented:
            out = func(*args, **kwargs)
        if hidden:  # the tensor itself, as an in-place op returns it (``y += 1`` keeps y's history)
            return target if isinstance(out, torch.Tensor) else out
        if self.grad_at_start and not torch.is_grad_enabled() and func not in _KEEPS_GRAPH:
            return pytree.tree_map_only(torch.Tensor, _cut, out)
        return out


def _writes_in_place(func, args) -> bool:
    """A Tensor method that writes its first argument (``mul_``, ``clamp_``, ``__setitem__``, ``__iadd__``)."""
    name = getattr(func, "__name__", "")
    in_place = (name.endswith("_") and not name.startswith("_")) or name in _IN_PLACE_DUNDERS
    return (in_place and name not in ("requires_grad_", "detach_") and bool(args) and isinstance(args[0], torch.Tensor)
            and (args[0].is_floating_point() or args[0].is_complex()))  # fmt: skip


_IN_PLACE_DUNDERS = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__"}


def _cut(t: torch.Tensor) -> torch.Tensor:
    return t.detach() if t.is_floating_point() or t.is_complex() else t


#: functions that return their argument's own tensor object, whose identity later code relies on
_KEEPS_GRAPH = {torch.Tensor.detach, torch.Tensor.requires_grad_, torch.Tensor.__setitem__}


def _example_inputs(graph) -> list:
    vals = []
    for node in graph.nodes:
        if node.op == "placeholder":
            if "val" not in node.meta:
                raise ValueError(
                    f"decompose(graph) needs example inputs: placeholder {node.name} has no meta['val']; "
                    "call decompose(graph, *example_inputs)"
                )
            val = node.meta["val"]
            if type(val).__name__ == "FakeTensor":  # a fake tensor has no data: trace with zeros
                import torch

                val = torch.zeros(tuple(val.shape), dtype=val.dtype)
            vals.append(val)
    return vals


def decompose(graph, *example_inputs: Any, table: dict | None = None, check: bool = True):
    """A new Graph computing the same as ``graph`` with only :data:`PRIMITIVES` left.

    Example inputs default to the placeholders' ``meta["val"]`` (set by ShapeProp or by a
    tracer). With ``check``, raises ValueError naming any op the table could not remove.
    """
    from course_lib.fx import Interpreter

    inputs = list(example_inputs) or _example_inputs(graph)
    table = DECOMPOSITIONS if table is None else table
    out = trace(lambda *a: Interpreter(graph).run(*a), *inputs, table=table)
    if check and table is DECOMPOSITIONS:
        left = non_primitive(out)
        if left:
            raise ValueError(f"decompose: no decomposition for {', '.join(left)} (add one with @register)")
    return out


def _op_nodes(graph):
    return [n for n in graph.nodes if n.op == "call_function"]


def non_primitive(graph) -> list[str]:
    """Names of the call_function targets that are not in :data:`PRIMITIVES` (sorted, unique)."""
    return sorted({str(n.target) for n in _op_nodes(graph) if n.target not in PRIMITIVES})


def primitive_counts(graph) -> dict[str, int]:
    """How many nodes of each kind the graph calls (``aten`` = not a primitive)."""
    counts = Counter(kind(n.target) for n in _op_nodes(graph))
    return {k: counts.get(k, 0) for k in ("pointwise", "reduction", "view", "extern", "aten")}
