"""Reductions in course_lib's Triton code: Welford (a looped row's mean and variance from one
read) and split reductions (a whole-tensor reduction spread over many programs).

Run in Triton's interpreter on the CPU against eager PyTorch; Welford's rows are forced onto the looped
path (``PERSISTENT_RNUMEL`` lowered) with a chunk that does not divide the row (masked tail lanes).
"""

import pytest
import torch
import torch.nn.functional as F

import course_lib.inductor as ind
from course_lib import compat, decomp
from course_lib.inductor.codegen import triton as tcg


def _compile(fn, *args):
    gm = compat.make_fx(fn, *args, decompositions=decomp.DECOMPOSITIONS)
    return ind.compile_graph(gm, list(args), codegen="triton")


@pytest.fixture
def looped(monkeypatch):
    """Rows longer than 8 loop in chunks of 8 (a 37-element row: 4 full chunks and a tail of 5)."""
    monkeypatch.setattr(tcg, "PERSISTENT_RNUMEL", 8)
    monkeypatch.setattr(tcg, "LOOPED_RBLOCK", 8)


def _loops(code: str) -> int:
    return code.count("for roffset in range")


def test_layernorm_reads_the_row_once_for_its_statistics(looped):
    torch.manual_seed(0)
    x, w, b = torch.randn(5, 37), torch.randn(37), torch.randn(37)

    def f(x, w, b):
        return (F.layer_norm(x, (37,), w, b),)

    c = _compile(f, x, w, b)
    # one Welford pass for mean and variance, one pass to normalise: two loops, not three
    assert "welford_combine" in c.kernel_code and _loops(c.kernel_code) == 2, c.kernel_code
    torch.testing.assert_close(c(x, w, b)[0], f(x, w, b)[0], rtol=1e-5, atol=1e-5)


