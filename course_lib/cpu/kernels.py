"""The kernel ladder: scalar, auto-vectorised, intrinsics and OpenMP versions of two kernels.

Teaches the rungs Inductor's C++ backend climbs (``torch/_inductor/codegen/cpp.py``): a scalar
loop (``CppKernel``), a vectorised loop (``CppVecKernel``, which writes ``at::vec`` calls that
compile to the intrinsics below) and an OpenMP-parallel outer loop (``#pragma omp for``).

Two kernels, chosen to sit on either side of the roofline's ridge:

* ``triad``  ``a[i] = b[i] + s * c[i]``: 2 flops per 12 bytes, bandwidth bound (STREAM's triad);
* ``poly``   a degree-``POLY_DEGREE`` polynomial per element by Horner's rule: 2 flops per
  degree per 8 bytes, compute bound.

Variants (same C names, different source or flags; :data:`VARIANTS` is the rule table):

=============  =======================================  ===========================================
variant        source                                   flags
=============  =======================================  ===========================================
scalar         plain loops                              -O3 -march=native -fno-tree-vectorize ...
autovec        plain loops                              -O3 -march=native
intrinsics     AVX2/FMA (x86) or NEON (Arm) intrinsics  -O3 -march=native
openmp         plain loops, ``omp parallel for simd``   -O3 -march=native -fopenmp
intrinsics+    the intrinsics, ``omp parallel for``     -O3 -march=native -fopenmp
openmp
=============  =======================================  ===========================================

The intrinsics triad has a second form with non-temporal stores (``_mm256_stream_ps``): they
bypass the cache, so the destination line is not read first (no "write allocate"), which is
how a streaming kernel gets close to the memory's bandwidth.
"""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from course_lib.cpu.build import CompiledC, compile_c
from course_lib.cpu.timing import median_time, ptr

POLY_DEGREE = 32
# Coefficients shrink so the polynomial stays finite on [-1, 1]; float literals in C too.
POLY_COEFFS = [round((-1) ** k / (k + 1), 6) for k in range(POLY_DEGREE + 1)]
_COEFF_C = ", ".join(f"{c!r}f" for c in POLY_COEFFS)

PLAIN = f"""
#include <stddef.h>
static const float P[{POLY_DEGREE + 1}] = {{{_COEFF_C}}};

void triad(float *restrict a, const float *restrict b, const float *restrict c, float s, long n, int threads)
{{
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (long i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}}

void poly(float *restrict y, const float *restrict x, long n, int threads)
{{
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (long i = 0; i < n; i++) {{
        float acc = P[{POLY_DEGREE}];
        for (int k = {POLY_DEGREE - 1}; k >= 0; k--)
            acc = acc * x[i] + P[k];
        y[i] = acc;
    }}
}}
"""

INTRINSICS = f"""
#include <stddef.h>
#include <stdint.h>
static const float P[{POLY_DEGREE + 1}] = {{{_COEFF_C}}};
#if defined(__x86_64__)
#include <immintrin.h>
/* 8 floats per __m256; _mm256_fmadd_ps is one vfmadd instruction (FMA3). */
__attribute__((target("avx2,fma")))
void triad(float *restrict a, const float *restrict b, const float *restrict c, float s, long n, int threads)
{{
    __m256 vs = _mm256_set1_ps(s);
    long blocks = n / 8;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long k = 0; k < blocks; k++) {{
        __m256 vb = _mm256_loadu_ps(b + 8 * k), vc = _mm256_loadu_ps(c + 8 * k);
        _mm256_storeu_ps(a + 8 * k, _mm256_fmadd_ps(vs, vc, vb));
    }}
    for (long i = 8 * blocks; i < n; i++) a[i] = b[i] + s * c[i];      /* the scalar tail */
}}

/* Non-temporal stores: need 32-byte aligned addresses, so peel until a+i is aligned. */
__attribute__((target("avx2,fma")))
void triad_nt(float *restrict a, const float *restrict b, const float *restrict c, float s, long n, int threads)
{{
    __m256 vs = _mm256_set1_ps(s);
    long i = 0;
    for (; i < n && ((uintptr_t)(a + i) & 31); i++) a[i] = b[i] + s * c[i];
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long j = i; j < n - 7; j += 8) {{
        __m256 vb = _mm256_loadu_ps(b + j), vc = _mm256_loadu_ps(c + j);
        _mm256_stream_ps(a + j, _mm256_fmadd_ps(vs, vc, vb));
    }}
    _mm_sfence();
    for (long j = i + ((n - i) / 8) * 8; j < n; j++) a[j] = b[j] + s * c[j];
}}

/* Four independent vectors per iteration hide the FMA latency (4 cycles, 2 per cycle). */
__attribute__((target("avx2,fma")))
void poly(float *restrict y, const float *restrict x, long n, int threads)
{{
    long blocks = n / 32;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long k = 0; k < blocks; k++) {{
        long i = 32 * k;
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        __m256 x2 = _mm256_loadu_ps(x + i + 16), x3 = _mm256_loadu_ps(x + i + 24);
        __m256 a0 = _mm256_set1_ps(P[{POLY_DEGREE}]), a1 = a0, a2 = a0, a3 = a0;
        for (int k = {POLY_DEGREE - 1}; k >= 0; k--) {{
            __m256 p = _mm256_set1_ps(P[k]);
            a0 = _mm256_fmadd_ps(a0, x0, p); a1 = _mm256_fmadd_ps(a1, x1, p);
            a2 = _mm256_fmadd_ps(a2, x2, p); a3 = _mm256_fmadd_ps(a3, x3, p);
        }}
        _mm256_storeu_ps(y + i, a0); _mm256_storeu_ps(y + i + 8, a1);
        _mm256_storeu_ps(y + i + 16, a2); _mm256_storeu_ps(y + i + 24, a3);
    }}
    for (long i = 32 * blocks; i < n; i++) {{
        float acc = P[{POLY_DEGREE}];
        for (int k = {POLY_DEGREE - 1}; k >= 0; k--) acc = acc * x[i] + P[k];
        y[i] = acc;
    }}
}}
#elif defined(__ARM_NEON)
#include <arm_neon.h>
/* NEON: 4 floats per float32x4_t; vfmaq_f32(acc, a, b) = acc + a*b. */
void triad(float *restrict a, const float *restrict b, const float *restrict c, float s, long n, int threads)
{{
    float32x4_t vs = vdupq_n_f32(s);
    long i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(a + i, vfmaq_f32(vld1q_f32(b + i), vs, vld1q_f32(c + i)));
    for (; i < n; i++) a[i] = b[i] + s * c[i];
}}
void triad_nt(float *restrict a, const float *restrict b, const float *restrict c, float s, long n, int threads)
{{
    triad(a, b, c, s, n, threads);   /* NEON has no portable streaming store; same as triad */
}}
void poly(float *restrict y, const float *restrict x, long n, int threads)
{{
    long i = 0;
    for (; i + 8 <= n; i += 8) {{
        float32x4_t x0 = vld1q_f32(x + i), x1 = vld1q_f32(x + i + 4);
        float32x4_t a0 = vdupq_n_f32(P[{POLY_DEGREE}]), a1 = a0;
        for (int k = {POLY_DEGREE - 1}; k >= 0; k--) {{
            float32x4_t p = vdupq_n_f32(P[k]);
            a0 = vfmaq_f32(p, a0, x0); a1 = vfmaq_f32(p, a1, x1);
        }}
        vst1q_f32(y + i, a0); vst1q_f32(y + i + 4, a1);
    }}
    for (; i < n; i++) {{
        float acc = P[{POLY_DEGREE}];
        for (int k = {POLY_DEGREE - 1}; k >= 0; k--) acc = acc * x[i] + P[k];
        y[i] = acc;
    }}
}}
#else
#error "intrinsics variants exist for x86-64 (AVX2) and AArch64 (NEON) only"
#endif
"""

