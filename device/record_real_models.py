"""Record the real-model suite on the GPU machine: each transformers model (tiny config, random
weights) through ``backend="course_lib"`` on CUDA (course_lib.aot, then Triton kernels), inference
and one training step against eager, plus which graphs fell back and why.

Usage (device/run_all.sh runs it): ``python3 device/record_real_models.py OUT_DIR``; writes
``OUT_DIR/real_models.json`` (kept in data/real_models/). Falls back to CPU with a note when no
GPU is present, so the script itself can be tried anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import platform
import sys
import time
import traceback


def main(out_dir: str) -> None:
    import torch

    from course_lib.aot import real_models
    from course_lib.inductor import fallback_report

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for name in real_models.MODELS:
        fallback_report().clear()
        t0 = time.perf_counter()
        try:
            row = dataclasses.asdict(real_models.compare(name, backend="course_lib", device=device))
            row["ok"] = real_models.Comparison(**row).ok()
        except Exception as exc:  # record the failure, go on with the next model
            row = {"name": name, "ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                   "trace": traceback.format_exc()[-2000:]}  # fmt: skip
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["fallbacks"] = str(fallback_report())
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
    meta = {"device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
            "torch": torch.__version__, "python": platform.python_version()}  # fmt: skip
    try:
        import transformers

        meta["transformers"] = transformers.__version__
    except ImportError:
        pass
    (out / "real_models.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "rec/real_models")
