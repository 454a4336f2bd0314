"""A training-mode BatchNorm2d + ReLU forward through the course pipeline (course_lib.aot, then
course_lib.inductor): how many kernels the scheduler makes, which nodes share them, and that the
output and the updated running statistics equal eager's, for the C++ and the Triton (interpreter)
code generators.

Greedy fusion, both codegens (the scheduler is the same), before and after
``scheduler.permuted_map`` (a pointwise node of a reduction's input shape fits the reduction's group):

  before: 6 kernels                                 after: 3 kernels
  0  num_batches_tracked + 1        (1, 1)           0  num_batches_tracked + 1      (1, 1)
  1  sum(x)/n, running_mean update  (C, N*H*W)       1  phase 1: sum(x)/n, running_mean update
  2  x - mean, (x - mean)^2         (N*C*H, W)          phase 2: sum((x - mean)^2), rsqrt, running_var
  3  sum(..)/n, rsqrt, running_var  (C, N*H*W)          phase 3: (x - mean) * rstd * w + b, relu
  4  normalize, relu                (N*C*H, W)          all in (C, N*H*W)
  5  constant 0.0 the forward saves (1, 1)           2  constant 0.0 the forward saves (1, 1)

The [C] running-stat updates were already in the reductions' kernels (their group is the
reductions' outer loop). Kernels 2 and 4 stayed apart because ``scheduler.fits`` compared sizes in
order: ``[N, C, H, W]`` is not ``(C,) + (N, H, W)``. Inductor (torch.compile, C++ backend, torch
2.13) emits this forward as one kernel function
(``cpp_fused__native_batch_norm_legit_functional_add_copy__relu_threshold_backward_0``).
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
    # the big one, and num_batches_tracked + 1 (relu's 0 was a third, 0-d kernel while relu was a maximum
    # with a 0-d tensor; as a where on a comparison it is a constant inside the big kernel)
    assert len(kernels) == 2, sched
    graph = sched.graph
    (big,) = [k for k in kernels if k.plan.group == ((8,), (4, 6, 6))]  # one loop nest per channel
    kinds = {graph.buffer(n).kind for n in big.nodes}
    assert kinds == {"reduction", "pointwise"} and len(big.plan.phases) == 3, sched  # mean, var, normalize
    nchw = [n for n in big.nodes if graph.buffer(n).shape == (4, 8, 6, 6)]
    stats = [n for n in big.nodes if graph.buffer(n).shape == (8,)]
    assert len(nchw) >= 4 and len(stats) >= 6, sched  # x-mean, its square, normalize, relu; both updates
    assert any(graph.buffer(w).shape == (4, 8, 6, 6) for w in big.plan.writes), sched  # the output
    scalars = [k for k in kernels if k is not big]
    assert all(graph.buffer(n).shape == () for k in scalars for n in k.nodes), sched
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(twin[0].running_mean, eager[0].running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(twin[0].running_var, eager[0].running_var, rtol=1e-5, atol=1e-6)
    assert int(twin[0].num_batches_tracked) == int(eager[0].num_batches_tracked) == 1
    assert not torch.equal(twin[0].running_mean, torch.zeros(8))  # the update happened
