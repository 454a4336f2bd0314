"""Benchmark: course_lib.inductor vs eager vs torch.compile(Inductor) on CPU.

Eight memory-bound workloads at 4096 x 1024 float32 (16 MiB per tensor), inference mode.
Reports per workload the median runtime of each (eager, Inductor and course_lib timed in
interleaved rounds, so a noisy neighbour hits all three alike), the geomean ratios,
course_lib's achieved bandwidth (bytes its schedule moves / time) against a copy bandwidth
measured in the same run, and cold-compile latency (first call, empty caches) of course_lib vs
Inductor. ``ceiling`` is eager's time over the time course_lib's bytes take at copy
bandwidth: the most any fused kernel could gain over eager on this machine. Where eager is
one ATen kernel already (softmax, layer_norm), the ceiling is near 1x.
Then ``dynamic_sizes``: softmax over five row counts, compiled once with symbolic sizes against
once per size. Writes ``results_dir/inductor.json`` and ``results_dir/inductor.png`` and prints a table.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import statistics
import tempfile
import time

ROWS, COLS = 4096, 1024


def workloads():
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(ROWS, COLS, generator=g), torch.randn(ROWS, COLS, generator=g)
    w, b = torch.randn(COLS, generator=g), torch.randn(COLS, generator=g)
    t = torch.randint(0, COLS, (ROWS,), generator=g)
    scores = torch.randn(4, 16, 256, 256, generator=g)  # 16 MiB

    def rmsnorm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    return {
        "softmax": (lambda x: torch.softmax(x, -1), (x,)),
        "layernorm": (lambda x, w, b: F.layer_norm(x, (COLS,), w, b), (x, w, b)),
        "rmsnorm": (rmsnorm, (x, w)),
        "gelu_bias": (lambda x, b: F.gelu(x + b), (x, b)),
        "silu_gate": (lambda x, y: F.silu(x) * y, (x, y)),
        "cross_entropy": (lambda x, t: F.cross_entropy(x, t), (x, t)),
        "add_norm": (lambda x, y, w, b: F.layer_norm(x + y, (COLS,), w, b), (x, y, w, b)),
        "attn_softmax": (lambda s: torch.softmax(s * 0.125, -1), (scores,)),
    }


def interleaved(fns: dict, args, rounds=9, reps=5) -> dict:
    """Median seconds per call of each fn, measured round-robin (reps calls per fn per round)."""
    for fn in fns.values():
        fn(*args)
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            for _ in range(reps):
                t0 = time.perf_counter()
                fn(*args)
                times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def dynamic_sizes(sizes=(64, 100, 257, 1000, 4097), cols: int = COLS) -> dict:
    """One compile for every size (``dynamic=True``, symbolic ``ks0`` loop bounds) against one
    compile per size (``dynamic=False``): compiles, total compile time, and the steady-state time
    of each size's call under both (what the symbolic bound costs the generated loop)."""
    import torch

    import course_lib.inductor as ind
    from course_lib import compat

    def softmax_rows(x):
        return torch.softmax(x * 2.0, -1)

    out = {"sizes": list(sizes), "cols": cols}
    for dynamic in (False, True):
        compat.dynamo_reset()
        record = []
        compiled = torch.compile(lambda x: softmax_rows(x), dynamic=dynamic,
                                 backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record))  # fmt: skip
        first, steady = [], []
        for n in sizes:
            x = torch.randn(n, cols)
            t0 = time.perf_counter()
            compiled(x)  # the first call of a size: a compile when the graph is static
            first.append(time.perf_counter() - t0)
            steady.append(interleaved({"c": compiled}, (x,), rounds=3, reps=3)["c"])
            assert torch.allclose(compiled(x), softmax_rows(x), atol=1e-5)
        key = "dynamic" if dynamic else "static"
        out[key] = {"compiles": sum(k == "compiled" for k, _ in record), "first_call_s": first, "steady_s": steady}
        print(f"{key:8s} compiles {out[key]['compiles']}  first calls {sum(first):6.2f} s  "
              f"steady {' '.join(f'{t * 1e3:.2f}' for t in steady)} ms", flush=True)  # fmt: skip
    return out


