"""course_lib.decomp: every table entry against eager ATen, primitives-only, and torch._decomp."""

import functools
import zlib

import pytest
import torch

from course_lib import compat, decomp
from course_lib.decomp.samples import SAMPLES, STAND_IN, eager

OPS = sorted(decomp.DECOMPOSITIONS, key=str)


def _bind(op, args, kwargs):
    """(function of the tensor arguments only, those tensors): make_fx traces tensors only."""
    where = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def fn(*tensors):
        full = list(args)
        for i, t in zip(where, tensors):
            full[i] = t
        return op(*full, **kwargs)

    return fn, [args[i] for i in where]


ATTENTION = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default, *STAND_IN}


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def test_table_size_and_samples():
    assert len(decomp.DECOMPOSITIONS) >= 40
    assert set(SAMPLES) == set(decomp.DECOMPOSITIONS)
    assert not (decomp.PRIMITIVES & set(decomp.DECOMPOSITIONS)), "a primitive must not be decomposed"


#: entries that end in an op the course keeps whole (a derivative rule, an extern call in Inductor)
KEPT_WHOLE = {  # advanced indexing is an embedding lookup; roll and glu cut slices
    torch.ops.aten.index.Tensor: ["aten.embedding.default"], torch.ops.aten.index_select.default: ["aten.embedding.default"],
    torch.ops.aten.flip.default: ["aten.embedding.default"], torch.ops.aten.glu.default: ["aten.slice.Tensor"],
    torch.ops.aten.roll.default: ["aten.cat.default", "aten.slice.Tensor"], torch.ops.aten.stack.default: ["aten.cat.default"],
}  # fmt: skip


@pytest.mark.parametrize("op", OPS, ids=str)
def test_entry_matches_eager_and_leaves_only_primitives(op):
    gen = torch.Generator().manual_seed(zlib.crc32(str(op).encode()))
    args, kwargs = SAMPLES[op](gen)
    want = _flat(eager(op)(*args, **kwargs))
    fn, tensors = _bind(op, args, kwargs)
    graph = decomp.trace(fn, *tensors)
    assert decomp.non_primitive(graph) == KEPT_WHOLE.get(op, []), str(graph)
    got = _flat(graph(*tensors))
    if op in STAND_IN:  # the CPU stand-in computes (output, logsumexp); the CUDA op's RNG seed/offset have no twin
        got = got[: len(want)]
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape
        torch.testing.assert_close(g.to(w.dtype), w, rtol=1e-4, atol=1e-5)
    ref = compat.torch_decomposition(op)
    if ref is not None:  # torch decomposes it too: same outputs
        theirs = _flat(ref(*args, **kwargs))
        if op in ATTENTION:
            theirs = theirs[:1]  # torch's entries return other extras (attention weights, ...) after the output
        for w, t in zip(want, theirs):
            torch.testing.assert_close(t.to(w.dtype), w, rtol=1e-4, atol=1e-5)


def test_decompose_graph_from_meta_and_counts():
    from course_lib.fx import ShapeProp, symbolic_trace

    def f(x):
        return torch.nn.functional.silu(x).softmax(-1).mean()

    aten_graph = decomp.trace(f, torch.randn(3, 5), table={})
    assert "aten.silu.default" in decomp.non_primitive(aten_graph)
    x = torch.randn(3, 5)
    ShapeProp(aten_graph).propagate(x)
    prim = decomp.decompose(aten_graph)
    assert decomp.non_primitive(prim) == []
    torch.testing.assert_close(prim(x), f(x))
    counts = decomp.primitive_counts(prim)
    assert counts["reduction"] == 3 and counts["aten"] == 0
    fx_graph = symbolic_trace(f)  # a torch-level graph works too, given example inputs
    torch.testing.assert_close(decomp.decompose(fx_graph, x)(x), f(x))


def test_register_refuses_duplicates():
    with pytest.raises(ValueError, match="already has a decomposition"):
        decomp.register(torch.ops.aten.relu.default)(lambda x: x)


