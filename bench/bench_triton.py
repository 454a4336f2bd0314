"""Benchmark for Module 3 (Triton).

With a GPU: the H200 measurements of ``device/record_triton.py`` run here (vector add and
softmax against copy bandwidth, bf16 matmul 4096^3 against torch.matmul, flash attention against
scaled_dot_product_attention). Goals from issue 5: add >= 0.85 of copy bandwidth, matmul >= 0.80
of cuBLAS, attention >= 0.70 of SDPA.

Without a GPU: prints the recorded H200 numbers (labelled as recorded) and measures what a CPU can:
cold compile time of each target (Triton's cache and course_lib's bypassed) and the interpreter's
speed on a vector add.

Run: ``make bench BENCH=triton``.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import course_lib  # noqa: E402  (Triton mode before triton import)


def _goals_table(v: dict) -> list[tuple]:
    return [("vector add / copy", v["add_fraction_of_copy"], 0.85),
            ("softmax / copy", v["softmax_fraction_of_copy"], None),
            ("matmul bf16 4096^3 / cuBLAS", v["matmul"]["fraction_of_cublas"], 0.80),
            ("flash attention / SDPA", v["attention"]["fraction_of_sdpa"], 0.70)]  # fmt: skip


def _cpu_side() -> dict:
    import torch

    from course_lib.triton import compile as tc
    from course_lib.triton import kernels as K

    out = {"compile_s": {}}
    for target in tc.TARGETS:
        start = time.perf_counter()
        tc._compile(*K.signature("add"), target, {"num_warps": 4}, False)
        out["compile_s"][target] = time.perf_counter() - start
    x, y = torch.randn(1 << 16), torch.randn(1 << 16)
    K.add(x, y)
    start = time.perf_counter()
    K.add(x, y, block=1024)
    out["interpreter_melem_per_s"] = (1 << 16) / (time.perf_counter() - start) / 1e6
    return out


def main(results_dir: pathlib.Path) -> None:
    from course_lib import recorded

    results_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    if course_lib.env.has_cuda():
        import torch
        import triton

        sys.path.insert(0, str(ROOT / "device"))
        import record_triton

        from course_lib.triton import kernels as K
        from course_lib.triton import tune

        result["gpu"] = record_triton.measure(K, tune, torch, triton)
        result["source"] = "measured now"
        values = result["gpu"]
    else:
        rec = recorded.load("triton/perf.json")
        print(rec)
        values = rec.value if rec else None
        result["source"] = "recorded" if rec else "none"
        result["cpu"] = _cpu_side()
        print("cold compile seconds per target:", {k: round(v, 2) for k, v in result["cpu"]["compile_s"].items()})
        print(f"interpreter: {result['cpu']['interpreter_melem_per_s']:.2f} M elements/s on a vector add")
    if values:
        for name, frac, goal in _goals_table(values):
            verdict = "" if goal is None else ("  goal met" if frac >= goal else f"  below goal {goal}")
            print(f"{name:32s} {frac:6.2f}{verdict}")
        result["fractions"] = {n: f for n, f, _ in _goals_table(values)}
    (results_dir / "triton.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(ROOT / "bench" / "results")
