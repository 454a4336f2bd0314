"""Inductor's C++ loops read as data: the vector loop and its masked tail, and the OpenMP depth.

Teaches ``torch/_inductor/codegen/cpp.py``:

* ``CppKernelProxy`` / ``CppVecKernel``: the innermost loop steps by the vector's lane count; one
  ``if(C10_LIKELY(x < full_end))`` branch runs whole vectors, and the remainder (``stop % lanes``
  elements) runs in the *same* loop in a ``C10_UNLIKELY`` branch with masked ``loadu(ptr, count)``
  and ``store(ptr, count)``, so there is no scalar tail loop;
* ``CppKernel.decide_parallel_depth``: how many outer loops get ``#pragma omp for`` (zero when a
  thread's share would be under ``config.cpp.min_chunk_size`` = 512 elements);
* the wrapper's ``call`` (``torch/_inductor/codegen/cpp_wrapper_cpu.py`` / ``wrapper.py``): which
  work became Inductor's own C++ kernels and which went to ``extern_kernels`` or ATen fallbacks
  (``torch/_inductor/lowering.py``: ``make_fallback``).

Pipeline position: Inductor's generated C++ (``inductor_view.CppKernel``) -> typed records
(:class:`VecLoop`, a parallel depth). The course side is a reader, not a code generator: it parses
the real output and restates the real rule, so both can be checked against each other on random
graphs (:func:`random_graph`).

Simplified: static shapes only (``dynamic=False``, so every bound is a literal), float32 inputs,
graphs of one pointwise chain with an optional last-dimension reduction.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

# Inductor's literal integer: static_cast<int64_t>(3728L) (the L is sometimes missing: "(16)").
_INT = r"static_cast<int64_t>\((\d+)L?\)"
_FOR = re.compile(rf"for\s*\(\s*int64_t\s+(\w+)\s*=\s*{_INT}\s*;\s*\1\s*<\s*{_INT}\s*;\s*\1\s*\+=\s*{_INT}\s*\)")
_FULL = r"C10_LIKELY\(\s*{v}\s*>=\s*" + _INT + r"\s*&&\s*{v}\s*<\s*" + _INT + r"\s*\)"
_OMP_FOR = re.compile(r"#pragma omp for(?:\s+collapse\((\d+)\))?")

# config.cpp.min_chunk_size in torch 2.13 (TORCHINDUCTOR_CPP_MIN_CHUNK_SIZE overrides it).
MIN_CHUNK = 512


@dataclasses.dataclass(frozen=True)
class VecLoop:
    """One vectorised loop: ``for (var = 0; var < stop; var += lanes)``.

    ``full_end`` is where whole vectors stop (``stop - stop % lanes``); ``tail`` is how many
    elements the masked branch handles (0 when ``stop`` is a multiple of ``lanes``).
    """

    var: str
    stop: int
    lanes: int
    full_end: int
    tail: int

    def as_tuple(self) -> tuple[str, int, int, int]:
        """``(var, lanes, full_end, tail)``: the answer format of 06c's exercise."""
        return (self.var, self.lanes, self.full_end, self.tail)


def vector_loops(cpp: str) -> list[VecLoop]:
    """Every loop of ``cpp`` that steps by more than 1, with its full-vector bound and tail size.

    Reads the loop header, then the first ``C10_LIKELY(var >= 0 && var < full_end)`` after it.
    """
    loops = []
    for m in _FOR.finditer(cpp):
        var, start, stop, step = m[1], int(m[2]), int(m[3]), int(m[4])
        if step <= 1:
            continue
        if start != 0:
            raise ValueError(f"loop {var} starts at {start}; only loops from 0 are read here")
        full = re.compile(_FULL.format(v=re.escape(var))).search(cpp, m.end())
        full_end = int(full[2]) if full else stop
        loops.append(VecLoop(var, stop, step, full_end, stop - full_end))
    return loops


