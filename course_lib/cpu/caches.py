"""Why tiling pays: naive, tiled and cache-oblivious transpose and matmul, timed over sizes.

Teaches the loop-nest transformations Inductor and every BLAS rely on (Inductor's
``torch/_inductor/codegen/cpp.py`` tiles its loops with ``LoopNest.tile`` and the
``cpp.tile_size`` / ``cpp_gemm_template.py`` block sizes) by their effect on time:

* **naive**: ``b[j][i] = a[i][j]`` reads rows but writes columns; once a column's cache lines
  no longer fit in a cache level, every write misses there (the "cliff").
* **tiled**: the same loops in ``t x t`` blocks, so a block of ``a`` and of ``b`` stay resident;
  ``t`` is chosen for one cache level (:func:`tile_for`).
* **cache-oblivious** (Frigo, Leiserson, Prokop, Ramachandran, FOCS 1999): split the larger
  dimension in half recursively until a block is small; every cache level gets a block that
  fits it, without knowing its size.

Matmul gets the same ladder plus ``ikj`` (loop interchange: the inner loop walks rows of ``b``
and ``c`` contiguously, which is also what lets it vectorise).
"""

from __future__ import annotations

import ctypes
import dataclasses
from functools import partial

import numpy as np

from course_lib.cpu.build import CompiledC, compile_c
from course_lib.cpu.timing import median_time, ptr

FLAGS = "-O3 -march=native"
BASE = 16  # recursion stops at blocks of at most BASE x BASE (transpose) or 32^3 (matmul)

SOURCE = r"""
static inline int min(int a, int b) { return a < b ? a : b; }

void transpose_naive(float *restrict b, const float *restrict a, int n, int t)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            b[j * n + i] = a[i * n + j];
}

void transpose_tiled(float *restrict b, const float *restrict a, int n, int t)
{
    for (int ii = 0; ii < n; ii += t)
        for (int jj = 0; jj < n; jj += t)
            for (int i = ii; i < min(ii + t, n); i++)
                for (int j = jj; j < min(jj + t, n); j++)
                    b[j * n + i] = a[i * n + j];
}

/* Rows r0..r1 and columns c0..c1 of a: halve the longer side until the block is small. */
static void transpose_rec(float *restrict b, const float *restrict a, int n, int r0, int r1, int c0, int c1)
{
    if (r1 - r0 <= 16 && c1 - c0 <= 16) {
        for (int i = r0; i < r1; i++)
            for (int j = c0; j < c1; j++)
                b[j * n + i] = a[i * n + j];
    } else if (r1 - r0 >= c1 - c0) {
        int m = (r0 + r1) / 2;
        transpose_rec(b, a, n, r0, m, c0, c1);
        transpose_rec(b, a, n, m, r1, c0, c1);
    } else {
        int m = (c0 + c1) / 2;
        transpose_rec(b, a, n, r0, r1, c0, m);
        transpose_rec(b, a, n, r0, r1, m, c1);
    }
}

void transpose_oblivious(float *restrict b, const float *restrict a, int n, int t)
{
    transpose_rec(b, a, n, 0, n, 0, n);
}

/* The tiled transpose on arrays whose rows are ld >= n floats apart (ld > n: padded rows). */
void transpose_tiled_ld(float *restrict b, const float *restrict a, int n, int t, int ld)
{
    for (int ii = 0; ii < n; ii += t)
        for (int jj = 0; jj < n; jj += t)
            for (int i = ii; i < min(ii + t, n); i++)
                for (int j = jj; j < min(jj + t, n); j++)
                    b[j * ld + i] = a[i * ld + j];
}

void matmul_naive(float *restrict c, const float *restrict a, const float *restrict b, int n, int t)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int k = 0; k < n; k++)
                s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

void matmul_ikj(float *restrict c, const float *restrict a, const float *restrict b, int n, int t)
{
    for (int i = 0; i < n * n; i++) c[i] = 0.0f;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            float aik = a[i * n + k];
            for (int j = 0; j < n; j++)
                c[i * n + j] += aik * b[k * n + j];
        }
}

void matmul_tiled(float *restrict c, const float *restrict a, const float *restrict b, int n, int t)
{
    for (int i = 0; i < n * n; i++) c[i] = 0.0f;
    for (int ii = 0; ii < n; ii += t)
        for (int kk = 0; kk < n; kk += t)
            for (int jj = 0; jj < n; jj += t)
                for (int i = ii; i < min(ii + t, n); i++)
                    for (int k = kk; k < min(kk + t, n); k++) {
                        float aik = a[i * n + k];
                        for (int j = jj; j < min(jj + t, n); j++)
                            c[i * n + j] += aik * b[k * n + j];
                    }
}

/* c[i0:i1, j0:j1] += a[i0:i1, k0:k1] @ b[k0:k1, j0:j1], halving the largest extent. */
static void matmul_rec(float *restrict c, const float *restrict a, const float *restrict b, int n,
                       int i0, int i1, int j0, int j1, int k0, int k1)
{
    int di = i1 - i0, dj = j1 - j0, dk = k1 - k0;
    if (di <= 32 && dj <= 32 && dk <= 32) {
        for (int i = i0; i < i1; i++)
            for (int k = k0; k < k1; k++) {
                float aik = a[i * n + k];
                for (int j = j0; j < j1; j++)
                    c[i * n + j] += aik * b[k * n + j];
            }
    } else if (di >= dj && di >= dk) {
        matmul_rec(c, a, b, n, i0, i0 + di / 2, j0, j1, k0, k1);
        matmul_rec(c, a, b, n, i0 + di / 2, i1, j0, j1, k0, k1);
    } else if (dj >= dk) {
        matmul_rec(c, a, b, n, i0, i1, j0, j0 + dj / 2, k0, k1);
        matmul_rec(c, a, b, n, i0, i1, j0 + dj / 2, j1, k0, k1);
    } else {
        matmul_rec(c, a, b, n, i0, i1, j0, j1, k0, k0 + dk / 2);
        matmul_rec(c, a, b, n, i0, i1, j0, j1, k0 + dk / 2, k1);
    }
}

void matmul_oblivious(float *restrict c, const float *restrict a, const float *restrict b, int n, int t)
{
    for (int i = 0; i < n * n; i++) c[i] = 0.0f;
    matmul_rec(c, a, b, n, 0, n, 0, n, 0, n);
}
"""

