import triton
import triton.language as tl

@triton.jit
def kernel0(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    x0 = xindex
    acc_buf0_tile = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = rindex < rnumel
        r0 = rindex
        tmp0 = tl.load(in_ptr0 + (r0 + 4096*x0), xmask & rmask, other=0)
        acc_buf0_tile = tl.where(xmask & rmask, tl.maximum(acc_buf0_tile, tmp0), acc_buf0_tile)
    acc_buf0 = tl.max(acc_buf0_tile, 1)[:, None]
    acc_buf3_tile = tl.full([XBLOCK, RBLOCK], 0, tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = rindex < rnumel
        r0 = rindex
        tmp1 = tl.load(in_ptr0 + (r0 + 4096*x0), xmask & rmask, other=0)
        tmp2 = tmp1 - acc_buf0
        tmp3 = tl.exp(tmp2)
        acc_buf3_tile = tl.where(xmask & rmask, acc_buf3_tile + tmp3, acc_buf3_tile)
    acc_buf3 = tl.sum(acc_buf3_tile, 1)[:, None]
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = rindex < rnumel
        r0 = rindex
        tmp4 = tl.load(in_ptr0 + (r0 + 4096*x0), xmask & rmask, other=0)
        tmp5 = tmp4 - acc_buf0
        tmp6 = tl.exp(tmp5)
        tmp7 = tmp6 / acc_buf3
        tl.store(out_ptr0 + (r0 + 4096*x0), tmp7, xmask & rmask)

def launch_kernel0(in_ptr0, out_ptr0):
    grid = (triton.cdiv(16384, 16),)
    kernel0[grid](in_ptr0, out_ptr0, 16384, 4096, XBLOCK=16, RBLOCK=256)
