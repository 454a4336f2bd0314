"""course_lib.aot: derivative rules vs torch.autograd (float64), joint graphs, partitions vs
torch's partitioner, aot_function training an MLP like eager."""

import pytest
import torch

from course_lib import aot, decomp
from course_lib.aot.rules import DERIVATIVES

aten = torch.ops.aten
F = torch.nn.functional


def _d(*shape, pos=False):
    x = torch.randn(*shape, dtype=torch.float64)
    return x.abs() + 0.5 if pos else x


RULE_CASES = {
    aten.add.Tensor: lambda: (_d(3, 4), _d(4)), aten.sub.Tensor: lambda: (_d(3, 4), _d(3, 1)),
    aten.mul.Tensor: lambda: (_d(3, 4), _d(1, 4)), aten.div.Tensor: lambda: (_d(3, 4), _d(3, 4, pos=True)),
    aten.neg.default: lambda: (_d(3, 4),), aten.exp.default: lambda: (_d(3, 4),),
    aten.log.default: lambda: (_d(3, 4, pos=True),), aten.tanh.default: lambda: (_d(3, 4),),
    aten.sqrt.default: lambda: (_d(3, 4, pos=True),), aten.rsqrt.default: lambda: (_d(3, 4, pos=True),),
    aten.sin.default: lambda: (_d(3, 4),), aten.cos.default: lambda: (_d(3, 4),), aten.erf.default: lambda: (_d(3, 4),),
    aten.pow.Tensor_Scalar: lambda: (_d(3, 4, pos=True), 2.5),
    aten.maximum.default: lambda: (_d(3, 4), _d(3, 4)), aten.minimum.default: lambda: (_d(3, 4), _d(4)),
    aten.where.self: lambda: (_d(3, 4) > 0, _d(3, 4), _d(4)),
    aten._to_copy.default: lambda: (_d(3, 4),),
    aten.sum.dim_IntList: lambda: (_d(3, 4, 5), [0, 2]), aten.amax.default: lambda: (_d(3, 4, 5), [1]),
    aten.view.default: lambda: (_d(3, 4), [2, 6]), aten.permute.default: lambda: (_d(3, 4, 5), [2, 0, 1]),
    aten.expand.default: lambda: (_d(3, 1), [2, 3, 4]),
    aten.mm.default: lambda: (_d(3, 4), _d(4, 5)), aten.bmm.default: lambda: (_d(2, 3, 4), _d(2, 4, 5)),
    aten.select.int: lambda: (_d(3, 4, 5), 1, -2),
    aten.gather.default: lambda: (_d(4, 6), 1, torch.tensor([[0], [5], [2], [2]])),
    aten.slice.Tensor: lambda: (_d(4, 7), 1, 2, 5),
    aten.convolution.default: lambda: (_d(2, 3, 6, 6), _d(4, 3, 3, 3), _d(4), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
}  # fmt: skip


def test_every_rule_has_a_case():
    assert set(RULE_CASES) == set(DERIVATIVES)


@pytest.mark.parametrize("op", sorted(RULE_CASES, key=str), ids=str)
def test_rule_matches_autograd_float64(op):
    torch.manual_seed(0)
    args = [a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in RULE_CASES[op]()]  # fmt: skip
    out = op(*args)
    grad = torch.randn_like(out)
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    want = torch.autograd.grad(out, tensors, grad)
    plain = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    got = [g for a, g in zip(args, aot.vjp(op, grad, *plain)) if isinstance(a, torch.Tensor) and a.requires_grad]
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


def _fn_cases():
    def mlp(x, w1, b1, w2):
        return (torch.relu(x @ w1 + b1) @ w2).sum()

    return {
        "tanh_sigmoid": (lambda x, w: torch.tanh(x @ w).sigmoid().sum(), [(8, 16), (16, 32)]),
        "mlp": (mlp, [(8, 16), (16, 32), (32,), (32, 4)]),
        "gelu": (lambda x: F.gelu(x).sum(), [(16, 32)]),
        "silu_chain": (lambda x: F.silu(F.silu(x)).mean(), [(16, 32)]),
        "softmax": (lambda x: (x.softmax(-1) * x).sum(), [(16, 32)]),
        "log_softmax": (lambda x: -(x.log_softmax(-1) * x.sigmoid()).sum(), [(16, 32)]),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (32,), w, b).pow(2).sum(), [(16, 32), (32,), (32,)]),
        "exp_chain": (lambda x: x.exp().exp().sin().sum(), [(16, 32)]),
        "mse": (lambda x, w, y: F.mse_loss(x @ w, y), [(8, 16), (16, 4), (8, 4)]),
        "two_outputs": (lambda x: (x.sin(), x.cos().sum()), [(8, 8)]),
        "bmm_softmax": (lambda q, k: torch.bmm(q, k.transpose(1, 2)).softmax(-1).sum(), [(2, 8, 4), (2, 8, 4)]),
    }


