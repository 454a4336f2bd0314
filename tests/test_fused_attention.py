"""Attention kept whole: ``course_lib.decomp.FUSED_ATTENTION`` and the fused kernels' derivative rules.

On a device in ``FUSED_ATTENTION`` (CUDA by default) the decomposition table leaves
``scaled_dot_product_attention``'s fused kernel in the graph, course_lib.aot differentiates it with
the kernel's own backward, and course_lib.inductor calls both as externs. The CPU runs the same path
with ``"cpu"`` added (FlashAttention for CPU); the CUDA rule is checked on meta tensors here and on
real models on a GPU.
"""

import pytest
import torch
import torch.nn.functional as F

import course_lib.inductor as ind
from course_lib import aot, compat, decomp
from course_lib.aot import real_models, rules

aten = torch.ops.aten
CPU_FLASH = aten._scaled_dot_product_flash_attention_for_cpu.default
EFFICIENT = aten._scaled_dot_product_efficient_attention.default


@pytest.fixture
def fused_on_cpu(monkeypatch):
    monkeypatch.setattr(decomp.table, "FUSED_ATTENTION", {"cpu"})


@pytest.fixture
def compiled_graphs(monkeypatch) -> list:
    """The FX graphs course_lib.inductor compiles while the test runs."""
    seen = []
    compile_graph = ind.compile_fx.__globals__["compile_graph"]

    def spy(gm, *args, **kwargs):
        seen.append(gm.graph)
        return compile_graph(gm, *args, **kwargs)

    monkeypatch.setitem(ind.compile_fx.__globals__, "compile_graph", spy)
    return seen


def _targets(graphs) -> set[str]:
    return {str(n.target) for g in graphs for n in g.nodes if n.op == "call_function"}


def _attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * 2.0


def _inputs(seed: int, causal_mask: bool = False):
    g = torch.Generator().manual_seed(seed)
    b, h, lq, lk, d = 2, 3, int(torch.randint(3, 12, (), generator=g)), int(torch.randint(3, 12, (), generator=g)), 8
    q, k, v = (torch.randn(b, h, n, d, generator=g) for n in (lq, lk, lk))
    mask = torch.randn(lq, lk, generator=g) if seed % 2 else torch.rand(b, 1, lq, lk, generator=g) > 0.2
    if mask.dtype == torch.bool:
        mask[..., 0] = True  # no row fully masked (its softmax is NaN in eager as well)
    return q, k, v, mask


def test_default_decomposes_on_cpu():
    """The labs read the decomposed graph: on the CPU attention stays bmm, softmax, bmm."""
    assert "cpu" not in decomp.FUSED_ATTENTION and "cuda" in decomp.FUSED_ATTENTION
    q, k, v, mask = _inputs(1)
    graph = decomp.trace(_attention, q, k, v, mask)
    assert not decomp.non_primitive(graph)
    assert "aten.bmm.default" in _targets([graph])


@pytest.mark.parametrize("seed", range(6))
def test_kept_whole_forward_and_backward_match_eager(fused_on_cpu, seed):
    """Random shapes and masks (float and boolean): the compiled forward calls the fused kernel,
    the compiled backward its backward kernel, and both match eager autograd."""
    q, k, v, mask = _inputs(seed)
    record = []
    compiled = ind.compile_with_course_aot(_attention, record=record)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = compiled(*leaves, mask)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = _attention(*ref_leaves, mask)
    ref.backward(grad)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)
    code = "\n".join(c.wrapper_code for kind, c in record if kind == "compiled")
    assert "_scaled_dot_product_flash_attention_for_cpu" in code
    assert "_scaled_dot_product_flash_attention_for_cpu_backward" in code
    assert "bmm" not in code


def test_joint_graph_keeps_the_kernel_and_its_backward(fused_on_cpu):
    q, k, v, mask = _inputs(3)
    joint = aot.joint_graph(_attention, q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), mask)
    targets = _targets([joint.graph])
    assert str(CPU_FLASH) in targets
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" in targets
    assert "aten.bmm.default" not in targets


