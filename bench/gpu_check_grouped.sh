#!/usr/bin/env bash
# One device call: the grouped_mm rule on CUDA (bench/probe_grouped_mm.py); DeepSeek-V3 in bf16 through
# Inductor and the course; Jamba in bf16 (a kernel Triton 3.6 cannot compile must now fall back, not crash).
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
timeout 100 python3 bench/probe_grouped_mm.py 2>&1 | grep -v arn | tail -8
timeout 200 python3 -c "
import torch, course_lib.inductor
from course_lib.aot import real_models as rm
from course_lib.inductor import fallback_report
for name, b in (('deepseek_v3', 'inductor'), ('deepseek_v3', 'course_lib'), ('qwen3_moe', 'course_lib'), ('jamba', 'course_lib')):
    try:
        p = rm.precision(name, torch.bfloat16, backend=b, device='cuda'); print('RES', name, b, p, p.ok())
    except Exception as e: print('RES', name, b, 'ERR', type(e).__name__, str(e)[:500])
print('RES', str(fallback_report()).replace(chr(10), ' | ')[:1500])
" 2>&1 | grep -E "^RES" | cut -c1-1600
