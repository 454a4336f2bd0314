"""course_lib.llvm.lowering: course IR -> LLVM IR two ways, the JIT against the interpreter and
Python, and our SSA against LLVM's mem2reg over Module 1's random programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course_lib import ir, llvm
from course_lib.ir import randprog
from course_lib.llvm import lowering, passes, ssa_compare


def floor_mix(a: int, b: int, x: float, y: float) -> float:
    q = a // b + a % b * 3
    if x > y:
        q = q + 1
    return q + x // y + x % y - min(a, b) + max(x, y) + abs(a - b)


def fill(a: list[int], n: int) -> int:
    b = [0] * n
    s = 0
    for i in range(n):
        b[i] = a[i % len(a)] * i
        s += b[i]
    a[0] = s
    return s + b[-1]


def loop_swap(n: int) -> int:
    x = 1
    y = 2
    k = 0
    while k < n:
        t = x
        x = y
        y = t + y
        k += 1
    return x * 10 + y


SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("style", ["alloca", "ssa"])
@pytest.mark.parametrize("fn", [floor_mix, fill, loop_swap])
def test_both_lowerings_verify_and_have_their_shape(fn, style):
    module = llvm.lower(ir.from_python(fn), style=style)
    counts = passes.opcode_counts(str(module))  # parses and verifies
    own = [f for f in passes.parse(str(module)).functions if f.name == fn.__name__][0]
    ops = {i.opcode for b in own.blocks for i in b.instructions}
    if style == "alloca":
        assert "alloca" in ops and "phi" not in ops
    else:
        assert "alloca" not in ops
    assert counts


def test_ssa_lowering_keeps_the_loop_phis():
    text = str(llvm.lower(ir.from_python(loop_swap), style="ssa"))
    assert text.count(" = phi ") >= 3  # x, y, k at the loop header


@SETTINGS
@given(a=st.integers(-50, 50), b=st.integers(-9, 9).filter(bool), x=st.floats(-20, 20), y=st.floats(0.5, 7))
def test_python_division_semantics_survive_lowering(a, b, x, y):
    fn = _jitted(floor_mix)
    assert fn(a, b, x, y) == pytest.approx(floor_mix(a, b, x, y), rel=1e-12, abs=1e-12)


@SETTINGS
@given(values=st.lists(st.integers(-100, 100), min_size=1, max_size=8), n=st.integers(1, 12))
def test_lists_are_passed_by_reference(values, n):
    ours, theirs = list(values), list(values)
    assert _jitted(fill)(ours, n) == fill(theirs, n)
    assert ours == theirs
    assert ir.interpret(ir.from_python(fill), list(values), n) == fill(list(values), n)


_CACHE: dict = {}


def _jitted(fn, style="alloca"):
    if (fn, style) not in _CACHE:
        _CACHE[fn, style] = llvm.jit(ir.from_python(fn), style=style)
    return _CACHE[fn, style]


def _run(prog, style):
    fn_ir = ir.from_source(prog.source, prog.name, prog.arg_types)
    args = prog.fresh_args()
    value = llvm.jit(fn_ir, level=2, style=style)(*args)
    return fn_ir, (value, [a for a in args if isinstance(a, list)])


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(prog=randprog.programs())
def test_random_programs_jit_equals_python_and_interpreter(prog):
    fn_ir, got = _run(prog, "alloca")
    want = prog.expected()
    assert got == want, prog.source
    args = prog.fresh_args()
    assert ir.interpret(fn_ir, *args) == want[0]
    _, got_ssa = _run(prog, "ssa")
    assert got_ssa == want, prog.source


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(prog=randprog.programs())
def test_our_ssa_places_the_same_phis_as_llvm_mem2reg(prog):
    fn_ir = ir.from_source(prog.source, prog.name, prog.arg_types)
    result = ssa_compare.compare(fn_ir)
    assert result.same, f"{result}\n{prog.source}"


def test_the_comparison_is_not_empty_on_a_loop():
    result = ssa_compare.compare(ir.from_python(loop_swap))
    assert result.same and {v for _, v in result.ours} >= {"x", "y", "k"}


def test_stable_api_targets():
    module = llvm.lower(ir.from_python(loop_swap))
    assert "define" in str(llvm.optimize(module, 3))
    for target in ("x86_64", "nvptx64", "amdgcn"):
        assert "loop_swap" in llvm.emit_asm(str(module), target)
    assert llvm.jit(ir.from_python(loop_swap))(5) == loop_swap(5)


def test_unknown_style_is_rejected():
    with pytest.raises(ValueError, match="alloca"):
        lowering.lower(ir.from_python(loop_swap), style="fast")


# ---- parameter types: inferred from use and from the call, never a silent float -> int ------------
def scale_sum(x, n):  # the program: no annotations at all
    s = 0.0
    for i in range(n):
        s += x * i
    return s


def total(a, n):  # an unannotated list parameter, read only
    s = 0
    for i in range(n):
        s += a[i]
    return s


def halve_all(a):  # a list parameter that receives floats
    for i in range(len(a)):
        a[i] = a[i] / 2
    return len(a)


def strict(x: int, n):
    return x * n


def test_unannotated_parameters_follow_the_call_arguments():
    rng = __import__("random").Random(23)
    f = llvm.jit(ir.from_python(scale_sum))
    assert f(0.5, 6) == scale_sum(0.5, 6) == 7.5  # was 0.0: 0.5 truncated to 0
    for _ in range(30):
        x = rng.choice([rng.randint(-50, 50), rng.uniform(-10, 10)])
        n = rng.randint(0, 20)
        assert f(x, n) == pytest.approx(scale_sum(x, n), rel=1e-12, abs=1e-12), (x, n)
    assert set(f.specialisations) <= {("float", "int")}  # int x fits the compiled (int, int) version


def test_unannotated_list_parameters_are_inferred_from_use():
    fn_ir = ir.from_python(total)
    assert fn_ir.params == [("a", "list[int]"), ("n", "int")] and fn_ir.param_origins == ["use", "default"]
    assert ir.from_python(halve_all).params == [("a", "list[float]")]
    rng = __import__("random").Random(5)
    f = llvm.jit(fn_ir)
    for _ in range(20):
        a = [rng.choice([rng.randint(-9, 9), rng.uniform(-9, 9)]) for _ in range(rng.randint(1, 12))]
        assert f(a, len(a)) == pytest.approx(total(a, len(a))), a
    mine, theirs = [1.0, 3.0, 5.0], [1.0, 3.0, 5.0]
    assert llvm.jit(ir.from_python(halve_all))(mine) == halve_all(theirs) and mine == theirs


def test_a_float_for_an_int_parameter_is_an_error_not_a_truncation():
    with pytest.raises(TypeError, match=r"parameter 'x' is int \(annotated\).*0\.5 is not converted"):
        llvm.jit(ir.from_python(strict))(0.5, 6)
    with pytest.raises(TypeError, match="fixed when the IR was built"):
        llvm.jit(ir.from_python(scale_sum, ["int", "int"]))(0.5, 6)
    assert llvm.jit(ir.from_python(strict))(2, 6.0) == 12.0  # unannotated n follows the call
    with pytest.raises(TypeError, match=r"takes 2 arguments \(x, n\), got 1"):
        llvm.jit(ir.from_python(strict))(2)
    with pytest.raises(TypeError, match="a str argument"):
        llvm.jit(ir.from_python(scale_sum))("a", 2)
