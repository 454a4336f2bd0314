"""Index algebra in one room: sympy index expressions, sizes, and the symbols of dynamic sizes.

Teaches ``torch/_inductor/sizevars.py`` (``SizeVarAllocator``: simplify an index, evaluate a
size with its hint, guard a size) and the index functions of
``torch/utils/_sympy/functions.py`` (``FloorDiv``, ``ModularIndexing``).

Position: used by every stage after lowering. lowering.py builds indices with
:func:`flat_index` and :func:`decompose`, the scheduler renames a node's symbols to its
kernel's loop symbols (:func:`var_map`, :func:`body_in_kernel`), and the code generators print
what comes out.

Three kinds of symbol, all non-negative integers so sympy can simplify with them:

* ``i0, i1, ...`` / ``r0, ...``: a node's own element index and reduction index;
* ``x0, x1, ...`` / ``r0, ...``: a kernel's loop variables (after :func:`var_map`);
* ``s0, s1, ...``: a *size* that is not known until the call (dynamic shapes). A size is then a
  sympy expression (``s0``, ``4*s0``) instead of an int; :class:`SizeVars` keeps each symbol's
  example value (its *hint*, used only for heuristics such as fusion scores) and the guard that
  the compiled code needs.

Simplified against Inductor: no range analysis beyond "sizes are >= 2" (0/1 specialisation, as
Dynamo does, and interval bounds that follow from it, :func:`size_bounds`), ``Max``/``Min`` kept only
where those bounds cannot decide them, no ``CeilDiv``, and index simplification only for affine terms.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field

import sympy


class FloorDiv(sympy.Function):
    """``a // b`` for non-negative integers (Inductor: ``torch/utils/_sympy/functions.py``)."""

    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        if isinstance(a, FloorDiv) and a.args[1].is_Integer and b.is_Integer and a.args[1] > 0 and b > 0:
            return FloorDiv(a.args[0], a.args[1] * b)  # (x // 2) // 2 is x // 4 (torch writes the latter)
        if not b.is_Integer and b.has(FloorDiv):
            return _exact_quotient(a, b)
        return None

    def _eval_is_integer(self):
        return True

    def _eval_is_nonnegative(self):
        a, b = self.args
        return True if a.is_nonnegative and b.is_positive else None


def _exact_quotient(a, b):
    """``c`` where ``a == c*b`` exactly for an int ``c`` among ``b``'s divisors: a padded length over
    its block count is the block length (LongT5: ``p // (p // 128)``, Pegasus-X:
    ``(s0 - s0 % 512 + 512) // (s0 // 512 + 1)``, both 512 or 128 at every size). Writing
    ``c*(y // c)`` as ``y - y % c``, what is left of ``a - c*b`` must be remainders ``y % c`` of
    multiples of ``c``, which are 0. None otherwise."""
    lo, _ = size_bounds(a)
    if lo is None or lo < 1:  # a >= 1 and a == c*b: b is positive too
        return None
    for c in sorted({int(f.args[1]) for f in b.atoms(FloorDiv) if f.args[1].is_Integer and f.args[1] > 0}):
        times = sympy.expand(c * b).replace(
            lambda e, c=c: isinstance(e, FloorDiv) and e.args[1] == c,
            lambda e, c=c: (e.args[0] - ModIdx(e.args[0], c)) / c,
        )
        rest = sympy.expand(a - sympy.expand(times))
        if all(isinstance(t, ModIdx) and t.args[1] == c and multiple_of(t.args[0], c)
               for t in (u.as_coeff_Mul()[1] for u in sympy.Add.make_args(rest)) if t != 0):  # fmt: skip
            return sympy.Integer(c)
    return None


