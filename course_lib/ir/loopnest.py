"""A loop-nest IR over arrays with tiling, interchange, unrolling and fusion, each checked
for legality with dependence distance vectors.

Teaches the loop transformations behind Inductor's kernels (``torch/_inductor/codegen/simd.py``
tiles pointwise/reduction loops, ``scheduler.py`` fuses them) and LLVM's ``LoopInterchange``,
``LoopUnrollPass`` and Polly. A nest is perfectly nested loops with affine subscripts
(``A[i+1, 2*j]``). Dependences are uniform (same subscript coefficients): the distance vector
of a write ``X[i + c1]`` and an access ``X[i + c2]`` is ``c1 - c2`` per loop; a loop that does
not appear in the subscript carries a dependence of unknown positive distance (``'+'``), as a
reduction does. A transformation is legal when every distance vector stays lexicographically
non-negative (Allen and Kennedy, "Optimizing Compilers for Modern Architectures", ch. 2-5).

Statements: ``Stmt(target, reads, "+=*")`` means ``target += product(reads)`` and
``"=+"`` means ``target = sum(reads)``. ``run_nest`` executes with numpy; ``address_trace``
lists the byte addresses touched (row-major arrays of 8-byte elements) for the cache simulator.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True)
class Affine:
    """``sum(coef * var) + const``."""

    coeffs: tuple = ()  # ((var, coef), ...) sorted
    const: int = 0

    @staticmethod
    def parse(text: str) -> Affine:
        coeffs: dict[str, int] = {}
        const = 0
        for sign, term in re.findall(r"([+-]?)\s*([^+-]+)", text.replace(" ", "")):
            k = -1 if sign == "-" else 1
            if "*" in term:
                c, v = term.split("*")
                coeffs[v] = coeffs.get(v, 0) + k * int(c)
            elif term.isdigit():
                const += k * int(term)
            else:
                coeffs[term] = coeffs.get(term, 0) + k
        return Affine(tuple(sorted(coeffs.items())), const)

    def eval(self, env) -> int:
        return sum(c * env[v] for v, c in self.coeffs) + self.const

    def vars(self):
        return {v for v, c in self.coeffs if c}

    def __str__(self):
        parts = [(v if c == 1 else f"{c}*{v}") for v, c in self.coeffs if c]
        s = " + ".join(parts) if parts else ""
        if self.const or not s:
            s = f"{s} + {self.const}" if s else str(self.const)
        return s.replace("+ -", "- ")


@dataclass(frozen=True)
class Access:
    array: str
    index: tuple  # of Affine

    def __str__(self):
        return f"{self.array}[{', '.join(map(str, self.index))}]"


def acc(array: str, *index: str) -> Access:
    return Access(array, tuple(Affine.parse(i) for i in index))


@dataclass
class Stmt:
    target: Access
    reads: list
    kind: str = "+=*"

    def __str__(self):
        if self.kind == "+=*":
            return f"{self.target} += {' * '.join(map(str, self.reads))}"
        return f"{self.target} = {' + '.join(map(str, self.reads))}"


@dataclass
class Loop:
    """``for var in range(start, min(stops), step)``; body is loops or statements."""

    var: str
    start: Affine
    stops: tuple  # of Affine (the minimum is the bound)
    step: int = 1
    body: list = field(default_factory=list)
    kind: str = "serial"  # or "parallel" / "vectorized": a schedule's annotation (course_lib.ir.schedule)

    def lines(self, depth=0) -> list[str]:
        stop = str(self.stops[0]) if len(self.stops) == 1 else f"min({', '.join(map(str, self.stops))})"
        step = "" if self.step == 1 else f", {self.step}"
        note = "" if self.kind == "serial" else f"  # {self.kind}"
        out = ["    " * depth + f"for {self.var} in range({self.start}, {stop}{step}):{note}"]
        for s in self.body:
            out += s.lines(depth + 1) if isinstance(s, Loop) else ["    " * (depth + 1) + str(s)]
        return out

    def __str__(self):
        return "\n".join(self.lines())


def loop(var, stop, body, start="0", step=1) -> Loop:
    return Loop(var, Affine.parse(str(start)), (Affine.parse(str(stop)),), step, body)


def band(nest: Loop) -> list[Loop]:
    """The perfectly nested loops from the outside in."""
    out = [nest]
    while len(out[-1].body) == 1 and isinstance(out[-1].body[0], Loop):
        out.append(out[-1].body[0])
    return out


def statements(nest) -> list[Stmt]:
    items = nest if isinstance(nest, list) else [nest]
    out = []
    for it in items:
        out += statements(it.body) if isinstance(it, Loop) else [it]
    return out


# --- execution and traces ----------------------------------------------------------------------
def _iterate(items, env):
    for it in items:
        if isinstance(it, Loop):
            lo = it.start.eval(env)
            hi = min(s.eval(env) for s in it.stops)
            for v in range(lo, hi, it.step):
                env[it.var] = v
                yield from _iterate(it.body, env)
            env.pop(it.var, None)
        else:
            yield it, env


def run_nest(nest, arrays: dict) -> dict:
    """Execute on copies of numpy ``arrays``; returns the new arrays."""
    arrs = {k: np.array(v, dtype=float) for k, v in arrays.items()}
    items = nest if isinstance(nest, list) else [nest]
    for st, env in _iterate(items, {}):
        t = tuple(a.eval(env) for a in st.target.index)
        vals = [arrs[r.array][tuple(a.eval(env) for a in r.index)] for r in st.reads]
        if st.kind == "+=*":
            arrs[st.target.array][t] += np.prod(vals)
        else:
            arrs[st.target.array][t] = sum(vals)
    return arrs


def row_major_strides(shapes: dict) -> dict:
    """Array name -> its strides in elements, row-major (C order: the last index is contiguous)."""
    out = {}
    for name, shp in shapes.items():
        s, acc = [], 1
        for d in reversed(shp):
            s.append(acc)
            acc *= d
        out[name] = s[::-1]
    return out


def address_trace(nest, shapes: dict, elem_bytes: int = 8) -> list[int]:
    """Byte addresses in execution order: reads left to right, then the target (row-major,
    arrays laid out one after another, each starting on a 4 KiB boundary)."""
    base, off = {}, 0
    for name in sorted(shapes):
        base[name] = off
        off += -(-int(np.prod(shapes[name])) * elem_bytes // 4096) * 4096
    strides = row_major_strides(shapes)
    out = []
    items = nest if isinstance(nest, list) else [nest]

    def addr(a: Access, env):
        return base[a.array] + elem_bytes * sum(x.eval(env) * s for x, s in zip(a.index, strides[a.array]))

    for st, env in _iterate(items, {}):
        for r in st.reads:
            out.append(addr(r, env))
        if st.kind == "+=*":
            out.append(addr(st.target, env))
        out.append(addr(st.target, env))
    return out


# --- dependences -------------------------------------------------------------------------------
def distance_vectors(nest: Loop) -> list[tuple]:
    """Distance vectors (one entry per loop of the band, outermost first; ints or '+') of every
    dependence between statements of the innermost body. Raises ValueError when a pair of
    accesses is not uniform (the test cannot decide)."""
    loops = [lp.var for lp in band(nest)]
    stmts = statements(nest)
    out = set()
    for s1, s2 in itertools.product(stmts, stmts):
        for a in [s2.target] + list(s2.reads):
            w = s1.target
            if a.array != w.array:
                continue
            if [x.coeffs for x in a.index] != [x.coeffs for x in w.index]:
                raise ValueError(f"non-uniform dependence between {w} and {a}")
            vec = []
            for v in loops:
                dims = [
                    (dict(x.coeffs).get(v, 0), wx.const - x.const)
                    for x, wx in zip(a.index, w.index)
                    if dict(x.coeffs).get(v, 0)
                ]
                if not dims:
                    vec.append("+")  # v is not in the subscript: every iteration touches it
                else:
                    c, d = dims[0]
                    vec.append(d // c)
            vec = tuple(vec)
            if lex_sign(vec) < 0:
                vec = tuple(("+" if x == "+" else -x) for x in vec)
            if any(x != 0 for x in vec):
                out.add(vec)
    return sorted(out, key=str)


def lex_sign(vec) -> int:
    """+1 when the first non-zero entry is positive ('+' counts as positive), -1 negative, 0 all zero."""
    for x in vec:
        if x == "+":
            return 1
        if x != 0:
            return 1 if x > 0 else -1
    return 0


def interchange_legal(vectors, order: list[int]) -> bool:
    """Is permuting the band's loops into ``order`` legal? Every permuted vector stays lex >= 0."""
    return all(lex_sign(tuple(v[k] for k in order)) >= 0 for v in vectors)


