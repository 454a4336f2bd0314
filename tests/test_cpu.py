"""Tests for course_lib.cpu: parsers on fixed text, compile_c against numpy, every kernel variant
against its oracle, and the structural claims the Module 6 notebooks make (which loops vectorise)."""

from __future__ import annotations

import pathlib
import platform
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import env
from course_lib.cpu import build, caches, kernels, machine, openmp, roofline, vectorise
from course_lib.cpu import inductor_view as iv

DATA = pathlib.Path(__file__).parent / "data" / "cpu"
X86 = platform.machine() in ("x86_64", "AMD64")
needs_gcc = pytest.mark.skipif(not env.has_gcc(), reason="gcc not installed")

# ----------------------------------------------------------------------------- machine


def test_parse_cpuinfo_x86_and_arm():
    arch, flags = machine.parse_cpuinfo("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n")
    assert arch == "x86_64" and {"avx2", "fma"} <= flags
    f = machine.features_from_flags(arch, flags)
    assert f.extensions == ("SSE2", "AVX", "FMA", "AVX2") and f.vector_bits == 256 and f.float32_lanes == 8
    f512 = machine.features_from_flags("x86_64", frozenset({"sse2", "avx2", "avx512f"}))
    assert f512.float32_lanes == 16
    arch, flags = machine.parse_cpuinfo("processor\t: 0\nFeatures\t: fp asimd evtstrm sve\n")
    arm = machine.features_from_flags(arch, flags, sve_bits=256)
    assert arch == "aarch64" and arm.has("NEON") and arm.has("SVE") and arm.vector_bits == 256


def test_arm_hwcaps_from_auxv():
    data = struct.pack("<QQQQQQ", machine.AT_HWCAP, (1 << 1) | (1 << 22), machine.AT_HWCAP2, 1 << 1, 0, 0)
    assert machine.arm_hwcap_flags(machine.parse_auxv(data)) == {"asimd", "sve", "sve2"}