@pytest.mark.parametrize("seed", [1, 3, 7])
def test_learned_bias_gets_its_gradient(fused_on_cpu, seed):
    """FlashAttention for CPU has no gradient for its mask; a learned bias (T5's position bias,
    broadcast over the batch) gets one from the scores' gradient, and it matches eager."""
    q, k, v, bias = _inputs(seed)
    bias = bias.expand(3, *bias.shape).contiguous()  # one bias a head
    leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    out = ind.compile_with_course_aot(_attention)(*leaves)
    grad = torch.randn_like(out)
    out.backward(grad)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    _attention(*ref_leaves).backward(grad)
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)


def test_cpu_rule_matches_torch_autograd():
    q, k, v, mask = _inputs(5)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = CPU_FLASH(*leaves, attn_mask=mask)
    grad = torch.randn_like(out)
    want = torch.autograd.grad(out, leaves, grad)
    got = rules.vjp(CPU_FLASH, [grad, None], q, k, v, attn_mask=mask)
    for g, w in zip(got[:3], want):
        torch.testing.assert_close(g, w)
    assert got[3:] == (None, None)


def _meta(*shape):
    return torch.randn(*shape, device="meta")


def test_efficient_attention_rule_asks_only_for_needed_gradients():
    """The CUDA rule on meta tensors (shapes only): ``grad_input_mask`` follows which arguments need
    a gradient, so a padding mask's gradient is never computed; a learned bias's is."""
    q, k, v, bias = _meta(2, 3, 5, 8), _meta(2, 3, 7, 8), _meta(2, 3, 7, 8), _meta(2, 3, 5, 7)
    out = EFFICIENT(q, k, v, bias, True)
    grad = [torch.empty_like(out[0]), None, None, None]
    with rules.needs_grad([True, True, True, False], {}):
        gq, gk, gv, gb, _ = rules.DERIVATIVES[EFFICIENT](grad, out, q, k, v, bias, True)
    assert (gq.shape, gk.shape, gv.shape, gb) == (q.shape, k.shape, v.shape, None)
    with rules.needs_grad([True, True, True, True], {}):
        gb = rules.DERIVATIVES[EFFICIENT](grad, out, q, k, v, bias, True)[3]
    assert gb.shape == bias.shape
    assert rules.DERIVATIVES[EFFICIENT]([None] * 4, out, q, k, v, bias, True) == (None,) * 5


def test_efficient_attention_is_traced_with_its_logsumexp(monkeypatch):
    """torch asks the kernel for the logsumexp only when an input requires grad, which a forward
    trace cannot know; kept whole, the entry always asks (the backward kernel reads it)."""
    monkeypatch.setattr(decomp.table, "FUSED_ATTENTION", {"meta"})
    q = _meta(2, 3, 5, 8)
    gm = compat.make_fx(lambda q: EFFICIENT(q, q, q, None, False)[0], q, decompositions=decomp.DECOMPOSITIONS)
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is EFFICIENT]
    assert len(calls) == 1 and calls[0].args[4] is True


