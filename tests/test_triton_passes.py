"""course_lib.triton.passes: Triton's TTIR/TTGIR passes replayed one at a time through its own bindings."""

from __future__ import annotations

import pytest

import course_lib  # noqa: F401  (sets Triton's mode first)
from course_lib import compat
from course_lib.triton import compile_stages, kernels, passes

ADD = kernels.signature("add")


def test_replay_gives_the_ttgir_triton_compile_gives():
    run = passes.run_passes(*ADD)
    assert run.final == compile_stages(*ADD, target="sm_90", aligned=True)["ttgir"]
    names = run.names()
    assert names.index("convert_to_ttgpuir") < names.index("coalesce") < names.index("remove_layout_conversions")
    assert [s.index for s in run] == list(range(len(run)))
    assert all(s.before == prev.after for prev, s in zip(run.steps, run.steps[1:], strict=False))
    call, before, after = run.step("coalesce")  # unpacks as (pass, ir_before, ir_after)
    assert str(call) == "passes.ttgpuir.add_coalesce(pm)" and before != after


def test_matmul_passes_do_what_the_notebook_says():
    mk, ms, mc = kernels.signature("matmul_contiguous")
    run = passes.run_passes(mk, ms, mc, target="sm_80")
    assert run.final == compile_stages(mk, ms, mc, "sm_80", aligned=True)["ttgir"]
    assert "#ttg.nvidia_mma" in run.step("accelerate_matmul").after
    assert "#ttg.nvidia_mma" not in run.step("accelerate_matmul").before
    assert "ttg.async_copy_global_to_local" in run.step("pipeline").after
    assert "ttg.async_copy_global_to_local" not in run.step("pipeline").before
    coalesced = passes.memory_layouts(run.step("coalesce").after)  # fp16 tiles: 8 x 16 bits = 128 bits per thread
    assert [(op, shape) for op, shape, _, _ in coalesced] == [
        ("tt.load", "128x32"),
        ("tt.load", "32x128"),
        ("tt.store", "128x128"),
    ]
    assert all(passes.blocked_field(lay, "sizePerThread") == [1, 8] for _, _, _, lay in coalesced)
    assert all(
        passes.blocked_field(lay, "sizePerThread") == [1, 1]
        for *_, lay in passes.memory_layouts(run.step("coalesce").before)
    )
    removed = run.step("remove_layout_conversions")
    assert (
        passes.op_counts(removed.after)["ttg.convert_layout"] < passes.op_counts(removed.before)["ttg.convert_layout"]
    )


def test_dropping_coalesce_loses_the_vector_loads():
    with_c = passes.run_passes(*ADD)
    without = passes.run_passes(*ADD, drop=["coalesce"])
    assert "coalesce" not in without.names()
    assert passes.load_size_per_thread(with_c.final) == [4]
    assert passes.load_size_per_thread(without.final) == [1]
    assert passes.vector_loads(passes.compile_ttgir(with_c)["sass"]) == {"LDG.E.128": 4}
    assert passes.vector_loads(passes.compile_ttgir(without)["sass"]) == {"LDG.E": 16}
    assert "ld.global.v4" not in passes.compile_ttgir(without)["ptx"]


def test_named_passes_and_clear_errors():
    run = passes.run_passes(*ADD, ["convert_to_ttgpuir", "coalesce"])
    assert run.names() == ["convert_to_ttgpuir", "coalesce"]
    with pytest.raises(ValueError, match="no pass 'coalesc'.*coalesce"):
        passes.run_passes(*ADD, drop=["coalesc"])
    with pytest.raises(compat.CompatError, match="no pass passes.ttgpuir.add_no_such_pass"):
        compat.triton_pass_adder("passes.ttgpuir", "no_such_pass")
    with pytest.raises(ValueError, match="NVIDIA"):
        passes.run_passes(*ADD, target="gfx942")
    with pytest.raises(ValueError, match="reached TTGIR"):
        passes.compile_ttgir(passes.run_passes(*ADD, stages=("ttir",)))


def test_codegen_map_names_the_python_node_of_each_op():
    rows = {r.python: r for r in passes.codegen_map(*ADD)}
    assert rows["tl.program_id(0)"].ops == ["tt.get_program_id"] and rows["tl.program_id(0)"].node == "Call"
    assert rows["x + y"].ops == ["arith.addf"] and rows["x + y"].node == "BinOp"
    assert rows["x_ptr + offs"].ops == ["tt.splat", "tt.addptr"]
    assert rows["offs < n"].node == "Compare" and "arith.cmpi" in rows["offs < n"].ops


def test_conversion_rows_follow_each_op_into_the_llvm_dialect():
    run = passes.run_passes(*ADD, stages=("ttir", "ttgir", "llvm_dialect"))
    assert "llvm.func @add_kernel" in run.after_stage("llvm_dialect")
    # the replay passes through exactly the LLVM-dialect module compile_stages keeps (before LLVMDIScope)
    ref = compile_stages(*ADD, target="sm_90", aligned=True, passes=True)["llvm_dialect"]
    assert any(s.after == ref for s in run) and passes.op_counts(run.final) == passes.op_counts(ref)
    rows = {r.python: r for r in passes.conversion_rows(run)}
    # 1024 elements / 128 threads = 8 per thread, in vectors of 4
    assert rows["x + y"].before == {"arith.addf": 1} and rows["x + y"].work() == {"llvm.fadd": 8}
    assert rows["tl.program_id(0)"].work() == {"nvvm.read.ptx.sreg.ctaid.x": 1}
    assert rows["tl.load(x_ptr + offs, mask=mask)"].work() == {"llvm.inline_asm": 2}
    assert rows["x_ptr + offs"].work() == {"llvm.getelementptr": 2}
    with pytest.raises(ValueError, match="llvm_dialect"):
        passes.conversion_rows(passes.run_passes(*ADD))


def test_compat_pass_bindings_used_by_the_replay():
    """One call of each compat function this module relies on (an upgrade that moves one fails here)."""
    from course_lib.triton.compile import gpu_target

    target = gpu_target("sm_90")
    backend, context = compat.triton_backend_and_context(target)
    options = backend.parse_options({"num_warps": 4})
    src = compat.triton_ast_source(ADD[0], ADD[1], ADD[2])
    module = compat.triton_codegen(ADD[0], src, target, backend, options, context)
    assert "tt.func public @add_kernel" in compat.triton_module_text(module)
    calls, run_args = compat.triton_stage_pass_calls(backend, "make_ttgir", module, options, 90)
    assert ("passes.ttgpuir", "coalesce", ()) in calls and run_args == ("make_ttgir",)
    assert calls[0] == ("passes.ttir", "convert_to_ttgpuir", ("cuda:90", 4, 32, 1))
    assert compat.triton_stage_pass_calls(backend, "make_ttir", module, options, 90)[0][0][1] == "inliner"
    assert "#ttg" not in compat.triton_module_text(module)  # recording ran nothing
    compat.triton_run_pass(context, module, *calls[0], run_args)
    assert "#ttg.blocked" in compat.triton_module_text(module)
    names = [r["name"] for r in compat.triton_module_ops(module)]
    assert names[-1] == "builtin.module" and "tt.load" in names
    assert compat.triton_ir().pass_manager is not None
    with pytest.raises(compat.CompatError, match="has no stage method"):
        compat.triton_stage_pass_calls(backend, "make_nothing", module, options, 90)
