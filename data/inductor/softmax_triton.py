import triton
import triton.language as tl

from course_lib.inductor.launcher import DirectLaunch

@triton.jit
def max_keep_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def min_keep_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)

@triton.jit
def kernel0(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    x0 = xindex
    rindex = tl.arange(0, RBLOCK)[None, :]
    rmask = rindex < rnumel
    r0 = rindex
    tmp0 = tl.load(in_ptr0 + (r0 + 4096*x0), xmask & rmask, other=0)
    tmp1 = tl.where(xmask & rmask, tmp0, float("-inf"))
    acc0 = tl.reduce(tmp1, 1, max_keep_nan)[:, None]
    tmp2 = tmp0 - acc0
    tmp3 = tl.exp(tmp2)
    tmp4 = tl.where(xmask & rmask, tmp3, 0)
    acc1 = tl.sum(tmp4, 1)[:, None]
    tmp5 = tmp3 / acc1
    tl.store(out_ptr0 + (r0 + 4096*x0), tmp5, xmask & rmask)

site_kernel0 = DirectLaunch(kernel0, grid=(16384,), ints=(16384, 4096), constexprs=dict(XBLOCK=1, RBLOCK=4096), num_warps=8)


def launch_kernel0(in_ptr0, out_ptr0):
    site_kernel0(in_ptr0, out_ptr0)