TRANSPOSES = ("naive", "tiled", "oblivious")
MATMULS = ("naive", "ikj", "tiled", "oblivious")


def library() -> CompiledC:
    return compile_c(SOURCE, FLAGS)


def tile_for(cache_bytes: int, elem_bytes: int = 4, arrays: int = 2) -> int:
    """Largest power-of-two ``t`` with ``arrays`` tiles of ``t x t`` elements in ``cache_bytes``.

    Two tiles (one of ``a``, one of ``b``) for transpose; three for matmul. A power of two keeps
    tile rows aligned to cache lines.
    """
    t = 1
    while arrays * (2 * t) ** 2 * elem_bytes <= cache_bytes:
        t *= 2
    return t


# ----------------------------------------------------------------------------- tiles and cache sets


def tile_lines_per_set(t: int, ld: int, elem_bytes: int = 4, line_bytes: int = 64, sets: int = 64) -> int:
    """Most cache lines that one ``t x t`` tile puts in a single set.

    The tile's rows start ``ld * elem_bytes`` bytes apart (the array starts on a line boundary
    and the tile sits in its top-left corner); each row covers the lines from its first to its
    last byte, and a line lands in set ``line_number % sets``. With ``ld * elem_bytes`` a
    multiple of ``sets * line_bytes`` (4 KiB on a 64-set, 64-byte-line L1) every row starts in
    the same set.
    """
    if min(t, ld, elem_bytes, line_bytes, sets) < 1:
        raise ValueError(
            f"t, ld, elem_bytes, line_bytes and sets must be positive, got {(t, ld, elem_bytes, line_bytes, sets)}"
        )
    per_set: dict[int, int] = {}
    for row in range(t):
        first = row * ld * elem_bytes
        for line in range(first // line_bytes, (first + t * elem_bytes - 1) // line_bytes + 1):
            per_set[line % sets] = per_set.get(line % sets, 0) + 1
    return max(per_set.values())


def tile_for_cache(cache_bytes: int, ways: int, line_bytes: int, elem_bytes: int, arrays: int, ld: int) -> int:
    """Largest power-of-two ``t`` whose ``arrays`` tiles fit the cache by capacity *and* by sets.

    Capacity: ``arrays * t * t * elem_bytes <= cache_bytes`` (what :func:`tile_for` checks).
    Associativity: ``arrays * tile_lines_per_set(t, ...) <= ways``, so the busiest set can hold
    the lines every array's tile puts in it (conservative: it assumes the arrays' tiles fall on
    the same sets, which is what a power-of-two size and stride do).
    """
    sets = cache_bytes // (ways * line_bytes)
    t = 1
    while True:
        nxt = 2 * t
        if arrays * nxt * nxt * elem_bytes > cache_bytes:
            return t
        if arrays * tile_lines_per_set(nxt, ld, elem_bytes, line_bytes, sets) > ways:
            return t
        t = nxt


def transpose(variant: str, a: np.ndarray, t: int = 32) -> np.ndarray:
    n = a.shape[0]
    b = np.empty_like(a)
    f = library().fn(f"transpose_{variant}", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int])
    f(ptr(b), ptr(a), n, t)
    return b


