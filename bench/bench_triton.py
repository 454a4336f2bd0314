"""Benchmark for Module 3 (Triton).

With a GPU: the H200 measurements of ``device/record_triton.py`` run here (vector add and
softmax against copy bandwidth; bf16 matmul 4096^3, the tiled kernel and the persistent TMA kernel,
against torch.matmul; flash attention, tiled and TMA, against scaled_dot_product_attention).
Goals: add >= 0.85 of copy bandwidth (issue 5); the best Module 3 matmul >= 0.95 of cuBLAS and
flash attention >= 0.85 of SDPA (issue 21), each also given as a fraction of the H200's dense
bf16 peak (989.4 TFLOP/s, half the datasheet's 1,979 "with sparsity").

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


def _ladder_fraction(v: dict, ladder: str, prefix: str, key: str) -> float | None:
    row = next((r for r in v.get(ladder, []) if r["step"].startswith(prefix) and key in r), None)
    return row[key] if row else None


def _goals_table(v: dict) -> list[tuple]:
    """(what, fraction reached, goal or None); rows the recording lacks are left out."""
    rows = [("vector add / copy", v["add_fraction_of_copy"], 0.85),
            ("softmax / copy", v["softmax_fraction_of_copy"], None),
            ("matmul tiled / cuBLAS", _ladder_fraction(v, "matmul_ladder", "tiles, grouped", "fraction_of_cublas"), None),
            ("matmul best / cuBLAS", v["matmul"]["fraction_of_cublas"], GOALS["matmul"]),
            ("matmul best / bf16 peak", v["matmul"].get("fraction_of_peak"), None),
            ("attention tiled / SDPA", _ladder_fraction(v, "attention_ladder", "tiles", "fraction_of_sdpa"), None),
            ("attention best / SDPA", v["attention"]["fraction_of_sdpa"], GOALS["attention"]),
            ("attention best / bf16 peak", v["attention"].get("fraction_of_peak"), None)]  # fmt: skip
    return [r for r in rows if r[1] is not None]


GOALS = {"matmul": 0.95, "attention": 0.85}


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
            print(f"{name:34s} {frac:6.2f}{verdict}")
        result["fractions"] = {n: f for n, f, _ in _goals_table(values)}
    (results_dir / "triton.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(ROOT / "bench" / "results")
