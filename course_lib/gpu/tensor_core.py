"""Tensor cores: the warp-wide matrix instruction that ``tl.dot`` becomes, and its numerics.

Teaches: a tensor core multiplies small tiles in one instruction issued by a whole warp
(``mma.sync.aligned.m16n8k16`` on sm_80, Ampere) or a whole warpgroup of 4 warps reading
operands from shared memory (``wgmma.mma_async.sync.aligned.m64nNk16`` on sm_90, Hopper).
Triton chooses the instruction in ``lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp``
(MMA v2 for sm_80, v3 for sm_90) and lowers it in ``third_party/nvidia/lib/TritonNVIDIAGPUToLLVM``.
The numeric contract: bf16 inputs are multiplied exactly (an 8-bit x 8-bit significand product
fits in fp32) and summed into an fp32 accumulator.

Reference: PTX ISA, "Warp-level matrix instructions" (9.7.14) and "Asynchronous warpgroup
level matrix instructions" (9.7.15). Simplified: we emulate the arithmetic of one tile, not the
register fragments each lane holds.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

# (instruction, arch, dtype in, accumulate) -> (M, N, K): the shapes the PTX ISA defines for bf16.
MMA_SHAPES = [
    ("mma.sync m16n8k8", "sm_80", "bf16", "f32", (16, 8, 8)),
    ("mma.sync m16n8k16", "sm_80", "bf16", "f32", (16, 8, 16)),
    ("wgmma.mma_async m64nNk16 (N = 8..256, step 8)", "sm_90", "bf16", "f32", (64, 256, 16)),
]


def tensor_core_ops(ptx: str) -> Counter:
    """Count the tensor-core and related instructions (mma, wgmma, ldmatrix, cp.async) in PTX."""
    ops = re.findall(r"^\s*(?:@%\w+\s+)?((?:mma|wgmma|ldmatrix|cp\.async|stmatrix)[\w.:]*)", ptx, re.M)
    return Counter(ops)


def mma_shape(opcode: str) -> tuple | None:
    """(M, N, K) encoded in an mma/wgmma opcode like ``mma.sync.aligned.m16n8k16.row.col...``."""
    m = re.search(r"m(\d+)n(\d+)k(\d+)", opcode)
    return tuple(int(x) for x in m.groups()) if m else None


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round fp32 to bf16 (round to nearest even), returned as fp32 values."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def mma_tile(a: np.ndarray, b: np.ndarray, c: np.ndarray, k_chunk: int = 16) -> np.ndarray:
    """D = A @ B + C for one tile: bf16 A (MxK), B (KxN), fp32 C (MxN) -> fp32 D.

    Products of bf16 values are exact in fp32; each chunk of ``k_chunk`` products is summed in
    float64 and rounded once to fp32 before joining the accumulator (a model of the hardware's
    wide internal adder; the exact order inside the unit is not documented).
    """
    a32, b32 = to_bf16(a).astype(np.float64), to_bf16(b).astype(np.float64)
    d = np.asarray(c, np.float32).copy()
    for k0 in range(0, a32.shape[1], k_chunk):
        part = a32[:, k0 : k0 + k_chunk] @ b32[k0 : k0 + k_chunk, :]
        d = (d.astype(np.float64) + part).astype(np.float32)
    return d
