"""course_lib.inductor with symbolic sizes: compile once, run many sizes, checked against eager.

Two ways in: course_lib.dynamo's contract (``gm.meta["course_dynamic_dims"]`` on a graph with
real example inputs) and real Dynamo (``dynamic=True``, automatic dynamic), whose graphs reach
``compile_fx`` with ``SymInt`` sizes.
"""

from __future__ import annotations

import random

import pytest
import sympy
import torch

import course_lib.inductor as ind
from course_lib import compat, decomp
from course_lib.inductor import sizevars
from course_lib.inductor.codegen.wrapper import SizeGuardError
from course_lib.inductor.lowering import Unsupported


def pointwise_broadcast(x, y):
    return (torch.relu(x * 2 + y) - y.exp(),)


def softmax_rows(x, y):
    return (torch.softmax(x + y, -1),)


def reduce_dynamic_dim(x, y):
    return (x.mean(0), x.var(0), (x * y).sum())


def view_and_reduce(x, y):
    return ((x * 2 + y).reshape(-1, 4).sum(1).relu(), x.t().contiguous() + 1)


FUNCTIONS = [pointwise_broadcast, softmax_rows, reduce_dynamic_dim, view_and_reduce]


def _compile_marked(fn, example, dims, record):
    gm = torch.fx.symbolic_trace(fn)
    gm.meta["course_dynamic_dims"] = dims
    return ind.compile_fx(gm, example, record=record)


