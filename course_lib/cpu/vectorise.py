"""Why gcc did not vectorise a loop, and the fix: four cases, each compiled, checked and measured.

Teaches gcc's loop vectoriser (``gcc/tree-vect-loop.cc``, ``tree-vect-data-refs.cc``) from the
outside: the remark it prints, the assembly it emits, the time it costs. The same four
obstacles are why Inductor's C++ backend (``torch/_inductor/codegen/cpp.py``) does not leave
vectorisation to the compiler but writes ``at::vec::Vectorized`` code itself:

==================  ===========================================  ===============================
case                obstacle                                     fix
==================  ===========================================  ===============================
aliasing            ``out`` might point into ``x``               ``restrict``
float reduction     ``+`` on floats is not associative           ``#pragma omp simd reduction``
non-unit stride     inner loop walks a column (stride n)         interchange / change the layout
call in the loop    ``expf`` may set ``errno``                   ``-ffast-math`` (libmvec)
==================  ===========================================  ===============================

Rule: every case keeps the function name ``kernel`` and one signature for bad and fixed code,
so the harness calls both the same way and checks the fix against the original's result.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import platform
import re
import shutil
import subprocess

import numpy as np

from course_lib.cpu.build import CompiledC, compile_c
from course_lib.cpu.timing import median_time, ptr

FLAGS = "-O3 -march=native"


@dataclasses.dataclass(frozen=True)
class Case:
    """One vectorisation obstacle: the loop as written, the fixed loop, and how to run both."""

    name: str
    obstacle: str
    fix: str
    bad: str
    good: str
    kind: str  # how to call ``kernel``: a key of _RUNNERS
    bad_flags: str = FLAGS
    good_flags: str = FLAGS


CASES = {
    "aliasing": Case(
        "aliasing",
        "out[0] may alias x[i], so gcc must reload and store out[0] on every iteration",
        "declare the pointers restrict: the programmer promises they do not overlap",
        """void kernel(int *out, const int *x, int n)
{
    for (int i = 0; i < n; i++)
        out[0] += x[i];
}
""",
        """void kernel(int *restrict out, const int *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        out[0] += x[i];
}
""",
        "sum_int",
    ),
    "float reduction": Case(
        "float reduction",
        "(a+b)+c != a+(b+c) in floating point, so gcc keeps the additions in order: its 'vectorised' "
        "loop is a chain of scalar vaddss",
        "#pragma omp simd reduction(+:s) (compile with -fopenmp-simd) allows reassociation for this loop only",
        """void kernel(float *out, const float *x, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += x[i];
    out[0] = s;
}
""",
        """void kernel(float *out, const float *x, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+:s)
    for (int i = 0; i < n; i++)
        s += x[i];
    out[0] = s;
}
""",
        "sum_float",
        good_flags=FLAGS + " -fopenmp-simd",
    ),
    "non-unit stride": Case(
        "non-unit stride",
        "the inner loop reads a[i*n + j]: one float per row, n floats apart, no vector load fits",
        "interchange the loops (or store the matrix transposed) so the inner loop reads contiguous floats",
        """void kernel(float *restrict out, const float *restrict a, int n)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            out[j] += a[i * n + j] * a[i * n + j];
}
""",
        """void kernel(float *restrict out, const float *restrict a, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            out[j] += a[i * n + j] * a[i * n + j];
}
""",
        "colsq",
    ),
    "call in the loop": Case(
        "call in the loop",
        "expf() may write errno, a side effect gcc cannot vectorise, so each element calls libm",
        "-ffast-math lets gcc call glibc's vector expf (_ZGVdN8v_expf from libmvec), 8 lanes per call; "
        "it also relaxes every other float rule in the file, which is why Inductor calls SLEEF itself",
        """#include <math.h>
void kernel(float *restrict y, const float *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = expf(x[i]);
}
""",
        """#include <math.h>
