"""Derivative rules for the primitive set (teaches tools/autograd/derivatives.yaml and
torch/csrc/autograd/FunctionsManual.cpp, where torch keeps one backward formula per ATen op).

Position: primitive Graph --> (rules, applied in reverse order by :func:`backward_pass`) --> the
backward half of the joint graph.

A rule is ``rule(grad, out, *args, **kwargs) -> tuple`` with one entry per positional argument:
the gradient for that argument, or ``None`` when it is not a tensor or not differentiable.
Rules are written in ATen ops, so under tracing they become graph nodes; pointwise primitives
broadcast, so every gradient goes through :func:`sum_to` to get back to its input's shape.

Where torch differs: torch's formulas may call fused backward ops (``threshold_backward``,
``tanh_backward``); ours call primitives only, so the joint graph stays in the primitive set.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
from torch import Tensor

from course_lib.decomp.models import _iota  # 0, 1, ..., n - 1 as int64 (prims.iota)

aten = torch.ops.aten
prims = torch.ops.prims  # torch's primitives: torch._decomp's entries, borrowed by joint_graph, use them

DERIVATIVES: dict = {}


class LeftToTorch(NotImplementedError):
    """Raised by a rule for a case it does not cover (``scatter_reduce`` with ``amax``, a complex
    base of ``pow``): :func:`course_lib.aot.joint.backward_pass` then takes torch's autograd formula
    for that node, as for an op with no rule at all."""


def derivative(*ops) -> Callable:
    """Decorator: ``@derivative(aten.exp.default)`` registers a rule in :data:`DERIVATIVES`."""

    def wrap(fn: Callable) -> Callable:
        for op in ops:
            DERIVATIVES[op] = fn
        return fn

    return wrap


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def sum_to(g: Tensor, shape) -> Tensor:
    """Undo broadcasting: sum ``g`` down to ``shape`` (leading dims, then size-1 dims)."""
    shape = list(shape)
    if list(g.shape) == shape:
        return g
    lead = g.dim() - len(shape)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    if dims:
        g = aten.sum.dim_IntList(g, dims, True)
    return aten.view.default(g, shape)


def _fit(g: Tensor | None, x) -> Tensor | None:
    return sum_to(g, x.shape) if g is not None and is_tensor(x) else None


def _zeros(g: Tensor) -> Tensor:
    return aten.mul.Tensor(g, 0.0)


def _scalar(value, like: Tensor) -> Tensor:
    """A 0-d tensor of ``like``'s dtype and device (a where's constant branch)."""
    return aten.scalar_tensor.default(value, dtype=like.dtype, device=like.device)


# ------------------------------------------------------------------ pointwise


@derivative(aten.add.Tensor, prims.add.default)
def add(g: Tensor, out: Tensor, a, b, alpha: float = 1) -> tuple:
    return _fit(g, a), _fit(aten.mul.Tensor(g, alpha) if alpha != 1 else g, b)


@derivative(aten.sub.Tensor, prims.sub.default)
def sub(g: Tensor, out: Tensor, a, b, alpha: float = 1) -> tuple:
    return _fit(g, a), _fit(aten.neg.default(aten.mul.Tensor(g, alpha) if alpha != 1 else g), b)


@derivative(aten.add.Scalar, aten.sub.Scalar)
def add_scalar(g: Tensor, out: Tensor, a: Tensor, b, alpha: float = 1) -> tuple:
    return g, None  # x + c, x - c (DiffLlama's lambda_init + ...)


@derivative(aten.rsub.Tensor)
def rsub(g: Tensor, out: Tensor, a, b, alpha: float = 1) -> tuple:
    """``b - alpha * a``."""
    return _fit(aten.neg.default(aten.mul.Tensor(g, alpha) if alpha != 1 else g), a), _fit(g, b)


@derivative(aten.mul.Tensor, prims.mul.default)
def mul(g: Tensor, out: Tensor, a, b) -> tuple:
    return _fit(aten.mul.Tensor(g, b), a), _fit(aten.mul.Tensor(g, a), b)


@derivative(aten.mul.Scalar)
def mul_scalar(g: Tensor, out: Tensor, a: Tensor, b) -> tuple:
    return aten.mul.Scalar(g, b), None  # x * c (CUDA's attention scaling on torch 2.11 reaches us in this form)


@derivative(aten.div.Tensor, prims.div.default)  # prims.div of integers truncates: no gradient there
def div(g: Tensor, out: Tensor, a, b) -> tuple:
    ga = aten.div.Tensor(g, b)
    gb = aten.neg.default(aten.mul.Tensor(g, aten.div.Tensor(out, b))) if is_tensor(b) else None
    return _fit(ga, a), _fit(gb, b)


@derivative(aten.neg.default)
def neg(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.neg.default(g),)


@derivative(aten.lift_fresh_copy.default)
def lift_fresh_copy(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (g,)  # a copy of a tensor constant (torch.tensor(...) in the model): the gradient passes through


@derivative(aten.exp.default)
def exp(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.mul.Tensor(g, out),)  # d exp = exp: reuses the forward output


@derivative(aten.log.default)
def log(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.div.Tensor(g, a),)


@derivative(aten.tanh.default)
def tanh(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.mul.Tensor(g, aten.rsub.Scalar(aten.mul.Tensor(out, out), 1.0)),)


@derivative(aten.sqrt.default)
def sqrt(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.div.Tensor(g, aten.mul.Tensor(out, 2.0)),)


@derivative(aten.rsqrt.default)
def rsqrt(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    # d a^(-1/2) = -1/2 a^(-3/2) = -1/2 out^3
    return (aten.mul.Tensor(g, aten.mul.Tensor(aten.pow.Tensor_Scalar(out, 3), -0.5)),)


@derivative(aten.sin.default)
def sin(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.mul.Tensor(g, aten.cos.default(a)),)


@derivative(aten.cos.default)
def cos(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.neg.default(aten.mul.Tensor(g, aten.sin.default(a))),)


@derivative(aten.erf.default)
def erf(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    two_over_sqrt_pi = 1.1283791670955126
    return (aten.mul.Tensor(g, aten.mul.Tensor(aten.exp.default(aten.neg.default(aten.mul.Tensor(a, a))),
                                               two_over_sqrt_pi)),)  # fmt: skip


@derivative(aten.erfc.default, prims.erfc.default)
def erfc(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    """erfc = 1 - erf: erf's derivative, negated."""
    return (aten.neg.default(erf(g, out, a)[0]),)


