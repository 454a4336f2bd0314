"""What ops mean at the edges of their domain, compiled by both code generators against eager:
NaN and infinities, integer and bool dtypes.

Found by running PyTorch's op_db samples in dtypes other than float32 (``tests/opinfo_support.py``
runs float32's first sample) and by a sweep of edge values; each case failed before its fix:

* ``torch.maximum``, ``minimum``, ``amax``, ``amin`` and ``clamp`` give NaN where an input is NaN.
  C++'s ``std::max(1.0f, NAN)`` is 1, OpenMP's built-in ``max`` reduction drops a NaN lane, and
  Triton's default ``tl.maximum`` / ``tl.max`` (PTX ``max.f32``) return the other operand.
* ``logsumexp`` of a row holding +inf is +inf, of a row of -inf is -inf (``x - max`` was inf - inf).
* ``floor`` and ``ceil`` of an integer stopped Triton (``tl.floor`` takes floats only): they are the integer.
* ``~x`` of an integer flips its bits; it was lowered as ``logical_not`` (``~5`` gave 0, not -6).
* ``amin`` was decomposed as ``-amax(-x)``: wrong for unsigned integers (``-0`` and ``-5`` wrap) and
  at a signed type's minimum (``-(-128)`` is -128 in int8).
* On Triton's ``int1`` (bool), ``True + True`` wrapped to 0: arithmetic on bools is logic.
* ``sigmoid``, ``sinh``, ``cosh``, ``logit``, ``logsumexp``... of a uint8 or bool: the
  decompositions negated the integer before converting it (uint8 ``-5`` is 251).
* ``(-inf) ** 2.5`` is inf; the Triton rule ``exp2(c * log2(x))`` gave NaN.
* An integer ``dot`` came back int64 (its sum's type), so did ``sum(dtype=torch.int32)`` (torch's
  ``tensordot`` folds into one), and an integer ``baddbmm`` with ``beta=0.2`` came back float32.
* Degenerate shapes stopped course_lib's decompositions, and the graph went to torch's AOT: ``t``
  of a 1-D tensor, ``mean`` of a 0-d one, ``roll`` along an empty dim, ``index_select`` of a 0-d one.
  The variance of no values (or of fewer than the correction) was ``0 / -1 = -0.0``, not NaN.
  ``_batch_norm_with_update`` had no functional form.
* Triton's integer max started at ``float("-inf")``, which made the tile float32: int32 and int64
  values beyond 2**24 were rounded.
"""

import pytest
import torch

import course_lib.inductor as ind
from course_lib import compat, decomp

CODEGENS = ["cpp", "triton"]  # Triton runs on a GPU where there is one, else in its interpreter (course_lib.env)
NAN, INF = float("nan"), float("inf")


def _compiled(fn, *args, codegen):
    graph = compat.make_fx(fn, *args, decompositions=decomp.DECOMPOSITIONS)
    return ind.compile_graph(graph, list(args), codegen=codegen)


def _check(fn, *args, codegen, exact=True):
    """The compiled graph's outputs equal eager's (on the same device): same dtype, NaN where eager has NaN."""
    if codegen == "triton" and torch.cuda.is_available():
        args = [a.cuda() for a in args]
    got = _compiled(fn, *args, codegen=codegen)(*args)
    want = fn(*args)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = {"atol": 0, "rtol": 0} if exact else {}
        torch.testing.assert_close(g, w, equal_nan=True, **tol)


def _with_specials(gen, shape, fraction=0.05):
    """Random floats with NaN, +inf and -inf sprinkled at random places."""
    x = torch.randn(shape, generator=gen)
    for value in (NAN, INF, -INF):
        x[torch.rand(shape, generator=gen) < fraction] = value
    return x


@pytest.mark.parametrize("codegen", CODEGENS)
@pytest.mark.parametrize("shape", [(7, 33), (3, 1000)])
def test_max_and_min_keep_nan(codegen, shape):
    gen = torch.Generator().manual_seed(sum(shape))
    x, y = _with_specials(gen, shape), _with_specials(gen, shape)
    x[0] = NAN  # a row of NaN, and rows with none (the reductions' other rows)
    x[1] = torch.randn(shape[1], generator=gen)
    lo, hi = _with_specials(gen, shape[1:]), _with_specials(gen, shape[1:])

    def fn(x, y, lo, hi):
        return (torch.maximum(x, y), torch.minimum(x, y), x.amax(1), x.amin(1), torch.relu(x),
                torch.clamp(x, min=lo, max=hi), torch.clamp(x, -0.5, 0.5))  # fmt: skip

    _check(fn, x, y, lo, hi, codegen=codegen)


@pytest.mark.parametrize("codegen", CODEGENS)
def test_a_whole_tensor_max_keeps_nan(codegen):
    """A reduction to one value: C++ splits it over threads and vector lanes, each combining with NaN kept."""
    gen = torch.Generator().manual_seed(0)
    n = 1 << 16 if codegen == "cpp" else 4096  # past the C++ parallel threshold
    for where in (0, n // 3, n - 1):
        x = torch.randn(n, generator=gen)
        x[where] = NAN
        _check(lambda x: (x.amax(), x.amin(), x.max()), x, codegen=codegen)


@pytest.mark.parametrize("codegen", CODEGENS)
def test_logsumexp_and_softmax_of_infinite_rows(codegen):
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [-INF] * 4, [1.0, INF, 0.0, -INF], [NAN, 0.0, 1.0, 2.0]])
    _check(lambda x: (torch.logsumexp(x, 1), torch.softmax(x, 1)), x, codegen=codegen, exact=False)
    a = torch.tensor([1.0, INF, -INF, 3.0, NAN, 100.0, -100.0])
    b = torch.tensor([1.0, INF, -INF, -2.0, 0.0, -100.0, 100.0])
    _check(torch.logaddexp, a, b, codegen=codegen, exact=False)  # (a decomposition since this session)