void kernel(float *restrict y, const float *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = expf(x[i]);
}
""",
        "map",
        good_flags=FLAGS + " -ffast-math",
    ),
}


# ----------------------------------------------------------------------------- running


def _inputs(kind: str, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    if kind == "sum_int":
        return np.zeros(1, np.int32), rng.integers(-100, 100, n, dtype=np.int32)
    if kind == "sum_float":
        return np.zeros(1, np.float32), rng.standard_normal(n, dtype=np.float32)
    if kind == "colsq":
        side = int(np.sqrt(n))
        return np.zeros(side, np.float32), rng.standard_normal((side, side), dtype=np.float32)
    return np.zeros(n, np.float32), rng.uniform(-4, 4, n).astype(np.float32)


def _call(lib: CompiledC, kind: str, out, x):
    f = lib.fn("kernel", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int])
    size = x.shape[0]  # rows for colsq, elements otherwise

    def run():
        if kind != "map":
            out[:] = 0
        f(ptr(out), ptr(x), size)

    return run


def reference(kind: str, x) -> np.ndarray:
    """What ``kernel`` must compute, from numpy (the oracle)."""
    if kind in ("sum_int", "sum_float"):
        return np.array([x.sum(dtype=np.float64)])
    if kind == "colsq":
        return (x.astype(np.float64) ** 2).sum(axis=0)
    return np.exp(x.astype(np.float64))


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """Report lines, packed-SIMD counts, correctness and (unchecked) timings for one case."""

    name: str
    bad_vectorised: bool
    good_vectorised: bool
    bad_packed: int
    good_packed: int
    correct: bool
    bad_seconds: float
    good_seconds: float

    @property
    def speedup(self) -> float:
        return self.bad_seconds / self.good_seconds


def run_case(case: Case, n: int = 1 << 16, repeat: int = 5) -> CaseResult:
    """Compile both versions, check the fix against numpy, time both (median of ``repeat``)."""
    bad, good = compile_c(case.bad, case.bad_flags), compile_c(case.good, case.good_flags)
    out, x = _inputs(case.kind, n)
    expect = reference(case.kind, x)
    times, correct = [], True
    for lib in (bad, good):
        run = _call(lib, case.kind, out, x)
        run()
        correct &= bool(np.allclose(out, expect, rtol=1e-4, atol=1e-3 * max(1.0, np.sqrt(n) / 64)))
        times.append(median_time(run, repeat=repeat).median)
    return CaseResult(
        case.name,
        bool(vectorised_main_loop(bad)),
        bool(vectorised_main_loop(good)),
        bad.asm.counts("kernel")["packed"],
        good.asm.counts("kernel")["packed"],
        correct,
        times[0],
        times[1],
    )


def vectorised_main_loop(lib: CompiledC) -> bool:
    """True when the innermost loop gcc reports on was vectorised *and* the asm has packed math.

    The float-reduction case shows why both are needed: gcc reports the in-order reduction as
    "vectorized" but the loop body is a chain of scalar ``vaddss``.
    """
    innermost = lib.report[-1] if lib.report else None
    body = lib.asm.functions["kernel"]
    packed_math = any(i.simd == "packed" and _is_arith(i.mnemonic) for i in body)
    packed_math |= any(i.mnemonic == "call" and "_ZGV" in i.operands for i in body)  # libmvec
    return bool(innermost and innermost.vectorised and packed_math)


def _is_arith(mnemonic: str) -> bool:
    m = mnemonic.lstrip("v")
    return m.startswith(("add", "mul", "fmadd", "sub", "div", "padd", "pmul", "fnmadd"))


def table_rows(results: list[CaseResult]) -> list[list[str]]:
    """Rows for ``viz.table``: vectorised before/after, correct, times and speed-up."""
    yes = {True: "yes", False: "no"}
    return [[r.name, yes[r.bad_vectorised], yes[r.good_vectorised], yes[r.correct],
             f"{r.bad_seconds * 1e6:.0f}", f"{r.good_seconds * 1e6:.0f}", f"{r.speedup:.1f}x"]
            for r in results]  # fmt: skip


TABLE_HEADERS = [
    "case",
    "vectorised as written",
    "vectorised fixed",
    "fix correct",
    "us before",
    "us after",
    "speed-up",
]


# ----------------------------------------------------------------------------- a second vectoriser: clang's
# LLVM's LoopVectorize (llvm/lib/Transforms/Vectorize/LoopVectorize.cpp) reports through
# -Rpass=loop-vectorize (done), -Rpass-missed (not done) and -Rpass-analysis (why not).
CLANG_REMARK = re.compile(
    r"^<stdin>:(?P<line>\d+):(?P<col>\d+): remark: (?P<msg>.*?) \[-R(?P<kind>pass(?:-missed|-analysis)?)="
)


@dataclasses.dataclass(frozen=True)
class ClangVerdict:
    """What clang's loop vectoriser said about one source: vectorised or not, and its words."""

    vectorised: bool
    messages: tuple[str, ...]

    def __str__(self) -> str:
        head = "vectorised" if self.vectorised else "NOT vectorised"
        why = [m for m in self.messages if m not in ("loop not vectorized",)]
        return head + (": " + "; ".join(why) if why else "")


