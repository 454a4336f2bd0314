"""compat functions of Module 4 part 2 (aot / decomp / fake): each fails with a clear message if torch moves them."""

import torch

from course_lib import compat


def test_torch_decomposition():
    ref = compat.torch_decomposition(torch.ops.aten.silu.default)
    assert ref is not None, "torch._decomp.decomposition_table lost aten.silu"
    x = torch.randn(5)
    torch.testing.assert_close(ref(x), torch.nn.functional.silu(x))


def test_torch_partition():
    from course_lib import aot
    from course_lib.fx import to_torch_fx

    joint = aot.joint_graph(lambda x: x.sin().exp().sum(), torch.randn(4, requires_grad=True))
    inputs = [n.meta["val"] for n in joint.graph.nodes if n.op == "placeholder"]
    for method in ("default", "min_cut"):
        fw, bw = compat.torch_partition(to_torch_fx(joint.graph), inputs, joint.num_outputs, method)
        assert hasattr(fw, "graph") and hasattr(bw, "graph"), f"torch partitioner {method} changed its result"


def test_torch_symbolic_trace():
    gm, env = compat.torch_symbolic_trace(lambda x: x.sum(0), torch.randn(3, 4))
    assert env is not None, "make_fx(tracing_mode='symbolic') no longer gives SymInt sizes"
    assert isinstance(env.guards, list)