def multiple_of(expr, c: int) -> bool:
    """Provably a whole multiple of ``c``: ``128*k``, a sum of multiples, or a length padded up to a
    block, ``x + (-x) % 128`` (torch's form) or ``x + (128 - x % 128) % 128``."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr) % c == 0
    if expr.is_Mul:
        return any(multiple_of(f, c) for f in expr.args)
    if not expr.is_Add:
        return False
    if all(multiple_of(t, c) for t in expr.args):
        return True
    # y % m with c dividing m leaves y's remainder mod c: drop each such % and test what is left
    # (x + (-x) % c becomes x - x = 0; x + (c - x % c) % c becomes c)
    same_rest = expr.replace(ModIdx, lambda a, m: a if m.is_Integer and int(m) % c == 0 else ModIdx(a, m))
    return same_rest != expr and multiple_of(sympy.expand(same_rest), c)


class ModIdx(sympy.Function):
    """``a % b`` (Inductor's ``ModularIndexing`` with divisor 1), with Python's sign: torch's
    ``PythonMod`` of a size expression such as ``-s0 % 128`` (a padding to a block) maps here."""

    nargs = 2

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        return None

    def _eval_is_integer(self):
        return True

    def _eval_is_nonnegative(self):  # Python's sign: a positive divisor leaves 0 <= a % b < b
        return True if self.args[1].is_positive else None


class _MinMax(sympy.Function):
    """torch's ``Max``/``Min`` of sizes (a contiguous stride is ``Max(1, s0 // 2)*d``), kept only
    where :func:`size_bounds` cannot tell which argument wins. Not sympy's own ``Max``: that one
    tries to compare its arguments symbolically at every construction, which is slow on the
    nested size expressions of real models."""

    pick = max

    @classmethod
    def eval(cls, *args):
        if all(a.is_Integer for a in args):
            return sympy.Integer(cls.pick(int(a) for a in args))
        if len(args) == 1:
            return args[0]
        bounds = [size_bounds(a) for a in args]
        # an argument that cannot win: its best is no better than another argument's worst
        keep = [a for i, a in enumerate(args)
                if not any(cls._beats(b, bounds[i]) for j, b in enumerate(bounds) if j != i)]  # fmt: skip
        if len(keep) < len(args):
            return keep[0] if len(keep) == 1 else cls(*keep)
        return None

    @classmethod
    def _beats(cls, a: tuple, b: tuple) -> bool:
        if cls.pick is max:  # a's lowest >= b's highest
            return a[0] is not None and b[1] is not None and a[0] >= b[1]
        return a[1] is not None and b[0] is not None and a[1] <= b[0]

    def _eval_is_integer(self):
        return all(a.is_integer for a in self.args) or None


class Max(_MinMax):
    """``max`` of size expressions (C++ ``std::max``, Triton ``tl.maximum``, Python ``max``)."""

    pick = max

    def _eval_is_nonnegative(self):
        return True if any(a.is_nonnegative for a in self.args) else None


class Min(_MinMax):
    """``min`` of size expressions."""

    pick = min

    def _eval_is_nonnegative(self):
        return True if all(a.is_nonnegative for a in self.args) else None


#: the smallest value of a size symbol: sizes 0 and 1 are specialised (see :meth:`SizeVars.check`)
MIN_SIZE = 2


def size_bounds(expr) -> tuple:
    """``(lowest, highest)`` of an integer size expression over every call the guards admit (each
    size symbol at least :data:`MIN_SIZE`; an index symbol at least 0), by interval arithmetic;
    None for a side without a bound. Decides torch's ``Max(1, s0 // 2)`` (``s0 // 2`` is at least
    1) and which sizes print with C's plain ``/`` and ``%`` (:func:`nonnegative`)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr), int(expr)
    if expr.is_Symbol:
        return (MIN_SIZE if expr.is_positive else 0 if expr.is_nonnegative else None), None
    parts = [size_bounds(a) for a in expr.args]
    if expr.is_Add:
        lo, hi = _sum_side(p[0] for p in parts), _sum_side(p[1] for p in parts)
        for t in expr.args:  # x - x % c is c*(x // c): at least 0 for x >= 0, where the terms say -c + 1
            if isinstance(-t, ModIdx) and (-t).args[1].is_Integer and (-t).args[1] > 0:
                y, c = (-t).args
                whole, rest = size_bounds(c * FloorDiv(y, c)), size_bounds(sympy.expand(expr - t - y))
                alt = _sum_side((whole[0], rest[0])), _sum_side((whole[1], rest[1]))
                lo = alt[0] if lo is None or (alt[0] is not None and alt[0] > lo) else lo
                hi = alt[1] if hi is None or (alt[1] is not None and alt[1] < hi) else hi
        return lo, hi
    if expr.is_Mul:
        out = parts[0]
        for part in parts[1:]:
            out = _mul_bounds(out, part)
        return out
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
        out = parts[0]
        for _ in range(int(expr.exp) - 1):
            out = _mul_bounds(out, parts[0])
        return out
    if isinstance(expr, FloorDiv) and parts[1][0] is not None and parts[1][0] > 0:  # a positive divisor
        (lo, hi), (dlo, dhi) = parts
        if lo is not None and 0 < lo < dlo and dlo == dhi and multiple_of(expr.args[0], dlo):
            lo = dlo  # a positive multiple of the divisor (a padded length): at least one block
        low = None if lo is None else lo // dlo if lo < 0 else (lo // dhi if dhi is not None else 0)
        high = None if hi is None else hi // dlo if hi >= 0 else (hi // dhi if dhi is not None else -1)
        return low, high
    if isinstance(expr, ModIdx) and parts[1][0] is not None and parts[1][0] > 0:  # Python's sign: [0, m)
        (lo, hi), (_, dhi) = parts
        if lo is not None and lo >= 0 and hi is not None and dhi is not None and hi < parts[1][0]:
            return lo, hi  # already below the divisor
        return 0, None if dhi is None else dhi - 1
    if isinstance(expr, _MinMax):
        pick = expr.pick
        lows, highs = [p[0] for p in parts], [p[1] for p in parts]
        if pick is max:
            return max((v for v in lows if v is not None), default=None), (None if None in highs else max(highs))
        return (None if None in lows else min(lows)), min((v for v in highs if v is not None), default=None)
    return None, None