#: models whose traced attention reaches memory-efficient attention on CUDA. Under ``torch.compile``
#: BERT and ViT hand over a mask broadcast with stride 0 along the keys (eager drops it), which sent
#: them to the math path until attention_with_dense_mask; bench/probe_attention.py prints torch's
#: verdict per call.
KEPT_ON_CUDA = {"gpt2", "llama", "bert", "vit"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "vit"])
def test_real_models_on_cuda_call_the_fused_kernel(name, monkeypatch, compiled_graphs):
    """On the GPU (the default policy): the models match eager and their compiled graphs call
    memory-efficient attention and its backward, not bmm."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    seen = compiled_graphs
    result = real_models.compare(name, device="cuda")
    assert result.ok(), result
    if name not in KEPT_ON_CUDA:
        return
    targets = _targets(seen)
    assert str(EFFICIENT) in targets
    assert "aten._scaled_dot_product_efficient_attention_backward.default" in targets


def test_layout_rules():
    """What the CUDA kernels accept (Inductor's ``sdpa_constraint``): a bias's rows padded to 8
    elements, a broadcast dimension kept; ``out`` and its gradient stored heads-inner."""
    from course_lib.inductor import lowering as L

    accepts, strides = L._aligned_bias((2, 3, 5, 7))
    assert strides == (3 * 5 * 8, 5 * 8, 8, 1)
    assert not accepts((105, 35, 7, 1)) and accepts((40, 0, 8, 1)) and accepts((0, 0, 16, 1))
    accepts, strides = L._dense_last_dim((2, 3, 5, 7))
    assert strides == (105, 35, 7, 1) and accepts((105, 7, 21, 1)) and not accepts((105, 35, 1, 5))
    assert L._heads_inner((2, 3, 5, 8)) == (None, (120, 8, 24, 1))  # exactly these strides


@pytest.mark.parametrize("seed", range(3))
def test_required_layouts_are_copies_with_the_same_values(monkeypatch, seed):
    """The layout rules run on the CPU FlashAttention backward (as if it were CUDA's): ``out`` and
    its gradient are copied heads-inner and ``q`` with padded rows (head size 5), and the gradients
    still match eager."""
    from course_lib.inductor import lowering as L

    monkeypatch.setattr(decomp.table, "FUSED_ATTENTION", {"cpu"})
    monkeypatch.setattr(L, "_on_cuda", lambda node: True)
    rules_for = {0: L._heads_inner, 1: L._aligned_bias, 4: L._heads_inner}
    monkeypatch.setitem(L.ATTENTION_LAYOUTS, "aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
                        rules_for)  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, 6, 5, generator=g) for _ in range(3))
    record = []
    compiled = ind.compile_with_course_aot(lambda q, k, v: F.scaled_dot_product_attention(q, k, v).sin(), record=record)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = compiled(*leaves)
    out.backward(torch.ones_like(out))
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref_leaves).sin().backward(torch.ones_like(out))
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)
    backward = [c for kind, c in record if kind == "compiled"][-1]
    assert "(90, 5, 15, 1)" in backward.wrapper_code  # a [2, 3, 6, 5] copy stored [2, 6, 3, 5]
    assert "(144, 48, 8, 1)" in backward.wrapper_code  # q with rows padded to 8


def test_a_broadcast_mask_is_made_dense_before_torch_picks_the_kernel(fused_on_cpu):
    """Under torch.compile transformers' BERT passes a padding mask broadcast with stride 0 along
    keys; CUDA's fused kernels refuse such a mask and torch would take the math path. Where attention
    stays whole, the course hands torch a dense copy: the kernel is kept, the values unchanged."""
    q, k, v, _ = _inputs(2)
    keep = torch.rand(2, 1, q.shape[2], 1) > 0.3
    keep[:, :, 0] = True
    mask = keep.expand(2, 1, q.shape[2], k.shape[2])
    assert mask.stride(-1) == 0
    assert decomp.BEFORE_DISPATCH[torch._C._nn.scaled_dot_product_attention] is decomp.attention_with_dense_mask
    graph = decomp.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), q, k, v, table={})
    targets = _targets([graph])
    assert str(CPU_FLASH) in targets and "aten.clone.default" in targets, targets
    got = decomp.attention_with_dense_mask(q, k, v, mask)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert decomp.attention_with_dense_mask(q, k, v, mask.contiguous()) is NotImplemented  # dense already


FLASH = aten._scaled_dot_product_flash_attention.default


@pytest.fixture
def flash_on_cpu(monkeypatch):
    """CUDA's FlashAttention-2 op (half precision without a mask) has no CPU kernel. Stand in for it
    and its backward with FlashAttention for CPU, which computes the same (output, logsumexp) with
    the same backward, so eager autograd (torch's formula for the CUDA op) and the course both run."""
    lib = torch.library.Library("aten", "IMPL")

    def forward(q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
        out, lse = CPU_FLASH(q, k, v, dropout_p, is_causal, scale=scale)
        state = torch.zeros(2, dtype=torch.uint64), torch.zeros((), dtype=torch.uint64)
        return out, lse, None, None, q.shape[2], k.shape[2], *state, q.new_empty(0)

    def backward(g, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, dropout_p, is_causal, seed, offset, *,
                 scale=None):  # fmt: skip
        assert (cum_q, cum_k, max_q, max_k) == (None, None, q.shape[2], k.shape[2])
        return aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
            g, q, k, v, out, lse, dropout_p, is_causal, scale=scale)  # fmt: skip

    def cudnn(q, k, v, bias, lse, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
        assert bias is None  # (course_lib's trace reaches the op's entry; an eager call reaches this)
        return (*forward(q, k, v, dropout_p, is_causal, scale=scale)[:-1], None)

    lib.impl("_scaled_dot_product_flash_attention", forward, "CPU")
    lib.impl("_scaled_dot_product_flash_attention_backward", backward, "CPU")
    lib.impl("_scaled_dot_product_cudnn_attention", cudnn, "CPU")
    yield
    lib._destroy()


def _flash(q, k, v, is_causal):
    return FLASH(q, k, v, 0.0, is_causal)[0] * 2.0


@pytest.mark.parametrize("seed", range(4))
def test_flash_attention_kept_whole_or_decomposed_matches_eager(flash_on_cpu, monkeypatch, seed):
    """CUDA's half-precision kernel, through the course both ways on random shapes, causal or not:
    kept whole (its backward kernel fed the sequence lengths and Philox state the forward returned)
    and decomposed (bmm, softmax, bmm); forward and gradients match eager autograd."""
    q, k, v, _ = _inputs(seed)
    if seed % 2:
        k, v = k[:, :, : q.shape[2]], v[:, :, : q.shape[2]]  # causal: as long as the queries
    for fused in ({"cpu"}, set()):
        monkeypatch.setattr(decomp.table, "FUSED_ATTENTION", fused)
        record = []
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = ind.compile_with_course_aot(_flash, record=record)(*leaves, bool(seed % 2))
        grad = torch.randn_like(out)
        out.backward(grad)
        ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        ref = _flash(*ref_leaves, bool(seed % 2))
        ref.backward(grad)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        for got, want in zip(leaves, ref_leaves):
            torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)
        code = "\n".join(c.wrapper_code for kind, c in record if kind == "compiled")
        kept = "_scaled_dot_product_flash_attention_backward" in code
        assert kept == bool(fused) and ("bmm" in code) != kept, code


def test_flash_attention_rule_on_meta_tensors():
    """The rule on meta tensors (what CUDA's shapes give): three gradients, none for a forward
    whose output nobody differentiated."""
    q, k = _meta(2, 3, 5, 64).half(), _meta(2, 3, 7, 64).half()
    out = FLASH(q, k, k)
    gq, gk, gv = rules.DERIVATIVES[FLASH]([torch.empty_like(out[0])] + [None] * 8, out, q, k, k)
    assert (gq.shape, gk.shape, gv.shape) == (q.shape, k.shape, k.shape)
    assert rules.DERIVATIVES[FLASH]([None] * 9, out, q, k, k) == (None, None, None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_on_cuda(dtype, causal, monkeypatch, compiled_graphs):
    """Half precision without a mask: torch picks FlashAttention-2, and the course keeps it and its
    backward whole; the same kernels as eager, so the same numbers up to the surrounding ops."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    seen = compiled_graphs
    compat.dynamo_reset()
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=dtype, generator=g) for _ in range(3))

    def f(q, k, v):
        return F.scaled_dot_product_attention(q * 1.5, k, v, is_causal=causal).float().square().sum()

    leaves, ref_leaves = ([t.clone().requires_grad_() for t in (q, k, v)] for _ in range(2))
    torch.compile(f, backend="course_lib")(*leaves).backward()
    f(*ref_leaves).backward()
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad, want.grad, rtol=2e-2, atol=2e-2)
    targets = _targets(seen)
    assert str(FLASH) in targets and "aten._scaled_dot_product_flash_attention_backward.default" in targets


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "vit"])
def test_half_precision_models_on_cuda(name, dtype, monkeypatch, compiled_graphs):
    """A training step in half precision on the GPU: every graph compiled (no fallback), attention
    kept whole (FlashAttention-2 or memory-efficient, whichever torch picked), and the gradients as
    close to the float32 step as eager's are."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    seen = compiled_graphs
    result = real_models.precision(name, dtype, device="cuda")
    assert result.ok(), result
    assert {str(FLASH), str(EFFICIENT)} & _targets(seen)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_mixture_of_experts_in_bf16_on_cuda(monkeypatch):
    """Qwen3-MoE in bf16 on the GPU: transformers masks the grouped_mm result with ``where`` (a generated
    kernel) and splits it into views; the memory planner once recycled the masked buffer while a view
    was live (error 0.90 against eager's 0.017 on the H100)."""
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    result = real_models.precision("qwen3_moe", torch.bfloat16, device="cuda")
    assert result.ok(), result


CUDNN = aten._scaled_dot_product_cudnn_attention.default


@pytest.mark.parametrize("causal", [False, True])
def test_cudnn_attention_runs_as_flash_attention(flash_on_cpu, fused_on_cpu, causal):
    """torch picks cuDNN attention for half precision on an H100; the course keeps FlashAttention-2
    in its place (the same math; its backward rule and layouts are the course's)."""
    q, k, v = (t.to(torch.bfloat16) for t in _inputs(4)[:3])
    k, v = k[:, :, : q.shape[2]], v[:, :, : q.shape[2]]
    record = []
    leaves, ref_leaves = ([t.clone().requires_grad_() for t in (q, k, v)] for _ in range(2))
    out = ind.compile_with_course_aot(lambda q, k, v: CUDNN(q, k, v, None, True, 0.0, causal)[0] * 2.0,
                                      record=record)(*leaves)  # fmt: skip
    grad = torch.randn_like(out)
    out.backward(grad)
    _flash(*ref_leaves, causal).backward(grad)
    for got, want in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad, want.grad, rtol=2e-2, atol=2e-2)
    code = "\n".join(c.wrapper_code for kind, c in record if kind == "compiled")
    assert "_scaled_dot_product_flash_attention_backward" in code and "cudnn" not in code


def test_cudnn_attention_with_a_bias_decomposes_as_efficient_attention():
    """With a bias (flash takes none) the stand-in is memory-efficient attention; on the CPU that
    is decomposed, and matches eager's attention with the same mask."""
    q, k, v, mask = _inputs(1)
    graph = decomp.trace(lambda q, k, v, m: CUDNN(q, k, v, m, True)[0], q, k, v, mask)
    assert "aten.bmm.default" in _targets([graph])
    torch.testing.assert_close(graph(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_cudnn_attention_hands_efficient_attention_a_bias_per_head(monkeypatch):
    """Kept whole (meta tensors standing for CUDA's): cuDNN takes a mask broadcast over heads, the
    efficient kernel one bias of ``[B, H, L, S]`` (torch's ``preprocess_mask``), floats."""
    monkeypatch.setattr(decomp.table, "FUSED_ATTENTION", {"meta"})
    q, k, mask = _meta(2, 3, 5, 8).half(), _meta(2, 3, 7, 8).half(), torch.ones(2, 1, 5, 7, device="meta").bool()
    gm = compat.make_fx(lambda q, k, m: CUDNN(q, k, k, m, True)[0], q, k, mask, decompositions=decomp.DECOMPOSITIONS)
    (call,) = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is EFFICIENT]
    bias = call.args[3].meta["val"]
    assert tuple(bias.shape) == (2, 3, 5, 7) and bias.dtype == torch.float16
    assert bias.stride() == (40, 0, 8, 1), "rows padded to 8 elements, heads broadcast (the kernel's alignment)"