def tuple_order_legal(vectors, order: list[int]) -> bool:
    """An oracle for :func:`interchange_legal` that reasons about points, not signs: a dependence
    runs from point p to p + d; after the interchange the loops visit points in the tuple order of
    their permuted coordinates, so permuted(p) must still come before permuted(p + d). ('+' is
    some positive distance; 1 stands for it, since only signs decide.)"""
    for v in vectors:
        d = [1 if x == "+" else x for x in v]
        p = [5] * len(d)
        q = [a + b for a, b in zip(p, d)]
        if tuple(q[k] for k in order) < tuple(p[k] for k in order):
            return False
    return True


def random_interchange_cases(count: int, seed: int = 11) -> list[tuple[list, list[int]]]:
    """``count`` (distance vectors, loop order) pairs over 2-4 loops: 1-3 lexicographically
    positive vectors with entries -2..2 or '+' (as a dependence test reports them), a random order."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        depth = rng.randint(2, 4)
        vectors: list = []
        want = rng.randint(1, 3)
        while len(vectors) < want:
            v = tuple(rng.choice([-2, -1, 0, 0, 1, 2, "+"]) for _ in range(depth))
            if lex_sign(v) > 0:
                vectors.append(v)
        order = list(range(depth))
        rng.shuffle(order)
        out.append((vectors, order))
    return out


def tiling_legal(vectors) -> bool:
    """A band can be tiled when it is fully permutable: no negative distance entry."""
    return all(x == "+" or x >= 0 for v in vectors for x in v)


# --- transformations -----------------------------------------------------------------------------
def interchange(nest: Loop, order: list[int], check: bool = True) -> Loop:
    """Reorder the perfectly nested band (``order[k]`` = old position of the new k-th loop)."""
    loops = band(nest)
    if check and not interchange_legal(distance_vectors(nest), order):
        raise ValueError(f"interchange to {order} reverses a dependence")
    inner = loops[-1].body
    new = None
    for k in reversed(order):
        new = replace(loops[k], body=[new] if new is not None else inner)
    return new


def tile(nest: Loop, sizes: dict[str, int], check: bool = True) -> Loop:
    """Strip-mine each loop in ``sizes`` by its tile size and move the tile loops outside:
    ``for i`` becomes ``for i0 in range(0, N, T): for i in range(i0, min(i0 + T, N))``."""
    if check and not tiling_legal(distance_vectors(nest)):
        raise ValueError("the band is not fully permutable: tiling would reverse a dependence")
    loops = band(nest)
    inner = loops[-1].body
    tiles, points = [], []
    for lp in loops:
        if lp.var in sizes:
            t = sizes[lp.var]
            tv = f"{lp.var}{lp.var}"
            tiles.append(Loop(tv, lp.start, lp.stops, t * lp.step))
            points.append(Loop(lp.var, Affine.parse(tv), (Affine.parse(f"{tv}+{t * lp.step}"),) + lp.stops, lp.step))
        else:
            points.append(replace(lp, body=[]))
    chain = tiles + points
    new = None
    for lp in reversed(chain):
        new = replace(lp, body=[new] if new is not None else inner)
    return new


def unroll(nest: Loop, factor: int) -> list:
    """Unroll the innermost loop (constant bounds) by ``factor``: a main loop whose body is
    ``factor`` shifted copies, then a remainder loop for the tail. Returns the outer band
    rebuilt around [main, remainder] (as a list of top-level loops). Always legal: the order
    of iterations does not change."""
    loops = band(nest)
    lp = loops[-1]
    if lp.start.coeffs or any(s.coeffs for s in lp.stops):
        raise ValueError("unroll needs constant loop bounds")
    lo, hi = lp.start.const, min(s.const for s in lp.stops)
    trip = max(0, -(-(hi - lo) // lp.step))
    split = lo + (trip // factor) * factor * lp.step
    body = []
    for k in range(factor):
        body += [_shift(s, lp.var, k * lp.step) for s in lp.body]
    main = Loop(lp.var, lp.start, (Affine((), split),), lp.step * factor, body)
    inner = [main] + ([Loop(lp.var, Affine((), split), lp.stops, lp.step, lp.body)] if split < hi else [])
    for outer in reversed(loops[:-1]):
        inner = [replace(outer, body=inner)]
    return inner


def _shift(s: Stmt, var: str, k: int, rename: str | None = None) -> Stmt:
    def sh(a: Access):
        idx = []
        for x in a.index:
            d = dict(x.coeffs)
            c = d.pop(var, 0)
            if rename:
                d[rename] = d.get(rename, 0) + c
            else:
                d[var] = c
            idx.append(Affine(tuple(sorted((v, cc) for v, cc in d.items() if cc)), x.const + c * k))
        return Access(a.array, tuple(idx))

    return Stmt(sh(s.target), [sh(r) for r in s.reads], s.kind)


def fusion_legal(first: Loop, second: Loop) -> bool:
    """Two adjacent loops over the same range fuse when no cross dependence distance (in the
    fused loop variable) is negative: nothing the second loop reads at i is written by the
    first loop at a later iteration, and vice versa."""
    if (first.start, first.stops, first.step) != (second.start, second.stops, second.step):
        return False
    v1, v2 = first.var, second.var
    for s1, s2 in itertools.product(statements(first), statements(second)):
        pairs = [(s1.target, a) for a in [s2.target] + s2.reads] + [(r, s2.target) for r in s1.reads]
        for a1, a2 in pairs:
            if a1.array != a2.array:
                continue
            for x1, x2 in zip(a1.index, a2.index):
                c1, c2 = dict(x1.coeffs).get(v1, 0), dict(x2.coeffs).get(v2, 0)
                if c1 != c2:
                    return False
                if c1 and (x1.const - x2.const) // c1 < 0:
                    return False
    return True


def fuse(first: Loop, second: Loop, check: bool = True) -> Loop:
    """One loop running both bodies (the second's variable renamed to the first's)."""
    if check and not fusion_legal(first, second):
        raise ValueError("fusion would reverse a dependence")
    body2 = [_shift(s, second.var, 0, rename=first.var) if isinstance(s, Stmt) else s for s in second.body]
    return replace(first, body=first.body + body2)


# --- examples ------------------------------------------------------------------------------------
def matmul(n: int) -> Loop:
    """C[i, j] += A[i, k] * B[k, j]."""
    return loop(
        "i", n, [loop("j", n, [loop("k", n, [Stmt(acc("C", "i", "j"), [acc("A", "i", "k"), acc("B", "k", "j")])])])]
    )


def cache_misses(nest, shapes, size_bytes=4096, line_bytes=64, ways=4) -> int:
    from course_lib.ir.cache import simulate_cache

    return simulate_cache(address_trace(nest, shapes), size_bytes, line_bytes, ways).misses
