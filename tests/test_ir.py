"""course_lib.ir: front end, printer/parser, interpreter, SSA, dataflow, passes.

Oracles: the Python function itself (differential, on random programs of the subset), golden
printed IR under tests/data/ir/, and SSA invariants. Set UPDATE_GOLDEN=1 to rewrite goldens.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings

from course_lib import ir
from course_lib.ir import cfg, dataflow, passes, randprog
from course_lib.ir.core import Phi

DATA = Path(__file__).parent / "data" / "ir"


# ---- fixed programs ---------------------------------------------------------------------------
def dot(a: list[float], b: list[float], n: int) -> float:
    s = 0.0
    for i in range(n):
        s += a[i] * b[i]
    return s


def collatz(n: int) -> int:
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def swap_loop(n: int) -> int:
    a = 1
    b = 2
    for i in range(n):  # noqa: B007
        t = a
        a = b
        b = t
    return a * 10 + b


def sq(x: int) -> int:
    return x * x


def calls(n: int) -> int:
    total = 0
    for i in range(n):
        if i > 2 and i % 3 != 0 or i == 1:
            continue
        total += sq(i)
        if total > 50:
            break
    return total


def saxpy(x: list[float], y: list[float], alpha: float) -> float:
    out = [0.0] * len(x)
    for i in range(len(x)):
        out[i] = alpha * x[i] + y[i]
    return out[len(x) - 1]


FIXED = [
    (dot, ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], 3)),
    (collatz, (27,)),
    (swap_loop, (5,)),
    (calls, (10,)),
    (saxpy, ([1.0, 2.0], [0.5, 0.25], 3.0)),
]


@pytest.mark.parametrize("fn,args", FIXED, ids=[f.__name__ for f, _ in FIXED])
def test_fixed_programs_every_stage(fn, args):
    expected = fn(*args)
    f = ir.from_python(fn)
    res = ir.run_pipeline(f)
    for stage in res.stages:
        assert ir.interpret(stage.fn, *args) == expected, stage.name
    assert ir.interpret(ir.from_ssa(res.final), *args) == expected
    assert ir.is_ssa(res.final)


@pytest.mark.parametrize("fn", [dot, collatz, swap_loop, calls], ids=lambda f: f.__name__)
def test_golden_printed_ir(fn):
    f = ir.from_python(fn)
    text = f"; from_python\n{f}\n; to_ssa\n{ir.to_ssa(f)}\n; optimize\n{ir.optimize(f)}"
    path = DATA / f"{fn.__name__}.ir"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    # a missing golden file is a failure, not a new golden: a test that writes its own expectation
    # cannot fail (regenerate on purpose with UPDATE_GOLDEN=1)
    assert path.exists(), f"golden file {path.name} is missing; run with UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text()


def test_parse_round_trip_and_equality():
    for fn, _ in FIXED:
        f = ir.from_python(fn)
        for g in (f, ir.to_ssa(f), ir.optimize(f)):
            again = ir.parse(str(g))
            assert str(again) == str(g)
            assert again == g


def redundant(n: int) -> int:
    k = 4
    s = 0
    for i in range(n):
        s += (k * 2 + i) + (k * 2 + i)
    return s


def test_dynamic_count_drops_after_optimize():
    f = ir.from_python(redundant)
    before = ir.execute(f, 20)
    after = ir.execute(ir.optimize(f), 20)
    assert after.value == before.value == redundant(20)
    assert after.steps < before.steps
    assert "mul" not in after.op_counts and before.op_counts["mul"] == 40


# ---- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,line,col",
    [
        ("func f() -> int {\nentry:\n  x: int = frob 1\n  ret x\n}\n", 3, 12),
        ("func f() -> int {\nentry:\n  x: int = add 1\n  ret x\n}\n", 3, 17),
        ("func f() -> int {\nentry:\n  x: int = copy 1\n}\n", 4, 1),
        ("func f() -> i32 {\nentry:\n  ret 1\n}\n", 1, 13),
        ("func f() -> int {\nentry:\n  x: int = copy 1 @\n  ret x\n}\n", 3, 19),
    ],
)
def test_parse_errors_give_line_and_column(text, line, col):
    with pytest.raises(ir.IRParseError) as e:
        ir.parse(text)
    assert (e.value.line, e.value.col) == (line, col), str(e.value)
    assert f"line {line}, column {col}" in str(e.value)


def _lam(x):
    return (lambda y: y)(x)


def _tuple(x):
    a, b = x, x  # noqa: F841
    return a


def _pow(x):
    return x**2


def _for_list(a: list[int]) -> int:
    s = 0
    for v in a:
        s += v
    return s


def _string(x):
    return "no"


@pytest.mark.parametrize(
    "fn,construct",
    [
        (_lam, "lambda"),
        (_tuple, "assignment to tuple"),
        (_pow, "operator **"),
        (_for_list, "for loop over something other than range(...)"),
        (_string, "constant 'no'"),
    ],
)
def test_unsupported_constructs_name_construct_and_line(fn, construct):
    with pytest.raises(ir.UnsupportedError) as e:
        ir.from_python(fn)
    assert construct in str(e.value)
    import inspect

    first = fn.__code__.co_firstlineno
    assert first < e.value.lineno <= first + len(inspect.getsource(fn).splitlines())
    assert f"line {e.value.lineno}" in str(e.value)


# ---- analyses on a known CFG ------------------------------------------------------------------
DIAMOND = """
func f(c: int) -> int {
entry:
  br c, left, right
left:
  x: int = copy 1
  jump join
right:
  x: int = copy 2
  jump join
join:
  y: int = add x, 1
  jump loop
loop:
  y: int = add y, x
  t: int = lt y, 10
  br t, loop, exit
exit:
  ret y
}
"""


def test_dominators_frontiers_loops():
    f = ir.parse(DIAMOND)
    assert (
        cfg.idoms(f)
        == {"entry": None, "left": "entry", "right": "entry", "join": "entry", "loop": "join", "exit": "loop"}
        or cfg.idoms(f)["join"] == "entry"
    )
    df = cfg.dominance_frontiers(f)
    assert df["left"] == {"join"} and df["right"] == {"join"} and df["loop"] == {"loop"} and df["entry"] == set()
    loops = cfg.natural_loops(f)
    assert set(loops) == {"loop"} and loops["loop"].body == {"loop"}


def test_phi_placement_and_liveness():
    f = ir.parse(DIAMOND)
    s = ir.to_ssa(f)
    phis = {b.label: sorted(p.dest.split(".")[0] for p in b.phis()) for b in s.blocks}
    assert phis["join"] == ["x"] and phis["loop"] == ["y"] and phis["exit"] == []
    live = dataflow.liveness(f)
    assert live.into["loop"] == {"x", "y"} and live.out["join"] == {"x", "y"} and live.into["entry"] == {"c"}


def test_available_expressions_and_reaching_defs():
    f = ir.parse(DIAMOND)
    rd = dataflow.reaching_definitions(f)
    xs = {d for d in rd.into["join"] if d[0] == "x"}
    assert {d[1] for d in xs} == {"left", "right"}
    av = dataflow.available_expressions(f)
    assert ("add", "int", "1", "x") in av.out["join"]
    assert ("add", "int", "1", "x") not in av.into["left"]
    cp = dataflow.constant_propagation(f)
    assert cp.into["join"]["x"] == dataflow.NAC


def test_from_ssa_swap_and_lost_copy():
    # swap: two phis exchanging values; lost copy: a phi result live out of the loop after copy propagation
    f = ir.from_python(swap_loop)
    s = passes.copy_propagation(ir.to_ssa(f))
    for n in range(5):
        assert ir.interpret(ir.from_ssa(s), n) == swap_loop(n)
    lost = ir.parse(
        """