def nonnegative(expr) -> bool:
    """Provably at least 0 at every admitted size (sympy's assumptions, then :func:`size_bounds`)."""
    if sympy.sympify(expr).is_nonnegative:
        return True
    lo = size_bounds(expr)[0]
    return lo is not None and lo >= 0


def _sum_side(values):
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _mul_bounds(a: tuple, b: tuple) -> tuple:
    """Bounds of a product: exact for a constant factor and for two non-negative factors."""
    for (clo, chi), other in ((a, b), (b, a)):
        if clo is not None and clo == chi:  # a constant: scales (and flips when negative)
            lo, hi = (None if v is None else v * clo for v in other)
            return (lo, hi) if clo >= 0 else (hi, lo)
    if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
        return a[0] * b[0], None if a[1] is None or b[1] is None else a[1] * b[1]
    return None, None


def sym(name: str) -> sympy.Symbol:
    """An index variable: non-negative integer, so sympy can simplify with it."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def size_symbol(name: str) -> sympy.Symbol:
    """A size known only at call time (``s0``): a positive integer, as in torch's ShapeEnv."""
    return sympy.Symbol(name, integer=True, positive=True)


def is_static(size) -> bool:
    """True for a size that is a plain number (no size symbol in it)."""
    return isinstance(size, int) or (isinstance(size, sympy.Expr) and size.is_Integer)


def as_int(size):
    """An int for a static size, the sympy expression otherwise."""
    return int(size) if is_static(size) else sympy.sympify(size)


def prod(sizes):
    """Product of sizes; an int when every size is static."""
    return as_int(math.prod(sizes, start=sympy.Integer(1))) if sizes else 1


def contiguous_strides(shape) -> tuple:
    """Row-major strides of ``shape`` (a size-0 or size-1 dimension counts as 1)."""
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(as_int(acc))
        acc = acc * (max(size, 1) if is_static(size) else size)
    return tuple(reversed(strides))


