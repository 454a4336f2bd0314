"""Example inputs for every entry of the decomposition table (used by the tests and the lab).

``SAMPLES[op](gen)`` returns ``(args, kwargs)`` drawn from the torch.Generator ``gen``: fresh
random inputs of a small shape, positive where the op needs it (log, sqrt, logit).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _r(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen, dtype=dtype)


def _pos(gen, *shape):
    return torch.rand(*shape, generator=gen) + 0.1


def _unit(gen, *shape):
    return torch.rand(*shape, generator=gen) * 0.8 + 0.1


def _x(gen):
    return ((_r(gen, 4, 6),), {})


SAMPLES = {
    aten.relu.default: _x, aten.sigmoid.default: _x, aten.silu.default: _x, aten.gelu.default: _x,
    aten.softplus.default: _x, aten.leaky_relu.default: _x, aten.elu.default: _x, aten.hardtanh.default: _x,
    aten.hardsigmoid.default: _x, aten.hardswish.default: _x, aten.mish.default: _x,
    aten.logit.default: lambda g: ((_unit(g, 4, 6),), {}),
    aten._softmax.default: lambda g: ((_r(g, 4, 6), 1, False), {}),
    aten._log_softmax.default: lambda g: ((_r(g, 4, 6), 1, False), {}),
    aten.logsumexp.default: lambda g: ((_r(g, 4, 6), [1]), {}),
    aten.rsub.Scalar: lambda g: ((_r(g, 4, 6), 2.0), {}),
    aten.reciprocal.default: lambda g: ((_pos(g, 4, 6),), {}),
    aten.square.default: _x, aten.abs.default: _x, aten.sign.default: _x,
    aten.clamp.default: lambda g: ((_r(g, 4, 6), -0.5, 0.5), {}),
    aten.clamp.Tensor: lambda g: ((_r(g, 4, 6), _r(g, 6) * 0.3 - 0.5, _r(g, 4, 1) * 0.3 + 0.5), {}),
    aten.clamp_min.default: lambda g: ((_r(g, 4, 6), 0.1), {}),
    aten.clamp_max.default: lambda g: ((_r(g, 4, 6), 0.1), {}),
    aten.expm1.default: _x,
    aten.log1p.default: lambda g: ((_pos(g, 4, 6),), {}),
    aten.log2.default: lambda g: ((_pos(g, 4, 6),), {}),
    aten.exp2.default: _x, aten.sinh.default: _x, aten.cosh.default: _x, aten.tan.default: _x,
    aten.addcmul.default: lambda g: ((_r(g, 4, 6), _r(g, 4, 6), _r(g, 6)), {"value": 0.5}),
    aten.addcdiv.default: lambda g: ((_r(g, 4, 6), _r(g, 4, 6), _pos(g, 4, 6)), {"value": 0.5}),
    aten.lerp.Scalar: lambda g: ((_r(g, 4, 6), _r(g, 4, 6), 0.3), {}),
    aten.lerp.Tensor: lambda g: ((_r(g, 4, 6), _r(g, 4, 6), _r(g, 6)), {}),
    aten.logaddexp.default: lambda g: ((_r(g, 4, 6) * 30, _r(g, 4, 6) * 30), {}),
    aten.clamp_min.Tensor: lambda g: ((_r(g, 4, 6), _r(g, 6) * 0.3), {}),
    aten.clamp_max.Tensor: lambda g: ((_r(g, 4, 6), _r(g, 4, 1) * 0.3), {}),
    aten.hypot.default: lambda g: ((_r(g, 4, 6), _r(g, 4, 6)), {}),
    aten.xlogy.Tensor: lambda g: ((_r(g, 4, 6), _pos(g, 4, 6)), {}),
    aten.tanh_backward.default: lambda g: ((_r(g, 4, 6), torch.tanh(_r(g, 4, 6))), {}),
    aten.sigmoid_backward.default: lambda g: ((_r(g, 4, 6), torch.sigmoid(_r(g, 4, 6))), {}),
    aten.threshold_backward.default: lambda g: ((_r(g, 4, 6), _r(g, 4, 6), 0.0), {}),
    aten.mse_loss.default: lambda g: ((_r(g, 4, 6), _r(g, 4, 6)), {}),
    aten.sum.default: _x,
    aten.mean.dim: lambda g: ((_r(g, 4, 6, 3), [0, 2]), {}),
    aten.mean.default: _x,
    aten.var.correction: lambda g: ((_r(g, 4, 6), [1]), {"correction": 1}),
    aten.amin.default: lambda g: ((_r(g, 4, 6), [1]), {}),
    aten.native_layer_norm.default: lambda g: ((_r(g, 4, 6), [6], _r(g, 6), _r(g, 6), 1e-5), {}),
    aten.t.default: _x,
    aten.transpose.int: lambda g: ((_r(g, 4, 6, 3), 0, 2), {}),
    aten.unsqueeze.default: lambda g: ((_r(g, 4, 6), 1), {}),
    aten.squeeze.dim: lambda g: ((_r(g, 4, 1, 6), 1), {}),
    aten.stack.default: lambda g: (([_r(g, 4, 6), _r(g, 4, 6), _r(g, 4, 6)], -1), {}),
    aten.squeeze.dims: lambda g: ((_r(g, 4, 1, 6, 1), [1, 3]), {}),
    aten._unsafe_view.default: lambda g: ((_r(g, 4, 6), [6, 4]), {}),
    aten.reshape.default: lambda g: ((_r(g, 4, 6).t(), [24]), {}),
    aten.clone.default: _x,
    aten.addmm.default: lambda g: ((_r(g, 5), _r(g, 4, 3), _r(g, 3, 5)), {}),
    aten.mv.default: lambda g: ((_r(g, 4, 3), _r(g, 3)), {}),
    aten.dot.default: lambda g: ((_r(g, 7), _r(g, 7)), {}),
    aten.baddbmm.default: lambda g: ((_r(g, 2, 4, 5), _r(g, 2, 4, 3), _r(g, 2, 3, 5)), {"beta": 0.5, "alpha": 2.0}),
    aten.zeros_like.default: _x, aten.ones_like.default: _x,
    aten.full_like.default: lambda g: ((_r(g, 4, 6), 2.5), {}),
    aten.nll_loss_forward.default: lambda g: ((_r(g, 5, 6), torch.tensor([0, 5, 2, 3, 2]), None, 1, 2), {}),
    aten._scaled_dot_product_flash_attention_for_cpu.default: lambda g: (
        (_r(g, 2, 3, 5, 4), _r(g, 2, 3, 5, 4), _r(g, 2, 3, 5, 4)), {"attn_mask": _r(g, 5, 5)}),
    aten._scaled_dot_product_efficient_attention.default: lambda g: (
        (_r(g, 2, 3, 5, 4), _r(g, 2, 3, 5, 4), _r(g, 2, 3, 5, 4), None, True), {"is_causal": True}),
    aten._scaled_dot_product_flash_attention.default: lambda g: (
        (_r(g, 2, 3, 6, 8), _r(g, 2, 3, 6, 8), _r(g, 2, 3, 6, 8)), {"is_causal": True}),
    aten._scaled_dot_product_cudnn_attention.default: lambda g: (
        (_r(g, 2, 3, 5, 8), _r(g, 2, 3, 7, 8), _r(g, 2, 3, 7, 8), _r(g, 5, 7), True), {}),
}  # fmt: skip


SAMPLES.update({  # the entries of course_lib.decomp.models (ops real models reach after functionalization)
    aten._native_batch_norm_legit_functional.default: lambda g: (
        (_r(g, 4, 3, 5, 5), _r(g, 3), _r(g, 3), _r(g, 3), _pos(g, 3), True, 0.1, 1e-5), {}),
    aten._native_batch_norm_legit.no_stats: lambda g: ((_r(g, 1, 4, 27) * 3 + 1, _r(g, 4), None, True, 0.0, 1e-6), {}),
    aten.div.Scalar: lambda g: ((_r(g, 4, 6), 0.9), {}),
    aten.copy.default: lambda g: ((_r(g, 4, 6), _r(g, 6, dtype=torch.float64)), {}),
    aten.slice_scatter.default: lambda g: ((_r(g, 4, 6), _r(g, 4, 3), 1, 2, 5), {}),
    aten.select_scatter.default: lambda g: ((_r(g, 4, 6), _r(g, 4), 1, -2), {}),
    aten._adaptive_avg_pool2d.default: lambda g: ((_r(g, 2, 3, 5, 4), [1, 1]), {}),
    aten._adaptive_avg_pool3d.default: lambda g: ((_r(g, 2, 3, 4, 5, 3), [1, 1, 1]), {}),
    # nn.Bilinear(5, 4, 3) on a batch of 6: x1 (6, 5), W (3, 5, 4), x2 (6, 4) -> (6, 3)
    aten._trilinear.default: lambda g: ((_r(g, 6, 5), _r(g, 3, 5, 4), _r(g, 6, 4), [1, 3], [0], [1, 2], [2, 3]), {}),
    aten.alias.default: _x,
    aten.repeat.default: lambda g: ((_r(g, 2, 3), [2, 1, 3]), {}),
    aten._safe_softmax.default: lambda g: ((_r(g, 4, 6).masked_fill(torch.arange(6) < 6 * (torch.arange(4) == 1)[:, None], float('-inf')), 1), {}),
    aten.masked_fill.Scalar: lambda g: ((_r(g, 4, 6), _r(g, 4, 1) > 0, float("-inf")), {}),
    aten.as_strided.default: lambda g: ((_r(g, 4, 6, 1), [6, 1, 4], [1, 99, 6]), {}),  # a transpose, written as strides
    aten.index.Tensor: lambda g: ((_r(g, 2, 5, 4, 3), [None, torch.tensor([[-1], [2]]), torch.tensor([0, 3, 1])]), {}),
    aten.native_group_norm.default: lambda g: ((_r(g, 2, 6, 5), _r(g, 6), _r(g, 6), 2, 6, 5, 3, 1e-5), {}),
    aten._weight_norm_interface.default: lambda g: ((_r(g, 4, 3, 5), _r(g, 1, 1, 5), 2), {}),
    aten.index_select.default: lambda g: ((_r(g, 3, 5, 2), 1, torch.tensor([4, 0, 4])), {}),
    aten.flip.default: lambda g: ((_r(g, 3, 5, 2), [0, -1]), {}),
    aten.roll.default: lambda g: ((_r(g, 3, 5, 4), [2, -1], [1, 2]), {}),
    aten.tril.default: lambda g: ((_r(g, 2, 4, 5), 1), {}),
    aten.triu.default: lambda g: ((_r(g, 4, 5), -1), {}),
    aten.cumsum.default: lambda g: ((_r(g, 3, 5, 2), 1), {}),
    aten.std.correction: lambda g: ((_r(g, 4, 6), [1]), {"correction": 1, "keepdim": True}),
    aten.glu.default: lambda g: ((_r(g, 3, 8), -1), {}),
    aten.linalg_vector_norm.default: lambda g: ((_r(g, 3, 5), 2, [-1], True), {}),
    aten.pixel_shuffle.default: lambda g: ((_r(g, 2, 8, 3, 2), 2), {}),
    aten.masked_fill.Tensor: lambda g: ((_r(g, 4, 6), _r(g, 1, 6) > 0, torch.tensor(-2.5, dtype=torch.float64)), {}),
    aten.scatter.value: lambda g: ((_r(g, 3, 5, 4), 1, torch.randint(0, 5, (3, 2, 4), generator=g), float("-inf")), {}),
})  # fmt: skip


def _efficient_attention_on_cpu(q, k, v, bias, compute_lse, dropout_p=0.0, is_causal=False, *, scale=None):
    """The CPU kernel that computes the same (output, logsumexp) as CUDA's efficient attention."""
    return aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, dropout_p, is_causal, attn_mask=bias,
                                                                    scale=scale)  # fmt: skip


def _flash_attention_on_cpu(q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    """The CPU kernel that computes the same (output, logsumexp) as CUDA's FlashAttention-2."""
    return aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, dropout_p, is_causal, scale=scale)


def _cudnn_attention_on_cpu(q, k, v, bias, compute_lse, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
                            scale=None):  # fmt: skip
    """The CPU kernel that computes the same output as CUDA's cuDNN attention."""
    return aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, dropout_p, is_causal, attn_mask=bias,
                                                                    scale=scale)[:1]  # fmt: skip


#: entries whose op has a CUDA kernel only, and the CPU op that computes the same outputs
STAND_IN = {aten._scaled_dot_product_efficient_attention.default: _efficient_attention_on_cpu,
            aten._scaled_dot_product_flash_attention.default: _flash_attention_on_cpu,
            aten._scaled_dot_product_cudnn_attention.default: _cudnn_attention_on_cpu}  # fmt: skip


def eager(op):
    """What to run on the (CPU) samples as an entry's eager reference: the op, or its CPU stand-in."""
    return STAND_IN.get(op, op)
