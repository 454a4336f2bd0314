"""One test per course_lib.compat function used by course_lib.inductor."""

import torch

from course_lib import compat


def _f(x):
    return torch.nn.functional.max_pool2d(torch.relu(x), 2).sum()


def test_inductor_decomposition_table_traces_max_pool():
    table = compat.inductor_decomposition_table()
    gm = compat.make_fx(_f, torch.randn(1, 1, 4, 4), decompositions=table)
    assert any("relu" in str(n.target) for n in gm.graph.nodes), "torch._inductor.decomposition table changed"


def test_inductor_aot_module_calls_both_compilers():
    seen = []

    def comp(name):
        def c(gm, ex):
            seen.append(name)
            return gm.forward

        return c

    def backend(gm, ex):
        return compat.inductor_aot_module(gm, ex, comp("fw"), comp("bw"), compat.inductor_decomposition_table())

    compat.dynamo_reset()
    x = torch.randn(3, 3, requires_grad=True)
    torch.compile(lambda t: (t.sin() * 2).sum(), backend=backend)(x).backward()
    assert seen == ["fw", "bw"], "torch._functorch.aot_autograd.aot_module_simplified changed its contract"


def test_register_dynamo_backend_and_entry_point_group():
    compat.register_dynamo_backend("course_lib_compat_probe", lambda gm, ex: gm.forward)
    assert "course_lib_compat_probe" in torch.compiler.list_backends(exclude_tags=())
    import inspect

    registry = compat.require("torch._dynamo.backends.registry")
    assert '"torch_dynamo_backends"' in inspect.getsource(registry), "Dynamo no longer reads the entry-point group"


def test_inductor_output_code_with_config_turns_fusion_off():
    x = torch.randn(8, 8)
    with torch.no_grad():
        out, codes = compat.inductor_output_code_with_config(lambda t: (t.exp() * 2).sum(-1), x, max_fusion_size=1)
    torch.testing.assert_close(out, (x.exp() * 2).sum(-1))
    assert "cpp_fused" in codes[0], "torch._inductor.config.patch or run_and_get_code changed"