def _assert_matches(out, ref):
    assert len(out) == len(ref)
    for a, b in zip(out, ref, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_marked_dim_compiles_once_for_random_sizes(fn):
    record = []
    compiled = _compile_marked(fn, [torch.randn(8, 4), torch.randn(4)], {0: (0,)}, record)
    assert [kind for kind, _ in record] == ["compiled"]
    graph = record[0][1]
    assert graph.dynamic and "ks0" in graph.kernel_code
    assert "s0 = arg0_1.size(0)" in graph.wrapper_code
    rng = random.Random(0)
    for n in [2, 3, 8] + [rng.randrange(2, 300) for _ in range(5)]:
        x, y = torch.randn(n, 4), torch.randn(4)
        _assert_matches(compiled(x, y), fn(x, y))
    assert len(record) == 1  # no recompilation


def test_sizes_zero_and_one_are_not_run_by_the_symbolic_graph():
    record = []
    compiled = _compile_marked(reduce_dynamic_dim, [torch.randn(8, 4), torch.randn(4)], {0: (0,)}, record)
    assert "check_guards(dict(s0=s0))" in record[0][1].wrapper_code
    for n in (0, 1):  # torch specialises them (0/1 specialisation): a recompile, never a wrong answer
        with pytest.raises(SizeGuardError, match=">= 2"):
            compiled(torch.randn(n, 4), torch.randn(4))


def test_loop_bound_is_a_size_argument():
    record = []
    _compile_marked(softmax_rows, [torch.randn(8, 4), torch.randn(4)], {0: (0,)}, record)
    src = record[0][1].kernel_code
    assert "const int64_t ks0" in src and "x0 < ks0" in src


def test_two_dynamic_dims_and_a_static_guard():
    record = []
    compiled = _compile_marked(softmax_rows, [torch.randn(6, 10), torch.randn(10)], {0: (0, 1), 1: (0,)}, record)
    graph = record[0][1]
    # x's two dims and y's one: y's size is x's last (torch's broadcast guard replaced it)
    assert [s.name for s in graph.graph.sizevars.symbols] == ["s0", "s1"]
    for n, m in [(3, 5), (7, 33), (2, 2)]:
        x, y = torch.randn(n, m), torch.randn(m)
        _assert_matches(compiled(x, y), softmax_rows(x, y))
    static = []
    compiled = _compile_marked(softmax_rows, [torch.randn(6, 10), torch.randn(10)], {0: (0,)}, static)
    assert any("[s0, 10]" in g for g in static[0][1].guards)
    with pytest.raises(SizeGuardError, match="compiled for"):
        compiled(torch.randn(6, 11), torch.randn(11))


def test_size_guard_from_torch_trace():
    def halves(x):
        return (x.view(x.shape[0] // 2, -1).sum(0),)

    record = []
    compiled = _compile_marked(halves, [torch.randn(8, 3)], {0: (0,)}, record)
    assert record[0][1].graph.sizevars.guards, "torch's trace guarded the size"
    for n in (4, 10, 16):
        x = torch.randn(n, 3)
        _assert_matches(compiled(x), halves(x))
    with pytest.raises(SizeGuardError, match="guard"):
        compiled(torch.randn(2, 3))  # s0 // 2 == 1 would be a size-1 dim: torch specialised it away


def test_real_dynamo_dynamic_true_compiles_one_graph():
    record = []
    torch._dynamo.reset()
    compiled = torch.compile(view_and_reduce, backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record),
                             dynamic=True)  # fmt: skip
    for n in (3, 8, 17, 64):
        x, y = torch.randn(n, 4), torch.randn(4)
        _assert_matches(compiled(x, y), view_and_reduce(x, y))
    assert [kind for kind, _ in record] == ["compiled"]
    assert record[0][1].dynamic and "ks0" in record[0][1].kernel_code


def test_automatic_dynamic_second_size_is_symbolic():
    record = []
    torch._dynamo.reset()
    compiled = torch.compile(softmax_rows, backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record))
    for n in (3, 8, 17, 30):
        x, y = torch.randn(n, 4), torch.randn(4)
        _assert_matches(compiled(x, y), softmax_rows(x, y))
    assert [(kind, g.dynamic) for kind, g in record] == [("compiled", False), ("compiled", True)]


@pytest.mark.parametrize("fn", [pointwise_broadcast, view_and_reduce], ids=lambda f: f.__name__)
def test_triton_compiles_each_size_of_a_symbolic_graph(fn):
    """The Triton path compiles static sizes only: a graph with a size symbol (Dynamo's automatic
    dynamic shapes made one for Swin, Funnel and DBRX on the H100) is compiled per size at call time."""
    gm = torch.fx.symbolic_trace(fn)
    traced, fakes, _ = compat.make_fx_dynamic(gm, [torch.randn(8, 4), torch.randn(4)], {0: (0,)}, decomp.DECOMPOSITIONS)
    compiled = ind.compile_graph(traced, fakes, codegen="triton")
    assert compiled.dynamic and not compiled.compiled
    for n in (8, 12, 8):
        x, y = torch.randn(n, 4), torch.randn(4)
        _assert_matches(compiled(x, y), fn(x, y))
        assert not compiled.graph.dynamic and compiled.codegen == "triton"  # the latest size's CompiledGraph
    assert sorted(k[0] for k in compiled.compiled) == [(8, 4), (12, 4)]


def test_automatic_dynamic_through_the_triton_path():
    record = []
    torch._dynamo.reset()
    compiled = torch.compile(
        softmax_rows, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen="triton", record=record)
    )
    for n in (3, 8, 17, 8):
        x, y = torch.randn(n, 4), torch.randn(4)
        _assert_matches(compiled(x, y), softmax_rows(x, y))
    assert [(kind, g.dynamic) for kind, g in record] == [("compiled", False), ("compiled", True)]
    assert len(record[1][1].compiled) == 2  # sizes 8 and 17 (3 was the static graph's)


def test_bad_dynamic_dims_is_a_clear_error():
    gm = torch.fx.symbolic_trace(pointwise_broadcast)
    gm.meta["course_dynamic_dims"] = {5: (0,)}
    record = []
    ind.compile_fx(gm, [torch.randn(8, 4), torch.randn(4)], record=record)
    assert record[0][0] == "aot-fallback" and "not tensors" in record[0][1]


