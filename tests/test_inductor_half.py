"""Half precision in course_lib.inductor: float16 and bfloat16 tensors are loaded and stored by the
generated kernels, which compute in float32 (Inductor's ``upcast_to_fp32``); decompositions with a
reduction inside (layer norm, softmax, mean, var) compute in float32 and round once.

The yardstick is float32: eager in half precision rounds after every op, a fused kernel less often,
so the two cannot agree bit for bit. Each check asks that the course be as close to the float32
result as eager is (within 2x, plus two units in the last place), on random shapes and values.
"""

import pytest
import sympy
import torch
import torch.nn.functional as F

import course_lib.inductor as ind
from course_lib import compat, decomp
from course_lib.aot import real_models
from course_lib.inductor import ir, triton_codegen

HALVES = [torch.bfloat16, torch.float16]
EPS = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def _compile(fn, *args, codegen="cpp"):
    graph = compat.make_fx(fn, *args, decompositions=decomp.DECOMPOSITIONS)
    return ind.compile_graph(graph, list(args), codegen=codegen)


def _norm_gelu(x, w, b):
    y = F.layer_norm(x, (x.shape[-1],), w, b)
    return F.gelu(y) * 2.0 + x, y


def _softmaxes(x, w, b):
    return torch.softmax(x, -1), torch.log_softmax(x * 3.0, -1), torch.logsumexp(x, -1)


def _statistics(x, w, b):
    return x.sum(-1), x.mean(1), x.amax(-1), x.var(-1), (x * w).sum(0)


def _masks_and_casts(x, w, b):
    up = (x.float() * 3.0 + 0.1).to(x.dtype)  # the model asks for a rounding: it stays one
    return torch.where(x > 0.25, x, b), F.relu(x - w), up, (x > 0).to(x.dtype) * x.amax()


def _matmul(x, w, b):
    return torch.tanh(x @ x.transpose(-1, -2) * 0.125 + 1.0), torch.sigmoid(x) * b


def _activations(x, w, b):  # composites that eager computes in one kernel, rounding once
    return F.silu(x) * F.softplus(w), F.mish(x - b), F.hardswish(x) + torch.sigmoid(x), torch.lerp(x, w, 0.25)


FUNCTIONS = [_norm_gelu, _softmaxes, _statistics, _masks_and_casts, _matmul, _activations]


def _inputs(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    a, n, d = (int(torch.randint(lo, hi, (), generator=g)) for lo, hi in ((1, 4), (3, 40), (5, 70)))
    x = (torch.randn(a, n, d, generator=g) * 2).to(dtype)
    w, b = (torch.randn(d, generator=g).to(dtype) for _ in range(2))
    return x, w, b


def _check_against_float32(got, fn, args, dtype):
    eager = fn(*args)
    exact = fn(*(a.float() for a in args))
    for i, (o, e, r) in enumerate(zip(got, eager, exact, strict=True)):
        assert o.dtype == e.dtype and o.shape == e.shape, (i, o.dtype, e.dtype)
        course, eager_err = (float((t.float() - r).abs().max()) for t in (o, e))
        ulps = 2 * EPS[dtype] * float(r.abs().max())
        assert course <= 2 * eager_err + ulps, f"output {i}: course off float32 by {course}, eager by {eager_err}"


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("seed", range(3))
def test_cpp_kernels_in_half_precision(fn, dtype, seed):
    args = _inputs(dtype, seed)
    compiled = _compile(fn, *args)
    assert compiled.kernel_code, "the graph compiled to kernels (no eager fallback)"
    _check_against_float32(compiled(*args), fn, args, dtype)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("fn", [_norm_gelu, _statistics, _masks_and_casts], ids=lambda f: f.__name__)
def test_triton_kernels_in_half_precision(fn, dtype):
    """The same plans printed as Triton and run by Triton's interpreter; Python scalars stay
    float32 constants (a half constant printed as an int turned gelu's 0.5 into 0). The
    interpreter narrows to bfloat16 by truncation (a GPU rounds to nearest), which the two units
    in the last place of the bound absorb; the GPU test below runs the real conversion."""
    args = _inputs(dtype, 5)
    compiled = _compile(fn, *args, codegen="triton")
    assert "float16" in compiled.kernel_code or "bfloat16" in compiled.kernel_code
    _check_against_float32(compiled(*args), fn, args, dtype)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_half_kernels_compile_for_sm_90(dtype):
    """Triton's compiler takes half pointers and narrows with a round-to-nearest ``cvt``."""
    args = _inputs(dtype, 1)
    stages = triton_codegen.compile_to_ptx(_compile(_norm_gelu, *args, codegen="triton"), target="sm_90")
    ptx = "\n".join(s["ptx"] for s in stages.values())
    assert {torch.bfloat16: "cvt.rn.bf16.f32", torch.float16: "cvt.rn.f16.f32"}[dtype] in ptx


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_narrowing_rounds_as_torch_does(dtype):
    """float32 -> half in a C++ kernel, bit for bit against torch: ties to even, overflow to inf,
    NaN, subnormals, and both signs (bfloat16 is stored as bits and rounded by hand)."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(4096, generator=g) * 10.0 ** torch.randint(-40, 39, (4096,), generator=g),
                   torch.tensor([0.0, -0.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11,
                                 65520.0, 3.4e38, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-45])])  # fmt: skip
    got = _compile(lambda t: (t.to(dtype) * 1,), x)(x)[0]
    want = x.to(dtype) * 1
    same = (got.view(torch.int16) == want.view(torch.int16)) | (got.isnan() & want.isnan())
    assert bool(same.all()), (x[~same][:5], got[~same][:5], want[~same][:5])


def test_upcast_ir():
    """What the lowering hands the code generators: half loads widened where read, the arithmetic
    in float32, one narrowing at the store; a conversion to half inside stays a rounding, except
    of a value that was half already."""
    i = sympy.Symbol("i0")
    load = ir.Load("buf0", i, "bfloat16")
    body = ir.Op("add", (load, ir.Const(1.5, "bfloat16")), "bfloat16")
    wide = ir.Op("to_dtype", (load,), "float32")
    assert ir.upcast(body, "bfloat16") == ir.Op(
        "to_dtype", (ir.Op("add", (wide, ir.Const(1.5, "float32")), "float32"),), "bfloat16"
    )
    inner = ir.Op("mul", (ir.Op("to_dtype", (ir.Op("exp", (wide,), "float32"),), "bfloat16"), load), "bfloat16")
    # (``wide`` inside: a body that widens a half load itself is widened once)
    up = ir.upcast(inner, "float32")
    rounded = ir.Op("to_dtype", (ir.Op("to_dtype", (ir.Op("exp", (wide,), "float32"),), "bfloat16"),), "float32")
    assert up == ir.Op("mul", (rounded, wide), "float32")
    assert ir.upcast(ir.Op("to_dtype", (wide,), "bfloat16"), "float32") == wide  # read, widened, narrowed: itself
    f32 = ir.Op("exp", (ir.Load("buf1", i, "float32"),), "float32")
    assert ir.upcast(f32, "float32") is f32


@pytest.mark.parametrize(("name", "dtype"), [("gpt2", torch.bfloat16), ("llama", torch.float16),
                                           ("qwen3_moe", torch.bfloat16)])  # fmt: skip
def test_real_models_train_in_half_precision(name, dtype, monkeypatch):
    """A transformers model's training step in half precision, every graph compiled (no eager
    fallback), as close to the float32 step as eager's is. Qwen3-MoE routes with top-k (its smallest
    margin is recorded) and splits a masked grouped_mm result into views (see the memory planner)."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    result = real_models.precision(name, dtype)
    assert result.ok(), result
    assert (result.topk_margin < 1) == (name == "qwen3_moe"), result


