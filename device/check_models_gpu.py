"""Named real models through the course backend on the GPU, against eager, one line each.

Usage (device machine, repo root): ``python device/check_models_gpu.py causal_lm:afmoe hrm_text ...``
Each model runs ``real_models.compare(name, device="cuda")`` (full fp32, TF32 off) in its own
subprocess (``sweep_architectures.in_subprocess``), so one crash or hang costs one line.
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def one(name: str, device: str = "cuda") -> dict:
    import dataclasses

    from course_lib.aot import real_models as rm
    from course_lib.inductor import fallback_report  # importing course_lib.inductor registers the backend

    report = fallback_report()
    report.clear()
    c = rm.compare(name, device=device)
    out = {k: v for k, v in dataclasses.asdict(c).items() if not isinstance(v, (list, dict))}
    out["ok"] = c.ok()
    out["fallbacks"] = [f"{n} x {kind} {what}: {reason}"[:200] for (kind, what, reason), n in report.counts.items()]
    return out


def main(names: list[str], timeout: int = 240) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import sweep_architectures

    for name in names:
        result = sweep_architectures.in_subprocess("check_models_gpu.one", name, timeout, ROOT / "device")
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
