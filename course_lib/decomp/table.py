"""The decomposition table: ATen ops -> a small primitive set (teaches torch/_decomp/decompositions.py).

Position in the pipeline: ATen-level FX graph --> **decompose** --> graph of primitives only
--> course_lib.aot (derivative rules exist only for primitives) --> course_lib.inductor.

Each entry is a short typed function registered with ``@register(aten.op.overload)``, written
in terms of other ATen ops, exactly like ``@register_decomposition(aten.silu)`` in torch.
An entry may call ops that are themselves in the table: :func:`course_lib.decomp.decompose`
traces with the table active, so decompositions apply recursively until only primitives remain.

The primitive set (:data:`PRIMITIVES`) is deliberately small:

* pointwise: add, sub, mul, div, neg, exp, log, tanh, sqrt, rsqrt, sin, cos, erf, pow,
  maximum, minimum, where, comparisons, scalar_tensor, _to_copy (dtype conversion)
* reductions: sum.dim_IntList, amax
* views: view, permute, expand
* extern: mm, bmm (matmul is never decomposed; a backend calls a library for it)
* index: prims.iota (0, 1, ..., n-1), gather (one element per row, as nll_loss picks it)

Simplifications against torch: pointwise primitives broadcast implicitly (torch's ``prims``
require explicit ``broadcast_in_dim``); no type promotion logic (inputs are one float dtype);
no out= variants, no in-place ops.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Callable, Sequence

import torch
import torch.utils._pytree as pytree
from torch import Tensor

aten = torch.ops.aten

DECOMPOSITIONS: dict = {}

PRIMITIVES = frozenset(
    {
        aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.neg.default,
        aten.exp.default, aten.log.default, aten.tanh.default, aten.sqrt.default, aten.rsqrt.default,
        aten.sin.default, aten.cos.default, aten.erf.default, aten.pow.Tensor_Scalar,
        aten.maximum.default, aten.minimum.default, aten.where.self, aten.scalar_tensor.default,
        aten.gt.Scalar, aten.gt.Tensor, aten.lt.Scalar, aten.lt.Tensor, aten.ge.Scalar, aten.le.Scalar,
        aten.eq.Scalar, aten.eq.Tensor, aten.ne.Scalar, aten._to_copy.default,
        aten.sum.dim_IntList, aten.amax.default,
        aten.view.default, aten.permute.default, aten.expand.default,
        aten.mm.default, aten.bmm.default,
        torch.ops.prims.iota.default, aten.gather.default,
    }
)  # fmt: skip

KIND = {  # what each primitive is, for counting and for the notebook's tables
    aten.sum.dim_IntList: "reduction", aten.amax.default: "reduction",
    aten.view.default: "view", aten.permute.default: "view", aten.expand.default: "view",
    aten.mm.default: "extern", aten.bmm.default: "extern", torch.ops.prims.iota.default: "index",
    aten.gather.default: "index",
}  # fmt: skip


def kind(op) -> str:
    """'pointwise' | 'reduction' | 'view' | 'extern' for a primitive; 'aten' otherwise."""
    if op not in PRIMITIVES:
        return "aten"
    return KIND.get(op, "pointwise")


def register(*ops, complex_ok: bool = False) -> Callable:
    """Decorator: ``@register(aten.silu.default)`` puts the function in :data:`DECOMPOSITIONS`.
    ``complex_ok``: the entry is right for complex values too (it moves values, never compares them)."""

    def wrap(fn: Callable) -> Callable:
        entry = fn if complex_ok else _real_only(fn)
        for op in ops:
            if op in DECOMPOSITIONS:
                raise ValueError(f"{op} already has a decomposition ({DECOMPOSITIONS[op].__name__})")
            DECOMPOSITIONS[op] = entry
        return fn

    return wrap


def _real_only(fn: Callable) -> Callable:
    """The entries are written for real numbers (``abs`` as ``where(x < 0, -x, x)``): an op with a
    complex tensor among its arguments is kept whole (``NotImplemented`` tells the tracer to record
    the op itself), as torch keeps complex ops out of most of its own decompositions."""

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        return NotImplemented if has_complex(args, kwargs) else fn(*args, **kwargs)

    return entry


def has_complex(*values) -> bool:
    """Is any tensor in ``values`` (nested lists, tuples and dicts too) complex?"""
    return any(isinstance(t, Tensor) and t.is_complex() for t in pytree.tree_leaves(values))


# ------------------------------------------------------------------ helpers (not registered)


def _dims(x: Tensor, dim: int | Sequence[int] | None) -> list[int]:
    """Normalise a reduction's ``dim`` argument to a sorted list of non-negative axes."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.dim()))
    if x.dim() == 0:  # a 0-d tensor's dim 0 (or -1) is the tensor itself
        return []
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted(d % x.dim() for d in dims)


def _count(x: Tensor, dims: list[int]) -> int:
    return math.prod(x.shape[d] for d in dims)


HALF = (torch.float16, torch.bfloat16)


