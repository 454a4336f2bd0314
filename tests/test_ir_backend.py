"""course_lib.ir back end and loop nests: allocation validity, schedules respect dependences,
loop transformations preserve results (numpy oracle) and legality decisions, cache simulator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from course_lib import ir
from course_lib.ir import backend as be
from course_lib.ir import loopnest as ln
from course_lib.ir import randprog
from course_lib.ir.cache import Cache, simulate_cache


@settings(max_examples=35, deadline=None, derandomize=True, database=None)
@given(randprog.programs())
def test_allocations_valid_and_schedules_respect_deps(prog):
    f = ir.from_ssa(ir.optimize(ir.from_source(prog.source, arg_types=prog.arg_types)))
    for k in (2, 5):
        for alloc in (be.linear_scan(f, k), be.graph_coloring(f, k), be.spill_everything(f, k)):
            assert be.check_allocation(f, alloc) == [], alloc.method
    for ms in be.select(f).values():
        dag = be.dependence_dag(ms)
        for sched in (be.in_order_schedule(dag), be.list_schedule(dag, 1), be.list_schedule(dag, 2)):
            assert be.check_schedule(dag, sched) == []
        assert be.list_schedule(dag, 2).cycles <= be.in_order_schedule(dag).cycles + 1


def test_checker_rejects_bad_allocation():
    def f(a: int, b: int) -> int:
        c = a + b
        return c * a

    g = ir.from_ssa(ir.optimize(ir.from_python(f)))
    bad = be.Allocation("bad", 2, {v: 0 for v in g.var_types()}, [])
    problems = be.check_allocation(g, bad)
    assert any("a and b" in p for p in problems)
    assert be.check_allocation(g, be.Allocation("x", 2, {}, [])) != []


def dot(a: list[float], b: list[float], n: int) -> float:
    """The register-pressure and picture tests' program: one loop, a float accumulator."""
    s = 0.0
    for i in range(n):
        s += a[i] * b[i]
    return s


def test_colouring_spills_less_than_linear_scan_on_dot():
    f = ir.from_ssa(ir.optimize(ir.from_python(dot)))
    ls, gc = be.linear_scan(f, 3), be.graph_coloring(f, 3)
    assert len(gc.spilled) <= len(ls.spilled) < len(be.spill_everything(f).spilled)
    assert not be.graph_coloring(f, 16).spilled


def test_list_schedule_hides_latency():
    code = [
        be.MInstr("ld", "x", ["a", ir.Const(0)]),
        be.MInstr("add", "y", ["x", "x"]),
        be.MInstr("ld", "z", ["a", ir.Const(1)]),
        be.MInstr("mul", "w", ["z", "z"]),
    ]
    dag = be.dependence_dag(code)
    assert be.in_order_schedule(dag).cycles > be.list_schedule(dag, 1).cycles
    s = be.list_schedule(dag, 1)
    assert s.cycle[2] < s.cycle[1]  # the second load moves up, above the first add


ARR = {"A": np.arange(64.0).reshape(8, 8) / 7, "B": np.arange(64.0).reshape(8, 8) % 5, "C": np.zeros((8, 8))}


def test_loop_transforms_preserve_matmul():
    m = ln.matmul(8)
    want = ln.run_nest(m, ARR)["C"]
    assert ln.distance_vectors(m) == [(0, 0, "+")]
    for order in ([0, 1, 2], [0, 2, 1], [2, 1, 0], [1, 0, 2]):
        assert np.allclose(ln.run_nest(ln.interchange(m, order), ARR)["C"], want)
    t = ln.tile(m, {"i": 4, "j": 4, "k": 4})
    assert np.allclose(ln.run_nest(t, ARR)["C"], want)
    assert np.allclose(ln.run_nest(ln.unroll(m, 3), ARR)["C"], want)


def test_legality_from_distances():
    # A[i+1, j-1] = A[i, j]: distance (1, -1): interchange and tiling illegal
    st = ln.Stmt(ln.acc("A", "i+1", "j-1"), [ln.acc("A", "i", "j")], "=+")
    nest = ln.loop("i", 7, [ln.loop("j", 8, [st], start=1)])
    assert ln.distance_vectors(nest) == [(1, -1)]
    assert not ln.interchange_legal(ln.distance_vectors(nest), [1, 0])
    assert not ln.tiling_legal(ln.distance_vectors(nest))
    with pytest.raises(ValueError):
        ln.interchange(nest, [1, 0])
    l1 = ln.loop("i", 8, [ln.Stmt(ln.acc("B", "i"), [ln.acc("A", "i")], "=+")])
    ok = ln.loop("j", 8, [ln.Stmt(ln.acc("C", "j"), [ln.acc("B", "j")], "=+")])
    bad = ln.loop("j", 7, [ln.Stmt(ln.acc("C", "j"), [ln.acc("B", "j+1")], "=+")])
    assert ln.fusion_legal(l1, ok) and not ln.fusion_legal(l1, bad)
    arr = {"A": np.arange(8.0), "B": np.zeros(8), "C": np.zeros(8)}
    assert np.allclose(ln.run_nest(ln.fuse(l1, ok), arr)["C"], ln.run_nest([l1, ok], arr)["C"])


def test_cache_simulator_lru_and_tiling_pays():
    c = Cache(size_bytes=128, line_bytes=64, ways=2)  # one set, two ways
    assert [c.access(a) for a in (0, 64, 0, 128, 64, 0)] == [False, False, True, False, False, False]
    assert simulate_cache([0, 8, 16, 64], 1024, 64, 4).misses == 2
    shapes = {"A": (32, 32), "B": (32, 32), "C": (32, 32)}
    m = ln.matmul(32)
    naive = ln.cache_misses(m, shapes, 4096, 64, 4)
    tiled = ln.cache_misses(ln.tile(m, {"i": 8, "j": 8, "k": 8}), shapes, 4096, 64, 4)
    assert tiled < naive / 2


def test_pictures_are_deterministic_dot():
    from course_lib.ir import pictures
    from course_lib.ir.cfg import cfg_dot, dom_tree_dot

    f = ir.from_python(dot)
    assert cfg_dot(f) == cfg_dot(ir.parse(str(f))) and cfg_dot(f).startswith("digraph cfg")
    assert "for.cond1" in dom_tree_dot(f)
    assert "in: " in pictures.cfg_dot(f, pictures.liveness_annotations(f))
    h = ir.from_ssa(ir.optimize(f))
    text = pictures.interference_dot(h, be.graph_coloring(h, 3))
    assert text.startswith("graph interference") and "fillcolor" in text
    dag = be.dependence_dag(be.select(h)["for.body1"])
    assert pictures.schedule_figure(dag, be.list_schedule(dag, 2)) is not None


def test_randprog_api():
    p = randprog.generate(7)
    assert p == randprog.generate(7) and p.name == "f" and "def f(" in p.source
    value, lists = p.expected()
    assert p.fresh_args() == p.args and len(lists) == 2
    assert ir.interpret(ir.from_source(p.source), *p.fresh_args()) == value


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(randprog.programs())
def test_chaitin_spill_loop_preserves_results(prog):
    f = ir.from_ssa(ir.optimize(ir.from_source(prog.source, arg_types=prog.arg_types)))
    r = be.allocate_with_spilling(f, 3)
    assert be.check_allocation(r.fn, r.allocation) == []
    assert not any(isinstance(a, tuple) for a in r.allocation.assignment.values())
    assert ir.interpret(r.fn, *prog.fresh_args()) == prog.expected()[0]
