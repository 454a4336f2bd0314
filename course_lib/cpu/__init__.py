"""Module 6: CPU compilation and vectorisation, shown with gcc, objdump, OpenMP and Inductor.

What happens to Inductor's C++ after ``torch/_inductor/codegen/cpp.py`` writes it: gcc turns
loops into SIMD instructions (or explains why not), OpenMP spreads the outer loop over cores,
and the cache hierarchy decides whether any of it runs at the speed of the arithmetic.

Pieces, in the order the labs use them:

    machine     simd_features(), caches and cores from /proc/cpuinfo and sysfs
    build       compile_c(source, flags) -> CompiledC: ctypes library, gcc's vectorisation
                report per loop, objdump assembly with packed SIMD marked; cached by hash
    vectorise   four reasons a loop does not vectorise, each with its fix, checked and timed
    kernels     scalar / auto-vectorised / AVX2-or-NEON intrinsics / OpenMP variants
    openmp      schedules, the reduction clause, false sharing, speed-up on this machine
    caches      naive, tiled and cache-oblivious transpose and matmul; a cache simulator's
                prediction; the roofline from measured bandwidth and peak
    inductor_view   real Inductor C++ for a fused op: Vectorized<float>, SLEEF, omp pragmas

Stable API: :func:`compile_c` and :func:`simd_features`.
"""

from __future__ import annotations

from course_lib.cpu.build import CompiledC, CompileError, LoopReport, Remark, classify, compile_c
from course_lib.cpu.machine import Machine, SimdFeatures, simd_features, this_machine
from course_lib.cpu.timing import Timing, median_time, ptr

__all__ = [
    "CompileError", "CompiledC", "LoopReport", "Machine", "Remark", "SimdFeatures", "Timing",
    "classify", "compile_c", "median_time", "ptr", "simd_features", "this_machine",
]  # fmt: skip