def expected_split(stop: int, lanes: int) -> tuple[int, int]:
    """(full_end, tail) from arithmetic alone: what :func:`vector_loops` must find in the code."""
    return stop - stop % lanes, stop % lanes


def omp_depth(cpp: str) -> int:
    """Outer loops shared by the ``#pragma omp for`` of a kernel (1, or n for ``collapse(n)``); 0 if serial."""
    m = _OMP_FOR.search(cpp)
    return 0 if m is None else int(m[1] or 1)


def parallel_depth(ranges: list[int], threads: int, min_chunk: int = MIN_CHUNK) -> int:
    """How many outer loops Inductor parallelises (``CppKernel.decide_parallel_depth``).

    Walk the loops from the outside. Stop when the iterations taken so far already give every
    thread work (``par == threads``) or two rounds of it (``par >= 2 * threads``), or when one
    thread's share of the remaining work, ``seq // threads``, is under ``min_chunk`` elements
    (waking threads would cost more than the loop). ``seq`` starts at the product of all ranges.
    """
    seq, par, depth = float(np.prod(ranges)), 1, 0
    for size in ranges:
        if par >= 2 * threads or par == threads:
            break
        if seq // threads < min_chunk:
            break
        depth += 1
        par *= size
        seq /= size
    return depth


# ----------------------------------------------------------------------------- random graphs
UNARY = {"exp": "torch.exp", "tanh": "torch.tanh", "sigmoid": "torch.sigmoid", "relu": "torch.relu",
         "abs": "torch.abs", "neg": "torch.neg", "sin": "torch.sin"}  # fmt: skip
BINARY = {"+": "add", "*": "mul", "-": "sub"}
REDUCE = {"sum": "sum", "amax": "amax", "amin": "amin"}


@dataclasses.dataclass(frozen=True)
class GraphCase:
    """A random graph: its expression, input shape, the loop ranges of its kernel, and the function."""

    expr: str
    shape: tuple[int, int]
    reduction: str | None

    @property
    def ranges(self) -> list[int]:
        """The kernel's loop sizes: pointwise graphs are flattened to one loop; a last-dimension
        reduction keeps (rows, cols)."""
        rows, cols = self.shape
        return [rows, cols] if self.reduction else [rows * cols]

    @property
    def fn(self):
        import torch

        return eval(f"lambda x, y: {self.expr}", {"torch": torch})  # noqa: S307 - built from the tables above

    def inputs(self, seed: int = 0):
        import torch

        g = torch.Generator().manual_seed(seed)
        return torch.randn(self.shape, generator=g), torch.randn(self.shape, generator=g)

    def __str__(self) -> str:
        return f"{self.expr}  on {self.shape[0]}x{self.shape[1]}"


def random_graph(seed: int) -> GraphCase:
    """A random pointwise chain on ``x`` and ``y`` of a ragged 2-D shape, half the time reduced over the last dim."""
    rng = np.random.default_rng(seed)
    u1, u2 = rng.choice(sorted(UNARY), 2)
    op = rng.choice(sorted(BINARY))
    expr = f"{UNARY[u2]}({UNARY[u1]}(x) {op} y)"
    reduction = str(rng.choice(sorted(REDUCE))) if rng.random() < 0.5 else None
    rows, cols = int(rng.integers(3, 40)), int(rng.integers(20, 400))
    if reduction:
        expr = f"torch.{REDUCE[reduction]}({expr}, -1)"
    return GraphCase(expr, (rows, cols), reduction)


# Kernels recorded for the notebook's seeds (torch 2.13.0+cpu, AVX-512 x86-64, 2 OpenMP threads),
# shown when torch.compile cannot run here. data/cpu/README.md says how they were made.
RECORDED_DIR = "cpu/inductor_graphs"
RECORDED_THREADS = 2


