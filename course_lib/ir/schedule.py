"""A Halide-style schedule over course_lib.ir.loopnest: the algorithm says *what* is computed,
the schedule says *in which order and on which hardware lanes*.

Teaches the scheduling language of Halide (``src/Func.h``: ``Func::split``, ``reorder``, ``tile``,
``vectorize``, ``parallel``; Ragan-Kelley et al., "Halide", PLDI 2013) and TVM's ``te.Schedule``
that copied it, and the decision Inductor makes without a language: its C++ backend
(``torch/_inductor/codegen/cpp.py``) splits the contiguous loop by the vector width, vectorises the
inner part and puts ``#pragma omp for`` on the outer loop. Position: loop nest -> schedule -> loop
nest (same statements, new loops).

Representation. ``split(j, jo, ji, 16)`` replaces ``for j in range(lo, hi)`` by
``for jo in range(0, ceil(E/16)): for ji in range(0, min(16, E - 16*jo))`` (E = hi - lo) and
substitutes ``j = lo + 16*jo + ji`` in every subscript below: Halide's normalised form, with the
ragged tail guarded by a ``min`` bound (Halide's ``TailStrategy::GuardWithIf``). ``reorder``
lists loops outermost first (Halide lists them innermost first).

Legality (what Halide does not need, because its functions are pure, and Inductor gets from its
dependency analysis): each dependence distance of the algorithm (``loopnest.distance_vectors``) is
read in the new loop order. The loops split from one original loop reproduce its order only when
met most-significant first, so such a component is "zero or the original sign"; a component met
out of order can be anything. A reorder is legal when no vector can become lexicographically
negative; ``parallel``/``vectorize`` are legal when no dependence is carried by that loop (the
check is conservative: a reduction, distance ``'+'``, is never vectorised; real compilers
reassociate it into vector partial sums when fast-math allows).

Simplified: perfect nests with constant bounds only; no ``compute_at`` / ``store_at`` (where one
stage is computed inside another's loops: that is fusion, 01b's other half, and Inductor's
scheduler).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from course_lib.ir import loopnest as ln
from course_lib.ir.cache import simulate_cache

VERBS = ("split", "reorder", "tile", "vectorize", "parallel")


@dataclass(frozen=True)
class Directive:
    verb: str
    args: tuple

    def __str__(self) -> str:
        return f"{self.verb}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Schedule:
    """An algorithm (a perfect loop nest) and the directives applied to it, in order.

    Each method returns a new Schedule, so schedules chain like Halide's:
    ``Schedule(ln.matmul(64)).split("j", "jo", "ji", 16).reorder("i", "jo", "k", "ji").vectorize("ji")``.
    """

    algorithm: ln.Loop
    directives: tuple = ()

    def _add(self, verb: str, *args) -> Schedule:
        return replace(self, directives=self.directives + (Directive(verb, args),))

    def split(self, var: str, outer: str, inner: str, factor: int) -> Schedule:
        return self._add("split", var, outer, inner, factor)

    def reorder(self, *vars: str) -> Schedule:
        """Put the named loops in this order, outermost first, in the positions they occupy now."""
        return self._add("reorder", *vars)

    def tile(self, x: str, y: str, xo: str, yo: str, xi: str, yi: str, fx: int, fy: int) -> Schedule:
        """Halide's tile: split x and y, then order the loops xo, yo, xi, yi (x outside y)."""
        return self.split(x, xo, xi, fx).split(y, yo, yi, fy).reorder(xo, yo, xi, yi)

    def vectorize(self, var: str) -> Schedule:
        return self._add("vectorize", var)

    def parallel(self, var: str) -> Schedule:
        return self._add("parallel", var)

    def __str__(self) -> str:
        return "".join(f".{d}" for d in self.directives) or "(default schedule: the algorithm's loop order)"

    def lower(self, check: bool = True) -> ln.Loop:
        """The scheduled loop nest; ValueError (saying which directive) when a step is illegal."""
        return apply(self, check=check).nest


