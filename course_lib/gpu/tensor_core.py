"""Tensor cores: the warp-wide matrix instruction that ``tl.dot`` becomes, and its numerics.

Teaches: a tensor core multiplies small tiles in one instruction issued by a whole warp
(``mma.sync.aligned.m16n8k16`` on sm_80, Ampere) or a whole warpgroup of 4 warps reading
operands from shared memory (``wgmma.mma_async.sync.aligned.m64nNk16`` on sm_90, Hopper).
Triton chooses the instruction in ``lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp``
(MMA v2 for sm_80, v3 for sm_90) and lowers it in ``third_party/nvidia/lib/TritonNVIDIAGPUToLLVM``.
The numeric contract: bf16 inputs are multiplied exactly (an 8-bit x 8-bit significand product
fits in fp32) and summed into an fp32 accumulator.

Reference: PTX ISA, "Warp-level matrix instructions" (9.7.14) and "Asynchronous warpgroup
level matrix instructions" (9.7.15). ``mma_tile`` emulates the arithmetic of one tile;
``fragment_owner`` / ``mma_m16n8k16_fragments`` add the register fragments each lane holds for
``mma.sync.m16n8k16`` (the ISA's fragment tables; Triton's ``NvidiaMmaEncodingAttr``, CUTLASS's
``SM80_16x8x16_F32BF16BF16F32_TN`` atom in CuTe). wgmma's fragments are not modelled.
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
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if a.ndim != 2 or b.ndim != 2 or c.shape != (a.shape[0], b.shape[-1]) or a.shape[1] != b.shape[0]:
        raise ValueError(f"mma_tile needs A (M x K), B (K x N), C (M x N); got {a.shape}, {b.shape}, {c.shape}")
    a32, b32 = to_bf16(a).astype(np.float64), to_bf16(b).astype(np.float64)
    d = np.asarray(c, np.float32).copy()
    for k0 in range(0, a32.shape[1], k_chunk):
        part = a32[:, k0 : k0 + k_chunk] @ b32[k0 : k0 + k_chunk, :]
        d = (d.astype(np.float64) + part).astype(np.float32)
    return d


# ----------------------------------------------------------------------------- fragments of mma.sync.m16n8k16
# Which lane of the warp holds which element of each operand of mma.sync.aligned.m16n8k16 with
# bf16/f16 inputs and f32 accumulators (PTX ISA 9.7.14.5.8, "Matrix fragments for mma.m16n8k16").
# Lanes form 8 groups of 4: group = lane // 4, thread-in-group tig = lane % 4. Each rule maps
# (group, tig, element index i of that lane's fragment) to (row, col) of the operand.
FRAGMENT_RULES = {
    # A is 16 x 16 (row major): 8 bf16 per lane, packed two per 32-bit register (4 registers)
    "A": (16, 16, 8, lambda g, t, i: (g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4))),
    # B is 16 x 8 (K x N, "col"): 4 bf16 per lane in 2 registers
    "B": (16, 8, 4, lambda g, t, i: (2 * t + i % 2 + 8 * (i // 2), g)),
    # C and D are 16 x 8 f32: 4 per lane, one register each
    "C": (16, 8, 4, lambda g, t, i: (g + 8 * (i // 2), 2 * t + i % 2)),
}
ELEMENTS_PER_REGISTER = {"A": 2, "B": 2, "C": 1}  # bf16 pairs pack into one .b32 register


def fragment_owner(operand: str) -> tuple[np.ndarray, np.ndarray]:
    """(lane, index) arrays of the operand's shape: which lane holds each element, at which index."""
    if operand not in FRAGMENT_RULES:
        raise ValueError(f"operand must be one of {sorted(FRAGMENT_RULES)}, got {operand!r}")
    rows, cols, per_lane, rule = FRAGMENT_RULES[operand]
    lane, index = np.full((rows, cols), -1), np.full((rows, cols), -1)
    for ln in range(32):
        for i in range(per_lane):
            r, c = rule(ln // 4, ln % 4, i)
            lane[r, c], index[r, c] = ln, i
    return lane, index


def _rule(operand: str, shape: tuple, whole: bool) -> tuple:
    if operand not in FRAGMENT_RULES:
        raise ValueError(f"operand must be one of {sorted(FRAGMENT_RULES)}, got {operand!r}")
    rows, cols, per_lane, rule = FRAGMENT_RULES[operand]
    want = (rows, cols) if whole else (32, per_lane)
    if tuple(shape) != want:
        what = "the whole operand" if whole else "fragments (lanes x elements per lane)"
        raise ValueError(f"{operand} of mma.m16n8k16: {what} must have shape {want}, got {tuple(shape)}")
    return rows, cols, per_lane, rule


def to_fragments(operand: str, x: np.ndarray) -> np.ndarray:
    """Scatter a whole operand into a (32, per_lane) array: row ``l`` is what lane ``l`` holds."""
    rows, cols, per_lane, rule = _rule(operand, np.shape(x), whole=True)
    return np.array([[x[rule(ln // 4, ln % 4, i)] for i in range(per_lane)] for ln in range(32)])


def from_fragments(operand: str, frags: np.ndarray) -> np.ndarray:
    """Gather the per-lane fragments back into the whole operand."""
    rows, cols, per_lane, rule = _rule(operand, np.shape(frags), whole=False)
    out = np.zeros((rows, cols), dtype=frags.dtype)
    for ln in range(32):
        for i in range(per_lane):
            out[rule(ln // 4, ln % 4, i)] = frags[ln, i]
    return out


def mma_m16n8k16_fragments(a_frag: np.ndarray, b_frag: np.ndarray, c_frag: np.ndarray) -> np.ndarray:
    """The instruction as the warp sees it: 32 lanes' A, B, C fragments in, D fragments out.

    No lane holds a whole row of A or column of B: the unit gathers them from all 32 lanes,
    which is why every lane of the warp must execute the instruction together (``.sync``).
    """
    a = from_fragments("A", a_frag)
    b = from_fragments("B", b_frag)
    c = from_fragments("C", c_frag)
    return to_fragments("C", mma_tile(a, b, c))


def ptx_mma_operands(ptx: str) -> list[dict]:
    """Register lists of each ``mma.sync...m16n8k16`` in PTX: {"d": [...], "a": [...], "b": [...], "c": [...]}."""
    out = []
    for m in re.finditer(r"mma\.sync\.aligned\.m16n8k16[\w.]*\s+((?:\{[^}]*\}\s*,?\s*){4})", ptx):
        groups = [g.replace(" ", "").split(",") for g in re.findall(r"\{([^}]*)\}", m.group(1))]
        out.append(dict(zip("dabc", groups)))
    return out