def in_float32(fn: Callable | None = None, *, out_dtypes: Callable | None = None) -> Callable:
    """Decorator: a decomposition that computes half-precision (float16, bfloat16) tensors in
    float32 and rounds its results back once, as eager's kernels accumulate in float and as
    torch._decomp's do (``utils.get_computation_dtype``). Written in half, layer norm would round
    its mean and variance to 8 mantissa bits (bfloat16) before normalising with them.

    Results come back in the first half dtype among the arguments, or, with ``out_dtypes``
    (the arguments -> one dtype per result), in those: batch norm returns its statistics in the
    dtype of its running statistics, which mixed precision keeps in float32.
    """
    if fn is None:
        return functools.partial(in_float32, out_dtypes=out_dtypes)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        half = next((a.dtype for a in args if isinstance(a, Tensor) and a.dtype in HALF), None)
        if half is None:
            return fn(*args, **kwargs)

        def up(a):
            return aten._to_copy.default(a, dtype=torch.float32) if isinstance(a, Tensor) and a.dtype in HALF else a

        def down(t, dtype=half):  # a float32 result back to ``dtype``; others (indices, masks) as they are
            narrow = isinstance(t, Tensor) and t.dtype == torch.float32 and dtype != torch.float32
            return aten._to_copy.default(t, dtype=dtype) if narrow else t

        out = fn(*map(up, args), **{k: up(v) for k, v in kwargs.items()})
        if out_dtypes is not None:
            dtypes = out_dtypes(*args)
            return tuple(map(down, out, dtypes)) if isinstance(out, tuple) else down(out, dtypes[0])
        return tuple(map(down, out)) if isinstance(out, tuple) else down(out)

    return wrapped


def _promoted(*args, **kwargs) -> tuple:
    """The result dtype of a pointwise op: its tensor arguments' dtypes promoted (bf16 with float32
    gives float32), as eager's type promotion decides it."""
    dtypes = [a.dtype for a in args if isinstance(a, Tensor)]
    return (functools.reduce(torch.promote_types, dtypes),)


#: in_float32 for pointwise math written as several ops: one rounding, as eager's single kernel
pointwise_in_float32 = in_float32(out_dtypes=_promoted)


def int_to_float(fn: Callable) -> Callable:
    """Decorator: integer and bool tensors enter as float32, for an op whose result is a float
    whatever its input (sigmoid, sinh, logsumexp...: torch's INT_TO_FLOAT type promotion).
    Written on the integers the decomposition would compute wrong values, not just another dtype:
    ``-x`` of a uint8 wraps (sigmoid(5) became 1 / (1 + exp(251))), and a bool has no ``-x``."""

    def up(a):
        floating = not isinstance(a, Tensor) or a.dtype.is_floating_point or a.dtype.is_complex
        return a if floating else aten._to_copy.default(a, dtype=torch.get_default_dtype())

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return fn(*map(up, args), **{k: up(v) for k, v in kwargs.items()})

    return wrapped


def _scalar(value: float, like: Tensor) -> Tensor:
    """A 0-d tensor (broadcasts anywhere) with ``like``'s dtype and device."""
    return aten.scalar_tensor.default(value, dtype=like.dtype, device=like.device)


def _zeros_like(x: Tensor) -> Tensor:
    return aten.mul.Tensor(x, 0.0)


# ------------------------------------------------------------------ activations


# Ties. These decompositions are differentiated by the course's rules, so the form chosen decides the
# gradient where x sits exactly on a bound. ``maximum``'s rule splits a tie in half; torch gives
# relu's 0 (``threshold_backward``), clamp's whole gradient (``clamp_backward``: >=, <=) and
# hardtanh's 0 (strict bounds). A ``where`` on the right comparison gives each of them exactly.
# Ties are not rare: a zero-initialised bias on a zero input (SwinV2's position-bias MLP) is 0 before
# its relu, and ``maximum`` gave its gradient off by 0.25 of the largest.


@register(aten.relu.default)
def relu(x: Tensor) -> Tensor:
    return aten.where.self(aten.le.Scalar(x, 0), _scalar(0.0, x), x)  # NaN stays NaN


@register(aten.sigmoid.default)
@int_to_float
@pointwise_in_float32
def sigmoid(x: Tensor) -> Tensor:
    return aten.div.Tensor(_scalar(1.0, x), aten.add.Tensor(aten.exp.default(aten.neg.default(x)), 1.0))


@register(aten.silu.default)
@pointwise_in_float32
def silu(x: Tensor) -> Tensor:
    return aten.mul.Tensor(x, aten.sigmoid.default(x))


@register(aten.gelu.default)
@pointwise_in_float32
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    if approximate == "tanh":
        inner = aten.mul.Tensor(aten.add.Tensor(x, aten.mul.Tensor(aten.pow.Tensor_Scalar(x, 3), 0.044715)),
                                math.sqrt(2.0 / math.pi))  # fmt: skip
        return aten.mul.Tensor(aten.mul.Tensor(x, 0.5), aten.add.Tensor(aten.tanh.default(inner), 1.0))
    cdf = aten.add.Tensor(aten.erf.default(aten.mul.Tensor(x, 1.0 / math.sqrt(2.0))), 1.0)
    return aten.mul.Tensor(aten.mul.Tensor(x, 0.5), cdf)


@register(aten.softplus.default)
@pointwise_in_float32
def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    bx = aten.mul.Tensor(x, beta)
    soft = aten.div.Tensor(aten.log1p.default(aten.exp.default(bx)), beta)
    return aten.where.self(aten.gt.Scalar(bx, threshold), x, soft)


