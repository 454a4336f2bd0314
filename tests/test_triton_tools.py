"""Tracing, source maps, layouts and the tuner."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import course_lib
from course_lib.triton import compile_stages, sourcemap, trace, tune
from course_lib.triton import kernels as K
from course_lib.triton import layouts as L

interp = pytest.mark.skipif(course_lib.env.has_cuda(), reason="tracing runs in the interpreter")


@triton.jit
def _unmasked_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # bug: no mask
    tl.store(out_ptr + offs, x, mask=offs < n)


@interp
def test_trace_add_footprint_and_masks():
    x, y, o = torch.randn(10), torch.randn(10), torch.empty(10)
    tr = trace.trace(lambda: K.add_kernel[(3,)](x, y, o, 10, BLOCK=4), {"x": x, "y": y, "out": o}, K.add_kernel)
    assert tr.footprint("out").tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert tr.heatmap("x").tolist() == [1] * 10
    assert tr.masked_lanes() == 6 and tr.out_of_bounds() == []
    assert torch.equal(o, x + y)


@interp
def test_trace_reports_out_of_bounds_line_and_offsets():
    x, o = torch.randn(10), torch.empty(10)
    tr = trace.trace(lambda: _unmasked_copy[(3,)](x, o, 10, BLOCK=4), {"x": x, "out": o}, _unmasked_copy)
    (bad,) = tr.out_of_bounds()
    line = _unmasked_copy.fn.__code__.co_firstlineno + 3  # decorator line counts
    assert (bad.kind, bad.program, bad.line, bad.tensor, bad.offsets) == ("load", (2, 0, 0), line, "x", [10, 11])
    assert torch.equal(o, x)


def test_source_map_covers_kernel_lines():
    s = compile_stages(*K.signature("add"), target="sm_90")
    first = s.first_line
    body = set(range(first + 3, first + 9))  # decorator, def, docstring, then six statements
    for stage in ("ttir", "ttgir", "llir", "ptx", "sass"):
        got = {p for _, p in sourcemap.line_map(s, stage) if p is not None}
        assert body <= got, stage
    assert any("tt.load" in t for t in sourcemap.lines_for(s, "ttir", first + 6))


def test_blocked_layout_owner():
    lay = L.Blocked((1, 4), (8, 4), (4, 1), (1, 0))
    assert L.owner(lay, (0, 5), (64, 16)) == (0, 1, 1)
    assert L.owner(lay, (9, 0), (64, 16)) == (1, 4, 0)
    assert L.owner(lay, (32, 0), (64, 16)) == (0, 0, 4)
    warp, lane, reg = L.ownership(lay, (64, 16))
    pairs = set(zip(warp.ravel(), lane.ravel(), reg.ravel()))
    assert len(pairs) == 64 * 16 and L.elements_per_thread(lay, (64, 16)) == 8


def test_parse_blocked_from_real_ttgir():
    s = compile_stages(*K.signature("matmul"), target="sm_80")
    kinds = L.encodings(s["ttgir"])
    assert "nvidia_mma" in kinds.values() and "blocked" in kinds.values()
    for lay in L.parse_blocked(s["ttgir"]).values():
        assert np.prod(lay.threads_per_warp) == 32 and np.prod(lay.warps_per_cta) == 4


def test_tuner_says_which_source():
    choice = tune.pick(1024, 1024, 1024)
    assert choice.source in ("analytic cost model", "recorded H200 timings")
    assert tune.config_name(choice.best) in choice.times_us
    assert tune.model_time_us((512, 512, 128, 8, 4), 4096, 4096, 4096) == float("inf")


def test_make_ttgir_source_lines_up_with_the_passes_mlir_ran():
    from course_lib.triton import tour

    source = tour.stage_source("make_ttgir")
    assert "add_coalesce" in source and len(tour.declared_passes(source)) > 30
    for target, capability in (("sm_90", 90), ("sm_80", 80)):
        ran = [p for p in compile_stages(*K.signature("add"), target=target, passes=True).passes if p.stage != "llir"]
        rows = tour.align(source, ran, capability)
        names = [r.call.name for r in rows]
        assert all(r.ran is not None for r in rows), [(r.call.line, r.call.name) for r in rows if r.ran is None]
        assert ("prefetch" in names) == (capability == 80) and ("tma_lowering" in names) == (capability == 90)
    with pytest.raises(ValueError, match="no 'make_nothing'"):
        tour.stage_source("make_nothing")
