"""course_lib.dynamo: bytecode views, guards, recompilation, graph breaks, the PEP 523 hook."""

import contextlib
import dis
import glob
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_lib import compat, dynamo
from course_lib.dynamo import symbolic_convert


def _is_python312(path: str) -> bool:
    try:
        out = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    return out.stdout.strip() == "True"


def find_python312() -> Path | None:
    """A Python 3.12 interpreter where users keep one: $COURSE_PYTHON312, python3.12 on PATH,
    pyenv's versions, ``uv python find 3.12``, the usual system and Homebrew places."""
    if sys.version_info[:2] == (3, 12):  # the test runs on 3.12 itself (the GPU machine)
        return Path(sys.executable)
    candidates = [os.environ.get("COURSE_PYTHON312"), shutil.which("python3.12")]
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", "3.12*", "bin", "python3.12")), reverse=True)
    if shutil.which("uv"):
        found = subprocess.run(["uv", "python", "find", "3.12"], capture_output=True, text=True, timeout=60)
        candidates.append(found.stdout.strip() if found.returncode == 0 else None)
    candidates += ["/usr/bin/python3.12", "/usr/local/bin/python3.12", "/opt/homebrew/bin/python3.12"]
    for path in candidates:
        if path and os.path.exists(path) and _is_python312(path):
            return Path(path)
    return None


PY312 = find_python312()
NO_PY312 = "no Python 3.12 found (set COURSE_PYTHON312, or install one with pyenv, uv or the system's packages)"


def f_loop(x, ws):
    for w in ws:
        x = x * w
    if x.sum() > 0:
        print("positive")
    return torch.relu(x).sum(dim=0)


def test_dis_table_stack_depth_follows_the_control_flow():
    rows = dynamo.dis_table(f_loop)
    names = [r[2] for r in rows]
    assert "FOR_ITER" in names and "RETURN_VALUE" in names
    assert all(r[-1] >= 0 for r in rows)
    assert max(r[-1] for r in rows) == f_loop.__code__.co_stacksize  # the compiler's own maximum
    assert rows[-1][-1] == 0  # RETURN_VALUE leaves an empty stack


def test_stack_depths_reach_co_stacksize_on_every_corpus_code_object():
    """The depth walk agrees with the compiler on ~500 code objects (loops, try, with, generators,
    comprehensions): its maximum is ``co_stacksize`` and it never goes below zero."""
    from course_lib.dynamo.bytecode import stack_depths

    codes = []

    def walk(code):
        codes.append(code)
        for const in code.co_consts:
            if hasattr(const, "co_code"):
                walk(const)

    for path in CORPORA.values():
        walk(compile(path[0].read_text(), str(path[0]), "exec"))
    wrong = []
    for code in codes[1:]:  # [0] is the module body
        depths = stack_depths(code)
        after = [r[-1] for r in dynamo.dis_table(code)]
        if max(depths + after) != code.co_stacksize or min(depths + after) < 0:
            wrong.append(f"{code.co_name}:{code.co_firstlineno} max {max(depths + after)} vs {code.co_stacksize}")
    assert len(codes) > 400 and not wrong, wrong


def test_code_fields_and_line_table():
    fields = dynamo.code_fields(f_loop)
    assert fields["co_varnames"] == ("x", "ws", "w") and fields["co_argcount"] == 2
    assert "torch" in fields["co_names"] and "OPTIMIZED" in fields["co_flags"]
    lines = dynamo.line_table(f_loop)
    assert lines[0][0] == 0 and {r[2] for r in lines} == {0, 1, 2, 3, 4, 5}


def test_frame_view_of_a_real_frame():
    def probe(x, k=3):
        return dynamo.frame_view(sys._getframe())

    view = probe(torch.ones(2))
    assert view.locals == {"x": "Tensor(float32[2])", "k": "3"} and view.name == "probe"
    assert "dynamo" in view.globals_read