@register(aten.leaky_relu.default)
def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return aten.where.self(aten.gt.Scalar(x, 0), x, aten.mul.Tensor(x, negative_slope))


@register(aten.elu.default)
@pointwise_in_float32
def elu(x: Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Tensor:
    neg = aten.mul.Tensor(aten.expm1.default(aten.mul.Tensor(x, input_scale)), alpha)
    return aten.mul.Tensor(aten.where.self(aten.gt.Scalar(x, 0), x, neg), scale)


@register(aten.hardtanh.default)
def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """clamp, with the gradient 0 on the bounds (``hardtanh_backward`` keeps only min < x < max)."""
    return aten.where.self(aten.le.Scalar(x, min_val), _scalar(min_val, x),
                           aten.where.self(aten.ge.Scalar(x, max_val), _scalar(max_val, x), x))  # fmt: skip


@register(aten.hardsigmoid.default)
@pointwise_in_float32
def hardsigmoid(x: Tensor) -> Tensor:
    return aten.div.Tensor(hardtanh(aten.add.Tensor(x, 3.0), 0.0, 6.0), 6.0)  # 0 gradient at +-3, as torch


@register(aten.hardswish.default)
@pointwise_in_float32
def hardswish(x: Tensor) -> Tensor:
    return aten.mul.Tensor(x, aten.hardsigmoid.default(x))


@register(aten.mish.default)
@pointwise_in_float32
def mish(x: Tensor) -> Tensor:
    return aten.mul.Tensor(x, aten.tanh.default(aten.softplus.default(x)))


@register(aten.logit.default)
@int_to_float
@pointwise_in_float32
def logit(x: Tensor, eps: float | None = None) -> Tensor:
    if eps is not None:
        x = aten.clamp.default(x, eps, 1.0 - eps)
    return aten.log.default(aten.div.Tensor(x, aten.rsub.Scalar(x, 1.0)))


@register(aten._softmax.default)
def softmax(x: Tensor, dim: int, half_to_float: bool = False) -> Tensor:
    """``half_to_float``: a half-precision input gives a float32 result."""
    if half_to_float and x.dtype in HALF:
        return _softmax(aten._to_copy.default(x, dtype=torch.float32), dim)
    return _softmax(x, dim)


@in_float32
def _softmax(x: Tensor, dim: int) -> Tensor:
    shifted = aten.sub.Tensor(x, aten.amax.default(x, [dim], True))
    e = aten.exp.default(shifted)
    return aten.div.Tensor(e, aten.sum.dim_IntList(e, [dim], True))


@register(aten._log_softmax.default)
def log_softmax(x: Tensor, dim: int, half_to_float: bool = False) -> Tensor:
    if half_to_float and x.dtype in HALF:
        return _log_softmax(aten._to_copy.default(x, dtype=torch.float32), dim)
    return _log_softmax(x, dim)


@in_float32
def _log_softmax(x: Tensor, dim: int) -> Tensor:
    shifted = aten.sub.Tensor(x, aten.amax.default(x, [dim], True))
    lse = aten.log.default(aten.sum.dim_IntList(aten.exp.default(shifted), [dim], True))
    return aten.sub.Tensor(shifted, lse)


@register(aten.logsumexp.default)
@int_to_float
@in_float32
def logsumexp(x: Tensor, dim: list[int], keepdim: bool = False) -> Tensor:
    m = aten.amax.default(x, dim, True)
    s = aten.log.default(aten.sum.dim_IntList(aten.exp.default(aten.sub.Tensor(x, m)), dim, True))
    # an infinite maximum is the answer: a row of -inf gives -inf, a row holding +inf gives +inf,
    # where x - m is inf - inf = NaN (torch's logsumexp shifts those rows by 0 instead)
    out = aten.where.self(aten.eq.Scalar(aten.abs.default(m), float("inf")), m, aten.add.Tensor(s, m))
    return out if keepdim else aten.squeeze.dims(out, dim)


# ------------------------------------------------------------------ pointwise math


@register(aten.rsub.Scalar)
def rsub(x: Tensor, other: float, alpha: float = 1) -> Tensor:
    return aten.add.Tensor(aten.neg.default(aten.mul.Tensor(x, alpha) if alpha != 1 else x), other)


@register(aten.reciprocal.default)
def reciprocal(x: Tensor) -> Tensor:
    return aten.div.Tensor(_scalar(1.0, x), x)


@register(aten.square.default)
def square(x: Tensor) -> Tensor:
    return aten.mul.Tensor(x, x)


@register(aten.abs.default)
def abs_(x: Tensor) -> Tensor:
    """|x|, whose gradient at 0 is 0 (torch: ``grad * sign(x)``): 0 is ``x * 0`` there, not ``x``."""
    return aten.where.self(aten.lt.Scalar(x, 0), aten.neg.default(x),
                           aten.where.self(aten.gt.Scalar(x, 0), x, aten.mul.Tensor(x, 0)))  # fmt: skip


@register(aten.sign.default)
def sign(x: Tensor) -> Tensor:
    if x.dtype == torch.bool:  # True is positive: the sign of a bool is itself (and bools cannot subtract)
        return aten._to_copy.default(x, dtype=torch.bool)
    pos = aten._to_copy.default(aten.gt.Scalar(x, 0), dtype=x.dtype)
    neg = aten._to_copy.default(aten.lt.Scalar(x, 0), dtype=x.dtype)
    return aten.sub.Tensor(pos, neg)


@register(aten.clamp.default)
def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    if min is not None:
        x = aten.clamp_min.default(x, min)
    if max is not None:
        x = aten.clamp_max.default(x, max)
    return x


@register(aten.clamp.Tensor)
def clamp_tensor(x: Tensor, min: Tensor | None = None, max: Tensor | None = None) -> Tensor:
    """Bounds that are tensors (T5 in float16 clamps its activations to ``finfo.max - 1000``, a
    0-d tensor). ``where`` rather than ``maximum``/``minimum``: at a tie ``x`` keeps the whole
    gradient, as torch's ``clamp_backward`` gives it, where ``maximum``'s rule would split it."""
    # a NaN bound gives NaN, as in eager: x < NaN is false, so a second where takes a bound unequal to itself
    if min is not None:
        x = aten.where.self(aten.eq.Tensor(min, min), aten.where.self(aten.lt.Tensor(x, min), min, x), min)
    if max is not None:
        x = aten.where.self(aten.eq.Tensor(max, max), aten.where.self(aten.gt.Tensor(x, max), max, x), max)
    return x


@register(aten.clamp_min.Tensor)
def clamp_min_tensor(x: Tensor, min: Tensor) -> Tensor:
    return clamp_tensor(x, min=min)


@register(aten.clamp_max.Tensor)
def clamp_max_tensor(x: Tensor, max: Tensor) -> Tensor:
    return clamp_tensor(x, max=max)


@register(aten.clamp_min.default)
def clamp_min(x: Tensor, min: float) -> Tensor:
    return aten.where.self(aten.lt.Scalar(x, min), _scalar(min, x), x)  # a tie keeps the gradient


@register(aten.clamp_max.default)
def clamp_max(x: Tensor, max: float) -> Tensor:
    return aten.where.self(aten.gt.Scalar(x, max), _scalar(max, x), x)


@register(aten.expm1.default)
@int_to_float
@pointwise_in_float32
def expm1(x: Tensor) -> Tensor:
    return aten.sub.Tensor(aten.exp.default(x), 1.0)  # loses precision near 0; torch keeps expm1


@register(aten.log1p.default)
@int_to_float
@pointwise_in_float32
def log1p(x: Tensor) -> Tensor:
    return aten.log.default(aten.add.Tensor(x, 1.0))


@register(aten.log2.default)
@int_to_float
@pointwise_in_float32
def log2(x: Tensor) -> Tensor:
    return aten.mul.Tensor(aten.log.default(x), 1.0 / math.log(2.0))


@register(aten.exp2.default)
@int_to_float
@pointwise_in_float32
def exp2(x: Tensor) -> Tensor:
    return aten.exp.default(aten.mul.Tensor(x, math.log(2.0)))


@register(aten.sinh.default)
@int_to_float
@pointwise_in_float32
def sinh(x: Tensor) -> Tensor:
    return aten.mul.Tensor(aten.sub.Tensor(aten.exp.default(x), aten.exp.default(aten.neg.default(x))), 0.5)


@register(aten.cosh.default)
@int_to_float
@pointwise_in_float32
def cosh(x: Tensor) -> Tensor:
    return aten.mul.Tensor(aten.add.Tensor(aten.exp.default(x), aten.exp.default(aten.neg.default(x))), 0.5)


@register(aten.tan.default)
@int_to_float
@pointwise_in_float32
def tan(x: Tensor) -> Tensor:
    return aten.div.Tensor(aten.sin.default(x), aten.cos.default(x))


@register(aten.addcmul.default)
@pointwise_in_float32
def addcmul(x: Tensor, t1: Tensor, t2: Tensor, value: float = 1) -> Tensor:
    return aten.add.Tensor(x, aten.mul.Tensor(aten.mul.Tensor(t1, t2), value))


@register(aten.addcdiv.default)
@pointwise_in_float32
def addcdiv(x: Tensor, t1: Tensor, t2: Tensor, value: float = 1) -> Tensor:
    return aten.add.Tensor(x, aten.mul.Tensor(aten.div.Tensor(t1, t2), value))


@register(aten.lerp.Scalar, aten.lerp.Tensor)
@pointwise_in_float32
def lerp(x: Tensor, end: Tensor, weight: float | Tensor) -> Tensor:
    """A weight that is a number, or one per element (``lerp.Tensor``: op_db's masked ops, a learned gate)."""
    return aten.add.Tensor(x, aten.mul.Tensor(aten.sub.Tensor(end, x), weight))


@register(aten.logaddexp.default)
@int_to_float
@pointwise_in_float32
def logaddexp(a: Tensor, b: Tensor) -> Tensor:
    """log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)), which never overflows. Equal arguments give
    a + log 2 directly: two infinities of one sign would otherwise make inf - inf = NaN."""
    near = aten.add.Tensor(aten.maximum.default(a, b),
                           aten.log1p.default(aten.exp.default(aten.neg.default(aten.abs.default(aten.sub.Tensor(a, b))))))  # fmt: skip
    return aten.where.self(aten.eq.Tensor(a, b), aten.add.Tensor(a, math.log(2.0)), near)


@register(aten.hypot.default)
@pointwise_in_float32
def hypot(x: Tensor, y: Tensor) -> Tensor:
    return aten.sqrt.default(aten.add.Tensor(aten.mul.Tensor(x, x), aten.mul.Tensor(y, y)))


@register(aten.xlogy.Tensor)
@int_to_float
@pointwise_in_float32
def xlogy(x: Tensor, y: Tensor) -> Tensor:
    return aten.where.self(aten.eq.Scalar(x, 0), _zeros_like(x), aten.mul.Tensor(x, aten.log.default(y)))


@register(aten.tanh_backward.default)
@pointwise_in_float32
def tanh_backward(grad: Tensor, y: Tensor) -> Tensor:
    return aten.mul.Tensor(grad, aten.rsub.Scalar(aten.mul.Tensor(y, y), 1.0))


@register(aten.sigmoid_backward.default)
@pointwise_in_float32
def sigmoid_backward(grad: Tensor, y: Tensor) -> Tensor:
    return aten.mul.Tensor(aten.mul.Tensor(grad, y), aten.rsub.Scalar(y, 1.0))


@register(aten.threshold_backward.default)
def threshold_backward(grad: Tensor, x: Tensor, threshold: float) -> Tensor:
    return aten.where.self(aten.le.Scalar(x, threshold), _zeros_like(grad), grad)


@register(aten.mse_loss.default)
@pointwise_in_float32
def mse_loss(x: Tensor, target: Tensor, reduction: int = 1) -> Tensor:
    d = aten.sub.Tensor(x, target)
    sq = aten.mul.Tensor(d, d)
    return {0: sq, 1: aten.mean.default(sq), 2: aten.sum.default(sq)}[reduction]


@register(aten.nll_loss_forward.default)
def nll_loss_forward(x: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                     ignore_index: int) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``-x[i, target[i]]`` by gather (one load per row); ignored rows count zero."""
    if weight is None and x.dim() == 1:  # one unbatched row (C,) with a 0-d target: a batch of one
        row = aten.view.default(x, [1, x.shape[0]])
        out, total = nll_loss_forward(row, aten.view.default(target, [1]), None, reduction, ignore_index)
        return (aten.view.default(out, []) if reduction == 0 else out), total
    if weight is not None or x.dim() != 2:
        raise NotImplementedError("nll_loss_forward: the course decomposes (N, C) inputs without class weights")
    n = x.shape[0]
    keep = aten.ne.Scalar(target, ignore_index)
    safe = aten.where.self(keep, target, aten.scalar_tensor.default(0, dtype=target.dtype, device=target.device))
    picked = aten.view.default(aten.gather.default(x, 1, aten.view.default(safe, [n, 1])), [n])
    valid = aten._to_copy.default(keep, dtype=x.dtype)
    losses = aten.neg.default(aten.mul.Tensor(picked, valid))
    total = aten.sum.dim_IntList(valid, [0])
    if reduction == 0:
        return losses, total
    summed = aten.sum.dim_IntList(losses, [0])
    return (summed if reduction == 2 else aten.div.Tensor(summed, total)), total


# ------------------------------------------------------------------ reductions


@register(aten.sum.default)
def sum_all(x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """The sum of every element, in ``dtype`` where given (an int32 ``matmul`` folded into mul and sum
    asks for int32; without it an integer sum is int64)."""
    return aten.sum.dim_IntList(x, list(range(x.dim())), dtype=dtype)


@register(aten.mean.dim)
@in_float32
def mean_dim(x: Tensor, dim: list[int] | None, keepdim: bool = False, dtype: torch.dtype | None = None) -> Tensor:
    dims = _dims(x, dim)
    return aten.div.Tensor(aten.sum.dim_IntList(x, dims, keepdim), _count(x, dims))


@register(aten.mean.default)
def mean_all(x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    return aten.mean.dim(x, list(range(x.dim())))


@register(aten.var.correction)
@in_float32
def var(x: Tensor, dim: list[int] | None = None, *, correction: float | None = None, keepdim: bool = False) -> Tensor:
    dims = _dims(x, dim)
    centred = aten.sub.Tensor(x, aten.mean.dim(x, dims, True))
    # never below 0: a variance of fewer values than the correction is 0 / 0 = NaN, as in eager
    n = torch.sym_max(_count(x, dims) - (1 if correction is None else correction), 0)
    return aten.div.Tensor(aten.sum.dim_IntList(aten.mul.Tensor(centred, centred), dims, keepdim), n)


@register(aten.amin.default)
def amin(x: Tensor, dim: list[int] = (), keepdim: bool = False) -> Tensor:
    """min(x) = -max(-x) holds for floats only: an unsigned -x wraps (uint8: -0 is 0, -5 is 251), a
    signed one overflows at the type's minimum (int8: -(-128) is -128), and a bool has no -x.
    Integers keep ``amin``, which has no gradient and which code generators reduce directly."""
    if not x.dtype.is_floating_point:
        return NotImplemented
    return aten.neg.default(aten.amax.default(aten.neg.default(x), dim, keepdim))


@register(aten.native_layer_norm.default)
@in_float32
def native_layer_norm(x: Tensor, normalized_shape: list[int], weight: Tensor | None, bias: Tensor | None,
                      eps: float) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    mean = aten.mean.dim(x, dims, True)
    centred = aten.sub.Tensor(x, mean)
    variance = aten.div.Tensor(aten.sum.dim_IntList(aten.mul.Tensor(centred, centred), dims, True), _count(x, dims))
    rstd = aten.rsqrt.default(aten.add.Tensor(variance, eps))
    out = aten.mul.Tensor(centred, rstd)
    if weight is not None:
        out = aten.mul.Tensor(out, weight)
    if bias is not None:
        out = aten.add.Tensor(out, bias)
    return out, mean, rstd


# ------------------------------------------------------------------ views and matmul


@register(aten.t.default)
def t(x: Tensor) -> Tensor:
    return aten.view.default(x, list(x.shape)) if x.dim() < 2 else aten.permute.default(x, [1, 0])  # a view, never x


@register(aten.transpose.int)
def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    perm = list(range(x.dim()))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return aten.permute.default(x, perm)


@register(aten.unsqueeze.default)
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    shape = list(x.shape)
    shape.insert(dim % (x.dim() + 1), 1)
    return aten.view.default(x, shape)


@register(aten.stack.default)
def stack(tensors: list, dim: int = 0) -> Tensor:
    """A new axis on every input, then one concatenation (Cohere's interleaved rotary)."""
    d = dim % (tensors[0].dim() + 1)
    return aten.cat.default([unsqueeze(t, d) for t in tensors], d)


@register(aten.squeeze.dim, aten.squeeze.dims)
def squeeze(x: Tensor, dim: int | list[int]) -> Tensor:
    # unlike a reduction's dim, an empty list here means "squeeze nothing", not "every dim"
    dims = {d % max(x.dim(), 1) for d in ([dim] if isinstance(dim, int) else dim)}
    return aten.view.default(x, [s for i, s in enumerate(x.shape) if not (i in dims and s == 1)])


@register(aten._unsafe_view.default, aten.reshape.default)
def reshape(x: Tensor, shape: list[int]) -> Tensor:
    if not x.is_contiguous():
        x = aten._to_copy.default(x, memory_format=torch.contiguous_format)
    return aten.view.default(x, shape)


@register(aten.clone.default)
def clone(x: Tensor, memory_format: torch.memory_format | None = None) -> Tensor:
    if memory_format is None:  # clone keeps the strides; .contiguous() asks for contiguous_format
        return aten._to_copy.default(x)
    return aten._to_copy.default(x, memory_format=memory_format)


def _scale_for(x: Tensor, scale: float) -> float:
    """An ``alpha`` or ``beta`` as eager's kernel applies it: converted to ``x``'s type first, so for
    integers truncated (``beta=1.7`` scales an int64 ``baddbmm`` by 1, not 1.7, and keeps it int64)."""
    return scale if x.dtype.is_floating_point or x.dtype.is_complex else int(scale)


@register(aten.addmm.default)
def addmm(bias: Tensor, a: Tensor, b: Tensor, beta: float = 1, alpha: float = 1) -> Tensor:
    beta, alpha = _scale_for(bias, beta), _scale_for(bias, alpha)
    prod = aten.mm.default(a, b)
    if alpha != 1:
        prod = aten.mul.Tensor(prod, alpha)
    return aten.add.Tensor(aten.mul.Tensor(bias, beta) if beta != 1 else bias, prod)


@register(aten.mv.default)
def mv(a: Tensor, v: Tensor) -> Tensor:
    return aten.view.default(aten.mm.default(a, aten.view.default(v, [v.shape[0], 1])), [a.shape[0]])


@register(aten.dot.default)
def dot(a: Tensor, b: Tensor) -> Tensor:
    out = aten.sum.dim_IntList(aten.mul.Tensor(a, b), [0])  # an integer sum is int64; dot keeps int32, int8
    return out if out.dtype == a.dtype else aten._to_copy.default(out, dtype=a.dtype)


@register(aten.baddbmm.default)
def baddbmm(x: Tensor, a: Tensor, b: Tensor, beta: float = 1, alpha: float = 1) -> Tensor:
    beta, alpha = _scale_for(x, beta), _scale_for(x, alpha)
    return aten.add.Tensor(aten.mul.Tensor(x, beta), aten.mul.Tensor(aten.bmm.default(a, b), alpha))


def _share_kv_heads(t: Tensor, heads: int) -> Tensor:
    """Grouped-query attention (``enable_gqa``): each of k/v's heads serves heads // kv_heads query heads."""
    if t.dim() < 3 or t.shape[-3] == heads:
        return t
    *lead, kv, n, e = t.shape
    spread = aten.expand.default(aten.view.default(t, [*lead, kv, 1, n, e]), [*lead, kv, heads // kv, n, e])
    return aten.view.default(aten.clone.default(spread, memory_format=torch.contiguous_format), [*lead, heads, n, e])


#: Device types on which attention stays one fused library kernel instead of bmm, softmax, bmm.
#: ``scaled_dot_product_attention`` reaches these entries on a fused kernel's path: FlashAttention
#: for CPU, memory-efficient attention on CUDA. Decomposed, a compiler fuses the softmax with its
#: neighbours, but the ``[L, S]`` scores go through memory twice and each product is its own
#: library call; the fused kernel keeps a tile of scores on chip (Module 5's flash attention) and
#: saves only the rows' logsumexp for its backward. Inductor keeps both kernels whole
#: (``make_fallback`` in torch/_inductor/lowering.py), and its pattern matcher even rewrites
#: hand-written attention into them. The course keeps them on CUDA, where the fused kernel wins,
#: and decomposes on the CPU, where Module 4's labs read the decomposed graph. Set by
#: ``$COURSE_FUSED_ATTENTION`` (comma-separated device types; empty: decompose everywhere).
#: Kept ops have derivative rules in course_lib.aot.rules and run as extern calls.
FUSED_ATTENTION: set[str] = {d for d in os.environ.get("COURSE_FUSED_ATTENTION", "cuda").split(",") if d}


@contextlib.contextmanager
def fused_attention(devices):
    """Within the block, attention stays whole on ``devices`` only (``()``: decomposed everywhere)."""
    saved = set(FUSED_ATTENTION)
    FUSED_ATTENTION.clear()
    FUSED_ATTENTION.update(devices)
    try:
        yield
    finally:
        FUSED_ATTENTION.clear()
        FUSED_ATTENTION.update(saved)


def _attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, is_causal: bool,
               scale: float | None) -> tuple[Tensor, Tensor]:  # fmt: skip
    """softmax(q k^T * scale + mask) v with bmm for both products; also the rows' logsumexp."""
    *batch, L, E = q.shape
    S, Ev = k.shape[-2], v.shape[-1]
    b = math.prod(batch)
    k, v = _share_kv_heads(k, q.shape[-3]), _share_kv_heads(v, q.shape[-3])
    q3, k3, v3 = (aten.view.default(aten.clone.default(t, memory_format=torch.contiguous_format), [b, n, e])
                  for t, n, e in ((q, L, E), (k, S, E), (v, S, Ev)))  # fmt: skip
    scores = aten.mul.Tensor(aten.bmm.default(q3, aten.permute.default(k3, [0, 2, 1])),
                             1.0 / math.sqrt(E) if scale is None else scale)  # fmt: skip
    if is_causal:
        rows, cols = (torch.ops.prims.iota.default(n, start=0, step=1, dtype=torch.int64, device=q.device,
                                                   requires_grad=False) for n in (L, S))  # fmt: skip
        future = aten.gt.Tensor(aten.view.default(cols, [1, S]), aten.view.default(rows, [L, 1]))
        scores = aten.where.self(future, _scalar(float("-inf"), scores), scores)
    if attn_mask is not None:
        mask = aten.view.default(aten.clone.default(aten.expand.default(attn_mask, [*batch, L, S]),
                                                    memory_format=torch.contiguous_format), [b, L, S])  # fmt: skip
        if mask.dtype == torch.bool:
            scores = aten.where.self(mask, scores, _scalar(float("-inf"), scores))
        else:
            scores = aten.add.Tensor(scores, mask)
    out = aten.bmm.default(aten._softmax.default(scores, -1, False), v3)
    lse = aten.logsumexp.default(scores, [-1])
    return aten.view.default(out, [*batch, L, Ev]), aten.view.default(lse, [*batch, L])


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_for_cpu(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0, is_causal: bool = False, *,
                            attn_mask: Tensor | None = None, scale: float | None = None) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(output, logsumexp): the fused CPU kernel that scaled_dot_product_attention dispatches to.

    Written out in its math form (torch's ``_scaled_dot_product_attention_math``), so a compiler
    can fuse the softmax itself; Inductor's pattern matcher goes the other way, math -> fused.
    ``scaled_dot_product_attention`` itself is CompositeImplicit: it picks this kernel or the
    math ops before any table is consulted, so it cannot be an entry here.
    """
    if q.device.type in FUSED_ATTENTION:
        return NotImplemented  # the tracer records the op itself: one library call
    if dropout_p != 0.0:
        raise NotImplementedError("flash attention: the course decomposes dropout_p=0 only")
    return _attention(q, k, v, attn_mask, is_causal, scale)


@register(aten._scaled_dot_product_efficient_attention.default)
def efficient_attention(q: Tensor, k: Tensor, v: Tensor, attn_bias: Tensor | None, compute_log_sumexp: bool,
                        dropout_p: float = 0.0, is_causal: bool = False, *,
                        scale: float | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """The CUDA kernel float32 attention dispatches to: (output, logsumexp, philox seed, offset).

    Same math form as the CPU one. The seed and offset feed only dropout's backward, and the
    course decomposes dropout_p=0, so they are zeros.
    """
    if q.device.type in FUSED_ATTENTION:
        if compute_log_sumexp:
            return NotImplemented  # kept whole, as traced
        # The backward needs the logsumexp, and whether a backward follows is not known while
        # tracing the forward (torch asks for it only when an input requires grad): ask always.
        # This call comes back here with True, and the tracer records the op.
        return aten._scaled_dot_product_efficient_attention.default(q, k, v, attn_bias, True, dropout_p, is_causal,
                                                                    scale=scale)  # fmt: skip
    if dropout_p != 0.0:
        raise NotImplementedError("efficient attention: the course decomposes dropout_p=0 only")
    out, lse = _attention(q, k, v, attn_bias, is_causal, scale)
    zero = aten.scalar_tensor.default(0, dtype=torch.int64, device=q.device)
    return out, lse, zero, zero


@register(aten._scaled_dot_product_flash_attention.default)
def flash_attention(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0, is_causal: bool = False,
                    return_debug_mask: bool = False, *, scale: float | None = None) -> tuple:  # fmt: skip
    """FlashAttention-2, the CUDA kernel half-precision attention without a mask dispatches to:
    (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, rng_state, unused, debug_attn_mask).

    The middle entries serve variable-length batches and dropout: ``cum_seq_*`` are undefined
    (None) for a padded batch, ``max_*`` the sequence lengths (ints), ``rng_state`` the Philox seed
    and offset its backward replays dropout with. Kept whole it always returns the logsumexp, so
    nothing needs asking for (compare :func:`efficient_attention`). Decomposed, the logsumexp is
    float32, as the kernel's, and the dropout state is zeros that nothing reads.
    """
    if q.device.type in FUSED_ATTENTION:
        return NotImplemented
    if dropout_p != 0.0 or return_debug_mask:
        raise NotImplementedError("flash attention: the course decomposes dropout_p=0 without a debug mask only")
    out, lse = _attention(q, k, v, None, is_causal, scale)
    lse = aten._to_copy.default(lse, dtype=torch.float32)
    zero = aten.scalar_tensor.default(0, dtype=torch.uint64, device=q.device)
    debug = aten.expand.default(aten.scalar_tensor.default(0, dtype=q.dtype, device=q.device), [0])
    return out, lse, None, None, q.shape[-2], k.shape[-2], aten.expand.default(zero, [2]), zero, debug


@register(aten._scaled_dot_product_cudnn_attention.default)
def cudnn_attention(q: Tensor, k: Tensor, v: Tensor, attn_bias: Tensor | None, compute_log_sumexp: bool,
                    dropout_p: float = 0.0, is_causal: bool = False, return_debug_mask: bool = False, *,
                    scale: float | None = None) -> tuple:  # fmt: skip
    """cuDNN's attention, torch's first choice for half precision on an H100 (torch 2.11): the
    same math, in the same 9 outputs as FlashAttention-2's.

    The course runs FlashAttention-2 in its place (memory-efficient attention when there is a
    bias, or a head size flash cannot take), kernels whose backward rules and operand layouts it
    has and tests; each of those then stays whole or is decomposed by its own entry. The
    logsumexp is the replacement's (``[B, H, L]``, padded for efficient attention), which only
    its own backward reads.
    """
    if dropout_p != 0.0 or return_debug_mask:
        raise NotImplementedError("cuDNN attention: the course takes dropout_p=0 without a debug mask only")
    d = q.shape[-1]
    if attn_bias is None and q.dtype in HALF and d % 8 == 0 and d <= 256 and k.shape[-1] == v.shape[-1] == d:
        return aten._scaled_dot_product_flash_attention.default(q, k, v, dropout_p, is_causal, scale=scale)
    if attn_bias is not None:  # as torch's preprocess_mask hands it to efficient attention
        if attn_bias.dtype == torch.bool:
            attn_bias = aten.where.self(attn_bias, _scalar(0.0, q), _scalar(float("-inf"), q))
        s = k.shape[-2]
        if s % 8 and q.device.type in FUSED_ATTENTION:  # rows padded to the kernel's 8-element steps, cut back
            padded = aten.constant_pad_nd.default(attn_bias, [0, 8 - s % 8])
            attn_bias = aten.slice.Tensor(padded, -1, 0, s)
        attn_bias = aten.expand.default(attn_bias, [*q.shape[:-1], s])  # one bias a head
    out, lse, seed, offset = aten._scaled_dot_product_efficient_attention.default(q, k, v, attn_bias, True, dropout_p,
                                                                                  is_causal, scale=scale)  # fmt: skip
    return out, lse, None, None, q.shape[-2], k.shape[-2], seed, offset, None


# ------------------------------------------------------------------ creation


def _filled(x: Tensor, value: float, dtype: torch.dtype | None, device: torch.device | None) -> Tensor:
    """``x``'s shape filled with ``value``; ``dtype``/``device`` default to ``x``'s (``isreal`` asks for bool).

    The 0-d value expanded, then copied (``_to_copy`` of an expand is dense): the result is a
    tensor of its own, which code may write into (a registered backward's
    ``torch.mm(..., out=zeros_like(x)[a:b])``), while every element of an expand is one memory
    location. Lowered, the copy is a constant, fused like the expand alone was."""
    fill = aten.scalar_tensor.default(value, dtype=dtype or x.dtype, device=device or x.device)
    return aten._to_copy.default(aten.expand.default(fill, list(x.shape)))


@register(aten.zeros_like.default)
def zeros_like(x: Tensor, *, dtype: torch.dtype | None = None, device: torch.device | None = None, **kwargs) -> Tensor:
    return _filled(x, 0.0, dtype, device)


@register(aten.ones_like.default)
def ones_like(x: Tensor, *, dtype: torch.dtype | None = None, device: torch.device | None = None, **kwargs) -> Tensor:
    return _filled(x, 1.0, dtype, device)


@register(aten.full_like.default)
def full_like(x: Tensor, fill_value: float, *, dtype: torch.dtype | None = None, device: torch.device | None = None,
              **kwargs) -> Tensor:  # fmt: skip
    return _filled(x, fill_value, dtype, device)
