"""course_lib.debugtools against the real tools: torch's logs, depyf, tlparse, pdb, Dynamo's guards, export.

Nothing here runs Inductor (its gcc builds belong to the 04d/04e notebooks): the debug-folder and
output-code readers are tested on a folder laid out as torch 2.13 writes it, with file contents cut
from a real run.
"""

from __future__ import annotations

import sys
import zipfile

import pytest
import torch

from course_lib import compat, debugtools


def with_break(x, y):
    a = torch.sin(x) + y
    print("side effect")  # graph break
    return (a * 2).relu().sum(-1)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    compat.dynamo_reset()
    yield
    compat.dynamo_reset()


# ----------------------------------------------------------------------------- logs


def test_parse_logs_reads_torch_format():
    text = (
        "V1203 13:35:33.295000 10394 torch/_dynamo/symbolic_convert.py:5124] [0/0] [__graph_breaks] Graph break\n"
        "V1203 13:35:33.295000 10394 torch/_dynamo/guards.py:1] [0/1_1] [__guards] +- TENSOR_MATCH: x\n"
        "I1203 13:35:33.295000 10394 torch/_dynamo/eval_frame.py:1] plain component line\n"
        "not a log line\n"
    )
    logs = debugtools.parse_logs(text)
    assert logs.of("graph_breaks") == ["Graph break"]
    assert logs.of("guards", frame="0/1") == ["+- TENSOR_MATCH: x"]
    assert logs.of("guards", frame="0/0") == []
    assert logs.artifacts() == {"graph_breaks": 1, "guards": 1, "(component)": 1}
    assert logs.frames() == ["0/0", "0/1_1"]


def test_capture_logs_live_recompile_and_break(capsys):
    compiled = torch.compile(with_break, backend="eager")
    with debugtools.capture_logs(graph_breaks=True, recompiles=True, guards=True, bytecode=True) as logs:
        compiled(torch.randn(4, 8), torch.randn(4, 8))
        compiled(torch.randn(6, 8), torch.randn(6, 8))
    assert set(logs.artifacts()) >= {"graph_breaks", "recompiles", "guards", "bytecode"}
    reasons = debugtools.recompile_reasons(logs)
    assert any("'x'" in r and "index 0" in r for r in reasons), reasons
    assert any("MODIFIED BYTECODE" in line for line in logs.of("bytecode"))
    assert {"0/0", "1/0"} <= {f.split("_")[0] for f in logs.frames()}  # f and its resume function
    # after the block, torch logs nothing more into our buffer
    n = len(logs.records)
    compiled(torch.randn(4, 8), torch.randn(4, 8))
    assert len(logs.records) == n


def test_capture_logs_rejects_unknown_artifact():
    with pytest.raises(ValueError, match="unknown log artifact"):
        with debugtools.capture_logs(graph_brakes=True):
            pass


# ----------------------------------------------------------------------------- scripts, tlparse


def test_run_python_env_vars_and_tlparse(tmp_path):
    script = (
        "import torch\n"
        "def f(x):\n    y = x.sin()\n    print('break')\n    return y.cos()\n"
        "torch.compile(f, backend='eager')(torch.randn(3))\n"
    )
    run = debugtools.run_python(script, {"TORCH_LOGS": "graph_breaks", "TORCH_TRACE": "trace"}, tmp_path)
    assert run.returncode == 0 and "break" in run.stdout
    assert run.logs.of("graph_breaks"), run.stderr[-2000:]
    report = debugtools.run_tlparse(tmp_path / "trace", tmp_path)
    assert "index.html" in report.files and "<html" in report.index_html.lower()
    assert len([c for c in report.compile_ids() if c.startswith("-_0") or c.startswith("-_1")]) >= 2


def test_run_python_failure_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="exited with 1"):
        debugtools.run_python("raise SystemExit(1)", {}, tmp_path)


# ----------------------------------------------------------------------------- debug folder readers