@derivative(aten.log10.default, prims.log10.default)
def log10(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    return (aten.div.Tensor(g, aten.mul.Tensor(a, math.log(10.0))),)


@derivative(aten.lgamma.default, prims.lgamma.default)
def lgamma(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    """d log|Gamma(x)| = digamma(x), a library kernel."""
    return (aten.mul.Tensor(g, aten.digamma.default(a)),)


@derivative(aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default,
            prims.floor.default, prims.ceil.default, prims.round.default, prims.trunc.default)  # fmt: skip
def step(g: Tensor, out: Tensor, a: Tensor, *args, **kwargs) -> tuple:
    """Piecewise constant: zero almost everywhere, and torch's formula says zero at the jumps too
    (``zeros_like(grad)``: a filled tensor, so an inf or NaN in ``g`` does not leak through)."""
    return (aten.expand.default(_scalar(0.0, g), list(g.shape)), *[None] * len(args))


@derivative(aten.frac.default)
def frac(g: Tensor, out: Tensor, a: Tensor) -> tuple:
    """x - trunc(x): slope 1."""
    return (g,)


def _modulo(rounded) -> Callable:
    """``remainder`` (a - b floor(a / b)) and ``fmod`` (a - b trunc(a / b)): slope 1 in a, and minus
    the rounded quotient in b (torch's formulas; the quotient is constant between jumps)."""

    def rule(g: Tensor, out: Tensor, a, b) -> tuple:
        gb = None
        if is_tensor(b):
            gb = _fit(aten.neg.default(aten.mul.Tensor(g, rounded(aten.div.Tensor(a, b)))), b)
        return _fit(g, a), gb

    return rule


for _op in (aten.remainder.Tensor, aten.remainder.Scalar, prims.remainder.default):
    derivative(_op)(_modulo(aten.floor.default))
for _op in (aten.fmod.Tensor, aten.fmod.Scalar, prims.fmod.default):
    derivative(_op)(_modulo(aten.trunc.default))


def _nan_ignoring(pick_a: Callable) -> Callable:
    """``fmax``/``fmin``: the larger (smaller) value, a NaN losing to a number. ``a`` gets ``g`` where
    it was picked (``pick_a``, or ``b`` is NaN), ``b`` everywhere else (torch's masked_fill formula)."""

    def rule(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple:
        took_a = aten.logical_or.default(pick_a(a, b), aten.ne.Tensor(b, b))
        zero = _scalar(0.0, g)
        return _fit(aten.where.self(took_a, g, zero), a), _fit(aten.where.self(took_a, zero, g), b)

    return rule


derivative(aten.fmax.default, prims.fmax.default)(_nan_ignoring(aten.ge.Tensor))
derivative(aten.fmin.default, prims.fmin.default)(_nan_ignoring(aten.le.Tensor))


@derivative(aten.pow.Tensor_Scalar)
def pow_scalar(g: Tensor, out: Tensor, a: Tensor, n: float) -> tuple:
    """d a^n = n a^(n-1); for n = 0 zeros (torch's ``pow_backward``: 0 * 0^-1 would be NaN at a = 0)."""
    if n == 0:
        return aten.zeros_like.default(a), None
    return (aten.mul.Tensor(g, aten.mul.Tensor(aten.pow.Tensor_Scalar(a, n - 1), n)), None)


@derivative(aten.pow.Tensor_Tensor)
def pow_tensor(g: Tensor, out: Tensor, a, b) -> tuple:
    """``a ** b``, both tensors (``float_power``, ``x ** y``). d/da = b a^(b-1), zero where b = 0
    (``pow_backward_self``: 0 * 0^-1 would be NaN at a = 0). d/db = a^b log a = out log a, zero where
    a = 0 and b >= 0 (``pow_backward_exponent``: 0^b is flat there for b > 0, while log 0 = -inf
    would give 0 * -inf = NaN). A negative base has no real log: NaN, as in torch."""
    zero = _scalar(0.0, g)
    ga = gb = None
    if is_tensor(a) and a.is_floating_point():
        da = aten.mul.Tensor(b, aten.pow.Tensor_Tensor(a, aten.sub.Tensor(b, 1)))
        ga = aten.where.self(aten.eq.Scalar(b, 0), zero, aten.mul.Tensor(g, da))
    if is_tensor(b) and b.is_floating_point():
        db = aten.mul.Tensor(out, aten.log.default(a))
        flat = aten.where.self(aten.eq.Scalar(a, 0), aten.ge.Scalar(b, 0), aten.eq.Scalar(a, 0))  # a == 0 and b >= 0
        gb = aten.mul.Tensor(g, aten.where.self(flat, zero, db))
    return _fit(ga, a), _fit(gb, b)


@derivative(aten.pow.Scalar)
def pow_scalar_base(g: Tensor, out: Tensor, c, b: Tensor) -> tuple:
    """``c ** b``, a number raised to a tensor: d/db = c^b log c, with ``log c`` a constant (-inf for
    c = 0, NaN for c < 0). For c = 0 the gradient is zero where b >= 0, as in :func:`pow_tensor`."""
    if isinstance(c, complex):
        raise LeftToTorch("pow backward: the course handles a real base")
    log_c = math.log(c) if c > 0 else -math.inf if c == 0 else math.nan
    db = aten.mul.Tensor(out, log_c)
    if c == 0:
        db = aten.where.self(aten.ge.Scalar(b, 0), _scalar(0.0, g), db)
    return None, aten.mul.Tensor(g, db)


@derivative(aten.polygamma.default)
def polygamma(g: Tensor, out: Tensor, n: int, x: Tensor) -> tuple:
    """polygamma(n, x) is the n-th derivative of digamma: its derivative is polygamma(n + 1, x)."""
    return None, aten.mul.Tensor(g, aten.polygamma.default(n + 1, x))


def _split_ties(g: Tensor, a: Tensor, b: Tensor, first_wins: Tensor) -> tuple:
    """max/min send the gradient to the winner; a tie splits it in half (as torch does)."""
    half = aten.mul.Tensor(g, 0.5)
    zero = _zeros(g)
    tie = aten.eq.Tensor(a, b)
    ga = aten.where.self(tie, half, aten.where.self(first_wins, g, zero))
    gb = aten.where.self(tie, half, aten.where.self(first_wins, zero, g))
    return _fit(ga, a), _fit(gb, b)


@derivative(aten.maximum.default)
def maximum(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple:
    return _split_ties(g, a, b, aten.gt.Tensor(a, b))


@derivative(aten.minimum.default)
def minimum(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple:
    return _split_ties(g, a, b, aten.lt.Tensor(a, b))


@derivative(aten.where.self, prims.where.default)
def where(g: Tensor, out: Tensor, cond: Tensor, a: Tensor, b: Tensor) -> tuple:
    zero = _zeros(g)
    return None, _fit(aten.where.self(cond, g, zero), a), _fit(aten.where.self(cond, zero, g), b)


@derivative(aten._to_copy.default)
def to_copy(g: Tensor, out: Tensor, a: Tensor, **kwargs) -> tuple:
    return (aten._to_copy.default(g, dtype=a.dtype) if g.dtype != a.dtype else g,)


# ------------------------------------------------------------------ reductions


def _keep(x: Tensor, dims, keepdim: bool, like: Tensor) -> Tensor:
    """A reduction's result with its reduced axes put back as size 1 (so it broadcasts)."""
    if keepdim:
        return x
    shape = [1 if i in dims else s for i, s in enumerate(like.shape)]
    return aten.view.default(x, shape)


def _reduced(a: Tensor, dim) -> list[int]:
    if dim is None or len(dim) == 0:
        return list(range(a.dim()))
    return [d % max(a.dim(), 1) for d in dim]  # a 0-d tensor takes dim 0 or -1, as in torch


@derivative(aten.cumsum.default)
def cumsum(g: Tensor, out: Tensor, x: Tensor, dim: int, dtype=None) -> tuple:
    """out[i] = x[0] + ... + x[i], so x[j] reaches every out[i] with i >= j: the gradient is the
    running sum of g taken from the end (torch's ``cumsum_backward``). A long cumsum stays one op
    (Falcon-H1's Mamba mixer), which had no rule."""
    if x.dim() == 0:
        return (g,)
    return (_reversed_cumsum(g, dim),)


def _reversed_cumsum(g: Tensor, dim: int) -> Tensor:
    """``g[i] + g[i+1] + ... + g[n-1]`` along ``dim``."""
    if g.numel() == 0:  # nothing to sum (and the lowering's flip cannot index a size-0 axis)
        return g
    return aten.flip.default(aten.cumsum.default(aten.flip.default(g, [dim]), dim), [dim])


@derivative(aten.cumprod.default)
def cumprod(g: Tensor, out: Tensor, x: Tensor, dim: int, dtype=None) -> tuple:
    """out[j] = x[0] x[1] ... x[j], so d out[j] / d x[k] = (product of x[i], i <= j, i != k) for j >= k
    (torch's ``cumprod_backward``, its O(n) branch), split by z, the position of a row's first zero:

    * k < z: x[k] is not 0, so that product is out[j] / x[k]: the gradient is the running sum of
      g * out from the end, divided by x[k] (out[j] = 0 for j >= z adds nothing). Without zeros
      this is the whole formula; dividing by x elsewhere would give 0 / 0.
    * k = z: the products of the row with x[z] replaced by 1, a second cumprod, summed against g
      from z on (they are 0 again past a second zero).
    * k > z: out[j] for j >= k contains the factor x[z] = 0 besides x[k]: 0.

    The rule cannot look at the values, so every case is computed and a where picks per element.
    """
    if x.numel() <= 1 or x.shape[dim] == 1:  # out = x along dim (torch's formula returns g too)
        return g, None
    dim %= x.dim()
    if x.dtype != out.dtype:  # cumprod(x, dtype=...): differentiate the product in its own dtype
        x = aten._to_copy.default(x, dtype=out.dtype)
    one, zero = _scalar(1.0, x), _scalar(0.0, g)
    is_zero = aten.eq.Scalar(x, 0)
    zeros_so_far = aten.cumsum.default(aten._to_copy.default(is_zero, dtype=torch.int64), dim)
    before = aten.eq.Scalar(zeros_so_far, 0)  # k < z
    first = aten.where.self(is_zero, aten.eq.Scalar(zeros_so_far, 1), is_zero)  # k = z
    upto = aten.div.Tensor(_reversed_cumsum(aten.mul.Tensor(g, out), dim), aten.where.self(before, x, one))
    without_z = aten.cumprod.default(aten.where.self(first, one, x), dim)
    from_z = aten.where.self(aten.ge.Scalar(zeros_so_far, 1), aten.mul.Tensor(g, without_z), zero)
    at_z = aten.sum.dim_IntList(from_z, [dim], True)
    return aten.where.self(before, upto, aten.where.self(first, at_z, zero)), None


@derivative(aten.sum.dim_IntList)
def sum_dim(g: Tensor, out: Tensor, a: Tensor, dim=None, keepdim: bool = False, **kwargs) -> tuple:
    dims = _reduced(a, dim)
    return aten.expand.default(_keep(g, dims, keepdim, a), list(a.shape)), None, None


@derivative(aten.amax.default)
def amax(g: Tensor, out: Tensor, a: Tensor, dim=(), keepdim: bool = False) -> tuple:
    dims = _reduced(a, list(dim))
    mask = aten._to_copy.default(aten.eq.Tensor(a, _keep(out, dims, keepdim, a)), dtype=g.dtype)
    share = aten.div.Tensor(mask, aten.sum.dim_IntList(mask, dims, True))  # ties share equally
    return aten.mul.Tensor(share, _keep(g, dims, keepdim, a)), None, None


@derivative(aten.linalg_vector_norm.default)
def vector_norm(g: Tensor, out: Tensor, x: Tensor, ord: float = 2, dim=None, keepdim: bool = False,
                dtype=None) -> tuple:  # fmt: skip
    """``(sum |x|^p)^(1/p)``, for the orders course_lib.decomp leaves whole (p = 0, p < 1, a ``dtype``)
    and any other. torch's ``norm_backward``, with n the norm: d n / d x = sign(x) |x|^(p-1) n^(1-p),
    that is sign(x) for p = 1 and x / n for p = 2; for p = +-inf the one largest (smallest) |x| gets
    it, ties and NaNs share it; p = 0 (a count) is left to torch. Where n = 0 torch's gradient is 0 for
    p > 1; for p < 1 it zeroes the entries x = 0 instead (|x|^(p-1) = inf there)."""
    p = float(ord)
    if p == 0:  # torch gives no gradient at all (autograd finds x unused); a joint graph gives every input one
        raise LeftToTorch("vector_norm backward: order 0 has no gradient in torch")
    dims = _reduced(x, dim)
    gk, n = _keep(g, dims, keepdim, x), _keep(out, dims, keepdim, x)
    xp = aten._to_copy.default(x, dtype=out.dtype) if x.dtype != out.dtype else x
    zero = _scalar(0.0, n)
    sign, magnitude = aten.sign.default(xp), aten.abs.default(xp)
    if p == 1:
        gx = aten.mul.Tensor(sign, gk)
    elif p == 2:
        gx = aten.mul.Tensor(gk, aten.where.self(aten.eq.Scalar(n, 0), zero, aten.div.Tensor(xp, n)))
    elif math.isinf(p):
        nan = aten.ne.Tensor(magnitude, magnitude)
        hit = aten._to_copy.default(aten.where.self(nan, nan, aten.eq.Tensor(magnitude, n)), dtype=xp.dtype)
        share = aten.div.Tensor(gk, aten.sum.dim_IntList(hit, dims, True))
        gx = aten.mul.Tensor(sign, aten.mul.Tensor(share, hit))
    elif p < 1:
        scaled = aten.where.self(aten.eq.Scalar(xp, 0), zero,
                                 aten.mul.Tensor(sign, aten.pow.Tensor_Scalar(magnitude, p - 1)))  # fmt: skip
        gx = aten.mul.Tensor(aten.mul.Tensor(scaled, gk), aten.pow.Tensor_Scalar(n, 1 - p))
    else:
        scaled = (aten.mul.Tensor(sign, aten.pow.Tensor_Scalar(magnitude, p - 1)) if p < 2
                  else aten.mul.Tensor(xp, aten.pow.Tensor_Scalar(magnitude, p - 2)))  # fmt: skip
        scale = aten.where.self(aten.eq.Scalar(n, 0), zero, aten.div.Tensor(gk, aten.pow.Tensor_Scalar(n, p - 1)))
        gx = aten.mul.Tensor(scaled, scale)
    if gx.dtype != x.dtype:
        gx = aten._to_copy.default(gx, dtype=x.dtype)
    return gx, None, None, None


# ------------------------------------------------------------------ views and extern


@derivative(aten.view.default)
def view(g: Tensor, out: Tensor, a: Tensor, shape) -> tuple:
    if not g.is_contiguous():  # a gradient coming back through a permute: copy before viewing
        g = aten._to_copy.default(g, memory_format=torch.contiguous_format)
    return aten.view.default(g, list(a.shape)), None


@derivative(aten.permute.default)
def permute(g: Tensor, out: Tensor, a: Tensor, perm) -> tuple:
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p % len(perm)] = i
    return aten.permute.default(g, inverse), None


@derivative(aten.expand.default)
def expand(g: Tensor, out: Tensor, a: Tensor, shape, **kwargs) -> tuple:
    return sum_to(g, a.shape), None


@derivative(aten.mm.default)
def mm(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple:
    return aten.mm.default(g, aten.permute.default(b, [1, 0])), aten.mm.default(aten.permute.default(a, [1, 0]), g)


@derivative(aten.bmm.default)
def bmm(g: Tensor, out: Tensor, a: Tensor, b: Tensor) -> tuple:
    return (aten.bmm.default(g, aten.permute.default(b, [0, 2, 1])),
            aten.bmm.default(aten.permute.default(a, [0, 2, 1]), g))  # fmt: skip


@derivative(aten.select.int)
def select(g: Tensor, out: Tensor, a: Tensor, dim: int, index: int) -> tuple:
    """``a[..., index, ...]``: spread g back along ``dim``, zero except where iota == index."""
    dim, size = dim % a.dim(), a.shape[dim % a.dim()]
    one, along = list(a.shape), [1] * a.dim()
    one[dim], along[dim] = 1, size
    spread = aten.expand.default(aten.view.default(g, one), list(a.shape))
    iota = _iota(size, g)
    hit = aten.eq.Scalar(aten.view.default(iota, along), index % size)
    return aten.where.self(hit, spread, aten.scalar_tensor.default(0.0, dtype=g.dtype, device=g.device)), None, None


@derivative(aten.slice.Tensor)
def slice_(g: Tensor, out: Tensor, a: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> tuple:
    """``a[start:end]`` along ``dim``: position i of a takes g[i - start] inside the window, else 0."""
    dim = dim % a.dim()
    size, n = a.shape[dim], g.shape[dim]
    first, _, step = slice(start, end, step).indices(size)
    none = (None,) * 4
    if first == 0 and n == size:
        return (g, *none)
    if n == 0:  # an empty slice (Phi-3's pass-through half when the rotary covers the whole head)
        return (None, *none)
    if step != 1:  # a[first::step] (Swin's patch merging): spread g out to step 1, then as below
        g, n = _unstride(g, dim, step, size - first), min(n * step, size - first)
    along = [1] * a.dim()
    along[dim] = size
    iota = _iota(size, g, start=-first)
    inside = aten.where.self(aten.ge.Scalar(iota, 0), aten.lt.Scalar(iota, n), aten.ge.Scalar(iota, n + 1))
    index = aten.maximum.default(aten.minimum.default(iota, aten.scalar_tensor.default(n - 1, dtype=torch.int64)),
                                 aten.scalar_tensor.default(0, dtype=torch.int64))  # fmt: skip
    shape = list(a.shape)
    picked = aten.gather.default(g, dim, aten.expand.default(aten.view.default(index, along), shape))
    zero = aten.scalar_tensor.default(0.0, dtype=g.dtype, device=g.device)
    return (aten.where.self(aten.view.default(inside, along), picked, zero), *none)


def _on_diagonal(a: Tensor, offset: int, d1: int, d2: int) -> Tensor:
    """True where column - row == offset (rows along ``d1``, columns along ``d2``), size 1 elsewhere."""
    rows, cols = [1] * a.dim(), [1] * a.dim()
    rows[d1], cols[d2] = a.shape[d1], a.shape[d2]
    i = aten.view.default(_iota(a.shape[d1], a), rows)
    j = aten.view.default(_iota(a.shape[d2], a), cols)
    return aten.eq.Scalar(aten.sub.Tensor(j, i), offset)


@derivative(aten.diagonal.default, aten.diagonal_copy.default)
def diagonal(g: Tensor, out: Tensor, a: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> tuple:
    """``out[.., k] = a[.., k, k + offset, ..]`` (rows along dim1, columns along dim2, the diagonal
    moved last; a negative offset goes below the main one). The gradient is torch's
    ``diagonal_backward``: zeros of a's shape with g written on that diagonal. Written as one where:
    entry (i, j) is on it when j - i == offset, and then it is diagonal entry k = i (k = j for a
    negative offset), so g's diagonal axis is put where i (j) runs and read there, clamped to the
    diagonal's length: entries past it are off the diagonal anyway."""
    none = (None,) * 3
    d1, d2 = dim1 % a.dim(), dim2 % a.dim()
    n = g.shape[-1]
    if n == 0:  # the offset leaves the matrix: nothing reached the output
        return (aten.zeros_like.default(a), *none)
    d, e = (d1, d2) if offset >= 0 else (d2, d1)  # k runs along d; e gets a size-1 axis
    rest = [p for p in range(a.dim()) if p not in (d1, d2)]  # g's leading axes, in a's order
    moved = aten.permute.default(g, [rest.index(p) if p in rest else len(rest) for p in range(a.dim()) if p != e])
    shape = list(a.shape)
    shape[d] = n
    spread = aten.expand.default(aten.unsqueeze.default(moved, e), shape)
    if n < a.shape[d]:
        along = [1] * a.dim()
        along[d] = a.shape[d]
        k = aten.minimum.default(_iota(a.shape[d], g), aten.scalar_tensor.default(n - 1, dtype=torch.int64))
        spread = aten.gather.default(spread, d, aten.expand.default(aten.view.default(k, along), list(a.shape)))
    return (aten.where.self(_on_diagonal(a, offset, d1, d2), spread, _scalar(0.0, g)), *none)


@derivative(aten.diagonal_scatter.default)
def diagonal_scatter(g: Tensor, out: Tensor, a: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> tuple:  # fmt: skip
    """``a`` with its diagonal replaced by ``src``: ``a`` gets g off the diagonal, ``src`` g's diagonal."""
    d1, d2 = dim1 % a.dim(), dim2 % a.dim()
    ga = aten.where.self(_on_diagonal(a, offset, d1, d2), _scalar(0.0, g), g)
    return ga, aten.diagonal.default(g, offset, dim1, dim2), None, None, None


def _unstride(g: Tensor, dim: int, step: int, room: int) -> Tensor:
    """``g`` with ``step - 1`` zeros after each entry along ``dim`` (a new axis of size ``step``,
    zero-padded, merged back), cut to ``room`` entries: the gradient of a step-1 slice."""
    shape = list(g.shape)
    spread = aten.view.default(g, shape[: dim + 1] + [1] + shape[dim + 1 :])
    pad = [0, 0] * (g.dim() - dim - 1) + [0, step - 1]  # constant_pad_nd lists the last dim first
    merged = shape[:dim] + [shape[dim] * step] + shape[dim + 1 :]
    out = aten.view.default(aten.constant_pad_nd.default(spread, pad, 0.0), merged)
    return aten.slice.Tensor(out, dim, 0, room) if merged[dim] > room else out


@derivative(aten.index_put.default)
def index_put(g: Tensor, out: Tensor, x: Tensor, indices, values: Tensor, accumulate: bool = False) -> tuple:
    """``x[indices] = values`` (``+=`` with ``accumulate``), as a functional op: a masked assignment
    in a model, ``index_put_`` after functionalization. ``x``'s entries that were overwritten did
    not reach the output, so their gradient is 0; added to, they pass ``g`` on unchanged. ``values``
    gets ``g`` read back at the same positions, summed where it was broadcast (torch's formula in
    derivatives.yaml; with repeated indices every copy gets it, as there)."""
    gx = g if accumulate else aten.index_put.default(g, indices, _scalar(0.0, g), False)
    return gx, None, sum_to(aten.index.Tensor(g, indices), values.shape), None


@derivative(aten.gather.default)
def gather(g: Tensor, out: Tensor, a: Tensor, dim: int, index: Tensor, sparse_grad: bool = False) -> tuple:
    """One element picked per position along ``dim`` (index size 1 there): a one-hot where.

    A general gather (DeBERTa's relative positions) may pick an element many times; torch adds
    their gradients with scatter_add, which the primitive set lacks: :func:`_gather_many` sums a
    one-hot comparison instead.
    """
    dim = dim % a.dim()
    others = [s for i, s in enumerate(a.shape) if i != dim]
    if [s for i, s in enumerate(index.shape) if i != dim] != others:  # a smaller index: torch's scatter_add
        return _scatter_add(g, a, dim, index), None, None, None
    if index.shape[dim] != 1:
        return _gather_many(g, a, dim, index), None, None, None
    along = [1] * a.dim()
    along[dim] = a.shape[dim]
    iota = torch.ops.prims.iota.default(a.shape[dim], start=0, step=1, dtype=index.dtype, device=g.device,
                                        requires_grad=False)  # fmt: skip
    hit = aten.eq.Tensor(aten.view.default(iota, along), index)
    zero = aten.scalar_tensor.default(0.0, dtype=g.dtype, device=g.device)
    return aten.where.self(hit, aten.expand.default(g, list(a.shape)), zero), None, None, None


@derivative(aten.scatter_reduce.two)
def scatter_reduce(g: Tensor, out: Tensor, x: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str,
                   include_self: bool = True) -> tuple:  # fmt: skip
    """``out = x``, then ``out[.., index[i], ..] <reduce>= src[i]`` along ``dim`` (torch's
    ``scatter_reduce_backward`` for sum and mean). Sum: x gets g, each src[i] the g of the entry
    it went to, a gather. Mean: both divided by how many values that entry averaged (x's own value
    counts with ``include_self``). Without ``include_self`` an entry that was scattered to forgot
    x's value: zero gradient there. prod, amax and amin are left to torch."""
    if reduce not in ("sum", "mean"):
        raise LeftToTorch(f"scatter_reduce backward: the course handles sum and mean, not {reduce}")
    if list(index.shape) != list(src.shape):
        raise LeftToTorch("scatter_reduce backward: the course handles an index shaped like src")
    gx, gsrc = g, aten.gather.default(g, dim, index)
    if reduce == "sum" and include_self:
        return gx, None, None, gsrc, None
    hits = aten.scatter_add.default(aten.zeros_like.default(g), dim, index, aten.ones_like.default(src))
    if reduce == "mean":
        count = aten.add.Tensor(hits, 1.0) if include_self else hits
        count = aten.where.self(aten.eq.Scalar(count, 0), _scalar(1.0, count), count)
        gx, gsrc = aten.div.Tensor(g, count), aten.div.Tensor(gsrc, aten.gather.default(count, dim, index))
    if not include_self:
        gx = aten.where.self(aten.gt.Scalar(hits, 0), _scalar(0.0, g), gx)
    return gx, None, None, gsrc, None


def _picked(g: list, out: tuple, a: Tensor, dim: int) -> tuple:
    """``values`` is ``a`` gathered at ``indices`` along ``dim``, each element picked at most once:
    the gather rule gives the gradient; ``indices`` carry none."""
    ga = None if g[0] is None else gather(g[0], out[0], a, dim, out[1])[0]
    return ga, None, None, None, None


@derivative(aten.topk.default)
def topk(g: list, out: tuple, a: Tensor, k: int, dim: int = -1, *args, **kwargs) -> tuple:
    """A mixture-of-experts router picks its experts with topk: the routing weights' gradient
    flows back through here to the router's logits."""
    return _picked(g, out, a, dim)


@derivative(aten.sort.default)
def sort(g: list, out: tuple, a: Tensor, dim: int = -1, *args, **kwargs) -> tuple:
    return _picked(g, out, a, dim)


@derivative(aten.max.dim, aten.min.dim)
def max_dim(g: list, out: tuple, a: Tensor, dim: int, keepdim: bool = False) -> tuple:
    """``x.max(dim)`` (Hiera's query pooling: the largest of each window): (values, indices),
    the one picked element of every row and where it sits. Like topk with k = 1, the values are
    ``a`` gathered at the indices, so the gradient goes to that one element (a tie sends it all
    to the element the index names, as torch's ``value_selecting_reduction_backward`` does; amax
    splits it). Without ``keepdim`` the reduced axis is gone from g and the indices: it is put
    back as size 1 first, the shape a gather's index has."""
    if g[0] is None:
        return None, None, None
    if a.dim() == 0:
        return g[0], None, None
    dim %= a.dim()
    values, indices = out[0], out[1]
    if not keepdim:
        kept = list(a.shape)
        kept[dim] = 1
        values, indices = aten.view.default(values, kept), aten.view.default(indices, kept)
        g = [aten.view.default(g[0], kept), None]
    return _picked(g, (values, indices), a, dim)[:3]


#: largest one-hot (index entries x input size along dim) the general gather backward builds
GATHER_ONE_HOT_LIMIT = 1 << 24


def _scatter_add(g: Tensor, a: Tensor, dim: int, index: Tensor) -> Tensor:
    """The gather's gradient as torch computes it, ``zeros(a.shape).scatter_add(dim, index, g)``: a
    library kernel (an extern to the backend), for what the one-hot below cannot do cheaply."""
    zeros = aten.zeros.default(list(a.shape), dtype=g.dtype, device=g.device)
    return aten.scatter_add.default(zeros, dim, index, g)


def _gather_many(g: Tensor, a: Tensor, dim: int, index: Tensor) -> Tensor:
    """Gradient of a gather with m picks per row: ``ga[.., i] = sum_j g[.., j] * (index[.., j] == i)``.

    With ``dim`` moved last, index ``(.., m)`` against ``iota(n)`` gives an ``(.., m, n)`` one-hot;
    g, spread along n and kept where it is hot, summed over m: a scatter-add in primitives, at
    the cost of m x n work per row (beyond :data:`GATHER_ONE_HOT_LIMIT` entries, :func:`_scatter_add`).
    """
    n, m = a.shape[dim], index.shape[dim]
    if index.numel() * n > GATHER_ONE_HOT_LIMIT:
        return _scatter_add(g, a, dim, index)
    last = [d for d in range(a.dim()) if d != dim] + [dim]
    back = [last.index(d) for d in range(a.dim())]
    idx, gl = aten.permute.default(index, last), aten.permute.default(g, last)
    lead = list(idx.shape[:-1])
    iota = torch.ops.prims.iota.default(n, start=0, step=1, dtype=index.dtype, device=g.device, requires_grad=False)
    hot = aten.eq.Tensor(aten.view.default(idx, [*lead, m, 1]), aten.view.default(iota, [1] * len(lead) + [1, n]))
    spread = aten.expand.default(aten.view.default(gl, [*lead, m, 1]), [*lead, m, n])
    zero = aten.scalar_tensor.default(0.0, dtype=g.dtype, device=g.device)
    summed = aten.sum.dim_IntList(aten.where.self(hot, spread, zero), [len(lead)], False)
    return aten.permute.default(summed, back)


@derivative(aten.convolution.default)
def convolution(g: Tensor, out: Tensor, x: Tensor, w: Tensor, b: Tensor | None, stride, padding, dilation,
                transposed, output_padding, groups) -> tuple:  # fmt: skip
    """Like matmul, an extern: torch's ``convolution_backward`` gives input, weight, bias grads."""
    gx, gw, gb = aten.convolution_backward.default(
        g, x, w, None if b is None else list(b.shape), stride, padding, dilation, transposed, output_padding,
        groups, [True, True, b is not None])  # fmt: skip
    return gx, gw, gb, None, None, None, None, None, None


# ------------------------------------------------------------------ ops real models keep whole
# (the decompositions leave them; like convolution, a backend calls a library kernel for them)


@derivative(aten.embedding.default)
def embedding(g: Tensor, out: Tensor, weight: Tensor, indices: Tensor, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> tuple:  # fmt: skip
    """Rows picked by ``indices``: their gradients are summed back into those rows (a scatter-add)."""
    gw = aten.embedding_dense_backward.default(g, indices, weight.shape[0], padding_idx, scale_grad_by_freq)
    return gw, None, None, None, None


@derivative(aten.cat.default)
def cat(g: Tensor, out: Tensor, tensors: list, dim: int = 0) -> tuple:
    """Each input gets its own slice of the gradient (a list, one entry per input)."""
    dim = dim % out.dim()
    grads, start = [], 0
    for t in tensors:
        if t.dim() == 1 and t.shape[0] == 0:  # cat skips legacy empty tensors
            grads.append(None)
            continue
        grads.append(aten.slice.Tensor(g, dim, start, start + t.shape[dim]))
        start += t.shape[dim]
    return grads, None


def _pieces(g: list, outs: list) -> list:
    """Gradients of a multi-output view op; an output nobody used gets zeros of its shape."""
    return [gi if gi is not None else aten.mul.Tensor(o, 0.0) for gi, o in zip(g, outs)]


@derivative(aten.split.Tensor, aten.split_with_sizes.default)
def split(g: list, out: list, x: Tensor, sizes, dim: int = 0) -> tuple:
    """Pieces along ``dim``: their gradients, concatenated back in order."""
    return aten.cat.default(_pieces(g, out), dim), None, None


@derivative(aten.unbind.int)
def unbind(g: list, out: list, x: Tensor, dim: int = 0) -> tuple:
    dim = dim % x.dim()
    one = list(x.shape)
    one[dim] = 1
    return aten.cat.default([aten.view.default(p, one) for p in _pieces(g, out)], dim), None


@derivative(aten.constant_pad_nd.default)
def constant_pad_nd(g: Tensor, out: Tensor, x: Tensor, pad, value: float = 0) -> tuple:
    """Padding (last dim first, ``[left, right, ...]``): the gradient is g with the border cut off.

    A negative amount crops instead (RWKV's time shift, ``ZeroPad2d((0, 0, 1, -1))``: a zero row in
    front, the last row dropped). A cropped entry never reached the output, so its gradient is
    zero: the backward first pads g with zeros where the forward cut, then cuts off the border the
    forward added. (Torch's formula is one call, ``constant_pad_nd(g, -pad)``: a negative pad is
    a crop; the course keeps its slices for the cutting.)
    """
    for i in range(len(pad) // 2):
        dim, left, right = x.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
        cut = [0, 0] * i + [max(-left, 0), max(-right, 0)]  # this dim's crops, as padding of g
        if any(cut):
            g = aten.constant_pad_nd.default(g, cut, 0.0)
        if left > 0 or right > 0:  # g is now the padded size of x along dim: cut off the added border
            g = aten.slice.Tensor(g, dim, max(left, 0), max(left, 0) + x.shape[dim])
    return g, None, None


def _max_pool(backward) -> Callable:
    """The rule of ``max_pool{2,3}d_with_indices``: two outputs (values, indices); only the values carry
    a gradient, to the max's position, which ``backward`` (a library scatter) reads from the indices."""

    def rule(g: list, out: tuple, x: Tensor, kernel_size, stride=(), padding=(0,), dilation=(1,),
             ceil_mode: bool = False) -> tuple:  # fmt: skip
        gx = backward(g[0], x, kernel_size, stride, padding, dilation, ceil_mode, out[1])
        return gx, None, None, None, None, None

    return rule


def _avg_pool(backward) -> Callable:
    """The rule of ``avg_pool{2,3}d``: each window's mean spreads its gradient evenly back over the window."""

    def rule(g: Tensor, out: Tensor, x: Tensor, kernel_size, stride=(), padding=(0,), ceil_mode: bool = False,
             count_include_pad: bool = True, divisor_override=None) -> tuple:  # fmt: skip
        gx = backward(g, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return gx, None, None, None, None, None, None

    return rule


def _adaptive_avg_pool(backward) -> Callable:
    def rule(g: Tensor, out: Tensor, x: Tensor, output_size) -> tuple:
        return backward(g, x), None

    return rule


def _adaptive_max_pool(backward) -> Callable:
    """``adaptive_max_pool{2,3}d``: (values, indices) as max pooling, the windows set by the sizes."""

    def rule(g: list, out: tuple, x: Tensor, output_size) -> tuple:
        return backward(g[0], x, out[1]), None

    return rule


derivative(aten.max_pool2d_with_indices.default)(_max_pool(aten.max_pool2d_with_indices_backward.default))
derivative(aten.max_pool3d_with_indices.default)(_max_pool(aten.max_pool3d_with_indices_backward.default))
derivative(aten.avg_pool2d.default)(_avg_pool(aten.avg_pool2d_backward.default))
derivative(aten.avg_pool3d.default)(_avg_pool(aten.avg_pool3d_backward.default))
derivative(aten._adaptive_avg_pool2d.default)(_adaptive_avg_pool(aten._adaptive_avg_pool2d_backward.default))
derivative(aten._adaptive_avg_pool3d.default)(_adaptive_avg_pool(aten._adaptive_avg_pool3d_backward.default))
derivative(aten.adaptive_max_pool2d.default)(_adaptive_max_pool(aten.adaptive_max_pool2d_backward.default))
derivative(aten.adaptive_max_pool3d.default)(_adaptive_max_pool(aten.adaptive_max_pool3d_backward.default))


def _upsample(backward) -> Callable:
    """The rule of an interpolation whose transposed map is ``backward`` (``upsample_*_backward``).

    BEiT resizes its relative position table, YOLOS its position embeddings, to the image's
    patch grid. Each output pixel is a weighted sum of 4 input pixels (16 for bicubic), the
    weights fixed by the sizes alone: a linear map of ``x``. Its gradient is the transposed map:
    every g entry goes back to the same pixels with the same weights, added up where windows
    overlap. That scatter-add stays a library kernel, as pooling's does.
    """

    def rule(g: Tensor, out: Tensor, x: Tensor, output_size, align_corners: bool, scales_h=None,
             scales_w=None) -> tuple:  # fmt: skip
        return backward(g, output_size, list(x.shape), align_corners, scales_h, scales_w), None, None, None, None

    return rule


derivative(aten.upsample_bilinear2d.default)(_upsample(aten.upsample_bilinear2d_backward.default))
derivative(aten.upsample_bicubic2d.default)(_upsample(aten.upsample_bicubic2d_backward.default))


@derivative(aten.im2col.default)
def im2col(g: Tensor, out: Tensor, x: Tensor, kernel_size, dilation, padding, stride) -> tuple:
    """``nn.Unfold`` (ConvBERT's span-based convolution): every sliding window of ``x`` copied out
    as a column, (N, C, H, W) -> (N, C kh kw, windows). A pixel inside several windows was copied
    several times, so its gradient is the sum of its copies' gradients: the columns folded back
    onto the image, ``col2im`` (``nn.Fold``), the library kernel torch's formula calls too."""
    gx = aten.col2im.default(g, list(x.shape[-2:]), kernel_size, dilation, padding, stride)
    return gx, None, None, None, None


@derivative(aten._grouped_mm.default)
def grouped_mm(g: Tensor, out: Tensor, a: Tensor, b: Tensor, offs: Tensor | None = None, bias=None,
               out_dtype=None) -> tuple:  # fmt: skip
    """Mixture-of-experts layers in bf16 (transformers' ``_grouped_mm``): the rows of ``a`` [S, K]
    sorted by expert, ``offs`` the cumulative row count of each expert, ``b`` [E, K, N] one weight per
    expert, so rows ``offs[e-1]:offs[e]`` are multiplied by ``b[e]``. The input's gradient is the same
    grouped product with each weight transposed; a weight's gradient is ``a[rows]^T @ g[rows]`` for its
    own rows, which is grouped_mm's 2-D x 2-D form (groups along K) with the same offsets. torch's
    formula calls the same two products."""
    if a.dim() != 2 or b.dim() != 3 or offs is None or bias is not None or out_dtype not in (None, out.dtype):
        raise LeftToTorch("grouped_mm backward: the course handles a 2-D input, 3-D weights and offsets")
    return grouped_mm_grads(g, a, b, offs, needed(0), needed(1))


def grouped_mm_grads(g: Tensor, a: Tensor, b: Tensor, offs: Tensor, want_a: bool = True, want_b: bool = True):
    """The two grouped products of :func:`grouped_mm`'s rule. On the H100 (bench/probe_grouped_mm.py)
    they equal eager autograd's exactly, on every row below ``offs[-1]`` and for every expert's weight,
    an empty one included; rows past ``offs[-1]`` are left unwritten by CUDA's kernel, in eager too."""
    ga = aten._grouped_mm.default(g, aten.transpose.int(b, -2, -1), offs) if want_a else None
    gb = aten._grouped_mm.default(aten.transpose.int(a, -2, -1), g, offs) if want_b else None
    return ga, gb


# ------------------------------------------------------------------ fused attention
# (course_lib.decomp.FUSED_ATTENTION keeps these whole on some devices; see there)

_NEEDED: list[tuple[list[bool], dict[str, bool]]] = []  # innermost last: which arguments need a gradient


@contextlib.contextmanager
def needs_grad(args: list[bool], kwargs: dict[str, bool]):
    """While a rule runs: which of its node's arguments need a gradient (positional, keyword).

    torch passes the same to a fused backward kernel as ``grad_input_mask``
    (``output_mask`` for convolution_backward), so the kernel skips gradients nobody reads.
    :func:`course_lib.aot.joint.backward_pass` sets it. Outside it (:func:`vjp`) every positional
    argument needs one and no keyword argument does: a rule returns gradients for positions only.
    """
    _NEEDED.append((args, kwargs))
    try:
        yield
    finally:
        _NEEDED.pop()


def needed(at: int | str) -> bool:
    """Does the argument at position (or keyword) ``at`` of the current rule's node need a gradient?"""
    if not _NEEDED:
        return not isinstance(at, str)
    args, kwargs = _NEEDED[-1]
    return kwargs.get(at, False) if isinstance(at, str) else at < len(args) and args[at]


@derivative(aten._scaled_dot_product_efficient_attention.default)
def efficient_attention(g: list, out: tuple, q: Tensor, k: Tensor, v: Tensor, attn_bias: Tensor | None,
                        compute_log_sumexp: bool, dropout_p: float = 0.0, is_causal: bool = False, *,
                        scale: float | None = None) -> tuple:  # fmt: skip
    """The fused backward kernel, as torch's formula calls it (derivatives.yaml). It never saw the
    ``[L, S]`` probabilities: it recomputes each tile of them from q, k and the saved logsumexp
    (``out[1]``), one more matmul per tile instead of a round trip through memory. The bias's
    gradient is asked for only when something reads it (a learned bias, not a padding mask)."""
    if g[0] is None:  # only the logsumexp was used: it carries no gradient (torch's formula agrees)
        return None, None, None, None, None
    if not compute_log_sumexp:
        raise ValueError("efficient attention traced without its logsumexp: the backward kernel needs it")
    mask = [needed(0), needed(1), needed(2), attn_bias is not None and needed(3)]
    gq, gk, gv, gb = aten._scaled_dot_product_efficient_attention_backward.default(
        g[0], q, k, v, attn_bias, out[0], out[1], out[2], out[3], dropout_p, mask, is_causal, scale=scale)  # fmt: skip
    return gq, gk, gv, gb, None


@derivative(aten._scaled_dot_product_flash_attention.default)
def flash_attention(g: list, out: tuple, q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0,
                    is_causal: bool = False, return_debug_mask: bool = False, *,
                    scale: float | None = None) -> tuple:  # fmt: skip
    """FlashAttention-2's backward kernel (CUDA, half precision), with what the forward returned for
    it: the logsumexp, the sequence bookkeeping and the Philox state that replays dropout's mask."""
    if g[0] is None:
        return None, None, None
    gq, gk, gv = aten._scaled_dot_product_flash_attention_backward.default(
        g[0], q, k, v, out[0], out[1], out[2], out[3], out[4], out[5], dropout_p, is_causal, out[6], out[7],
        scale=scale)  # fmt: skip
    return gq, gk, gv


class KeywordGrads(dict):
    """A rule's last entry when keyword arguments get gradients too: ``{name: gradient}``."""


@derivative(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_for_cpu(g: list, out: tuple, q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0,
                            is_causal: bool = False, *, attn_mask: Tensor | None = None,
                            scale: float | None = None) -> tuple:  # fmt: skip
    """The CPU FlashAttention kernel's backward (same recomputation) for q, k and v.

    The kernel has no gradient for ``attn_mask``. A float mask that something learns (T5's relative
    position bias) gets the scores' gradient, summed to the mask's shape, written out in ATen ops:
    ``P * (dP - rowsum(dO * O))`` with ``P = exp(scores - logsumexp)`` and ``dP = dO v^T``. That
    materialises the ``[L, S]`` scores, as torch's math path does for such a mask.
    """
    if g[0] is None:
        return None, None, None, None, None
    gq, gk, gv = aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
        g[0], q, k, v, out[0], out[1], dropout_p, is_causal, attn_mask=attn_mask, scale=scale)  # fmt: skip
    grads = (gq, gk, gv, None, None)
    if attn_mask is not None and attn_mask.is_floating_point() and needed("attn_mask"):
        if dropout_p != 0.0:
            raise NotImplementedError(
                "a learned attention mask with dropout: the mask's gradient needs the dropout mask"
            )
        grads += (KeywordGrads(attn_mask=_mask_gradient(g[0], out, q, k, v, attn_mask, scale)),)
    return grads


def _mask_gradient(g: Tensor, out: tuple, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale) -> Tensor:
    """d loss / d mask for ``softmax(q k^T * scale + mask) v`` (no causal flag: SDPA refuses both)."""
    from course_lib.decomp.table import _share_kv_heads

    k, v = _share_kv_heads(k, q.shape[-3]), _share_kv_heads(v, q.shape[-3])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = aten.add.Tensor(aten.mul.Tensor(aten.matmul.default(q, aten.transpose.int(k, -2, -1)), scale), mask)
    p = aten.exp.default(aten.sub.Tensor(scores, aten.unsqueeze.default(out[1], -1)))
    dp = aten.matmul.default(g, aten.transpose.int(v, -2, -1))
    delta = aten.sum.dim_IntList(aten.mul.Tensor(g, out[0]), [-1], True)  # rowsum(dP * P), computed from O
    return sum_to(aten.mul.Tensor(p, aten.sub.Tensor(dp, delta)), mask.shape)


NOT_DIFFERENTIABLE = frozenset(
    {aten.scalar_tensor.default, torch.ops.prims.iota.default, aten.gt.Scalar, aten.gt.Tensor, aten.lt.Scalar, aten.lt.Tensor, aten.ge.Scalar,
     aten.le.Scalar, aten.eq.Scalar, aten.eq.Tensor, aten.ne.Scalar,
     # factories: a tensor argument only lends its dtype/device/shape, no value flows to the output
     aten.new_ones.default, aten.new_zeros.default, aten.new_full.default, aten.new_empty.default,
     aten.new_empty_strided.default, aten.ones_like.default, aten.zeros_like.default, aten.full_like.default,
     aten.empty_like.default, aten.full.default, aten.zeros.default, aten.ones.default, aten.empty.memory_format,
     aten.rand_like.default, aten.randn_like.default,
     # random draws (dropout's mask): torch's formula gives the input zeros (derivatives.yaml, bernoulli)
     aten.bernoulli.p, aten.bernoulli.default,
     # x.detach(): the same values, cut off from the gradient on purpose
     aten.detach.default}
)  # fmt: skip


#: ops of NOT_DIFFERENTIABLE that torch's autograd does record: their formula gives the input zeros,
#: a tensor (a factory's output has no grad_fn at all, so its input gets None)
ZERO_FORMULA = frozenset({aten.bernoulli.p, aten.bernoulli.default})


def has_no_gradient(op, out) -> bool:
    """True when nothing flows back through ``op``: a listed op, or one whose results are all
    integer or boolean tensors (comparisons, argmax, masks), which carry no gradient in torch either."""
    if op in NOT_DIFFERENTIABLE:
        return True
    outs = out if isinstance(out, (tuple, list)) else [out]
    tensors = [o for o in outs if isinstance(o, Tensor)]
    return bool(tensors) and not any(o.dtype.is_floating_point or o.dtype.is_complex for o in tensors)


def vjp(op, grad: Tensor, *args, **kwargs) -> tuple:
    """Apply one rule eagerly: the gradients of ``op(*args, **kwargs)`` for output gradient ``grad``."""
    out = op(*args, **kwargs)
    return DERIVATIVES[op](grad, out, *args, **kwargs)
