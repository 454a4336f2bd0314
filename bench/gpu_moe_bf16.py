"""Device check: the mixture-of-experts models train in bf16 on CUDA through the course, every graph
compiled (``COURSE_INDUCTOR_STRICT=1``), as close to float32 as eager. ``python bench/gpu_moe_bf16.py``."""

import os
import sys

import torch

os.environ.setdefault("COURSE_INDUCTOR_STRICT", "1")
import course_lib.inductor  # noqa: E402,F401  (registers backend="course_lib")
from course_lib.aot import real_models  # noqa: E402

for name in sys.argv[1:] or ["qwen3_moe", "deepseek_v3", "jamba", "t5"]:
    try:
        p = real_models.precision(name, torch.bfloat16, device="cuda")
        print(f"{name:12s} eager {p.eager:.4g} course {p.backend:.4g} ok={p.ok()} worst={p.worst_param}", flush=True)
    except Exception as exc:  # one model's failure must not hide the others'
        print(f"{name:12s} FAILED {type(exc).__name__}: {str(exc)[:400]}", flush=True)
