"""Reference Triton kernels, each with a launcher that checks itself against torch.

Teaches: the block programming model of ``python/triton/language/core.py`` (``tl.program_id``,
``tl.arange``, masked ``tl.load``/``tl.store``, ``tl.dot``, reductions) as used in Triton's own
``python/tutorials`` (01 vector add, 02 fused softmax, 03 matmul, 05 layer norm, 06 fused
attention). One *program* (a CUDA block) handles one tile; every lane of a tile is one element.

The same kernels run in Triton's interpreter on a CPU (tensors on ``"cpu"``, numpy does the
work) and natively on a GPU (tensors on ``"cuda"``). The launchers pick sizes and grids; the
``SIGNATURES`` table gives each kernel's ``compile_stages`` signature.
"""

from __future__ import annotations

import triton
import triton.language as tl

import course_lib  # noqa: F401  (interpreter switch before triton import)

# ----------------------------------------------------------------------------- vector add


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[i] + y[i]; program ``pid`` owns elements [pid*BLOCK, pid*BLOCK+BLOCK)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y, block: int = 1024):
    out = x.new_empty(x.shape)
    n = x.numel()
    add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    return out


# ----------------------------------------------------------------------------- softmax


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    """One program per row; the whole row fits one block (BLOCK >= n_cols). Max, exp, sum, divide
    happen in registers: one read and one write of the row (torch eager does several passes)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride_out + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    """Rows longer than a block: one pass keeps a running max ``m`` and a running sum ``s``
    rescaled by exp(m_old - m_new) (Milakov & Gimelshein 2018), a second pass writes."""
    row = tl.program_id(0)
    m = tl.full([BLOCK], -1e30, tl.float32)  # finite, so m - m_new is never inf - inf
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_row = tl.max(m, axis=0)
    s_row = tl.sum(s * tl.exp(m - m_row), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
        tl.store(out_ptr + row * stride_out + cols, tl.exp(x - m_row) / s_row, mask=mask)


def softmax(x, online: bool = False, block: int | None = None):
    rows, cols = x.shape
    out = x.new_empty(x.shape)
    if online:
        block = block or min(1024, triton.next_power_of_2(cols))
        online_softmax_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), BLOCK=block)
    else:
        softmax_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), BLOCK=block or triton.next_power_of_2(cols))
    return out


# ----------------------------------------------------------------------------- layer norm


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    """y = (x - mean) / sqrt(var + eps) * w + b, one program per row, statistics in fp32."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    y = diff * rstd * w + b
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def layernorm(x, w, b, eps: float = 1e-5):
    rows, cols = x.shape
    out = x.new_empty(x.shape)
    layernorm_kernel[(rows,)](x, w, b, out, cols, x.stride(0), eps, BLOCK=triton.next_power_of_2(cols))
    return out


# ----------------------------------------------------------------------------- matmul


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
    """C = A @ B with BLOCK_M x BLOCK_N tiles, a K loop of tl.dot, grouped ordering, ragged masks.

    Grouped ordering: consecutive program ids walk down GROUP_M tile rows before moving right,
    so programs running together share rows of A and columns of B in L2.
    """
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * num_n)) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_grid(M: int, N: int, block_m: int, block_n: int) -> tuple[int]:
    return (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)


def matmul(a, b, block_m: int = 32, block_n: int = 32, block_k: int = 32, group_m: int = 4, **launch):
    M, K = a.shape
    _, N = b.shape
    c = a.new_empty((M, N))
    matmul_kernel[matmul_grid(M, N, block_m, block_n)](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, **launch)  # fmt: skip
    return c


