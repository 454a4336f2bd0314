"""Every architecture transformers has for a task, through the course backend on CPU.

Each model type comes from its own default config made small by one rule
(``course_lib.aot.real_models.tiny``), so this sees architectures nobody here wrote a config
for. One subprocess a model (a crash or a hang costs one line), two at a time; one JSON line
each in the output file, with an outcome:

    ok            inference and a training step match eager, every graph compiled by the course
    ok_fallback   match eager, some graphs left the course pipeline (``fallbacks`` says why)
    wrong         compiled and ran, but differs from eager (``comparison``)
    rounding      differs from eager, but its float32 step is no more than 3x as far from eager float64
                  as eager's float32 step is, in the loss and in every gradient (``fp32_rounding``:
                  an ill-conditioned model, not a wrong one)
    course_error  raised under the course backend, not under Dynamo's "eager" backend
    dynamo_error  raised under Dynamo's "eager" backend too: not the course's doing
    noisy         eager disagrees with itself (random numbers in training): nothing to compare
    unbuildable / eager_fails / too_big   the tiny config does not build, eager raises, > 5M parameters
    timeout

    .venv/bin/python bench/sweep_architectures.py --task causal_lm --out sweep.jsonl [model_type ...]

``--lengths`` checks symbolic sizes instead: one compiled model trained at sequence lengths 8, 12, 5
and 16 against eager (``real_models.compare_lengths``); outcomes ok, ok_fallback, wrong, error and
static_only (Dynamo compiled every length on its own, so nothing symbolic was checked).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_PARAMS = 5_000_000


def one(name: str) -> dict:
    """The outcome for one ``task:model_type`` (runs in the worker process)."""
    import torch

    from course_lib.aot import real_models as rm

    try:
        model, inputs = rm.build(name)
    except Exception as exc:
        return {"outcome": "unbuildable", "error": _line(exc)}
    params = sum(p.numel() for p in model.parameters())
    if params > MAX_PARAMS:
        return {"outcome": "too_big", "params": params}
    try:
        model.train()
        rm.loss_of(model(**inputs)).backward()
    except Exception as exc:
        return {"outcome": "eager_fails", "error": _line(exc)}
    torch.manual_seed(0)
    got = rm.probe(name)
    if "error" in got:
        try:
            rm.compare(name, backend="eager")
        except Exception as exc:
            return {"outcome": "dynamo_error", "error": _line(exc), "course_error": got["error"]}
        return {"outcome": "course_error", **got}
    comparison = got["comparison"]
    if comparison["eager_repeat_error"] > 2e-4:
        return {"outcome": "noisy", **got}
    if not got["ok"]:
        # both fp32 steps against eager fp64: how far rounding alone takes eager, and the backend
        far = rm.fp32_rounding(name, backend="course_lib")
        rounding = (far["backend_grad"] <= 3 * far["eager_grad"] + 1e-6
                    and far["backend_loss"] <= 3 * far["eager_loss"] + 1e-6)  # fmt: skip
        return {"outcome": "rounding" if rounding else "wrong", "fp32_rounding": far, **got}
    return {"outcome": "ok_fallback" if got["fallbacks"] else "ok", **got}


def one_lengths(name: str) -> dict:
    """``--lengths``: the model trained at sequence lengths 8, 12, 5 and 16 through one compiled
    module (Dynamo recompiles with a symbolic length at the second), each step against eager."""
    from course_lib.aot import real_models as rm
    from course_lib.inductor import fallback_report

    report = fallback_report()
    report.clear()
    try:
        got = rm.compare_lengths(name)
    except Exception as exc:
        return {"outcome": "error", "error": _line(exc)}
    fallbacks = [f"{n} x {kind} {what}: {reason}"[:300] for (kind, what, reason), n in report.counts.items()]
    if max(got["loss_error"], got["grad_error"]) > 2e-3:
        outcome = "wrong"
    elif not got["symbolic"]:
        outcome = "static_only"  # every length compiled on its own: nothing symbolic was checked
    else:
        outcome = "ok_fallback" if fallbacks else "ok"
    return {"outcome": outcome, **got, "fallbacks": fallbacks}


def _line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:400] if text else type(exc).__name__


def run_one(name: str, timeout: int, lengths: bool = False) -> dict:
    return in_subprocess(f"sweep_architectures.{'one_lengths' if lengths else 'one'}", name, timeout)


def in_subprocess(call: str, name: str, timeout: int, path: Path = ROOT / "bench") -> dict:
    """``module.function(name)`` (the module on ``path``) in a fresh Python, which prints its dict on a
    RESULT line: a crash or a hang costs one outcome (``crashed``, ``timeout``), not the run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
           "TRANSFORMERS_VERBOSITY": "error"}  # fmt: skip
    module, function = call.rsplit(".", 1)
    code = f"import json, sys; sys.path.insert(0, {str(path)!r}); import {module} as m; " \
           f"print('RESULT', json.dumps(m.{function}({name!r})))"  # fmt: skip
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"name": name, "outcome": "timeout", "seconds": timeout}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"name": name, "outcome": "crashed", "returncode": proc.returncode, "error": tail[:400]}
    return {"name": name, **json.loads(lines[-1][7:]), "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    from course_lib.aot import real_models as rm

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("types", nargs="*", help="model types (default: every one transformers has for the task)")
    ap.add_argument("--task", default="causal_lm", choices=list(rm.TASKS))
    ap.add_argument("--out", default="sweep_architectures.jsonl")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--lengths", action="store_true", help="train at several sequence lengths (symbolic sizes)")
    args = ap.parse_args()
    names = [f"{args.task}:{t}" for t in (args.types or rm.tiny_types(args.task))]
    counts: collections.Counter = collections.Counter()
    with open(args.out, "a") as out, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for i, result in enumerate(pool.map(lambda n: run_one(n, args.timeout, args.lengths), names), 1):
            counts[result["outcome"]] += 1
            out.write(json.dumps(result) + "\n")
            out.flush()
            print(f"[{i}/{len(names)}] {result['name']}: {result['outcome']} "
                  f"{result.get('error', '') or '; '.join(result.get('fallbacks', []))}"[:300], flush=True)  # fmt: skip
    print(dict(counts))


if __name__ == "__main__":
    main()