def test_topk_margins_are_the_relative_gap_after_the_kth_value():
    x = torch.tensor([[4.0, 1.0, 3.0, 2.0], [1.0, 1.01, 0.5, 2.0]])
    y = torch.tensor([[4.0, 1.0], [3.0, 2.0]])
    margins = real_models.topk_margins(lambda: (torch.topk(x, 2), torch.topk(y, 1, dim=0), torch.topk(x, 4)))
    assert margins == pytest.approx([min((3 - 2) / 3, (1.01 - 1) / 1.01), (4 - 3) / 4])  # k = all: no gap


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_triton_kernels_on_cuda_in_half_precision(fn, dtype):
    """The Triton kernels compiled for the GPU and run there, against float32 on the GPU."""
    args = tuple(a.cuda() for a in _inputs(dtype, 7))
    compiled = _compile(fn, *args, codegen="triton")
    _check_against_float32(compiled(*args), fn, args, dtype)


@pytest.mark.parametrize("stats", [torch.bfloat16, torch.float32], ids=["all_bf16", "mixed"])
def test_batch_norm_in_half_precision(stats):
    """Training batch norm on bfloat16 activations, its parameters and running statistics in bf16
    or (mixed precision) float32: each result in eager's dtype, as close to float32 as eager's."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 6, 5, 5, generator=g) * 3 + 1).to(torch.bfloat16)
    w, b, mean, var = (torch.randn(6, generator=g).to(stats) for _ in range(4))
    var = var.abs() + 0.5

    def fn(x, w, b, mean, var):
        return torch.ops.aten._native_batch_norm_legit_functional.default(x, w, b, mean, var, True, 0.1, 1e-5)

    _check_against_float32(_compile(fn, x, w, b, mean, var)(x, w, b, mean, var), fn, (x, w, b, mean, var),
                           torch.bfloat16)  # fmt: skip


def test_precision_accepts_a_finite_step_where_eager_overflowed():
    """BEiT in float16: eager's own step has a NaN gradient, the course's (float32 inside its kernels)
    is finite; that passes. A NaN from the backend never does."""
    from course_lib.aot.real_models import Precision

    assert Precision("m", "float16", float("nan"), 0.07, "w").ok()
    assert not Precision("m", "float16", float("nan"), float("nan"), "w").ok()
    assert not Precision("m", "float16", 0.01, float("nan"), "w").ok()
    assert not Precision("m", "float16", 0.01, 0.05, "w").ok() and Precision("m", "float16", 0.01, 0.02, "w").ok()
