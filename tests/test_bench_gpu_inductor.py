"""bench/bench_gpu_inductor.py, the honest GPU benchmark, on the CPU: the same code path on tiny
tensors in Triton's interpreter (no timing), and the parser of Inductor's kernel kinds."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))

import bench_gpu_inductor  # noqa: E402


def test_kernel_kinds_reads_inductor_names_and_decorators():
    """On Inductor's real output code for cross entropy, recorded on the H200: an online-softmax
    pass and a log-softmax pass as looped reductions, the loss's mean as a persistent one."""
    from course_lib import recorded

    rec = recorded.load("inductor/inductor_gpu.json")
    assert rec, "data/inductor/inductor_gpu.json is missing"
    kinds = bench_gpu_inductor.kernel_kinds(rec.value["sources"]["cross_entropy"]["inductor"])
    assert kinds == {
        "pointwise": 0,
        "persistent_reduction": 1,
        "looped_reduction": 2,
        "heuristics": ["persistent_reduction", "reduction"],
    }
    assert bench_gpu_inductor.kernel_kinds(rec.value["sources"]["gelu_bias"]["inductor"])["pointwise"] == 1


def test_bytes_moved_is_each_input_once_plus_each_output_once():
    torch = pytest.importorskip("torch")
    shape = bench_gpu_inductor.SMOKE_SHAPE
    work = bench_gpu_inductor.workloads(torch, "cpu", *shape)
    work.update(bench_gpu_inductor.sweep_workloads(torch, "cpu", *shape))
    for name, (fn, args, nbytes) in work.items():
        out = fn(*args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)] + [out]
        assert nbytes == sum(t.numel() * t.element_size() for t in tensors), name


def test_smoke_run_compiles_every_workload_correctly():
    import torch

    result = bench_gpu_inductor.run(smoke=True)
    assert torch.is_grad_enabled(), "the benchmark must not leave grad mode off for the rest of the process"
    for row in result["rows"]:
        assert "error" not in row, row
        assert row["course_correct"], row
        assert row["course_kernels"] >= 1, row
        assert "triton.jit" in result["sources"][row["workload"]]["course"]


def test_tiling_sweep_tries_each_variant_and_restores_the_defaults():
    """The sweep's code path on tiny tensors (interpreter, a fake timer): every variant compiles to
    a correct kernel with its own launch shape, and the codegen constants are back afterwards."""
    import torch

    from course_lib.inductor.codegen import triton as tcg

    names = ("LOOPED_RBLOCK", "LOOPED_ELEMENTS_PER_THREAD", "PERSISTENT_RNUMEL", "PERSISTENT_MAX_WARPS",
             "LOOPED_EVICTION", "LOOPED_REVERSE_LAST")  # fmt: skip
    before = [getattr(tcg, n) for n in names]
    work = bench_gpu_inductor.workloads(torch, "cpu", *bench_gpu_inductor.SMOKE_SHAPE)
    sweep = {"softmax_long": [{"PERSISTENT_RNUMEL": 8, "LOOPED_RBLOCK": 64, "LOOPED_ELEMENTS_PER_THREAD": 1},
                              {"PERSISTENT_RNUMEL": 8, "LOOPED_RBLOCK": 128, "LOOPED_ELEMENTS_PER_THREAD": 1}]}  # fmt: skip
    rows = bench_gpu_inductor.tiling_sweep(torch, work, lambda f, a: 1.0, None, sweep)
    assert [r.get("error") for r in rows] == [None, None] and all(r["correct"] for r in rows), rows
    assert [r["launches"] for r in rows] == [[("2", "2")], [("2", "4")]]  # 2 rows; 64 / 32 and 128 / 32 warps
    assert all(r["resources"] == {} for r in rows)  # the interpreter returns no binary: no ptxas numbers
    assert [getattr(tcg, n) for n in names] == before


def test_compile_other_triton_reports_each_kernel():
    """bench/compile_other_triton.py with this Python's own Triton: one line a kernel and protocol, the row
    split compiles without spills or big layout conversions (the shape that cost 45-60x under Triton 3.6),
    and the protocol its site would keep on an sm_90."""
    import os
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, str(root / "bench" / "compile_other_triton.py"), "--row-split", "softmax_xlong"],
                         capture_output=True, text=True, timeout=600, env=env, cwd=root)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("softmax_xlong") and " warps " in ln]
    assert [ln.split()[2] for ln in lines] == ["FLAGS=True", "FLAGS=False"], out.stdout  # each protocol the site tries
    for line in lines:
        assert "warps 16" in line and "spilled    0 B" in line and line.endswith("big layout conversions 0"), line
    # the site's rule on an sm_90: flags unless they fit fewer programs (softmax: 64 registers or fewer either way)
    assert "softmax_xlong kernel0: keeps FLAGS=True on sm_90 (FLAGS=True: 2 an SM" in out.stdout, out.stdout
