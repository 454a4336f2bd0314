"""Regressions found by running transformers architectures the course had not seen through
``backend="course_lib"``, each reproduced here with plain torch ops.

* A tensor built from Python numbers inside the compiled code (``torch.tensor(3.0)``; BEiT's
  relative position bias does this) reaches torch's AOT Autograd graph as a ``get_attr`` of a
  constant (``_tensor_constant0``, read by ``lift_fresh_copy``). course_lib.inductor's lowering
  knows only placeholders, so the graph ran in eager ("FX op get_attr ... is not handled").
  ``inner_compiler`` now lifts the constants into extra inputs, as course_lib.aot's path does.
* A mixture-of-experts layer (Switch Transformers, DBRX) picks each expert's tokens with
  ``nonzero``; the graph break hands Dynamo graphs whose token count differs from call to call,
  so they arrive with symbolic sizes (``[s0, 8]``). Lowering refused every extern call there
  ("extern call aten.mm.default (mm) with symbolic sizes") and, once that was fixed, the forward
  graph's outputs: torch's partitioner saves the ``SymInt`` inputs for the backward graph ("output
  primals_1 is not a tensor"). Both graphs ran in eager.
* RecurrentGemma keeps its embedding scale in a ``bfloat16`` buffer and converts it to float32
  (``_to_copy``). The conversion was fused into a kernel that loads bf16, and the C++ generator
  has no C type for it (``KeyError: 'bfloat16'``), so the graph ran in eager. A conversion from
  or to a dtype the code generators lack is now an ATen extern call.
* Switch Transformers checks its router's output on data (``_assert_async``), an op that returns
  nothing: lowering refused it ("aten._assert_async.msg returns NoneType, not tensors"). It is now
  an extern called for its effect, so the check still raises at run time.
* With dynamic shapes two dims may share a size symbol (an ``[s0, s0]`` tensor), so a loop bound
  is ``s0**2``, a sympy ``Pow``; the index printers knew sums, products and ``//`` / ``%`` only
  ("cannot print index s0**2"). And a symbolic divisor lost its parentheses: ``x % 4*ks0`` is
  ``(x % 4)*ks0``, so Switch Transformers' attention read the wrong rows (output error 1.1).
* On the H200, HuBERT, Wav2Vec2-Conformer and DBRX stopped in Dynamo ("two different devices cuda:0,
  cpu" in scaled_dot_product_attention): a graph with no tensor input (the attention mask, built from
  factories with ``device="cuda"``) was compiled for the device of its first input, which it lacks,
  so it ran on the CPU and returned a CPU mask. The device now comes from the graph's values too.
"""

import functools

import pytest
import torch

import course_lib.inductor as ind
from course_lib import compat


def _with_constants(x):
    return (x * torch.tensor(3.0) + torch.tensor([1, 2, 3, 4]).float()).sin()