FX_READABLE = """class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "f32[4, 8]"):
        mul: "f32[4, 8]" = torch.ops.aten.mul.Tensor(arg0_1, 2);  arg0_1 = None
        relu: "f32[4, 8]" = torch.ops.aten.relu.default(mul);  mul = None
        sum_1: "f32[4]" = torch.ops.aten.sum.dim_IntList(relu, [-1]);  relu = None
        return (sum_1,)
"""
IR_POST = """op0: SchedulerNode(ComputedBuffer)
op0.writes = [MemoryDep('buf0', c0, {c0: 4})]
class op0_loop_body:
    def body(self, ops):
        load = ops.load('arg0_1', get_index)
        mul = ops.mul(load, constant)
        relu = ops.relu(mul)
        reduction = ops.reduction(torch.float32, torch.float32, 'sum', relu)
"""
OUTPUT_CODE = """async_compile = AsyncCompile()
cpp_fused_mul_relu_sum_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
extern "C"  void  kernel(const float* in_ptr0, float* out_ptr0) {}
''')

class Runner:
    def call(self, args):
        arg0_1, = args
        buf0 = empty_strided_cpu((4, ), (1, ), torch.float32)
        cpp_fused_mul_relu_sum_0(arg0_1, buf0)
        return (buf0, )
"""


@pytest.fixture
def fake_debug_dir(tmp_path):
    run = tmp_path / "torch_compile_debug" / "run_2026_01_01_00_00_00_000000-pid_1"
    (run / "torchdynamo").mkdir(parents=True)
    (run / "torchdynamo" / "debug.log").write_text("")
    for i in (1, 0):
        g = run / "torchinductor" / f"model__{i}_inference_{i}.{i}"
        g.mkdir(parents=True)
        for name, text in (("fx_graph_readable.py", FX_READABLE), ("ir_post_fusion.txt", IR_POST),
                           ("output_code.py", OUTPUT_CODE.replace("_0", f"_{i}"))):  # fmt: skip
            (g / name).write_text(text)
    return tmp_path


def test_debug_dir_walk(fake_debug_dir):
    d = debugtools.debug_dir(fake_debug_dir)
    assert [g.name for g in d.graphs] == ["model__0_inference_0.0", "model__1_inference_1.1"]
    assert d.graphs[0].files == ["fx_graph_readable.py", "ir_post_fusion.txt", "output_code.py"]
    text = str(d)
    assert "run_<time>-pid_<pid>/" in text and str(fake_debug_dir) not in text
    with pytest.raises(FileNotFoundError, match="has no ir_pre_fusion.txt"):
        d.graphs[0].read("ir_pre_fusion.txt")


def test_debug_dir_missing_says_why(tmp_path):
    with pytest.raises(FileNotFoundError, match="TORCH_COMPILE_DEBUG=1"):
        debugtools.debug_dir(tmp_path)


def test_artefact_readers():
    assert debugtools.kernel_names(OUTPUT_CODE) == ["cpp_fused_mul_relu_sum_0"]
    assert debugtools.aten_ops(FX_READABLE) == ["mul", "relu", "sum"]
    assert debugtools.loop_body_ops(IR_POST) == ["load", "mul", "relu", "reduction"]
    assert debugtools.scheduler_nodes(IR_POST) == ["op0: SchedulerNode(ComputedBuffer)"]
    assert debugtools.python_wrapper(OUTPUT_CODE).splitlines()[0] == "def call(self, args):"
    assert debugtools.cpp_function("int f() { if (1) { return 2; } } int g() {}", "int f(") == \
        "int f() { if (1) { return 2; } }"  # fmt: skip
    assert debugtools.size_symbols("f32[s77, 3] u0 >= 0 s2 % 2 bus0") == ["s2", "s77", "u0"]


def test_clean_paths():
    text = "> /tmp/ipykernel_1/123.py(7)run() https://x.org/a/b.html /work/main/<eval_with_key>.3(4) \x1b[32mok\x1b[39m"
    assert debugtools.clean_paths(text) == "> 123.py(7)run() https://x.org/a/b.html <eval_with_key>.3(4) ok"


def test_check_fused_ops(fake_debug_dir):
    graphs = debugtools.debug_dir(fake_debug_dir).graphs

    def right(code):
        return {"cpp_fused_mul_relu_sum_" + n: {"mul", "relu", "sum"} for n in "01" if f"sum_{n} =" in code}

    def wrong(code):
        return {k: v - {"relu"} for k, v in right(code).items()}

    assert debugtools.check_fused_ops(right, graphs).ok
    assert not debugtools.check_fused_ops(wrong, graphs).ok
    assert not debugtools.check_fused_ops(lambda code: {}, graphs).ok


# ----------------------------------------------------------------------------- depyf, pdb


