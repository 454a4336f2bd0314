"""course_lib.fake: shapes/strides match real tensors; guards and 0/1 specialisation; torch's ShapeEnv."""

import sympy
import torch

from course_lib import compat, decomp, fake

F = torch.nn.functional


def _graphs():
    return {
        "mlp": (lambda x, w, b: torch.relu(x @ w + b).sum(1), [(8, 4), (4, 16), (16,)]),
        "softmax": (lambda x: x.softmax(-1), [(6, 5)]),
        "layer_norm": (lambda x: F.layer_norm(x, (5,)), [(6, 5)]),
        "transpose": (lambda x: x.transpose(0, 1).exp(), [(3, 7)]),
        "broadcast": (lambda x, y: x * y - y, [(3, 1, 5), (4, 1)]),
        "bmm": (lambda a, b: torch.bmm(a, b).amax(1), [(2, 3, 4), (2, 4, 6)]),
    }


def test_fake_shapes_and_strides_match_real():
    for name, (fn, shapes) in _graphs().items():
        args = [torch.randn(*s) for s in shapes]
        graph = decomp.trace(fn, *args)
        real = fn(*args)
        outs, env = fake.propagate(graph, *[fake.fake(a.shape) for a in args])
        assert outs[0].shape == tuple(real.shape), name
        assert outs[0].dtype == real.dtype
        for node in graph.nodes:
            val = node.meta.get("val")
            if node.op == "call_function" and isinstance(val, torch.Tensor):
                assert node.meta["fake"].shape == tuple(val.shape), (name, node.name)
                assert node.meta["fake"].stride == tuple(val.stride()), (name, node.name)


def test_dynamic_batch_guards_and_specialisation():
    fn, shapes = _graphs()["mlp"]
    args = [torch.randn(*s) for s in shapes]
    _, outs, env = fake.trace_dynamic(fn, *args, dynamic={0: (0, 1), 1: (0, 1), 2: (0,)}, duck=False)
    s0 = sympy.Symbol("s0", positive=True, integer=True)
    assert outs[0].shape == (s0,)
    assert env.guard_text() == ["Eq(s1, s2)", "Eq(s3, s4)"]  # mm inner sizes, bias broadcast
    _, outs, env = fake.trace_dynamic(fn, torch.randn(1, 4), *args[1:])
    assert outs[0].shape == (1,) and env.specialised == ["arg0.size(0) == 1"]


def test_view_guard_and_mismatch_message():
    env = fake.ShapeEnv()
    x = env.from_tensor(torch.randn(8, 4))
    out = fake.RULES[torch.ops.aten.view.default](env, torch.ops.aten.view.default, x, [32])
    assert out.shape == (32,) and env.guard_text() == ["Eq(s0*s1, 32)"]
    try:
        fake.broadcast_shapes(env, (3,), (4,))
    except ValueError as exc:
        assert "shape mismatch" in str(exc)
    else:
        raise AssertionError("3 vs 4 must not broadcast")


def test_same_output_shapes_as_torch_symbolic_tracing():
    fn, shapes = _graphs()["mlp"]
    args = [torch.randn(*s) for s in shapes]
    gm, torch_env = compat.torch_symbolic_trace(fn, *args)
    out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    torch_shape = tuple(str(s) for s in (out[0] if isinstance(out, (list, tuple)) else out).meta["val"].shape)
    env = fake.ShapeEnv()
    fakes = [env.from_tensor(a) for a in args]
    outs, env = fake.propagate(decomp.trace(fn, *args), *fakes, env=env)
    ours = tuple(str(s) for s in outs[0].shape)
    # torch names symbols by hash (s75...); map both to their example sizes
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    torch_hint = {
        str(s): int(v) for n in placeholders for s, v in zip(n.meta["val"].shape, args[placeholders.index(n)].shape)
    }
    assert [torch_hint.get(s) for s in torch_shape] == [
        env.hints[sympy.Symbol(s, positive=True, integer=True)] for s in ours
    ]
    assert env.guards == [] and len(torch_env.guards) == 0  # duck sizing: mm's inner sizes share a symbol
