"""torch's module_db on a GPU through the course backend's Triton path (the CPU test,
tests/test_module_db.py, runs the generated Python executor): one line per module, then counts.

Usage (device machine, repo root): ``python device/module_db_gpu.py [name ...]``. On an H100
(torch 2.11, Triton 3.6), 2026-12-07: 104 ok, 5 no graph (as on the CPU), 2 fallback (GRUCell and
LSTMCell reach CUDA's fused cell kernels, ``_thnn_fused_*_cell``, which have no rule), 0 wrong.
"""

from __future__ import annotations

import collections
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

try:
    import expecttest  # noqa: F401  (torch.testing._internal imports it)
except ImportError:  # the GPU machine's environment has none: module_db needs only its TestCase
    import types
    import unittest

    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase)

import test_module_db as M  # noqa: E402


def main(names: list[str]) -> int:
    counts: collections.Counter = collections.Counter()
    for name in names or M._names():
        try:
            diff, fallbacks, graphs = M.compare(name, codegen="triton", device="cuda")
            status = "wrong" if diff else "fallback" if fallbacks else "no graph" if not graphs else "ok"
            why = diff or (fallbacks[0] if fallbacks else "")
        except Exception as exc:  # noqa: BLE001  (a survey: report and go on)
            status, why = "error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        counts[status] += 1
        print(f"{name:32s} {status:9s} {why[:200]}", flush=True)
    print(dict(counts))
    return 1 if counts["wrong"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
