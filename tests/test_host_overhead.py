"""Per-call host work of the course backend (issue 21: real models never slower than eager).

What a compiled training step does besides its kernels: course_lib.aot's runtime wrapper (the
batched copy-back of updated inputs, planned once), the generated wrapper's input checks and
returned views, and the breakdown benchmark that measures all of it (bench/bench_host_overhead.py).
Each change is checked against the behaviour it replaces.
"""

import importlib
import pathlib
import sys

import pytest
import torch

from course_lib import aot, compat
from course_lib.aot.function import copy_back_plan, runtime_wrapper
from course_lib.aot.functionalize import copy_back

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _random_pairs(g: torch.Generator, n: int):
    """``n`` (input, updated value) pairs of mixed dtypes and sizes, some non-contiguous."""
    shapes = [(4,), (3, 5), (), (7,)]
    args, updated = [], []
    for k in range(n):
        shape = shapes[int(torch.randint(0, len(shapes), (1,), generator=g))]
        dtype = (torch.float32, torch.int64, torch.float64)[k % 3]
        a = (torch.randn(shape, generator=g) * 10).to(dtype)
        if k % 4 == 3 and a.dim() == 2:
            a = a.t()  # a transposed input: copied on its own, not batched
        args.append(a)
        updated.append((torch.randn(a.shape, generator=g) * 10).to(dtype))
    return args, updated


@pytest.mark.parametrize("seed", range(6))
def test_batched_copy_back_writes_what_one_copy_each_writes(seed):
    g = torch.Generator().manual_seed(seed)
    args, updated = _random_pairs(g, 9)
    mutated = list(range(0, 9, 2)) if seed % 2 else list(range(9))
    upd = [updated[i] for i in mutated]
    reference = [a.clone() for a in args]
    copy_back(reference, upd, mutated)  # the per-tensor epilogue

    n_user = 2
    outs = (torch.zeros(1), torch.ones(1), *upd)  # the Function's outputs: user outputs, then updated inputs
    run = runtime_wrapper(lambda *a: outs, n_user, mutated)
    got = [a.clone() for a in args]
    result = run(*got)
    assert len(result) == n_user and result[1] is outs[1]
    for r, a in zip(reference, got):
        assert torch.equal(r, a)


def test_copy_back_plan_groups_by_dtype_and_size():
    args = [torch.zeros(4), torch.zeros(4), torch.zeros(4, dtype=torch.int64), torch.zeros(3, 2).t()]
    updated = [torch.ones(4), torch.ones(4), torch.ones(4, dtype=torch.int64), torch.ones(2, 3)]
    plan = copy_back_plan(args, updated, [0, 1, 2, 3], first=5)
    assert sorted(plan) == sorted([([0, 1], [5, 6], True), ([2], [7], True), ([3], [8], False)])


def test_runtime_wrapper_without_mutations_returns_the_user_outputs():
    run = runtime_wrapper(lambda *a: (a[0] + 1, a[0] * 2, a[0]), 2, [])
    out = run(torch.ones(2))
    assert len(out) == 2 and torch.equal(out[1], torch.full((2,), 2.0))


def test_foreach_copy_matches_copy():
    dsts = [torch.zeros(3), torch.zeros(2, 2)]
    compat.foreach_copy(dsts, [torch.arange(3.0), torch.ones(2, 2)])
    assert torch.equal(dsts[0], torch.arange(3.0)) and torch.equal(dsts[1], torch.ones(2, 2))


def test_batch_norm_running_stats_through_course_aot_match_eager():
    """Two training calls of a conv + batch norm through course_lib.aot + course_lib.inductor: the
    running statistics (copied back in one batched copy per dtype) equal eager's after each call."""
    from course_lib.inductor import compile_fx

    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()
    twin = type(eager)(*[m for m in __import__("copy").deepcopy(eager)])
    compat.dynamo_reset()
    compiled = torch.compile(twin, backend=compile_fx)
    for step in range(2):
        x = torch.randn(2, 3, 8, 8)
        compiled(x).sum().backward()
        eager(x).sum().backward()
        bn_e, bn_c = eager[1], twin[1]
        torch.testing.assert_close(bn_c.running_mean, bn_e.running_mean)
        torch.testing.assert_close(bn_c.running_var, bn_e.running_var)
        assert int(bn_c.num_batches_tracked) == int(bn_e.num_batches_tracked) == step + 1
        torch.testing.assert_close(twin[0].weight.grad, eager[0].weight.grad, rtol=1e-4, atol=1e-5)


def test_wrapper_skips_one_element_inputs_and_returns_cheap_views():
    """The generated call re-strides only inputs with more than one element, and re-views what it
    returns with reinterpret_tensor (Inductor's output code does both the same way)."""
    import course_lib.inductor as ind
    from course_lib import decomp

    def fn(x, s, w):
        y = x.t() * s + w
        return (y, y[1:])

    x, s, w = torch.randn(4, 3), torch.tensor(2.0), torch.randn(3, 4)
    c = ind.compile_graph(compat.make_fx(fn, x, s, w, decompositions=decomp.DECOMPOSITIONS), [x, s, w])
    src = c.wrapper_code
    assert "restride(x_1" in src and "restride(s_1" not in src, src
    ret = src.split("return")[-1]
    assert "reinterpret_tensor(" in ret and " reinterpret(" not in ret, src
    for got, want in zip(c(x, s, w), fn(x, s, w)):
        torch.testing.assert_close(got, want)
    xt = torch.randn(3, 4).t()  # another layout: restride still copies it into the compiled one
    for got, want in zip(c(xt, s, w), fn(xt, s, w)):
        torch.testing.assert_close(got, want)


@pytest.fixture
def bench_module():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        yield importlib.import_module("bench_host_overhead")
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_timers_charge_each_call_to_its_category(bench_module):
    timers = bench_module.Timers()
    f = timers.wrap(lambda a: a + 1, "k")
    assert [f(i) for i in range(3)] == [1, 2, 3]
    assert timers.calls["k"] == 3 and timers.total["k"] > 0


def test_breakdown_of_a_real_model_on_cpu(bench_module):
    """ResNet's step on CPU: every part measured, the counts per step what the graphs hold."""
    row = bench_module.breakdown("resnet", "course_lib", "cpu", steps=2)
    counts = row["counts_per_step"]
    assert 1 <= counts["copy_back"] <= 2  # 18 running statistics: one batched copy a dtype (float, int64)
    assert counts["call_kernels"] > 20 and counts["call_externs"] > 0 and counts["call_alloc"] > 0
    parts = [row[f"{c}_ms"] for c in bench_module.COLUMNS]
    assert all(p > 0 for p in (row["call_kernels_ms"], row["call_externs_ms"], row["dynamo_ms"]))
    assert abs(sum(parts) - row["timed_ms"]) < 0.05 * row["timed_ms"] + 0.05, row
    assert aot.aot_compile.__module__ == "course_lib.aot.function"  # the patch was undone


def test_an_output_nobody_differentiates_gets_zeros_only_where_backward_reads_them():
    """With ``set_materialize_grads(False)`` the engine hands backward None for an unused output; the
    Function makes zeros for it on the output's own device (the traced tangent's), even when the
    forward saved nothing to take a device from."""
    f = aot.aot_function(lambda x: (x * 2, x + 1))
    x = torch.randn(3, requires_grad=True)
    a, _ = f(x)
    a.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))
    a, b = f(x)
    (a.sum() + b.sum()).backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 5.0))
    compiled = next(iter(f.cache.values()))
    assert all(n.meta["val"].device == x.device for n in compiled.joint.tangents)
