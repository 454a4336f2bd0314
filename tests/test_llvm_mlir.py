"""course_lib.llvm.mlir: Triton's TTIR -> TTGIR -> LLVM dialect -> LLVM IR -> PTX, no GPU."""

from __future__ import annotations

import course_lib  # noqa: F401  (sets Triton's mode first)
from course_lib import compat
from course_lib.llvm import mlir


def test_triton_stages_move_from_tt_to_llvm_dialect():
    s = mlir.compile_stages()
    assert "tt" in s.dialects("ttir") and "arith" in s.dialects("ttir")
    assert "#ttg.blocked" in s["ttgir"]
    assert "llvm" in s.dialects("llvm_dialect") and "tt" not in s.dialects("llvm_dialect")
    assert "llvm.func @add_kernel" in s["llvm_dialect"]
    assert "define ptx_kernel void @add_kernel" in s["llir"] and "!dbg" not in s["llir"]
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in s["llir"]
    assert ".target sm_90" in s["ptx"] and ".loc" not in s["ptx"]
    assert "ConvertTritonGPUToLLVM" in s.mlir_passes
    assert "loc(" not in s["ttir"]


def test_structure_read_with_tritons_bindings():
    from course_lib.triton import passes

    run = passes.run_passes(mlir.sum_kernel, mlir.SUM_SIGNATURE, {"BLOCK": 32}, stages=("ttir",), num_warps=1)
    tree = mlir.structure(run.live[1])
    assert tree.name == "builtin.module"
    func = tree.regions[0].blocks[0].ops[0]
    assert func.name == "tt.func" and func.regions[0].blocks[0].args == ["!tt.ptr<f32>", "!tt.ptr<f32>", "i32"]
    loop = next(op for op in func.regions[0].blocks[0].ops if op.name == "scf.for")
    assert loop.results == ["f32"] and loop.regions[0].blocks[0].args == ["i32", "f32"]  # induction var, acc
    reduce = next(op for op in loop.regions[0].blocks[0].ops if op.name == "tt.reduce")
    assert reduce.regions[0].blocks[0].args == ["f32", "f32"]
    assert mlir.count(tree) == {"ops": 22, "regions": 4, "blocks": 4, "block arguments": 7}
    assert run.final.count("scf.for") == 1 and mlir.outline(tree, keep=0).count("block ^bb") == 4
    assert ("tt.make_range", {"start": 0, "end": 32}) in mlir.int_attributes(run.live[1])
    assert ("tt.reduce", {"axis": 0}) in mlir.int_attributes(run.live[1])
    assert "region #0" in mlir.nesting_dot(tree) and mlir.nesting_dot(tree).startswith("digraph")


def test_loop_carried_values_become_block_arguments_then_phis():
    from course_lib.triton import compile_stages, passes

    run = passes.run_passes(mlir.sum_kernel, mlir.SUM_SIGNATURE, {"BLOCK": 32},
                            stages=("ttir", "ttgir", "llvm_dialect"), num_warps=1)  # fmt: skip
    cf = run.step("scf_to_cf")
    assert "scf.for" in cf.before and "scf.for" not in cf.after
    assert any("^bb1(%start: i32, %acc_2: f32)" in ln for ln in mlir.ops_with_block_arguments(cf.after))
    llir = compile_stages(mlir.sum_kernel, mlir.SUM_SIGNATURE, {"BLOCK": 32}, "sm_90", num_warps=1, aligned=True)[
        "llir"
    ]
    phis = [ln for ln in mlir.ops_with_block_arguments(llir) if "phi" in ln]
    assert any("phi float" in ln for ln in phis) and any("phi i32" in ln for ln in phis)


def test_int_attributes_from_printed_text_match_the_bindings(monkeypatch):
    """Triton 3.6's bindings have no ``operation.get_int_attr``; the printed module gives the same records."""
    from course_lib.triton import passes

    run = passes.run_passes(mlir.sum_kernel, mlir.SUM_SIGNATURE, {"BLOCK": 32}, stages=("ttir",), num_warps=1)
    names = ("start", "end", "axis", "predicate", "value")
    from_bindings = mlir.int_attributes(run.live[1], names)
    from_text = mlir.int_attributes_from_text(compat.triton_module_text(run.live[1]), names)
    assert from_text == from_bindings
    assert ("arith.cmpi", {"predicate": 2}) in from_text  # slt

    def no_get_int_attr(module, names):
        raise compat.CompatError("triton's ir.operation has no get_int_attr in this version")

    monkeypatch.setattr(compat, "triton_module_ops", no_get_int_attr)  # what Triton 3.6 answers
    assert mlir.int_attributes(run.live[1], names) == from_bindings
