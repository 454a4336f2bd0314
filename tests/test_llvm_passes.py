"""course_lib.llvm: pass pipelines, JIT, targets, llc back end, the custom pass (no course IR needed)."""

from __future__ import annotations

import ctypes

import pytest

from course_lib.llvm import analysis, backend, examples, mcjit, passes, targets

SUM_ALLOCA = examples.SUM_ALLOCA  # clang -O0 style: allocas, loads, stores
SUM_PHI = examples.SUM_PHI  # the same loop in SSA form, typed pointers


def _array(values):
    arr = (ctypes.c_int64 * len(values))(*values)
    return arr, ctypes.cast(arr, ctypes.c_void_p)


@pytest.fixture(scope="module")
def o3():
    return passes.run_pipeline(SUM_ALLOCA, 3)


def test_mem2reg_removes_every_alloca_and_places_two_phis():
    run = passes.run_passes(SUM_ALLOCA, ["mem2reg"])
    final = passes.opcode_counts(run.final)
    assert "alloca" not in final and "store" not in final
    assert final["phi"] == 2  # i and s, at the loop header
    assert run.counts()[0][1] > run.counts()[1][1]
    assert "+  %i.0 = phi" in str(run.diff(1)) or "phi i64" in str(run.diff(1))


def test_single_passes_keep_the_function_valid_and_results_equal():
    names = ["mem2reg", "instcombine", "simplifycfg", "gvn", "loop-rotate", "loop-unroll"]
    run = passes.run_passes(SUM_ALLOCA, names)
    assert [s for s, _ in run.stages] == ["input", *names]
    arr, ptr = _array(list(range(-5, 20)))
    for _, text in run.stages:
        f = mcjit.compile_function(text, "sum", "i64", ["ptr", "i64"], level=0)
        assert f(ptr, 25) == sum(range(-5, 20))


NEEDS_OPT = pytest.mark.skipif(passes.opt_tool() is None, reason=passes.MISSING_OPT)


def _block(text: str, label: str) -> str:
    """The instructions of block ``label`` in printed IR (up to the next blank line)."""
    return text.split(f"\n{label}:")[1].split("\n\n")[0]


@NEEDS_OPT
def test_licm_as_a_single_pass_moves_the_invariant_product_to_the_preheader():
    run = passes.run_passes(examples.HOIST_PHI, ["licm"])
    assert run.ran_by == [str(passes.opt_tool())]
    assert "mul i64 %k, %k" in _block(run.stages[0][1], "body")
    assert "mul i64 %k, %k" in _block(run.final, "entry")  # entry is the loop's preheader
    assert "mul i64 %k, %k" not in _block(run.final, "body")
    arr, ptr = _array([3, -1, 4, 1, 5])
    for _, text in run.stages:
        f = mcjit.compile_function(text, "scaled", "i64", ["ptr", "i64", "i64"], level=0)
        assert f(ptr, 5, 3) == 9 * 12


@NEEDS_OPT
def test_loop_vectorize_makes_vector_types_and_keeps_results():
    import numpy as np

    run = passes.run_passes(examples.VADD_PHI, ["loop-vectorize"])
    assert "x i32>" not in run.stages[0][1]
    assert "<4 x i32>" in run.final and "vector.body:" in run.final
    rng = np.random.default_rng(0)
    for n in (0, 1, 3, 4, 17, 100):
        b, c = (rng.integers(-1000, 1000, n, dtype=np.int32) for _ in range(2))
        outs = []
        for _, text in run.stages:
            a = np.zeros(n, dtype=np.int32)
            f = mcjit.compile_function(text, "vadd", "void", ["ptr", "ptr", "ptr", "i64"], level=0)
            f(a.ctypes.data, b.ctypes.data, c.ctypes.data, n)
            outs.append(a)
        assert np.array_equal(outs[0], b + c) and np.array_equal(outs[1], b + c)


