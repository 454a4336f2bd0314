"""Triton kernels written in the styles of real code, used to check the course's compiler tools
(tests/test_unseen_kernels.py and tools/check_unseen_kernels.py).

Each entry of ``CASES`` names a kernel, its ``compile_stages`` signature and constexprs, and a
``check`` function that launches it in the interpreter and compares with torch.
"""

from __future__ import annotations

import dataclasses

import course_lib  # noqa: F401  (first: sets TRITON_INTERPRET=1 on a machine without a GPU)

# isort: split
import torch
import triton
import triton.language as tl

from course_lib import compat

libdevice = compat.triton_libdevice()


# ------------------------------------------------------------------ layernorm (fwd, bwd with a lock)
@triton.jit
def ln_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    # rows longer than a block, as Triton's layer-norm tutorial: the pointers moved to the row, then
    # three sweeps over BLOCK_N-wide chunks (sum, squared deviations, normalise and write)
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask) + tl.load(B + cols, mask=mask)
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def ln_bwd_dwdb(DY, X, Mean, Rstd, DW, DB, Lock, stride, N, GROUP: tl.constexpr, BLOCK_N: tl.constexpr):
    # each row adds its partial dW/dB into one of GROUP buffers, guarded by a spin lock
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0.0)
    xhat = (x - tl.load(Mean + row)) * tl.load(Rstd + row)
    g = row % GROUP
    lock = Lock + g
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    dw = tl.load(DW + g * N + cols, mask=mask) + dy * xhat
    db = tl.load(DB + g * N + cols, mask=mask) + dy
    tl.store(DW + g * N + cols, dw, mask=mask)
    tl.store(DB + g * N + cols, db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(lock, 0)


# ------------------------------------------------------------------ dropout (philox)
@triton.jit
def dropout(X, Out, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(Out + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


# ------------------------------------------------------------------ softmax: several rows per program
@triton.jit
def softmax_rows(X, Y, n_rows, n_cols, stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x = tl.load(X + rows * stride + cols, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=1)[:, None]
    e = tl.exp2(z * 1.4426950408889634)
    tl.store(Y + rows * stride + cols, e / tl.sum(e, axis=1)[:, None], mask=mask)


@triton.jit
def softmax_tiled(X, Y, n_rows, n_cols, stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # ROWS rows a program, a [ROWS, BLOCK] tile at a time: a max pass, then a pass that writes the
    # unnormalised exponentials and sums them, then a pass that rescales Y in place (no running max)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows[:, None] < n_rows
    peak = tl.full([ROWS], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        tile = tl.load(X + rows[:, None] * stride + cols[None, :], mask=row_ok & (cols[None, :] < n_cols),
                       other=-float("inf"))  # fmt: skip
        peak = tl.maximum(peak, tl.max(tile, axis=1))
    total = tl.zeros([ROWS], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = row_ok & (cols[None, :] < n_cols)
        tile = tl.load(X + rows[:, None] * stride + cols[None, :], mask=inside, other=0.0)
        e = tl.where(inside, tl.exp(tile - peak[:, None]), 0.0)
        total += tl.sum(e, axis=1)
        tl.store(Y + rows[:, None] * stride + cols[None, :], e, mask=inside)
    scale = 1.0 / tl.where(rows < n_rows, total, 1.0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = row_ok & (cols[None, :] < n_cols)
        ptrs = Y + rows[:, None] * stride + cols[None, :]
        tl.store(ptrs, tl.load(ptrs, mask=inside) * scale[:, None], mask=inside)


# ------------------------------------------------------------------ grouped GEMM with pointer arrays
@triton.jit
def grouped_gemm(A_ptrs, B_ptrs, C_ptrs, Ms, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    g = tl.program_id(1)
    a_ptr = tl.load(A_ptrs + g).to(tl.pointer_type(tl.float16))
    b_ptr = tl.load(B_ptrs + g).to(tl.pointer_type(tl.float16))
    c_ptr = tl.load(C_ptrs + g).to(tl.pointer_type(tl.float32))
    M = tl.load(Ms + g)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K))
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N))
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


# ------------------------------------------------------------------ casts
@triton.jit
def casts(X, O16, OBF, O8, OI8, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(O16 + offs, x.to(tl.float16), mask=mask)
    tl.store(OBF + offs, x.to(tl.bfloat16), mask=mask)
    tl.store(O8 + offs, x.to(tl.float8e4nv).to(tl.float32), mask=mask)
    q = tl.minimum(tl.maximum(x * 16.0, -128.0), 127.0)
    tl.store(OI8 + offs, q.to(tl.int8), mask=mask)


# ------------------------------------------------------------------ libdevice math, where, maximum
@triton.jit
def gelu_tanh(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1 + libdevice.tanh(inner))
    y = tl.where(x > -10.0, y, 0.0)
    tl.store(Y + offs, tl.maximum(y, libdevice.erf(x) * 0.0 - 1e30), mask=offs < n)


# ------------------------------------------------------------------ scans and custom reductions
@triton.jit
def _argmax_combine(v1, i1, v2, i2):
    pick = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(pick, v1, v2), tl.where(pick, i1, i2)


@triton.jit
def cumsum_argmax(X, S, AM, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * n + cols, mask=cols < n, other=0.0)
    tl.store(S + row * n + cols, tl.cumsum(x, axis=0), mask=cols < n)
    xv = tl.where(cols < n, x, -float("inf"))
    _, idx = tl.reduce((xv, cols), 0, _argmax_combine)
    tl.store(AM + row, idx)


@triton.jit
def histogram(X, H, n, BINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)  # n is a multiple of BLOCK
    h = tl.histogram(x, BINS)
    tl.atomic_add(H + tl.arange(0, BINS), h)


# ------------------------------------------------------------------ 3-D grid, runtime strides
@triton.jit
def add3d(X, Y, Out, sx0, sx1, sx2, D0, D1, D2, B1: tl.constexpr, B2: tl.constexpr):
    i0 = tl.program_id(0)
    i1 = tl.program_id(1) * B1 + tl.arange(0, B1)[:, None]
    i2 = tl.program_id(2) * B2 + tl.arange(0, B2)[None, :]
    mask = (i1 < D1) & (i2 < D2)  # the grid's dim 0 is exactly D0
    off = i0 * sx0 + i1 * sx1 + i2 * sx2
    tl.store(Out + off, tl.load(X + off, mask=mask) + tl.load(Y + off, mask=mask), mask=mask)


@triton.jit
def transpose_const(X, Y, M, N, SXM: tl.constexpr, SYM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(X + rm[:, None] * SXM + rn[None, :], mask=mask)
    tl.store(Y + rn[None, :] * SYM + rm[:, None], x, mask=mask)


# ------------------------------------------------------------------ pipelined matmul (num_stages)
@triton.jit
def matmul_k_loop(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in tl.range(0, K, BK, num_stages=3):
        a = tl.load(A + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(B + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


# ------------------------------------------------------------------ atomics: sum of rows
@triton.jit
def row_sum_atomic(X, Out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.atomic_add(Out + row, tl.sum(x, axis=0))


# ------------------------------------------------------------------ heuristics / autotune
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_heur(X, Y, n, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(X + offs)
    else:
        x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, x * alpha, mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])  # fmt: skip
@triton.jit
def relu_tuned(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, tl.maximum(x, 0.0), mask=offs < n)


# ------------------------------------------------------------------ the table
@dataclasses.dataclass
class Case:
    name: str
    kernel: object
    signature: dict
    constexprs: dict
    check: object  # () -> None, raises AssertionError on a mismatch
    num_warps: int = 4
    targets: tuple = ("sm_90", "sm_80")
    sim: object = None  # (run) -> None: runs the PTX on course_lib.gpu.ptx_exec and checks it


def _run(ptx: str, grid, args, warps: int = 4):
    from course_lib.gpu import ptx_exec

    return ptx_exec.run_ptx(ptx, None, grid, (32 * warps,), args).outputs


def _ln_check():
    M, N = 6, 50
    x, w, b = torch.randn(M, N), torch.randn(N), torch.randn(N)
    y, mean, rstd = torch.empty_like(x), torch.empty(M), torch.empty(M)
    ln_fwd[(M,)](x, y, w, b, mean, rstd, N, N, 1e-5, BLOCK_N=16)  # four chunks, the last one partial
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5), atol=1e-4, rtol=1e-4)
    dy = torch.randn(M, N)
    dw, db, lock = torch.zeros(2, N), torch.zeros(2, N), torch.zeros(2, dtype=torch.int32)
    ln_bwd_dwdb[(M,)](dy, x, mean, rstd, dw, db, lock, N, N, GROUP=2, BLOCK_N=64)
    xhat = (x - mean[:, None]) * rstd[:, None]
    torch.testing.assert_close(dw.sum(0), (dy * xhat).sum(0), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(db.sum(0), dy.sum(0), atol=1e-4, rtol=1e-4)


def _dropout_check():
    x = torch.randn(300)
    out = torch.empty_like(x)
    dropout[(3,)](x, out, 300, 0.25, 123, BLOCK=128)
    kept = out != 0
    assert 0.6 < kept.float().mean() < 0.9
    torch.testing.assert_close(out[kept], x[kept] / 0.75)


def _softmax_check():
    x = torch.randn(10, 37)
    y = torch.empty_like(x)
    softmax_rows[(3,)](x, y, 10, 37, 37, ROWS=4, BLOCK=64)
    torch.testing.assert_close(y, torch.softmax(x, 1), atol=1e-5, rtol=1e-5)
    y2 = torch.empty_like(x)
    softmax_tiled[(4,)](x, y2, 10, 37, 37, ROWS=4, BLOCK=16)  # 3 programs have rows, the 4th none
    torch.testing.assert_close(y2, torch.softmax(x, 1), atol=1e-5, rtol=1e-5)


def _grouped_check():
    Ms, N, K = [20, 7], 16, 32
    As = [torch.randn(m, K).half() for m in Ms]
    B = [torch.randn(K, N).half() for _ in Ms]
    Cs = [torch.empty(m, N) for m in Ms]
    ptr = lambda ts: torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)  # noqa: E731
    grouped_gemm[(2, 2)](ptr(As), ptr(B), ptr(Cs), torch.tensor(Ms, dtype=torch.int32), N, K, BM=16, BN=16, BK=16)
    for a, b, c in zip(As, B, Cs):
        torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def _casts_check():
    x = torch.randn(100) * 4
    o16, obf, o8, oi8 = torch.empty(100).half(), torch.empty(100).bfloat16(), torch.empty(100), torch.empty(100).char()
    casts[(1,)](x, o16, obf, o8, oi8, 100, BLOCK=128)
    assert torch.equal(o16, x.half())
    # the interpreter rounds bf16 and fp8 by truncation; the GPU rounds to nearest (1 ulp apart)
    torch.testing.assert_close(obf.float(), x.bfloat16().float(), atol=0, rtol=2**-7)
    # triton 3.9's interpreter also loses the carry when fp8 rounding crosses a power of two
    # (-1.97 -> -1.0, where the GPU gives -2.0): those lanes are the only ones allowed to differ
    ref8 = x.to(torch.float8_e4m3fn).float()
    off = ~torch.isclose(o8, ref8, atol=2**-6, rtol=2**-3)
    assert torch.all(ref8[off].abs() == 2 ** ref8[off].abs().log2().round()), (x[off], o8[off])
    assert torch.equal(oi8, (x * 16).clamp(-128, 127).to(torch.int8))


def _gelu_check():
    # Triton's interpreter has no libdevice (extern_elementwise): the launch must fail, and say so
    x = torch.randn(200)
    y = torch.empty_like(x)
    try:
        gelu_tanh[(2,)](x, y, 200, BLOCK=128)
    except Exception as exc:  # noqa: BLE001
        assert "extern" in str(exc) or "None" in str(exc), exc
    else:
        torch.testing.assert_close(y, torch.nn.functional.gelu(x, approximate="tanh"), atol=1e-5, rtol=1e-5)


def _scan_check():
    x = torch.randn(3, 20)
    s, am = torch.empty_like(x), torch.empty(3, dtype=torch.int32)
    cumsum_argmax[(3,)](x, s, am, 20, BLOCK=32)
    torch.testing.assert_close(s, x.cumsum(1), atol=1e-5, rtol=1e-5)
    assert am.tolist() == x.argmax(1).tolist()


def _hist_check():
    x = torch.randint(0, 8, (256,), dtype=torch.int32)
    h = torch.zeros(8, dtype=torch.int32)
    histogram[(4,)](x, h, 256, BINS=8, BLOCK=64)
    assert h.tolist() == torch.bincount(x, minlength=8).tolist()


def _add3d_check():
    x, y = torch.randn(2, 5, 9), torch.randn(2, 5, 9)
    out = torch.empty_like(x)
    add3d[(2, 2, 2)](x, y, out, *x.stride(), 2, 5, 9, B1=4, B2=8)
    assert torch.equal(out, x + y)


def _transpose_check():
    x = torch.randn(16, 32)
    y = torch.empty(32, 16)
    transpose_const[(2, 2)](x, y, 16, 32, SXM=32, SYM=16, BM=8, BN=16)
    assert torch.equal(y, x.t())


def _matmul_check():
    a, b = torch.randn(32, 64).half(), torch.randn(64, 32).half()
    c = torch.empty(32, 32).half()
    matmul_k_loop[(2, 2)](a, b, c, 32, 32, 64, BM=16, BN=16, BK=16)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=2e-2)


def _rowsum_check():
    x = torch.randn(4, 100)
    out = torch.zeros(4)
    row_sum_atomic[(4, 4)](x, out, 100, BLOCK=32)
    torch.testing.assert_close(out, x.sum(1), atol=1e-4, rtol=1e-4)


def _heur_check():
    for n in (128, 100):
        x = torch.randn(n)
        y = torch.empty_like(x)
        scale_heur[(2,)](x, y, n, 3.0, BLOCK=64)
        torch.testing.assert_close(y, x * 3.0)


def _tuned_check():
    x = torch.randn(300)
    y = torch.empty_like(x)
    for cfg in relu_tuned.configs:  # the interpreter cannot time configs (no driver): launch each one
        y.zero_()
        relu_tuned.fn[(triton.cdiv(300, cfg.kwargs["BLOCK"]),)](x, y, 300, **cfg.kwargs)
        assert torch.equal(y, x.relu())


F32, I32 = "*fp32", "i32"
CASES = [
    Case(
        "ln_fwd",
        ln_fwd,
        dict(X=F32, Y=F32, W=F32, B=F32, Mean=F32, Rstd=F32, stride=I32, N=I32, eps="fp32", BLOCK_N="constexpr"),
        {"BLOCK_N": 32},  # the simulator's rows of 50: two chunks
        _ln_check,
    ),  # fmt: skip
    Case(
        "ln_bwd_dwdb",
        ln_bwd_dwdb,
        dict(
            DY=F32,
            X=F32,
            Mean=F32,
            Rstd=F32,
            DW=F32,
            DB=F32,
            Lock="*i32",
            stride=I32,
            N=I32,
            GROUP="constexpr",
            BLOCK_N="constexpr",
        ),
        {"GROUP": 2, "BLOCK_N": 64},
        _ln_check,
    ),  # fmt: skip
    Case(
        "dropout",
        dropout,
        dict(X=F32, Out=F32, n=I32, p="fp32", seed=I32, BLOCK="constexpr"),
        {"BLOCK": 128},
        _dropout_check,
    ),
    Case(
        "softmax_rows",
        softmax_rows,
        dict(X=F32, Y=F32, n_rows=I32, n_cols=I32, stride=I32, ROWS="constexpr", BLOCK="constexpr"),
        {"ROWS": 4, "BLOCK": 64},
        _softmax_check,
    ),  # fmt: skip
    Case(
        "softmax_tiled",
        softmax_tiled,
        dict(X=F32, Y=F32, n_rows=I32, n_cols=I32, stride=I32, ROWS="constexpr", BLOCK="constexpr"),
        {"ROWS": 2, "BLOCK": 128},
        _softmax_check,
    ),
    Case(
        "grouped_gemm",
        grouped_gemm,
        dict(
            A_ptrs="*i64",
            B_ptrs="*i64",
            C_ptrs="*i64",
            Ms="*i32",
            N=I32,
            K=I32,
            BM="constexpr",
            BN="constexpr",
            BK="constexpr",
        ),
        {"BM": 64, "BN": 64, "BK": 32},
        _grouped_check,
    ),  # fmt: skip
    Case(
        "casts",
        casts,
        dict(X=F32, O16="*fp16", OBF="*bf16", O8=F32, OI8="*i8", n=I32, BLOCK="constexpr"),
        {"BLOCK": 256},
        _casts_check,
    ),
    Case("gelu_tanh", gelu_tanh, dict(X=F32, Y=F32, n=I32, BLOCK="constexpr"), {"BLOCK": 256}, _gelu_check),
    Case(
        "cumsum_argmax",
        cumsum_argmax,
        dict(X=F32, S=F32, AM="*i32", n=I32, BLOCK="constexpr"),
        {"BLOCK": 32},
        _scan_check,
    ),
    Case(
        "histogram",
        histogram,
        dict(X="*i32", H="*i32", n=I32, BINS="constexpr", BLOCK="constexpr"),
        {"BINS": 8, "BLOCK": 64},
        _hist_check,
    ),
    Case(
        "add3d",
        add3d,
        dict(X=F32, Y=F32, Out=F32, sx0=I32, sx1=I32, sx2=I32, D0=I32, D1=I32, D2=I32, B1="constexpr", B2="constexpr"),
        {"B1": 4, "B2": 32},
        _add3d_check,
    ),  # fmt: skip
    Case(
        "transpose_const",
        transpose_const,
        dict(X=F32, Y=F32, M=I32, N=I32, SXM="constexpr", SYM="constexpr", BM="constexpr", BN="constexpr"),
        {"SXM": 1024, "SYM": 1024, "BM": 32, "BN": 32},
        _transpose_check,
    ),  # fmt: skip
    Case(
        "matmul_k_loop",
        matmul_k_loop,
        dict(A="*fp16", B="*fp16", C="*fp16", M=I32, N=I32, K=I32, BM="constexpr", BN="constexpr", BK="constexpr"),
        {"BM": 64, "BN": 64, "BK": 32},
        _matmul_check,
    ),  # fmt: skip
    Case(
        "row_sum_atomic",
        row_sum_atomic,
        dict(X=F32, Out=F32, n_cols=I32, BLOCK="constexpr"),
        {"BLOCK": 128},
        _rowsum_check,
    ),
    Case(
        "scale_heur",
        scale_heur,
        dict(X=F32, Y=F32, n=I32, alpha="fp32", BLOCK="constexpr", EVEN="constexpr"),
        {"BLOCK": 128, "EVEN": False},
        _heur_check,
    ),
    Case("relu_tuned", relu_tuned, dict(X=F32, Y=F32, n=I32, BLOCK="constexpr"), {"BLOCK": 128}, _tuned_check),
]


# ------------------------------------------------------------------ PTX simulator checks
def _ln_sim(ptx):
    M, N = 3, 50
    x, w, b = torch.randn(M, N), torch.randn(N), torch.randn(N)
    out = _run(ptx, (M,), [x, torch.zeros(M, N), w, b, torch.zeros(M), torch.zeros(M), N, N, 1e-5])
    torch.testing.assert_close(out[1], torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5), atol=1e-4, rtol=1e-4)


def _ln_bwd_sim(ptx):
    M, N = 4, 50
    dy, x = torch.randn(M, N), torch.randn(M, N)
    mean, rstd = x.mean(1), 1 / x.std(1, unbiased=False)
    out = _run(ptx, (M,), [dy, x, mean, rstd, torch.zeros(2, N), torch.zeros(2, N), torch.zeros(2, dtype=torch.int32),
                           N, N])  # fmt: skip
    torch.testing.assert_close(out[4].sum(0), (dy * (x - mean[:, None]) * rstd[:, None]).sum(0), atol=1e-4, rtol=1e-4)
    assert out[6].tolist() == [0, 0]


def _dropout_sim(ptx):
    x = torch.randn(300)
    ref = torch.empty_like(x)
    dropout[(3,)](x, ref, 300, 0.25, 123, BLOCK=128)  # philox in the interpreter: the same bits
    out = _run(ptx, (3,), [x, torch.zeros(300), 300, 0.25, 123])
    torch.testing.assert_close(out[1], ref)


def _softmax_rows_sim(ptx):
    x = torch.randn(10, 37)
    out = _run(ptx, (3,), [x, torch.zeros(10, 37), 10, 37, 37])
    torch.testing.assert_close(out[1], torch.softmax(x, 1), atol=1e-5, rtol=1e-5)


def _softmax_tiled_sim(ptx):
    x = torch.randn(3, 300)  # ROWS = 2: the second program's second row is masked off
    out = _run(ptx, (2,), [x, torch.zeros(3, 300), 3, 300, 300])
    torch.testing.assert_close(out[1], torch.softmax(x, 1), atol=1e-5, rtol=1e-5)


def _gelu_sim(ptx):
    x = torch.randn(300)
    out = _run(ptx, (2,), [x, torch.zeros(300), 300])
    torch.testing.assert_close(out[1], torch.nn.functional.gelu(x, approximate="tanh"), atol=1e-5, rtol=1e-5)


def _scan_sim(ptx):
    x = torch.randn(3, 20)
    out = _run(ptx, (3,), [x, torch.zeros(3, 20), torch.zeros(3, dtype=torch.int32), 20])
    torch.testing.assert_close(out[1], x.cumsum(1), atol=1e-5, rtol=1e-5)
    assert out[2].tolist() == x.argmax(1).tolist()


def _hist_sim(ptx):
    x = torch.randint(0, 8, (128,), dtype=torch.int32)
    out = _run(ptx, (2,), [x, torch.zeros(8, dtype=torch.int32), 128])
    assert out[1].tolist() == torch.bincount(x, minlength=8).tolist()


def _add3d_sim(ptx):
    x, y = torch.randn(2, 5, 9), torch.randn(2, 5, 9)
    out = _run(ptx, (2, 2, 1), [x, y, torch.zeros(2, 5, 9), *x.stride(), 2, 5, 9])
    assert torch.equal(out[2], x + y)


def _transpose_sim(ptx):
    x = torch.randn(40, 1024)  # SXM = SYM = 1024 are constexprs
    out = _run(ptx, (2, 1), [x, torch.zeros(1024, 1024), 40, 20])
    assert torch.equal(out[1][:20, :40], x[:40, :20].t())


def _rowsum_sim(ptx):
    x = torch.randn(4, 300)
    out = _run(ptx, (4, 3), [x, torch.zeros(4), 300])
    torch.testing.assert_close(out[1], x.sum(1), atol=1e-4, rtol=1e-4)


def _scale_sim(ptx):
    x = torch.randn(200)
    out = _run(ptx, (2,), [x, torch.zeros(200), 200, 3.0])
    torch.testing.assert_close(out[1], x * 3.0)


def _relu_sim(ptx):
    x = torch.randn(200)
    out = _run(ptx, (2,), [x, torch.zeros(200), 200])
    assert torch.equal(out[1], x.relu())


def _expect_tensor_core(run):
    """Tensor-core instructions are shown, not run: the simulator must say which one and where."""
    from course_lib.gpu import ptx_exec

    try:
        run()
    except ptx_exec.UnsupportedInstruction as exc:
        assert exc.instr.op in ("mma", "wgmma", "ldmatrix", "cp", "cvt"), exc
    else:
        raise AssertionError("a tensor-core kernel ran to the end on the simulator")


def _grouped_sim(ptx):
    from course_lib.gpu import memory

    Ms, N, K = [20, 7], 64, 32
    mats = [torch.randn(m, K).half() for m in Ms] + [torch.randn(K, N).half() for _ in Ms]
    mats += [torch.zeros(m, N) for m in Ms]
    heads = [torch.zeros(2, dtype=torch.int64) for _ in range(3)] + [torch.tensor(Ms, dtype=torch.int32)]
    # the pointer arrays hold the simulator's addresses of the matrices (buffers are laid out in argument order)
    layout = memory.GlobalMemory({f"arg{i}": t.numpy() for i, t in enumerate(heads + [0, 0] + mats)
                                  if isinstance(t, torch.Tensor)})  # fmt: skip
    addr = {b.name: b.address for b in layout.buffers}
    for g in range(3):
        heads[g] = torch.tensor([addr[f"arg{6 + 2 * g}"], addr[f"arg{7 + 2 * g}"]], dtype=torch.int64)
    _expect_tensor_core(lambda: _run(ptx, (1, 2), heads + [N, K] + mats))


def _matmul_sim(ptx):
    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    _expect_tensor_core(lambda: _run(ptx, (1, 1), [a, b, torch.zeros(64, 64).half(), 64, 64, 64]))


def _casts_sim(ptx):
    from course_lib.gpu import ptx_exec

    x = torch.randn(64)
    outs = [torch.zeros(64).half(), torch.zeros(64).bfloat16(), torch.zeros(64), torch.zeros(64).char()]
    try:
        _run(ptx, (1,), [x, *outs, 64])
    except ptx_exec.UnsupportedInstruction as exc:
        assert "e4m3" in str(exc) and f"PTX line {exc.instr.line}" in str(exc), exc
    else:
        raise AssertionError("fp8 conversion ran on the simulator, which does not model it")


SIMS = {"grouped_gemm": _grouped_sim, "matmul_k_loop": _matmul_sim, "casts": _casts_sim, "ln_fwd": _ln_sim, "ln_bwd_dwdb": _ln_bwd_sim, "dropout": _dropout_sim, "softmax_rows": _softmax_rows_sim,
        "softmax_tiled": _softmax_tiled_sim, "gelu_tanh": _gelu_sim, "cumsum_argmax": _scan_sim,
        "histogram": _hist_sim, "add3d": _add3d_sim, "transpose_const": _transpose_sim,
        "row_sum_atomic": _rowsum_sim, "scale_heur": _scale_sim, "relu_tuned": _relu_sim}  # fmt: skip
for _c in CASES:
    _c.sim = SIMS.get(_c.name)
    if _c.name == "casts":
        _c.targets = ("sm_90",)  # Triton rejects fp8e4nv below sm_89 ("type fp8e4nv not supported")


def sweep(names=()) -> list[tuple]:
    """Every case through every course view, for each target: one row per (kernel, target).

    ``.venv/bin/python tests/unseen_kernels.py [name ...]`` prints the table (about a minute cold).
    """
    from course_lib.gpu import ptx as P
    from course_lib.triton import compile_stages, instruction_mix, layouts, sourcemap

    rows = []
    for c in CASES:
        if names and c.name not in names:
            continue
        c.check()  # the interpreter against torch
        for target in c.targets:
            s = compile_stages(c.kernel, c.signature, c.constexprs, target=target, num_warps=c.num_warps)
            mapped = [p for _, p in sourcemap.line_map(s, "ptx") if p is not None]
            lo, hi = s.first_line, s.first_line + len(s.source.splitlines())
            assert all(lo <= p < hi for p in mapped), (c.name, target)
            sim = "-"
            if c.sim is not None:
                c.sim(s.raw["ptx"])
                sim = "ok"
            rows.append((c.name, target, s.metadata["registers"], len(P.parse_ptx(s.raw["ptx"]).instrs), len(mapped),
                         len(layouts.parse_blocked(s["ttgir"])), sum(instruction_mix(s["sass"]).values()), sim))  # fmt: skip
    return rows


if __name__ == "__main__":
    import sys

    print(f"{'kernel':16s} {'target':6s} {'regs':>4s} {'ptx':>5s} {'mapped':>6s} {'blocked':>7s} {'sass':>5s} sim")
    for row in sweep(sys.argv[1:]):
        print(f"{row[0]:16s} {row[1]:6s} {row[2]:4d} {row[3]:5d} {row[4]:6d} {row[5]:7d} {row[6]:5d} {row[7]}")
