"""A long row split over the programs of a cooperative launch (codegen.triton ROW_SPLIT).

The parts of a row wait for each other, which Triton's interpreter (one program at a time) can run
only with one part a row: on the CPU the whole generated kernel runs that way (partials published,
the counter, the merge through the same combine rules, the row groups walking several rows each, the
next row loaded before the wait). Several parts a row are compiled for sm_90 by Triton's real
compiler here, and run against eager on a GPU (the last tests, skipped without CUDA).
"""

import re

import pytest
import torch
import torch.nn.functional as F
from test_inductor_triton_reductions import _compile  # make_fx with the course's decompositions, then Triton

from course_lib.inductor import launcher
from course_lib.inductor.codegen import triton as tcg

interpreter = pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter path (CPU tensors)")


@pytest.fixture
def split(monkeypatch):
    """Rows past 8 elements are long; the backend may split them, parts of up to 64 elements."""
    monkeypatch.setattr(tcg, "PERSISTENT_RNUMEL", 8)
    monkeypatch.setattr(tcg, "LOOPED_RBLOCK", 8)
    monkeypatch.setattr(tcg, "ROW_SPLIT_PART", 64)
    monkeypatch.setattr(tcg, "row_split_available", lambda: True)


def _sites(c) -> list:
    """The launch sites of a compiled graph's Triton module."""
    module = c.call.__globals__["kernel0"].__globals__
    return [v for k, v in module.items() if k.startswith("site_")]


def _layernorm(x, w, b):
    return (F.layer_norm(x, (x.shape[-1],), w, b),)


def _softmax(x, w, b):
    return (torch.softmax(x * 2, -1),)


def _rmsnorm(x, w, b):
    return (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,)


def _max_and_sum_with_row_outputs(x, w, b):
    """Two plain reductions merged side by side, and a value a row (an outer store, part 0's)."""
    return (x - x.amax(-1, keepdim=True) + x.sum(-1, keepdim=True), x.amin(-1))


def _softmax_backward(g, y, b):
    """softmax's input gradient: one sum a row, then every element (``_softmax_backward_data``)."""
    return (y * (g - (g * y).sum(-1, keepdim=True)),)


def _layernorm_backward(g, xhat, w):
    """layer norm's input gradient, rstd taken as 1: two sums a row, then every element."""
    gw = g * w
    n = g.shape[-1]
    return (gw - gw.sum(-1, keepdim=True) / n - xhat * (gw * xhat).sum(-1, keepdim=True) / n,)


