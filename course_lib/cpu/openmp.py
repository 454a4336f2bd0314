"""OpenMP on this machine: parallel for, schedules, the reduction clause, false sharing.

Teaches what Inductor's ``#pragma omp parallel`` / ``#pragma omp for`` lines (written by
``torch/_inductor/codegen/cpp.py``, ``WorkSharing`` and ``OuterLoopFusedKernel``) ask of the
OpenMP runtime (libgomp here): split an outer loop's iterations among threads.

* ``schedule(static)`` hands each thread one contiguous block up front: no overhead, but a
  triangular loop (work grows with i) leaves the first thread idle at the end;
  ``schedule(dynamic, c)`` / ``guided`` hand out chunks as threads become free.
* ``reduction(+:s)`` gives each thread a private ``s`` and combines them once at the end; an
  ``atomic`` update per element serialises the threads on one cache line.
* False sharing: two threads writing *different* counters that share a 64-byte line make the
  line bounce between cores; padding each counter to its own line removes it.

Every function takes ``threads`` so one process can compare 1 thread with all cores.
"""

from __future__ import annotations

import ctypes
import dataclasses
from functools import partial

import numpy as np

from course_lib.cpu.build import CompiledC, compile_c
from course_lib.cpu.timing import median_time, ptr

FLAGS = "-O2 -march=native -fopenmp"
# omp_sched_t values from omp.h (OpenMP 4.5 spec, section 3.2.12).
SCHEDULES = {"static": 1, "dynamic": 2, "guided": 3}

SOURCE = r"""
#include <omp.h>
#include <math.h>

/* Row i does i units of work: the triangular loop nest of e.g. a Cholesky or causal mask. */
void triangular(float *y, int n, int kind, int chunk, int threads)
{
    omp_set_schedule((omp_sched_t)kind, chunk);
#pragma omp parallel for schedule(runtime) num_threads(threads)
    for (int i = 0; i < n; i++) {
        float s = 0.0f;
        for (int j = 0; j < i; j++)
            s += sinf((float)j * 1e-3f);
        y[i] = s;
    }
}

double sum_reduction(const float *x, long n, int threads)
{
    double s = 0.0;
#pragma omp parallel for reduction(+:s) num_threads(threads)
    for (long i = 0; i < n; i++)
        s += x[i];
    return s;
}

double sum_atomic(const float *x, long n, int threads)
{
    double s = 0.0;
#pragma omp parallel for num_threads(threads)
    for (long i = 0; i < n; i++) {
#pragma omp atomic
        s += x[i];
    }
    return s;
}

/* Thread t increments counters[t * stride]; stride 1 puts them on one cache line. */
void count(long *counters, int stride, long iters, int threads)
{
#pragma omp parallel num_threads(threads)
    {
        volatile long *mine = counters + omp_get_thread_num() * stride;
        for (long k = 0; k < iters; k++)
            *mine += 1;
    }
}

int max_threads(void) { return omp_get_max_threads(); }
"""


def library() -> CompiledC:
    return compile_c(SOURCE, FLAGS)


def triangular(n: int, schedule: str, chunk: int, threads: int) -> np.ndarray:
    """Run the triangular loop under ``schedule`` (``static``/``dynamic``/``guided``)."""
    y = np.zeros(n, np.float32)
    f = library().fn("triangular", [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int])
    f(ptr(y), n, SCHEDULES[schedule], chunk, threads)
    return y


def triangular_reference(n: int) -> np.ndarray:
    terms = np.sin(np.arange(n, dtype=np.float32) * np.float32(1e-3)).astype(np.float64)
    return np.concatenate([[0.0], np.cumsum(terms)[:-1]])


def time_schedules(n: int, threads: int, chunks=(0, 1, 16), repeat: int = 3) -> dict[str, float]:
    """Median seconds of the triangular loop per ``"schedule,chunk"`` (chunk 0 = default)."""
    f = library().fn("triangular", [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int])
    y = np.zeros(n, np.float32)
    out = {}
    for name, kind in SCHEDULES.items():
        for chunk in chunks:
            label = name if chunk == 0 else f"{name},{chunk}"
            out[label] = median_time(partial(f, ptr(y), n, kind, chunk, threads), repeat=repeat).median
    return out


def sums(x: np.ndarray, threads: int) -> dict[str, float]:
    """The reduction clause vs an atomic update per element: both results."""
    lib = library()
    args = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    red = lib.fn("sum_reduction", args, ctypes.c_double)
    atom = lib.fn("sum_atomic", args, ctypes.c_double)
    return {"reduction": red(ptr(x), x.size, threads), "atomic": atom(ptr(x), x.size, threads)}


