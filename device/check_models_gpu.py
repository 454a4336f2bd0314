"""Named real models through the course backend on the GPU, against eager, one line each.

Usage (device machine, repo root): ``python device/check_models_gpu.py causal_lm:afmoe hrm_text ...``
Each model runs ``real_models.compare(name, device="cuda")`` (full fp32, TF32 off) in its own
subprocess, so one crash or hang costs one line.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def one(name: str) -> dict:
    import dataclasses

    from course_lib.aot import real_models as rm
    from course_lib.inductor import fallback_report  # importing course_lib.inductor registers the backend

    report = fallback_report()
    report.clear()
    c = rm.compare(name, device="cuda")
    out = {k: v for k, v in dataclasses.asdict(c).items() if not isinstance(v, (list, dict))}
    out["ok"] = c.ok()
    out["fallbacks"] = [f"{n} x {kind} {what}: {reason}"[:200] for (kind, what, reason), n in report.counts.items()]
    return out


def main(names: list[str], timeout: int = 240) -> None:
    for name in names:
        code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'device')!r}); " \
               f"import check_models_gpu as c; print('RESULT', json.dumps(c.one({name!r})))"  # fmt: skip
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"},
            )
        except subprocess.TimeoutExpired:
            print(json.dumps({"name": name, "outcome": "timeout"}), flush=True)
            continue
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if lines:
            print(json.dumps({"name": name, **json.loads(lines[-1][7:])}), flush=True)
        else:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-3:]
            print(json.dumps({"name": name, "outcome": "error", "error": tail}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
