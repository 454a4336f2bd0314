"""course_lib.llvm.mlir: Triton's TTIR -> TTGIR -> LLVM dialect -> LLVM IR -> PTX, no GPU."""

from __future__ import annotations

import course_lib  # noqa: F401  (sets Triton's mode first)
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
