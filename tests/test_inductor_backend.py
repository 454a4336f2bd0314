"""course_lib.inductor as a torch.compile backend: forward and backward against eager."""

import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import course_lib.inductor as ind
from course_lib import compat


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class GeluBias(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x):
        return F.gelu(x + self.bias)


class SiluGate(nn.Module):
    def forward(self, a, b):
        return F.silu(a) * b


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.qkv, self.proj, self.h = nn.Linear(d, 3 * d), nn.Linear(d, d), h

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, s, d))


class AddNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x, y):
        return self.ln(x + y)


def _ce(logits, target):
    return F.cross_entropy(logits, target)


def _mse(a, b):
    return F.mse_loss(a, b)


def _logsumexp(x):
    return torch.logsumexp(x, dim=-1) + x.mean()


def _tanh_chain(x, y):
    return torch.tanh(x) * torch.sigmoid(y) + (x - y).abs().sum(0)


def _col_sum(x):
    return (x * 2).sum(0) + x.amax(1).sum()


g = torch.Generator().manual_seed(0)


def _r(*shape):
    return torch.randn(*shape, generator=g)


CASES = [
    ("mlp", lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)), lambda: (_r(3, 8),)),
    ("layernorm", lambda: nn.LayerNorm(16), lambda: (_r(4, 16),)),
    ("rmsnorm", lambda: RMSNorm(16), lambda: (_r(2, 3, 16),)),
    ("softmax", lambda: nn.Softmax(dim=-1), lambda: (_r(5, 12),)),
    ("log_softmax", lambda: nn.LogSoftmax(dim=1), lambda: (_r(5, 12),)),
    ("gelu_bias", lambda: GeluBias(16), lambda: (_r(4, 16),)),
    ("silu_gate", lambda: SiluGate(), lambda: (_r(4, 16), _r(4, 16))),
    ("cross_entropy", lambda: _ce, lambda: (_r(6, 10), torch.randint(0, 10, (6,), generator=g))),
    ("mse", lambda: _mse, lambda: (_r(6, 10), _r(6, 10))),
    ("logsumexp", lambda: _logsumexp, lambda: (_r(6, 10),)),
    ("tanh_chain", lambda: _tanh_chain, lambda: (_r(6, 10), _r(6, 10))),
    ("col_sum", lambda: _col_sum, lambda: (_r(6, 10),)),
    ("attention", lambda: Attention(16, 2), lambda: (_r(2, 5, 16),)),
    ("add_norm", lambda: AddNorm(16), lambda: (_r(2, 5, 16), _r(2, 5, 16))),
    (
        "transformer_layer",
        lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
        lambda: (_r(2, 5, 16),),
    ),
    (
        "cnn",
        lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)),
        lambda: (_r(2, 3, 8, 8),),
    ),
    ("batchnorm_train", lambda: nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Tanh()), lambda: (_r(6, 8),)),
]


def _run(model, args, backend):
    torch.manual_seed(0)
    fn = torch.compile(model, backend=backend) if backend else model
    args = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    out = fn(*args)
    out.float().sum().backward() if out.dim() else out.backward()
    params = list(model.parameters()) if isinstance(model, nn.Module) else []
    return out, [a.grad for a in args if a.is_floating_point()] + [p.grad for p in params]


@pytest.mark.parametrize("name,make_model,make_args", CASES, ids=[c[0] for c in CASES])
def test_forward_and_backward_match_eager(name, make_model, make_args):
    compat.dynamo_reset()
    torch.manual_seed(0)
    model = make_model()
    args = make_args()
    record = []
    ref_out, ref_grads = _run(model, args, None)
    if isinstance(model, nn.Module):
        model.zero_grad()
        torch.manual_seed(0)
        model = make_model()
    out, grads = _run(model, args, lambda gm, ex: ind.compile_fx(gm, ex, record=record))
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-5)
    assert len(grads) == len(ref_grads)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    kinds = [k for k, _ in record]
    assert kinds.count("compiled") >= 2, f"forward and backward should both compile, got {record}"
    # batchnorm_train included: course_lib.aot functionalizes the running-stat updates (aot/functionalize.py)
    assert "aot-fallback" not in kinds, f"course_lib.aot should trace {name}: {record}"


def test_torch_aot_path_still_available():
    compat.dynamo_reset()
    record = []
    f = torch.compile(
        lambda x: torch.softmax(x, -1), backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record, aot="torch")
    )
    x = _r(4, 8)
    torch.testing.assert_close(f(x), torch.softmax(x, -1))
    assert [k for k, _ in record] == ["compiled"]


def test_compiled_triton_on_cpu_tensors_falls_back_with_the_reason(monkeypatch):
    """On a GPU machine, ``codegen="triton"`` with CPU tensors would build kernels that the first launch
    refuses ("Pointer argument cannot be accessed from Triton"); the graph runs in eager instead, and
    the record says why. (Triton's interpreter, ``TRITON_INTERPRET=1`` as on this CPU, runs them.)"""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    compat.dynamo_reset()
    record = []
    with torch.no_grad():
        f = torch.compile(lambda x: torch.softmax(x, -1),
                          backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen="triton", record=record))  # fmt: skip
        x = _r(4, 8)
        torch.testing.assert_close(f(x), torch.softmax(x, -1))
    assert [k for k, _ in record] == ["fallback"] and "need CUDA tensors" in record[0][1], record