def clang_path() -> str | None:
    """Debian's clang-19 (beside llvm-19), or any ``clang`` on PATH; None when neither is installed."""
    return shutil.which("clang-19") or shutil.which("clang")


def clang_vectorise(source: str, flags: str = FLAGS) -> ClangVerdict | None:
    """Compile ``source`` with clang and collect its loop-vectoriser remarks (None without clang)."""
    clang = clang_path()
    if clang is None:
        return None
    cmd = [clang, *flags.split(), "-c", "-o", os.devnull, "-x", "c", "-", "-Wno-invalid-feature-combination",
           "-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize", "-Rpass-analysis=loop-vectorize"]  # fmt: skip
    res = subprocess.run(cmd, input=source, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return ClangVerdict(
            False, (f"clang failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ''}",)
        )
    found = [m for m in map(CLANG_REMARK.match, res.stderr.splitlines()) if m]
    done = any(m["kind"] == "pass" for m in found)
    return ClangVerdict(done, tuple(dict.fromkeys(m["msg"] for m in found)))


def compare_vectorisers(cases=None) -> list[list[str]] | None:
    """One row per case: gcc's and clang's verdict on the loop as written and on the fix."""
    if clang_path() is None:
        return None
    rows = []
    for case in (cases or CASES).values():
        for label, src, flags in (("as written", case.bad, case.bad_flags), ("fixed", case.good, case.good_flags)):
            gcc = compile_c(src, flags)
            gcc_text = (
                "; ".join(
                    f"line {r.line}: " + ("vectorised" if r.vectorised else f"NOT vectorised ({r.reason})")
                    for r in gcc.report
                )
                or "(no loop reported)"
            )
            rows.append([case.name, label, gcc_text, str(clang_vectorise(src, flags))[:160]])
    return rows


# ----------------------------------------------------------------------------- wider vectors: AVX-512 and SVE
SAXPY = """void kernel(float *restrict y, const float *restrict x, float a, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}
"""


def vector_bits_used(source: str, flags: str) -> dict[int, int]:
    """Packed SIMD instructions in gcc's code for ``source``, counted by register width in bits."""
    lib = compile_c(source, flags)
    counts: dict[int, int] = {}
    for ins in lib.asm.functions.get("kernel", []):
        if ins.simd == "packed":
            counts[ins.bits] = counts.get(ins.bits, 0) + 1
    return dict(sorted(counts.items()))


def sve_assembly(source: str = SAXPY, compiler: str = "aarch64-linux-gnu-gcc") -> str | None:
    """The loop body gcc emits for Arm's scalable vectors (``-march=armv8-a+sve``), or None when
    Debian's cross compiler (package ``gcc-aarch64-linux-gnu``) is not installed."""
    if shutil.which(compiler) is None:
        return None
    res = subprocess.run([compiler, "-O3", "-march=armv8-a+sve", "-S", "-o", "-", "-x", "c", "-"], input=source,
                         capture_output=True, text=True, check=False)  # fmt: skip
    if res.returncode != 0:
        return f"{compiler} failed: {res.stderr.strip()[-300:]}"
    body = [ln for ln in res.stdout.splitlines() if ln.startswith("\t") and not ln.startswith("\t.")]
    return "\n".join(body)


# ----------------------------------------------------------------------------- predict gcc's verdicts
# Nine small loops, one function each: 06a Exercise 2 asks which of them gcc -O3 vectorises.
# Compiled for one fixed target on x86 (PREDICT_FLAGS), not -march=native: the verdicts must not change
# with the machine. gcc 12 at -march=native on a Cooper Lake tuned generically does not vectorise the
# runtime-stride loop ("no vectype for stmt"); for Skylake-AVX512 it builds the vector from scalar loads.
# Compiling for an instruction set the machine lacks is fine: the exercise reads reports, runs nothing.
PREDICT_FLAGS = "-O3 -march=skylake-avx512" if platform.machine() in ("x86_64", "AMD64") else FLAGS
PREDICT_LOOPS = {
    "copy with restrict": "void f(float *restrict y, const float *restrict x, int n)\n{\n    for (int i = 0; i < n; i++)\n        y[i] = 2.0f * x[i];\n}\n",
    "copy without restrict": "void f(float *y, const float *x, int n)\n{\n    for (int i = 0; i < n; i++)\n        y[i] = 2.0f * x[i];\n}\n",
    "int sum": "int f(const int *x, int n)\n{\n    int s = 0;\n    for (int i = 0; i < n; i++)\n        s += x[i];\n    return s;\n}\n",
    "runtime stride": "void f(float *restrict y, const float *restrict x, int n, int s)\n{\n    for (int i = 0; i < n; i++)\n        y[i] = x[i * s];\n}\n",
    "expf call": "#include <math.h>\nvoid f(float *restrict y, const float *restrict x, int n)\n{\n    for (int i = 0; i < n; i++)\n        y[i] = expf(x[i]);\n}\n",
    "loop-carried dependence": "void f(float *restrict y, int n)\n{\n    for (int i = 1; i < n; i++)\n        y[i] = y[i - 1] * 0.5f + 1.0f;\n}\n",
    "select in the body": "void f(float *restrict y, const float *restrict x, int n)\n{\n    for (int i = 0; i < n; i++)\n        y[i] = x[i] > 0.0f ? x[i] : 0.0f;\n}\n",
    "early exit": "int f(const int *x, int n)\n{\n    for (int i = 0; i < n; i++)\n        if (x[i] == 42)\n            return i;\n    return -1;\n}\n",
    "accumulate into out[0]": "void f(int *out, const int *x, int n)\n{\n    for (int i = 0; i < n; i++)\n        out[0] += x[i];\n}\n",
}  # fmt: skip


def gcc_verdicts(loops: dict[str, str] | None = None, flags: str = PREDICT_FLAGS) -> dict[str, tuple[bool, str]]:
    """name -> (vectorised?, gcc's report) for each loop, compiled now by this machine's gcc."""
    out = {}
    for name, src in (loops or PREDICT_LOOPS).items():
        lib = compile_c(src, flags)
        out[name] = (bool(lib.vectorised_lines), lib.report_text())
    return out


def _verdict_colour(text: str) -> tuple[str, str]:
    """(colour, short label) for one compiler's remark text in :func:`compare_vectorisers`' rows."""
    done = text.count("vectorised") - text.count("NOT vectorised")
    missed = text.count("NOT vectorised")
    width = re.search(r"width:? (\d+)", text)
    if done and not missed:
        return "#6aa84f", "vectorised" + (f", width {width[1]}" if width else "")
    if done:
        return "#f1c232", f"{done} loop(s) yes, {missed} no"
    return "#e06666", "not vectorised"


def plot_vectorisers(rows: list[list[str]]):
    """A verdict grid from :func:`compare_vectorisers`: one row per loop, gcc and clang side by side,
    green where the compiler's remark says vectorised, red where it refused, yellow where only some
    loops were. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 0.8))
    for r, row in enumerate(rows):
        for c, text in enumerate(row[2:4]):
            colour, label = _verdict_colour(text)
            ax.add_patch(Rectangle((c, -r), 0.96, 0.9, color=colour))
            ax.text(c + 0.48, -r + 0.45, label, ha="center", va="center", fontsize=9)
    ax.set_xlim(0, 2)
    ax.set_ylim(-len(rows) + 1, 1)
    ax.set_yticks([-r + 0.45 for r in range(len(rows))], [f"{row[0]} ({row[1]})" for row in rows])
    ax.set_xticks([0.48, 1.48], ["gcc -fopt-info-vec", "clang -Rpass=loop-vectorize"])
    ax.xaxis.tick_top()
    for side in ax.spines.values():
        side.set_visible(False)
    ax.tick_params(length=0)
    fig.tight_layout()
    return fig