# ------------------------------------------------------------------------------------ lowering
@dataclass
class _State:
    loops: list  # the band, outermost first (bodies rebuilt at the end)
    body: list  # the innermost statements
    origin: dict  # loop var -> (original var, path): path orders the pieces of one split loop
    kinds: dict = field(default_factory=dict)


@dataclass
class Scheduled:
    """The result of applying a schedule: the new nest and where each of its loops came from."""

    nest: ln.Loop
    origin: dict  # loop var -> (original loop var, significance path)
    vectors: list  # the algorithm's dependence distance vectors, over the original loops
    original: list  # the original loop vars, outermost first


def _subst_affine(a: ln.Affine, var: str, repl: ln.Affine) -> ln.Affine:
    d = dict(a.coeffs)
    c = d.pop(var, 0)
    const = a.const + c * repl.const
    for v, rc in repl.coeffs:
        d[v] = d.get(v, 0) + c * rc
    return ln.Affine(tuple(sorted((v, k) for v, k in d.items() if k)), const)


def _subst_access(a: ln.Access, var: str, repl: ln.Affine) -> ln.Access:
    return ln.Access(a.array, tuple(_subst_affine(x, var, repl) for x in a.index))


def _subst_stmt(s: ln.Stmt, var: str, repl: ln.Affine) -> ln.Stmt:
    return ln.Stmt(_subst_access(s.target, var, repl), [_subst_access(r, var, repl) for r in s.reads], s.kind)


def _find(state: _State, var: str, verb: str) -> int:
    names = [lp.var for lp in state.loops]
    if var not in names:
        raise ValueError(f"{verb}: there is no loop {var!r}; the loops are {', '.join(names)}")
    return names.index(var)


def _split(state: _State, var: str, outer: str, inner: str, factor: int) -> None:
    k = _find(state, var, "split")
    lp = state.loops[k]
    names = {x.var for x in state.loops}
    if not isinstance(factor, int) or factor < 1:
        raise ValueError(f"split({var}): the factor must be a positive int, got {factor!r}")
    if outer == inner or (names - {var}) & {outer, inner}:
        raise ValueError(f"split({var}): {outer!r} and {inner!r} must be two new loop names")
    if lp.step != 1 or lp.start.coeffs or any(s.coeffs for s in lp.stops):
        raise ValueError(f"split({var}): only a loop with constant bounds can be split (its bounds are "
                         f"range({lp.start}, {', '.join(map(str, lp.stops))}))")  # fmt: skip
    lo, extent = lp.start.const, max(0, min(s.const for s in lp.stops) - lp.start.const)
    out_loop = ln.Loop(outer, ln.Affine((), 0), (ln.Affine((), math.ceil(extent / factor)),))
    stops = (ln.Affine((), factor),)
    if extent % factor:  # the ragged last tile: Halide's GuardWithIf
        stops += (ln.Affine(((outer, -factor),), extent),)
    in_loop = ln.Loop(inner, ln.Affine((), 0), stops)
    repl = ln.Affine(tuple(sorted([(outer, factor), (inner, 1)])), lo)
    for j in range(k + 1, len(state.loops)):
        q = state.loops[j]
        state.loops[j] = replace(q, start=_subst_affine(q.start, var, repl),
                                 stops=tuple(_subst_affine(s, var, repl) for s in q.stops))  # fmt: skip
    state.body = [_subst_stmt(s, var, repl) for s in state.body]
    state.loops[k : k + 1] = [out_loop, in_loop]
    base, path = state.origin.pop(var)
    state.origin[outer], state.origin[inner] = (base, path + (0,)), (base, path + (1,))


