"""Record course_lib.dynamo against the real torch._dynamo on the GPU machine's stack
(Python 3.12, torch 2.11): the corpus's graph/break counts from both, output equality, and
which 3.12 opcodes the corpus uses that have no handler.

Usage: python device/record_dynamo.py OUT_DIR      (CPU tensors only; a few minutes)
Writes OUT_DIR/dynamo_corpus_py312.json. Copy it to data/dynamo/.
It also runs the function corpus of tests/dynamo_corpus (results against eager, counts
against torch._dynamo.explain) under the key "functions".
"""

from __future__ import annotations

import contextlib
import dis
import io
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "data" / "dynamo"))
sys.path.insert(0, str(ROOT / "tests"))


def _same(a, b):
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and bool(torch.allclose(a, b, rtol=1e-6, atol=1e-6))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def main(out_dir: str) -> None:
    import torch
    from corpus import CASES  # noqa: E402  (tests/data/dynamo/corpus.py)

    from course_lib import compat, dynamo, recorded
    from course_lib.dynamo import symbolic_convert

    rows = []
    for name, fn, make_args, expected in CASES:
        row = {"name": name, "recorded_torch_2_13": list(expected)}
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                ours = dynamo.explain(fn, *make_args())
                row["ours"] = [ours.graph_count, ours.graph_break_count, len(ours.break_reasons)]
                row["output_equals_eager"] = _same(ours.out, fn(*make_args()))
            except Exception as exc:  # record, keep going
                row["ours_error"] = f"{type(exc).__name__}: {exc}"
            try:
                real = compat.dynamo_explain(fn, *make_args())
                row["torch"] = [real.graph_count, real.graph_break_count, len(real.break_reasons)]
            except Exception as exc:
                row["torch_error"] = f"{type(exc).__name__}: {exc}"
            compat.dynamo_reset()
        row["agree"] = row.get("ours") == row.get("torch")
        rows.append(row)
    used = set()

    def walk(code):
        for c in code.co_consts:
            if hasattr(c, "co_code"):
                used.update(i.opname for i in dis.get_instructions(c))
                walk(c)

    walk(compile((ROOT / "tests" / "data" / "dynamo" / "corpus.py").read_text(), "corpus.py", "exec"))
    unhandled = sorted(
        used - set(symbolic_convert.HANDLED) - {"LOAD_SUPER_ATTR", "STORE_ATTR", "LOAD_NAME", "STORE_NAME"}
    )  # class bodies)
    result = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cases": rows,
        "agree": sum(r["agree"] for r in rows),
        "total": len(rows),
        "unhandled_opcodes_in_corpus": unhandled,
        "functions": record_functions(),
    }
    recorded.save(
        Path(out_dir) / "dynamo_corpus_py312.json", result, meta={"command": "python device/record_dynamo.py OUT"}
    )
    print(f"{result['agree']}/{result['total']} cases agree; unhandled opcodes: {unhandled}")


def record_functions() -> dict:
    """tests/dynamo_corpus on this machine's Python and torch: wrong results, crashes, agreement."""
    from dynamo_corpus.functions import CASES
    from dynamo_corpus.harness import mismatch, run_eager, run_ours
    from dynamo_corpus.record_torch import torch_counts

    wrong, agree = [], 0
    for name, fn, make_args in CASES:
        got, e = run_ours(fn, make_args)
        problem = mismatch(run_eager(fn, make_args), got)
        if problem is not None:
            wrong.append(f"{name}: {problem[:200]}")
        ours = [e.graph_count, e.graph_break_count, len(e.break_reasons)] if e is not None else "raised"
        agree += ours == torch_counts(fn, make_args)
    return {"total": len(CASES), "differ_from_eager": wrong, "agree_with_torch_explain": agree}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out")