def test_split_div_mod_with_a_size_symbol():
    s0 = sizevars.size_symbol("s0")
    i0, i1 = sizevars.sym("i0"), sizevars.sym("i1")
    flat = i0 * s0 + i1
    q, r = sizevars.split_div_mod(flat, s0, {i0: 4, i1: s0})
    assert (q, r) == (i0, i1)
    q, r = sizevars.split_div_mod(flat, 3, {i0: 4, i1: s0})  # not provable: kept as // and %
    assert isinstance(q, sizevars.FloorDiv) and isinstance(r, sizevars.ModIdx)
    assert sizevars.contiguous_strides((s0, 4, s0)) == (4 * s0, s0, 1)
    assert sizevars.SizeVars({s0: 5}).hint(sympy.Integer(3) * s0) == 15


def test_all_course_path_refuses_a_size_baked_into_the_trace():
    # course_lib.decomp traces real tensors: mean over the dynamic dim divides by the constant 8
    with pytest.raises(Unsupported, match="example size of a dynamic dim"):
        ind.compile_dynamic(reduce_dynamic_dim, torch.randn(8, 4), torch.randn(4), dynamic={0: (0,)})


@pytest.mark.parametrize("fn", [pointwise_broadcast, softmax_rows], ids=lambda f: f.__name__)
def test_all_course_path_course_fake_symbols(fn):
    """course_lib.decomp + course_lib.fake (its own ShapeEnv and symbols) + course_lib.inductor."""
    compiled = ind.compile_dynamic(fn, torch.randn(8, 4), torch.randn(4), dynamic={0: (0,)})
    assert compiled.dynamic and "ks0" in compiled.kernel_code
    rng = random.Random(1)
    for n in [2, 5] + [rng.randrange(2, 200) for _ in range(4)]:
        x, y = torch.randn(n, 4), torch.randn(4)
        _assert_matches(compiled(x, y), fn(x, y))


def test_all_course_path_checks_course_fake_guards():
    def add(x, z):
        return (x + z,)

    # both dim 0 dynamic without duck sizing: two symbols, and course_lib.fake guards Eq(s0, s1)
    compiled = ind.compile_dynamic(add, torch.randn(6, 3), torch.randn(6, 3), dynamic={0: (0,), 1: (0,)})
    assert len(compiled.graph.sizevars.guards) == 1
    x = torch.randn(9, 3)
    _assert_matches(compiled(x, x + 1), add(x, x + 1))
    with pytest.raises(SizeGuardError, match="guard"):
        compiled(torch.randn(9, 3), torch.randn(7, 3))


