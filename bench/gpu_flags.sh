#!/usr/bin/env bash
# One device call for flagged partials (ROW_SPLIT_FLAGS; each site chooses by occupancy): the row split's
# GPU tests, the bench's long-row sweep (generated kernels, counter against flags), the prototype's sweep (ahead against flag),
# and the GPU cases of the in-place / hidden-write / symbolic-size tests. Outputs in $OUT.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== bench xlong ==="
(cd bench && COURSE_BENCH_ONLY=layernorm_xlong,softmax_xlong COURSE_BENCH_COLD_COMPILE=0 timeout 270 python3 -c "
import json, os, bench_gpu_inductor as b
r = b.run()
r.pop('sources', None)
json.dump(r, open(os.path.join(os.environ['OUT'], 'bench_xlong.json'), 'w'), indent=1, default=str)
" 2>&1 | grep -v "arn\|^$\|softmax\.$\|split the reduction\|important use case" | tail -30 | cut -c1-300)
echo "=== tests ==="
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_inductor_row_split.py -k gpu 2>&1 | tail -3
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_aot.py -k "written_in_place or hidden" 2>&1 | tail -3
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_inductor_dynamic.py -k size_used_as_a_value 2>&1 | tail -3
timeout 90 python3 device/check_symbolic_gpu.py > "$OUT/symbolic.jsonl" 2> "$OUT/symbolic.err"
echo "symbolic rc $?"; python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(len(rows), 'lines, worst error', max(r['max_error'] for r in rows))" "$OUT/symbolic.jsonl"; tail -2 "$OUT/symbolic.err"
echo "=== proto ==="
CONFIGS=${CONFIGS:-8x16} WORKLOADS=softmax,layernorm_stream MODES=ahead,flag \
  timeout 90 python3 bench/proto_row_coop.py 2>&1 | grep -v "arn" | tail -6 | cut -c1-300
