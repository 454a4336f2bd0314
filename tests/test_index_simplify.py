"""Index simplification with ranges (course_lib.inductor.sizevars.simplify_index).

The rules rewrite FloorDiv / ModIdx of sums of digits. Each is checked the only way that cannot be
fooled: random index expressions, evaluated at every point of their loops before and after.
"""

import itertools
import random

import pytest
import sympy
import torch

from course_lib.inductor import sizevars
from course_lib.inductor.compile_fx import compile_graph
from course_lib.inductor.sizevars import FloorDiv, ModIdx, index_bound, simplify_index, sym

X0, X1, R0 = sym("x0"), sym("x1"), sym("r0")


def _points(ranges):
    syms = list(ranges)
    for values in itertools.product(*(range(ranges[s]) for s in syms)):
        yield dict(zip(syms, map(sympy.Integer, values), strict=True))


def _value(expr, point) -> int:
    return int(sympy.sympify(expr).xreplace(point))


def _random_index(rng: random.Random, syms, depth: int):
    """A non-negative index expression: sums of multiples of symbols and of digits of such sums."""
    if depth == 0:
        return sum(rng.choice([1, 2, 3, 4, 8, 16]) * s for s in rng.sample(syms, rng.randint(1, len(syms))))
    inner = _random_index(rng, syms, depth - 1)
    parts = []
    for _ in range(rng.randint(1, 3)):
        k = rng.choice([2, 3, 4, 8, 16])
        parts.append(rng.choice([FloorDiv(inner, k), ModIdx(inner, k), ModIdx(FloorDiv(inner, k), rng.choice([2, 4]))]))
    return sum(rng.choice([1, 2, 4, 16, 32]) * p for p in parts) + rng.choice([0, 0, 1, 5, 16])


def _tree_size(e) -> int:
    return 1 + sum(_tree_size(a) for a in e.args)


@pytest.mark.parametrize("seed", range(40))
def test_simplified_index_has_the_same_value_everywhere(seed):
    rng = random.Random(seed)
    ranges = {X0: rng.choice([2, 3, 4]), X1: rng.choice([4, 8, 16]), R0: rng.choice([3, 8, 32])}
    expr = _random_index(rng, list(ranges), rng.randint(1, 3))
    simple = simplify_index(expr, ranges)
    assert _tree_size(simple) <= _tree_size(expr)
    for point in _points(ranges):
        assert _value(simple, point) == _value(expr, point), (expr, simple, point)
    bound = index_bound(simple, ranges)
    if bound is not None:
        assert max(_value(simple, p) for p in _points(ranges)) < bound


def test_digits_of_digits_become_affine():
    """Swin's window partition read through its reverse: the digits of ``16 x0 + x1`` taken in
    fours and put back together are ``r0 + 512 x0 + 32 x1``, one load a thread."""
    y = 16 * X0 + X1
    ranges = {X0: 2, X1: 16, R0: 32}
    expr = R0 + 512 * FloorDiv(FloorDiv(y, 4), 4) + 32 * ModIdx(y, 4) + 128 * ModIdx(FloorDiv(y, 4), 4)
    assert simplify_index(expr, ranges) == R0 + 512 * X0 + 32 * X1
    assert simplify_index(FloorDiv(expr, 32), ranges) == 16 * X0 + X1
    assert simplify_index(ModIdx(expr + 16, 32), ranges) == ModIdx(R0 + 16, 32)


def test_split_div_mod_of_a_sum_of_digits():
    """What decompose hands a view: a quotient and a remainder that nest no further."""
    ranges = {X0: 4, X1: 16}
    expr = 8 * ModIdx(X1, 4) + 2 * FloorDiv(X1, 4) + 64 * X0
    q, r = sizevars.split_div_mod(expr, 8, ranges)
    assert q == 8 * X0 + ModIdx(X1, 4) and r == 2 * FloorDiv(X1, 4)
    for point in _points(ranges):
        assert _value(q, point) == _value(expr, point) // 8 and _value(r, point) == _value(expr, point) % 8


def test_a_size_symbol_is_left_alone():
    """Dynamic shapes: a size symbol's multiple is not a digit this code can bound."""
    s0 = sizevars.size_symbol("s0")
    assert simplify_index(ModIdx(s0 * X0 + X1, 4), {X0: 3, X1: 4}) == ModIdx(s0 * X0 + X1, 4)


def test_digits_joined_under_a_size_modulus():
    """``c (x % m) + c m ((x // m) % s0)`` is ``c (x % (m s0))`` for a size ``s0`` too (T5Gemma at a
    second length: the join asked int() of ``s0`` and the graph ran in eager)."""
    x, s0 = sym("x0"), sizevars.size_symbol("s0")
    expr = 3 * ModIdx(x, 4) + 12 * ModIdx(FloorDiv(x, 4), s0)
    got = simplify_index(expr, {x: 20 * s0})
    assert got == 3 * ModIdx(x, 4 * s0)
    for xv, n in itertools.product(range(0, 300, 7), (2, 3, 7)):
        assert got.subs({x: xv, s0: n}) == expr.subs({x: xv, s0: n}), (xv, n)


def test_relative_shift_compiles_to_short_indices():
    """Funnel's relative-position attention shifts its positional scores with reshape, slice,
    reshape, slice, and the softmax kernel recomputes them through those views. Unsimplified, that
    kernel's loads printed lines of 4000 characters here (a megabyte in the real model, where gcc
    ran for minutes); simplified, about 120."""

    def shift(p, context_len):
        b, n, s, r = p.shape
        p = p.reshape(b, n, r, s)[:, :, 1:, :]
        return p.reshape(b, n, s, r - 1)[..., :context_len]

    def attention(q, k, pos):
        scores = q @ k.transpose(-1, -2) + shift(torch.einsum("bnid,jd->bnij", q, pos), q.shape[2])
        return scores.softmax(-1) @ k

    args = [torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8), torch.randn(32, 8)]
    gm = torch.fx.experimental.proxy_tensor.make_fx(attention)(*args)
    longest = {}
    for on in (True, False):
        with sizevars.simplification(on):
            compiled = compile_graph(gm, args)
        torch.testing.assert_close(compiled(*args)[0], attention(*args))
        longest[on] = max(map(len, compiled.kernel_code.splitlines()))
    assert longest[True] < 400 < 2000 < longest[False], longest
