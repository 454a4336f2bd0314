#!/usr/bin/env bash
# One device call that re-checks what the CPU cannot: pick sections by name (all of them without arguments).
#   moe      mixture-of-experts models train in bf16 on CUDA through the course, strict (bench/gpu_moe_bf16.py)
#   routing  Qwen3-MoE's top-k margins and error with routers x1 and x20 (bench/probe_moe_routing.py)
#   grouped  the grouped_mm derivative rule against autograd on CUDA (bench/probe_grouped_mm.py)
#   views    Swin and Funnel in float32 through the Triton kernels, strict (index simplification; the second
#            call's graph has a size symbol, compiled per size)
#   tests    the GPU tests: half precision, fused attention (with the MoE test), the inductor tests
# MODELS overrides the moe list; *_S the time limits.  bash bench/gpu_check.sh [section ...]
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
for section in "${@:-moe routing grouped views tests}"; do
  for s in $section; do
    echo "=== $s ==="
    case $s in
      moe) timeout ${MOE_S:-300} python3 bench/gpu_moe_bf16.py ${MODELS:-qwen3_moe jamba deepseek_v3 phimoe} 2>&1 \
             | grep -v "arn\|reproducer\|MLIR" | tail -8 | cut -c1-500 ;;
      routing) COURSE_INDUCTOR_STRICT=1 timeout ${ROUTING_S:-200} python3 bench/probe_moe_routing.py --device cuda \
             2>&1 | grep -v arn | tail -3 ;;
      grouped) timeout ${GROUPED_S:-100} python3 bench/probe_grouped_mm.py 2>&1 | grep -v arn | tail -8 ;;
      views) COURSE_INDUCTOR_STRICT=1 timeout ${VIEW_S:-150} python3 -c "
import course_lib.inductor
from course_lib.aot import real_models as rm
for n in ('swin', 'funnel'):
    c = rm.compare(n, device='cuda'); print(n, 'ok' if c.ok() else 'FAIL', c)
" 2>&1 | grep -v "arn" | tail -4 | cut -c1-400 ;;
      tests) timeout ${TEST_S:-300} python3 -m pytest -q -p no:cacheprovider -rfE tests/test_inductor_half.py \
             tests/test_fused_attention.py tests/test_inductor.py -k "cuda or mixture" 2>&1 \
             | grep -v "arn\|DEBUG" | tail -12 | cut -c1-500 ;;
      *) echo "unknown section $s (moe, routing, grouped, views, tests)" ;;
    esac
  done
done