def test_inference_compiles_forward_only():
    compat.dynamo_reset()
    record = []
    model = GeluBias(16)
    f = torch.compile(model, backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record))
    x = _r(4, 16)
    with torch.no_grad():
        torch.testing.assert_close(f(x), model(x))
    assert [k for k, _ in record] == ["compiled"]


def test_backend_registered_by_name():
    compat.dynamo_reset()
    f = torch.compile(lambda x: torch.relu(x) * 2, backend="course_lib")
    x = _r(4, 4)
    torch.testing.assert_close(f(x), torch.relu(x) * 2)


def _refuse_sin(monkeypatch):
    """Make sin a node no code generator takes: what a real refusal looks like (a value that is not
    a tensor, an extern whose size depends on its data), on a graph small enough to see."""
    from course_lib.inductor import lowering

    def refuse(ctx, node, *args, **kwargs):
        raise lowering.Unsupported(f"no kernel for {node.target} here")

    monkeypatch.setitem(lowering.LOWERINGS, "aten.sin.default", refuse)


def test_unsupported_graph_falls_back_with_reason(caplog, monkeypatch):
    _refuse_sin(monkeypatch)
    compat.dynamo_reset()
    record = []
    f = torch.compile(lambda x: (x * 2).sin(), backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record))
    x = _r(4, 4)
    with caplog.at_level(logging.WARNING, logger="course_lib.inductor"):
        out = f(x)
    torch.testing.assert_close(out, (x * 2).sin())
    assert record and record[0][0] == "fallback" and "no kernel for aten.sin.default" in record[0][1]
    assert "runs in eager" in caplog.text


def test_complex_values_are_computed_by_aten_in_a_compiled_graph():
    """No kernel computes complex numbers: the nodes that read or make them become extern calls (as in
    Inductor), and the rest of the graph still compiles."""
    compat.dynamo_reset()
    record = []
    fn = lambda x: torch.view_as_real((x * 2).sin()).relu() + 1  # noqa: E731
    f = torch.compile(fn, backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record))
    x = _r(4, 4).to(torch.complex64)
    torch.testing.assert_close(f(x), fn(x))
    assert [kind for kind, _ in record] == ["compiled"], record
    assert record[0][1].kernel_count >= 1  # relu and + 1 are a kernel; the complex ops are ATen calls
    assert "aten.sin.default(buf" in record[0][1].output_code()


def test_strict_mode_raises_on_torch_aot_path(monkeypatch):
    """COURSE_INDUCTOR_STRICT=1 raises where a graph would run in eager, also on torch's AOT path
    (the graph's refusal reached compile_fx's catch-all around AOT tracing and ran in eager)."""
    _refuse_sin(monkeypatch)
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    compat.dynamo_reset()
    f = torch.compile(lambda x: (x * 2).sin(), backend=lambda gm, ex: ind.compile_fx(gm, ex, aot="torch"))
    with pytest.raises(Exception, match="no kernel for aten.sin"):
        f(_r(4, 4))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w, b: (F.gelu(x @ w) * b).softmax(-1).sum(),
        lambda x, w, b: F.layer_norm(x @ w, (3,), b, b).pow(2).mean(),
    ],
    ids=["gelu_softmax", "layernorm"],
)
def test_course_aot_pipeline_forward_and_backward(fn, monkeypatch):
    """course_lib.aot (joint graph, partition) feeding course_lib.inductor, against eager."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    record = []
    f = ind.compile_with_course_aot(fn, record=record)
    args = [_r(4, 8).requires_grad_(), _r(8, 3).requires_grad_(), _r(3).requires_grad_()]
    out = f(*args)
    out.backward()
    grads = [a.grad for a in args]
    ref_args = [a.detach().clone().requires_grad_() for a in args]
    ref = fn(*ref_args)
    ref.backward()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    for a, b in zip(grads, ref_args, strict=True):
        torch.testing.assert_close(a, b.grad, rtol=1e-4, atol=1e-5)
    assert [k for k, _ in record] == ["compiled", "compiled"]


@pytest.mark.parametrize("start", [-4095, -9, -8, -3])
def test_slice_start_before_the_first_row_clamps_to_zero(start):
    """Mistral's sliding window slices the last 4095 keys of 8: torch clamps the start to 0; the course's
    lowering once made it -4087 and the wrapper built a view at a negative storage offset."""
    x = torch.randn(2, 3, 8, 5)

    def f(x):
        return x[:, :, start:] * 2

    compat.dynamo_reset()
    rec = []
    out = torch.compile(f, backend=lambda gm, ex: ind.compile_fx(gm, ex, record=rec))(x)
    torch.testing.assert_close(out, f(x))
    assert [k for k, _ in rec] == ["compiled"]