func f(n: int) -> int {
entry:
  jump loop
loop:
  x.1: int = phi [1, entry], [x.2, loop]
  x.2: int = add x.1, 1
  c: int = lt x.2, n
  br c, loop, exit
exit:
  ret x.1
}
"""
    )
    for n in range(5):
        assert ir.interpret(ir.from_ssa(lost), n) == ir.interpret(lost, n)


def test_sccp_folds_branches():
    f = ir.parse(
        """
func f(a: int) -> int {
entry:
  k: int = copy 4
  c: int = gt k, 2
  br c, yes, no
yes:
  r: int = mul k, 3
  jump done
no:
  r: int = add a, 1
  jump done
done:
  ret r
}
"""
    )
    o = ir.optimize(f)
    assert o.labels() == ["entry"] and str(o.blocks[0].term) == "ret 12"


def test_cse_licm():
    def g(a: list[int], n: int, k: int) -> int:
        s = 0
        for i in range(n):
            s += (k * 3 + 1) + (k * 3 + 1) + a[i % len(a)]
        return s

    f = ir.from_python(g)
    o = ir.optimize(f)
    loop = cfg.natural_loops(o)
    body_ops = [str(i) for lp in loop.values() for b in lp.body for i in o.block(b).instrs]
    assert not any("mul k, 3" in t for t in body_ops)
    assert sum("mul k, 3" in str(i) for _, i in o.instructions()) == 1
    assert ir.interpret(o, [1, 2], 5, 2) == g([1, 2], 5, 2)


# ---- property-based: random programs through every pass and pipeline ----------------------
PIPELINES = [
    passes.DEFAULT_PIPELINE,
    ["to_ssa", "lvn", "dce"],
    ["to_ssa", "licm", "sccp", "dce", "simplifycfg"],
    ["to_ssa", "copyprop", "cse", "licm", "dce"],
]


def _check(prog, f):
    args = prog.fresh_args()
    got = ir.interpret(f, *args)
    want, lists = prog.expected()
    assert got == want and [a for a in args if isinstance(a, list)] == lists, prog.source


@settings(max_examples=110, deadline=None, derandomize=True, database=None)
@given(randprog.programs())
def test_random_programs_every_pass(prog):
    f = ir.from_source(prog.source, arg_types=prog.arg_types)
    assert str(ir.parse(str(f))) == str(f)
    _check(prog, f)
    s = ir.to_ssa(f)
    assert ir.is_ssa(s), ir.ssa.ssa_violations(s)
    for b in s.blocks:  # phis first, one input per predecessor
        phis = b.phis()
        assert b.instrs[: len(phis)] == phis
        for p in phis:
            assert set(p.incoming) == set(s.preds()[b.label])
    _check(prog, s)
    _check(prog, ir.from_ssa(s))
    for name, p in passes.PASSES.items():
        if name != "to_ssa":
            out = p(s)
            assert ir.is_ssa(out), (name, ir.ssa.ssa_violations(out))
            _check(prog, out)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(randprog.programs())
def test_random_programs_every_pipeline(prog):
    f = ir.from_source(prog.source, arg_types=prog.arg_types)
    for pl in PIPELINES:
        res = ir.run_pipeline(f, pl)
        for st in res.stages[1:]:
            if st.name != "to_ssa":
                assert ir.is_ssa(st.fn), (pl, st.name)
        _check(prog, res.final)
        _check(prog, ir.from_ssa(res.final))
        assert ir.parse(str(res.final)) == res.final


def test_no_phi_left_after_from_ssa():
    f = ir.optimize(ir.from_python(collatz))
    assert not any(isinstance(i, Phi) for _, i in ir.from_ssa(f).instructions())


# ---- parameter types from annotations, arg_types, use, default -------------------------------------
def rescale(x, k):
    x = x * 0.5
    return x + k


def rebinds_annotated(x: int):
    x = x / 2
    return x


def test_parameter_types_come_from_use_when_not_annotated():
    f = ir.from_python(rescale)
    assert f.params == [("x", "float"), ("k", "int")] and f.param_origins == ["use", "default"]
    assert ir.interpret(f, 3, 4) == rescale(3, 4)
    assert ir.from_python(rescale, ["float", "float"]).param_origins == ["call", "call"]
    with pytest.raises(ir.UnsupportedError, match="parameter 'x' annotated int but assigned a float"):
        ir.from_python(rebinds_annotated)
    with pytest.raises(ValueError, match="arg_types names 1 types"):
        ir.from_python(rescale, ["int"])


def _while_rule(back_edge: bool):
    from course_lib.ir.core import Branch, Jump

    def rule(L, s):
        cond_l, body_l, end_l = L.labels("while.cond", "while.body", "while.end")
        L.terminate(Jump(cond_l), L.new_block(cond_l))
        c = L.cond(s.test)
        body_b, end_b = L.new_block(body_l), L.new_block(end_l, place=False)
        L.terminate(Branch(c, body_l, end_l), body_b)
        L.loops.append((cond_l, end_l))
        L.lower(s.body)
        L.loops.pop()
        L.terminate(Jump(cond_l if back_edge else end_l), end_b)
        L.place(end_b)

    return rule


def _run_with(rule, prog):
    from course_lib.ir import frontend

    with frontend.override("While", rule):
        fn = ir.from_source(prog.source, prog.name, prog.arg_types)
    args = prog.fresh_args()
    return ir.interpret(fn, *args, max_steps=200_000), [a for a in args if isinstance(a, list)]


def test_a_while_rule_through_the_builder_api_matches_cpython_and_a_wrong_one_does_not():
    from course_lib.ir import frontend

    progs = randprog.while_programs(10)
    assert all(_run_with(_while_rule(True), p) == p.expected() for p in progs)
    assert sum(_run_with(_while_rule(False), p) != p.expected() for p in progs) >= 3  # the fixed loops catch it
    with pytest.raises(ValueError, match="not one of While, If"):
        with frontend.override("For", _while_rule(True)):
            pass