@NEEDS_OPT
def test_slp_vectorize_merges_four_adjacent_adds():
    import numpy as np

    run = passes.run_passes(examples.ADD4, ["slp-vectorize"])
    assert passes.opcode_counts(run.stages[0][1])["add"] == 4
    final = passes.opcode_counts(run.final)
    assert (final["add"], final["load"], final["store"]) == (1, 2, 1)  # 8 loads, 4 adds, 4 stores before
    assert "add <4 x i32>" in run.final
    b, c = np.array([1, 2, 3, 2**31 - 1], dtype=np.int32), np.array([10, 20, 30, 1], dtype=np.int32)
    for _, text in run.stages:
        a = np.zeros(4, dtype=np.int32)
        mcjit.compile_function(text, "add4", "void", ["ptr", "ptr", "ptr"], level=0)(
            a.ctypes.data, b.ctypes.data, c.ctypes.data
        )
        assert a.tolist() == [11, 22, 33, -(2**31)]  # wraps, as i32 does


@NEEDS_OPT
def test_tool_opt_runs_the_true_mem2reg_and_gvn():
    run = passes.run_passes(examples.SUM_ALLOCA, ["mem2reg", "gvn"], tool="opt")
    counts = passes.opcode_counts(run.stages[1][1])
    assert "alloca" not in counts and counts["phi"] == 2
    arr, ptr = _array(list(range(10)))
    f = mcjit.compile_function(run.final, "sum", "i64", ["ptr", "i64"], level=0)
    assert f(ptr, 10) == 45


@pytest.mark.skipif(passes.opt_tool() is None or passes.opt_tool().major < 19, reason="needs opt 19 or later")
def test_opt_reads_llvmlite_o3_output_after_downgrading():
    o3_text = str(passes.optimize(examples.SUM_ALLOCA, 3))
    assert "captures(none)" in o3_text  # LLVM 21 syntax that LLVM 19 does not read
    run = passes.run_passes(o3_text, ["licm"])
    arr, ptr = _array([5, 6, 7])
    assert mcjit.compile_function(run.final, "sum", "i64", ["ptr", "i64"], level=0)(ptr, 3) == 18


def test_missing_opt_gives_a_sentence(monkeypatch):
    monkeypatch.setattr(passes, "opt_tool", lambda: None)
    with pytest.raises(passes.MissingTool, match="apt-get install llvm-19"):
        passes.run_passes(examples.HOIST_PHI, ["licm"])
    assert passes.run_passes(SUM_ALLOCA, ["mem2reg"]).ran_by == ["llvmlite"]  # llvmlite passes still run


def test_o3_snapshots_record_each_pass_and_the_vectoriser(o3):
    names = [s.pass_name for s in o3.snapshots]
    assert "SROAPass" in names and "InstCombinePass" in names and "LoopVectorizePass" in names
    before, after = passes.pass_in_pipeline(o3, "loop-vectorize")
    assert "<" not in before.split("define")[1].split("{")[1] or "x i64>" not in before
    assert "x i64>" in after  # the vectoriser introduced vector types
    assert o3.snapshots[-1].text.strip() in passes._function_text(o3.after) or o3.changed()
    first = o3.changed()[0]
    assert first.pass_name == "SROAPass" and "alloca" not in first.text
    assert o3.diff(first.index).removed > 0


def test_o0_to_o3_results_equal():
    arr, ptr = _array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5])
    for level in range(4):
        mod = passes.optimize(SUM_ALLOCA, level)
        f = mcjit.compile_function(str(mod), "sum", "i64", ["ptr", "i64"], level=0)
        assert f(ptr, 11) == 44


def test_x86_levels_use_wider_vectors():
    rows = {name: (n, width) for name, n, width in targets.vector_summary(SUM_ALLOCA)}
    assert rows["baseline"][1] == 128 and rows["avx2"][1] == 256 and rows["avx512"][1] == 512
    assert targets.vector_width("vpaddq %zmm0, %zmm1, %zmm1") == 512
    marked = targets.mark_vector_instructions(targets.emit_asm(SUM_ALLOCA, "x86_64", "x86-64-v4"))
    assert "# <== SIMD 512-bit" in marked
    assert targets.vector_instructions("\taddsd %xmm0, %xmm1\n\tvpaddq %ymm0, %ymm1, %ymm1") == [
        "vpaddq %ymm0, %ymm1, %ymm1"
    ]