INT_DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


@pytest.mark.parametrize("codegen", CODEGENS)
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_min_max_and_bitwise_not(codegen, dtype):
    info = torch.iinfo(dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(info.min, info.max, (6, 9), generator=gen, dtype=torch.int64).to(dtype)
    x[0, 3], x[1, 0], x[2, 8] = info.min, info.max, 0  # the extremes, and zero for the unsigned rows

    def fn(x):
        return ~x, x.amin(1), x.amax(1), x.amin(), torch.minimum(x, x.flip(0)), torch.relu(x), x.floor(), x.ceil()

    _check(fn, x, codegen=codegen)


@pytest.mark.parametrize("codegen", CODEGENS)
def test_arithmetic_on_bools_is_logic(codegen):
    gen = torch.Generator().manual_seed(2)
    a, b = (torch.rand(5, 8, generator=gen) < 0.5 for _ in range(2))

    def fn(a, b):
        return a + b, a * b, torch.maximum(a, b), torch.minimum(a, b), ~a, a.amin(1), a.amax(1), a.any(1), a.all(1)

    _check(fn, a, b, codegen=codegen)


@pytest.mark.parametrize("codegen", CODEGENS)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.bool, torch.int32], ids=str)
def test_float_ops_of_integers_convert_first(codegen, dtype):
    x = torch.tensor([0, 1, 5, 200, 255], dtype=torch.uint8).to(dtype)

    def fn(x):
        return (torch.sigmoid(x), torch.sinh(x), torch.cosh(x), torch.logit(x), torch.logsumexp(x, 0),
                torch.expm1(x), torch.log1p(x), torch.exp2(x), torch.sign(x))  # fmt: skip

    _check(fn, x, codegen=codegen, exact=False)


@pytest.mark.parametrize("codegen", CODEGENS)
def test_fractional_power_of_minus_infinity(codegen):
    x = torch.tensor([-INF, INF, 4.0, -1.0, 0.0, -0.0])
    _check(lambda x: (x**2.5, x**-1.5, x**3.0), x, codegen=codegen, exact=False)


def test_integer_products_keep_their_dtype():
    """An integer sum is int64, but dot keeps int32; baddbmm's float scales are truncated to integers first."""
    a = torch.tensor([100, 27, -3], dtype=torch.int32)
    _check(torch.dot, a, a, codegen="cpp")
    x, m = torch.arange(8).view(2, 2, 2), torch.arange(8).view(2, 2, 2) % 3
    _check(lambda x, m: torch.baddbmm(x, m, m, beta=1.7, alpha=2.6), x, m, codegen="cpp")
    a, b = torch.arange(4, dtype=torch.int32).view(2, 2, 1), torch.arange(4, dtype=torch.int32).view(2, 1, 2)
    _check(lambda a, b: torch.tensordot(a, b, dims=([0, 1], [2, 0])), a, b, codegen="cpp")  # sum(dtype=int32)


def _strict_compiled(fn, monkeypatch):
    """``fn`` through ``torch.compile(backend="course_lib")``, any fallback to eager or torch's AOT an error."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    compat.dynamo_reset()
    return torch.compile(fn, backend="course_lib")


@pytest.mark.parametrize(
    "fn, shape",
    [
        (lambda x: x.t() * 2, (5,)),  # t of a 1-D tensor is a view of it (the decomposition returned x itself)
        (lambda x: x.mean(0) + x.sum(-1), ()),  # a 0-d tensor's dim 0 is the whole tensor
        (lambda x: x.roll(2, 1), (3, 0)),  # nothing to move along an empty dim (was a modulo by zero)
        (lambda x: x.index_select(0, torch.tensor([0])), ()),  # a 0-d tensor indexed as one element
        (lambda x: x.var(0), (0, 5)),  # fewer values than the correction: 0 / 0 is NaN (was 0 / -1 = -0.0)
        (lambda x: x.var(0), (1, 5)),
        (lambda x: x.flip(1).reshape(-1) * 2, (0, 3)),  # no element to index (the flat index was split by 0)
    ],
    ids=["t_of_1d", "mean_of_0d", "roll_of_empty", "index_select_of_0d", "var_of_none", "var_of_one", "flip_of_empty"],
)
def test_decompositions_of_degenerate_shapes(fn, shape, monkeypatch):
    x = torch.randn(shape, requires_grad=True)
    xe = x.detach().clone().requires_grad_(True)
    out, ref = _strict_compiled(fn, monkeypatch)(x), fn(xe)
    torch.testing.assert_close(out, ref, equal_nan=True)
    if ref.numel() and not ref.isnan().any():
        out.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)


def test_batch_norm_ops_called_directly(monkeypatch):
    """``_batch_norm_with_update`` (training, writes the running statistics) had no functional form;
    eval-mode ``native_batch_norm`` on the CPU saves no statistics (empty tensors, as eager)."""
    x, w, b = torch.randn(4, 3, 5), torch.rand(3) + 0.5, torch.randn(3)

    def update(x, w, b, rm, rv):
        return torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)[:3]

    def evaluate(x, w, b, rm, rv):
        return torch.ops.aten.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)

    for fn in (update, evaluate):
        stats = [torch.rand(3), torch.rand(3) + 1]
        stats_eager = [s.clone() for s in stats]
        got = _strict_compiled(fn, monkeypatch)(x, w, b, *stats)
        want = fn(x, w, b, *stats_eager)
        for g, e in zip([*got, *stats], [*want, *stats_eager]):
            assert g.shape == e.shape
            torch.testing.assert_close(g, e)
