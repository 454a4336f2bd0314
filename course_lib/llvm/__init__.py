"""Module 2: LLVM. The course IR becomes LLVM IR, goes through LLVM's pass pipelines, and comes
out as x86-64, PTX and AMDGPU code.

Pipeline (one file per stage, each named after the LLVM component it teaches)::

    course IR (course_lib.ir)
      -> lowering.py   LLVM IR, two ways: clang -O0 style (allocas) and straight from SSA (phis)
      -> passes.py     the new pass manager: O0..O3, single passes, a snapshot after each pass
      -> mcjit.py      MCJIT: machine code in memory, called through ctypes
      -> targets.py    x86-64 (baseline/AVX2/AVX-512), NVPTX (sm_80/sm_90), AMDGPU (gfx942)
      -> backend.py    llc: SelectionDAG -> MachineIR -> MCInst
    analysis.py        a custom analysis and transform in Python
    mlir.py            Triton: TTIR -> TTGIR -> LLVM dialect -> LLVM IR -> PTX
    ssa_compare.py     our SSA construction vs LLVM's mem2reg

Stable API (labs and outside evaluators use these): :func:`lower`, :func:`optimize`,
:func:`jit`, :func:`emit_asm`. Set ``COURSE_LLVM_DEBUG=1`` to print every stage's IR from
:func:`jit`.
"""

from __future__ import annotations

from course_lib.llvm.passes import optimize, run_passes, run_pipeline
from course_lib.llvm.targets import emit_asm

__all__ = ["emit_asm", "jit", "lower", "lower_alloca", "lower_ssa", "optimize", "run_passes", "run_pipeline"]


def __getattr__(name: str):
    # lowering.py needs course_lib.ir (Module 1); import it only when asked.
    if name in ("lower", "lower_alloca", "lower_ssa", "jit"):
        from course_lib.llvm import lowering

        return getattr(lowering, name)
    raise AttributeError(f"module 'course_lib.llvm' has no attribute {name!r}")
