#!/usr/bin/env bash
# One device call: the row-split GPU tests, the row-split probe, the bench's long-row rows with the
# row split on (its sweep compares parts and the looped kernel), and the launch probe. Outputs in $OUT.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
echo "=== tests ==="
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_inductor_row_split.py tests/test_inductor_launcher.py -k gpu 2>&1 | tail -15
echo "=== probe ==="
timeout 120 python3 bench/probe_row_split.py 2>&1 | tail -20
echo "=== bench xlong, row split on ==="
(cd bench && COURSE_BENCH_ONLY=${ONLY:-layernorm_xlong,softmax_xlong,layernorm,softmax} COURSE_BENCH_COLD_COMPILE=0 \
 timeout 260 python3 -c "
import json, os, bench_gpu_inductor as b
from course_lib.inductor.codegen import triton as tcg
tcg.ROW_SPLIT = True  # the constant, not COURSE_ROW_SPLIT, so the sweep's looped variants stay looped
r = b.run()
r.pop('sources', None)
json.dump(r, open(os.path.join(os.environ['OUT'], 'bench_xlong.json'), 'w'), indent=1, default=str)
" 2>&1 | tail -30)
echo "=== launch ==="
timeout 60 python3 bench/proto_launch.py 2>&1 | tail -10