def main(results_dir) -> None:
    results_dir = pathlib.Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="bench_inductor_")
    os.environ["COURSE_CACHE_DIR"] = os.path.join(tmp, "course")  # cold caches for both compilers
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    import torch

    import course_lib.inductor as ind
    from course_lib import compat

    torch.set_grad_enabled(False)
    src = torch.randn(ROWS * COLS * 4)  # 64 MiB: well past the last-level cache
    dst = torch.empty_like(src)
    bws, rows = [], []
    for name, (fn, args) in workloads().items():
        compat.dynamo_reset()
        c_ind = torch.compile(fn, backend="inductor")
        t0 = time.perf_counter()
        c_ind(*args)
        cold_ind = time.perf_counter() - t0
        record = []
        # a code object of its own, so Dynamo keeps Inductor's and course_lib's frames apart
        c_cl = torch.compile(
            lambda *a, fn=fn: fn(*a), backend=lambda gm, ex, record=record: ind.compile_fx(gm, ex, record=record)
        )
        t0 = time.perf_counter()
        out = c_cl(*args)
        cold_cl = time.perf_counter() - t0
        t = interleaved({"eager": fn, "inductor": c_ind, "course": c_cl, "copy": lambda *a: dst.copy_(src)}, args)
        eager, ind_t, cl_t = t["eager"], t["inductor"], t["course"]
        bw = 2 * src.numel() * src.element_size() / t["copy"]  # this workload's rounds, same noise
        bws.append(bw)
        ok = torch.allclose(out, fn(*args), rtol=1e-3, atol=1e-4)
        graphs = [r for k, r in record if k == "compiled"]
        moved = sum(ind.schedule_stats(gr.schedule)["bytes"] for gr in graphs)
        kernels = sum(gr.kernel_count for gr in graphs)
        rows.append(
            {
                "workload": name,
                "eager_s": eager,
                "inductor_s": ind_t,
                "course_s": cl_t,
                "cold_inductor_s": cold_ind,
                "cold_course_s": cold_cl,
                "course_kernels": kernels,
                "course_bytes": moved,
                "course_GBps": moved / cl_t / 1e9,
                "copy_GBps": bw / 1e9,
                "ceiling_eager_over_fused": eager / (moved / bw),
                "correct": bool(ok),
                "fallbacks": sum(k == "fallback" for k, _ in record),
            }
        )
        print(
            f"{name:14s} eager {eager * 1e3:7.2f} ms  inductor {ind_t * 1e3:7.2f} ms  course {cl_t * 1e3:7.2f} ms  "
            f"course/ind {cl_t / ind_t:5.2f}x  eager/course {eager / cl_t:5.2f}x (ceiling {eager * bw / moved:4.1f}x)  "
            f"{moved / cl_t / 1e9:5.1f} GB/s  "
            f"cold {cold_cl:5.2f}s vs {cold_ind:5.2f}s  {'ok' if ok else 'WRONG'}",
            flush=True,
        )

    def geo(key_a, key_b):
        return math.exp(statistics.fmean(math.log(r[key_a] / r[key_b]) for r in rows))

    summary = {
        "geomean_course_over_inductor": geo("course_s", "inductor_s"),
        "geomean_eager_over_course": geo("eager_s", "course_s"),
        "geomean_eager_over_inductor": geo("eager_s", "inductor_s"),
        "cold_compile_course_over_inductor": sum(r["cold_course_s"] for r in rows)
        / sum(r["cold_inductor_s"] for r in rows),
        # the sum is dominated by Inductor's first compile in the process; the median is not
        "cold_compile_median_course_over_inductor": statistics.median(
            r["cold_course_s"] / r["cold_inductor_s"] for r in rows
        ),
        "copy_bandwidth_GBps": statistics.median(bws) / 1e9,
        "threads": torch.get_num_threads(),
        "shape": [ROWS, COLS],
    }
    print("\n" + "\n".join(f"{k:36s} {v:.3f}" if isinstance(v, float) else f"{k:36s} {v}" for k, v in summary.items()))
    dynamic = dynamic_sizes()
    (results_dir / "inductor.json").write_text(
        json.dumps({"summary": summary, "rows": rows, "dynamic": dynamic}, indent=2)
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 4))
        names = [r["workload"] for r in rows]
        xs = range(len(rows))
        for i, (key, label) in enumerate(
            [("eager_s", "eager"), ("inductor_s", "Inductor"), ("course_s", "course_lib")]
        ):
            ax.bar([x + (i - 1) * 0.27 for x in xs], [r[key] * 1e3 for r in rows], width=0.27, label=label)
        ax.set_xticks(list(xs), names, rotation=30, ha="right")
        ax.set_ylabel("ms (median)")
        ax.set_title(f"CPU, {ROWS}x{COLS} float32, {torch.get_num_threads()} threads")
        ax.legend()
        fig.tight_layout()
        fig.savefig(results_dir / "inductor.png", dpi=100)
    except Exception as exc:  # the plot is a nicety; the JSON is the result
        print(f"no plot: {exc}")


if __name__ == "__main__":
    main(pathlib.Path(__file__).resolve().parent / "results")
