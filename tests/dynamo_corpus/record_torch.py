"""Record ``torch._dynamo.explain`` on every corpus function (graph count, graph-break count,
number of break reasons) into torch_explain.json, beside course_lib.dynamo's counts.

Usage: .venv/bin/python -m tests.dynamo_corpus.record_torch   (about a minute on 2 cores)
tests/test_dynamo_functions.py reads the file: it checks that every function that agreed with
torch when recorded still agrees (when the installed torch and Python are the recorded ones).

One file per Python: the course's 3.11 writes torch_explain.json; another version writes
torch_explain_py312.json and so on (:func:`record_path`), since both Dynamo and ours see different
bytecode there (the GPU machine runs 3.12 with torch 2.11; a 3.12 recording can be made on any
machine with that torch: ``python3.12 -m tests.dynamo_corpus.record_torch``).

A 3.12 environment without a GPU, about 4 GB from PyPI (torch's CUDA wheel runs on the CPU):
``python3.12 -m venv /tmp/py312 && /tmp/py312/bin/pip install torch==2.11.0 pytest pytest-xdist hypothesis``;
then ``/tmp/py312/bin/python -m pytest -n 0 tests/test_dynamo*.py`` runs the Dynamo tests on 3.12.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))


COURSE_PYTHON = (3, 11)


def record_path(version: tuple[int, int] | None = None) -> Path:
    """The recording for a Python version (this interpreter's by default)."""
    major, minor = version or sys.version_info[:2]
    name = "torch_explain.json" if (major, minor) == COURSE_PYTHON else f"torch_explain_py{major}{minor}.json"
    return HERE / name


def torch_counts(fn, make_args) -> list | str:
    import contextlib
    import io

    from course_lib import compat

    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = compat.dynamo_explain(fn, *make_args())
        return [e.graph_count, e.graph_break_count, len(e.break_reasons)]
    except Exception:  # the function raises on purpose, or Dynamo gives up
        return "raised"
    finally:
        compat.dynamo_reset()


def main() -> None:
    import torch

    from dynamo_corpus.functions import CASES
    from dynamo_corpus.harness import run_ours

    rows = {}
    for name, fn, make_args in CASES:
        _, e = run_ours(fn, make_args)
        ours = [e.graph_count, e.graph_break_count, len(e.break_reasons)] if e is not None else "raised"
        rows[name] = {"torch": torch_counts(fn, make_args), "ours": ours}
    agree = sum(r["torch"] == r["ours"] for r in rows.values())
    out = {"torch": torch.__version__, "python": sys.version.split()[0], "agree": agree, "total": len(rows),
           "cases": rows}  # fmt: skip
    record_path().write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"agree {agree} of {len(rows)}: {record_path().name}")


if __name__ == "__main__":
    main()
