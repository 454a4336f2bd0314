"""Regenerate the reference PTX of Module 5 (no GPU needed).

Usage: python data/gpu/ptx/generate_ptx.py OUT_DIR [NAME ...]
Run without TRITON_INTERPRET (course_lib sets it on CPU machines, so this script does not import course_lib).
"""
import os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton, triton.language as tl
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)

@triton.jit
def fused_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    z = x.to(tl.float32) * 2.0 + y
    out = z * tl.sigmoid(z)
    out = tl.where(z > 0, out, 0.5 * out)
    tl.store(out_ptr + offs, out, mask=mask)

@triton.jit
def softmax_kernel(x_ptr, out_ptr, stride, ncols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < ncols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    s = tl.sum(e, axis=0)
    tl.store(out_ptr + row * stride + cols, e / s, mask=mask)

@triton.jit
def softmax_looped_kernel(x_ptr, out_ptr, stride, ncols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for start in range(0, ncols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(base + cols, mask=cols < ncols, other=-float("inf")))
    mx = tl.max(m, axis=0)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, ncols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s += tl.exp(tl.load(base + cols, mask=cols < ncols, other=-float("inf")) - mx)
    total = tl.sum(s, axis=0)
    for start in range(0, ncols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < ncols, other=0.0)
        tl.store(out_ptr + row * stride + cols, tl.exp(x - mx) / total, mask=cols < ncols)

@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, stride, ncols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < ncols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / ncols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / ncols
    y = d * tl.rsqrt(var + eps) * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
    tl.store(out_ptr + row * stride + cols, y, mask=mask)


@triton.jit
def bias_add_kernel(x_ptr, b_ptr, out_ptr, n, ncols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % ncols
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + col, mask=mask), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0); pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM); rn = pn * BN + tl.arange(0, BN); rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

def comp(fn, sig, consts, cap=90, div=(), **opts):
    attrs = {(i,): [["tt.divisibility", 16]] for i in div}
    src = ASTSource(fn, signature=sig, constexprs=consts, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=opts or None)
    return k


import json
outdir = sys.argv[1]
P3 = {"x_ptr":"*fp32","y_ptr":"*fp32","out_ptr":"*fp32","n":"i32","BLOCK":"constexpr"}
jobs = {
 "vector_add": (add_kernel, P3, {"BLOCK":256}, 90, (0,1,2,3), dict(num_warps=2)),
 "vector_add_unaligned": (add_kernel, P3, {"BLOCK":256}, 90, (), dict(num_warps=2)),
 "fused_pointwise": (fused_kernel, {"x_ptr":"*fp16","y_ptr":"*fp32","out_ptr":"*fp32","n":"i32","BLOCK":"constexpr"}, {"BLOCK":256}, 90, (0,1,2,3), dict(num_warps=2)),
 "row_softmax": (softmax_kernel, {"x_ptr":"*fp32","out_ptr":"*fp32","stride":"i32","ncols":"i32","BLOCK":"constexpr"}, {"BLOCK":256}, 90, (0,1,2), dict(num_warps=2)),
 "layer_norm": (layernorm_kernel, {"x_ptr":"*fp32","w_ptr":"*fp32","b_ptr":"*fp32","out_ptr":"*fp32","stride":"i32","ncols":"i32","eps":"fp32","BLOCK":"constexpr"}, {"BLOCK":128}, 90, (0,1,2,3), dict(num_warps=4)),
 "bias_add_rem": (bias_add_kernel, {"x_ptr":"*fp32","b_ptr":"*fp32","out_ptr":"*fp32","n":"i32","ncols":"i32","BLOCK":"constexpr"}, {"BLOCK":128}, 90, (0,1,2), dict(num_warps=1)),
 "row_softmax_looped": (softmax_looped_kernel, {"x_ptr":"*fp32","out_ptr":"*fp32","stride":"i32","ncols":"i32","BLOCK":"constexpr"}, {"BLOCK":64}, 90, (0,1,2), dict(num_warps=1)),
}
MM = {"a_ptr":"*bf16","b_ptr":"*bf16","c_ptr":"*fp32","M":"i32","N":"i32","K":"i32","BM":"constexpr","BN":"constexpr","BK":"constexpr"}
for cap in (80, 90):
    jobs[f"matmul_bf16_sm{cap}"] = (matmul_kernel, MM, {"BM":64,"BN":64,"BK":32}, cap, (0,1,2,3,4,5), dict(num_warps=4))
only = set(sys.argv[2:])
meta = {}
for name, (fn, sig, c, cap, div, opts) in jobs.items():
    if only and name not in only:
        continue
    k = comp(fn, sig, c, cap=cap, div=div, **opts)
    open(f"{outdir}/{name}.ptx", "w").write(k.asm["ptx"])
    md = k.metadata
    meta[name] = {"kernel": md.name, "arch": f"sm_{cap}", "num_warps": md.num_warps, "shared": md.shared, "constexprs": c, "signature": sig}
    print(name, meta[name], flush=True)
old = json.load(open(f"{outdir}/kernels.json")) if only and os.path.exists(f"{outdir}/kernels.json") else {}
json.dump({**old, **meta}, open(f"{outdir}/kernels.json","w"), indent=1, sort_keys=True)