def test_handlers_cover_every_opcode_the_corpus_uses_on_311():
    src = (Path(__file__).parent / "data" / "dynamo" / "corpus.py").read_text()
    used = set()

    def walk(code):
        used.update(i.opname for i in dis.get_instructions(code))
        for c in code.co_consts:
            if hasattr(c, "co_code"):
                walk(c)

    walk(compile(src, "dynamo_corpus.py", "exec"))
    module_level = {
        "IMPORT_NAME",
        "IMPORT_FROM",
        "STORE_NAME",
        "LOAD_NAME",
        "LOAD_BUILD_CLASS",
        "STORE_GLOBAL",
        "RETURN_VALUE",
    }
    missing = {u for u in used - module_level if u not in symbolic_convert.HANDLED} - {
        "LOAD_SUPER_ATTR",
        "LOAD_ASSERTION_ERROR",
    }
    # super().__init__ (class bodies) runs at import time, not inside captured code
    assert missing <= {"STORE_ATTR", "LOAD_CLASSDEREF"} or not missing, missing


# Opcodes of frames that course_lib.dynamo runs as plain Python on purpose (frame_unsupported):
# try/except and with blocks (they come with an exception table), and class bodies.
FRAME_SKIPPING = {"BEFORE_WITH", "CHECK_EXC_MATCH", "POP_EXCEPT", "PUSH_EXC_INFO", "WITH_EXCEPT_START"}
CORPORA = {
    "corpus.py": (Path(__file__).parent / "data" / "dynamo" / "corpus.py", set()),
    "functions.py": (Path(__file__).parent / "dynamo_corpus" / "functions.py", FRAME_SKIPPING),
}


@pytest.mark.skipif(PY312 is None, reason=NO_PY312)
@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_handlers_cover_the_corpus_on_312(corpus):
    """Compile a corpus with Python 3.12 (no torch needed) and check every opcode its
    functions use has a handler (or makes the frame run as plain Python, by design), and that
    every handler name is a 3.11 or 3.12 opcode."""
    path, skipping = CORPORA[corpus]
    script = (
        "import dis, json, sys\n"
        "src = open(sys.argv[1]).read()\n"
        "used = set()\n"
        "def walk(c, top):\n"
        "    if not top: used.update(i.opname for i in dis.get_instructions(c))\n"
        "    for k in c.co_consts:\n"
        "        if hasattr(k, 'co_code'): walk(k, False)\n"
        "walk(compile(src, 'c.py', 'exec'), True)\n"
        "print(json.dumps({'used': sorted(used), 'opnames': [n for n in dis.opname if not n.startswith('<')]}))\n"
    )
    out = subprocess.run([str(PY312), "-c", script, str(path)], capture_output=True, text=True, timeout=60, check=True)
    info = json.loads(out.stdout)
    class_body = {"LOAD_NAME", "STORE_NAME", "LOAD_SUPER_ATTR", "LOAD_BUILD_CLASS", "STORE_ATTR"}
    missing = set(info["used"]) - set(symbolic_convert.HANDLED) - class_body - skipping
    assert not missing, f"3.12 opcodes without a handler: {sorted(missing)}"
    here = {n for n in dis.opname if not n.startswith("<")}
    if sys.version_info[:2] == (3, 11):  # the table below is what 3.12 dropped from 3.11
        assert here - set(info["opnames"]) == REMOVED_IN_312, sorted(here - set(info["opnames"]))
    known = set(info["opnames"]) | here | REMOVED_IN_312
    extra = set(symbolic_convert.HANDLED) - known - {"LOAD_FAST_LOAD_FAST", "JUMP_ABSOLUTE"}
    assert not extra, f"handlers named after no 3.11/3.12 opcode: {sorted(extra)}"


