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
from course_lib.aot import rules

aten = torch.ops.aten
CPU_FLASH = aten._scaled_dot_product_flash_attention_for_cpu.default
EFFICIENT = aten._scaled_dot_product_efficient_attention.default


@pytest.fixture
def fused_on_cpu(monkeypatch):
    monkeypatch.setattr(decomp.table, "FUSED_ATTENTION", {"cpu"})


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
def test_real_models_on_cuda_call_the_fused_kernel(name, monkeypatch):
    """On the GPU (the default policy): the models match eager and their compiled graphs call
    memory-efficient attention and its backward, not bmm."""
    from course_lib.aot import real_models

    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")
    seen = []
    compile_graph = ind.compile_fx.__globals__["compile_graph"]

    def spy(gm, *args, **kwargs):
        seen.append(gm.graph)
        return compile_graph(gm, *args, **kwargs)

    monkeypatch.setitem(ind.compile_fx.__globals__, "compile_graph", spy)
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