CASES = _fn_cases()


def _inputs(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, requires_grad=True) for s in shapes]


@pytest.mark.parametrize("name", sorted(CASES))
def test_joint_graph_is_functional_and_correct(name):
    fn, shapes = CASES[name]
    args = _inputs(shapes)
    joint = aot.joint_graph(fn, *args)
    assert decomp.non_primitive(joint.graph) == []
    assert not any(str(n.target).split(".")[-2].endswith("_") for n in joint.graph.nodes if n.op == "call_function")
    outs = fn(*args)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    tangents = [torch.randn_like(o) for o in outs]
    want = torch.autograd.grad(outs, args, tangents)
    got = joint.graph(*[a.detach() for a in args], *tangents)
    for w, g in zip(want, got[len(outs) :]):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    for method in ("default", "min_cut"):
        part = aot.partition(joint, method)
        fw = part.forward(*[a.detach() for a in args])
        grads = part.backward(*fw[len(outs) :], *tangents)
        for w, g in zip(want, grads):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_min_cut_saves_no_more_than_default_or_torch(name):
    fn, shapes = CASES[name]
    joint = aot.joint_graph(fn, *_inputs(shapes))
    ours = aot.partition(joint, "min_cut")
    assert ours.saved_bytes <= aot.partition(joint, "default").saved_bytes
    _, theirs = aot.torch_saved(joint, "min_cut")
    # torch runs its partitioner on our joint graph; ours may only lose where noted in 04b
    assert ours.saved_bytes <= theirs * 1.5 + 64, (ours.summary(), theirs)


def test_aot_function_trains_mlp_like_eager():
    torch.manual_seed(0)
    x, y = torch.randn(32, 8), torch.randn(32, 2)

    def loss_fn(x, w1, b1, w2, b2, y):
        return F.mse_loss(torch.tanh(x @ w1 + b1) @ w2 + b2, y)

    def params():
        g = torch.Generator().manual_seed(1)
        shapes = [(8, 16), (16,), (16, 2), (2,)]
        return [(torch.randn(*s, generator=g) * 0.3).requires_grad_() for s in shapes]

    losses = {}
    for mode in ("eager", "default", "min_cut"):
        ps = params()
        step = loss_fn if mode == "eager" else aot.aot_function(loss_fn, partition_method=mode)
        opt = torch.optim.SGD(ps, lr=0.1)
        losses[mode] = []
        for _ in range(5):
            opt.zero_grad()
            loss = step(x, *ps, y)
            loss.backward()
            opt.step()
            losses[mode].append(loss.item())
    for mode in ("default", "min_cut"):
        assert losses[mode] == pytest.approx(losses["eager"], rel=1e-5)
    assert losses["eager"][-1] < losses["eager"][0]


def test_aot_function_calls_compilers_once_per_shape():
    seen = []

    def recorder(graph, example_inputs):
        seen.append(len(graph.nodes))
        return graph

    f = aot.aot_function(lambda x: x.sin().sum(), fw_compiler=recorder, bw_compiler=recorder)
    x = torch.randn(4, requires_grad=True)
    for _ in range(3):
        f(x).backward()
    assert len(seen) == 2 and torch.allclose(x.grad, 3 * x.cos())


def test_draw_joint_marks_saved():
    fn, shapes = CASES["tanh_sigmoid"]
    joint = aot.joint_graph(fn, *_inputs(shapes))
    part = aot.partition(joint, "min_cut")
    dot = (
        aot.draw_joint(joint, part).source
        if hasattr(aot.draw_joint(joint, part), "source")
        else str(aot.draw_joint(joint, part))
    )
    for name in part.saved:
        assert f'"{name}"' in dot
    assert aot.partition.__name__ == "partition"
    with pytest.raises(ValueError, match="unknown partition method"):
        aot.partition(joint, "greedy")


def test_aot_function_on_a_graph_module_with_two_outputs(capsys, monkeypatch):
    import torch.fx

    class M(torch.nn.Module):
        def forward(self, x, w):
            return torch.sin(x) @ w, x.sum()

    gm = torch.fx.symbolic_trace(M())
    monkeypatch.setenv("COURSE_AOT_DEBUG", "1")
    f = aot.aot_function(gm, partition_method="min_cut")
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    a, b = f(x, w)
    (a.sum() + b).backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    a, b = gm(x, w)
    (a.sum() + b).backward()
    torch.testing.assert_close(got, (x.grad, w.grad))
    assert "--- course_lib.aot: backward graph" in capsys.readouterr().out