def flat_index(idx, strides, offset=0) -> sympy.Expr:
    """``offset + sum(idx[d] * strides[d])``: where element ``idx`` lives in memory."""
    terms = (sympy.sympify(s) * i for i, s in zip(idx, strides, strict=False) if s != 0)
    return sympy.sympify(offset) + sum(terms, sympy.Integer(0))


def _linear_terms(expr: sympy.Expr):
    """``{symbol: coeff}, constant`` for an affine expression in the index symbols, or None.

    A coefficient may contain size symbols (``s1*i0``); index symbols are the non-size ones.
    """
    expr = sympy.expand(expr)
    coeffs, const = {}, sympy.Integer(0)
    for term in sympy.Add.make_args(expr):
        index_syms = [s for s in term.free_symbols if not s.is_positive]
        if not index_syms:
            const += term
            continue
        if len(index_syms) != 1:
            return None
        s = index_syms[0]
        c, rest = term.as_independent(s, as_Add=False)
        if rest != s:
            return None
        coeffs[s] = coeffs.get(s, 0) + c
    return coeffs, const


def _divides(divisor, c) -> bool:
    """Is ``c`` a whole multiple of ``divisor`` (ints, or polynomials in size symbols)?"""
    if is_static(c) and is_static(divisor):
        return int(c) % int(divisor) == 0
    q = sympy.cancel(sympy.sympify(c) / divisor)
    return sympy.fraction(q)[1] == 1 and q.is_integer is not False


def _below(expr, bound) -> bool:
    """Provably ``expr < bound`` (``expr`` is a sum of non-negative terms)?"""
    if is_static(expr) and is_static(bound):
        return int(expr) < int(bound)
    return bool(sympy.simplify(bound - 1 - expr).is_nonnegative)