def test_training_with_automatic_dynamic_through_the_triton_path(monkeypatch):
    """Forward and backward graphs with a size symbol (the forward returns the size for the backward):
    each size compiled through the Triton path, no fallback, gradients as eager's."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    record = []
    compiled = torch.compile(model, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen="triton", record=record))
    for n in (3, 8, 17):
        x = torch.randn(n, 8, requires_grad=True)
        compiled(x).pow(2).sum().backward()
        got, x.grad = x.grad, None
        model(x).pow(2).sum().backward()
        torch.testing.assert_close(got, x.grad, rtol=1e-4, atol=1e-5)
    assert [type(g).__name__ for _, g in record] == ["CompiledGraph"] * 2 + ["SpecializingGraph"] * 2


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_select_at_a_negative_index_of_a_symbolic_dim(codegen):
    """``x[:, -1]`` on a dim of size s0 selects index s0 - 1, a size expression (Funnel on the H100 with
    automatic dynamic shapes: "Argument of Integer should be of numeric type, got s0 - 1")."""

    def last(x):
        return (x[:, -1] * 2, x[-1] + 1)

    torch._dynamo.reset()
    record = []
    compiled = torch.compile(last, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen=codegen, record=record))
    for n in (3, 8, 17):
        x = torch.randn(n, n + 1)
        _assert_matches(compiled(x), last(x))
    assert [(kind, g.dynamic) for kind, g in record] == [("compiled", False), ("compiled", True)], record


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_slice_bounds_clamped_against_a_symbolic_dim(codegen):
    """``y[:, -1023:]`` of a length s0: torch clamps the start to 0 while s0 <= 1023 and guards that.
    The course took the start as s0 - 1023 and returned 1023 rows, read past the end (AFMoE's
    sliding-window cache, trained at several lengths). Past the guard, Dynamo compiles again and
    the start is s0 - 1023."""

    table = torch.randn(2048, 3)

    def window(x):
        y, n = x.sin(), x.shape[1]
        # a bound that is itself symbolic: -s0 (Qwen2-style caches), 2048 - s0 of a static table (LED);
        # a step of 2 (torch's size is FloorDiv(s0, 2))
        return (y[:, -1023:] * 2, y[:, :1000] + 1, y[:, 2:-1] - 1, y[:, -n:] * 3, table[: 2048 - n] + 1, y[:, 0:-1:2])

    _matches_at_lengths(window, codegen, (8, 12, 5, 1030, 1040))


def _matches_at_lengths(fn, codegen, lengths):
    """``fn`` of a ``[2, n, 3]`` input through real Dynamo at each length ``n``: same shapes and values
    as eager, every graph compiled by the course, one of them with a size symbol."""
    torch._dynamo.reset()
    record = []
    compiled = torch.compile(fn, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen=codegen, record=record))
    device = "cuda" if codegen == "triton" and torch.cuda.is_available() else "cpu"  # else the interpreter's
    for n in lengths:
        x = torch.randn(2, n, 3, device=device)
        got, want = compiled(x), fn(x)
        assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in want], n
        _assert_matches(got, want)
    assert [kind for kind, _ in record] == ["compiled"] * len(record) and any(g.dynamic for _, g in record), record


def test_cpp_size_expression_of_a_negative_operand_floors_like_python(tmp_path):
    """torch pads a length to a block as ``s0 + (-s0 % 128)`` (LongT5's blocks). C's ``%`` and ``/``
    truncate toward 0, Python's floor: printed as C's own, ``-s0 % 128`` was ``-s0`` and the padded
    length 0. The C++ printer now floors where the operand may be negative."""
    import shutil
    import subprocess

    from course_lib.inductor.codegen.cpp import HEADER, cpp_index
    from course_lib.inductor.sizevars import FloorDiv, ModIdx, size_symbol

    if shutil.which("g++") is None:
        pytest.skip("no g++")
    s0 = size_symbol("s0")
    exprs = [s0 + ModIdx(-s0, 128), FloorDiv(-s0, 8), ModIdx(3 - s0, 5), FloorDiv(s0, 4), FloorDiv(7 - s0, 3),
             FloorDiv(s0 - ModIdx(s0, 512), 512), FloorDiv(FloorDiv(1 - s0, 2) + 4, 3),
             sizevars.Max(0, 2048 - s0), sizevars.Min(256, s0) + 1]  # fmt: skip
    body = "".join(f'printf("%lld ", (long long)({cpp_index(e)}));' for e in exprs)
    src = tmp_path / "sizes.cpp"
    helpers = HEADER[HEADER.index("#ifndef COURSE_PYDIV") : HEADER.index("#ifndef COURSE_HALF")]
    src.write_text("#include <cstdio>\n#include <cstdint>\n#include <algorithm>\n" + helpers +
                   f"int main(int argc, char** argv) {{ int64_t s0 = atoll(argv[1]); {body} return 0; }}\n")  # fmt: skip
    subprocess.run(["g++", "-include", "cstdlib", "-o", str(tmp_path / "sizes"), str(src)], check=True)
    for n in (1, 2, 3, 12, 127, 128, 300, 511, 512, 513, 1025):
        got = subprocess.run([str(tmp_path / "sizes"), str(n)], capture_output=True, text=True, check=True).stdout
        assert [int(v) for v in got.split()] == [int(e.subs(s0, n)) for e in exprs], n


def _size_exprs(s0, s1):
    """Size expressions of the kinds real models make: padding to a block, blocks of it, clamps."""
    padded = s0 + sizevars.ModIdx(-s0, 128)
    return [
        padded, sizevars.FloorDiv(padded, 128), s0 + sizevars.ModIdx(64 - sizevars.ModIdx(s0, 64), 64),
        3 * sizevars.FloorDiv(s0, 2) - s1, sizevars.ModIdx(s0 * s1 + 7, 9), sizevars.FloorDiv(2048 - s0, 3),
        sizevars.Max(1, sizevars.FloorDiv(s0, 2)), sizevars.Max(0, 2048 - s0), sizevars.Min(256, s0) - s1,
        sizevars.FloorDiv(s0 * s1, s1 + 1), s0**2 - 4 * s1,
    ]  # fmt: skip


def test_size_bounds_hold_for_every_admitted_size():
    """size_bounds is interval arithmetic over sizes >= 2: every value at real sizes lies inside."""
    s0, s1 = sizevars.size_symbol("s0"), sizevars.size_symbol("s1")
    rng = random.Random(0)
    sizes = [(a, b) for a in (2, 3, 63, 64, 65, 128, 129, 300, 2047, 2049, 5000) for b in (2, 3, 17)]
    sizes += [(rng.randrange(2, 9000), rng.randrange(2, 50)) for _ in range(200)]
    for expr in _size_exprs(s0, s1):
        lo, hi = sizevars.size_bounds(expr)
        for a, b in sizes:
            v = int(expr.xreplace({s0: sympy.Integer(a), s1: sympy.Integer(b)}))
            assert (lo is None or lo <= v) and (hi is None or v <= hi), (expr, a, b, v, lo, hi)


def test_max_min_and_comparisons_decided_by_size_bounds():
    """torch writes a contiguous stride as Max(1, s0 // 2)*d; sizes are at least 2, so the Max goes.
    A Max the bounds cannot decide stays, and prints."""
    import torch.utils._sympy.functions as torch_fns

    s0 = sizevars.size_symbol("s0")
    padded = s0 + sizevars.ModIdx(-s0, 128)
    assert sizevars.Max(1, sizevars.FloorDiv(s0, 2)) == sizevars.FloorDiv(s0, 2)
    assert sizevars.Max(1, padded) == padded and sizevars.Min(2, s0) == 2
    assert sizevars.Max(1, sizevars.FloorDiv(padded, 128)) == sizevars.FloorDiv(padded, 128)  # >= 1 block
    assert isinstance(sizevars.Max(0, 2048 - s0), sizevars.Max) and isinstance(sizevars.Min(256, s0), sizevars.Min)
    assert sizevars.from_torch(torch_fns.Max(1, torch_fns.FloorDiv(s0, 2))) == sizevars.FloorDiv(s0, 2)
    assert isinstance(sizevars.from_torch(torch_fns.Min(256, s0)), sizevars.Min)
    assert sizevars.size_bounds(sizevars.Min(256, s0))[1] == 256 and sizevars.size_bounds(2048 - s0)[1] == 2046
    assert sizevars.nonnegative(s0 - sizevars.ModIdx(s0, 512)) and not sizevars.nonnegative(3 - s0)
    # a block length from a padded length: (p // (p // 128)) is 128 (LongT5's blocks); not for p + 1
    assert sizevars.FloorDiv(padded, sizevars.FloorDiv(padded, 128)) == 128
    assert sizevars.FloorDiv(padded + 1, sizevars.FloorDiv(padded + 1, 128)) != 128
    whole = s0 - sizevars.ModIdx(s0, 512)  # Pegasus-X: a length padded by a block more, over its blocks
    assert sizevars.FloorDiv(whole + 512, sizevars.FloorDiv(whole, 512) + 1) == 512
    assert sizevars.FloorDiv(s0, sizevars.FloorDiv(s0, 2)) != 2  # s0 = 3: 3 // 1 is 3
    assert sizevars.FloorDiv(sizevars.FloorDiv(s0, 2), 2) == sizevars.FloorDiv(s0, 4)
    for good in (padded, s0 + sizevars.ModIdx(128 - sizevars.ModIdx(s0, 128), 128), 256 * s0, 128 * s0 + padded):
        assert sizevars.multiple_of(good, 128), good
    for bad in (s0 + sizevars.ModIdx(-s0, 64), padded + 1, 2 * s0, s0 + sizevars.ModIdx(s0, 128)):
        assert not sizevars.multiple_of(bad, 128), bad
    for n in range(2, 700):  # the rules against the numbers
        p = n + (-n) % 128
        assert p // (p // 128) == 128 and (n // 2) // 2 == n // 4 and (n - n % 512 + 512) // (n // 512 + 1) == 512


def padded_blocks(x):
    """Blocks of a length padded to 4 (as LongT5 cuts its sequence), and a clamp torch keeps as
    Max(0, 20 - s0) (sym_max: no guard), both in sizes of the compiled graph."""
    n = x.shape[1]
    y = torch.nn.functional.pad(x, (0, 0, 0, (-n) % 4))
    blocks = y.shape[1] // 4
    z = y.reshape(2, blocks, y.shape[1] // blocks, 3)
    w = torch.nn.functional.pad(x, (0, 0, 0, torch.sym_max(0, 20 - n)))
    return z.sum(2) * 2, w + 1, z.amax(1)


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_padded_blocks_and_an_undecided_max_compile(codegen):
    _matches_at_lengths(padded_blocks, codegen, (8, 13, 5, 30, 7))


class _TruncInt(int):
    """An int whose ``//`` and ``%`` truncate toward 0, as compiled Triton's (``sdiv``/``srem``) and C's."""

    def __floordiv__(self, other):
        q = abs(int(self)) // abs(int(other))
        return _TruncInt(q if (self < 0) == (other < 0) else -q)

    def __mod__(self, other):
        return _TruncInt(int(self) - int(other) * int(self // other))

    def __rfloordiv__(self, other):
        return _TruncInt(other) // self

    def __rmod__(self, other):
        return _TruncInt(other) % self

    def __add__(self, other):
        return _TruncInt(int(self) + int(other))

    def __mul__(self, other):
        return _TruncInt(int(self) * int(other))

    def __sub__(self, other):
        return _TruncInt(int(self) - int(other))

    def __rsub__(self, other):
        return _TruncInt(int(other) - int(self))

    def __neg__(self):
        return _TruncInt(-int(self))

    __radd__, __rmul__ = __add__, __mul__


def test_triton_size_expressions_floor_like_python_under_truncating_division():
    """Compiled Triton's integer // and % truncate toward 0; a size expression that may be negative
    (-ks0 % 128, a padding to a block) prints so that it gives Python's value all the same."""
    from course_lib.inductor.codegen.triton import py_index

    s0 = sizevars.size_symbol("ks0")
    F, M = sizevars.FloorDiv, sizevars.ModIdx
    exprs = [s0 + M(-s0, 128), F(-s0, 8), M(3 - s0, 5), F(7 - s0, 3), F(s0 - M(s0, 512), 512), F(F(1 - s0, 2) + 4, 3)]
    for e in exprs:
        code = py_index(e)
        for n in (2, 3, 7, 12, 127, 128, 300, 511, 512, 513, 1025):
            assert int(eval(code, {"ks0": _TruncInt(n)})) == int(e.subs(s0, n)), (e, code, n)
    assert _TruncInt(-7) // 2 == -3 and _TruncInt(-7) % 2 == -1  # the emulation truncates


def sizes_as_values(x):
    """A length used as a value: a tensor filled with it, a 0-dim tensor of it, an ``alpha`` of it."""
    n, d = x.shape[1], x.device
    return (x + torch.full((2, 1, 3), n, dtype=torch.float32, device=d), torch.full((4,), n, device=d) * 2,
            torch.add(x, x, alpha=n), x.sum(1) / torch.scalar_tensor(n, device=d))  # fmt: skip


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_a_size_used_as_a_value_compiles(codegen):
    """``torch.full(..., n)`` with ``n`` a size symbol (DeepSeek-V4): the fill value is the size
    expression (``index_expr``), not a number, so the code generators print it as a size."""
    _matches_at_lengths(sizes_as_values, codegen, (8, 12, 5))
