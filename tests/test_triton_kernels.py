"""Reference kernels against torch on fresh random inputs (interpreter on CPU, native on GPU)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import course_lib
from course_lib.triton import kernels as K

DEV = "cuda" if course_lib.env.has_cuda() else "cpu"
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True)


@SETTINGS
@given(n=st.integers(1, 700), block=st.sampled_from([64, 128, 256]), seed=st.integers(0, 2**16))
def test_add(n, block, seed):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n, generator=g).to(DEV), torch.randn(n, generator=g).to(DEV)
    assert torch.equal(K.add(x, y, block), x + y)


@SETTINGS
@given(rows=st.integers(1, 6), cols=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_softmax_both_variants(rows, cols, seed):
    x = (torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 5).to(DEV)
    ref = x.softmax(-1)
    torch.testing.assert_close(K.softmax(x), ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(K.softmax(x, online=True, block=32), ref, rtol=1e-5, atol=1e-6)


@SETTINGS
@given(rows=st.integers(1, 5), cols=st.integers(2, 200), seed=st.integers(0, 2**16))
def test_layernorm(rows, cols, seed):
    g = torch.Generator().manual_seed(seed)
    x, w, b = torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g), torch.randn(cols, generator=g)
    x, w, b = x.to(DEV), w.to(DEV), b.to(DEV)
    ref = torch.nn.functional.layer_norm(x, (cols,), w, b)
    torch.testing.assert_close(K.layernorm(x, w, b), ref, rtol=1e-4, atol=1e-4)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(m=st.integers(1, 50), n=st.integers(1, 50), k=st.integers(1, 50), seed=st.integers(0, 2**16))
def test_matmul_ragged(m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(m, k, generator=g).to(DEV), torch.randn(k, n, generator=g).to(DEV)
    torch.testing.assert_close(K.matmul(a, b, 16, 16, 16, 2), a @ b, rtol=1e-4, atol=1e-4)


def test_grouped_order_is_a_permutation():
    order = K.program_order(100, 70, 16, 16, 3)
    assert sorted(order) == sorted((i, j) for i in range(7) for j in range(5))
    assert order[:4] == [(0, 0), (1, 0), (2, 0), (0, 1)]


@settings(max_examples=3, deadline=None, derandomize=True)
@given(seq=st.integers(1, 40), d=st.sampled_from([16, 32]), seed=st.integers(0, 2**16))
def test_flash_attention(seq, d, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, seq, d, generator=g).to(DEV) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(K.flash_attention(q, k, v), ref, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- Hopper kernels (TMA descriptors)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(m=st.integers(1, 70), n8=st.integers(1, 6), k8=st.integers(1, 6), programs=st.integers(1, 5),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_persistent_tma_matmul_ragged(m, n8, k8, programs, seed):
    """TMA boxes past the edges read zeros and clip stores; rows only need 16-byte alignment."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, 8 * k8, generator=g).to(DEV, torch.float16)
    b = torch.randn(8 * k8, 8 * n8, generator=g).to(DEV, torch.float16)
    got = K.matmul_persistent(a, b, 32, 16, 16, group_m=2, programs=programs)
    torch.testing.assert_close(got.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)


def test_persistent_schedule_covers_every_tile_once():
    sched = K.persistent_schedule(100, 70, 16, 16, 3, programs=4)
    flat = [t for tiles in sched for t in tiles]
    assert sorted(flat) == sorted((i, j) for i in range(7) for j in range(5))
    assert sched[0][:2] == [(0, 0), (1, 1)]  # program 0 takes tiles 0 and 4 of the grouped order


@settings(max_examples=3, deadline=None, derandomize=True)
@given(seq=st.integers(1, 70), causal=st.booleans(), seed=st.integers(0, 2**16))
def test_tma_flash_attention_ragged_and_causal(seq, causal, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, seq, 16, generator=g).to(DEV, torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    got = K.flash_attention_tma(q, k, v, 32, 16, causal=causal)
    torch.testing.assert_close(got.float(), ref, rtol=2e-3, atol=2e-3)


def test_hopper_kernels_refuse_bad_input_in_words():
    import pytest

    with pytest.raises(ValueError, match="16-byte"):
        K.matmul_persistent(torch.randn(8, 5, dtype=torch.float16), torch.randn(5, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"\(M, K\) @ \(K, N\)"):
        K.matmul_persistent(torch.randn(8, 8), torch.randn(16, 8))
    with pytest.raises(ValueError, match="multiple of block_n"):
        q = torch.randn(1, 1, 32, 16, dtype=torch.float16)
        K.flash_attention_tma(q, q, q, 48, 32, causal=True)
    with pytest.raises(ValueError, match="power of two"):
        q = torch.randn(1, 1, 32, 24, dtype=torch.float16)
        K.flash_attention_tma(q, q, q)
