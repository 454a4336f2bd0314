"""TTGIR layouts: which thread of which warp holds which element of a tensor.

Teaches: ``include/triton/Dialect/TritonGPU/IR/TritonGPUAttrDefs.td`` (the encodings) and
``lib/Dialect/TritonGPU/IR/LinearLayoutConversions.cpp`` (what they mean, as linear layouts).
TTIR tensors have no owner; ``ConvertTritonToTritonGPU`` gives every tensor an *encoding*:

* ``#ttg.blocked<{sizePerThread, threadsPerWarp, warpsPerCTA, order}>``: the tensor is cut into
  tiles of ``sizePerThread[d] * threadsPerWarp[d] * warpsPerCTA[d]`` along each dim ``d``; inside
  a tile a thread owns a ``sizePerThread`` chunk of contiguous elements, lanes of a warp sit next
  to each other, then warps. ``order`` lists dims fastest-varying first. A tensor bigger than
  one tile wraps around: each thread owns one chunk per tile (more registers).
* ``#ttg.nvidia_mma<{versionMajor = 2 | 3, warpsPerCTA, instrShape}>``: the fragment layout of
  ``mma.sync`` (v2, Ampere) or ``wgmma`` (v3, Hopper) accumulators.
* ``#ttg.dot_op<{opIdx, parent}>``: operands of a dot, laid out for the MMA that consumes them.
* ``#ttg.shared`` / ``#ttg.nvmma_shared<{swizzlingByteWidth, ...}>``: tiles in shared memory,
  swizzled so a warp's accesses hit different banks.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np


@dataclasses.dataclass(frozen=True)
class Blocked:
    size_per_thread: tuple
    threads_per_warp: tuple
    warps_per_cta: tuple
    order: tuple

    def tile(self) -> tuple:
        return tuple(s * t * w for s, t, w in zip(self.size_per_thread, self.threads_per_warp, self.warps_per_cta))


_BLOCKED = re.compile(r"#(\w*) = #ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], threadsPerWarp = \[([\d, ]+)\], "
                      r"warpsPerCTA = \[([\d, ]+)\], order = \[([\d, ]+)\]")  # fmt: skip


def _ints(text: str) -> tuple:
    return tuple(int(v) for v in text.split(","))


def parse_blocked(ttgir: str) -> dict[str, Blocked]:
    """Every ``#blocked`` alias defined at the top of a TTGIR module."""
    return {m.group(1): Blocked(*(_ints(m.group(i)) for i in range(2, 6))) for m in _BLOCKED.finditer(ttgir)}


def encodings(ttgir: str) -> dict[str, str]:
    """Alias -> encoding kind (``blocked``, ``nvidia_mma``, ``dot_op``, ``shared``, ...)."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^#(\w+) = #ttg\.(\w+)<", ttgir, re.M)}


def _linear(coords: list, sizes: tuple, order: tuple) -> int:
    """Combine per-dim coordinates into one id, ``order[0]`` fastest."""
    lin, mult = 0, 1
    for d in order:
        lin += coords[d] * mult
        mult *= sizes[d]
    return lin


def owner(layout: Blocked, index: tuple, shape: tuple | None = None) -> tuple[int, int, int]:
    """(warp, lane, register slot) holding element ``index`` of a tensor of ``shape`` in ``layout``."""
    spt, tpw, wpc = layout.size_per_thread, layout.threads_per_warp, layout.warps_per_cta
    lane_c, warp_c, reg_c, reps = [], [], [], []
    for d, i in enumerate(index):
        tile = spt[d] * tpw[d] * wpc[d]
        pos = i % tile
        lane_c.append((pos // spt[d]) % tpw[d])
        warp_c.append((pos // (spt[d] * tpw[d])) % wpc[d])
        reg_c.append(pos % spt[d])
        reps.append(i // tile)
    lane = _linear(lane_c, tpw, layout.order)
    warp = _linear(warp_c, wpc, layout.order)
    rep_sizes = tuple(max(1, -(-n // t)) for n, t in zip(shape or index, layout.tile()))
    return warp, lane, _linear(reg_c, spt, layout.order) + int(np.prod(spt)) * _linear(reps, rep_sizes, layout.order)


def ownership(layout: Blocked, shape: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrays (warp, lane, register) of ``shape`` for every element."""
    warp, lane, reg = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    for idx in np.ndindex(*shape):
        warp[idx], lane[idx], reg[idx] = owner(layout, idx, shape)
    return warp, lane, reg


def elements_per_thread(layout: Blocked, shape: tuple) -> int:
    """Registers (elements) each thread holds for a tensor of ``shape``."""
    return int(np.prod([max(1, -(-n // t)) * s for n, t, s in zip(shape, layout.tile(), layout.size_per_thread)]))


def plot_ownership(layout: Blocked, shape: tuple, ax=None):
    """Colour = warp, number = lane, for a 2-D (or 1-D, shown as one row) tensor."""
    import matplotlib.pyplot as plt

    shape2 = shape if len(shape) == 2 else (1, shape[0])
    warp, lane, _ = ownership(layout, shape)
    warp, lane = warp.reshape(shape2), lane.reshape(shape2)
    ax = ax or plt.subplots(figsize=(min(14, 0.45 * shape2[1] + 1), min(8, 0.45 * shape2[0] + 1)))[1]
    ax.imshow(warp, cmap="Pastel1", vmin=0, vmax=8, aspect="equal")
    for (r, c), v in np.ndenumerate(lane):
        ax.text(c, r, str(v), ha="center", va="center", fontsize=7)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"sizePerThread={list(layout.size_per_thread)} threadsPerWarp={list(layout.threads_per_warp)} "
                 f"warpsPerCTA={list(layout.warps_per_cta)} order={list(layout.order)}\ncolour = warp, number = lane",
                 fontsize=8)  # fmt: skip
    return ax
