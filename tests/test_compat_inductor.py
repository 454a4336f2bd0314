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


def test_inductor_output_code_parsers_on_live_output():
    """The parsers of Inductor's output code (compat.inductor_code_*) on what this torch writes."""
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    _, codes = compat.inductor_output_code(lambda a, b: (torch.tanh(a @ b) * 2).sum(-1), x, w)
    code = "\n".join(codes)
    kernels = compat.inductor_code_kernels(code)
    assert kernels, "no `name = async_compile.cpp_pybinding(..., r'''...''')` kernel found in Inductor's output code"
    name, kind, source = kernels[0]
    assert name.startswith("cpp_fused") and kind.startswith("cpp") and 'extern "C"' in source
    assert compat.inductor_code_externs(code), "the matmul should be an extern_kernels call"
    call = compat.inductor_code_wrapper_call(code)
    assert f"{name}(" in call, "the wrapper's call() no longer found, or it does not launch the kernel"


def test_compile_fx_dynamic_contract_through_compat():
    """compat.make_fx_dynamic: marked dims become SymInts, the rest stay ints, guards readable."""
    gm = torch.fx.symbolic_trace(lambda a: (a.view(a.shape[0] // 2, -1).sum(0),))
    traced, fakes, env = compat.make_fx_dynamic(gm, [torch.randn(8, 3)], {0: (0,)})
    assert isinstance(fakes[0].shape[0], torch.SymInt) and fakes[0].shape[1] == 3
    assert compat.symbol_hints([fakes[0].shape[0]]) and compat.shape_env_guards(env)
    assert str(compat.symint_expr(fakes[0].shape[0])).startswith("s")