def _reorder(state: _State, vars: tuple) -> None:
    if len(set(vars)) != len(vars):
        raise ValueError(f"reorder{vars}: a loop is named twice")
    slots = sorted(_find(state, v, "reorder") for v in vars)
    by_name = {lp.var: lp for lp in state.loops}
    for slot, v in zip(slots, vars):
        state.loops[slot] = by_name[v]
    seen: set = set()
    for lp in state.loops:  # a loop's bounds may only name loops outside it
        needs = lp.start.vars().union(*[s.vars() for s in lp.stops]) & set(by_name)
        if needs - seen:
            raise ValueError(f"reorder{vars}: the bounds of {lp.var} use {', '.join(sorted(needs - seen))}, "
                             f"which must stay outside {lp.var}")  # fmt: skip
        seen.add(lp.var)


def _sign(x) -> str:
    if x == "+":
        return "+"
    return "+" if x > 0 else "-" if x < 0 else "0"


def component_signs(vec: tuple, original: list, order: list, origin: dict) -> list[set]:
    """Possible signs of one dependence in each loop of ``order`` (see the module docstring)."""
    out, seen = [], set()
    for var in order:
        base, path = origin[var]
        s = _sign(vec[original.index(base)])
        pieces = [p for v, (b, p) in origin.items() if b == base]
        more_significant = [p for p in pieces if p < path]  # split pieces compare as tuples
        if s == "0":
            out.append({"0"})
        elif all(p in seen for p in more_significant):
            rest = [p for p in pieces if p > path and p not in seen]
            out.append({s} if not rest else {"0", s})
        else:
            out.append({"-", "0", "+"})
        seen.add(path)
    return out


def _carried_before(signs: list[set], k: int) -> bool:
    """Is the dependence certainly carried by a loop outside position k?"""
    for s in signs[:k]:
        if s == {"+"}:
            return True
        if "-" in s:
            return False
    return False


def order_problem(sched: Scheduled, order: list) -> str | None:
    """None when every dependence stays lexicographically positive in ``order``, else why not."""
    for vec in sched.vectors:
        for s in component_signs(vec, sched.original, order, sched.origin):
            if s == {"+"}:
                break
            if "-" in s:
                return f"the dependence with distance {vec} could run backwards in the order {', '.join(order)}"
    return None


def carried_problem(sched: Scheduled, order: list, var: str) -> str | None:
    """None when no dependence is carried by loop ``var`` (its iterations are independent)."""
    k = order.index(var)
    for vec in sched.vectors:
        signs = component_signs(vec, sched.original, order, sched.origin)
        if not _carried_before(signs, k) and signs[k] != {"0"}:
            return f"loop {var} carries the dependence with distance {vec}: its iterations are not independent"
    return None


def apply(schedule: Schedule, check: bool = True) -> Scheduled:
    """Apply every directive in order; with ``check``, refuse illegal ones (ValueError naming it)."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"expected a Schedule, got {type(schedule).__name__}")
    loops = ln.band(schedule.algorithm)
    body = loops[-1].body
    if not all(isinstance(s, ln.Stmt) for s in body):
        raise ValueError("a schedule needs a perfect loop nest: only statements in the innermost loop")
    original = [lp.var for lp in loops]
    state = _State([replace(lp, body=[]) for lp in loops], list(body), {v: (v, ()) for v in original})
    vectors = ln.distance_vectors(schedule.algorithm)
    for d in schedule.directives:
        if d.verb not in VERBS:
            raise ValueError(f"unknown directive {d.verb!r}; use one of {', '.join(VERBS)}")
        if d.verb == "split":
            _split(state, *d.args)
        elif d.verb == "reorder":
            _reorder(state, d.args)
        else:
            (var,) = d.args
            k = _find(state, var, d.verb)
            if d.verb == "vectorize":
                _check_vector_loop(state, k)
            state.kinds[var] = "parallel" if d.verb == "parallel" else "vectorized"
        if check:
            partial = Scheduled(ln.Loop("_", ln.Affine(), (ln.Affine(),)), state.origin, vectors, original)
            order = [lp.var for lp in state.loops]
            why = order_problem(partial, order)
            for var in state.kinds:
                why = why or carried_problem(partial, order, var)
            if why:
                raise ValueError(f"{d} is illegal: {why}")
    return Scheduled(_build(state), dict(state.origin), vectors, original)


def _check_vector_loop(state: _State, k: int) -> None:
    lp = state.loops[k]
    if k != len(state.loops) - 1:
        raise ValueError(f"vectorize({lp.var}): only the innermost loop can be vectorised "
                         f"(here {state.loops[-1].var}); reorder first")  # fmt: skip
    if lp.start.coeffs or not any(not s.coeffs for s in lp.stops):
        raise ValueError(f"vectorize({lp.var}): the loop needs a constant extent (the vector width): split it first")


def _build(state: _State) -> ln.Loop:
    inner: list = state.body
    for lp in reversed(state.loops):
        inner = [replace(lp, body=inner, kind=state.kinds.get(lp.var, "serial"))]
    return inner[0]


def lanes(nest: ln.Loop) -> int:
    """The vector width of the nest's vectorised loop (1 when none)."""
    for lp in ln.band(nest):
        if lp.kind == "vectorized":
            return min(s.const for s in lp.stops if not s.coeffs) - lp.start.const
    return 1


