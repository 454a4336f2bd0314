"""Flash attention's IO argument: bytes moved through HBM, with and without the N x N matrix.

Teaches: why a fused attention kernel is fast. Attention written as three kernels (S = Q K^T,
P = softmax(S), O = P V) writes the N x N score matrix S to HBM, reads it back for the softmax,
writes P and reads it again for the second matmul: 4 N^2 elements per head on top of the
4 N d of Q, K, V and O. A fused kernel keeps each block of S in registers and shared memory and
touches HBM only for Q, K, V and O, which the online softmax makes possible: the row maximum and
the row sum are updated block by block, and the partial output is rescaled when the maximum grows.

Real counterparts: the course's Triton kernel in Module 3 (``course_lib/triton/kernels.py``,
``flash_attention``), Triton's ``python/tutorials/06-fused-attention.py`` and PyTorch's
``scaled_dot_product_attention`` (``aten/src/ATen/native/transformers/cuda/``), which picks a
flash kernel for fp16/bf16 inputs on sm_80 and later. The idea is from Dao et al., "FlashAttention:
fast and memory-efficient exact attention with IO-awareness", NeurIPS 2022.
"""

from __future__ import annotations

import numpy as np

from course_lib.gpu.hierarchy import KernelCost


def _check_shape(b: int, h: int, n: int, d: int, elem_bytes: int) -> None:
    for name, value in (("batch", b), ("heads", h), ("seq_len", n), ("head_dim", d), ("elem_bytes", elem_bytes)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def attention_flops(b: int, h: int, n: int, d: int) -> int:
    """Two matmuls of 2 N^2 d FLOPs per head (the softmax's ~5 N^2 is small beside them for d >= 64)."""
    return 4 * b * h * n * n * d


def naive_attention_bytes(b: int, h: int, n: int, d: int, elem_bytes: int = 2) -> int:
    """HBM bytes of three separate kernels, per head:

    ========================  =====================
    kernel                    reads / writes
    ========================  =====================
    S = Q K^T                 read Q, K (2 N d); write S (N^2)
    P = softmax(S)            read S (N^2); write P (N^2)
    O = P V                   read P (N^2), V (N d); write O (N d)
    ========================  =====================
    """
    _check_shape(b, h, n, d, elem_bytes)
    return b * h * (4 * n * d + 4 * n * n) * elem_bytes


def flash_attention_bytes(b: int, h: int, n: int, d: int, elem_bytes: int = 2) -> int:
    """HBM bytes of a fused kernel, per head: read Q, K, V and write O once (4 N d).

    The blocks of K and V that several query blocks re-read come from L2 on a GPU whose L2 holds
    them (a head's K and V at N=4096, d=64, fp16 are 1 MiB); this is the ideal the roofline uses.
    """
    _check_shape(b, h, n, d, elem_bytes)
    return b * h * 4 * n * d * elem_bytes


def attention_costs(b: int, h: int, n: int, d: int, elem_bytes: int = 2) -> list[KernelCost]:
    """The two implementations as roofline points."""
    flops = attention_flops(b, h, n, d)
    shape = f"B={b} H={h} N={n} d={d}"
    return [KernelCost(f"naive attention, S through HBM ({shape})", flops, naive_attention_bytes(b, h, n, d, elem_bytes)),
            KernelCost(f"flash attention ({shape})", flops, flash_attention_bytes(b, h, n, d, elem_bytes))]  # fmt: skip


def online_softmax_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, block: int = 64) -> np.ndarray:
    """Attention for one head, visiting K and V ``block`` rows at a time, never holding all of S.

    For each new block of scores s: m_new = max(m, max s); the old sum and output were computed
    against m, so scale them by exp(m - m_new) before adding exp(s - m_new) and its product with V.
    """
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if q.ndim != 2 or k.shape != v.shape or k.ndim != 2 or q.shape[1] != k.shape[1]:
        raise ValueError(f"expected q (N, d), k and v (M, d); got {q.shape}, {k.shape}, {v.shape}")
    scale = 1.0 / np.sqrt(q.shape[1])
    m = np.full(q.shape[0], -np.inf)  # running row maximum
    l = np.zeros(q.shape[0])  # running row sum of exp(s - m)  # noqa: E741
    acc = np.zeros((q.shape[0], v.shape[1]))  # running sum of exp(s - m) @ V
    for start in range(0, k.shape[0], block):
        s = (q @ k[start : start + block].T) * scale
        m_new = np.maximum(m, s.max(axis=1))
        correction = np.exp(m - m_new)
        p = np.exp(s - m_new[:, None])
        l = l * correction + p.sum(axis=1)  # noqa: E741
        acc = acc * correction[:, None] + p @ v[start : start + block]
        m = m_new
    return acc / l[:, None]