def test_clone_keeps_or_changes_layout_like_aten():
    x = torch.randn(4, 6).t()

    def clone_as(kwargs):
        return lambda t: torch.ops.aten.clone.default(t, **kwargs)

    for kwargs in ({}, {"memory_format": torch.contiguous_format}):
        graph = decomp.trace(clone_as(kwargs), x)
        assert graph(x).stride() == torch.ops.aten.clone.default(x, **kwargs).stride()


def test_flash_attention_entry_causal_matches_the_kernel():
    q, k, v = (torch.randn(2, 3, 6, 4) for _ in range(3))
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    graph = decomp.trace(lambda a, b, c: op(a, b, c, is_causal=True), q, k, v)
    assert decomp.non_primitive(graph) == []
    for got, want in zip(graph(q, k, v), op(q, k, v, is_causal=True), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_squeeze_with_no_dims_squeezes_nothing():
    """``squeeze(x, dim=())`` keeps every size-1 axis (an empty list is not "all dims" here)."""
    x = torch.randn(1, 3, 1)
    for dims in ([], [0], [0, 2]):
        graph = decomp.trace(functools.partial(torch.ops.aten.squeeze.dims, dim=dims), x)
        assert graph(x).shape == torch.ops.aten.squeeze.dims(x, dims).shape


def _fill(extra):
    return {"fill_value": extra[0]} if extra else {}


def test_filled_like_keeps_the_requested_dtype():
    """``ones_like(x, dtype=bool)`` is bool (``isreal`` of a real tensor is built from it)."""
    x = torch.randn(2, 3)
    for op, extra in ((torch.ops.aten.ones_like.default, ()), (torch.ops.aten.zeros_like.default, ()),
                      (torch.ops.aten.full_like.default, (2.0,))):  # fmt: skip
        graph = decomp.trace(functools.partial(op, dtype=torch.bool, **_fill(extra)), x)
        got, want = graph(x), op(x, *extra, dtype=torch.bool)
        assert got.dtype == want.dtype and torch.equal(got, want)
    graph = decomp.trace(torch.isreal, x)
    assert graph(x).dtype == torch.bool and bool(graph(x).all())


def test_cumsum_keeps_the_requested_integer_dtype():
    """MoE models in bf16 build grouped_mm's offsets as ``cumsum(counts, 0, dtype=int32)``; a sum of
    int32 is int64 unless told otherwise, and grouped_mm refuses int64 offsets."""
    counts = torch.tensor([[3, 0, 2], [1, 4, 4]], dtype=torch.int32)
    for dtype in (torch.int32, None):
        got = decomp.trace(lambda c, dtype=dtype: torch.cumsum(c, 1, dtype=dtype), counts)(counts)
        want = torch.cumsum(counts, 1, dtype=dtype)
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_nll_loss_of_one_unbatched_row():
    """A (C,) input with a 0-d target (linear_cross_entropy's op_db sample) decomposes like a batch of one."""
    op = torch.ops.aten.nll_loss_forward.default
    x, target = torch.randn(5).log_softmax(0), torch.tensor(3)
    for reduction in (0, 1, 2):
        graph = decomp.trace(functools.partial(op, weight=None, reduction=reduction, ignore_index=-100), x, target)
        assert decomp.non_primitive(graph) == []
        for got, want in zip(graph(x, target), op(x, target, None, reduction, -100), strict=True):
            assert got.shape == want.shape
            torch.testing.assert_close(got, want)


def test_safe_softmax_masked_row_has_a_finite_gradient():
    """A row of -inf gives zeros and a zero gradient; the entry used to hide a NaN behind where()."""
    op = torch.ops.aten._safe_softmax.default
    x = torch.randn(3, 4)
    x[1] = float("-inf")
    graph = decomp.trace(functools.partial(op, dim=1), x)
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    cot = torch.randn(3, 4)
    (got,) = torch.autograd.grad(graph(mine), mine, cot)
    (want,) = torch.autograd.grad(op(ref, 1), ref, cot)
    torch.testing.assert_close(graph(x), op(x, 1))
    torch.testing.assert_close(got, want)


def test_one_hot_traces_to_primitives():
    """``F.one_hot`` reads its values to check them in eager (``.item()``), which make_fx cannot trace
    (Switch Transformers' router); rewritten before dispatch, it is a comparison with an iota."""
    x = torch.tensor([[0, 3, 3], [2, 1, 0]])
    for fn in (lambda t: torch.nn.functional.one_hot(t, 5), lambda t: torch.nn.functional.one_hot(t, num_classes=4)):
        graph = decomp.trace(fn, x)
        assert decomp.non_primitive(graph) == []
        other = torch.tensor([[3, 0, 1], [1, 1, 2]])  # a graph for the values it was not traced with
        got, want = graph(other), fn(other)
        assert got.dtype == want.dtype and torch.equal(got, want)
    with pytest.raises(RuntimeError, match="tracing tensor"):  # the width is a value: still refused
        decomp.trace(torch.nn.functional.one_hot, x)


@pytest.mark.parametrize("length, start, end, step", [(10, 0, None, 2), (10, 1, 9, 3), (9, -5, None, 2), (6, 4, 5, 2),
                                                      (6, 5, None, 3), (5, 0, 5, 5), (2, 2, None, 2)])  # fmt: skip
def test_strided_slice_scatter_traces_to_primitives(length, start, end, step):
    """``x[:, start:end:step] = src`` (Qwen3.5 writes every other channel; its graphs left the course
    before): one column of the span viewed as ``[n, step]``, then a step-1 scatter; a span past the
    end is padded and cut again (slices and cat are kept whole, as roll's). An empty slice writes
    nothing (it crashed the step-1 gather)."""
    base = torch.randn(3, length)
    src = torch.randn_like(base[:, start:end:step])
    graph = decomp.trace(lambda b, s: torch.ops.aten.slice_scatter.default(b, s, 1, start, end, step), base, src)
    assert set(decomp.non_primitive(graph)) <= {"aten.slice.Tensor", "aten.cat.default"}
    torch.testing.assert_close(graph(base, src), torch.slice_scatter(base, src, 1, start, end, step), rtol=0, atol=0)


def test_as_strided_of_a_permuted_tensor_counts_strides_in_its_memory():
    """Longformer: ``as_strided`` on a transposed head split. Its strides address the memory,
    not the logical shape; the entry permutes x into memory order first (left as an op, it read
    the course's contiguous copy with the original strides: off by 1.45)."""
    x = torch.randn(4, 2, 3, 5).permute(1, 0, 2, 3)  # memory order: dims 1, 0, 2, 3

    def fn(t):
        return torch.ops.aten.as_strided.default(t, [2, 4, 15], [15, 30, 1])

    graph = decomp.trace(fn, x)
    assert "aten.as_strided.default" not in decomp.non_primitive(graph)
    torch.testing.assert_close(graph(x), fn(x), rtol=0, atol=0)


def test_copy_moves_the_source_to_the_destination_device():
    """``y[:, 0] = 5.0`` on a CUDA tensor copies from a 0-dim CPU constant. The course's functional
    ``copy`` broadcast that constant to the slice's shape first, and a ``[4, 3]`` CPU tensor then met
    CUDA tensors in ``where`` (the CUDA case of the in-place activation test failed on a GPU). The
    source now takes the destination's device, as ``copy_`` does; ``meta`` stands in for CUDA here."""
    from course_lib.decomp.models import copy

    dst, src = torch.empty(4, 3, device="meta"), torch.tensor(5.0)
    out = copy(dst, src)
    assert out.device == dst.device and out.dtype == dst.dtype and tuple(out.shape) == (4, 3)
    same = copy(torch.zeros(4, 3), torch.tensor(5.0))  # same device: values broadcast, as before
    torch.testing.assert_close(same, torch.full((4, 3), 5.0))