# ------------------------------------------------------------------------------------ execution
def run(nest: ln.Loop, arrays: dict) -> dict:
    """Execute a scheduled nest as the hardware would: a ``parallel`` loop's iterations in reverse
    order (a legal parallel loop cannot tell), a ``vectorized`` loop in lockstep (every lane reads,
    then every lane writes, as one SIMD instruction does). Returns new numpy arrays."""
    arrs = {k: np.array(v, dtype=float) for k, v in arrays.items()}
    _run_items([nest], {}, arrs)
    return arrs


def _bounds(lp: ln.Loop, env: dict) -> range:
    return range(lp.start.eval(env), min(s.eval(env) for s in lp.stops), lp.step)


def _run_items(items: list, env: dict, arrs: dict) -> None:
    for it in items:
        if isinstance(it, ln.Stmt):
            _run_lanes([it], [dict(env)], arrs)
            continue
        iters = list(_bounds(it, env))
        if it.kind == "vectorized":
            _run_lanes(it.body, [{**env, it.var: v} for v in iters], arrs)
            continue
        for v in reversed(iters) if it.kind == "parallel" else iters:
            env[it.var] = v
            _run_items(it.body, env, arrs)
        env.pop(it.var, None)


def _index(a: ln.Access, env: dict) -> tuple:
    idx = tuple(x.eval(env) for x in a.index)
    if any(i < 0 for i in idx):  # numpy would wrap a negative index round silently
        raise IndexError(f"{a} reads index {idx}")
    return idx


def _run_lanes(stmts: list, envs: list[dict], arrs: dict) -> None:
    for st in stmts:
        reads = [[arrs[r.array][_index(r, e)] for r in st.reads] for e in envs]
        olds = [arrs[st.target.array][_index(st.target, e)] for e in envs]
        for e, vals, old in zip(envs, reads, olds):
            new = old + np.prod(vals) if st.kind == "+=*" else sum(vals)
            arrs[st.target.array][_index(st.target, e)] = new


# ------------------------------------------------------------------------------------ cost model
@dataclass(frozen=True)
class Cost:
    """What a schedule buys, counted by simulation (no timing).

    ``misses``: cache misses of the address trace (LRU, ``size/line/ways``); ``issues``: statement
    instructions issued (a vectorised statement covers all its lanes in one); ``gathers``: vector
    accesses whose elements are not contiguous (one load per lane on most CPUs); ``parallel``:
    iterations of the parallel loop (0 when none): how many threads could share the work.
    """

    misses: int
    issues: int
    gathers: int
    lanes: int
    parallel: int


