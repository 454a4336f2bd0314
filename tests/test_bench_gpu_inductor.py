"""bench/bench_gpu_inductor.py, the honest GPU benchmark, on the CPU: the same code path on tiny
tensors in Triton's interpreter (no timing), and the parser of Inductor's kernel kinds."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))

import bench_gpu_inductor  # noqa: E402

INDUCTOR_SNIPPET = """
@triton_heuristics.pointwise(size_hints={'x': 64})
@triton.jit
def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    pass
@triton_heuristics.persistent_reduction(size_hints={'x': 64, 'r0_': 1024})
@triton.jit
def triton_per_fused__softmax_1(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    pass
@triton_heuristics.reduction(size_hints={'x': 64, 'r0_': 4096})
@triton.jit
def triton_red_fused__softmax_2(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    pass
"""


def test_kernel_kinds_reads_inductor_names_and_decorators():
    kinds = bench_gpu_inductor.kernel_kinds(INDUCTOR_SNIPPET)
    assert kinds == {
        "pointwise": 1,
        "persistent_reduction": 1,
        "looped_reduction": 1,
        "heuristics": ["persistent_reduction", "pointwise", "reduction"],
    }


def test_bytes_moved_is_each_input_once_plus_each_output_once():
    torch = pytest.importorskip("torch")
    work = bench_gpu_inductor.workloads(torch, "cpu", 8, 32)
    for name, (fn, args, nbytes) in work.items():
        out = fn(*args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)] + [out]
        assert nbytes == sum(t.numel() * t.element_size() for t in tensors), name


def test_smoke_run_compiles_every_workload_correctly():
    result = bench_gpu_inductor.run(smoke=True)
    for row in result["rows"]:
        assert "error" not in row, row
        assert row["course_correct"], row
        assert row["course_kernels"] >= 1, row
        assert "triton.jit" in result["sources"][row["workload"]]["course"]
