"""The SIMT machine: grids of blocks of threads, run as warps of 32 with active masks.

Teaches: how a GPU runs one instruction for 32 threads at a time (a warp), what happens when
those threads disagree about a branch (divergence: the warp runs each side with part of its
lanes switched off, then reconverges), and how barriers and shared memory tie the warps of a
block together. The real thing is the streaming multiprocessor's warp scheduler; the public
description is the CUDA C++ Programming Guide, "SIMT Architecture" and "Hardware
Multithreading", and the PTX ISA manual, section 9.7 (instructions).

Position: :class:`course_lib.gpu.ptx.PtxKernel` (or a teaching kernel, :mod:`.teach`) ->
:class:`RunResult` (output arrays + per-warp statistics + timeline + memory events).

Simplified:
* Reconvergence uses the *minimum-pc* rule: each lane keeps its own pc, and the warp issues the
  instruction at the smallest pc among its live lanes, for exactly the lanes sitting there.
  Forward branches and loops reconverge where a real GPU would (pre-Volta hardware used a
  reconvergence stack at the immediate post-dominator; Volta and later keep per-thread pcs and
  ptxas inserts BSSY/BSYNC convergence barriers, visible in SASS).
* One warp issues one instruction per "cycle", warps of a block take turns (round robin),
  blocks run one after another. No latencies, no caches: :mod:`.occupancy` models those.
* Lanes are numpy vectors of 32, so an instruction costs one numpy call, not 32 Python steps.
"""

from __future__ import annotations

import dataclasses

import numpy as np

WARP = 32


@dataclasses.dataclass
class WarpStats:
    """Counts for one warp. ``divergence_efficiency`` = active lanes / (32 x issued)."""

    block: tuple
    warp: int
    issued: int = 0
    active_lanes: int = 0
    global_requests: int = 0
    global_sectors: int = 0
    global_lines: int = 0
    shared_requests: int = 0
    shared_wavefronts: int = 0
    barriers: int = 0

    @property
    def divergence_efficiency(self) -> float:
        return self.active_lanes / (WARP * self.issued) if self.issued else 1.0

    @property
    def bank_conflicts(self) -> int:
        """Extra shared-memory passes beyond one per request (0 when conflict free)."""
        return self.shared_wavefronts - self.shared_requests

    def row(self) -> list:
        return [
            f"{self.block}", self.warp, self.issued, f"{self.divergence_efficiency:.2f}",
            self.global_requests, self.global_sectors, self.global_lines,
            self.shared_requests, self.bank_conflicts,
        ]  # fmt: skip


STATS_HEADERS = [
    "block", "warp", "issued", "div.eff", "gmem req", "sectors", "lines", "smem req", "conflicts",
]  # fmt: skip


@dataclasses.dataclass
class MemEvent:
    """One warp-wide memory instruction: where each active lane went."""

    cycle: int
    block: tuple
    warp: int
    pc: int
    space: str  # "global" | "shared"
    kind: str  # "load" | "store"
    nbytes: int  # bytes per lane
    addresses: np.ndarray  # int64[32]
    mask: np.ndarray  # bool[32]
    sectors: int = 0
    lines: int = 0
    wavefronts: int = 0
    text: str = ""


@dataclasses.dataclass
class Issue:
    """One issued instruction, for the warp timeline."""

    cycle: int
    block: tuple
    warp: int
    pc: int
    kind: str  # "alu" | "sfu" | "global" | "shared" | "sync" | "control"
    active: int


@dataclasses.dataclass
class RunResult:
    """What a kernel run returns: outputs, per-warp statistics, memory events and the timeline.

    ``outputs`` holds every array argument after the run, by position (None for scalars), in the
    type it came in (numpy or torch).
    """

    kernel: str
    grid: tuple
    block: tuple
    outputs: list
    warps: list
    events: list
    timeline: list

    def __getitem__(self, i):
        return self.outputs[i]

    def totals(self) -> dict:
        """Sums over all warps (divergence efficiency weighted by issued instructions)."""
        t = {f: sum(getattr(w, f) for w in self.warps) for f in (
            "issued", "active_lanes", "global_requests", "global_sectors", "global_lines",
            "shared_requests", "shared_wavefronts", "barriers")}  # fmt: skip
        t["divergence_efficiency"] = t["active_lanes"] / (WARP * t["issued"]) if t["issued"] else 1.0
        t["bank_conflicts"] = t["shared_wavefronts"] - t["shared_requests"]
        t["warps"] = len(self.warps)
        return t

    def table(self) -> str:
        rows = [w.row() for w in self.warps]
        widths = [max(len(str(x)) for x in col) for col in zip(STATS_HEADERS, *rows)]
        fmt = "  ".join(f"{{:>{w}}}" for w in widths)
        return "\n".join([fmt.format(*STATS_HEADERS)] + [fmt.format(*map(str, r)) for r in rows])

    def __str__(self) -> str:
        t = self.totals()
        return (
            f"{self.kernel}: grid={self.grid} block={self.block} warps={t['warps']} "
            f"issued={t['issued']} divergence_efficiency={t['divergence_efficiency']:.3f} "
            f"global: requests={t['global_requests']} sectors={t['global_sectors']} "
            f"lines={t['global_lines']} shared: requests={t['shared_requests']} "
            f"bank_conflicts={t['bank_conflicts']}"
        )

    __repr__ = __str__

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}\n\n{html.escape(self.table())}</pre>"


def dim3(x) -> tuple:
    """Normalise an int or a 1-3 tuple to (x, y, z)."""
    t = (x,) if isinstance(x, (int, np.integer)) else tuple(x)
    if not 1 <= len(t) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in t):
        raise ValueError(f"a grid or block is 1 to 3 positive integers (x, y, z), got {x!r}")
    return tuple(int(v) for v in t) + (1,) * (3 - len(t))


def thread_coords(block: tuple, warp: int) -> dict:
    """tid.x/y/z and lane-exists mask for the 32 lanes of ``warp`` in a block of shape ``block``."""
    n = block[0] * block[1] * block[2]
    linear = warp * WARP + np.arange(WARP)
    exists = linear < n
    lin = np.where(exists, linear, 0)
    return {
        "x": lin % block[0],
        "y": (lin // block[0]) % block[1],
        "z": lin // (block[0] * block[1]),
        "exists": exists,
        "lane": np.arange(WARP),
    }


def schedule_block(warps: list) -> None:
    """Round-robin the warps of one block until all exit; release barriers when all arrive.

    Each warp object has ``finished``, ``at_barrier`` and ``step()``. Warps that exited no longer
    count at a barrier (as on Volta and later), so the barrier opens when every live warp waits.
    """
    while True:
        live = [w for w in warps if not w.finished]
        if not live:
            return
        ready = [w for w in live if not w.at_barrier]
        if not ready:
            for w in live:
                w.at_barrier = False
            continue
        for w in ready:
            w.step()
