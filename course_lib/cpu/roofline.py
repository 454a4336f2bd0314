"""This CPU's roofline, from a measured bandwidth and a measured peak.

The roofline model (Williams, Waterman, Patterson, CACM 2009): a kernel doing ``I`` flops per
byte of memory traffic can run at most ``min(peak, I * bandwidth)``. Inductor reasons the same
way when it fuses: fusion raises ``I`` by not writing intermediates to memory
(``torch/_inductor/scheduler.py`` scores fusions by bytes saved).

Both roofs are *measured* here, not taken from a data sheet:

* bandwidth: a read-only sum over an array far larger than the last-level cache, vectorised
  and on every core (reads are the cheapest traffic there is: no write-allocate);
* peak: AVX2 FMAs on ten independent register accumulators (enough to cover FMA latency x
  throughput), on every core. The theoretical figure is cores x GHz x FMA units x lanes x 2.
"""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from course_lib.cpu.build import compile_c
from course_lib.cpu.timing import median_time, ptr

SOURCE = r"""
#include <omp.h>
double read_sum(const float *restrict x, long n, int threads)
{
    float s = 0.0f;
#pragma omp parallel for simd reduction(+:s) num_threads(threads) schedule(static)
    for (long i = 0; i < n; i++)
        s += x[i];
    return s;
}

#if defined(__x86_64__)
#include <immintrin.h>
#define ACC 10
/* Each thread: iters x ACC independent 8-lane FMAs = iters * ACC * 16 flops. */
__attribute__((target("avx2,fma")))
float peak_fma(long iters, int threads)
{
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+:total)
    {
        __m256 acc[ACC], x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-4f);
        for (int k = 0; k < ACC; k++) acc[k] = _mm256_set1_ps((float)k);
        for (long it = 0; it < iters; it++) {
#pragma GCC unroll 10
            for (int k = 0; k < ACC; k++)
                acc[k] = _mm256_fmadd_ps(acc[k], x, y);
        }
        __m256 s = acc[0];
        for (int k = 1; k < ACC; k++) s = _mm256_add_ps(s, acc[k]);
        float lanes[8];
        _mm256_storeu_ps(lanes, s);
        for (int k = 0; k < 8; k++) total += lanes[k];
    }
    return total;
}
int peak_lanes(void) { return 8; }
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#define ACC 10
float peak_fma(long iters, int threads)
{
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+:total)
    {
        float32x4_t acc[ACC], x = vdupq_n_f32(0.999f), y = vdupq_n_f32(1e-4f);
        for (int k = 0; k < ACC; k++) acc[k] = vdupq_n_f32((float)k);
        for (long it = 0; it < iters; it++) {
#pragma GCC unroll 10
            for (int k = 0; k < ACC; k++)
                acc[k] = vfmaq_f32(y, acc[k], x);
        }
        for (int k = 0; k < ACC; k++) total += vaddvq_f32(acc[k]);
    }
    return total;
}
int peak_lanes(void) { return 4; }
#endif
"""
FLAGS = "-O3 -march=native -fopenmp"
ACCUMULATORS = 10


@dataclasses.dataclass(frozen=True)
class Roofline:
    """Measured roofs: ``bandwidth`` in GB/s, ``peak`` in GFLOP/s, on ``threads`` threads."""

    bandwidth: float
    peak: float
    threads: int

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (flop/byte) where the two roofs meet."""
        return self.peak / self.bandwidth

    def attainable(self, intensity: float) -> float:
        return attainable(intensity, self.peak, self.bandwidth)


def attainable(intensity: float, peak: float, bandwidth: float) -> float:
    """The roofline: ``min(peak, intensity * bandwidth)`` (GFLOP/s, flop/byte, GB/s)."""
    return min(peak, intensity * bandwidth)


def measure_bandwidth(threads: int, n: int = 1 << 25, repeat: int = 5) -> float:
    """GB/s of a read-only vectorised sum over ``n`` floats (default 128 MiB, 4x a 32 MiB L3)."""
    x = np.ones(n, np.float32)
    f = compile_c(SOURCE, FLAGS).fn("read_sum", [ctypes.c_void_p, ctypes.c_long, ctypes.c_int], ctypes.c_double)
    t = median_time(lambda: f(ptr(x), n, threads), repeat=repeat).median
    return 4 * n / t / 1e9


def measure_peak(threads: int, iters: int = 2_000_000, repeat: int = 5) -> float:
    """GFLOP/s of independent FMAs in registers on ``threads`` threads."""
    lib = compile_c(SOURCE, FLAGS)
    f = lib.fn("peak_fma", [ctypes.c_long, ctypes.c_int], ctypes.c_float)
    lanes = lib.fn("peak_lanes", [], ctypes.c_int)()
    t = median_time(lambda: f(iters, threads), repeat=repeat).median
    return threads * iters * ACCUMULATORS * lanes * 2 / t / 1e9


def measure(threads: int) -> Roofline:
    return Roofline(measure_bandwidth(threads), measure_peak(threads), threads)


def plot(roof: Roofline, points: dict[str, tuple[float, float]] | None = None, title: str = ""):
    """Log-log roofline with kernels as points: ``{name: (flop/byte, GFLOP/s)}``."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = np.logspace(-4, 8, 200, base=2)
    ax.plot(xs, [roof.attainable(x) for x in xs], color="black", label="roofline")
    for name, (ai, gf) in (points or {}).items():
        ax.scatter([ai], [gf], zorder=3)
        ax.annotate(name, (ai, gf), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.axvline(roof.ridge, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("arithmetic intensity (flop / byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title or f"roofline on {roof.threads} thread(s)")
    ax.legend()
    fig.tight_layout()
    return fig