@dataclasses.dataclass(frozen=True)
class CompiledGraph:
    """A random graph, the C++ kernel Inductor wrote for it, and the OpenMP team size it was
    written for (``decide_parallel_depth`` depends on it). ``live`` is False for a recording."""

    case: GraphCase
    cpp: str
    threads: int = RECORDED_THREADS
    live: bool = False


def compile_graph(case: GraphCase) -> CompiledGraph:
    """Run ``case`` through torch.compile (Inductor, static shapes) and keep its one C++ kernel."""
    import torch

    from course_lib import compat
    from course_lib.cpu import inductor_view

    _, codes = compat.inductor_run_and_get_code(case.fn, *case.inputs(), dynamic=False)
    kernels = inductor_view.parse_output_code("\n".join(codes)).kernels
    if len(kernels) != 1:
        raise RuntimeError(f"expected one C++ kernel for {case}, Inductor wrote {len(kernels)}")
    return CompiledGraph(case, kernels[0].source, torch.get_num_threads(), live=True)


def recorded_graph(seed: int) -> CompiledGraph | None:
    """The recorded kernel of :func:`random_graph` ``(seed)``, or None when none was recorded."""
    from course_lib import env

    path = env.data_dir() / RECORDED_DIR / f"seed_{seed}.cpp"
    return CompiledGraph(random_graph(seed), path.read_text()) if path.exists() else None


def compile_random_graphs(seeds, progress: bool = True) -> list[CompiledGraph]:
    """:func:`compile_graph` on :func:`random_graph` of each seed (about 2 s each once Inductor is warm).

    When torch.compile fails here (no C++ compiler, say) and every seed has a recording, the
    recordings are returned instead, with a sentence saying so; otherwise the error is raised.
    """
    from tqdm.auto import tqdm

    seeds = list(seeds)
    try:
        return [compile_graph(random_graph(s)) for s in tqdm(seeds, desc="Inductor", disable=not progress)]
    except Exception as exc:  # noqa: BLE001 - a broken toolchain: fall back to the recordings
        recorded = [recorded_graph(s) for s in seeds]
        if any(r is None for r in recorded):
            raise
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
        print(f"torch.compile failed here ({reason}); showing kernels recorded in data/{RECORDED_DIR} "
              f"with {RECORDED_THREADS} threads instead.")  # fmt: skip
        return recorded


# ----------------------------------------------------------------------------- the picture
def static_chunks(iterations: int, threads: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each thread under ``#pragma omp for`` with no schedule clause (libgomp's
    static split: the first ``iterations % threads`` threads get one iteration more)."""
    q, r = divmod(iterations, threads)
    out, start = [], 0
    for t in range(threads):
        end = start + q + (1 if t < r else 0)
        out.append((start, end))
        start = end
    return out


def _parallel_loop(cpp: str) -> tuple[str, int, int] | None:
    """(var, stop, step) of the loop right under the first ``#pragma omp for``, or None (serial)."""
    m = _OMP_FOR.search(cpp)
    if m is None:
        return None
    loop = _FOR.search(cpp, m.end())
    return (loop[1], int(loop[3]), int(loop[4])) if loop else None