def vector_gathers(nest: ln.Loop, shapes: dict) -> list[str]:
    """The accesses of the vectorised loop's statements that are neither contiguous nor uniform."""
    band = ln.band(nest)
    vec = next((lp.var for lp in band if lp.kind == "vectorized"), None)
    if vec is None:
        return []
    strides = ln.row_major_strides(shapes)
    out = []
    for st in ln.statements(nest):
        for a in [st.target, *st.reads]:
            step = sum(dict(x.coeffs).get(vec, 0) * s for x, s in zip(a.index, strides[a.array]))
            if step not in (0, 1):
                out.append(str(a))
    return out


def cost(nest: ln.Loop, shapes: dict, size_bytes: int = 4096, line_bytes: int = 64, ways: int = 4) -> Cost:
    trace = ln.address_trace(nest, shapes)
    misses = simulate_cache(trace, size_bytes, line_bytes, ways).misses
    issues = _issues([nest], {})
    par = next((len(_bounds(lp, {})) for lp in ln.band(nest) if lp.kind == "parallel" and not _free(lp)), 0)
    return Cost(misses, issues, len(vector_gathers(nest, shapes)), lanes(nest), par)


def _free(lp: ln.Loop) -> bool:
    return bool(lp.start.coeffs or any(s.coeffs for s in lp.stops))


def _issues(items: list, env: dict) -> int:
    n = 0
    for it in items:
        if isinstance(it, ln.Stmt):
            n += 1
        elif it.kind == "vectorized":
            n += len(it.body) if len(_bounds(it, env)) else 0
        else:
            for v in _bounds(it, env):
                env[it.var] = v
                n += _issues(it.body, env)
            env.pop(it.var, None)
    return n


# ------------------------------------------------------------------------------------ Inductor's choice
@dataclass(frozen=True)
class CppLoop:
    """One ``for`` of Inductor's C++ kernel: variable, trip bound, step, and its role."""

    var: str
    stop: str
    step: int
    role: str  # "omp for" | "vector (step = lanes)" | "serial"


def inductor_loops(cpp: str) -> list[CppLoop]:
    """The loop nest of an Inductor ``cpp_fused_*`` kernel, outermost first, read from its C++."""
    loop_re = re.compile(
        r"for\s*\(\s*(?:int64_t|long)\s+(\w+)\s*=[^;]*;\s*\1\s*<\s*(?:static_cast<int64_t>\()?([\w.]+?)L?\)?\s*;"
        r"\s*\1\s*(?:\+=\s*static_cast<int64_t>\((\d+)L\)|\+\+)"
    )
    lines = cpp.splitlines()
    out = []
    for k, line in enumerate(lines):
        m = loop_re.search(line)
        if not m:
            continue
        step = int(m.group(3) or 1)
        omp = k > 0 and "#pragma omp for" in lines[k - 1]
        role = "omp for" if omp else "vector (step = lanes)" if step > 1 else "serial"
        out.append(CppLoop(m.group(1), m.group(2), step, role))
    return out


def describe(sched: Scheduled) -> list[tuple]:
    """Rows (loop, from, extent, kind) of the scheduled band, for a table beside Inductor's."""
    rows = []
    for lp in ln.band(sched.nest):
        base, path = sched.origin[lp.var]
        piece = "" if not path else (" outer" if path[-1] == 0 else " inner")
        header = replace(lp, body=[], kind="serial").lines()[0]
        rows.append((lp.var, f"{base}{piece}", header.split(" in ", 1)[1].rstrip(":"), lp.kind))
    return rows


def matmul_nest(m: int, n: int, k: int) -> ln.Loop:
    """``C[i, j] += A[i, k] * B[k, j]`` for an m x k by k x n product (``ln.matmul`` is square)."""
    stmt = ln.Stmt(ln.acc("C", "i", "j"), [ln.acc("A", "i", "k"), ln.acc("B", "k", "j")])
    return ln.loop("i", m, [ln.loop("j", n, [ln.loop("k", k, [stmt])])])


# ------------------------------------------------------------------------------------ the exercise's check
def inductor_like(s: Schedule, lanes: int = 8) -> Schedule:
    """The schedule Inductor's C++ backend picks for matmul written as a broadcast sum (01b)."""
    return s.split("j", "jo", "ji", lanes).reorder("i", "jo", "k", "ji").vectorize("ji").parallel("i")


