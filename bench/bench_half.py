"""Half precision on the CPU: the course's C++ kernels against eager, float32 / bfloat16 / float16.

Three graphs (an add, GELU, layer norm then GELU plus a residual) on a 4096 x 1024 tensor, one torch
thread and one OpenMP thread, each timed in the same process, eager and compiled interleaved (median of
``ROUNDS`` rounds of ``CALLS`` calls). The C++ kernels hold a half value as its 16 bits and convert with
branch-free functions (``course_lib/inductor/codegen/cpp.py``, ``HEADER``), so the loops vectorise;
eager converts float16 with the CPU's F16C instructions, which the course's code does not use.

``main(results_dir)`` writes ``half.json``.
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

ROUNDS, CALLS = 7, 5


def _graphs():
    import torch
    import torch.nn.functional as F

    def add(x, w, b):
        return (x * 2.0 + 1.0,)

    def gelu(x, w, b):
        return (F.gelu(x),)

    def norm_gelu(x, w, b):
        return (F.gelu(F.layer_norm(x, (x.shape[-1],), w, b)) + x,)

    return {"add": add, "gelu": gelu, "layernorm_gelu": norm_gelu}, torch


def main(results_dir: pathlib.Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import course_lib.inductor as ind
    from course_lib import compat, decomp

    graphs, torch = _graphs()
    torch.set_num_threads(1)
    rows = []
    for name, fn in graphs.items():
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            g = torch.Generator().manual_seed(0)
            args = [t.to(dtype) for t in (torch.randn(4096, 1024, generator=g), torch.randn(1024, generator=g),
                                          torch.randn(1024, generator=g))]  # fmt: skip
            compiled = ind.compile_graph(compat.make_fx(fn, *args, decompositions=decomp.DECOMPOSITIONS), args)
            times = {"eager": [], "course": []}
            for _ in range(ROUNDS):
                for key, run in (("eager", fn), ("course", compiled)):
                    run(*args)
                    start = time.perf_counter()
                    for _ in range(CALLS):
                        run(*args)
                    times[key].append((time.perf_counter() - start) / CALLS * 1e3)
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append({"graph": name, "dtype": str(dtype).removeprefix("torch."), "eager_ms": med["eager"],
                         "course_ms": med["course"], "course_vs_eager": med["course"] / med["eager"]})  # fmt: skip
            r = rows[-1]
            print(f"{name:16s} {r['dtype']:9s} eager {r['eager_ms']:7.2f} ms  course {r['course_ms']:7.2f} ms  "
                  f"course/eager {r['course_vs_eager']:.2f}", flush=True)  # fmt: skip
    results_dir.mkdir(parents=True, exist_ok=True)
    out = {"what": "ms a call, 4096 x 1024, one thread, median of interleaved rounds", "load_avg": os.getloadavg()[0],
           "rows": rows}  # fmt: skip
    (results_dir / "half.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(pathlib.Path(__file__).resolve().parent / "results")