def split_div_mod(expr: sympy.Expr, divisor, ranges: dict) -> tuple[sympy.Expr, sympy.Expr]:
    """``(expr // divisor, expr % divisor)``, simplified when the affine terms split cleanly.

    ``ranges`` maps each index symbol to its size. Terms whose coefficient is a multiple of
    ``divisor`` go to the quotient; if the remaining terms are provably in ``[0, divisor)``
    they are the remainder. Otherwise the result keeps ``FloorDiv``/``ModIdx``.
    """
    terms = _linear_terms(expr)
    if terms is not None and all(s in ranges for s in terms[0]):
        coeffs, const = terms
        q, r, hi = sympy.Integer(0), sympy.Integer(0), sympy.Integer(0)
        if const.is_Integer and is_static(divisor):
            q, r = sympy.Integer(int(const) // int(divisor)), sympy.Integer(int(const) % int(divisor))
        elif _divides(divisor, const):
            q = sympy.cancel(const / divisor)
        else:
            r = const
        hi = r
        ok = True
        for s, c in coeffs.items():
            if _divides(divisor, c):
                q += sympy.cancel(c / divisor) * s
            elif sympy.sympify(c).is_nonnegative:
                r += c * s
                hi += c * (ranges[s] - 1)
            else:
                ok = False
        if ok and _below(hi, divisor):
            return sympy.expand(q), sympy.expand(r)
    if not _SIMPLIFY[-1]:
        return FloorDiv(expr, divisor), ModIdx(expr, divisor)
    expr = simplify_index(expr, ranges)
    return _floordiv(expr, divisor, ranges), _mod(expr, divisor, ranges)


# ---------------------------------------------------------------------------
# index simplification with ranges: FloorDiv / ModIdx of sums of digits
# ---------------------------------------------------------------------------
#
# A view of a permuted tensor reads ``ModIdx(i, 4)`` and ``FloorDiv(i, 4)``: the digits of ``i``.
# A view of *that* (Swin's window partition and its reverse, Funnel's relative shift, and every
# producer recomputed inside a kernel that reads it through a view) takes digits of a sum of digits,
# and unsimplified, each level repeats the level below several times: Swin's backward printed index
# expressions of 90 000 nodes, Funnel's kernels source lines of a megabyte, and gcc ran for many
# minutes. Knowing each loop symbol's range undoes most of it, as Inductor's
# ``SizeVarAllocator.simplify_with_ranges`` and ``_join_dimensions`` do
# (torch/_inductor/sizevars.py). Every rule below holds for integers; the ones that split a sum
# need non-negative terms, so that what is left stays non-negative (the code generators print
# FloorDiv and ModIdx as C's truncating ``/`` and ``%``).


_SIMPLIFY = [True]


@contextlib.contextmanager
def simplification(on: bool):
    """Turn the simplification below off (``with simplification(False):``) to see what it saves."""
    _SIMPLIFY.append(on)
    try:
        yield
    finally:
        _SIMPLIFY.pop()


def _static_int(v) -> int | None:
    return int(v) if is_static(v) else None


def _is_atom(e) -> bool:
    return e.is_Symbol or isinstance(e, (FloorDiv, ModIdx))


def _terms(expr) -> tuple[dict, int] | None:
    """``{atom: coefficient}, constant`` of a sum of non-negative integer multiples of atoms (loop
    symbols, FloorDiv, ModIdx), or None for anything else (a size symbol, a product of atoms, a
    negative coefficient)."""
    coeffs: dict = {}
    const = 0
    for term in sympy.Add.make_args(sympy.expand(expr)):
        if term.is_Integer:
            const += int(term)
            continue
        c, atom = term.as_coeff_Mul()
        if not (c.is_Integer and _is_atom(atom)) or (atom.is_Symbol and atom.is_positive):
            return None
        coeffs[atom] = coeffs.get(atom, 0) + int(c)
    if const < 0 or any(c < 0 for c in coeffs.values()):
        return None
    return coeffs, const


def _sum(coeffs: dict, const: int = 0) -> sympy.Expr:
    return sympy.Add(sympy.Integer(const), *(c * a for a, c in coeffs.items() if c))


def index_bound(expr, ranges: dict) -> int | None:
    """An exclusive upper bound of a non-negative index expression whose symbols have the static
    trip counts ``ranges`` (None when one is unknown)."""
    if expr.is_Integer:
        return int(expr) + 1 if expr >= 0 else None
    if expr.is_Symbol:
        return _static_int(ranges[expr]) if expr in ranges else None
    if isinstance(expr, ModIdx):
        m, b = _static_int(expr.args[1]), index_bound(expr.args[0], ranges)
        return None if m is None else m if b is None else min(m, b)
    if isinstance(expr, FloorDiv):
        d, b = _static_int(expr.args[1]), index_bound(expr.args[0], ranges)
        return None if d is None or b is None else (b - 1) // d + 1
    terms = _terms(expr) if expr.is_Add or expr.is_Mul else None
    if terms is None:
        return None
    top = terms[1]
    for atom, c in terms[0].items():
        b = index_bound(atom, ranges)
        if b is None:
            return None
        top += c * (b - 1)
    return top + 1


def _floordiv(a, d, ranges: dict):
    """``a // d``: a sum's multiples of ``d`` leave as the quotient; the rest is dropped when it is
    provably below ``d``; ``(x // b) // d = x // (b d)``."""
    dv = _static_int(d)
    if dv is None:
        return FloorDiv(a, d)
    if isinstance(a, FloorDiv) and _static_int(a.args[1]) is not None:
        return _floordiv(a.args[0], dv * int(a.args[1]), ranges)
    terms = _terms(a)
    if terms is None:
        return FloorDiv(a, d)
    coeffs, const = terms
    quotient = _sum({x: c // dv for x, c in coeffs.items() if c % dv == 0}, const // dv)
    rest = _sum({x: c for x, c in coeffs.items() if c % dv}, const % dv)
    if rest == 0:
        return quotient
    bound = index_bound(rest, ranges)
    if bound is not None and bound <= dv:
        return quotient
    if quotient.is_Integer:  # nothing but the constant would leave: not simpler
        return FloorDiv(a, d)
    return quotient + _floordiv(rest, dv, ranges)  # (a FloorDiv left over meets the nested rule above)


def _mod(a, m, ranges: dict):
    """``a % m``: a sum's multiples of ``m`` drop out; the rest is the result when provably below
    ``m``; ``(x % n) % m = x % m`` when ``m`` divides ``n``."""
    mv = _static_int(m)
    if mv is None:
        return ModIdx(a, m)
    terms = _terms(a)
    if terms is None:
        return ModIdx(a, m)
    coeffs, const = terms
    rest = _sum({x: c for x, c in coeffs.items() if c % mv}, const % mv)
    if rest == 0:
        return sympy.Integer(0)
    bound = index_bound(rest, ranges)
    if bound is not None and bound <= mv:
        return rest
    if isinstance(rest, ModIdx) and _static_int(rest.args[1]) is not None and int(rest.args[1]) % mv == 0:
        return _mod(rest.args[0], mv, ranges)
    return ModIdx(rest, m)


def _join(expr, ranges: dict):
    """Put digits back together: ``c (x % m) + c m (x // m) = c x`` and
    ``c (x % m) + c m ((x // m) % n) = c (x % (m n))`` (Inductor's ``_join_dimensions``)."""
    terms = _terms(expr)
    if terms is None:
        return expr
    coeffs, const = terms
    changed = True
    while changed:
        changed = False
        for atom, c in list(coeffs.items()):
            if not isinstance(atom, ModIdx) or not c or _static_int(atom.args[1]) is None:
                continue
            x, m = atom.args[0], int(atom.args[1])
            high = FloorDiv(x, m)
            if coeffs.get(high) == c * m:  # the low digit and everything above it: x itself
                del coeffs[atom], coeffs[high]
                joined = _terms(c * x)
            else:
                pair = next(
                    (h for h in coeffs if isinstance(h, ModIdx) and h.args[0] == high and coeffs[h] == c * m
                     and h.args[1].is_positive),  # a static or a size modulus (T5Gemma: s0)
                    None,
                )  # fmt: skip
                if pair is None:
                    continue
                del coeffs[atom], coeffs[pair]
                joined = _terms(c * _mod(x, m * pair.args[1], ranges))
            if joined is None:
                return expr
            for a2, c2 in joined[0].items():
                coeffs[a2] = coeffs.get(a2, 0) + c2
            const += joined[1]
            changed = True
            break
    return _sum(coeffs, const)


def simplify_index(expr, ranges: dict):
    """``expr`` with its FloorDiv / ModIdx simplified knowing the loop symbols' trip counts
    (``ranges``); the value is the same at every point of the loops."""
    expr = sympy.sympify(expr)
    if not _SIMPLIFY[-1] or not expr.has(FloorDiv, ModIdx):
        return expr
    memo: dict = {}

    def walk(e):
        if e in memo:
            return memo[e]
        if isinstance(e, FloorDiv):
            out = _floordiv(walk(e.args[0]), e.args[1], ranges)
        elif isinstance(e, ModIdx):
            out = _mod(walk(e.args[0]), e.args[1], ranges)
        elif e.is_Add or e.is_Mul:
            out = e.func(*(walk(a) for a in e.args))
            out = _join(out, ranges) if out.is_Add else out
        else:
            out = e
        memo[e] = out
        return out

    return walk(expr)


def decompose(expr: sympy.Expr, shape, ranges: dict) -> list[sympy.Expr]:
    """Per-dimension indices of the contiguous flat index ``expr`` into ``shape``."""
    if any(is_static(size) and int(size) == 0 for size in shape):
        return [sympy.Integer(0)] * len(shape)  # no element: the index is never read (and // 0 would raise)
    out = []
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] == 1:
            out.append(sympy.Integer(0))
            continue
        if d == 0:
            out.append(expr)
            break
        expr, rem = split_div_mod(expr, shape[d], ranges)
        out.append(rem)
    return list(reversed(out))


def unflatten(expr: sympy.Expr, shape, stride, ranges: dict) -> list[sympy.Expr] | None:
    """Per-dimension indices of the element at storage offset ``expr`` of a buffer laid out with
    ``stride``: :func:`decompose` for a row-major buffer, and for any other dense layout (strides a
    permutation of a packed one, a channels-last buffer) the same walk in stride order. None where
    the layout is not dense (a gap, an overlap) or, with symbolic sizes, not row-major."""
    if tuple(stride) == contiguous_strides(shape):
        return decompose(expr, shape, ranges)
    dims = [d for d, size in enumerate(shape) if size != 1]
    if not all(is_static(shape[d]) and is_static(stride[d]) for d in dims):
        return None
    order = sorted(dims, key=lambda d: int(stride[d]), reverse=True)  # the outermost dimension first
    if tuple(int(stride[d]) for d in order) != contiguous_strides([shape[d] for d in order]):
        return None
    out = [sympy.Integer(0)] * len(shape)
    for d, index in zip(order, decompose(expr, [shape[d] for d in order], ranges), strict=True):
        out[d] = index
    return out


def subs_index(expr, mapping: dict, ranges: dict | None = None):
    """Substitute index symbols everywhere in an element expression (loads and index values);
    with ``ranges`` (the new symbols' trip counts), simplify the indices that come out."""
    from course_lib.inductor.ir import IndexValue, Load, Op

    if not mapping:
        return expr

    def new(index):
        index = sympy.sympify(index).xreplace(mapping)
        return simplify_index(index, ranges) if ranges else index

    if isinstance(expr, Load):
        ind = tuple((s, subs_index(e, mapping, ranges)) for s, e in expr.indirect)
        return Load(expr.buf, new(expr.index), expr.dtype, ind)
    if isinstance(expr, IndexValue):
        return IndexValue(new(expr.index), expr.dtype)
    if isinstance(expr, Op):
        return Op(expr.op, tuple(subs_index(a, mapping, ranges) for a in expr.args), expr.dtype)
    return expr


# ---------------------------------------------------------------------------
# a node's symbols -> its kernel's loop symbols
# ---------------------------------------------------------------------------


def kernel_vars(group):
    """Loop symbols of a kernel group ``(outer sizes, inner sizes)``: ``x*`` outer, ``r*`` inner."""
    outer, inner = group
    return [sym(f"x{d}") for d in range(len(outer))], [sym(f"r{d}") for d in range(len(inner))]


def group_ranges(group) -> dict:
    """Loop symbol -> its trip count."""
    xs, rs = kernel_vars(group)
    return dict(zip(xs + rs, group[0] + group[1], strict=True))


def var_map(buf, group) -> dict:
    """Map the node's own symbols (i*, r*) to the kernel's loop symbols (x*, r*).

    Size-1 dimensions are dropped from a group, so their symbol becomes 0.
    """
    xs, rs = kernel_vars(group)
    mine = buf.index_vars()
    mapping = {v: sympy.Integer(0) for v, s in zip(mine, buf.shape, strict=True) if s == 1}
    big = [v for v, s in zip(mine, buf.shape, strict=True) if s != 1]
    if buf.kind == "reduction":
        mapping.update(zip(big, xs, strict=False))
        ranges = buf.reduction_ranges
        red = [v for v, s in zip(buf.reduction_vars(), ranges, strict=True) if s != 1]
        mapping.update({v: sympy.Integer(0) for v, s in zip(buf.reduction_vars(), ranges, strict=True) if s == 1})
        mapping.update(zip(red, rs, strict=False))
        return mapping
    mapping.update(zip(big, xs + rs, strict=False))
    return mapping


def store_index(buf, group) -> sympy.Expr:
    """Where a node's element is stored, in its kernel's loop symbols."""
    return sympy.expand(flat_index(buf.index_vars(), buf.stride).xreplace(var_map(buf, group)))


def body_in_kernel(buf, group):
    """The node's body with its symbols renamed to the kernel's loop symbols.

    Reduction symbols are named ``r*`` on both sides, so the renaming goes through temporaries.
    """
    mapping = var_map(buf, group)
    tmp = {k: sym(f"_t_{k}") for k in mapping}
    body = subs_index(buf.body, tmp)
    return subs_index(body, {tmp[k]: v for k, v in mapping.items()}, group_ranges(group))


# ---------------------------------------------------------------------------
# dynamic sizes: symbols, hints, guards
# ---------------------------------------------------------------------------


@dataclass
class SizeVars:
    """The size symbols of one graph (``SizeVarAllocator``).

    ``hints``: each symbol's value in the example inputs, used where a heuristic needs a number
    (fusion score, roofline, parallel threshold), never in generated code. ``sources``: where
    the call finds each symbol, ``(input position, dim)``; the first input that has it.
    """

    hints: dict = field(default_factory=dict)  # Symbol -> int
    sources: dict = field(default_factory=dict)  # Symbol -> (input position, dim)
    guards: list = field(default_factory=list)  # sympy booleans that must hold (Eq(ModIdx(s0, 2), 0))

    @property
    def symbols(self) -> list:
        return sorted(self.hints, key=lambda s: (len(s.name), s.name))

    def hint(self, expr) -> int:
        """The example value of a size expression (an int when it is static already)."""
        if is_static(expr):
            return int(expr)
        value = sympy.sympify(expr).xreplace({s: sympy.Integer(v) for s, v in self.hints.items()})
        value = value.replace(FloorDiv, lambda a, b: sympy.floor(a / b)).replace(ModIdx, lambda a, b: sympy.Mod(a, b))
        return int(value)

    def __bool__(self) -> bool:
        return bool(self.hints)

    def check(self, values: dict) -> list:
        """The guards that fail for ``{symbol name: value}`` (empty when the sizes are fine).

        Every symbol must be at least 2: sizes 0 and 1 are specialised (0/1 specialisation, as in
        torch's ShapeEnv), so code compiled for "any n" is never asked to handle them.
        """
        env = {s: sympy.Integer(values[s.name]) for s in self.hints}
        failed = [sympy.Ge(s, 2) for s, v in env.items() if v < 2]
        return failed + [g for g in self.guards if not bool(sympy.sympify(g).xreplace(env))]


#: torch's sympy functions (``torch/utils/_sympy/functions.py``) -> ours, by class name, so this
#: file never imports torch's private module: ``ModularIndexing(a, b, c)`` is ``(a // b) % c``.
_FROM_TORCH = {
    "FloorDiv": lambda a, b: FloorDiv(a, b),
    "CleanDiv": lambda a, b: FloorDiv(a, b),
    "IntTrueDiv": lambda a, b: FloorDiv(a, b),
    "ModularIndexing": lambda a, b, c: ModIdx(FloorDiv(a, b), c),
    "PythonMod": lambda a, b: ModIdx(a, b),
    "Mod": lambda a, b: ModIdx(a, b),
    "Max": lambda *a: Max(*a),
    "Min": lambda *a: Min(*a),
}


@functools.lru_cache(maxsize=4096)  # every node's shape goes through here, most of them the same few sizes
def from_torch(expr):
    """A size expression from torch's ShapeEnv, rewritten with this file's index functions."""
    expr = sympy.sympify(expr)
    for name, make in _FROM_TORCH.items():
        expr = expr.replace(
            lambda e, name=name: type(e).__name__ == name and type(e).__module__.startswith("torch"),
            lambda e, make=make: make(*e.args),
        )
    return expr


def free_sizes(expr) -> set:
    """Size symbols in an expression."""
    return {s for s in sympy.sympify(expr).free_symbols if s.is_positive}
