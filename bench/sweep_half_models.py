"""Sweep: one half-precision training step of every real model, through the course and in eager.

For each architecture of ``course_lib.aot.real_models`` (``MODELS`` and ``MORE``), in its own process
(a crash or a hang costs one row): ``real_models.precision(name, dtype)`` (the worst parameter
gradient of eager and of the course backend, each against float32 on the same rounded weights), the
graphs that left the course pipeline (``fallback_report``), and the wall time. One JSON line a model.

``python bench/sweep_half_models.py [--dtype bfloat16|float16] [--models gpt2 swin ...] [--out FILE]``
(not one of ``make bench``'s benchmarks: every model takes 10-20 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ONE = r"""
import json, logging, sys, time, traceback, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
import torch
torch.set_num_threads(1)
import course_lib.inductor as ci
from course_lib.aot import real_models as rm
name, dtype = sys.argv[1], sys.argv[2]
t0, row = time.time(), {"model": name, "dtype": dtype}
try:
    p = rm.precision(name, getattr(torch, dtype))
    row.update(eager=p.eager, course=p.backend, worst_param=p.worst_param, ok=p.ok(),
               topk_margin=p.topk_margin if p.topk_margin < float("inf") else None)
except Exception as exc:
    row.update(error=f"{type(exc).__name__}: {str(exc)[:300]}")
row["fallbacks"] = [f"{k}: {w}: {r}"[:300] for (k, w, r) in ci.fallback_report().counts]
row["seconds"] = round(time.time() - t0, 1)
print("ROW " + json.dumps(row))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--models", nargs="*")
    ap.add_argument("--timeout", type=int, default=900, help="seconds a model")
    ap.add_argument("--out", default="bench/results/half_models.jsonl")
    args = ap.parse_args()
    from course_lib.aot import real_models

    names = args.models or [*real_models.MODELS, *real_models.MORE]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(args.out, "w") as out:
        for i, name in enumerate(names, 1):
            t0 = time.time()
            try:
                done = subprocess.run([sys.executable, "-c", ONE, name, args.dtype], capture_output=True, text=True,
                                      timeout=args.timeout, env=env)  # fmt: skip
                rows = [ln[4:] for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
                row = json.loads(rows[-1]) if rows else {"model": name, "dtype": args.dtype,
                                                         "error": f"exit {done.returncode}: {done.stderr[-300:]}"}  # fmt: skip
            except subprocess.TimeoutExpired:
                row = {"model": name, "dtype": args.dtype, "error": f"over {args.timeout} s"}
            out.write(json.dumps(row) + "\n")
            out.flush()
            verdict = "ERROR " + row["error"][:80] if "error" in row else ("ok" if row["ok"] else "WORSE THAN EAGER")
            extra = f", {len(row.get('fallbacks', []))} fallback reason(s)" if row.get("fallbacks") else ""
            print(f"[{i}/{len(names)}] {name:20s} {verdict}{extra} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
