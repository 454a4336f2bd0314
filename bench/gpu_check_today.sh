#!/usr/bin/env bash
# One device call for the 2026-12-06 (fifth) session's changes, on CUDA:
#  1. bf16 training of the models the CPU sweep fixed (T5: gradient dtypes; MoE: grouped_mm rule, int32 cumsum);
#  2. Swin and Funnel in float32 through the course's Triton kernels (index simplification), strict;
#  3. the GPU tests of the half-precision and fused-attention files (0971542's C++ changes had not run on a GPU).
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== bf16 on CUDA ==="
timeout ${MOE_S:-200} python3 bench/gpu_moe_bf16.py 2>&1 | grep -v "arn" | tail -6
echo "=== Swin, Funnel fp32 on CUDA, strict ==="
COURSE_INDUCTOR_STRICT=1 timeout ${VIEW_S:-150} python3 -c "
import course_lib.inductor
from course_lib.aot import real_models as rm
for n in ('swin', 'funnel'):
    c = rm.compare(n, device='cuda'); print(n, 'ok' if c.ok() else 'FAIL', c)
" 2>&1 | grep -v "arn" | tail -4 | cut -c1-400
echo "=== GPU tests ==="
timeout ${TEST_S:-220} python3 -m pytest -q -p no:cacheprovider -rfE tests/test_inductor_half.py tests/test_fused_attention.py \
  -k "cuda" 2>&1 | grep -v "arn\|DEBUG" | tail -12 | cut -c1-500
