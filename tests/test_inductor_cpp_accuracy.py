"""Accuracy of the C++ backend's float sums: blocked (two-level) reduction loops.

A float sum carried in one running accumulator rounds the whole sum so far at each step, so its
error grows with the length; eager (ATen's cascade sum) and Inductor (``CascadeSumHelper``) sum
in a tree. course_lib.inductor's C++ code sums each block of ``SUM_CHUNK`` steps into a fresh
partial accumulator and adds the partials into the total (codegen/cpp.py, ``SUM_CHUNK``).
Errors are measured against the float64 sum of the same float32 values.
"""

from __future__ import annotations

import statistics

import pytest
import torch

import course_lib.inductor as ind
from course_lib import compat
from course_lib.inductor.codegen import cpp

DEC = compat.inductor_decomposition_table()


def _compile(fn, *args):
    return ind.compile_graph(compat.make_fx(fn, *args, decompositions=DEC), list(args))


def _rel_err(value: torch.Tensor, x: torch.Tensor) -> float:
    exact = x.double().sum().item()
    return abs(value.item() - exact) / abs(exact)


def test_long_positive_sum_is_as_accurate_as_eager():
    """1M values in [0, 1): the worst case for a running sum (the sum only grows). One
    accumulator per vector lane was off by 20x eager's error (6.0e-7 vs 3.0e-8); blocked, about 1x."""
    n = 1_000_000
    c = _compile(lambda t: (t.sum(),), torch.rand(n))
    course, eager = [], []
    for seed in range(16):
        x = torch.rand(n, generator=torch.Generator().manual_seed(seed))
        course.append(_rel_err(c(x)[0], x))
        eager.append(_rel_err(x.sum(), x))
    assert statistics.mean(course) <= 4 * statistics.mean(eager), (statistics.mean(course), statistics.mean(eager))
    assert "part_buf" in c.kernel_code and f"r0_start += {cpp.SUM_CHUNK}" in c.kernel_code, c.kernel_code


def test_long_mean_and_var_are_accurate():
    """mean and var are built from blocked sums too (var_mean lowers to two passes of sums)."""
    x = torch.rand(2, 300_000) + 10.0  # a large mean: each pass sums same-signed values
    c = _compile(lambda t: torch.var_mean(t, -1), x)
    var, mean = c(x)
    var64, mean64 = torch.var_mean(x.double(), -1)
    assert (mean.double() - mean64).abs().max().item() <= 4 * 2**-24 * 10.5
    torch.testing.assert_close(var.double(), var64, rtol=1e-5, atol=0)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 200, 256])
def test_blocked_loops_cover_every_element(n, monkeypatch):
    """Blocks of 64 steps (patched small): a full sum with max and an integer count in the same
    loop, and row sums, for lengths below, at and around a multiple of the block."""
    monkeypatch.setattr(cpp, "SUM_CHUNK", 64)
    x = torch.randn(3, n)
    fn = lambda t: (t.sum(), t.amax(), (t > 0).sum(), t.sum(-1), torch.softmax(t, -1))  # noqa: E731
    c = _compile(fn, x)
    assert ("r0_start" in c.kernel_code) is (3 * n > 64)  # the full sum is 3 * n steps long
    for got, want in zip(c(x), fn(x), strict=True):
        torch.testing.assert_close(got, want)


def test_max_min_and_integer_sums_are_not_blocked():
    x = torch.randn(100_000)
    c = _compile(lambda t: (t.amax(), t.amin(), (t > 0).sum()), x)
    assert "r0_start" not in c.kernel_code and "part_" not in c.kernel_code
    assert "#pragma omp parallel for simd reduction(" in c.kernel_code  # one loop, threads and lanes
    for got, want in zip(c(x), (x.amax(), x.amin(), (x > 0).sum()), strict=True):
        torch.testing.assert_close(got, want)


def test_only_the_innermost_reduction_loop_is_blocked(monkeypatch):
    """A sum over dims (0, 2) keeps two reduction loops; the inner one runs in blocks."""
    monkeypatch.setattr(cpp, "SUM_CHUNK", 64)
    x = torch.randn(3, 5, 150)
    c = _compile(lambda t: (t.sum((0, 2)),), x)
    assert "r1_start += 64" in c.kernel_code and "r0_start" not in c.kernel_code, c.kernel_code
    torch.testing.assert_close(c(x)[0], x.sum((0, 2)))


def test_blocked_sum_with_symbolic_length(monkeypatch):
    """The block loop's end is ``min(start + 64, ks0)`` when the length is a size symbol."""
    monkeypatch.setattr(cpp, "SUM_CHUNK", 64)
    c = ind.compile_dynamic(lambda t: (t.sum(-1), t.sum()), torch.randn(3, 100), dynamic={0: (1,)})
    assert "std::min<int64_t>(r0_start + 64, ks0)" in c.kernel_code, c.kernel_code
    for n in (2, 64, 100, 129, 1000):  # the trace guards s0 >= 2
        x = torch.randn(3, n)
        out = c(x)
        torch.testing.assert_close(out[0], x.sum(-1))
        torch.testing.assert_close(out[1], x.sum(), rtol=1e-5, atol=1e-4)
