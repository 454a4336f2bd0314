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


_BLOCKED_HEAD = re.compile(r"^#(\w*) = #ttg\.blocked<", re.M)
_FIELD = re.compile(r"(\w+) = \[([^\]]*)\]")
_BLOCKED_FIELDS = ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order")


class LayoutParseError(ValueError):
    """A ``#ttg.blocked`` definition that cannot be read; the message starts with line and column."""


def _ints(text: str, where: str) -> tuple:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise LayoutParseError(f"{where}: expected a list of integers, got [{text}]") from None


def parse_blocked(ttgir: str) -> dict[str, Blocked]:
    """Every ``#blocked`` alias defined at the top of a TTGIR module.

    A definition that is cut short or lacks a field raises :class:`LayoutParseError` with its
    line and column (TTGIR printed by Triton always has all four fields)."""
    out = {}
    for head in _BLOCKED_HEAD.finditer(ttgir):
        line = ttgir.count("\n", 0, head.start()) + 1
        end = ttgir.find("\n", head.end())
        text = ttgir[head.end() : end if end >= 0 else len(ttgir)]
        close = text.find("}>")
        if close < 0:
            col = head.end() - head.start() + len(text) + 1  # the line ends before '}>'
            raise LayoutParseError(f"line {line}, column {col}: #{head.group(1)} = #ttg.blocked<{{...}} is not closed")
        fields = {}
        for m in _FIELD.finditer(text[:close]):
            col = head.end() - head.start() + m.start(2) + 1
            fields[m.group(1)] = _ints(m.group(2), f"line {line}, column {col}")
        missing = [f for f in _BLOCKED_FIELDS if f not in fields]
        if missing:
            raise LayoutParseError(f"line {line}, column 1: #{head.group(1)} has no {', '.join(missing)}")
        values = [fields[f] for f in _BLOCKED_FIELDS]
        if len({len(v) for v in values}) != 1:
            raise LayoutParseError(f"line {line}, column 1: #{head.group(1)}'s fields have different ranks "
                                   f"({', '.join(f'{f}={list(v)}' for f, v in zip(_BLOCKED_FIELDS, values))})")  # fmt: skip
        out[head.group(1)] = Blocked(*values)
    return out


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
