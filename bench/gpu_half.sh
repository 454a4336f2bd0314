#!/usr/bin/env bash
# One device call for half precision on CUDA: the GPU tests of tests/test_inductor_half.py (the Triton
# kernels in bf16/fp16) and tests/test_fused_attention.py (FlashAttention-2 kept whole, real models
# training in half precision), then the real models timed in bfloat16. Outputs in $OUT.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== tests ==="
timeout ${TEST_S:-300} python3 -m pytest -q -p no:cacheprovider -rfE tests/test_inductor_half.py tests/test_fused_attention.py \
  -k "cuda" 2>&1 | grep -v "arn\|DEBUG" | tee "$OUT/tests.txt" | tail -25 | cut -c1-700
echo "=== real models, ${DTYPE:-bfloat16} ==="
timeout ${BENCH_S:-250} python3 bench/bench_real_models.py --device cuda --rounds ${ROUNDS:-15} --dtype ${DTYPE:-bfloat16} \
  --out "$OUT" --models ${MODELS:-gpt2 llama bert vit} 2>&1 | grep -v "arn\|transformers\]" | tail -12 | cut -c1-300
