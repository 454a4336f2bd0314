#!/usr/bin/env bash
# One device call for the row split: its GPU tests, the bench's long-row sweep (generated kernels: parts,
# warps, publish-ahead, looped), the probe (prototype against the generated kernel), the prototype's sweep
# with publish-ahead, the host time of one launch each way, and a host profile of one real model's
# training step. Outputs in $OUT. (bench/gpu_record.sh records data/ instead.)
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== tests ==="
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_inductor_row_split.py tests/test_inductor_launcher.py -k gpu 2>&1 | tail -4
echo "=== bench xlong ==="
(cd bench && COURSE_BENCH_ONLY=${ONLY:-layernorm_xlong,softmax_xlong} COURSE_BENCH_COLD_COMPILE=0 timeout 200 python3 -c "
import json, os, bench_gpu_inductor as b
r = b.run()
r.pop('sources', None)
json.dump(r, open(os.path.join(os.environ['OUT'], 'bench_xlong.json'), 'w'), indent=1, default=str)
" 2>&1 | grep -v "arn\|^$\|softmax\.$\|split the reduction\|important use case" | tail -30 | cut -c1-400)
echo "=== probe ==="
timeout 90 python3 bench/probe_row_split.py 2>&1 | grep -v ttgir | tail -6 | cut -c1-1500
echo "=== proto ==="
CONFIGS=${CONFIGS:-8x16,8x32,16x8,16x16} WORKLOADS=softmax,layernorm_stream MODES=pf1,ahead \
  timeout 150 python3 bench/proto_row_coop.py 2>&1 | grep -v "arn" | tail -20 | cut -c1-400
echo "=== launch ==="
timeout 60 python3 bench/proto_launch.py 2>&1 | tail -3
echo "=== host profile ==="
for b in eager course_lib; do
  timeout 90 python3 bench/profile_step.py ${PROFILE_MODEL:-vit} --device cuda --steps 100 --top 25 --backend $b 2>&1 | grep -v "arn" | head -45 | cut -c1-200
done
