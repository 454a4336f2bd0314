"""Checks for 05a's exercises, run on the SIMT simulator: the memory trace, not only the output.

Teaches nothing new; it grades two lessons of 05a against the simulator, the way Nsight Compute
would grade them on a GPU (``l1tex__t_sectors_pipe_lsu_mem_global_op_ld``, the active-lane mask of
each issued instruction):

* :func:`check_copy2d`: a 2-D copy kernel written in Python must produce the copy, touch every
  element exactly once (no lane past a ragged edge, none twice) and move no more sectors than the
  coalesced copy;
* :func:`real_v4_masks`: the active-lane mask of the guarded ``ld.global.v4.b32`` in Triton's
  vector-add PTX (``data/gpu/ptx/vector_add.ptx``), read from the simulator's trace of a real run.
"""

from __future__ import annotations

import numpy as np

from course_lib.check.compare import Verdict
from course_lib.gpu import reference
from course_lib.gpu.ptx_exec import run_ptx
from course_lib.gpu.simt import WARP
from course_lib.gpu.teach import launch

COPY_BLOCK = (32, 4)  # threads per block: x = lane in the warp, y = warp of the block
COPY_SHAPES = ((5, 37), (9, 64), (17, 100), (3, 129))


def copy_grid(rows: int, cols: int) -> tuple[int, int]:
    """Blocks in x (columns) and y (rows) to cover a rows x cols matrix with :data:`COPY_BLOCK`."""
    return -(-cols // COPY_BLOCK[0]), -(-rows // COPY_BLOCK[1])


def _copy2d_reference(t, src, dst, rows, cols):
    col = t.bid.x * t.bdim.x + t.tid.x
    row = t.bid.y * t.bdim.y + t.tid.y
    with t.if_((row < rows) & (col < cols)):
        dst[row * cols + col] = src[row * cols + col]


def _touched(run, base_event_filter) -> np.ndarray:
    """Flat addresses of every active lane of the events selected by ``base_event_filter``."""
    return np.concatenate([e.addresses[e.mask] for e in run.events if base_event_filter(e)] or [np.zeros(0, np.int64)])


def check_copy2d(kernel, shapes=COPY_SHAPES) -> Verdict:
    """Run ``kernel(t, src, dst, rows, cols)`` on ragged shapes; copy right, each element once, coalesced."""
    for rows, cols in shapes:
        src = np.arange(rows * cols, dtype=np.float32) + 0.5
        dst = np.full(rows * cols, -1.0, np.float32)
        run = launch(kernel, copy_grid(rows, cols), COPY_BLOCK, src, dst, rows, cols)
        if not np.array_equal(dst, src):
            wrong = int((dst != src).sum())
            return Verdict(False, f"{rows}x{cols}: dst is not a copy of src ({wrong} elements differ)")
        for kind in ("load", "store"):
            addr = _touched(run, lambda e, k=kind: e.space == "global" and e.kind == k)
            if addr.size != rows * cols or np.unique(addr).size != rows * cols:
                return Verdict(False, f"{rows}x{cols}: the trace shows {addr.size} {kind} lanes for {rows * cols} "
                                      "elements: some lane is past an edge or an element is touched twice")  # fmt: skip
        ref = launch(_copy2d_reference, copy_grid(rows, cols), COPY_BLOCK, src.copy(), dst.copy(), rows, cols)
        got, want = run.totals()["global_sectors"], ref.totals()["global_sectors"]
        if got > want:
            return Verdict(False, f"{rows}x{cols}: {got} global sectors where a coalesced copy moves {want}: "
                                  "do a warp's 32 lanes read 32 neighbouring floats?")  # fmt: skip
    return Verdict(True, f"right copy on {len(shapes)} ragged shapes, each element read and written once, coalesced")


# ----------------------------------------------------------------------------- Triton's masked v4 load
V4_BLOCK, V4_THREADS = 256, 64  # vector_add.ptx: BLOCK=256, num_warps=2, so 4 floats per thread


def real_v4_masks(n: int) -> dict[tuple[int, int], list[bool]]:
    """``{(program, warp): 32 bools}``: which lanes ran the guarded ``ld.global.v4.b32`` of the first
    operand in Triton's vector-add PTX, launched on ``n`` elements (``n`` a multiple of 16, as the
    kernel was specialised)."""
    import torch

    if n % 16:
        raise ValueError(f"n={n}: the PTX was compiled for n divisible by 16 (tt.divisibility)")
    grid = -(-n // V4_BLOCK)
    x, y = torch.arange(n, dtype=torch.float32), torch.ones(n)
    run = run_ptx(reference.ptx("vector_add"), "add_kernel", grid, V4_THREADS, [x, y, torch.zeros(n), n], trace=0)
    masks = {(p, w): [False] * WARP for p in range(grid) for w in range(V4_THREADS // WARP)}
    seen = set()
    for e in run.events:
        key = (e.block[0], e.warp)
        if e.space == "global" and e.kind == "load" and e.nbytes == 16 and key not in seen:
            seen.add(key)  # the first v4 load of each warp: x's
            masks[key] = [bool(v) for v in e.mask]
    return masks
