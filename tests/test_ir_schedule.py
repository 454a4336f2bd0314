"""course_lib.ir.schedule: Halide-style directives lower to loop nests that compute what the
algorithm computes (numpy is the oracle), illegal directives are refused by the dependence test,
lockstep execution exposes what they would break, and Inductor's real C++ reads back as a schedule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import env
from course_lib.ir import loopnest as ln
from course_lib.ir import schedule as sc


def _matmul_ok(nest: ln.Loop, m: int, n: int, k: int, seed: int = 0) -> bool:
    rng = np.random.default_rng(seed)
    arrs = {"A": rng.standard_normal((m, k)), "B": rng.standard_normal((k, n)), "C": np.zeros((m, n))}
    return np.allclose(sc.run(nest, arrs)["C"], arrs["A"] @ arrs["B"])


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), n=st.integers(1, 9), k=st.integers(1, 9), f1=st.integers(1, 5), f2=st.integers(1, 5),
       order=st.permutations(["io", "jo", "k", "ii"]))  # fmt: skip
def test_any_legal_schedule_of_matmul_computes_a_times_b(m, n, k, f1, f2, order):
    s = sc.Schedule(sc.matmul_nest(m, n, k)).split("i", "io", "ii", f1).split("j", "jo", "ji", f2)
    s = s.reorder(*order, "ji")
    if order.index("io") > order.index("ii") and m % f1:  # a ragged ii's bound min(f1, m - f1*io) names io
        with pytest.raises(ValueError, match="must stay outside"):
            s.lower()
        return
    assert _matmul_ok(s.vectorize("ji").parallel(order[0] if order[0] != "k" else "io").lower(), m, n, k)


def test_printed_nest_is_halides_normalised_split():
    nest = sc.Schedule(ln.matmul(10)).split("j", "jo", "ji", 4).reorder("i", "jo", "k", "ji").vectorize("ji").lower()
    assert str(nest).splitlines() == [
        "for i in range(0, 10):",
        "    for jo in range(0, 3):",
        "        for k in range(0, 10):",
        "            for ji in range(0, min(4, -4*jo + 10)):  # vectorized",
        "                C[i, ji + 4*jo] += A[i, k] * B[k, ji + 4*jo]",
    ]


@pytest.mark.parametrize("bad, message", [
    (lambda s: s.vectorize("k"), "innermost|carries"),
    (lambda s: s.split("k", "ko", "ki", 4).vectorize("ki"), "carries the dependence"),
    (lambda s: s.parallel("k"), "carries the dependence"),
    (lambda s: s.split("j", "jo", "ji", 4).vectorize("ji"), "only the innermost"),
    (lambda s: s.split("j", "jo", "ji", 3).reorder("ji", "jo"), "must stay outside"),  # ragged: min(3, 8 - 3*jo)
    (lambda s: s.split("q", "a", "b", 2), "no loop 'q'"),
    (lambda s: s.split("j", "i", "ji", 2), "two new loop names"),
    (lambda s: s.split("j", "jo", "ji", 0), "positive int"),
])  # fmt: skip
def test_illegal_directives_are_refused_with_a_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        bad(sc.Schedule(ln.matmul(8))).lower()


def test_lockstep_execution_shows_what_a_refused_vectorisation_would_compute():
    nest = sc.Schedule(ln.matmul(8)).split("k", "ko", "ki", 4).vectorize("ki").lower(check=False)
    assert not _matmul_ok(nest, 8, 8, 8)  # lost updates: every lane read the same C[i, j]


def test_dependence_test_on_a_skewed_nest():
    st_ = ln.Stmt(ln.acc("A", "i+1", "j-1"), [ln.acc("A", "i", "j")], "=+")
    skew = ln.loop("i", 7, [ln.loop("j", 8, [st_], start=1)])  # distance (1, -1)
    s = sc.Schedule(skew)
    s.parallel("j").lower()  # carried by i: the j iterations of one i are independent
    for bad in (s.reorder("j", "i"), s.parallel("i"), s.split("i", "io", "ii", 2).reorder("io", "j", "ii")):
        with pytest.raises(ValueError, match="illegal"):
            bad.lower()
    # the refused parallel(i), run anyway in reverse order, reads values not yet written
    arrays = {"A": np.arange(9 * 9, dtype=float).reshape(9, 9)}
    want = ln.run_nest(skew, arrays)["A"]
    assert not np.allclose(sc.run(s.parallel("i").lower(check=False), arrays)["A"], want)
    assert np.allclose(sc.run(s.parallel("j").lower(), arrays)["A"], want)


def test_cost_model_ladder_at_32():
    shapes = {"A": (32, 32), "B": (32, 32), "C": (32, 32)}
    base = sc.Schedule(ln.matmul(32))
    naive = sc.cost(base.lower(), shapes)
    vec = sc.cost(sc.inductor_like(base).lower(), shapes)
    strided = sc.cost(base.reorder("j", "k", "i").split("i", "io", "ii", 8).vectorize("ii").lower(), shapes)
    assert (naive.issues, naive.lanes, naive.parallel) == (32**3, 1, 0)
    assert (vec.issues, vec.lanes, vec.gathers, vec.parallel) == (32**3 // 8, 8, 0, 32)
    assert strided.gathers == 2  # A[i, k] and C[i, j] step by a row per lane
    assert vec.misses < naive.misses


def test_inductor_loops_read_from_the_recorded_cpp():
    cpp = (env.data_dir() / "ir" / "inductor_matmul_sum.cpp").read_text()
    loops = sc.inductor_loops(cpp)
    assert [(lp.var, lp.stop, lp.step, lp.role) for lp in loops] == [
        ("x0", "64", 1, "omp for"), ("x1", "40", 16, "vector (step = lanes)"), ("x2", "48", 1, "serial")]  # fmt: skip


def test_matmul_schedule_check_fails_the_answers_that_are_not_enough():
    def solution(s):
        s = s.tile("i", "j", "io", "jo", "ii", "ji", 8, 8).split("k", "ko", "ki", 8)
        return s.reorder("io", "jo", "ko", "ii", "ki", "ji").vectorize("ji").parallel("io")

    assert sc.check_matmul_schedule(solution).ok
    wrong = {
        "misses": sc.inductor_like,  # the lesson's schedule, untiled
        "lane(s)": lambda s: (
            s.tile("i", "j", "io", "jo", "ii", "ji", 8, 4)
            .split("k", "ko", "ki", 8)
            .reorder("io", "jo", "ko", "ii", "ki", "ji")
            .vectorize("ji")
            .parallel("io")
        ),
        "parallel": lambda s: (
            s.tile("i", "j", "io", "jo", "ii", "ji", 8, 8)
            .split("k", "ko", "ki", 8)
            .reorder("io", "jo", "ko", "ii", "ki", "ji")
            .vectorize("ji")
        ),
        "not contiguous": lambda s: s.reorder("j", "k", "i").split("i", "io", "ii", 8).vectorize("ii").parallel("j"),
        "Schedule": lambda s: s.lower(),
        "sizes M=": lambda s: s.vectorize("k"),
    }
    for why, answer in wrong.items():
        v = sc.check_matmul_schedule(answer)
        assert not v.ok and why in v.message, (why, v.message)
