#!/usr/bin/env bash
# Record every GPU artefact in one go on the H200 machine (the device tool runs this in the
# repository root; $OUT comes back). Each device/record_<name>.py writes into rec/<name>/,
# which becomes data/<name>/ here. Then the GPU notebooks run cell by cell as scripts
# (that machine has no Jupyter) to check their GPU paths.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
OUT=${OUT:-/tmp/out}; REC=/tmp/rec; mkdir -p "$OUT" "$REC"
{ nvidia-smi; nvidia-smi topo -m; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$REC/machine.txt" 2>&1
for script in ${SCRIPTS:-device/record_*.py}; do
  name=$(basename "$script" .py); name=${name#record_}
  echo "=== $name ==="
  timeout "${RECORD_TIMEOUT:-300}" python3 "$script" "$REC/$name" 2>&1 | tail -40
  echo "=== $name exit ${PIPESTATUS[0]} ==="
done
for nb in ${NOTEBOOKS:-}; do
  timeout 300 python3 tools/run_cells.py "$nb" 2>&1 | tail -60
done
tar czf "$OUT/recordings.tgz" -C "$REC" .