def time_sums(x: np.ndarray, threads: int, repeat: int = 3) -> dict[str, float]:
    lib = library()
    args = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    out = {}
    for name in ("reduction", "atomic"):
        f = lib.fn(f"sum_{name}", args, ctypes.c_double)
        out[name] = median_time(partial(f, ptr(x), x.size, threads), repeat=repeat).median
    return out


def count(stride: int, iters: int, threads: int) -> np.ndarray:
    """Each thread increments its own counter ``iters`` times; returns the counters."""
    c = np.zeros(max(1, threads) * max(1, stride), np.int64)
    library().fn("count", [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_int])(ptr(c), stride, iters, threads)
    return c


def time_false_sharing(iters: int, threads: int, strides=(1, 8), repeat: int = 3) -> dict[int, float]:
    """Median seconds per stride (in 8-byte longs): 1 = same line, 8 = one 64-byte line each."""
    f = library().fn("count", [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_int])
    out = {}
    for stride in strides:
        c = np.zeros(threads * stride + 8, np.int64)
        out[stride] = median_time(partial(f, ptr(c), stride, iters, threads), repeat=repeat).median
    return out


@dataclasses.dataclass(frozen=True)
class Speedup:
    """Median seconds with 1 thread and with ``threads`` threads."""

    name: str
    threads: int
    one: float
    many: float

    @property
    def ratio(self) -> float:
        return self.one / self.many


# ----------------------------------------------------------------------------- which threads share a line?
def lines_of(offset: int, size: int, line_bytes: int) -> range:
    """Cache-line numbers touched by ``size`` bytes at byte ``offset`` (a field may straddle two)."""
    return range(offset // line_bytes, (offset + size - 1) // line_bytes + 1)


def false_sharing_pairs(offsets: list[int], size: int, line_bytes: int) -> set[tuple[int, int]]:
    """Pairs (t, u), t < u, of threads whose ``size``-byte fields at ``offsets[t]`` and
    ``offsets[u]`` touch a common cache line: every write by one invalidates the other's copy."""
    if size < 1 or line_bytes < 1 or any(o < 0 for o in offsets):
        raise ValueError(f"offsets must be >= 0 and size, line_bytes positive; got {offsets}, {size}, {line_bytes}")
    owners: dict[int, set[int]] = {}
    for t, off in enumerate(offsets):
        for ln in lines_of(off, size, line_bytes):
            owners.setdefault(ln, set()).add(t)
    return {(t, u) for ts in owners.values() for t in ts for u in ts if t < u}


# ----------------------------------------------------------------------------- a balanced static split
def balanced_split(costs, threads: int) -> list[int]:
    """Boundaries ``[0, b1, ..., n]`` of ``threads`` contiguous chunks of equal work (a static
    schedule that knows the cost of every iteration): cut the running total of the costs at
    ``k * total / threads``. The busiest chunk then holds at most ``total / threads + max(costs)``.
    """
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(costs, dtype=float))])
    targets = prefix[-1] * np.arange(1, threads) / threads
    inner = np.searchsorted(prefix, targets, side="left")
    return [0, *(int(b) for b in inner), len(prefix) - 1]


def random_workloads(seed: int = 0, count: int = 24) -> list[tuple[np.ndarray, int]]:
    """(iteration costs, threads) cases: triangular (i), quadratic, reversed, lumpy random costs."""
    rng = np.random.default_rng(seed)
    shapes = (lambda i: i + 1.0, lambda i: (i + 1.0) ** 2, lambda i: (i[::-1] + 1.0),
              lambda i: rng.exponential(1.0, i.size) * (1 + (i % 97 == 0) * 50))  # fmt: skip
    cases = []
    for k in range(count):
        n, threads = int(rng.integers(50, 5000)), int(rng.choice([2, 3, 4, 6, 8, 16]))
        cases.append((np.asarray(shapes[k % len(shapes)](np.arange(n, dtype=float)), dtype=float), threads))
    return cases


def split_verdict(bounds, costs, threads: int) -> tuple[bool, str]:
    """Is ``bounds`` a split of ``range(len(costs))`` into ``threads`` contiguous chunks whose
    busiest chunk holds at most ``total / threads + max(costs)`` work? (ok, why)"""
    n, b = len(costs), [int(x) for x in bounds]
    if len(b) != threads + 1 or b[0] != 0 or b[-1] != n:
        return False, f"want {threads + 1} boundaries from 0 to {n}; got {len(b)} from {b[0] if b else None}"
    if any(x > y for x, y in zip(b, b[1:])):
        return False, "boundaries must not decrease"
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    loads = prefix[b[1:]] - prefix[b[:-1]]
    bound = prefix[-1] / threads + float(np.max(costs))
    if loads.max() > bound + 1e-9 * prefix[-1]:
        return False, f"busiest thread has {loads.max() / (prefix[-1] / threads):.2f}x the average work"
    return True, f"busiest thread {loads.max() / (prefix[-1] / threads):.3f}x the average"
