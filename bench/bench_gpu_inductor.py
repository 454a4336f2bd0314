"""Kernel time of eager, Inductor and course_lib's Triton backend on one GPU, measured honestly.

What is measured, per workload, at 16384 x 4096 float32 (256 MiB a tensor, about four times the
H200's L2 for every input alone):

* time: ``triton.testing.do_bench`` (CUDA events around each launch, L2 flushed before each rep,
  median over ~100 ms of reps). At this size a kernel runs for hundreds of microseconds, so the
  Python call of a compiled function (tens of microseconds) is a small part of it; the old
  recording at 4096 x 1024 timed that call with ``perf_counter`` and measured mostly Python.
* bytes moved: the compulsory traffic, every input read once and every output written once.
  A kernel can only move more than this (a second read of a row, a spilled intermediate).
* fraction of bandwidth: (bytes / time) over the bandwidth of ``dst.copy_(src)`` on the same
  card in the same process (bytes read plus bytes written), the ceiling for a memory-bound op.
* cold compile: seconds for the first call of each compiled function (Dynamo, the backend,
  Triton's compile; caches were empty only if the machine was fresh); and, with every cache
  emptied, the first forward of a 12-layer GPT-2: course_lib compiling each kernel at its first
  launch, course_lib's process pool with its kernel cache, and Inductor (``cold_compile``).
* a tiling sweep (``tiling_sweep``): the long-row workloads and cross entropy again with other
  values of course_lib's tiling constants (persistent limit and warps, looped RBLOCK and warps,
  eviction hints, split count), so the chosen defaults are checked against their neighbours in the
  same run, with ptxas's registers a thread and spill bytes of every kernel.
* the generated code: Inductor's output code (its ``triton_poi_`` / ``triton_per_`` / ``triton_red_``
  kernels and their ``@triton_heuristics`` decorators) and course_lib's Triton, for 04c to show
  side by side.

``main(results_dir)`` is the ``make bench`` entry (it says so and stops without CUDA);
``device/record_inductor.py`` calls ``run()`` on the H200 and stores the result in data/inductor/. ``--smoke`` runs the
same code path on tiny tensors on the CPU (Triton interpreter; no timing), to test the script.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

ROWS, COLS = 16384, 4096
SMOKE_SHAPE = (16, 32)  # the CPU smoke run: rows of 256 (long) and 512 (xlong) in the interpreter


def workloads(torch, device: str, rows: int, cols: int) -> dict:
    """name -> (fn, args, bytes moved). Inputs are random: zeros can hide wrong indexing."""
    import torch.nn.functional as F

    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)

    x, y = randn(rows, cols), randn(rows, cols)
    w, b = randn(cols), randn(cols)
    wl, bl = randn(cols * 8), randn(cols * 8)
    wx, bx = randn(cols * 16), randn(cols * 16)
    t = torch.randint(0, cols, (rows,), generator=g).to(device)
    big, vec = rows * cols * 4, cols * 4
    return {
        "gelu_bias": (lambda x, b: F.gelu(x + b), (x, b), 2 * big + vec),
        "silu_gate": (lambda x, y: F.silu(x) * y, (x, y), 3 * big),
        "tanh_chain": (lambda x: torch.tanh(torch.tanh(x) * 2.0 + 1.0), (x,), 2 * big),
        "softmax": (lambda x: torch.softmax(x, -1), (x,), 2 * big),
        "layernorm": (lambda x, w, b: F.layer_norm(x, (cols,), w, b), (x, w, b), 2 * big + 2 * vec),
        "rmsnorm": (
            lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
            (x, w),
            2 * big + vec,
        ),
        "cross_entropy": (lambda x, t: F.cross_entropy(x, t), (x, t), big + rows * 8 + 4),
        "add_layernorm": (
            lambda x, y, w, b: F.layer_norm(x + y, (cols,), w, b),
            (x, y, w, b),
            3 * big + 2 * vec,
        ),
        # rows 8x longer (same bytes), past PERSISTENT_RNUMEL: a looped row, Welford for mean and variance
        "layernorm_long": (
            lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b),
            (x.reshape(rows // 8, cols * 8), wl, bl),
            2 * big + 16 * vec,
        ),
        # the same long rows through softmax: online softmax (max and sum of exp in one pass)
        "softmax_long": (lambda x: torch.softmax(x, -1), (x.reshape(rows // 8, cols * 8),), 2 * big),
        # rows 16x longer (same bytes), past PERSISTENT_RNUMEL: the looped row (Welford, online softmax)
        "layernorm_xlong": (
            lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b),
            (x.reshape(rows // 16, cols * 16), wx, bx),
            2 * big + 32 * vec,
        ),
        "softmax_xlong": (lambda x: torch.softmax(x, -1), (x.reshape(rows // 16, cols * 16),), 2 * big),
        # one output for the whole tensor: a split reduction (partials from many programs)
        "sum_all": (lambda x: x.sum(), (x,), big + 4),
    }


def sweep_workloads(torch, device: str, rows: int, cols: int) -> dict:
    """Workloads timed in the tiling sweep only: rows of 16384 (4x longer, same bytes), a persistent
    tile of 16384 that the warps rule gives 32 warps (16 elements a thread)."""
    import torch.nn.functional as F

    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(rows // 4, cols * 4, generator=g).to(device)
    w, b = torch.randn(cols * 4, generator=g).to(device), torch.randn(cols * 4, generator=g).to(device)
    big, vec = rows * cols * 4, cols * 4
    return {
        "layernorm_16k": (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), (x, w, b), 2 * big + 8 * vec),
        "softmax_16k": (lambda x: torch.softmax(x, -1), (x,), 2 * big),
    }


def kernel_kinds(code: str) -> dict:
    """Inductor's kernel names by kind (pointwise / persistent reduction / looped reduction) and
    the ``@triton_heuristics`` decorator each kernel carries (kernels found by course_lib.compat's
    one parser of Inductor's output code)."""
    from course_lib import compat

    kernels = [(name, src) for name, kind, src in compat.inductor_code_kernels(code) if kind == "triton"]
    names = [name for name, _ in kernels]
    return {
        "pointwise": sum(n.startswith("triton_poi_") for n in names),
        "persistent_reduction": sum(n.startswith("triton_per_") for n in names),
        "looped_reduction": sum(n.startswith("triton_red_") for n in names),
        "heuristics": sorted({h for _, src in kernels for h in re.findall(r"@triton_heuristics\.(\w+)\(", src)}),
    }


ROW_LENGTHS = (256, 1024, 1025, 2048, 4096, 16384, 32768, 65536)


def kinds_by_row_length(torch, lengths=ROW_LENGTHS) -> dict:
    """The kernel kind Inductor picks for a softmax over rows of each length (64 rows; no timing)."""
    from course_lib import compat

    kinds = {}
    for n in lengths:
        x = torch.randn(64, n, device="cuda")
        _, codes = compat.inductor_output_code(lambda x: torch.softmax(x, -1), x)
        k = kernel_kinds("\n".join(codes))
        kinds[n] = "persistent" if k["persistent_reduction"] else "looped" if k["looped_reduction"] else "other"
    return kinds


def _copy_bandwidth(torch, do_bench, rows: int, cols: int) -> float:
    """Bytes per second of a device-to-device copy of one workload-sized tensor (read + write)."""
    src = torch.randn(rows, cols, device="cuda")
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * src.numel() * src.element_size() / (ms * 1e-3)


def _graph_ms(torch, f, args) -> float | str:
    """Kernel time alone: the call captured in a CUDA graph, replayed many times, median per call
    (``triton.testing.do_bench_cudagraph``). ``do_bench`` times from an event recorded before the call
    to one after it, so when a call's GPU work is shorter than its host work (Dynamo's guards, the
    wrapper, a launch a kernel) the GPU waits for the host and that wait is in the time; a graph replay
    has no host work between kernels. Returns the error's first line when the call cannot be captured."""
    from triton.testing import do_bench_cudagraph

    try:  # (it captures and replays on a side stream of its own)
        return float(do_bench_cudagraph(lambda: f(*args), rep=100, return_mode="median"))
    except Exception as exc:  # record why, keep measuring
        return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _first_call(fn, args, sync) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    sync()
    return out, time.perf_counter() - t0


def _close(a, b, torch) -> bool:
    return bool(torch.allclose(a.float(), b.float(), rtol=1e-3, atol=1e-4))


def run(smoke: bool = False) -> dict:
    """Measure every workload (see the module docstring); grad mode is off inside, restored after."""
    import torch

    with torch.no_grad():
        return _measure(smoke)


def _measure(smoke: bool) -> dict:
    import torch

    import course_lib  # noqa: F401  (sets Triton's mode before torch/triton load)
    import course_lib.inductor as ind
    from course_lib import compat

    device = "cpu" if smoke else "cuda"
    rows, cols = SMOKE_SHAPE if smoke else (ROWS, COLS)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    do_bench = None
    if not smoke:
        from triton.testing import do_bench
    copy_bw = _copy_bandwidth(torch, do_bench, rows, cols) if do_bench else None
    result = {"shape": [rows, cols], "copy_GBps": copy_bw / 1e9 if copy_bw else None, "rows": [], "sources": {}}
    only = [w for w in os.environ.get("COURSE_BENCH_ONLY", "").split(",") if w]  # some workloads, by name
    for name, (fn, args, nbytes) in workloads(torch, device, rows, cols).items():
        if only and name not in only:
            continue
        row: dict = {"workload": name, "bytes": nbytes}
        ref = fn(*args)
        try:
            compat.dynamo_reset()
            rec: list = []
            course = torch.compile(
                fn, backend=lambda gm, ex, rec=rec: ind.compile_fx(gm, ex, codegen="triton", record=rec)
            )
            with _kernel_resources() as resources:
                out, row["course_compile_s"] = _first_call(course, args, sync)
            if resources:
                row["course_resources"] = resources
            row["course_correct"] = _close(out, ref, torch)
            compiled = [c for k, c in rec if k == "compiled"]
            row["course_kernels"] = sum(c.kernel_count for c in compiled)
            row["course_graphs"] = [k for k, _ in rec]
            course_src = "\n\n".join(c.kernel_code for c in compiled)
            inductor_src = ""
            if not smoke:
                _, codes = compat.inductor_output_code(fn, *args)
                inductor_src = "\n\n".join(codes)
                row["inductor_kinds"] = kernel_kinds(inductor_src)
                compat.dynamo_reset()
                inductor = torch.compile(fn, backend="inductor")
                out, row["inductor_compile_s"] = _first_call(inductor, args, sync)
                row["inductor_correct"] = _close(out, ref, torch)
                for label, f in (("eager", fn), ("inductor", inductor), ("course", course)):
                    ms = do_bench(lambda f=f, args=args: f(*args), warmup=25, rep=100, return_mode="median")
                    row[f"{label}_ms"] = ms
                    row[f"{label}_bw_fraction"] = nbytes / (ms * 1e-3) / copy_bw
                    graph_ms = _graph_ms(torch, f, args)
                    if isinstance(graph_ms, float):
                        row[f"{label}_graph_ms"] = graph_ms
                        row[f"{label}_graph_bw_fraction"] = nbytes / (graph_ms * 1e-3) / copy_bw
                    else:
                        row[f"{label}_graph_error"] = graph_ms
                row["course_over_inductor"] = row["course_ms"] / row["inductor_ms"]
            result["sources"][name] = {"course": course_src, "inductor": inductor_src}
        except Exception as exc:  # record the failure, keep going
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        result["rows"].append(row)
        print(_line(row), flush=True)
    if not smoke:
        result["inductor_kind_by_row_length"] = kinds_by_row_length(torch)
        print("Inductor's kernel kind by row length:", result["inductor_kind_by_row_length"], flush=True)
        if os.environ.get("COURSE_BENCH_SWEEP") != "0":  # =0 skips the tiling sweep (about a minute)

            def time_ms(f, args):
                return do_bench(lambda: f(*args), warmup=25, rep=100, return_mode="median")

            work = {**workloads(torch, device, rows, cols), **sweep_workloads(torch, device, rows, cols)}
            sweep = {k: v for k, v in SWEEP.items() if not only or k in only}
            result["tiling_sweep"] = tiling_sweep(torch, work, time_ms, copy_bw, sweep)
        if os.environ.get("COURSE_BENCH_COLD_COMPILE") != "0":  # =0 skips the three GPT-2 compiles (minutes)
            result["cold_compile"] = cold_compile(torch)
    return result


#: course_lib tiling constants tried per workload (``codegen/triton.py``); each dict is one variant,
#: ``{}`` the committed defaults. Rows of 32768 (``*_long``): the row held in registers at 32 warps
#: (committed), 16 or 8 (PERSISTENT_MAX_WARPS, PERSISTENT_ELEMENTS_PER_WARP), against the looped kernel
#: (PERSISTENT_RNUMEL 8192, the limit before) with steps of LOOPED_RBLOCK elements,
#: LOOPED_ELEMENTS_PER_THREAD a thread (warps = RBLOCK / 32 / that), with and without eviction hints.
#: Rows of 65536 (``*_xlong``) are split over 8 programs of a cooperative launch (ROW_SPLIT, parts of
#: ROW_SPLIT_PART elements): against parts of 4096 or 16384, 32 warps a part, publishing just before the
#: wait (ROW_SPLIT_AHEAD off), flagged partials or the counter (each site's choice by occupancy, forced by
#: ROW_SPLIT_CHOICE, or the counter alone: ROW_SPLIT_FLAGS off), and the looped kernel (ROW_SPLIT off), its
#: output pass walking backwards or forwards (LOOPED_REVERSE_LAST), and the row in registers (it spills).
#: Cross entropy: its loss kernel (16384 per-row terms to one number) split into 32 partials
#: (committed) or 128, or as one persistent program (ONE_ROW_PERSISTENT_RNUMEL raised).
LOOPED = {"PERSISTENT_RNUMEL": 8192}
SWEEP_LONG = [
    {},  # persistent, 32 warps, 32 elements a thread
    {"PERSISTENT_MAX_WARPS": 16},  # 64 a thread
    {"PERSISTENT_ELEMENTS_PER_WARP": 4096},  # 8 warps, 128 a thread
    {**LOOPED},  # looped: RBLOCK 4096, 4 a thread, 32 warps
    {**LOOPED, "LOOPED_RBLOCK": 8192, "LOOPED_ELEMENTS_PER_THREAD": 8},  # 32 warps
    {**LOOPED, "LOOPED_EVICTION": False},
]
SWEEP_XLONG = [
    {},  # row split: 8 parts of 8192, 16 warps, the next row's partials published before the wait; each site
    # compiles both protocols and keeps flagged partials unless they fit fewer programs than the counter
    {"ROW_SPLIT_CHOICE": 0},  # flagged partials, whatever their occupancy
    {"ROW_SPLIT_FLAGS": False},  # the counter alone
    {"ROW_SPLIT_PART": 4096},  # 16 parts, 8 warps
    {"ROW_SPLIT_PART": 4096, "ROW_SPLIT_FLAGS": False},
    {"ROW_SPLIT_PART": 16384},  # 4 parts, 32 warps
    {"ROW_SPLIT_AHEAD": False},  # this row's partials published just before the wait
    {"ROW_SPLIT_CHOICE": 0, "ROW_SPLIT_MAXNREG": 64},  # flags, capped: two programs an SM
    {"BALANCED_ROUNDS": True},  # the fewest row groups that take as many rounds (launcher)
    {"ROW_SPLIT": False},  # looped: RBLOCK 4096, 4 a thread, 32 warps, the output pass walking backwards
    {"ROW_SPLIT": False, "LOOPED_REVERSE_LAST": False},  # ... walking forwards
]
SWEEP = {
    "layernorm_long": SWEEP_LONG,
    "softmax_long": SWEEP_LONG,
    "layernorm_xlong": SWEEP_XLONG,
    "softmax_xlong": SWEEP_XLONG,
    "layernorm_16k": [{}, {"PERSISTENT_MAX_WARPS": 16}],  # 32 warps (16 a thread) or 16 (32 a thread)
    "softmax_16k": [{}, {"PERSISTENT_MAX_WARPS": 16}],
    "cross_entropy": [
        {},  # loss kernel split into 32 partials of 512
        {"SPLIT_RBLOCK": 128},  # 128 partials
        {"ONE_ROW_PERSISTENT_RNUMEL": 32768},  # one persistent program over 16384 rows, 32 warps
        {"ONE_ROW_PERSISTENT_RNUMEL": 32768, "PERSISTENT_MAX_WARPS": 16},
    ],
}


@contextlib.contextmanager
def _tiling(**constants):
    """course_lib's Triton tiling constants (read at code generation) and launcher constants (read at a
    site's first launch) set for the duration."""
    from course_lib.inductor import launcher
    from course_lib.inductor.codegen import triton as tcg

    owner = {k: tcg if hasattr(tcg, k) else launcher for k in constants}
    old = {k: getattr(owner[k], k) for k in constants}
    for k, v in constants.items():
        setattr(owner[k], k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(owner[k], k, v)


@contextlib.contextmanager
def _kernel_resources():
    """Registers a thread, spill bytes and shared memory (ptxas, via the loaded binary) of every
    kernel first launched inside, by kernel name: ``{name: {"registers", "spills", "shared"}}``.
    (The interpreter returns no binary: nothing is recorded on the CPU.)"""
    from course_lib import compat
    from course_lib.inductor import launcher

    found: dict = {}
    jit_launch = launcher.DirectLaunch.jit_launch

    def recording(site, tensors):
        compiled = jit_launch(site, tensors)
        name = launcher._kernel_name(site.kernel)
        if compiled is not None and name not in found:
            try:
                found[name] = {**compat.triton_kernel_resources(compiled), "num_warps": site.num_warps,
                               "grid": site.grid[0]}  # fmt: skip
                if "FLAGS" in site.constexprs:  # a row split's protocol, as the site chose it
                    found[name]["flags"] = site.constexprs["FLAGS"]
            except Exception as exc:  # an unknown Triton: say so, keep measuring
                found[name] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        return compiled

    launcher.DirectLaunch.jit_launch = recording
    try:
        yield found
    finally:
        launcher.DirectLaunch.jit_launch = jit_launch


def tiling_sweep(torch, work: dict, time_ms, copy_bw: float | None, sweep: dict = SWEEP) -> list[dict]:
    """Each variant of :data:`SWEEP` on its workload: course time (``time_ms(fn, args)``), fraction
    of copy bandwidth, correctness, and the launch's grid and num_warps."""
    import course_lib.inductor as ind
    from course_lib import compat

    rows = []
    for name, variants in sweep.items():
        fn, args, nbytes = work[name]
        ref = fn(*args)
        for constants in variants:
            row = {"workload": name, **constants}
            try:
                with _tiling(**constants), _kernel_resources() as resources:
                    compat.dynamo_reset()
                    rec: list = []
                    course = torch.compile(
                        fn, backend=lambda gm, ex, rec=rec: ind.compile_fx(gm, ex, codegen="triton", record=rec)
                    )
                    row["correct"] = _close(course(*args), ref, torch)
                row["resources"] = resources
                code = "\n".join(c.kernel_code for k, c in rec if k == "compiled")
                row["launches"] = re.findall(r"grid=\((\d+),\).*num_warps=(\d+)[,)]", code)
                ms = time_ms(course, args)
                row["course_ms"] = ms
                if copy_bw and ms:
                    row["bw_fraction"] = nbytes / (ms * 1e-3) / copy_bw
            except Exception as exc:  # record and go on
                row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            print("sweep:", row, flush=True)
            rows.append(row)
    return rows


@contextlib.contextmanager
def _fresh_caches():
    """Empty Triton, Inductor and course_lib caches for the duration (all three read their folder
    from the environment when they use it)."""
    names = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "COURSE_CACHE_DIR")
    old = {n: os.environ.get(n) for n in names}
    with tempfile.TemporaryDirectory() as d:
        for n in names:
            os.environ[n] = os.path.join(d, n.lower())
        try:
            yield
        finally:
            for n, v in old.items():
                if v is None:
                    os.environ.pop(n, None)
                else:
                    os.environ[n] = v


def cold_compile(torch, layers: int = 12, device: str = "cuda", labels=("course_serial", "course_pool", "inductor")):
    """Seconds of the first forward of GPT-2 (``layers`` identical blocks) on the GPU, every cache
    empty: course_lib with each kernel compiled at its first launch (``COURSE_COMPILE_WORKERS=0``,
    the old path), course_lib with the pool and the kernel cache, and Inductor. Inductor ran earlier
    in this process (its worker pool is warm); course_lib's pool is started by its first graph.
    (``device="cpu"`` runs the same code in Triton's interpreter, for the smoke test: no pool there.)"""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # bench_compile, beside this file
    import course_lib.inductor as ind
    from course_lib import compat
    from course_lib.inductor import async_compile

    gpt2 = __import__("bench_compile").gpt2

    out: dict = {"model": f"GPT-2, {layers} layers, width 64, 2 x 16 tokens"}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for label in labels:
        old = os.environ.get("COURSE_COMPILE_WORKERS")
        if label == "course_serial":
            os.environ["COURSE_COMPILE_WORKERS"] = "0"
        try:
            with _fresh_caches():
                compat.dynamo_reset()
                async_compile.reset()  # a cold pool: its start-up counts too
                model, ids = gpt2(layers)
                model, ids = model.to(device), ids.to(device)
                rec: list = []
                backend = "inductor" if label == "inductor" else (
                    lambda gm, ex, rec=rec: ind.compile_fx(gm, ex, codegen="triton", record=rec))  # fmt: skip
                compiled = torch.compile(model, backend=backend)
                with torch.no_grad():  # inference: one forward graph (as in run())
                    got, seconds = _first_call(lambda i: compiled(i).logits, (ids,), sync)
                    out[f"{label}_s"] = seconds
                    out[f"{label}_correct"] = _close(got, model(ids).logits, torch)
                if rec:
                    out[f"{label}_kernels"] = sum(c.kernel_count for k, c in rec if k == "compiled")
        except Exception as exc:  # record and go on
            out[f"{label}_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        finally:
            if old is None:
                os.environ.pop("COURSE_COMPILE_WORKERS", None)
            else:
                os.environ["COURSE_COMPILE_WORKERS"] = old
    print("cold compile:", out, flush=True)
    return out


def _line(row: dict) -> str:
    if "error" in row:
        return f"{row['workload']:14s} ERROR {row['error']}"
    if "course_ms" not in row:
        return f"{row['workload']:14s} course correct={row['course_correct']} kernels={row['course_kernels']}"
    return (
        f"{row['workload']:14s} eager {row['eager_ms']:7.3f} ms ({row['eager_bw_fraction']:4.2f})  "
        f"inductor {row['inductor_ms']:7.3f} ms ({row['inductor_bw_fraction']:4.2f})  "
        f"course {row['course_ms']:7.3f} ms ({row['course_bw_fraction']:4.2f})  "
        f"graph: eager {row.get('eager_graph_bw_fraction', 0):4.2f} inductor {row.get('inductor_graph_bw_fraction', 0):4.2f} "
        f"course {row.get('course_graph_bw_fraction', 0):4.2f}  "
        f"course/inductor {row['course_over_inductor']:4.2f}  correct {row['course_correct']}"
    )


def table(result: dict) -> str:
    """The 04c table: one line per workload (times in ms, fraction of measured copy bandwidth)."""
    head = f"{'workload':14s} {'MB moved':>9s} {'eager':>14s} {'Inductor':>14s} {'course_lib':>14s} {'course/Ind':>10s}"
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        if "course_ms" not in r:
            continue
        cells = [f"{r[k + '_ms']:6.3f} ({r[k + '_bw_fraction']:4.2f})" for k in ("eager", "inductor", "course")]
        lines.append(
            f"{r['workload']:14s} {r['bytes'] / 1e6:9.0f} {cells[0]:>14s} {cells[1]:>14s} {cells[2]:>14s} "
            f"{r['course_over_inductor']:10.2f}"
        )
    return "\n".join(lines)


def main(results_dir: pathlib.Path) -> None:
    import torch

    if not torch.cuda.is_available():
        print("bench gpu_inductor: no CUDA device here; the H200 numbers are in data/inductor/inductor_gpu.json")
        return
    result = run()
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "gpu_inductor.json").write_text(json.dumps(result, indent=1))
    print(table(result))


if __name__ == "__main__":
    if "--smoke" in sys.argv:
        run(smoke=True)
    else:
        main(pathlib.Path(__file__).parent / "results")
