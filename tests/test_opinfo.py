"""PyTorch's own OpInfo inputs through ``backend="course_lib"``: never a wrong result.

As torch's test/inductor/test_torchinductor_opinfo.py does for Inductor: every float32 CPU entry
of op_db, first sample input, compiled vs eager; backward too where autograd applies. Every int64
and bool entry too, forward (integer outputs must be equal). An op the
course cannot compile may fall back (a graph in eager, or torch's AOT Autograd for a missing
derivative rule), always with a reason; it must never return a different value. The routes
(compiled / fallback / skipped) and counts: ``.venv/bin/python tests/opinfo_support.py``.
"""

import logging
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import opinfo_support as support  # noqa: E402

NAMES = sorted(support.float32_ops())


@pytest.fixture(autouse=True)
def _quiet_fallbacks():
    """A fallback is expected here and is returned in the outcome; keep its log line out of the output."""
    logger = logging.getLogger("course_lib.inductor")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def _check(outcome: support.Outcome) -> None:
    assert outcome.status != "wrong", outcome.reason
    if outcome.status == "skipped":
        pytest.skip(outcome.reason)
    if outcome.status == "fallback":
        assert outcome.reason, "a fallback must say why"


@pytest.mark.parametrize("name", NAMES)
def test_op_matches_eager(name):
    """Outputs and mutated inputs, and the inputs' gradients where autograd applies (one compile per op)."""
    _check(support.check(name))


#: integer and bool inputs: where C++'s and Triton's integer semantics differ from torch's (wrapping,
#: a bool's ``+``, ``~``, a float op of an integer); forward only, nothing to differentiate
INTEGER_CASES = [(name, dtype) for dtype in (torch.int64, torch.bool) for name in sorted(support.ops_of(dtype))]


@pytest.mark.parametrize("name, dtype", INTEGER_CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in INTEGER_CASES])
def test_integer_and_bool_inputs_match_eager(name, dtype):
    _check(support.forward(name, dtype))


#: complex inputs, forward and backward: complex nodes are ATen calls in the compiled graph and take
#: torch's derivative formulas (the course's rules are written for real numbers; a complex product's
#: gradient needs the conjugate)
COMPLEX_NAMES = sorted(support.ops_of(torch.complex64))


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_complex_inputs_and_gradients_match_eager(name):
    _check(support.backward(name, torch.complex64))


def test_inference_path_matches_eager():
    """The inference path (no input needs a gradient) on a few ops the training path above covers."""
    for name in ("sum", "nn.functional.batch_norm", "amax", "squeeze.multiple", "logsumexp"):
        _check(support.forward(name))


def test_op_db_is_the_full_list():
    """The harness sees what torch's inductor OpInfo test sees: hundreds of float32 CPU entries."""
    assert len(NAMES) > 600
    assert {"sum", "nn.functional.batch_norm", "squeeze.multiple", "isreal"} <= set(NAMES)


def test_a_wrong_result_is_caught(monkeypatch):
    """The comparison can fail: a backend that adds 1 to every output is reported as wrong."""
    from course_lib import inductor

    real = inductor.compile_fx

    def off_by_one(gm, example_inputs, record=None):
        compiled = real(gm, example_inputs, record=record)

        def run(*args):
            out = compiled(*args)
            return [o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out]

        return run

    monkeypatch.setattr(inductor, "compile_fx", off_by_one)
    outcome = support.forward("exp")
    assert outcome.status == "wrong" and "not close" in outcome.reason


# ---- direct regressions for the wrong results op_db found (each failed before its fix)


def _through_backend(fn, *args):
    """``fn(*args)`` compiled with the course backend, its record, and the inputs' gradients."""
    from course_lib.inductor import compile_fx

    torch._dynamo.reset()
    record = []
    compiled = torch.compile(fn, backend=lambda gm, ex: compile_fx(gm, ex, record=record))
    return compiled(*args), record


@pytest.mark.parametrize(
    "fn, shape",
    [
        (lambda x: x.sum(), ()),  # a 0-d input: nothing to reduce
        (lambda x: x.sum(1), (3, 1)),  # a size-1 axis
        (lambda x: x.mean(), (1,)),
        (lambda x: x.amax(), ()),
        (lambda x: x.amin((0, 2), keepdim=True), (1, 4, 1)),
        (lambda x: x.logsumexp(0), ()),
        (lambda x: (x > 0).sum(), ()),  # bool in, int64 out
    ],
)
def test_reduction_over_one_element_is_that_element(fn, shape):
    """lowering: a reduction over size-1 / 0-d extents returned its start value (0, -inf); now the element."""
    x = torch.randn(shape)
    got, record = _through_backend(fn, x)
    want = fn(x)
    assert [kind for kind, _ in record] == ["compiled"]
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want)


def test_reduction_over_one_element_backward_through_course_aot():
    """Forward and backward graphs both compiled (logsumexp of a 0-d tensor hit ``d % 0`` in course_lib.aot)."""
    for fn, shape in ((lambda x: x.logsumexp(0), ()), (lambda x: x.amax(-1), (3, 1)), (lambda x: x.sum(), ())):
        x = torch.randn(shape, requires_grad=True)
        got, record = _through_backend(fn, x)
        (g,) = torch.autograd.grad(got.sum(), x)  # the backward graph is compiled on its first call
        assert [kind for kind, _ in record] == ["compiled", "compiled"], record
        y = x.detach().requires_grad_()
        (want,) = torch.autograd.grad(fn(y).sum(), y)
        torch.testing.assert_close(got, fn(y))
        torch.testing.assert_close(g, want)


def test_linear_bias_grad_without_batch_dim():
    """F.linear on a 1-d input: the bias gradient is a sum over a size-1 axis (it came back zero)."""
    x, w, b = torch.randn(3), torch.randn(4, 3), torch.randn(4)
    params = [t.clone().requires_grad_() for t in (x, w, b)]
    got, _ = _through_backend(torch.nn.functional.linear, *params)
    grads = torch.autograd.grad(got, params, torch.ones(4))
    ref = [t.clone().requires_grad_() for t in (x, w, b)]
    want = torch.autograd.grad(torch.nn.functional.linear(*ref), ref, torch.ones(4))
    for g, e in zip(grads, want, strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("shape", [(3, 5), (4, 5, 6), (2, 5, 1)])
def test_batch_norm_training_updates_running_stats_once(shape):
    """The running mean and variance move by one momentum step, as in eager (momentum applied once)."""
    import torch.nn.functional as F

    def bn(x, mean, var):
        return F.batch_norm(x, mean, var, training=True, momentum=0.3)

    x, mean, var = torch.randn(shape), torch.randn(5), torch.rand(5) + 0.5
    mine = (mean.clone(), var.clone())
    got, _ = _through_backend(bn, x, *mine)
    torch.testing.assert_close(got, bn(x, mean, var))
    torch.testing.assert_close(mine[0], mean)
    torch.testing.assert_close(mine[1], var)
