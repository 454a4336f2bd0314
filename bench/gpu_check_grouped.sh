#!/usr/bin/env bash
# One device call: the grouped_mm rule on CUDA (bench/probe_grouped_mm.py) and DeepSeek-V3 in bf16 through Inductor.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
timeout 120 python3 bench/probe_grouped_mm.py 2>&1 | grep -v arn | tail -8
timeout 150 python3 -c "
import torch, course_lib.inductor
from course_lib.aot import real_models as rm
for b in ('inductor', 'course_lib'):
    try:
        p = rm.precision('deepseek_v3', torch.bfloat16, backend=b, device='cuda'); print(b, p)
    except Exception as e: print(b, 'ERR', type(e).__name__, str(e)[:600])
" 2>&1 | grep -E "^(inductor|course_lib) " | cut -c1-700
