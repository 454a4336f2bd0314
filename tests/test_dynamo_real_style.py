"""course_lib.dynamo on programs written the way model code is written (tests/dynamo_corpus/real_style.py),
each compared live with torch._dynamo: the result equals eager, the graph / break / reason counts
equal torch._dynamo.explain's, ops per graph too (plain functions), the tensor guards name the same
inputs, and a new input shape recompiles as often as torch.compile does."""

import contextlib
import dataclasses
import io
import sys
import warnings
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from dynamo_corpus.real_style import CASES, t  # noqa: E402

from course_lib import compat, dynamo  # noqa: E402

IDS = [c[0] for c in CASES]

# Where we knowingly differ from torch._dynamo, and why (the result still equals eager).
KNOWN_DIFFERENCES = {
    "generator_context_manager": "Dynamo inlines @contextlib.contextmanager; here `with` on it is a graph break",
    "inference_mode_block": "Dynamo models torch.inference_mode(); here it is a graph break at the with and its exit",
    "autocast_disabled_block": "Dynamo models torch.autocast(); here it is a graph break at the with and its exit",
    "calls_no_grad_decorated": "Dynamo traces the @torch.no_grad() wrapper; here its `with` on self is a break",
}


def same(a, b) -> bool:
    """Equal values of equal types; tensors allclose with equal dtype/shape/requires_grad; dataclasses by field."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and a.requires_grad == b.requires_grad and torch.allclose(a, b, atol=1e-6))  # fmt: skip
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def _quiet(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args), out.getvalue()


def _torch_explain(fn, args):
    try:
        return _quiet(compat.dynamo_explain, fn, *args)[0]
    finally:
        compat.dynamo_reset()


def _counts(e) -> tuple:
    return (e.graph_count, e.graph_break_count, len(e.break_reasons))


def test_corpus_covers_the_styles():
    assert len(CASES) >= 40 and len(set(IDS)) == len(IDS)
    assert sum(isinstance(fn, torch.nn.Module) for _, fn, _ in CASES) >= 8


@pytest.mark.parametrize("name, fn, make_args", CASES, ids=IDS)
def test_agrees_with_torch_dynamo(name, fn, make_args):
    want, printed = _quiet(fn, *make_args())
    ours, our_print = _quiet(dynamo.explain, fn, *make_args())
    assert same(want, ours.out), f"{name}: result differs from eager"
    assert our_print == printed, f"{name}: printed {our_print!r}, eager {printed!r}"
    assert all(b.reason.strip() for b in ours.breaks), [str(b) for b in ours.breaks]
    assert torch.is_grad_enabled(), "capture left grad mode switched off"
    theirs = _torch_explain(fn, make_args())
    if name in KNOWN_DIFFERENCES:
        assert _counts(ours) != _counts(theirs), f"{name} now agrees with torch: drop it from KNOWN_DIFFERENCES"
        return
    assert _counts(ours) == _counts(theirs), f"{name}: ours {_counts(ours)}, torch {_counts(theirs)}\n{ours}"
    if not isinstance(fn, torch.nn.Module):  # torch inlines nn.Linear into F.linear with parameter inputs
        assert [len(g.nodes) for g in ours.graphs] == [len(list(g.graph.nodes)) for g in theirs.graphs], name
    if not isinstance(fn, torch.nn.Module) and ours.graph_count == 1:  # torch's resume frames guard their locals too
        their_tensors = {g.name for g in theirs.out_guards if g.create_fn_name() == "TENSOR_MATCH"}
        our_tensors = {g.source.name for g in ours.guards if g.kind == "TENSOR_MATCH"}
        assert our_tensors == their_tensors, f"{name}: tensor guards {our_tensors} vs torch {their_tensors}"


@pytest.mark.parametrize("name, fn, make_args", CASES[::6], ids=IDS[::6])
def test_optimize_equals_eager_twice(name, fn, make_args):
    opt = dynamo.optimize("python")(fn)
    want = _quiet(fn, *make_args())[0]
    for _ in range(2):
        assert same(want, _quiet(opt, *make_args())[0]), name
    assert opt.calls[0] == "compile"


RESHAPED = ["rms_norm_eps_default", "softmax_temperature_default", "chained_methods", "python_numbers_mixed"]


@pytest.mark.parametrize("name", RESHAPED)
def test_new_shapes_recompile_as_torch_compile_does(name):
    """Three calls with 3, 5 and 7 rows: torch compiles static, then once more with a dynamic
    row count (automatic dynamic), then hits. Ours must compile as often."""
    fn = CASES[IDS.index(name)][1]
    inputs = [t(n, 4) for n in (3, 5, 7)]
    compiles = []

    def counting_backend(gm, example_inputs):
        compiles.append(len(example_inputs))
        return gm.forward

    compiled = torch.compile(fn, backend=counting_backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in inputs:
            torch.testing.assert_close(compiled(x), fn(x))
    compat.dynamo_reset()
    opt = dynamo.optimize("python")(fn)
    for x in inputs:
        torch.testing.assert_close(opt(x), fn(x))
    assert opt.calls.count("compile") == len(compiles), (name, opt.calls, compiles)


def test_a_tracer_bug_is_a_graph_break_not_a_jump_into_the_users_except(monkeypatch):
    """An AttributeError raised by course_lib's own handler code is not the user's exception: it is
    reported as something course_lib cannot model (a graph break; here, where the handler fails even
    when run eagerly, a clear error) instead of silently running the user's ``except`` branch."""
    from course_lib.dynamo import symbolic_convert as sc
    from course_lib.dynamo.exc import Unsupported

    def broken(self, inst):
        sc._raised_in_course_lib(None)  # an AttributeError whose innermost frame is in course_lib

    monkeypatch.setattr(sc.InstructionTranslator, "BINARY_OP", broken)

    def f(x):
        try:
            y = x + 1
        except AttributeError:
            y = x - 100
        return y

    with pytest.raises(Unsupported, match="could not model BINARY_OP"):
        dynamo.optimize("python")(f)(torch.randn(4))