def matmul(variant: str, a: np.ndarray, b: np.ndarray, t: int = 32) -> np.ndarray:
    n = a.shape[0]
    c = np.empty_like(a)
    f = library().fn(f"matmul_{variant}", [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_int])
    f(ptr(c), ptr(a), ptr(b), n, t)
    return c


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One measurement: variant, size n, working set in bytes, median seconds, per-unit cost."""

    op: str
    variant: str
    n: int
    bytes: int
    seconds: float

    @property
    def ns_per_element(self) -> float:
        return self.seconds / (self.n * self.n) * 1e9

    @property
    def per_element(self) -> float:
        """``seconds`` / n^2: for simulated points, misses per element."""
        return self.seconds / (self.n * self.n)

    @property
    def gflops(self) -> float:
        return 2 * self.n**3 / self.seconds / 1e9


def sweep_transpose(sizes, variants=TRANSPOSES, t: int = 32, repeat: int = 3, progress: bool = False):
    """Time every transpose variant at every size (median of ``repeat``)."""
    f_by = {v: library().fn(f"transpose_{v}", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int])
            for v in variants}  # fmt: skip
    points = []
    for n in _progress(sizes, progress, "transpose sizes"):
        a = np.random.default_rng(n).standard_normal((n, n), dtype=np.float32)
        b = np.empty_like(a)
        for v in variants:
            s = median_time(partial(f_by[v], ptr(b), ptr(a), n, t), repeat=repeat, min_time=0.005).median
            points.append(SweepPoint("transpose", v, n, 2 * a.nbytes, s))
    return points


def sweep_matmul(sizes, variants=MATMULS, t: int = 32, repeat: int = 3, progress: bool = False):
    """Time every matmul variant at every size (median of ``repeat``)."""
    f_by = {v: library().fn(f"matmul_{v}", [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_int]) for v in variants}
    points = []
    for n in _progress(sizes, progress, "matmul sizes"):
        rng = np.random.default_rng(n)
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty_like(a)
        for v in variants:
            s = median_time(partial(f_by[v], ptr(c), ptr(a), ptr(b), n, t), repeat=repeat, min_time=0.005).median
            points.append(SweepPoint("matmul", v, n, 3 * a.nbytes, s))
    return points


def _progress(items, show: bool, desc: str):
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False)


# ----------------------------------------------------------------------------- simulation


def transpose_trace(n: int, variant: str, t: int = 32, elem: int = 4, b_base: int | None = None, ld: int | None = None):
    """Byte addresses touched by a transpose variant, in program order: read a, write b.

    ``a`` starts at 0, ``b`` right after it (offset by one line, as malloc would), so the
    simulator sees the same conflicts the real arrays can have. ``ld`` (default ``n``): elements
    between the starts of two rows, larger than ``n`` for a padded leading dimension.
    """
    ld = n if ld is None else ld
    b0 = n * ld * elem + 64 if b_base is None else b_base
    order = []
    if variant == "naive":
        order = ((i, j) for i in range(n) for j in range(n))
    elif variant == "tiled":
        order = ((i, j) for ii in range(0, n, t) for jj in range(0, n, t)
                 for i in range(ii, min(ii + t, n)) for j in range(jj, min(jj + t, n)))  # fmt: skip
    elif variant == "oblivious":
        order = _oblivious_order(0, n, 0, n)
    for i, j in order:
        yield (i * ld + j) * elem
        yield b0 + (j * ld + i) * elem


def _oblivious_order(r0, r1, c0, c1):
    if r1 - r0 <= BASE and c1 - c0 <= BASE:
        for i in range(r0, r1):
            for j in range(c0, c1):
                yield i, j
    elif r1 - r0 >= c1 - c0:
        m = (r0 + r1) // 2
        yield from _oblivious_order(r0, m, c0, c1)
        yield from _oblivious_order(m, r1, c0, c1)
    else:
        m = (c0 + c1) // 2
        yield from _oblivious_order(r0, r1, c0, m)
        yield from _oblivious_order(r0, r1, m, c1)


@dataclasses.dataclass(frozen=True)
class TileRun:
    """One tiled transpose: tile ``t``, leading dimension ``ld``; simulated L1 misses and time."""

    label: str
    n: int
    t: int
    ld: int
    misses_per_element: float
    ns_per_element: float


def transpose_padded(a: np.ndarray, t: int, ld: int) -> np.ndarray:
    """Tiled transpose of the square ``a`` through buffers whose rows are ``ld`` floats apart."""
    n = a.shape[0]
    if ld < n:
        raise ValueError(f"the leading dimension ld={ld} must be at least n={n}")
    src = np.zeros((n, ld), dtype=np.float32)
    src[:, :n] = a
    dst = np.zeros((n, ld), dtype=np.float32)
    f = library().fn("transpose_tiled_ld", [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 3)
    f(ptr(dst), ptr(src), n, t, ld)
    return dst[:, :n].copy()


def measure_tiles(n: int, cache, cases, repeat: int = 5) -> list[TileRun]:
    """For each ``(label, t, ld)``: misses per element on ``cache`` by Module 1's simulator, and
    the measured time of ``transpose_tiled_ld`` (median of ``repeat``)."""
    f = library().fn("transpose_tiled_ld", [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 3)
    runs = []
    for label, t, ld in cases:
        misses = simulate_misses(transpose_trace(n, "tiled", t, ld=ld), cache.size_bytes, cache.ways, cache.line_bytes)
        a = np.random.default_rng(n).standard_normal((n, ld), dtype=np.float32)
        b = np.zeros_like(a)
        s = median_time(partial(f, ptr(b), ptr(a), n, t, ld), repeat=repeat, min_time=0.01).median
        runs.append(TileRun(label, n, t, ld, misses / (n * n), s / (n * n) * 1e9))
    return runs


def plot_sweep(points, caches=(), metric: str = "ns_per_element", title: str = "", ax=None, ylabel: str = ""):
    """Cost per element against working set (log x), one line per variant, cache sizes marked."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 3.6))
    fig = ax.figure
    for variant in dict.fromkeys(p.variant for p in points):
        pts = [p for p in points if p.variant == variant]
        ax.plot([p.bytes for p in pts], [getattr(p, metric) for p in pts], marker="o", label=variant)
    for c in caches:
        if c.kind != "Instruction":
            ax.axvline(c.size_bytes, color="grey", ls=":", lw=1)
            ax.text(c.size_bytes, ax.get_ylim()[1], f" {c.name}", va="top", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("working set (bytes)")
    ax.set_ylabel(ylabel or metric.replace("_", " "))
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- prediction


def simulate_misses(trace, size: int, ways: int, line: int = 64) -> int:
    """Misses of an address trace on one LRU cache level, by Module 1's simulator.

    ``course_lib/ir/cache.py`` (``simulate_cache``): exact LRU, set = ``(addr // line) % sets``,
    no prefetching, so it predicts misses, not time; real L1s add hardware prefetchers that hide
    much of the naive transpose's row-order read misses.
    """
    from course_lib.ir.cache import simulate_cache

    return simulate_cache(trace, size, line_bytes=line, ways=ways).misses


def predict_transpose(sizes, cache, variants=TRANSPOSES, t: int = 32) -> list[SweepPoint]:
    """Simulated misses per element of each transpose variant on ``cache`` (a CacheLevel).

    Returned as :class:`SweepPoint` with ``seconds`` holding *misses* so the same plot
    function draws prediction and measurement.
    """
    points = []
    for n in sizes:
        for v in variants:
            misses = simulate_misses(transpose_trace(n, v, t), cache.size_bytes, cache.ways, cache.line_bytes)
            points.append(SweepPoint("transpose (simulated)", v, n, 2 * n * n * 4, misses))
    return points
