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


# ---------------------------------------------------------------------------
# the persistent limit (PERSISTENT_RNUMEL) and the warps rule, at their real values
# ---------------------------------------------------------------------------


def _layernorm_and_softmax(x, w, b):
    return (F.layer_norm(x, (x.shape[-1],), w, b), torch.softmax(x, -1))


def _launches(code: str) -> list[tuple[int, int, int]]:
    """(grid, RBLOCK, num_warps) of each launch site, in order."""
    import re

    found = re.findall(r"grid=\((\d+),\).*RBLOCK=(\d+).*num_warps=(\d+)\)", code)
    return [tuple(int(v) for v in m) for m in found]


@pytest.mark.parametrize("n", [tcg.PERSISTENT_RNUMEL - 1, tcg.PERSISTENT_RNUMEL + 1])
def test_rows_just_below_and_above_the_persistent_limit(n, monkeypatch):
    """32767 elements: one tile of 32768 held in registers (one masked lane), 32 warps, no loop.
    32769: looped (a last chunk of one element), Welford and online softmax. Both match eager in the
    interpreter. (Chunks of 1024 here, not 4096: the interpreter merges the lanes with the combine
    function in Python, seconds a chunk size step.)"""
    monkeypatch.setattr(tcg, "LOOPED_RBLOCK", 1024)
    torch.manual_seed(8)
    x, w, b = torch.randn(2, n) * 3 + 1, torch.randn(n), torch.randn(n)
    c = _compile(_layernorm_and_softmax, x, w, b)
    code = c.kernel_code
    if n <= tcg.PERSISTENT_RNUMEL:
        assert _loops(code) == 0 and "welford_combine" not in code, code
        assert set(_launches(code)) == {(2, 32768, 32)}  # one row a program, 32 elements a thread
    else:
        assert "welford_combine" in code and "online_softmax_combine" in code, code
        assert _loops(code) == 2  # one kernel: statistics of both in one pass, both outputs in the second
        assert set(_launches(code)) == {(2, 1024, 1024 // 32 // tcg.LOOPED_ELEMENTS_PER_THREAD)}
    for got, ref in zip(c(x, w, b), _layernorm_and_softmax(x, w, b), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_warps_rule_table():
    """512 elements a warp, at least 2, at most 32: a 32768-element row gets 32 warps (32 a thread)."""
    assert [tcg.reduction_warps(t) for t in (64, 1024, 4096, 8192, 16384, 32768)] == [2, 2, 8, 16, 32, 32]


def test_a_lone_long_row_is_split_not_persistent():
    """One output over 16384 elements (cross entropy's loss over 16384 rows) fits the persistent limit but
    would be one program on one SM: it is split (ONE_ROW_PERSISTENT_RNUMEL); 8192 stays one tile."""
    for n, split in ((tcg.ONE_ROW_PERSISTENT_RNUMEL, False), (2 * tcg.ONE_ROW_PERSISTENT_RNUMEL, True)):
        y = torch.randn(n)
        c = _compile(lambda y: (y.sum(),), y)
        assert ("_partial(" in c.kernel_code) == split and _loops(c.kernel_code) == int(split), c.kernel_code
        torch.testing.assert_close(c(y)[0], y.sum(), rtol=1e-5, atol=1e-3)


def test_a_32768_row_layernorm_compiles_for_sm_90_without_spills():
    """The register budget behind the 32-warp rule: 32 elements a thread of x (plus w and b) fit the
    64 registers a 1024-thread program may use (on the H200 at 16 warps, 64 a thread, ptxas spilled).
    Compiled as a launch with aligned tensors specialises (vector loads); unaligned it spills 96 bytes."""
    x, w, b = torch.randn(2, 32768), torch.randn(32768), torch.randn(32768)
    c = _compile(lambda x, w, b: (F.layer_norm(x, (32768,), w, b),), x, w, b)
    stages = tcg.compile_to_ptx(c, "sm_90", aligned=True)
    assert [(s.metadata["registers"], s.metadata["spills"]) for s in stages.values()] == [(64, 0)]


def test_the_last_pass_of_a_looped_row_walks_backwards(looped, monkeypatch):
    """Layernorm's normalising pass starts at the row's last chunk (the tail of 5 of a 37-element row,
    then 32..24 down to 0): every element is still written once, with the same values either way."""
    torch.manual_seed(4)
    x, w, b = torch.randn(3, 37), torch.randn(37), torch.randn(37)

    def f(x, w, b):
        return (F.layer_norm(x, (37,), w, b), torch.softmax(x * 2, -1))

    back = _compile(f, x, w, b)  # one kernel: a pass for both rows' statistics, one that writes both
    assert _loops(back.kernel_code) == 2 and "rindex = rlast - roffset" in back.kernel_code, back.kernel_code
    monkeypatch.setattr(tcg, "LOOPED_REVERSE_LAST", False)
    fwd = _compile(f, x, w, b)
    assert "rlast" not in fwd.kernel_code
    for got, ref in zip(back(x, w, b), f(x, w, b), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    for got, ref in zip(back(x, w, b), fwd(x, w, b), strict=True):
        torch.testing.assert_close(got, ref, rtol=0, atol=0)