def test_depyf_dump_has_transformed_code_and_resume_function(capsys):
    dump = debugtools.depyf_dump(with_break, torch.randn(4, 8), torch.randn(4, 8))
    assert "transformed f" not in dump  # keys name the frame: this function is with_break
    assert "transformed with_break" in dump
    resume = [v for k, v in dump.items() if k.startswith("resume __resume_at_")]
    assert resume and ".relu().sum(-1)" in resume[0]
    assert "__resume_at_" in dump["transformed with_break"] and " at 0x" not in "".join(dump.values())


def test_scripted_pdb_runs_commands():
    debugger, out = debugtools.scripted_pdb(["p secret * 2"])
    secret = 21
    debugger.set_trace(sys._getframe())
    assert secret == 21
    assert "42" in out.getvalue()


# ----------------------------------------------------------------------------- the checks of 04d/04e


def test_check_failing_guard():
    import re

    def right(lines):
        m = next(re.search(r"tensor '(\w+)' size mismatch at index (\d+)", ln) for ln in lines if "mismatch" in ln)
        return m[1], int(m[2])

    assert debugtools.check_failing_guard(right).ok
    assert not debugtools.check_failing_guard(lambda lines: ("p", 0)).ok


def test_check_fullgraph_fix():
    def broken(x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1

    assert debugtools.check_fullgraph_fix(broken, lambda x: torch.where(x.sum() > 0, x * 2, x - 1)).ok
    assert not debugtools.check_fullgraph_fix(broken, broken).ok  # still breaks under fullgraph
    assert not debugtools.check_fullgraph_fix(broken, lambda x: x * 2).ok  # compiles, wrong for negative sums


def test_size_guard_against_dynamo():
    real = debugtools.reused_sizes(debugtools.pick, 10, debugtools.GUARD_SIZES)
    assert real == {n: n > 8 and n % 2 == 0 for n in debugtools.GUARD_SIZES}
    assert not debugtools.check_size_guard(lambda n: n > 8).ok


def test_recompile_prediction():
    real = debugtools.compiles_per_call(
        debugtools._rows_times_two, [torch.randn(n, 3) for n in debugtools.RECOMPILE_SIZES]
    )
    assert real[0] and not real[1] and sum(real) >= 2
    assert debugtools.check_recompile_prediction(real).ok
    assert not debugtools.check_recompile_prediction([True] * len(real)).ok
    assert not debugtools.check_recompile_prediction([True]).ok


def test_export_spec_check():
    batch = torch.export.Dim("batch", min=2, max=1024)
    assert debugtools.check_export_spec({"x": {0: batch}, "y": {0: batch}}).ok
    bad = debugtools.check_export_spec({"x": {0: batch}, "y": {0: torch.export.Dim("other")}})
    assert not bad.ok and "refused" in bad.message
    assert not debugtools.check_export_spec(None).ok  # exports, but static


def test_compile_recorder_sees_symbols():
    rec = debugtools.CompileRecorder()
    x = torch.randn(5, 3)
    compat.dynamo_mark_dynamic(x, 0)
    torch.compile(lambda t: t * 2, backend=rec)(x)
    assert rec.compiles == 1 and debugtools.size_symbols(rec.readable()), rec.readable()


# ----------------------------------------------------------------------------- packages and compat


def test_package_contents(tmp_path):
    path = tmp_path / "m.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        h = "c" + "a" * 51
        for name in (
            f"m/data/aotinductor/model/{h}.wrapper.cpp",
            f"m/data/aotinductor/model/{h}.kernel.cpp",
            f"m/data/aotinductor/model/{h}.wrapper.so",
            "m/data/weights/weight_0",
            "m/archive_format",
        ):
            zf.writestr(name, "x")  # fmt: skip
    kinds = {name: kind for name, kind, _ in debugtools.package_contents(path)}
    assert kinds["m/data/aotinductor/model/<hash>.wrapper.cpp"].startswith("C++ wrapper")
    assert kinds["m/data/aotinductor/model/<hash>.wrapper.so"].startswith("shared object")
    assert kinds["m/data/weights/weight_0"] == "weights"
    assert debugtools.package_file(path, ".kernel.cpp") == "x"


def test_compat_section_apis():
    x = torch.randn(3, 2)
    compat.dynamo_mark_dynamic(x, 0)
    with compat.dynamo_config_patch(capture_scalar_outputs=True):
        pass
    with pytest.raises(compat.CompatError, match="no_such_flag"):
        compat.dynamo_config_patch(no_such_flag=True)
    compat.torch_set_logs()  # back to the default, no error
    assert callable(compat.require("torch._inductor", "aoti_compile_and_package"))
    assert callable(compat.require("torch._inductor", "aoti_load_package"))