# 3.11 opcodes that 3.12 removed (its dis docs: POP_JUMP_FORWARD/BACKWARD_* became relative
# POP_JUMP_IF_*, PRECALL went, `a or b` uses COPY + POP_JUMP_IF_*, the rare ones became
# CALL_INTRINSIC_1 functions). On a 3.12-only machine this names the 3.11 handlers; on 3.11 the
# test above checks the table against both interpreters.
REMOVED_IN_312 = frozenset({
    "ASYNC_GEN_WRAP", "IMPORT_STAR", "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP", "LIST_TO_TUPLE",
    "LOAD_CLASSDEREF", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_TRUE", "PRECALL", "PREP_RERAISE_STAR", "PRINT_EXPR",
    "UNARY_POSITIVE",
})  # fmt: skip


def scaled(x, k):
    return x * k + SCALE_G


SCALE_G = 1.0


def test_guards_recorded():
    e = dynamo.explain(scaled, torch.ones(2, 3), 4)
    text = sorted(str(g) for g in e.guards)
    assert text == [
        "G['SCALE_G']: CONSTANT_MATCH == 1.0",
        "L['k']: CONSTANT_MATCH == 4",
        "L['x']: TENSOR_MATCH dtype=float32 shape=[2, 3] device=cpu requires_grad=False",
    ]


def test_recompile_names_the_failed_guard():
    opt = dynamo.optimize()(scaled)
    opt(torch.ones(2, 3), 4)
    opt(torch.ones(2, 3), 4)
    opt(torch.ones(5, 3), 4)
    opt(torch.ones(2, 3), 5)
    opt(torch.ones(2, 3, dtype=torch.float64), 4)
    assert opt.calls == ["compile", "hit", "compile", "compile", "compile"]
    assert opt.recompile_reasons == [
        "tensor L['x'] size mismatch at index 0. expected 2, actual 5",
        "L['k'] == 4 failed (now 5)",
        "tensor L['x'] dtype mismatch. expected float32, actual float64",
    ]


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x).relu()


def test_module_identity_guard():
    m = Small()
    opt = dynamo.optimize()(m)
    e = dynamo.explain(m, torch.ones(1, 2))
    kinds = {str(g.source): g.kind for g in e.guards}
    assert kinds["L['self']"] == "ID_MATCH" and kinds["L['self'].lin"] == "ID_MATCH"
    assert [n.op for n in e.graphs[0].nodes] == ["placeholder", "call_module", "call_method", "output"]
    assert torch.equal(opt(torch.ones(1, 2)), m(torch.ones(1, 2)))


def breaking(x):
    y = x.sin()
    v = y.sum().item()
    print("v is", round(v, 3))
    return y * v


def test_breaks_have_reasons_and_graphs_run_compiled():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        e = dynamo.explain(breaking, torch.ones(3))
    assert out.getvalue() == "v is 2.524\n"  # the print ran once, eagerly
    assert [b.reason.split(" ")[0] for b in e.breaks] == ["Unsupported", "Failed"]
    assert e.graph_count == 2 and [g.op_count for g in e.captured] == [2, 1]
    assert torch.allclose(e.out, breaking(torch.ones(3)))


def test_hook_uninstalled_also_on_error():
    def bad(x):
        return x + undefined_name  # noqa: F821

    with pytest.raises(NameError):
        dynamo.optimize()(bad)(torch.ones(1))
    prior = compat.dynamo_set_eval_frame(None)
    assert prior in (None, False)


def caller(x):
    return helper_with_break(x) + 1


def helper_with_break(x):
    print("in helper")
    return x * 2


def test_nested_frames_are_translated():
    with contextlib.redirect_stdout(io.StringIO()):
        e = dynamo.explain(caller, torch.ones(2))
    assert e.graph_count == 2 and [g.frame for g in e.captured] == ["helper_with_break", "caller"]


def test_step_trace_is_deterministic():
    _, out = dynamo.capture(scaled, (torch.ones(2), 2))
    trace = out.traces[0]
    assert trace[0].endswith("RESUME") and any("BINARY_OP *" in t for t in trace)


def test_step_table_shows_stack_and_graph_growth():
    def f(x, ws):
        for w in ws:
            x = x * w
        return x

    text = str(dynamo.step_table(f, torch.ones(2), [2.0], limit=12))
    assert "iter(1/1) | T(L['x']) | 2.0" in text and "iter(1/1) | T(mul)" in text


