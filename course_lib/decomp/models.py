"""Decompositions real models need (teaches torch/_decomp/decompositions.py: batch norm, copy,
split, adaptive pooling, the ``*_scatter`` ops functionalization emits).

Position: the same table as :mod:`course_lib.decomp.table` (these entries register into it);
kept in their own file because they are the ops that Hugging Face CNNs and transformers reach
after :mod:`course_lib.aot.functionalize` has removed in-place updates:

* ``_native_batch_norm_legit_functional``: batch norm in training, returning the new running
  statistics instead of writing them (functionalization's replacement for ``native_batch_norm``);
  ``_native_batch_norm_legit.no_stats`` when there are no running statistics to write;
* ``copy``: the functional form of ``dst.copy_(src)``;
* ``select_scatter`` / ``slice_scatter``: writing a view's new value back into its base;
* ``_adaptive_avg_pool2d`` to a 1x1 output: a mean (the pooler of every torchvision-style CNN).

Ops that stay whole (convolution, embedding, cat, split, max pooling) have derivative rules in
:mod:`course_lib.aot.rules` instead, and a backend calls a library kernel for them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib.decomp.table import _scalar, in_float32, register

aten = torch.ops.aten


def _batch_statistics(x: Tensor) -> tuple[Tensor, Tensor, Tensor, int]:
    """(mean, x - mean, biased variance, n) over every axis but channels (dim 1), kept as size 1."""
    dims = [0] + list(range(2, x.dim()))
    n = x.numel() // x.shape[1]
    mean = aten.mean.dim(x, dims, True)
    centred = aten.sub.Tensor(x, mean)
    var = aten.div.Tensor(aten.sum.dim_IntList(aten.mul.Tensor(centred, centred), dims, True), n)
    return mean, centred, var, n


def _scale_shift(out: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """The per-channel affine step of a batch norm (channels on dim 1)."""
    bshape = [1, out.shape[1]] + [1] * (out.dim() - 2)
    if weight is not None:
        out = aten.mul.Tensor(out, aten.view.default(weight, bshape))
    if bias is not None:
        out = aten.add.Tensor(out, aten.view.default(bias, bshape))
    return out


@register(aten._native_batch_norm_legit_functional.default)
@in_float32(out_dtypes=lambda x, weight, bias, running_mean, *_: (x.dtype,) + (running_mean.dtype,) * 4)
def batch_norm_functional(x: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor,
                          running_var: Tensor, training: bool, momentum: float,
                          eps: float) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:  # fmt: skip
    """(out, mean, rstd, new running_mean, new running_var) over every axis but channels (dim 1).

    The running variance uses the unbiased variance (n - 1), the normalisation the biased one,
    as torch does. In eval mode the running statistics normalise and come back unchanged.
    """
    bshape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    if training:
        mean, centred, var, n = _batch_statistics(x)
        rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
        flat_mean, flat_var = aten.view.default(mean, [x.shape[1]]), aten.view.default(var, [x.shape[1]])
        new_mean = aten.add.Tensor(aten.mul.Tensor(running_mean, 1 - momentum), aten.mul.Tensor(flat_mean, momentum))
        unbiased = aten.mul.Tensor(flat_var, n / max(n - 1, 1))
        new_var = aten.add.Tensor(aten.mul.Tensor(running_var, 1 - momentum), aten.mul.Tensor(unbiased, momentum))
    else:
        mean = aten.view.default(running_mean, bshape)
        rstd = aten.rsqrt.default(aten.add.Tensor(aten.view.default(running_var, bshape), eps))
        centred = aten.sub.Tensor(x, mean)
        new_mean, new_var = running_mean, running_var
    out = _scale_shift(aten.mul.Tensor(centred, rstd), weight, bias)
    if not training and x.device.type == "cpu":  # eager's CPU kernel saves nothing in eval mode (CUDA's saves these)
        mean = rstd = aten.expand.default(aten.scalar_tensor.default(0.0, dtype=x.dtype, device=x.device), [0])
    return out, aten.view.default(mean, [-1]), aten.view.default(rstd, [-1]), new_mean, new_var


@register(aten._native_batch_norm_legit.no_stats)
@in_float32(out_dtypes=lambda x, weight, *_: (x.dtype,) + ((x if weight is None else weight).dtype,) * 2)
def batch_norm_no_stats(x: Tensor, weight: Tensor | None, bias: Tensor | None, training: bool, momentum: float,
                        eps: float) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """Batch norm with no running statistics (``F.batch_norm(x, None, None, training=True)``):
    (out, mean, rstd), normalised by the batch's own statistics, nothing to update (``momentum``
    has nothing to act on). BiT standardises each convolution's weight this way, a batch of one
    with the output channels as channels. Functionalization calls it for a batch norm whose
    running statistics are None. Without statistics only training mode makes sense (eager refuses
    eval mode), so ``training`` is not read."""
    mean, centred, var, _ = _batch_statistics(x)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    out = _scale_shift(aten.mul.Tensor(centred, rstd), weight, bias)
    return out, aten.view.default(mean, [x.shape[1]]), aten.view.default(rstd, [x.shape[1]])


@register(aten.div.Scalar)
def div_scalar(x: Tensor, other: float) -> Tensor:
    """``x / c`` with a Python number (dropout's ``mask.div_(1 - p)``, functionalized): div.Tensor,
    which takes a number as a 0-d operand."""
    return aten.div.Tensor(x, other)


@register(aten.copy.default, complex_ok=True)
def copy(dst: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """``dst.copy_(src)`` without the write: src, in dst's dtype and on dst's device, broadcast to dst's
    shape. (``y[:, 0] = 5.0`` on a CUDA tensor copies from a 0-dim CPU constant, which an op may mix with
    CUDA tensors; broadcast to ``[4, 3]`` first, it is a CPU tensor that no CUDA op takes.)"""
    if src.dtype != dst.dtype or src.device != dst.device:
        src = aten._to_copy.default(src, dtype=dst.dtype, device=dst.device)
    return aten.expand.default(src, list(dst.shape)) if list(src.shape) != list(dst.shape) else src


def _window(base: Tensor, dim: int, start: int, size: int, step: int = 1) -> Tensor:
    """Bool mask along ``dim`` (shaped to broadcast): positions start, start+step, ... (size of them)."""
    along = [1] * base.dim()
    along[dim] = base.shape[dim]
    pos = torch.ops.prims.iota.default(base.shape[dim], start=0, step=1, dtype=torch.int64, device=base.device,
                                       requires_grad=False)  # fmt: skip
    rel = aten.sub.Tensor(pos, start)
    inside = aten.where.self(aten.ge.Scalar(rel, 0), aten.lt.Scalar(rel, size * step), aten.ge.Scalar(rel, size * step))
    return aten.view.default(inside, along)


@register(aten.slice_scatter.default, complex_ok=True)
def slice_scatter(base: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:  # fmt: skip
    """``base`` with ``base[start:end:step]`` (along dim) replaced by ``src``: a gather of src, then
    where. A step of k writes one column of the span viewed as ``[n, k]`` (see :func:`_strided_scatter`)."""
    dim = dim % base.dim()
    first, _, _ = slice(start, end, step).indices(base.shape[dim])
    n = src.shape[dim]
    if n == 0:  # an empty slice (Qwen3.5's x[..., 2::2] of two channels): nothing is written
        return aten._to_copy.default(base)
    if step != 1:
        return _strided_scatter(base, src, dim, first, n, step)
    along = [1] * base.dim()
    along[dim] = base.shape[dim]
    pos = torch.ops.prims.iota.default(base.shape[dim], start=-first, step=1, dtype=torch.int64, device=base.device,
                                       requires_grad=False)  # fmt: skip
    index = aten.maximum.default(aten.minimum.default(pos, _scalar(n - 1, pos)), _scalar(0, pos))
    shape = list(base.shape)
    picked = aten.gather.default(src, dim, aten.expand.default(aten.view.default(index, along), shape))
    return aten.where.self(_window(base, dim, first, n), picked, base)


def _strided_scatter(base: Tensor, src: Tensor, dim: int, first: int, n: int, step: int) -> Tensor:
    """``base[first::step] = src`` (n values along ``dim``) from step-1 pieces: the span
    ``first .. first + n*step`` viewed as ``[n, step]`` has the written positions as its column 0,
    so a ``select_scatter`` of that column, then a ``slice_scatter`` of the span back into base. A
    span that runs past the end is padded first (with copies of its first row, cut off again)."""
    length = base.shape[dim]
    span = aten.slice.Tensor(base, dim, first, min(first + n * step, length))
    short = first + n * step - length
    if short > 0:
        fill = list(span.shape)
        fill[dim] = short
        span = aten.cat.default([span, aten.expand.default(aten.slice.Tensor(span, dim, 0, 1), fill)], dim)
    shape = list(span.shape)
    grouped = aten.view.default(aten.clone.default(span, memory_format=torch.contiguous_format),
                                [*shape[:dim], n, step, *shape[dim + 1 :]])  # fmt: skip
    span = aten.view.default(select_scatter(grouped, src, dim + 1, 0), shape)
    if short > 0:
        span = aten.slice.Tensor(span, dim, 0, n * step - short)
    return slice_scatter(base, span, dim, first, first + span.shape[dim])


@register(aten.select_scatter.default, complex_ok=True)
def select_scatter(base: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``base`` with ``base.select(dim, index)`` replaced by ``src`` (broadcast back along dim)."""
    dim = dim % base.dim()
    one = list(base.shape)
    one[dim] = 1
    spread = aten.expand.default(aten.view.default(src, one), list(base.shape))
    return aten.where.self(_window(base, dim, index % base.shape[dim], 1), spread, base)


@register(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool(x: Tensor, output_size: list[int]) -> Tensor:
    """To 1x1 (1x1x1) only (global average pooling); other sizes stay an op with a derivative rule."""
    if any(size != 1 for size in output_size):
        return NotImplemented
    return aten.mean.dim(x, list(range(-len(output_size), 0)), True)


@register(aten.alias.default)
def alias(x: Tensor) -> Tensor:
    return aten.view.default(x, list(x.shape))


@register(aten.repeat.default)
def repeat(x: Tensor, repeats: list[int]) -> Tensor:
    """Tile ``x``: a new axis of size r before each axis, expanded, then merged (a copy, as torch's)."""
    lead = len(repeats) - x.dim()
    shape = [1] * lead + list(x.shape)
    inter = [d for r, s in zip(repeats, shape) for d in (r, s)]
    spread = aten.expand.default(aten.view.default(x, [d for s in shape for d in (1, s)]), inter)
    merged = aten.clone.default(spread, memory_format=torch.contiguous_format)
    return aten.view.default(merged, [r * s for r, s in zip(repeats, shape)])


@register(aten._safe_softmax.default)
def safe_softmax(x: Tensor, dim: int, dtype: torch.dtype | None = None) -> Tensor:
    """Softmax whose fully masked rows (every entry -inf) give zeros instead of NaN (CUDA's sdpa math path)."""
    if dtype is not None and dtype != x.dtype:
        x = aten._to_copy.default(x, dtype=dtype)
    # No NaN anywhere, not even in a branch a where() drops: its gradient would be 0 * NaN = NaN.
    # A fully masked row is shifted by 0 (not -inf - -inf), its exps are all 0, and it divides by 1.
    top = aten.amax.default(x, [dim], True)
    masked = aten.eq.Scalar(top, float("-inf"))
    e = aten.exp.default(aten.sub.Tensor(x, aten.where.self(masked, _scalar(0.0, top), top)))
    total = aten.sum.dim_IntList(e, [dim], True)
    return aten.div.Tensor(e, aten.where.self(masked, _scalar(1.0, total), total))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(x: Tensor, mask: Tensor, value) -> Tensor:
    """``x`` with ``value`` where ``mask`` is true (DeBERTa's attention mask): a where."""
    if isinstance(value, Tensor):
        fill = aten._to_copy.default(value, dtype=x.dtype) if value.dtype != x.dtype else value
    else:
        fill = _scalar(value, x)
    return aten.where.self(mask, fill, x)


@register(aten.as_strided.default)
def as_strided(x: Tensor, size: list[int], stride: list[int], storage_offset: int | None = None) -> Tensor:
    """A strided window on a contiguous ``x`` that reads every element once: a view, then a permute.

    Real models reach it through layouts: ``adaptive_avg_pool2d`` to 1x1 restrides its result
    with ``as_strided_`` when the input looks channels-last (Swin's pooler). Sorting the dims
    of size > 1 by stride gives the order in which they walk ``x``'s memory; when those strides
    are exactly a contiguous layout of all of ``x``, the window is ``x`` viewed in that order and
    permuted back. Anything else (overlapping or skipping windows) stays an op, with no rule.

    The strides count in ``x``'s memory, not in its logical shape. An ``x`` whose memory is a
    permutation of its dims (Longformer restrides a head-split, transposed query) is first
    permuted into memory order. An ``as_strided`` left as an op becomes an extern call, which the
    course's Inductor hands a buffer laid out as eager's storage (``Lowering.require_storage``).
    """
    if (storage_offset or 0) != 0 or x.storage_offset() != 0:
        return NotImplemented
    if not x.is_contiguous():
        in_memory = aten.permute.default(x, sorted(range(x.dim()), key=lambda d: -x.stride(d)))
        if not in_memory.is_contiguous():
            return NotImplemented
        x = in_memory
    order = sorted((d for d in range(len(size)) if size[d] != 1), key=lambda d: -stride[d])
    expected = 1
    for d in reversed(order):  # innermost first: each stride is the product of the sizes inside it
        if stride[d] != expected:
            return NotImplemented
        expected *= size[d]
    if expected != x.numel():
        return NotImplemented
    order += [d for d in range(len(size)) if size[d] == 1]
    walked = aten.view.default(x, [size[d] for d in order])
    return aten.permute.default(walked, [order.index(d) for d in range(len(size))])


@register(aten.index.Tensor)
def index(x: Tensor, indices: list) -> Tensor:
    """Advanced indexing ``x[..., idx, ...]`` with integer index tensors on consecutive dims, as an
    embedding lookup (whose gradient, a scatter-add into the picked rows, has a rule).

    Real models: Swin's ``table[relative_position_index]``, Falcon's ``qkv[..., [-2], :]``.
    The indexed dims are merged into one axis of n rows (the index tensors, broadcast, become one
    flat row number, negative ones wrapped), that axis is moved first and the rest flattened: an
    (n, rest) weight for ``embedding``; its result is put back in ``x``'s dim order. Boolean masks
    and index tensors on dims that are not next to each other stay an op.
    """
    used = [d for d, i in enumerate(indices) if i is not None]
    if len(indices) > x.dim() or not used or used != list(range(used[0], used[-1] + 1)):
        return NotImplemented
    if any(indices[d].dtype not in (torch.int64, torch.int32) for d in used):
        return NotImplemented
    first, k = used[0], len(used)
    sizes = [x.shape[d] for d in used]
    flat = None
    for d, size in zip(used, sizes):  # row number = ((i0 * s1) + i1) * s2 + i2 ...
        i = aten._to_copy.default(indices[d], dtype=torch.int64)
        i = aten.where.self(aten.lt.Scalar(i, 0), aten.add.Tensor(i, size), i)
        flat = i if flat is None else aten.add.Tensor(aten.mul.Tensor(flat, size), i)
    before, after = list(x.shape[:first]), list(x.shape[first + k :])
    merged = aten.reshape.default(x, [*before, math.prod(sizes), *after])
    rows_first = aten.permute.default(merged, [first, *range(first), *range(first + 1, merged.dim())])
    weight = aten.reshape.default(rows_first, [math.prod(sizes), math.prod(before) * math.prod(after)])
    picked = aten.embedding.default(weight, flat)  # flat.shape + (rest,)
    picked = aten.view.default(picked, [*flat.shape, *before, *after])
    n = flat.dim()
    lead = list(range(n, n + len(before)))
    return aten.permute.default(picked, [*lead, *range(n), *range(n + len(before), picked.dim())])


@register(aten.native_group_norm.default)
def native_group_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, n: int, c: int, hw: int, groups: int,
                      eps: float) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """Group norm (Wav2Vec2's feature extractor): layer norm over each group of c / groups
    channels and all positions, then a per-channel scale and shift. Returns (out, mean, rstd),
    the statistics shaped (n, groups) as torch's kernel returns them."""
    grouped = aten.view.default(x, [n, groups, (c // groups) * hw])
    mean = aten.mean.dim(grouped, [2], True)
    centred = aten.sub.Tensor(grouped, mean)
    var = aten.div.Tensor(aten.sum.dim_IntList(aten.mul.Tensor(centred, centred), [2], True), (c // groups) * hw)
    rstd = aten.rsqrt.default(aten.add.Tensor(var, eps))
    out = aten.view.default(aten.mul.Tensor(centred, rstd), list(x.shape))
    per_channel = [1, c] + [1] * (x.dim() - 2)
    if weight is not None:
        out = aten.mul.Tensor(out, aten.view.default(weight, per_channel))
    if bias is not None:
        out = aten.add.Tensor(out, aten.view.default(bias, per_channel))
    return out, aten.view.default(mean, [n, groups]), aten.view.default(rstd, [n, groups])


@register(aten._weight_norm_interface.default)
def weight_norm_interface(v: Tensor, g: Tensor, dim: int = 0) -> tuple[Tensor, Tensor]:
    """Weight normalisation (Wav2Vec2's positional convolution): ``w = v * g / ||v||``, the norm
    taken over every dim but ``dim``. Returns (w, norm), the norm shaped like ``g``."""
    dims = [d for d in range(v.dim()) if d != dim % v.dim()]
    norm = aten.sqrt.default(aten.sum.dim_IntList(aten.mul.Tensor(v, v), dims, True))
    return aten.mul.Tensor(v, aten.div.Tensor(g, norm)), aten.view.default(norm, list(g.shape))


# ---------------------------------------------------------------- index-like ops, as index or cat
# (found by trying ops of models beyond the course's twenty; each reuses a rule the course has)


def _iota(n: int, like: Tensor, start: int = 0, step: int = 1) -> Tensor:
    return torch.ops.prims.iota.default(n, start=start, step=step, dtype=torch.int64, device=like.device,
                                        requires_grad=False)  # fmt: skip


@register(aten.index_select.default)
def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """``x.index_select(dim, index)``: advanced indexing on one dim (a 0-d ``x`` as one element)."""
    if x.dim() == 0:
        return aten.view.default(aten.index.Tensor(aten.view.default(x, [1]), [index]), [])
    return aten.index.Tensor(x, [None] * (dim % x.dim()) + [index])


@register(aten.flip.default)
def flip(x: Tensor, dims: list[int]) -> Tensor:
    """Each dim read backwards: an index n-1, n-2, ..., 0."""
    for d in dims:
        d %= x.dim()
        x = aten.index.Tensor(x, [None] * d + [_iota(x.shape[d], x, x.shape[d] - 1, -1)])
    return x


@register(aten.roll.default)
def roll(x: Tensor, shifts: list[int], dims: list[int] = ()) -> Tensor:
    """Swin's shifted windows: the last ``s`` entries along a dim moved to the front (a cat of two slices)."""
    if not dims:  # roll of the flattened tensor
        return aten.view.default(roll(aten.reshape.default(x, [-1]), shifts, [0]), list(x.shape))
    for s, d in zip(shifts, dims):
        d %= x.dim()
        n = x.shape[d]
        if n == 0:  # nothing to move
            continue
        s %= n
        if s:
            x = aten.cat.default([aten.slice.Tensor(x, d, n - s, n), aten.slice.Tensor(x, d, 0, n - s)], d)
    return x


def _triangle(x: Tensor, diagonal: int, lower: bool) -> Tensor:
    rows, cols = x.shape[-2], x.shape[-1]
    offset = aten.sub.Tensor(aten.view.default(_iota(cols, x), [1, cols]), aten.view.default(_iota(rows, x), [rows, 1]))
    keep = aten.le.Scalar(offset, diagonal) if lower else aten.ge.Scalar(offset, diagonal)
    return aten.where.self(keep, x, _scalar(0, x))


@register(aten.tril.default)
def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """Entries with column - row <= diagonal kept, the rest 0 (causal masks)."""
    return _triangle(x, diagonal, True)


@register(aten.triu.default)
def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    return _triangle(x, diagonal, False)


#: largest (n x n x rest) product cumsum builds as a triangular sum
CUMSUM_LIMIT = 1 << 24


@register(aten.cumsum.default)
def cumsum(x: Tensor, dim: int, dtype: torch.dtype | None = None) -> Tensor:
    """Running sum along ``dim`` as a triangular masked sum (n^2 work: fine for short sequences,
    such as BLOOM's position ids from the attention mask; longer ones stay an op)."""
    dim %= max(x.dim(), 1)
    n = x.shape[dim] if x.dim() else 1
    if x.numel() * n > CUMSUM_LIMIT or x.dim() == 0:
        return NotImplemented
    dtype = dtype or (x.dtype if x.is_floating_point() else torch.int64)  # as torch: integer sums are int64
    if dtype != x.dtype:
        x = aten._to_copy.default(x, dtype=dtype)
    last = [d for d in range(x.dim()) if d != dim] + [dim]
    xl = aten.permute.default(x, last)
    lead = list(xl.shape[:-1])
    j, i_plus_1 = aten.view.default(_iota(n, x), [n, 1]), aten.view.default(_iota(n, x, 1), [1, n])
    upto = aten.lt.Tensor(j, i_plus_1)  # j <= i
    terms = aten.where.self(upto, aten.view.default(xl, [*lead, n, 1]), _scalar(0, xl))  # (.., j, i)
    return aten.permute.default(
        aten.sum.dim_IntList(terms, [len(lead)], False, dtype=xl.dtype),  # (an int32 sum would be int64)
        [last.index(d) for d in range(x.dim())],
    )


@register(aten.std.correction)
def std(x: Tensor, dim: list[int] | None = None, *, correction: float | None = None, keepdim: bool = False) -> Tensor:
    return aten.sqrt.default(aten.var.correction(x, dim, correction=correction, keepdim=keepdim))


@register(aten.glu.default)
def glu(x: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: first half times the sigmoid of the second half."""
    half = x.shape[dim] // 2
    first, gate = aten.slice.Tensor(x, dim, 0, half), aten.slice.Tensor(x, dim, half, 2 * half)
    return aten.mul.Tensor(first, aten.sigmoid.default(gate))


@register(aten.linalg_vector_norm.default)
def vector_norm(x: Tensor, ord: float = 2, dim: list[int] | None = None, keepdim: bool = False, *,
                dtype: torch.dtype | None = None) -> Tensor:  # fmt: skip
    """``(sum |x|^p)^(1/p)`` over ``dim``: the 2-norm (normalising embeddings, CLIP's projections),
    the 1-norm (DBRX's router rescales its top-k weights by their sum of magnitudes), the max
    magnitude (p = inf) and -inf (the min), and any finite p > 1. Orders 0 and below 1 stay an op.

    ``|x|`` is written ``x * sign(x)``: its derivative is sign(x), 0 at x = 0, the subgradient
    torch's formula uses (``abs`` as a where would send the full gradient to a zero).
    For p > 1 the root at a zero vector has an infinite derivative and 0 * inf = NaN; torch's
    gradient there is 0. So a zero sum takes the root of 1 instead and is put back to 0 by a
    where, whose rule sends that branch no gradient.
    """
    if dtype is not None:
        return NotImplemented
    dims = list(range(x.dim())) if not dim else list(dim)
    magnitude = aten.mul.Tensor(x, aten.sign.default(x))
    if ord in (math.inf, -math.inf):  # the largest (smallest) magnitude; ties share the gradient
        pick = aten.amax.default if ord > 0 else aten.amin.default
        return pick(magnitude, dims, keepdim)
    if ord == 1:
        return aten.sum.dim_IntList(magnitude, dims, keepdim)
    if not ord > 1:
        return NotImplemented
    powered = aten.mul.Tensor(x, x) if ord == 2 else aten.pow.Tensor_Scalar(magnitude, ord)
    total = aten.sum.dim_IntList(powered, dims, keepdim)
    zero = aten.eq.Scalar(total, 0)
    safe = aten.where.self(zero, _scalar(1.0, total), total)
    root = aten.sqrt.default(safe) if ord == 2 else aten.pow.Tensor_Scalar(safe, 1.0 / ord)
    return aten.where.self(zero, _scalar(0.0, total), root)


@register(aten.pixel_shuffle.default)
def pixel_shuffle(x: Tensor, r: int) -> Tensor:
    """(N, C r^2, H, W) -> (N, C, H r, W r): a view, a permute and a copy."""
    *batch, c, h, w = x.shape
    c //= r * r
    split = aten.view.default(x, [*batch, c, r, r, h, w])
    k = len(batch)
    moved = aten.permute.default(split, [*range(k), k, k + 3, k + 1, k + 4, k + 2])
    return aten.reshape.default(moved, [*batch, c, h * r, w * r])


#: largest one-hot (index entries x size along dim) scatter builds
SCATTER_ONE_HOT_LIMIT = 1 << 24


@register(aten.scatter.value)
def scatter_value(x: Tensor, dim: int, index: Tensor, value: float) -> Tensor:
    """``x.scatter(dim, index, value)``: ``value`` written at the positions ``index`` names along
    ``dim`` (Phi-MoE's router masks its chosen expert with -inf). The positions hit are a one-hot
    comparison, as in the general gather's backward: index ``(.., m)`` (dim moved last) against
    ``iota(n)`` gives ``(.., m, n)``; a position is hit when any of the m picks names it. Then one
    where, whose rule gives ``x`` the gradient everywhere but the overwritten positions.

    m x n work per row (m picks among n): fine for a router's few experts; larger ones, and an
    index smaller than ``x`` off ``dim`` (torch allows it), stay an op.
    """
    dim %= max(x.dim(), 1)
    if x.dim() == 0 or index.dim() != x.dim() or index.numel() * x.shape[dim] > SCATTER_ONE_HOT_LIMIT:
        return NotImplemented
    if any(index.shape[d] != x.shape[d] for d in range(x.dim()) if d != dim):
        return NotImplemented
    n, m = x.shape[dim], index.shape[dim]
    last = [d for d in range(x.dim()) if d != dim] + [dim]
    idx = aten.permute.default(index, last)
    lead = list(idx.shape[:-1])
    iota = aten.view.default(_iota(n, x), [1] * len(lead) + [1, n])
    hot = aten.eq.Tensor(aten.view.default(idx, [*lead, m, 1]), iota)  # (.., m, n)
    count = aten.sum.dim_IntList(aten._to_copy.default(hot, dtype=torch.int64), [len(lead)], False)  # (.., n)
    hit = aten.permute.default(aten.gt.Scalar(count, 0), [last.index(d) for d in range(x.dim())])
    return aten.where.self(hit, _scalar(value, x), x)


@register(aten._trilinear.default)
def trilinear(i1: Tensor, i2: Tensor, i3: Tensor, expand1, expand2, expand3, sumdim, unroll_dim: int = 1) -> Tensor:
    """``nn.Bilinear``'s kernel, ``y[b, o] = sum_ij x1[b, i] W[o, i, j] x2[b, j]``: each operand gets
    size-1 dims at its ``expand`` positions, the three are multiplied and ``sumdim`` summed away.

    Written as one einsum, one letter per dim, an operand's expanded dims left out of its subscript.
    torch's einsum contracts two operands at a time with bmm (``sumproduct_pair``, which torch's
    own ``_trilinear`` kernel uses too), so the (b, o, i, j) product is never built.
    ``unroll_dim`` only chooses a loop order in torch's kernel.
    """
    letters = "abcdefghijklmnopqrstuvwxyz"
    n = i1.dim() + len(expand1)
    if n > len(letters):
        return NotImplemented

    def sub(skip) -> str:
        return "".join(letters[d] for d in range(n) if d not in set(skip))

    return torch.einsum(f"{sub(expand1)},{sub(expand2)},{sub(expand3)}->{sub(sumdim)}", i1, i2, i3)