def program_order(M: int, N: int, block_m: int, block_n: int, group_m: int) -> list[tuple[int, int]]:
    """(pid_m, pid_n) of each program id, computed exactly like :func:`matmul_kernel` does."""
    num_m, num_n = -(-M // block_m), -(-N // block_n)
    out = []
    for pid in range(num_m * num_n):
        group = pid // (group_m * num_n)
        first_m = group * group_m
        size = min(num_m - first_m, group_m)
        out.append((first_m + pid % size, (pid % (group_m * num_n)) // size))
    return out


# ----------------------------------------------------------------------------- attention


@triton.jit
def flash_attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, stride_h, stride_s, scale,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD: tl.constexpr):  # fmt: skip
    """O = softmax(Q K^T * scale) V for one (batch*head, query block), never forming the full
    score matrix: keys/values stream by in BLOCK_N tiles with the online-softmax rescaling.
    Tensors are (batch*heads, seq, HEAD) contiguous; HEAD is a small power of two."""
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD)
    base = bh * stride_h
    q = tl.load(q_ptr + base + rm[:, None] * stride_s + rd[None, :], mask=rm[:, None] < seq, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD], tl.float32)
    for start_n in range(0, seq, BLOCK_N):
        rn = start_n + tl.arange(0, BLOCK_N)
        kv_mask = rn[:, None] < seq
        k = tl.load(k_ptr + base + rn[:, None] * stride_s + rd[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + base + rn[:, None] * stride_s + rd[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(rn[None, :] < seq, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        o_ptr + base + rm[:, None] * stride_s + rd[None, :], out.to(o_ptr.dtype.element_ty), mask=rm[:, None] < seq
    )


def flash_attention(q, k, v, block_m: int = 16, block_n: int = 16, **launch):
    """q, k, v: (batch, heads, seq, head_dim) contiguous. Returns O of the same shape."""
    b, h, s, d = q.shape
    q3, k3, v3 = (t.reshape(b * h, s, d).contiguous() for t in (q, k, v))
    o = q3.new_empty(q3.shape)
    grid = (triton.cdiv(s, block_m), b * h)
    flash_attn_fwd_kernel[grid](q3, k3, v3, o, s, q3.stride(0), q3.stride(1), d**-0.5,
                                BLOCK_M=block_m, BLOCK_N=block_n, HEAD=d, **launch)  # fmt: skip
    return o.reshape(b, h, s, d)


# ----------------------------------------------------------------------------- tables

SIGNATURES = {
    "add": (add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
            {"BLOCK": 1024}),
    "softmax": (softmax_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride_x": "i32",
                                 "stride_out": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}),
    "layernorm": (layernorm_kernel, {"x_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32",
                                     "n_cols": "i32", "stride": "i32", "eps": "fp32", "BLOCK": "constexpr"},
                  {"BLOCK": 1024}),
    "matmul": (matmul_kernel, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32",
                               "K": "i32", "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32",
                               "stride_bn": "i32", "stride_cm": "i32", "stride_cn": "i32",
                               "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr",
                               "GROUP_M": "constexpr"},
               {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}),
    "attention": (flash_attn_fwd_kernel, {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16",
                                          "seq": "i32", "stride_h": "i32", "stride_s": "i32", "scale": "fp32",
                                          "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "HEAD": "constexpr"},
                  {"BLOCK_M": 64, "BLOCK_N": 64, "HEAD": 64}),
}  # fmt: skip


# What @triton.jit would see for contiguous fp16 matrices: unit strides become constants (the JIT
# specialises arguments equal to 1) and, with compile_stages(aligned=True), the other integers and
# the pointers are known to be multiples of 16. Vector loads and cp.async pipelining need both.
SIGNATURES["matmul_contiguous"] = (
    matmul_kernel,
    {**SIGNATURES["matmul"][1], "stride_ak": "constexpr", "stride_bn": "constexpr", "stride_cn": "constexpr"},
    {**SIGNATURES["matmul"][2], "stride_ak": 1, "stride_bn": 1, "stride_cn": 1},
)


def signature(name: str) -> tuple:
    """``(kernel, signature, constexprs)`` of a reference kernel, ready for ``compile_stages``."""
    kernel, sig, consts = SIGNATURES[name]
    return kernel, dict(sig), dict(consts)
