"""Module 5: teaching kernels, divergence, coalescing and bank-conflict counts against brute force."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import gpu
from course_lib.gpu import memory


def test_global_index_and_mask():
    def scale(t, x, out, n):
        i = t.bid.x * t.bdim.x + t.tid.x
        with t.if_(i < n):
            out[i] = x[i] * 2.0

    x, o = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    r = gpu.launch(scale, 2, 64, x, o, 100)
    assert np.array_equal(o, 2 * x)
    last = r.warps[-1]
    assert last.divergence_efficiency < 1.0  # only 4 of its lanes are inside n


def test_divergence_runs_both_sides():
    def diverge(t, out):
        i = t.tid.x
        with t.if_(i % 2 == 0):
            out[i] = i * 2
        with t.else_():
            out[i] = i + 100

    o = np.zeros(32, np.int64)
    r = gpu.launch(diverge, 1, 32, o)
    assert o[:4].tolist() == [0, 101, 4, 103]
    assert r.warps[0].global_requests == 2 and r.warps[0].divergence_efficiency < 0.8


def test_shared_reduction_with_barriers():
    def reduce_shared(t, x, out):
        s = t.shared("s", 64)
        i = t.tid.x
        s[i] = x[t.bid.x * 64 + i]
        yield
        stride = 32
        while stride >= 1:
            with t.if_(i < stride):
                s[i] = s[i] + s[i + stride]
            yield
            stride //= 2
        with t.if_(i == 0):
            out[t.bid.x] = s[0]

    x = np.random.default_rng(0).random(128).astype(np.float32)
    o = np.zeros(2, np.float32)
    r = gpu.launch(reduce_shared, 2, 64, x, o)
    np.testing.assert_allclose(o, x.reshape(2, 64).sum(1), rtol=1e-6)
    assert all(w.barriers == 7 for w in r.warps)


def test_bank_conflicts_column_access():
    assert memory.bank_wavefronts(np.arange(32) * 4) == 1  # one word per bank
    assert memory.bank_wavefronts(np.arange(32) * 128) == 32  # all in bank 0
    assert memory.bank_wavefronts(np.zeros(32, np.int64)) == 1  # broadcast
    assert memory.bank_wavefronts(np.arange(32) * 33 * 4) == 1  # padded row of 33 floats
    assert memory.bank_wavefronts(np.arange(32) * 16, nbytes=16) == 4  # 4 phases of 8 lanes


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 64), st.integers(0, 256), st.sampled_from([1, 2, 4, 8, 16]))
def test_sectors_match_brute_force(stride, offset, nbytes):
    addr = offset + np.arange(32) * stride * nbytes
    brute = {b // 32 for a in addr for b in range(a, a + nbytes)}
    assert memory.sectors_touched(addr, nbytes) == len(brute)
    assert memory.lines_touched(addr, nbytes) == len({b // 128 for a in addr for b in range(a, a + nbytes)})


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 4095), min_size=32, max_size=32))
def test_wavefronts_match_brute_force(words):
    addr = np.array(words) * 4
    per_bank = {}
    for w in set(words):
        per_bank.setdefault(w % 32, set()).add(w)
    assert memory.bank_wavefronts(addr) == max(len(v) for v in per_bank.values())


def test_results_independent_of_block_count():
    def copy(t, x, out, n):
        i = t.bid.x * t.bdim.x + t.tid.x
        with t.if_(i < n):
            out[i] = x[i]

    x = np.arange(96, dtype=np.float32)
    a, b = np.zeros(96, np.float32), np.zeros(96, np.float32)
    gpu.launch(copy, 3, 32, x, a, 96)
    gpu.launch(copy, 1, 96, x, b, 96)
    assert np.array_equal(a, b)
