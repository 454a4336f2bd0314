"""A training-mode BatchNorm2d + ReLU forward through the course pipeline (course_lib.aot, then
course_lib.inductor): how many kernels the scheduler makes, which nodes share them, and that the
output and the updated running statistics equal eager's, for the C++ and the Triton (interpreter)
code generators.

What the schedule is (greedy fusion, both codegens; the scheduler is the same):

  kernel  nodes                                   group          note
  0       num_batches_tracked + 1                 (1, 1)         scalar counter
  1       sum(x) / n, running_mean update          (C, N*H*W)     the [C] update is the epilogue
  2       x - mean, (x - mean)^2                  (N*C*H, W)     NCHW pointwise: no fit into (C, NHW)
  3       sum((x-mean)^2), rsqrt, running_var     (C, N*H*W)     the [C] update is the epilogue
  4       (x - mean) * rstd * w + b, relu          (N*C*H, W)
  5       constant 0.0, returned for the backward (1, 1)         a scalar the forward saves

Inductor (torch.compile, C++ backend, torch 2.13) emits this forward as one kernel function
(``cpp_fused__native_batch_norm_legit_functional_add_copy__relu_threshold_backward_0``, 11 ``for``
loops inside, no Welford): its C++ scheduler joins nodes whose loops differ in order. The course's
groups are positional (``scheduler.fits`` compares sizes in order, no loop reordering), so the NCHW
kernels 2 and 4 stay apart from the (C, N*H*W) reductions. The [C] running-stat updates are
already fused into the reductions' kernels.
"""

import copy

import pytest
import torch

import course_lib.inductor as ind
from course_lib import compat


def _bn_step(codegen: str):
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.BatchNorm2d(8), torch.nn.ReLU()).train()
    twin = copy.deepcopy(eager)
    x = torch.randn(4, 8, 6, 6) * 3.0 + 1.5
    record: list = []
    compat.dynamo_reset()
    compiled = torch.compile(twin, backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record, codegen=codegen))
    got = compiled(x)
    want = eager(x)
    return got, want, eager, twin, record


@pytest.mark.parametrize("codegen", ["cpp", "triton"])
def test_training_batch_norm_kernel_count_and_eager_results(codegen, monkeypatch):
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    got, want, eager, twin, record = _bn_step(codegen)
    assert [k for k, _ in record] == ["compiled"]  # inference of a train-mode module: one forward graph
    sched = record[0][1].schedule
    kernels = [k for k in sched.kernels if k.kind == "kernel"]
    assert len(kernels) == 6, sched
    # the running-stat updates ([C] pointwise nodes reading a reduction) are in a reduction's kernel
    graph = sched.graph
    groups = [k.plan.group for k in kernels]
    reductions = [k for k in kernels if any(graph.buffer(n).kind == "reduction" for n in k.nodes)]
    assert len(reductions) == 2 and all(len(k.nodes) >= 5 for k in reductions), sched
    assert all(g == ((8,), (4, 6, 6)) for g in (k.plan.group for k in reductions))
    assert sum(g == ((4, 8, 6), (6,)) for g in groups) == 2, sched
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(twin[0].running_mean, eager[0].running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(twin[0].running_var, eager[0].running_var, rtol=1e-5, atol=1e-6)
    assert int(twin[0].num_batches_tracked) == int(eager[0].num_batches_tracked) == 1
    assert not torch.equal(twin[0].running_mean, torch.zeros(8))  # the update happened