def test_caches_from_fake_sysfs(tmp_path):
    for i, (lvl, kind, size) in enumerate([(1, "Data", "32K"), (2, "Unified", "1M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, value in [("level", lvl), ("type", kind), ("size", size), ("ways_of_associativity", 8),
                            ("coherency_line_size", 64), ("shared_cpu_list", "0-1")]:  # fmt: skip
            (d / name).write_text(f"{value}\n")
    l1, l2 = machine.read_caches(str(tmp_path))
    assert (l1.name, l1.size_bytes, l1.sets, l1.shared_by) == ("L1d", 32768, 64, 2)
    assert (l2.name, l2.size_bytes) == ("L2", 1 << 20)
    assert machine.parse_size("32768K") == 32 << 20


def test_simd_features_on_this_machine():
    f = machine.simd_features()
    assert f.vector_bits >= 64 and f.float32_lanes == f.vector_bits // 32
    if X86:
        assert f.arch == "x86_64" and f.has("SSE2")
    assert machine.usable_cores() >= 1


# ----------------------------------------------------------------------------- build

REMARKS = """kernel.c:3:23: missed: couldn't vectorize loop
kernel.c:5:22: missed: not vectorized: not suitable for strided load _10 = *_9;
kernel.c:4:27: optimized: loop vectorized using 32 byte vectors
kernel.c:4:27: optimized: loop vectorized using 16 byte vectors
kernel.c:9:23: optimized: loop vectorized using 32 byte vectors
kernel.c:9:23: optimized:  loop versioned for vectorization because of possible aliasing
kernel.c:12:1: note: vectorized 1 loops in function.
kernel.c:14:5: missed: couldn't vectorize loop
kernel.c:14:5: missed: not vectorized: no vectype for stmt: _4 = *_3;
 scalar_type: float
"""
SOURCE_FOR_REMARKS = "\n\n  for (j)\n    for (i)\n\n\n\n\n  for (k)\n\n\n\n\n  while (x)\n"


def test_parse_remarks_and_loop_summary():
    remarks = build.parse_remarks(REMARKS)
    assert len(remarks) == 8 and remarks[-1].message.endswith("(scalar_type: float)")
    loops = {r.line: r for r in build.summarise_loops(remarks, SOURCE_FOR_REMARKS)}
    assert sorted(loops) == [3, 4, 9, 14]
    assert not loops[3].vectorised and loops[3].reason == "not suitable for strided load"
    assert loops[4].vectorised and loops[4].vector_bytes == 32
    assert "aliasing" in loops[9].reason
    assert loops[14].reason == "no vectype for stmt"


@pytest.mark.parametrize(
    "mnemonic, operands, expected",
    [("vaddps", "ymm0,ymm1,ymm2", ("packed", 256)), ("vaddss", "xmm0,xmm0,DWORD PTR [rax]", ("scalar", 128)),
     ("vbroadcastss", "ymm1,xmm0", ("packed", 256)), ("addps", "xmm0,xmm1", ("packed", 128)),
     ("vfmadd231ps", "zmm0,zmm1,zmm2", ("packed", 512)), ("add", "rax,0x20", ("", 0)),
     ("fmla", "v0.4s, v1.4s, v2.4s", ("packed", 128)), ("fadd", "s0, s0, s1", ("", 0))],
)  # fmt: skip
def test_classify_rule_table(mnemonic, operands, expected):
    assert build.classify(mnemonic, operands) == expected


def test_parse_objdump_drops_addresses_and_boilerplate():
    text = """
0000000000001100 <frame_dummy>:
    1100:	jmp    1080 <register_tm_clones>
0000000000001110 <add>:
    1110:	vaddps ymm0,ymm0,YMMWORD PTR [rsi+rax*1]
    1115:	jne    1110 <add+0x0>
    1117:	ret
"""
    funcs = build.parse_objdump(text)
    assert list(funcs) == ["add"]
    asm = build.Assembly(funcs)
    assert asm.counts("add")["packed256"] == 1 and "<add+0x0>" in asm.text("add") and "1110" not in asm.text("add")


@needs_gcc
def test_compile_c_loads_reports_and_caches():
    src = "void scale(float *restrict y, const float *restrict x, int n)\n{\n    for (int i = 0; i < n; i++)\n        y[i] = 2.0f * x[i];\n}\n"
    lib = build.compile_c(src, "-O3 -march=native")
    x = np.arange(37, dtype=np.float32)
    y = np.zeros_like(x)
    import ctypes

    lib.fn("scale", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int])(build_ptr(y), build_ptr(x), 37)
    assert np.array_equal(y, 2 * x)
    assert lib.vectorised_lines == {3} and lib.asm.counts("scale")["packed"] > 0
    again = build.compile_c(src, ["-O3", "-march=native"])
    assert again.key == lib.key and repr(again) == repr(lib)
    o2 = build.compile_c(src, "-O3 -fno-tree-vectorize")
    assert o2.key != lib.key and o2.vectorised_lines == set()


def build_ptr(a):
    from course_lib.cpu.timing import ptr

    return ptr(a)


@needs_gcc
def test_compile_error_names_kernel_c_not_a_path():
    with pytest.raises(build.CompileError) as info:
        build.compile_c("int f( { }", "-O2")
    assert "kernel.c" in str(info.value) and str(env.repo_root()) not in str(info.value)


# ----------------------------------------------------------------------------- cases and ladders


@needs_gcc
@pytest.mark.skipif(not X86, reason="the four cases are calibrated on x86-64 gcc")
@pytest.mark.parametrize("name", list(vectorise.CASES))
def test_vectorisation_case_fails_then_fix_vectorises(name):
    r = vectorise.run_case(vectorise.CASES[name], n=4096, repeat=1)
    assert r.correct, "the fixed kernel must compute what the original does"
    assert not r.bad_vectorised and r.good_vectorised


@needs_gcc
def test_float_reduction_report_says_vectorised_but_asm_is_scalar():
    case = vectorise.CASES["float reduction"]
    lib = build.compile_c(case.bad, case.bad_flags)
    assert lib.report[-1].vectorised  # gcc's in-order ("fold-left") reduction
    assert not vectorise.vectorised_main_loop(lib)


@needs_gcc
@pytest.mark.parametrize("variant", list(kernels.VARIANTS))
def test_kernel_ladder_variants_are_correct(variant):
    assert kernels.run_triad(variant, 1003, kernels.threads_for(variant, 2), repeat=1).correct
    assert kernels.run_poly(variant, 1003, kernels.threads_for(variant, 2), repeat=1).correct


@needs_gcc
def test_streaming_store_triad_is_correct():
    assert kernels.run_triad("intrinsics", 1003, 1, repeat=1, name="triad_nt").correct


@needs_gcc
@pytest.mark.parametrize("schedule", list(openmp.SCHEDULES))
def test_openmp_schedules_same_answer(schedule):
    np.testing.assert_allclose(openmp.triangular(300, schedule, 4, 2), openmp.triangular_reference(300),
                               rtol=1e-3, atol=1e-3)  # fmt: skip


@needs_gcc
def test_openmp_reduction_atomic_and_counters():
    x = np.ones(10_000, np.float32)
    assert openmp.sums(x, 2) == {"reduction": 10_000.0, "atomic": 10_000.0}
    for stride in (1, 8):
        c = openmp.count(stride, 1000, 2)
        assert c[0] == 1000 and c[stride] == 1000


@needs_gcc
def test_transpose_and_matmul_variants_match_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((37, 37), dtype=np.float32), rng.standard_normal((37, 37), dtype=np.float32)
    for v in caches.TRANSPOSES:
        assert np.array_equal(caches.transpose(v, a, 8), a.T), v
    for v in caches.MATMULS:
        np.testing.assert_allclose(caches.matmul(v, a, b, 8), a @ b, rtol=1e-4, atol=1e-4, err_msg=v)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(n=st.integers(1, 40), t=st.sampled_from([1, 4, 8, 32]), variant=st.sampled_from(caches.TRANSPOSES))
def test_transpose_trace_touches_every_element_once(n, t, variant):
    trace = list(caches.transpose_trace(n, variant, t))
    reads, writes = trace[0::2], trace[1::2]
    assert sorted(reads) == [4 * k for k in range(n * n)]
    assert len(set(writes)) == n * n


@settings(max_examples=30, deadline=None, derandomize=True)
@given(cache=st.integers(256, 1 << 22), arrays=st.integers(1, 3))
def test_tile_for_is_the_largest_fitting_power_of_two(cache, arrays):
    t = caches.tile_for(cache, 4, arrays)
    assert t & (t - 1) == 0
    assert arrays * t * t * 4 <= cache or t == 1
    assert arrays * (2 * t) ** 2 * 4 > cache


def test_roofline_attainable():
    roof = roofline.Roofline(bandwidth=20.0, peak=80.0, threads=2)
    assert roof.ridge == 4.0 and roof.attainable(1.0) == 20.0 and roof.attainable(100.0) == 80.0


# ----------------------------------------------------------------------------- Inductor output


def test_parse_recorded_inductor_output():
    out = iv.parse_output_code((DATA / "inductor_fused_tanh_exp.py.txt").read_text())
    (k,) = out.kernels
    assert k.name == "cpp_fused_add_exp_mul_tanh_0"
    assert k.pragmas == ["#pragma omp parallel", "#pragma omp for"]
    assert k.loop_steps[0] in (4, 8, 16) and k.vector_methods == ["tanh", "exp"]
    assert any("Vectorized<float>::loadu" in ln for ln in k.vector_lines)
    annotated = iv.annotate(k, capability="none")
    assert annotated.count("// <<<") >= 6


def test_method_body_finds_sleef_in_header_text():
    text = "struct X { Vectorized<float> exp() const { return Vectorized<float>(Sleef_expf8_u10(values)); } };"
    assert "Sleef_expf8_u10" in iv.method_body(text, "exp")
    assert iv.method_body(text, "tanh") is None


@pytest.mark.skipif(not X86, reason="AVX2 header")
def test_sleef_calls_from_installed_aten_header():
    calls = iv.sleef_calls(["exp", "tanh"], capability="AVX2")
    assert calls == {"exp": "Sleef_expf8_u10", "tanh": "Sleef_tanhf8_u10"}


@needs_gcc
def test_compile_cpp_kernel_with_gxx():
    src = 'extern "C" float twice(float x) { return 2.0f * x; }\n'
    import ctypes

    lib = build.compile_c(src, "-O2", lang="c++")
    assert lib.fn("twice", [ctypes.c_float], ctypes.c_float)(1.5) == 3.0
    with pytest.raises(build.CompileError):  # the same text is not C
        build.compile_c(src, "-O2")


def test_simulated_misses_use_module1_simulator():
    # direct mapped, 2 sets of one 64-byte line: 0 and 128 share set 0 and evict each other
    assert caches.simulate_misses([0, 128, 0, 64, 64], size=128, ways=1) == 4
    l1 = machine.CacheLevel(1, "Data", 32768, 8, 64, 1)
    naive, tiled, _ = caches.predict_transpose([128], l1, t=32)
    assert naive.per_element > 1.0 > 0.2 > tiled.per_element  # the conflict-miss cliff at n = 128


def test_fast_math_library_does_not_flush_subnormals_in_this_process():
    """Linking with -ffast-math would pull in crtfastmath.o and set flush-to-zero process-wide."""
    from course_lib.cpu import compile_c

    compile_c("float twice(float x) { return 2.0f * x; }\n", "-O2 -ffast-math")
    assert float.fromhex("0x0.0000000000001p-1022") * 1.5 != 0.0, "subnormals are flushed: FTZ/DAZ leaked"


# ----------------------------------------------------------------------------- tiles that fit the sets (issue 24)


def test_tile_for_cache_sees_the_4k_stride():
    from course_lib.cpu import caches

    # 48 KiB, 12-way, 64 sets: rows 4 KiB apart all start in one set; one line of padding spreads them
    assert caches.tile_lines_per_set(32, 1024, 4, 64, 64) == 32
    assert caches.tile_lines_per_set(32, 1040, 4, 64, 64) == 2
    assert caches.tile_for(49152) == 64
    assert caches.tile_for_cache(49152, 12, 64, 4, 2, 1024) == 4
    assert caches.tile_for_cache(49152, 12, 64, 4, 2, 1040) == 64
    assert caches.tile_for_cache(49152, 12, 64, 4, 2, 1025) == 4  # one float of padding is not a line
    with pytest.raises(ValueError, match="positive"):
        caches.tile_lines_per_set(0, 1024)


def test_padded_transpose_and_simulated_misses():
    from course_lib.cpu import caches
    from course_lib.cpu.machine import CacheLevel

    a = np.random.default_rng(0).standard_normal((200, 200), dtype=np.float32)
    for t, ld in ((16, 200), (32, 216), (7, 301)):
        assert np.array_equal(caches.transpose_padded(a, t, ld), a.T)
    with pytest.raises(ValueError, match="leading dimension"):
        caches.transpose_padded(a, 16, 100)
    l1 = CacheLevel(1, "Data", 32768, 8, 64, 1)
    plain, padded = caches.measure_tiles(512, l1, [("plain", 32, 512), ("padded", 32, 528)], repeat=1)
    assert plain.misses_per_element > 4 * padded.misses_per_element  # 2 KiB stride: rows share 2 of 64 sets


def test_clang_vectoriser_remarks_and_fallback(monkeypatch):
    src_sum = "void kernel(float *restrict o, const float *restrict x, int n)\n{ float s = 0; for (int i = 0; i < n; i++) s += x[i]; o[0] = s; }\n"
    src_add = "void kernel(float *restrict o, const float *restrict x, int n)\n{ for (int i = 0; i < n; i++) o[i] = x[i] + 1.0f; }\n"
    if vectorise.clang_path() is None:
        assert vectorise.clang_vectorise(src_add) is None and vectorise.compare_vectorisers() is None
    else:
        assert vectorise.clang_vectorise(src_add).vectorised
        refused = vectorise.clang_vectorise(src_sum)
        assert not refused.vectorised and "reorder floating-point" in str(refused)
        assert vectorise.clang_vectorise(src_sum, "-O3 -ffast-math").vectorised
        assert "clang failed" in str(vectorise.clang_vectorise("this is not C"))
    monkeypatch.setattr(vectorise.shutil, "which", lambda name: None)
    assert vectorise.clang_vectorise(src_add) is None and vectorise.compare_vectorisers() is None


def test_vector_widths_and_sve(monkeypatch):
    plain = vectorise.vector_bits_used(vectorise.SAXPY, "-O3")
    assert plain and max(plain) >= 128  # -O3 vectorises saxpy with the baseline ISA (SSE2 or NEON)
    if platform.machine() == "x86_64" and "avx512f" in pathlib.Path("/proc/cpuinfo").read_text():
        assert 512 in vectorise.vector_bits_used(vectorise.SAXPY, "-O3 -march=native -mprefer-vector-width=512")
    sve = vectorise.sve_assembly()
    if sve is not None:
        assert "whilelo" in sve and "ld1w" in sve
    monkeypatch.setattr(vectorise.shutil, "which", lambda name: None)
    assert vectorise.sve_assembly() is None


# ----------------------------------------------------------------------------- Inductor's loops as data (06c)
@pytest.mark.parametrize(
    "seed, loops, depth",
    [(2, [("x0", 16, 2672, 2)], 1), (1, [("x1", 16, 368, 12)], 1), (0, [("x1", 16, 16, 10)], 0),
     (5, [("x0", 16, 8288, 0)], 1)],
)  # fmt: skip
def test_vector_loops_and_omp_depth_on_recorded_kernels(seed, loops, depth):
    from course_lib.cpu import inductor_loops as il

    g = il.recorded_graph(seed)
    found = il.vector_loops(g.cpp)
    assert [v.as_tuple() for v in found] == loops and il.omp_depth(g.cpp) == depth and not g.live
    assert all((v.full_end, v.tail) == il.expected_split(v.stop, v.lanes) for v in found)
    assert il.parallel_depth(g.case.ranges, g.threads) == depth and {v.stop for v in found} <= set(g.case.ranges)
    assert il.recorded_graph(999) is None


def test_parallel_depth_rule_cases():
    from course_lib.cpu import inductor_loops as il

    assert il.parallel_depth([13 * 77], 2) == 0  # 500 elements a thread: under min_chunk_size
    assert il.parallel_depth([9, 203], 2) == 1  # 9 rows >= 2 threads: one level is enough
    assert il.parallel_depth([1, 4096], 2) == 2  # one outer iteration: collapse(2)
    assert il.parallel_depth([4096], 1) == 0  # a team of one: par == threads at once
    assert il.parallel_depth([3, 3, 4096], 8) == 3  # par 3, then 9: neither 8 nor >= 16, so a third level


def test_static_chunks_cover_the_range_like_libgomp():
    from course_lib.cpu import inductor_loops as il

    for n, t in ((10, 3), (168, 2), (5, 8)):
        chunks = il.static_chunks(n, t)
        assert chunks[0][0] == 0 and chunks[-1][1] == n and all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
        sizes = [b - a for a, b in chunks]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_random_graphs_are_deterministic_and_varied():
    from course_lib.cpu import inductor_loops as il

    graphs = [il.random_graph(s) for s in range(20)]
    assert [str(g) for g in graphs] == [str(il.random_graph(s)) for s in range(20)]
    assert {g.reduction is None for g in graphs} == {True, False}
    x, y = graphs[0].inputs()
    assert graphs[0].fn(x, y).shape[0] == graphs[0].shape[0]


def test_pictures_of_kernels_and_vectorisers(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.cpu import inductor_loops as il

    fig = il.plot_kernel_structure(il.recorded_graph(1).cpp, threads=2)
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="no vectorised loop"):
        il.plot_kernel_structure("for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(9L); "
                                 "x0+=static_cast<int64_t>(1L)) {}", threads=2)  # fmt: skip
    rows = [["aliasing", "as written", "line 3: NOT vectorised (x)", "vectorised: vectorized loop (vectorization width: 8)"],
            ["stride", "fixed", "line 3: NOT vectorised (y); line 4: vectorised", "NOT vectorised: no"]]  # fmt: skip
    assert vectorise._verdict_colour(rows[0][3])[1] == "vectorised, width 8"
    assert vectorise._verdict_colour(rows[1][2])[1].startswith("1 loop(s) yes")
    assert len(vectorise.plot_vectorisers(rows).axes) == 1


def test_balanced_split_reference():
    for costs, threads in openmp.random_workloads(seed=1, count=12):
        ok, why = openmp.split_verdict(openmp.balanced_split(costs, threads), costs, threads)
        assert ok, why
    ok, why = openmp.split_verdict([0, 3, 2, 4], np.ones(4), 3)
    assert not ok and "decrease" in why


def test_launches_read_from_the_wrapper_call():
    from course_lib.cpu import inductor_loops as il

    recorded = (DATA / "inductor_fused_tanh_exp.py.txt").read_text()
    assert il.launches(recorded) == ["cpp_fused_add_exp_mul_tanh_0"] and il.launch_counts(recorded) == (1, 0)
    wrapper = ("def call(self, args):\n    arg0_1, = args\n    # Source Nodes: [cumsum]\n"
               "    buf0 = torch.ops.aten.cumsum.default(arg0_1, dim=1, dtype=None)\n"
               "    extern_kernels.addmm(arg2_1, buf0, arg1_1, alpha=1, beta=1, out=buf1)\n"
               "    cpp_fused_mul_0(buf2)\n    return (buf2, )\n\n\nrunner = Runner(partitions=[])\n")  # fmt: skip
    assert il.launches(wrapper) == ["torch.ops.aten.cumsum.default", "extern_kernels.addmm", "cpp_fused_mul_0"]
    assert il.launch_counts(wrapper) == (1, 2)
    with pytest.raises(ValueError, match="def call"):
        il.launches("print('not a wrapper')")


def test_random_graphs_fall_back_to_recordings_when_torch_compile_fails(monkeypatch, capsys):
    from course_lib.cpu import inductor_loops as il

    def broken(case):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(il, "compile_graph", broken)
    got = il.compile_random_graphs([0, 5], progress=False)
    assert [g.case for g in got] == [il.random_graph(0), il.random_graph(5)] and not any(g.live for g in got)
    assert "torch.compile failed here (RuntimeError: no C++ compiler)" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="no C\\+\\+ compiler"):
        il.compile_random_graphs([0, 999], progress=False)  # 999 has no recording: the error stays