FLAGS = "-O3 -march=native"
SCALAR_FLAGS = FLAGS + " -fno-tree-vectorize -fno-tree-slp-vectorize"
# Rule table: variant -> (source, flags, threads: None = all cores).
VARIANTS = {
    "scalar": (PLAIN, SCALAR_FLAGS, 1),
    "autovec": (PLAIN, FLAGS, 1),
    "intrinsics": (INTRINSICS, FLAGS, 1),
    "openmp": (PLAIN, FLAGS + " -fopenmp", None),
    "intrinsics+openmp": (INTRINSICS, FLAGS + " -fopenmp", None),
}


def build(variant: str) -> CompiledC:
    """The compiled library of one variant (cached by hash)."""
    source, flags, _ = VARIANTS[variant]
    return compile_c(source, flags)


def threads_for(variant: str, cores: int) -> int:
    return VARIANTS[variant][2] or cores


def triad_fn(lib: CompiledC, name: str = "triad"):
    return lib.fn(
        name, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_long, ctypes.c_int]
    )


def poly_fn(lib: CompiledC):
    return lib.fn("poly", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int])


def poly_reference(x: np.ndarray) -> np.ndarray:
    """numpy's Horner (float64) - the oracle for every poly variant."""
    acc = np.full(x.shape, POLY_COEFFS[-1], np.float64)
    for c in reversed(POLY_COEFFS[:-1]):
        acc = acc * x + c
    return acc


@dataclasses.dataclass(frozen=True)
class KernelRun:
    """One variant of one kernel: correct?, median seconds, and the rate that matters."""

    kernel: str
    variant: str
    threads: int
    correct: bool
    seconds: float
    gflops: float
    gbytes: float


def run_triad(variant: str, n: int, threads: int, repeat: int = 5, name: str = "triad") -> KernelRun:
    rng = np.random.default_rng(1)
    b, c = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    a = np.zeros(n, np.float32)
    f = triad_fn(build(variant), name)
    call = lambda: f(ptr(a), ptr(b), ptr(c), 3.0, n, threads)  # noqa: E731
    call()
    ok = bool(np.allclose(a, b + np.float32(3.0) * c, rtol=1e-5, atol=1e-5))
    t = median_time(call, repeat=repeat).median
    return KernelRun(
        "triad",
        variant if name == "triad" else f"{variant} ({name})",
        threads,
        ok,
        t,
        2 * n / t / 1e9,
        12 * n / t / 1e9,
    )


def run_poly(variant: str, n: int, threads: int, repeat: int = 5) -> KernelRun:
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y = np.zeros(n, np.float32)
    f = poly_fn(build(variant))
    call = lambda: f(ptr(y), ptr(x), n, threads)  # noqa: E731
    call()
    ok = bool(np.allclose(y, poly_reference(x.astype(np.float64)), rtol=1e-4, atol=1e-4))
    t = median_time(call, repeat=repeat).median
    return KernelRun("poly", variant, threads, ok, t, 2 * POLY_DEGREE * n / t / 1e9, 8 * n / t / 1e9)