# The 3.12 interpreter compiles the function and sends back its instructions and exception table.
# marshal (not JSON) keeps tuples, frozensets and bytes as they are; marshal's format for plain
# values is the same on 3.11 and 3.12. A nested code object cannot travel: the script refuses.
_DIS312 = (
    "import dis, marshal, sys, types\n"
    "ns = {'case': lambda *a, **k: (lambda f: f)}  # the corpus's decorator, as a no-op\n"
    "exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'), ns)\n"
    "code = ns[sys.argv[2]].__code__\n"
    "assert not any(isinstance(c, types.CodeType) for c in code.co_consts), 'nested code objects'\n"
    "rows = [(i.offset, i.opname, i.arg, i.argval, i.argrepr, i.positions.lineno, i.is_jump_target)\n"
    "        for i in dis.get_instructions(code)]\n"
    "table = [(e.start, e.end, e.target, e.depth, e.lasti) for e in dis.Bytecode(code).exception_entries]\n"
    "print(marshal.dumps((rows, table)).hex())\n"
)


def _code_312(fn, tmp_path):
    """``fn``'s instructions and exception table as Python 3.12 compiles it (a 3.12 interpreter, no torch)."""
    import inspect
    import marshal
    import textwrap

    src = tmp_path / "f312.py"
    src.write_text("\n" * (fn.__code__.co_firstlineno - 1) + textwrap.dedent(inspect.getsource(fn)))
    out = subprocess.run([str(PY312), "-c", _DIS312, str(src), fn.__name__],
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    rows, table = marshal.loads(bytes.fromhex(out.stdout.strip()))
    instrs = [dynamo.bytecode.Instr(k, *row, None) for k, row in enumerate(rows)]
    return instrs, [dynamo.bytecode.ExceptionEntry(*entry) for entry in table]


def _translate_as_312(fn, tmp_path, monkeypatch) -> list:
    """Make the translator see ``fn``'s 3.12 bytecode (its callees keep this Python's)."""
    instrs, table = _code_312(fn, tmp_path)
    real_instrs, real_table = symbolic_convert.instructions, symbolic_convert.exception_entries
    monkeypatch.setattr(symbolic_convert, "instructions", lambda c: instrs if c is fn.__code__ else real_instrs(c))
    monkeypatch.setattr(symbolic_convert, "exception_entries", lambda c: table if c is fn.__code__ else real_table(c))
    monkeypatch.setattr(symbolic_convert, "_PY312", True)  # 3.12's LOAD_ATTR method flag
    return instrs


@pytest.mark.skipif(PY312 is None, reason=NO_PY312)
@pytest.mark.parametrize("name", ["print_in_comprehension", "list_comprehension", "print_in_loop"])
def test_312_bytecode_gives_the_same_counts(name, tmp_path, monkeypatch):
    """Run the translator on the 3.12 bytecode of a corpus case (inlined comprehension: PEP 709)
    and compare with torch's counts (the same on 3.11 and 3.12, recorded on both)."""
    sys.path.insert(0, str(Path(__file__).parent / "data" / "dynamo"))
    from corpus import CASES

    _, fn, make_args, expected = next(c for c in CASES if c[0] == name)
    ours312 = _translate_as_312(fn, tmp_path, monkeypatch)
    if name != "print_in_loop":
        assert list(symbolic_convert.comprehension_regions(ours312).values())  # one region found
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        e = dynamo.explain(fn, *make_args())
    assert (e.graph_count, e.graph_break_count, len(e.break_reasons)) == expected
    assert torch.allclose(e.out, fn(*make_args()))
    if name == "print_in_comprehension":
        assert printed.getvalue() == "step 0\nstep 1\n" and e.breaks[0].instruction == "BUILD_LIST"


# Functions of tests/dynamo_corpus/functions.py whose 3.12 bytecode takes paths 3.11's does not
# (and that call no function of their own, whose code would stay 3.11's here).
PATHS_312 = [
    "comprehension_break_inside_loop", "comprehension_break_inside_try", "comprehension_break_then_loop",
    "comprehension_restores_shadowed_local", "comprehension_break_restores_shadowed_local", "setcomp_with_break",
    "dictcomp_with_break", "nested_comprehension_break", "comprehension_filter_break", "unary_intrinsics",
    "star_tuple_intrinsic", "slices_load_and_store", "deleted_local_reassigned", "return_inside_for",
]  # fmt: skip


@pytest.mark.skipif(PY312 is None, reason=NO_PY312)
@pytest.mark.parametrize("name", PATHS_312)
def test_312_bytecode_agrees_with_torch_on_312(name, tmp_path, monkeypatch):
    """Here, without a torch for 3.12: the translator on a function's 3.12 bytecode gives the counts
    torch._dynamo.explain gave on Python 3.12 (tests/dynamo_corpus/torch_explain_py312.json; where
    that Dynamo raised, the counts course_lib.dynamo recorded there), and the eager result. The GPU
    machine runs the same functions on a real 3.12 in test_dynamo_functions.py."""
    sys.path.insert(0, str(Path(__file__).parent))
    from dynamo_corpus.functions import CASES
    from dynamo_corpus.harness import mismatch, run_eager, run_ours
    from dynamo_corpus.record_torch import record_path

    row = json.loads(record_path((3, 12)).read_text())["cases"][name]
    expected = row["torch"] if row["torch"] != "raised" else row["ours"]
    _, fn, make_args = next(c for c in CASES if c[0] == name)
    _translate_as_312(fn, tmp_path, monkeypatch)
    got, e = run_ours(fn, make_args)
    assert mismatch(run_eager(fn, make_args), got) is None, mismatch(run_eager(fn, make_args), got)
    assert [e.graph_count, e.graph_break_count, len(e.break_reasons)] == expected, str(e)


# ----------------------------------------------------------------------------- automatic dynamic


def _pointwise(x):
    return x.sin() * 2 + 1


def _two_inputs(x, y):
    return x * y + y


def _real_compile_count(fn, calls) -> int:
    """How many times torch.compile's Dynamo calls its backend for these calls (no graph breaks
    in these functions, so one backend call per frame compile)."""
    compat.dynamo_reset()
    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for args in calls:
        compiled(*args)
    compat.dynamo_reset()
    return count[0]


SIZE_SEQUENCES = [
    (_pointwise, [[(2, 3)], [(3, 3)], [(4, 3)], [(5, 3)]]),  # the second size recompiles as s0, then hits
    (_pointwise, [[(2, 3)], [(3, 3)], [(1, 3)], [(5, 3)], [(1, 3)]]),  # size 1 is specialised: its own entry
    (_pointwise, [[(2, 3)], [(2, 5)], [(4, 5)], [(6, 7)]]),  # dim 1 then dim 0 become dynamic
    (_two_inputs, [[(2, 3), (2, 3)], [(4, 3), (4, 3)], [(5, 3), (5, 3)]]),  # one shared symbol
    (_two_inputs, [[(2, 3), (2, 3)], [(4, 3), (4, 3)], [(5, 3), (1, 3)]]),  # y's size 1 breaks the equality
]


@pytest.mark.parametrize(
    "fn, shapes", SIZE_SEQUENCES, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(SIZE_SEQUENCES)]
)
def test_automatic_dynamic_recompiles_as_often_as_torch(fn, shapes):
    g = torch.Generator().manual_seed(0)
    calls = [tuple(torch.randn(*s, generator=g) for s in call) for call in shapes]
    opt = dynamo.optimize("eager")(fn)
    for args in calls:
        assert torch.allclose(opt(*args), fn(*args))
    assert opt.calls.count("compile") == _real_compile_count(fn, calls), opt.calls


