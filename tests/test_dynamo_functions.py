"""course_lib.dynamo on several hundred small functions (tests/dynamo_corpus/functions.py, in the
spirit of PyTorch's test/dynamo/test_functions.py): the result and the inputs afterwards always
equal eager Python, every graph break has a reason, and nothing crashes. The graph / break
counts are compared with torch._dynamo.explain's, recorded in tests/dynamo_corpus/torch_explain.json
(Python 3.11) and torch_explain_py312.json (3.12, the GPU machine's) by
``python -m tests.dynamo_corpus.record_torch``."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from dynamo_corpus.functions import CASES  # noqa: E402
from dynamo_corpus.harness import Outcome, mismatch, run_eager, run_ours, same  # noqa: E402
from dynamo_corpus.record_torch import record_path  # noqa: E402

from course_lib import compat, dynamo  # noqa: E402

IDS = [c[0] for c in CASES]
RECORD_FILE = record_path()  # this Python's recording (3.11 and 3.12 compile several cases differently)
RECORD = json.loads(RECORD_FILE.read_text()) if RECORD_FILE.exists() else None
OURS: dict[str, list | str] = {}  # counts seen by the equality test, reused by the agreement test


def _counts(e) -> list:
    return [e.graph_count, e.graph_break_count, len(e.break_reasons)]


def test_corpus_is_several_hundred_functions():
    assert len(CASES) >= 300 and len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("name, fn, make_args", CASES, ids=IDS)
def test_equals_eager_and_breaks_have_reasons(name, fn, make_args):
    want = run_eager(fn, make_args)
    got, e = run_ours(fn, make_args)
    OURS[name] = _counts(e) if e is not None else "raised"
    problem = mismatch(want, got)
    assert problem is None, f"{name}: {problem}"
    assert got.error is None or got.error is want.error  # an exception only where eager raises it too
    if e is not None:
        assert all(b.reason and b.reason.strip() for b in e.breaks), [str(b) for b in e.breaks]
        assert all(r.reason for r in e.break_reasons)


@pytest.mark.parametrize("name, fn, make_args", CASES[::7], ids=IDS[::7])
def test_optimize_compiles_then_hits(name, fn, make_args):
    """Through optimize(): the first call compiles, the second hits the cache; both equal eager."""
    opt = dynamo.optimize("python")(fn)
    for _ in range(2):
        want = run_eager(fn, make_args)
        args = make_args()
        try:
            got = Outcome(opt(*args), None, args, want.printed)
        except Exception as exc:
            got = Outcome(None, type(exc), args, want.printed)
        assert mismatch(want, got) is None, f"{name}: {mismatch(want, got)}"
    if want.error is None:
        assert opt.calls[0] == "compile" and opt.calls[1] in ("hit", "compile")


def test_harness_can_fail():
    """The comparison sees a wrong value, a wrong type, a lost input mutation and a missing error."""
    x = torch.ones(2)
    assert not same(x, x + 1) and not same([x], (x,)) and not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert mismatch(Outcome(1, None, ([1, 2],)), Outcome(1, None, ([1],))) is not None
    assert mismatch(Outcome(None, ValueError), Outcome(1, None)) is not None


def test_counts_agree_with_recorded_torch_dynamo():
    """Every function whose counts agreed with torch._dynamo.explain when recorded still agrees."""
    if RECORD is None:
        pytest.skip(f"no recording for Python {sys.version_info[0]}.{sys.version_info[1]} ({RECORD_FILE.name})")
    if RECORD["torch"].split("+")[0] != torch.__version__.split("+")[0]:
        pytest.skip(f"counts recorded with torch {RECORD['torch']}, this is {torch.__version__}")
    cases = RECORD["cases"]
    assert set(cases) == set(IDS), "the corpus changed: run python -m tests.dynamo_corpus.record_torch"
    regressions = []
    for name, fn, make_args in CASES:
        row = cases[name]
        if row["torch"] != row["ours"]:
            continue
        if name not in OURS:
            _, e = run_ours(fn, make_args)
            OURS[name] = _counts(e) if e is not None else "raised"
        ours = OURS[name]
        if ours != row["torch"]:
            regressions.append(f"{name}: ours {ours}, torch {row['torch']}")
    assert not regressions, regressions
    assert RECORD["agree"] >= 300, RECORD["agree"]


@pytest.mark.parametrize("name", ["dict_setdefault_list", "print_break", "input_list_append", "sum_start_tensor"])
def test_recorded_counts_match_live_torch(name):
    """The recording is not stale: a few rows re-run against the live torch._dynamo.explain."""
    if RECORD is None:
        pytest.skip(f"no recording for Python {sys.version_info[0]}.{sys.version_info[1]} ({RECORD_FILE.name})")
    _, fn, make_args = CASES[IDS.index(name)]
    e = compat.dynamo_explain(fn, *make_args())
    compat.dynamo_reset()
    assert _counts(e) == RECORD["cases"][name]["torch"]