def test_ptx_kernel_reads_thread_index_registers():
    for sm in ("sm_80", "sm_90"):
        text = targets.ptx(sm=sm)
        assert f".target {sm}" in text and ".entry saxpy" in text
        assert targets.ptx_special_registers(text) == ["%ctaid.x", "%ntid.x", "%tid.x"]
        assert "ld.global" in text and "st.global" in text


def test_amdgpu_kernel_for_gfx942():
    text = targets.amdgcn()
    assert "amdgcn-amd-amdhsa--gfx942" in text and "global_load_dword" in text and "s_endpgm" in text


def test_object_code_disassembles():
    text = targets.disassemble(targets.emit_object(SUM_ALLOCA))
    assert "<sum>:" in text and "ret" in text


def test_emit_asm_rejects_unknown_targets():
    with pytest.raises(ValueError, match="x86_64"):
        targets.emit_asm(SUM_PHI, "riscv")


@pytest.mark.skipif(backend.llc_path() is None, reason=backend.MISSING_LLC)
def test_llc_walkthrough_shows_machine_ir_and_mcinst():
    stages = dict(backend.walkthrough(SUM_PHI))
    isel = stages["MachineIR after instruction selection (SSA, virtual registers)"]
    assert isel.ok and "PHI" in isel.text and "%bb" in isel.text
    ra = stages["after register allocation (physical registers)"]
    assert "$rax" in ra.text and " PHI " not in backend.machine_code(ra.text)
    assert "<MCInst" in stages["MCInst (what the assembly printer and the encoder see)"].text
    assert "finalize-isel" in backend.pass_names(SUM_PHI).text
    assert "name:            sum" in backend.stop_after(SUM_PHI, "finalize-isel").text


def test_llc_missing_gives_a_sentence(monkeypatch):
    monkeypatch.setattr(backend, "llc_tool", lambda: None)
    out = backend.walkthrough(SUM_PHI)[0][1]
    assert not out.ok and "apt-get install llvm" in out.text


def test_analysis_finds_the_loop_and_the_mix():
    fn = passes.parse(SUM_PHI).get_function("sum")
    assert analysis.cfg(fn) == {"entry": ["cond"], "cond": ["body", "exit"], "body": ["cond"], "exit": []}
    assert analysis.find_loops(fn) == [analysis.Loop("cond", "body", frozenset({"cond", "body"}))]
    mix = analysis.instruction_mix(SUM_PHI)
    assert mix["sum/body"] == {"arith": 2, "control": 1, "memory": 2}