def test_dynamic_dims_reach_the_backend_and_the_guards():
    seen = []

    def backend(gm, example_inputs):  # a torch-style backend: gets a torch.fx.GraphModule
        seen.append(gm.meta["course_dynamic_dims"])
        return gm.forward

    opt = dynamo.optimize(dynamo.graph_module_backend(backend))(_two_inputs)
    for n in (2, 4, 7):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        assert torch.allclose(opt(x, y), _two_inputs(x, y))
    assert seen == [{}, {0: (0,), 1: (0,)}] and opt.calls == ["compile", "compile", "hit"]
    text = [str(g) for g in opt.cache[1].guards]
    assert "L['x']: TENSOR_MATCH dtype=float32 shape=[s0, 3] device=cpu requires_grad=False" in text
    assert "L['x']: SHAPE_ENV 2 <= L['x'].size()[0]" in text
    assert "L['y']: SHAPE_ENV L['y'].size()[0] == L['x'].size()[0]" in text
    assert opt.recompile_reasons == ["tensor L['x'] size mismatch at index 0. expected 2, actual 4"]
    opt(torch.randn(1, 3), torch.randn(1, 3))  # 0/1 specialisation: 2 <= s0 fails, a static entry
    assert opt.calls[-1] == "compile" and "2 <= L['x'].size()[0]" in opt.recompile_details[-1][1]


