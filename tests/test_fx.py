"""course_lib.fx against torch.fx (the oracle) and eager PyTorch."""

import operator

import pytest
import torch
import torch.fx

from course_lib import fx


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.scale = torch.nn.Parameter(torch.ones(3))

    def forward(self, x, k=2):
        a = self.lin(x) * self.scale
        b = torch.relu(a).sum(dim=1)
        return a.view(-1) + k, torch.neg(b)


def f_plain(x, y):
    z = x * y + 1
    w = torch.sin(z) - z.mean()
    return w.transpose(0, 1)


CASES = [Net(), f_plain]


@pytest.mark.parametrize("root", CASES, ids=["module", "function"])
def test_print_matches_torch_fx(root):
    torch.manual_seed(0)
    assert str(fx.symbolic_trace(root)).strip() == str(torch.fx.symbolic_trace(root).graph).strip()


def _inputs(root):
    torch.manual_seed(0)
    return (torch.randn(2, 4),) if isinstance(root, Net) else (torch.randn(2, 3), torch.randn(2, 3))


def _same(a, b):
    if isinstance(a, (tuple, list)):
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    return torch.equal(a, b)


@pytest.mark.parametrize("root", CASES, ids=["module", "function"])
def test_interpreter_codegen_and_roundtrip_equal_eager(root):
    g = fx.symbolic_trace(root)
    args = _inputs(root)
    expected = root(*args)
    assert _same(g(*args), expected)
    assert _same(fx.compile_graph(g)(*args), expected)
    gm = fx.to_torch_fx(g)
    assert _same(gm(*args), expected)
    back = fx.from_torch_fx(torch.fx.symbolic_trace(root))
    assert str(back) == str(g)
    assert _same(back(*args), expected)


def test_users_and_lint_and_erase():
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    b = g.call_function(torch.relu, (a,))
    dead = g.call_method("sum", (x,))
    g.output(b)
    g.lint()
    assert list(x.users) == [a, dead] and list(a.users) == [b]
    with pytest.raises(RuntimeError, match="still has users"):
        g.erase_node(a)
    assert g.eliminate_dead_code() and dead not in g.nodes
    with g.inserting_before(b):
        c = g.call_function(operator.mul, (a, 2))
    b.replace_input_with(a, c)
    g.lint()
    assert [n.name for n in g.nodes] == ["x", "add", "mul", "relu", "output"]
    assert g(torch.tensor([1.0, -5.0])).tolist() == [4.0, 0.0]


def test_lint_catches_use_before_def():
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    g.output(a)
    g._nodes.reverse()
    with pytest.raises(ValueError):
        g.lint()


def test_names_follow_fx():
    def f(x):
        return x.sum() + x.sum() + torch.add(x, 1) + torch.add(x, 2)

    ours = [n.name for n in fx.symbolic_trace(f).nodes]
    assert ours == [n.name for n in torch.fx.symbolic_trace(f).graph.nodes]


def test_cse_and_dce():
    def f(x):
        a = torch.sin(x)
        b = torch.sin(x)
        unused = x * 3  # noqa: F841
        return a + b

    g = fx.symbolic_trace(f)
    assert fx.cse(g) == {"sin_1": "sin"}
    assert fx.dce(g) == ["mul"]
    g.lint()
    x = torch.randn(3)
    assert torch.equal(g(x), f(x))


def test_replace_pattern():
    def f(x, y):
        a = torch.relu(x + y)
        b = torch.relu(a + 1.0)
        return b * 2

    def pattern(u, v):
        return torch.relu(u + v)

    def replacement(u, v):
        return torch.clamp(torch.add(u, v), min=0)

    g = fx.symbolic_trace(f)
    matches = fx.replace_pattern(g, pattern, replacement)
    assert len(matches) == 2
    assert [n.target for n in g.nodes if n.op == "call_function"].count(torch.clamp) == 2
    assert not any(n.target is torch.relu for n in g.nodes)
    x, y = torch.randn(5), torch.randn(5)
    assert torch.equal(g(x, y), f(x, y))
    # same count as torch.fx's rewriter
    tg = torch.fx.symbolic_trace(f)
    assert len(torch.fx.replace_pattern(tg, pattern, replacement)) == 2


def test_shape_prop_and_dot():
    g = fx.symbolic_trace(Net())
    fx.ShapeProp(g).propagate(torch.randn(2, 4))
    meta = {n.name: n.meta["tensor_meta"] for n in g.nodes if n.op != "output"}
    assert meta["lin"].shape == (2, 3) and meta["sum_1"].shape == (2,)
    assert repr(meta["view"]) == "float32[6]"
    dot = fx.to_dot(g)
    assert dot.startswith("digraph") and '"lin" -> "mul"' in dot and "float32[2, 3]" in dot


def test_control_flow_raises_trace_error():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(fx.TraceError):
        fx.symbolic_trace(f)
    assert torch.nn.Module.__call__.__name__ == "_wrapped_call_impl"  # patch undone


# --- properties: passes preserve the value of random expression graphs ------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

OPS = [operator.add, operator.mul, operator.sub, torch.sin, torch.relu]


@st.composite
def random_graphs(draw):
    """A random DAG over two inputs, with duplicate and dead subexpressions likely."""
    g = fx.Graph()
    values = [g.placeholder("a"), g.placeholder("b")]
    for _ in range(draw(st.integers(1, 10))):
        op = draw(st.sampled_from(OPS))
        if op in (torch.sin, torch.relu):
            args = (draw(st.sampled_from(values)),)
        else:
            args = (draw(st.sampled_from(values)), draw(st.sampled_from(values)))
        values.append(g.call_function(op, args))
    g.output(draw(st.sampled_from(values[2:])))
    return g


@settings(max_examples=40, deadline=None, derandomize=True)
@given(random_graphs())
def test_cse_dce_keep_values_and_invariants(g):
    a, b = torch.linspace(-1, 1, 5), torch.linspace(2, -2, 5)
    before = g(a, b)
    text_nodes = len(g)
    fx.cse(g)
    fx.dce(g)
    g.lint()
    assert len(g) <= text_nodes
    assert torch.equal(g(a, b), before)
    assert torch.equal(fx.compile_graph(g)(a, b), before)
    assert torch.equal(fx.to_torch_fx(g)(a, b), before)
    keys = [(n.target, n.args) for n in g.nodes if n.op == "call_function"]
    assert len(keys) == len(set(keys))  # no duplicate expression survives CSE


def test_aten_graphs_roundtrip_like_torch_fx():
    """Graphs of ATen OpOverloads (what make_fx / AOT produce) print and run as in torch.fx."""
    from course_lib import compat

    def f(x, y):
        return torch.relu(x @ y).sum(1) + 1

    x, y = torch.randn(3, 3), torch.randn(3, 3)
    gm = compat.make_fx(f, x, y)
    g = fx.from_torch_fx(gm)
    assert str(g).strip() == str(gm.graph).strip()
    assert torch.allclose(fx.compile_graph(g)(x, y), f(x, y))
    fresh = fx.Graph()
    a = fresh.placeholder("a")
    fresh.output(fresh.call_function(torch.ops.aten.add.Tensor, (a, a)))
    assert [n.name for n in fresh.nodes] == ["a", "add", "output"]
    assert "torch.ops.aten.add.Tensor" in fresh.code
