#!/usr/bin/env bash
# One device call for attention kept whole on CUDA: the GPU tests of tests/test_fused_attention.py, the
# probe (which kernel eager and course_lib's trace pick, and torch's verdict), then the real models timed
# with attention kept whole against decomposed. Outputs in $OUT. MODELS, ROUNDS and PROBE override.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== tests ==="
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_fused_attention.py -k "cuda" 2>&1 | tail -15 | cut -c1-600
echo "=== probe ==="
timeout 150 python3 bench/probe_attention.py ${PROBE:-vit bert} 2>&1 | grep -v "arn" | tee "$OUT/probe.txt" | cut -c1-900
echo "=== real models ==="
timeout 400 python3 bench/bench_real_models.py --device cuda --rounds ${ROUNDS:-15} --decomposed-attention \
  --out "$OUT" --models ${MODELS:-bert roberta vit gpt2 llama} 2>&1 | grep -v "arn" | tail -25 | cut -c1-300
