"""Memory spaces of the SIMT simulator, and the two counts that decide memory speed on a GPU.

Teaches: coalescing (how many 32-byte sectors and 128-byte lines one warp's access touches) and
shared-memory bank conflicts (how many passes, "wavefronts", one warp's shared access needs).
The real counters are Nsight Compute's ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld`` /
``l1tex__t_requests`` and ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared``; the rules are in
the CUDA C++ Programming Guide, "Device Memory Accesses" and "Shared Memory" (compute
capability 5.x and later: 32 banks, 4 bytes wide).

Simplified: no caches are modelled (every sector touched counts as a transaction); for 8- and
16-byte shared accesses the warp is split into the phases the guide describes (16 or 8 lanes).
"""

from __future__ import annotations

import dataclasses

import numpy as np

SECTOR = 32
LINE = 128
BANKS = 32
BANK_WIDTH = 4
GLOBAL_BASE = 0x7F0000000000  # where the simulator places the first buffer (looks like a CUDA pointer)


def sectors_touched(addresses, nbytes: int, mask=None) -> int:
    """Distinct 32-byte sectors covered by ``nbytes``-wide accesses at ``addresses`` (active lanes)."""
    return _distinct_chunks(addresses, nbytes, mask, SECTOR)


def lines_touched(addresses, nbytes: int, mask=None) -> int:
    """Distinct 128-byte cache lines covered by the active lanes' accesses."""
    return _distinct_chunks(addresses, nbytes, mask, LINE)


def _distinct_chunks(addresses, nbytes, mask, chunk) -> int:
    a = np.asarray(addresses, dtype=np.int64)
    if mask is not None:
        a = a[np.asarray(mask, bool)]
    if a.size == 0:
        return 0
    first, last = a // chunk, (a + nbytes - 1) // chunk
    spans = [np.arange(f, e + 1) for f, e in zip(first, last)] if nbytes > chunk else [first, last]
    return int(np.unique(np.concatenate(spans)).size)


def bank_wavefronts(addresses, nbytes: int = 4, mask=None) -> int:
    """Passes a shared-memory access needs: per phase, the worst bank's count of distinct words.

    Lanes reading the same 4-byte word share it (broadcast); different words in one bank
    serialise. 8-byte accesses run in 2 phases of 16 lanes, 16-byte ones in 4 phases of 8.
    """
    a = np.asarray(addresses, dtype=np.int64)
    m = np.ones(a.shape, bool) if mask is None else np.asarray(mask, bool)
    per_phase = max(1, (BANKS * BANK_WIDTH) // max(nbytes, BANK_WIDTH))
    total = 0
    for start in range(0, a.size, per_phase):
        sel = a[start : start + per_phase][m[start : start + per_phase]]
        if sel.size == 0:
            continue
        words = np.unique(np.concatenate([sel // BANK_WIDTH + k for k in range(max(1, nbytes // 4))]))
        total += int(np.bincount(words % BANKS, minlength=BANKS).max())
    return total


@dataclasses.dataclass
class Buffer:
    """A tensor placed in simulated global memory."""

    name: str
    address: int
    array: np.ndarray


class GlobalMemory:
    """A flat byte array holding every buffer; addresses look like device pointers."""

    def __init__(self, arrays: dict):
        self.buffers, offset = [], 0
        for name, arr in arrays.items():
            arr = np.ascontiguousarray(arr)
            self.buffers.append(Buffer(name, GLOBAL_BASE + offset, arr))
            offset += (arr.nbytes + 255) // 256 * 256 + 256
        self.bytes = np.zeros(max(offset, 256), np.uint8)
        for b in self.buffers:
            start = b.address - GLOBAL_BASE
            self.bytes[start : start + b.array.nbytes] = b.array.reshape(-1).view(np.uint8)

    def result(self, name: str) -> np.ndarray:
        b = next(b for b in self.buffers if b.name == name)
        start = b.address - GLOBAL_BASE
        raw = self.bytes[start : start + b.array.nbytes].copy()
        return raw.view(b.array.dtype).reshape(b.array.shape)

    def index(self, addresses, nbytes, mask, what):
        off = np.asarray(addresses, np.int64) - GLOBAL_BASE
        bad = mask & ((off < 0) | (off + nbytes > self.bytes.size))
        if bad.any():
            lane = int(np.flatnonzero(bad)[0])
            raise IndexError(f"{what}: lane {lane} address {int(addresses[lane]):#x} is outside every buffer")
        return np.where(mask, off, 0)


class SharedMemory:
    """One block's shared memory (addresses start at 0, as PTX's ``.shared`` window does)."""

    def __init__(self, nbytes: int):
        self.bytes = np.zeros(max(nbytes, 16), np.uint8)

    def index(self, addresses, nbytes, mask, what):
        off = np.asarray(addresses, np.int64)
        bad = mask & ((off < 0) | (off + nbytes > self.bytes.size))
        if bad.any():
            lane = int(np.flatnonzero(bad)[0])
            raise IndexError(f"{what}: lane {lane} shared address {int(off[lane])} is out of range")
        return np.where(mask, off, 0)


def gather(space, addresses, nbytes, mask, what="load") -> np.ndarray:
    """Read ``nbytes`` per active lane; returns uint8 [32, nbytes] (inactive lanes read zeros)."""
    off = space.index(addresses, nbytes, mask, what)
    out = space.bytes[off[:, None] + np.arange(nbytes)]
    out[~mask] = 0
    return out


def scatter(space, addresses, data, mask, what="store") -> None:
    """Write uint8 [32, nbytes] rows for the active lanes (the last lane wins on a clash)."""
    nbytes = data.shape[1]
    off = space.index(addresses, nbytes, mask, what)
    lanes = np.flatnonzero(mask)
    space.bytes[(off[lanes][:, None] + np.arange(nbytes)).reshape(-1)] = data[lanes].reshape(-1)