def test_tensor_constants_compile_through_torch_aot(monkeypatch):
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")  # a fallback raises instead of running eager
    record: list = []
    compat.dynamo_reset()
    compiled = torch.compile(_with_constants, backend=functools.partial(ind.compile_fx, aot="torch", record=record))
    x = torch.randn(4, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_(True)
    out = compiled(x)
    out.sum().backward()
    ref = _with_constants(x_eager)
    ref.sum().backward()
    assert [kind for kind, _ in record] == ["compiled", "compiled"]  # forward and backward graphs
    assert torch.allclose(out, ref, atol=1e-6)
    assert torch.allclose(x.grad, x_eager.grad, atol=1e-6)
    # the forward graph really read the constants: they are inputs of the compiled graph
    forward = record[0][1]
    assert any(name.startswith("const_") for name in forward.graph.inputs)


def _expert(x, w1, b1, w2):
    """One expert of a mixture-of-experts layer, on the tokens routed to it: ``x`` is ``[tokens, 8]``."""
    h = torch.addmm(b1, x, w1).relu()
    return (h @ w2) + torch.bmm(h.unsqueeze(0), w2.unsqueeze(0)).squeeze(0)


def test_extern_calls_with_symbolic_sizes(monkeypatch):
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    record: list = []
    compat.dynamo_reset()
    compiled = torch.compile(_expert, backend=functools.partial(ind.compile_fx, record=record))
    torch.manual_seed(0)
    params = [torch.randn(8, 16), torch.randn(16), torch.randn(16, 8)]
    for tokens in (5, 7, 3):  # one compilation for every token count
        x = torch.randn(tokens, 8)
        mine = [p.clone().requires_grad_(True) for p in [x, *params]]
        ref = [p.clone().requires_grad_(True) for p in [x, *params]]
        torch._dynamo.mark_dynamic(mine[0], 0)  # as a graph after MoE's nonzero gets it
        out = compiled(*mine)
        out.square().sum().backward()
        expected = _expert(*ref)
        expected.square().sum().backward()
        assert out.shape == expected.shape
        assert torch.allclose(out, expected, atol=1e-5, rtol=1e-5)
        for a, b in zip(mine, ref, strict=True):
            assert torch.allclose(a.grad, b.grad, atol=1e-4, rtol=1e-5)
    assert [kind for kind, _ in record] == ["compiled", "compiled"]  # forward and backward, once
    forward, backward = record[0][1], record[1][1]
    assert forward.graph.sizevars and backward.graph.sizevars  # compiled for any token count
    externs = [b.extern["target"] for b in forward.graph.buffers if b.kind == "extern"]
    assert {"aten.addmm.default", "aten.mm.default", "aten.bmm.default"} <= set(externs)
    assert any(o[0] == "size" for o in forward.graph.outputs)  # s0, saved for the backward graph


class _Scaled(torch.nn.Module):
    """RecurrentGemma's embedding scale: a bf16 buffer converted to the activations' dtype."""

    def __init__(self):
        super().__init__()
        self.register_buffer("normalizer", torch.tensor(8**0.5, dtype=torch.bfloat16), persistent=False)

    def forward(self, x):
        return (x * self.normalizer.type(x.dtype)).tanh()


def test_bfloat16_buffer_converted_in_a_kernel(monkeypatch):
    """Once an extern ATen conversion (the kernels had no bfloat16); now the kernel loads the bf16
    buffer and widens it itself."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    record: list = []
    compat.dynamo_reset()
    model = _Scaled()
    compiled = torch.compile(model, backend=functools.partial(ind.compile_fx, record=record))
    x = torch.randn(4, 8, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_(True)
    out = compiled(x)
    out.sum().backward()
    ref = model(x_eager)
    ref.sum().backward()
    assert all(kind == "compiled" for kind, _ in record) and record
    assert torch.allclose(out, ref, atol=1e-6)
    assert torch.allclose(x.grad, x_eager.grad, atol=1e-6)
    with torch.no_grad():  # inference: one forward graph (course_lib.aot's inference path)
        compat.dynamo_reset()
        record.clear()
        assert torch.allclose(compiled(x), ref, atol=1e-6)
        assert [kind for kind, _ in record] == ["compiled"]
    externs = [b.extern["target"] for b in record[0][1].graph.buffers if b.kind == "extern"]
    assert not any("_to_copy" in t or "convert_element_type" in t for t in externs)
    assert "course_bf16_to_float" in record[0][1].kernel_code


def _checked(x):
    torch._assert_async((x > -100).all(), "x is below -100")
    return x.sin()


def test_assert_async_called_for_its_effect(monkeypatch):
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    record: list = []
    compat.dynamo_reset()
    compiled = torch.compile(_checked, backend=functools.partial(ind.compile_fx, aot="torch", record=record))
    x = torch.randn(4, 4)
    assert torch.allclose(compiled(x), x.sin(), atol=1e-6)
    assert [kind for kind, _ in record] == ["compiled"]
    with pytest.raises(RuntimeError, match="below -100"):  # the compiled graph still checks
        compiled(x - 1000)


def test_index_printers_print_powers():
    from course_lib.inductor import sizevars
    from course_lib.inductor.codegen.triton import py_index

    s0, s1, x0 = sizevars.size_symbol("s0"), sizevars.size_symbol("s1"), sizevars.sym("x0")
    exprs = [s0**2, 3 * s0**2 * s1 + x0, s1 * (s0 + 1) ** 3, sizevars.FloorDiv(x0, s0**2)]
    exprs += [sizevars.FloorDiv(x0, 4 * s0), sizevars.ModIdx(x0, 4 * s0), sizevars.ModIdx(x0 + s1, s0 + 2)]
    for expr in exprs:
        env = {"s0": 5, "s1": 7, "x0": 123}
        value = expr.subs({s0: 5, s1: 7, x0: 123})
        want = int(value.replace(sizevars.FloorDiv, lambda a, b: a // b).replace(sizevars.ModIdx, lambda a, b: a % b))
        assert eval(py_index(expr), env) == want, (expr, py_index(expr))


def _biased_softmax(x, b):
    return (x + b).softmax(-1)


def test_cpp_symbolic_divisor_in_parentheses(monkeypatch):
    """A softmax over ``[2, 4, s0, 8]``: the C++ kernel flattens the outer loops (2 x 4*s0) and
    unflattens ``x1 = x % (4*s0)``; without the parentheses it read the wrong rows (out of bounds)."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    compat.dynamo_reset()
    compiled = torch.compile(_biased_softmax, backend=functools.partial(ind.compile_fx, aot="torch"))
    for n in (4, 6):
        x, b = torch.randn(2, 4, n, 8), torch.randn(1, 4, n, 8)
        torch._dynamo.mark_dynamic(x, 2)
        torch._dynamo.mark_dynamic(b, 2)
        assert torch.allclose(compiled(x, b), _biased_softmax(x, b), atol=1e-6)


def test_triton_index_value_that_is_a_number():
    """A cumulative sum along a dim of size 1 is an index expression that simplifies to 0 (and 1):
    the Triton kernel printed ``(0).to(tl.int64)``, which no Triton accepts (MambaForCausalLM and
    FunnelModel on the H200). It runs in Triton's interpreter here, against eager."""
    import course_lib.inductor as ind
    import course_lib.triton  # noqa: F401  (the interpreter, before any kernel runs)
    from course_lib import compat, decomp

    def fn(x):
        return (torch.ones(x.shape[0], 1, dtype=torch.long).cumsum(1) + x.long(),)

    x = torch.randint(0, 5, (6, 1)).float()
    c = ind.compile_graph(compat.make_fx(fn, x, decompositions=decomp.DECOMPOSITIONS), [x], codegen="triton")
    assert "(0).to(" not in c.kernel_code
    torch.testing.assert_close(c(x)[0], fn(x)[0])


def test_triton_cast_of_a_constant():
    """``ones_like(x, long).float() / 4``, masked: the integer constant 1 cast to float printed as
    ``1.to(tl.float32)`` (LongT5's graphs on the H200 fell back to eager with a SyntaxError)."""
    import course_lib.inductor as ind
    import course_lib.triton  # noqa: F401  (the interpreter, before any kernel runs)
    from course_lib import compat, decomp

    def fn(x):
        return ((torch.ones_like(x, dtype=torch.long).to(torch.float32) / 4.0 * (x > 0)).sum(1),)

    x = torch.randn(6, 8)
    c = ind.compile_graph(compat.make_fx(fn, x, decompositions=decomp.DECOMPOSITIONS), [x], codegen="triton")
    assert "1.to(" not in c.kernel_code
    torch.testing.assert_close(c(x)[0], fn(x)[0])


def _fake_graph(fn):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    with FakeTensorMode():  # CUDA tensors as fakes: no GPU needed to trace them
        return make_fx(fn, tracing_mode="fake")()


def test_a_graph_without_inputs_runs_where_its_factories_put_it():
    from course_lib.inductor.compile_fx import _device_of
    from course_lib.inductor.lowering import Unsupported

    def mask(device):
        return lambda: (torch.ones(4, 4, dtype=torch.bool, device=device).tril(),)

    assert _device_of(_fake_graph(mask("cuda")), []) == torch.device("cuda", 0)
    assert _device_of(_fake_graph(mask("cpu")), []) == torch.device("cpu")
    two = _fake_graph(lambda: (torch.ones(2, device="cuda:0"), torch.ones(2, device="cuda:1")))
    with pytest.raises(Unsupported, match="several devices"):
        _device_of(two, [])


def _long_cumsum_and_scalar_adds(x):
    # a cumsum too long for the course's triangular decomposition stays one op (Falcon-H1's Mamba mixer);
    # x + c and c - x reach course_lib.aot as add.Scalar and rsub (DiffLlama's lambda_init + ...)
    return (x.cumsum(1).sin() + torch.ops.aten.add.Scalar(x, 2.0) + torch.ops.aten.rsub.Tensor(x, x * 3)).sum()


def test_derivative_rules_for_a_long_cumsum_and_scalar_adds(monkeypatch):
    """Falcon-H1 and DiffLlama sent a backward graph to torch's AOT: no rule for cumsum, add.Scalar."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    compat.dynamo_reset()
    x = torch.randn(4, 4096, generator=torch.Generator().manual_seed(0), requires_grad=True)
    x_eager = x.detach().clone().requires_grad_(True)
    out = torch.compile(_long_cumsum_and_scalar_adds, backend="course_lib")(x)
    out.backward()
    ref = _long_cumsum_and_scalar_adds(x_eager)
    ref.backward()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: a copy between two devices")
def test_a_cpu_attribute_moved_to_the_gpu_is_a_copy():
    """VideoMAE keeps its sinusoid table as a plain attribute (left on the CPU by model.to("cuda"))
    and moves it in forward: the course read the CPU tensor from a Triton kernel."""
    table = torch.randn(8, 4)

    def f(x):
        return (x + table.to(x.device) * 2,)

    torch._dynamo.reset()
    x = torch.randn(8, 4, device="cuda")
    got = torch.compile(f, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen="triton"))(x)
    torch.testing.assert_close(got[0], f(x)[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: a CPU scalar tensor beside GPU tensors")
def test_a_cpu_scalar_tensor_in_a_gpu_graph():
    """Eager takes a 0-dim CPU tensor beside CUDA tensors as a scalar (Whisper's decoder hands one to
    its graph); a Triton kernel was handed its CPU pointer. The wrapper moves it to the graph's device."""

    def f(x, s):
        return (x * s.double().float() + 1,)

    torch._dynamo.reset()
    x, s = torch.randn(8, 4, device="cuda"), torch.tensor(0.5)
    got = torch.compile(f, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen="triton"))(x, s)
    torch.testing.assert_close(got[0], f(x, s)[0])
