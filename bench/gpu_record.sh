#!/usr/bin/env bash
# The recording call: GPU tests of the row split and the launcher, data/inductor re-recorded
# (device/record_inductor.py), and the real models interleaved in one process
# (bench/bench_real_models.py --device cuda). $OUT/inductor/ and $OUT/real_models.json come back.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/inductor"
nvidia-smi --query-gpu=name --format=csv,noheader; git log --oneline -1 2>/dev/null
echo "=== tests ==="
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_inductor_row_split.py tests/test_inductor_launcher.py -k gpu 2>&1 | tail -3
echo "=== record_inductor ==="
timeout ${INDUCTOR_TIMEOUT:-280} python3 device/record_inductor.py "$OUT/inductor" 2>&1 | grep -v "arn\|^$\|softmax\.$\|split the reduction\|important use case" | tail -25 | cut -c1-300
echo "=== real models, interleaved ==="
timeout ${MODELS_TIMEOUT:-240} python3 bench/bench_real_models.py --device cuda --rounds ${ROUNDS:-30} --out "$OUT" \
  ${MODELS:+--models $MODELS} 2>&1 | grep -v "arn\|vocabulary" | tail -25 | cut -c1-300