def plot_kernel_structure(cpp: str, threads: int, title: str = "", zoom: int = 3):
    """Inductor's C++ kernel as a picture, from its own source.

    Top: the loop under ``#pragma omp for``, its iterations split between ``threads`` threads.
    Bottom: the last ``zoom`` iterations of the vector loop, lane by lane: whole vectors, then
    the masked tail (lanes past the end switched off). Returns the matplotlib figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    loops = vector_loops(cpp)
    if not loops:
        raise ValueError("this kernel has no vectorised loop (no for loop stepping by more than 1)")
    vec, par = loops[0], _parallel_loop(cpp)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 3.6), height_ratios=[1, 1.4])
    colours = plt.get_cmap("tab10").colors
    if par is None:
        top.barh(0, 1, left=0, color="#bbbbbb")
        top.text(0.5, 0, "serial: no #pragma omp for (too little work per thread)", ha="center", va="center")
        top.set_xlim(0, 1)
    else:
        var, stop, step = par
        iters = -(-stop // step)
        for t, (a, b) in enumerate(static_chunks(iters, threads)):
            top.barh(0, b - a, left=a, color=colours[t % 10], edgecolor="white")
            top.text((a + b) / 2, 0, f"thread {t}: {var} iterations {a}..{b - 1}", ha="center", va="center",
                     color="white", fontsize=9)  # fmt: skip
        top.set_xlim(0, iters)
        top.set_xlabel(f"iterations of the loop under #pragma omp for ({var} < {stop}, step {step})")
    top.set_yticks([])
    top.set_title(title or "Inductor's kernel: threads over the outer loop, vectors and a masked tail inside")
    iters = -(-vec.stop // vec.lanes)
    first = max(0, iters - zoom)
    for row, it in enumerate(range(first, iters)):
        start = it * vec.lanes
        for lane in range(vec.lanes):
            active = start + lane < vec.stop
            full = start + vec.lanes <= vec.full_end
            colour = "#4c72b0" if full else ("#dd8452" if active else "#e0e0e0")
            bottom.add_patch(Rectangle((lane, -row), 0.92, 0.8, color=colour))
        what = f"{vec.var} = {start}: " + (f"loadu(ptr, {vec.lanes})" if start + vec.lanes <= vec.full_end
                                           else f"loadu(ptr, {vec.tail}) masked")  # fmt: skip
        bottom.text(vec.lanes + 0.3, -row + 0.4, what, va="center", fontsize=9)
    bottom.set_xlim(0, vec.lanes * 1.5)
    bottom.set_ylim(-(iters - first) + 0.8, 1)
    bottom.set_yticks([])
    bottom.set_xticks(range(0, vec.lanes, max(1, vec.lanes // 8)))
    inner = f", inside every {par[0]} iteration" if par is not None and par[0] != vec.var else ""
    bottom.set_xlabel(f"lane of Vectorized<float> ({vec.lanes} floats); last {iters - first} of {iters} iterations "
                      f"of the vector loop {vec.var} < {vec.stop}{inner}")  # fmt: skip
    bottom.legend(handles=[Patch(color="#4c72b0", label="whole vector (C10_LIKELY branch)"),
                           Patch(color="#dd8452", label="tail lane (C10_UNLIKELY branch)"),
                           Patch(color="#e0e0e0", label="masked off")], loc="upper left", bbox_to_anchor=(1.0, 1.0),
                  fontsize=8)  # fmt: skip
    for side in ("top", "right", "left"):
        bottom.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- what the wrapper launches
_LAUNCH = re.compile(r"^\s*(?:\w+\s*=\s*)?(cpp_fused_\w+|extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?)\(", re.M)


def launches(wrapper: str) -> list[str]:
    """What the ``call`` function of Inductor's Python wrapper runs, in order: its own C++ kernels
    (``cpp_fused_*``) and the operations it hands to ATen or oneDNN (``extern_kernels.addmm``,
    ``torch.ops.aten.cumsum.default``)."""
    start = wrapper.find("def call(")
    if start < 0:
        raise ValueError("no 'def call(' in this wrapper: is it Inductor's output code?")
    end = wrapper.find("\n\n\n", start)
    return _LAUNCH.findall(wrapper[start : end if end > 0 else None])


def launch_counts(wrapper: str) -> tuple[int, int]:
    """(C++ kernels Inductor wrote, operations it called instead) for one compiled graph."""
    found = launches(wrapper)
    own = sum(name.startswith("cpp_fused_") for name in found)
    return own, len(found) - own


def compile_launch_counts(fn, *args) -> tuple[int, int]:
    """:func:`launch_counts` of ``fn`` compiled now by Inductor (static shapes)."""
    from course_lib import compat

    _, codes = compat.inductor_run_and_get_code(fn, *args, dynamic=False)
    return launch_counts("\n".join(codes))