def test_welford_holds_its_precision_where_the_mean_is_large(looped):
    """Rows around 1e4 with unit spread: float32 statistics still match eager's to 1e-3."""
    torch.manual_seed(1)
    x = 1e4 + torch.randn(3, 37)

    def f(x):
        return (torch.var_mean(x, -1, correction=0)[0], x.mean(-1))

    c = _compile(f, x)
    assert "welford_combine" in c.kernel_code
    var, mean = c(x)
    ref = torch.var_mean(x.double(), -1, correction=0)
    torch.testing.assert_close(var.double(), ref[0], rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(mean.double(), ref[1], rtol=1e-6, atol=1e-3)


def test_unbiased_variance_and_its_gradient_shape(looped):
    torch.manual_seed(2)
    x = torch.randn(4, 40)

    def f(x):
        return (x.var(-1), x.std(-1, keepdim=True) * x)

    c = _compile(f, x)
    assert "welford_combine" in c.kernel_code, c.kernel_code
    for got, ref in zip(c(x), f(x), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_a_sum_of_squares_about_something_else_is_not_folded(looped):
    """sum((x - 1) ** 2) after sum(x) is not a variance: it keeps its own pass."""
    torch.manual_seed(3)
    x = torch.randn(2, 37)

    def f(x):
        s = x.sum(-1, keepdim=True)
        return (((x - 1) ** 2).sum(-1) + s[:, 0], ((x - s / 36) ** 2).sum(-1))  # n is 37, not 36

    c = _compile(f, x)
    assert "welford_combine" not in c.kernel_code, c.kernel_code
    for got, ref in zip(c(x), f(x), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_online_softmax_reads_the_row_once_for_max_and_sum(looped, name):
    """max(x) then sum(exp(x - max)) in one pass, also with rows that start with -inf (masked scores)."""
    torch.manual_seed(7)
    x = torch.randn(5, 37) * 5
    x[0, :20] = float("-inf")  # lanes that see only -inf must add nothing, not NaN
    f = {"softmax": lambda x: (torch.softmax(x, -1),), "log_softmax": lambda x: (torch.log_softmax(x, -1),),
         "logsumexp": lambda x: (torch.logsumexp(x, -1),)}[name]  # fmt: skip
    c = _compile(f, x)
    assert "online_softmax_combine" in c.kernel_code, c.kernel_code
    assert _loops(c.kernel_code) == (1 if name == "logsumexp" else 2)  # was 2 and 3
    torch.testing.assert_close(c(x)[0], f(x)[0], rtol=1e-5, atol=1e-5)


def test_one_pass_kernels_compile_for_sm_90(looped):
    x, w, b = torch.randn(4, 40), torch.randn(40), torch.randn(40)
    c = _compile(lambda x, w, b: (F.layer_norm(x, (40,), w, b), torch.softmax(x, -1)), x, w, b)
    assert "welford_combine" in c.kernel_code and "online_softmax_combine" in c.kernel_code
    stages = tcg.compile_to_ptx(c, "sm_90")
    assert stages and all(s.metadata["spills"] == 0 for s in stages.values())


def test_persistent_rows_need_no_welford():
    """A row that fits one tile is read once anyway (two passes over registers)."""
    x, w, b = torch.randn(4, 64), torch.randn(64), torch.randn(64)
    c = _compile(lambda x, w, b: (F.layer_norm(x, (64,), w, b),), x, w, b)
    assert "welford_combine" not in c.kernel_code and _loops(c.kernel_code) == 0


def test_combine_rule_matches_a_two_pass_variance():
    """The merge of two parts' (mean, M2, n) equals the statistics of the whole (the rule, in numpy)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.normal(3, 2, 11), rng.normal(-1, 5, 6)

    def stats(v):
        return v.mean(), ((v - v.mean()) ** 2).sum(), float(len(v))

    (ma, m2a, na), (mb, m2b, nb) = stats(a), stats(b)
    n = na + nb
    share = nb / n
    delta = mb - ma
    mean, m2 = ma + delta * share, m2a + m2b + delta * delta * na * share
    whole = np.concatenate([a, b])
    assert np.isclose(mean, whole.mean()) and np.isclose(m2, ((whole - whole.mean()) ** 2).sum())
    assert "n_b / " in tcg.WELFORD_COMBINE and "delta * delta * n_a * share_b" in tcg.WELFORD_COMBINE


# ---------------------------------------------------------------------------
# split reductions: a whole-tensor reduction over many programs
# ---------------------------------------------------------------------------


def test_cross_entropy_loss_is_split_over_many_programs():
    """The loss's mean over 20000 rows: partials from 40 programs (64 launched, 24 idle), then one program."""
    torch.manual_seed(4)
    x, t = torch.randn(20000, 8), torch.randint(0, 8, (20000,))

    def f(x, t):
        return (F.cross_entropy(x, t),)

    c = _compile(f, x, t)
    code = c.kernel_code
    assert "def kernel1_partial(" in code and "DirectLaunch(kernel1_partial, grid=(64,)" in code, code
    torch.testing.assert_close(c(x, t)[0], f(x, t)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [8193, 20000])
def test_whole_tensor_sum_max_and_mean_match_eager(n):
    """Chunks that do not divide the tensor, programs with nothing to do (identity partials)."""
    torch.manual_seed(5)
    y = torch.randn(3, n)

    def f(y):
        return (y.sum(), y.amax(), (y * y).mean(), y.amin())

    c = _compile(f, y)
    assert "_partial(" in c.kernel_code
    for got, ref in zip(c(y), f(y), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-4)


def test_split_is_compiled_for_sm_90():
    torch.manual_seed(6)
    y = torch.randn(40000)
    c = _compile(lambda y: (y.abs().sum(),), y)
    stages = tcg.compile_to_ptx(c, "sm_90")
    assert sorted(stages) == ["kernel0", "kernel0_partial"]
    assert all("ld.global" in s["ptx"] for s in stages.values())