def test_a_size_read_into_python_specialises():
    def reads_size(x):
        return x.reshape(x.shape[0], -1) * 2

    opt = dynamo.optimize()(reads_size)
    for n in (2, 3, 3, 4):
        x = torch.randn(n, 2, 2)
        assert torch.equal(opt(x), reads_size(x))
    assert opt.calls == ["compile", "compile", "hit", "compile"]  # no symbol survives the read
    assert all(entry.dynamic == {} for entry in opt.cache)
    assert "shape=[3, 2, 2]" in str(opt.cache[1].guards[0])


def test_dynamic_true_and_false():
    always = dynamo.optimize(dynamic=True)(_pointwise)
    never = dynamo.optimize(dynamic=False)(_pointwise)
    for n in (2, 3, 4):
        x = torch.randn(n, 5)
        assert torch.allclose(always(x), _pointwise(x)) and torch.allclose(never(x), _pointwise(x))
    assert always.calls == ["compile", "hit", "hit"] and never.calls == ["compile"] * 3
    assert "shape=[s0, s1]" in str(always.cache[0].guards[0])
    with pytest.raises(ValueError, match="dynamic must be"):
        dynamo.optimize(dynamic="yes")(_pointwise)


def test_automatic_dynamic_end_to_end_through_course_inductor():
    """course_lib.dynamo marks the size dynamic on the second size; course_lib.inductor compiles one
    C++ graph with a size argument that then serves every later size (no further compile)."""
    from course_lib.inductor import compile_fx

    record = []
    opt = dynamo.optimize(dynamo.graph_module_backend(lambda gm, ex: compile_fx(gm, ex, record=record)))(_two_inputs)
    g = torch.Generator().manual_seed(0)
    for n in (2, 3, 5, 8):
        x, y = torch.randn(n, 4, generator=g), torch.randn(n, 4, generator=g)
        assert torch.allclose(opt(x, y), _two_inputs(x, y), atol=1e-6)
    assert opt.calls == ["compile", "compile", "hit", "hit"]
    assert [kind for kind, _ in record] == ["compiled", "compiled"]
    assert [compiled.dynamic for _, compiled in record] == [False, True]


def test_a_compiled_closure_that_writes_its_nonlocal_updates_the_real_cell():
    """``nonlocal n; n += 1`` in the compiled function: each call sees the previous call's write,
    and so does Python code holding the same cell (the write used to stay inside the translator)."""

    def make():
        n = 0

        def step(a):
            nonlocal n
            n += 1
            return a * n

        return step, lambda: n

    step, count = make()
    opt = dynamo.optimize("python")(step)
    assert [opt(torch.ones(2)).tolist() for _ in range(3)] == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
    assert count() == 3
