"""course_lib.dynamo on the corpus: graph and break counts agree with torch._dynamo.explain,
and every output equals eager PyTorch (also through optimize with each backend)."""

import contextlib
import io
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "data" / "dynamo"))
from corpus import CASES  # noqa: E402

from course_lib import compat, dynamo  # noqa: E402

IDS = [c[0] for c in CASES]


def _quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.allclose(a, b, rtol=1e-6, atol=1e-6)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_corpus_is_big_enough():
    assert len(CASES) >= 30
    kinds = {name.split("_")[0] for name in IDS}
    assert {"print", "loop", "closure", "nested"} <= kinds, (
        f"missing kinds: {sorted({'print', 'loop', 'closure', 'nested'} - kinds)}"
    )


@pytest.mark.parametrize("name, fn, make_args, expected", CASES, ids=IDS)
def test_counts_agree_with_torch_dynamo(name, fn, make_args, expected):
    ours = _quiet(dynamo.explain, fn, *make_args())
    got = (ours.graph_count, ours.graph_break_count, len(ours.break_reasons))
    assert got == expected, f"{name}: ours {got}, recorded torch {expected}\n{ours}"
    theirs = _quiet(compat.dynamo_explain, fn, *make_args())
    compat.dynamo_reset()
    real = (theirs.graph_count, theirs.graph_break_count, len(theirs.break_reasons))
    assert got == real, f"{name}: ours {got}, torch._dynamo.explain {real}"
    if not isinstance(fn, torch.nn.Module):  # torch inlines nn.Linear into F.linear + parameter inputs
        assert [len(list(g.graph.nodes)) for g in theirs.graphs] == [len(g.nodes) for g in ours.graphs]


@pytest.mark.parametrize("name, fn, make_args, expected", CASES, ids=IDS)
def test_outputs_equal_eager(name, fn, make_args, expected):
    backend = ["eager", "python"][IDS.index(name) % 2]  # both backends, half the time
    want = _quiet(fn, *make_args())
    opt = dynamo.optimize(backend)(fn)
    assert _same(want, _quiet(opt, *make_args()))
    assert _same(want, _quiet(opt, *make_args()))  # second call: a cache hit
    assert opt.calls == ["compile", "hit"]


def test_graphs_convert_to_torch_fx():
    name, fn, make_args, _ = CASES[IDS.index("module_helper")]
    opt = dynamo.optimize("torch_fx")(fn)
    assert _same(fn(*make_args()), opt(*make_args()))