def test_strength_reduction_is_verified_by_the_jit():
    src = SUM_PHI.replace(
        "%x = load i64, i64* %p",
        "%x0 = load i64, i64* %p\n  %x1 = mul i64 %x0, 8\n  %x2 = udiv i64 %x1, 4\n  %x = urem i64 %x2, 16",
    )
    new, rewrites = analysis.strength_reduce(src)
    assert [r.after.split(" = ")[1].split()[0] for r in rewrites] == ["shl", "lshr", "and"]
    assert passes.opcode_counts(new).get("mul", 0) == 0
    values = [7, 100, 3, 12345, 2**40 + 5]
    arr, ptr = _array(values)
    a = mcjit.compile_function(src, "sum", "i64", ["ptr", "i64"], level=0)
    b = mcjit.compile_function(new, "sum", "i64", ["ptr", "i64"], level=0)
    assert a(ptr, len(values)) == b(ptr, len(values)) == sum(((v * 8) // 4) % 16 for v in values)


def test_strength_reduction_leaves_signed_division_alone():
    src = SUM_PHI.replace("%s2 = add i64 %s, %x", "%xd = sdiv i64 %x, 4\n  %s2 = add i64 %s, %xd")
    _, rewrites = analysis.strength_reduce(src)
    assert rewrites == []


def test_nested_loops_are_found_with_their_nesting():
    fn = passes.parse(examples.NESTED_PHI).get_function("tri")
    loops = {lp.header: lp.blocks for lp in analysis.find_loops(fn)}
    assert set(loops) == {"outer", "inner"} and loops["inner"] < loops["outer"]
    f = mcjit.compile_function(examples.NESTED_PHI, "tri", "i64", ["i64"])
    assert [f(n) for n in range(6)] == [examples.tri_reference(n) for n in range(6)]


def test_licm_hoists_the_invariant_product_in_the_o3_pipeline():
    result = passes.run_pipeline(examples.HOIST_PHI, 3)
    before, after = passes.pass_in_pipeline(result, "licm")
    body_before = before.split("body:")[1]
    body_after = after.split("body:")[1]
    assert "mul i64 %k, %k" in body_before and "mul i64 %k, %k" not in body_after
    assert any(s.scope.startswith("loop %") for s in result.snapshots)


def test_llvm_ptx_runs_on_the_course_simt_simulator():
    import numpy as np

    from course_lib import gpu

    x, y = np.arange(100, dtype=np.float32), np.ones(100, dtype=np.float32)
    out = gpu.run_ptx(targets.ptx(sm="sm_80"), "saxpy", grid=2, block=64, args=[x, y, 3.0, 100]).outputs[1]
    assert np.allclose(out, 3.0 * x + 1.0)


@pytest.mark.skipif(passes.opt_tool() is None, reason="LLVM's opt is not installed")
def test_optnone_makes_mem2reg_a_no_op_and_nsw_licenses_instcombine():
    kept = passes.opcode_counts(passes.run_opt(examples.with_optnone(examples.SUM_ALLOCA), "mem2reg"))
    assert kept.get("alloca") == 2 and "phi" not in kept  # clang -O0's attribute: every pass skips it
    assert passes.opcode_counts(passes.run_opt(examples.SUM_ALLOCA, "mem2reg")).get("phi") == 2
    out = passes.run_opt(examples.NSW_PAIRS, "instcombine")
    body = {m.split("(")[0]: m for m in out.split("define ")[1:]}
    assert "ret i64 %x" in body["i64 @halve_double_nsw"] and "ret i64 %x" not in body["i64 @halve_double_wrap"]
    assert "ret i1 true" in body["i1 @next_is_bigger_nsw"] and "9223372036854775807" in body["i1 @next_is_bigger_wrap"]


def test_02a_exercise_oracles_first_pass_without_and_block_of():
    o3 = passes.run_pipeline(examples.SUM_ALLOCA, 3)
    assert passes.first_pass_without(o3, "alloca") == "SROAPass"
    assert passes.first_pass_without(o3, "br label %cond") == "LoopRotatePass"
    assert passes.first_pass_without(o3, "icmp slt") is None
    text = o3.after

    def by_text(instruction):  # the exercise's approach: the last label line above the instruction
        block = None
        for line in text.splitlines():
            head = line.split(";")[0].strip()
            if head.endswith(":") and not line.startswith(" "):
                block = head[:-1]
            elif instruction in line:
                return block
        return None

    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("  %") and text.count(ln.strip()) == 1]
    assert len(lines) > 10 and {passes.block_of(text, ln) for ln in lines} >= {"entry", "vector.body"}
    assert all(passes.block_of(text, ln) == by_text(ln) for ln in lines)
    assert passes.block_of(text, "no such instruction") is None


def test_02b_loop_headers_on_random_programs_lowered_to_llvm():
    from course_lib import llvm as course_llvm
    from course_lib.check import oracles

    found = 0
    for rfn in oracles.random_functions(12, first_seed=900)[1]:
        fn = next(f for f in passes.parse(str(course_llvm.lower(rfn))).functions if f.name == rfn.name)
        succ = analysis.cfg(fn)
        dom = analysis.dominators(succ, next(iter(succ)))
        headers = {lp.header for lp in analysis.find_loops(fn)}
        assert headers == {h for b, ts in succ.items() for h in ts if h in dom[b]}
        found += len(headers)
    assert found >= 5  # the random programs do have loops, so a constant set() fails