@functools.lru_cache(maxsize=4)
def _inductor_like_misses(n: int) -> int:
    shapes = {"A": (n, n), "B": (n, n), "C": (n, n)}
    return cost(inductor_like(Schedule(ln.matmul(n))).lower(), shapes).misses


def check_matmul_schedule(make, trials: int = 6, n: int = 32, seed: int = 2024):
    """Verdict on ``make(Schedule(matmul)) -> Schedule`` (01b, exercise 8b): the scheduled nest
    computes ``A @ B`` on ``trials`` random ragged sizes (run in lockstep / reverse parallel order),
    vectorises >= 8 contiguous lanes, has a parallel loop of >= 2 iterations at ``n``, and misses
    the 4 KiB cache at most half as often as :func:`inductor_like`."""
    from course_lib.check import Verdict

    gen = np.random.default_rng(seed)
    for _ in range(trials):  # random ragged sizes: the tail of every split is exercised
        m, nn, kk = (int(x) for x in gen.integers(1, 21, size=3))
        s = make(Schedule(matmul_nest(m, nn, kk)))
        if not isinstance(s, Schedule):
            return Verdict(False, f"your function returned {type(s).__name__}, not a Schedule")
        try:
            nest = s.lower()
        except ValueError as exc:
            return Verdict(False, f"at sizes M={m}, N={nn}, K={kk}: {exc}")
        arrs = {"A": gen.standard_normal((m, kk)), "B": gen.standard_normal((kk, nn)), "C": np.zeros((m, nn))}
        if not np.allclose(run(nest, arrs)["C"], arrs["A"] @ arrs["B"]):
            return Verdict(False, f"at sizes M={m}, N={nn}, K={kk} the scheduled nest computes a different C")
    shapes = {"A": (n, n), "B": (n, n), "C": (n, n)}
    c = cost(make(Schedule(ln.matmul(n))).lower(), shapes)
    goal = _inductor_like_misses(n) // 2
    problems = [why for bad, why in [
        (c.lanes < 8, f"the vectorised loop has {c.lanes} lane(s); split a loop by 8 or more and vectorise the inner part"),
        (c.gathers > 0, f"{c.gathers} vector access(es) are not contiguous: vectorise the loop that walks a row"),
        (c.parallel < 2, f"no parallel loop with at least 2 iterations at n = {n}"),
        (c.misses > goal, f"{c.misses} cache misses at n = {n}; the goal is at most {goal}"),
    ] if bad]  # fmt: skip
    if problems:
        return Verdict(False, "; ".join(problems))
    return Verdict(True, f"correct on {trials} random sizes; at n = {n}: {c.misses} misses (goal <= {goal}), "
                         f"{c.lanes} lanes, {c.parallel} parallel iterations")  # fmt: skip


def visit_order(nest: ln.Loop) -> dict:
    """{target index: step of its first update}: a vectorised loop's lanes share one step."""
    order: dict = {}
    step = [0]

    def walk(items, env):
        for it in items:
            if isinstance(it, ln.Stmt):
                order.setdefault(_index(it.target, env), step[0])
                step[0] += 1
            elif it.kind == "vectorized":
                for v in _bounds(it, env):
                    for st in it.body:
                        order.setdefault(_index(st.target, {**env, it.var: v}), step[0])
                step[0] += 1
            else:
                for v in _bounds(it, env):
                    env[it.var] = v
                    walk(it.body, env)
                env.pop(it.var, None)

    walk([nest], {})
    return order


__all__ = [
    "Cost",
    "CppLoop",
    "Directive",
    "Schedule",
    "Scheduled",
    "apply",
    "carried_problem",
    "cost",
    "describe",
    "check_matmul_schedule",
    "inductor_like",
    "inductor_loops",
    "lanes",
    "matmul_nest",
    "order_problem",
    "run",
    "vector_gathers",
    "visit_order",
]