@interpreter
@pytest.mark.parametrize(
    "fn", [_layernorm, _softmax, _rmsnorm, _max_and_sum_with_row_outputs, _softmax_backward, _layernorm_backward]
)
@pytest.mark.parametrize("ahead", [False, True], ids=["publish", "publish_ahead"])
@pytest.mark.parametrize("flags", [False, True], ids=["counter", "flagged"])
def test_one_part_a_row_runs_the_whole_kernel_in_the_interpreter(split, monkeypatch, fn, ahead, flags):
    """7 rows of 37 (a masked tail of the 64-lane part), 3 row groups: each program walks 2 or 3 rows.
    Published ahead (ROW_SPLIT_AHEAD), each program publishes its first row's partials before the loop
    and row r + 3's before it waits for row r's. The kernel carries both protocols behind the constexpr
    FLAGS; with ROW_SPLIT_FLAGS the site may choose, and the interpreter (no binary to measure) takes
    the preferred one, flags: the partials travel as words that carry their row's number. Without, the
    counter."""
    monkeypatch.setattr(tcg, "ROW_SPLIT_AHEAD", ahead)
    monkeypatch.setattr(tcg, "ROW_SPLIT_FLAGS", flags)
    torch.manual_seed(0)
    x, w, b = torch.randn(7, 37) * 2 + 0.5, torch.randn(37), torch.randn(37)
    c = _compile(fn, x, w, b)
    code = c.kernel_code
    assert ("if xrow + xstep < xnumel:" in code and "if xstart < xnumel:" in code) == ahead, code
    assert "row_split=1" in code and "for xrow in range(xstart, xnumel, xstep)" in code
    assert 'sem="relaxed"' in code and 'sem="release"' in code and "if FLAGS:" in code, code  # both protocols
    assert ("choices=(dict(FLAGS=True), dict(FLAGS=False))" in code) == flags, code
    assert "for roffset" not in code, code  # no looped pass left: the row is read once
    for got, ref in zip(c(x, w, b), fn(x, w, b), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    (site,) = _sites(c)
    assert site.grid == (launcher.INTERPRETER_ROW_GROUPS, 1, 1)  # sized at the first launch, not 7
    assert site.constexprs["FLAGS"] is flags  # the protocol that ran


def test_welford_and_softmax_partials_merge_like_the_rows_lanes(split):
    """The merge reuses the looped row's combine functions over the parts' partials."""
    x, w, b = torch.randn(3, 37), torch.randn(37), torch.randn(37)
    code = _compile(lambda x, w, b: (*_layernorm(x, w, b), *_softmax(x, w, b)), x, w, b).kernel_code
    assert "tl.reduce((wf_acc0_mean, wf_acc0_m2, wf_acc0_n), None, welford_combine)" in code, code
    # a part's count follows from its index: Welford publishes mean and M2, softmax max and sum of exp
    assert "wf_acc0_n = tl.minimum(tl.maximum(rnumel - sindex * RBLOCK, 0), RBLOCK)" in code, code
    assert "online_softmax_combine)" in code and " * NPARTS + part) * 4" in code  # 2 + 2 words a part
    assert "torch.zeros(15, dtype=torch.int64" in code and "ws, ws[12:])" in code, code  # 3 rows: 12 words, 3 counters
    # partials and merged statistics are scalars: a [1, 1] tile made Triton 3.6 move every [1, RBLOCK]
    # value computed from it through shared memory (45-60x slower on the H200)
    body = code[code.index("for xrow in range") : code.index("site_kernel0")]
    arrivals = re.sub(r"tl\.atomic_add\(cnt_ptr \+ [^,]+, 1,", "", body)
    assert "[:, None]" not in body and ", 1)" not in arrivals, body


@interpreter
def test_a_register_cap_is_written_into_the_launch_site(split, monkeypatch):
    """ROW_SPLIT_MAXNREG: the site passes ``maxnreg`` to Triton (ptxas's register cap); without it, none."""
    x, w, b = torch.randn(7, 37), torch.randn(37), torch.randn(37)
    assert "maxnreg" not in _compile(_layernorm, x, w, b).kernel_code
    monkeypatch.setattr(tcg, "ROW_SPLIT_MAXNREG", 64)
    c = _compile(_layernorm, x, w, b)
    assert ", maxnreg=64)" in c.kernel_code, c.kernel_code
    torch.testing.assert_close(c(x, w, b)[0], _layernorm(x, w, b)[0], rtol=1e-5, atol=1e-5)


@interpreter
def test_several_parts_a_row_refuse_to_run_in_the_interpreter(split, monkeypatch):
    """Parts of 16: a 37-row needs 3 programs waiting for each other. On the CPU the launch says why
    it cannot run instead of spinning forever."""
    monkeypatch.setattr(tcg, "ROW_SPLIT_PART", 16)
    x, w, b = torch.randn(2, 37), torch.randn(37), torch.randn(37)
    c = _compile(_layernorm, x, w, b)
    assert "NPARTS=3, NPARTS_P2=4" in c.kernel_code and "row_split=3" in c.kernel_code, c.kernel_code
    with pytest.raises(RuntimeError, match="interpreter runs programs one at a time"):
        c(x, w, b)


@pytest.mark.parametrize("ahead", [False, True], ids=["publish", "publish_ahead"])
@pytest.mark.parametrize("flags", [False, True], ids=["counter", "flagged"])
def test_several_parts_a_row_compile_for_sm_90(split, monkeypatch, ahead, flags):
    """Triton's real compiler takes the 3-part kernel, and nothing spills. With the counter, the
    arrival in the PTX is a release add at GPU scope (``red``: its result is unused) and the spin an
    acquire load (Triton turns an atomic add of 0 into ``ld.acquire``). Flagged, a partial is one
    relaxed 64-bit exchange and the spin volatile 64-bit loads: no acquire or release anywhere."""
    monkeypatch.setattr(tcg, "ROW_SPLIT_PART", 16)
    monkeypatch.setattr(tcg, "ROW_SPLIT_AHEAD", ahead)
    x, w, b = torch.randn(2, 37), torch.randn(37), torch.randn(37)  # both protocols of one kernel:
    stages = tcg.compile_to_ptx(_compile(_layernorm, x, w, b), "sm_90", aligned=False, constexprs={"FLAGS": flags})
    (stage,) = stages.values()
    ptx = stage["ptx"]
    assert stage.metadata["spills"] == 0
    if flags:
        assert len(re.findall(r"atom\.global\.gpu\.relaxed\.exch\.b64", ptx)) == 2 * (2 if ahead else 1), ptx
        assert "ld.volatile.global.b64" in ptx and not re.search(r"acquire|release|fence", ptx), ptx
    else:
        assert re.search(r"(red|atom)\.global\.gpu\.release\.add", ptx), ptx
        assert re.search(r"(ld|atom)\.global\.gpu\.acquire", ptx)


def test_the_precompile_compiles_both_protocols(split, monkeypatch, tmp_path):
    """On a GPU the site compiles each of its choices at its first launch (DirectLaunch.pick), so the
    parallel precompile submits each: one job a protocol, two distinct binaries. (The specialisation
    is made by hand here, as the JIT would make it on a GPU.)"""
    import course_lib.triton.compile as tc
    from course_lib import compat
    from course_lib.inductor import async_compile

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(async_compile, "_SHARED", [async_compile.AsyncCompile(workers=1)])
    monkeypatch.setattr(tcg, "ROW_SPLIT_PART", 16)
    x, w, b = torch.randn(2, 37), torch.randn(37), torch.randn(37)
    c = _compile(_layernorm, x, w, b)
    (launch,) = [c.call.__globals__[k.name] for k in c.schedule.kernels if k.kind == "kernel"]
    asked = []

    def capture(kernel, args, kwargs):
        asked.append(kwargs["FLAGS"])
        consts = {k: kwargs[k] for k in launch.constexprs}
        return compat.triton_specialization(kernel, launch.signature, consts, launch.int_args,
                                            tc.gpu_target("sm_90"), kwargs["num_warps"])  # fmt: skip

    monkeypatch.setattr(compat, "triton_capture_specialization", capture)
    fn = launch.jit_fn.fn
    report = async_compile.precompile({"kernel0": launch}, fn.__module__, fn.__code__.co_filename)
    assert asked == [True, False] and report.unique == 2 and report.compiled == 2, report


@pytest.mark.parametrize("code_of", ["cross_entropy", "no_stores"])
def test_what_is_not_row_split(split, code_of):
    """A gather (cross entropy's target logit) and a reduction with no per-element output stay looped."""
    x = torch.randn(4, 37)
    if code_of == "cross_entropy":
        t = torch.tensor([1, 0, 36, 5])
        code = _compile(lambda x, t: (F.cross_entropy(x, t, reduction="none"),), x, t).kernel_code
    else:
        code = _compile(lambda x: (x.sum(-1), x.amax(-1)), x).kernel_code
    assert "row_split=" not in code


def test_the_backend_splits_rows_only_where_a_gpu_launches_cooperatively(monkeypatch):
    monkeypatch.setattr(tcg, "ROW_SPLIT", True)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not tcg.row_split_available()
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setenv("COURSE_ROW_SPLIT", "0")
    assert not tcg.row_split_available()


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
@pytest.mark.parametrize("ahead", [False, True], ids=["publish", "publish_ahead"])
@pytest.mark.parametrize("protocol", ["counter", "flagged", "chosen"])
@pytest.mark.parametrize("n", [65536, 65536 + 4100, 3 * 8192])
def test_long_rows_on_the_gpu_match_eager(n, ahead, protocol, monkeypatch):
    """Rows of 65536 (8 parts), of 69636 (9 parts, the last one partly masked) and of 24576 forced
    past the persistent limit: layer norm, softmax and their statistics (mean, rstd as a training
    graph saves them) against eager, the grid no larger than what the GPU holds at once. The counter
    alone, flags forced (ROW_SPLIT_CHOICE), or each site's own choice by occupancy."""
    monkeypatch.setattr(tcg, "ROW_SPLIT_AHEAD", ahead)
    monkeypatch.setattr(tcg, "ROW_SPLIT_FLAGS", protocol != "counter")
    monkeypatch.setattr(launcher, "ROW_SPLIT_CHOICE", 0 if protocol == "flagged" else None)
    torch.manual_seed(0)
    x = torch.randn(300, n, device="cuda") * 3 + 1
    w, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    limit, on = tcg.PERSISTENT_RNUMEL, tcg.ROW_SPLIT
    try:
        tcg.PERSISTENT_RNUMEL, tcg.ROW_SPLIT = min(limit, n - 1), True

        def f(x, w, b):
            return (*_layernorm(x, w, b), *_softmax(x, w, b), *torch.var_mean(x, -1, correction=0))

        available = tcg.row_split_available()
        c = _compile(f, x, w, b)
    finally:
        tcg.PERSISTENT_RNUMEL, tcg.ROW_SPLIT = limit, on
    assert available and "row_split=" in c.kernel_code, c.kernel_code
    for _ in range(3):  # the counters are zeroed each call
        for got, ref in zip(c(x, w, b), f(x, w, b), strict=True):
            torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    sites = [s for s in _sites(c) if s.row_split]
    assert sites and all(s.grid[0] % s.row_split == 0 and s.grid[0] <= 300 * s.row_split for s in sites)
    assert all(s.bound for s in sites)  # later launches skip the JIT, still cooperative (the binary's metadata)
    assert all(s.constexprs["FLAGS"] is (protocol == "flagged") for s in sites) or protocol == "chosen"
