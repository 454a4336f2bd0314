"""Occupancy: how many warps an SM can hold at once, which resource runs out first, and why it matters.

Teaches: the arithmetic of NVIDIA's CUDA Occupancy Calculator (``cudaOccupancyMaxActiveBlocksPerMultiprocessor``
in the runtime; the spreadsheet that ships with Nsight Compute). Each block needs warps,
registers (allocated per warp in units of 256) and shared memory (in units of 128 bytes, plus
1 KiB the runtime reserves per block); the SM has a fixed budget of each, and the smallest
quotient wins. Then a latency-hiding model: a warp waiting on memory leaves the issue slot to
another warp, so with enough warps the memory latency disappears behind work (Little's law).

Numbers: CUDA C++ Programming Guide, "Compute Capabilities" table (8.0 = A100, 9.0 = H100/H200).
Simplified: no per-sub-partition register rounding, one shared-memory carve-out (the maximum).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import re
import subprocess
import tempfile

ARCHS = {
    # max warps, threads, blocks per SM; registers per SM; max registers per thread;
    # shared memory per SM and per block (bytes); allocation granularities; reserved smem per block.
    "sm_80": dict(max_warps=64, max_threads=2048, max_blocks=32, regs=65536, max_regs_thread=255,
                  smem=167936, smem_block=166912, reg_unit=256, smem_unit=128, smem_reserved=1024),
    "sm_86": dict(max_warps=48, max_threads=1536, max_blocks=16, regs=65536, max_regs_thread=255,
                  smem=102400, smem_block=101376, reg_unit=256, smem_unit=128, smem_reserved=1024),
    "sm_90": dict(max_warps=64, max_threads=2048, max_blocks=32, regs=65536, max_regs_thread=255,
                  smem=233472, smem_block=232448, reg_unit=256, smem_unit=128, smem_reserved=1024),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """The result: blocks and warps per SM, occupancy fraction, and each resource's block limit."""

    arch: str
    threads_per_block: int
    registers_per_thread: int
    shared_bytes_per_block: int
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limits: dict  # resource -> blocks per SM that resource allows
    limiting: str

    @property
    def occupancy(self) -> float:
        return self.active_warps / self.max_warps

    def __str__(self) -> str:
        lim = ", ".join(f"{k}={v}" for k, v in self.limits.items())
        return (
            f"{self.arch}: {self.threads_per_block} threads x {self.registers_per_thread} regs, "
            f"{self.shared_bytes_per_block} B shared -> {self.blocks_per_sm} blocks, "
            f"{self.active_warps}/{self.max_warps} warps ({self.occupancy:.0%}); "
            f"limited by {self.limiting} [{lim}]"
        )


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(arch: str, threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int,
              limits: dict | None = None) -> Occupancy:  # fmt: skip
    """Active blocks and warps per SM, and the limiting resource ("warps", "registers", "shared", "blocks").
    ``limits``: an SM's budgets in the form of an :data:`ARCHS` entry, for an architecture not listed there
    (read off the device itself)."""
    arch = arch if arch.startswith("sm_") else f"sm_{arch}"
    a = limits or ARCHS[arch.rstrip("a")]
    if threads_per_block < 1 or threads_per_block > 1024:
        raise ValueError("threads_per_block must be 1..1024")
    if registers_per_thread > a["max_regs_thread"]:
        raise ValueError(f"{registers_per_thread} registers per thread exceeds {a['max_regs_thread']}")
    if shared_bytes_per_block > a["smem_block"]:
        raise ValueError(f"{shared_bytes_per_block} B shared per block exceeds {a['smem_block']}")
    warps = -(-threads_per_block // 32)
    regs_per_warp = _round_up(max(registers_per_thread, 1) * 32, a["reg_unit"])
    smem = _round_up(shared_bytes_per_block + a["smem_reserved"], a["smem_unit"])
    limits = {
        "warps": a["max_warps"] // warps,
        "registers": (a["regs"] // regs_per_warp) // warps,
        "shared": a["smem"] // smem,
        "blocks": a["max_blocks"],
    }
    blocks = min(limits.values())
    limiting = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    return Occupancy(arch.rstrip("a"), threads_per_block, registers_per_thread, shared_bytes_per_block,
                     blocks, blocks * warps, a["max_warps"], limits, limiting)  # fmt: skip


# ---------------------------------------------------------------------------- ptxas resources
def ptxas_path() -> pathlib.Path | None:
    """The ``ptxas`` that ships inside the triton wheel (``triton/backends/nvidia/bin``), if any."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = pathlib.Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia" / "bin"
    for name in ("ptxas-blackwell", "ptxas"):
        if (base / name).exists():
            return base / name
    return None


def ptxas_resources(ptx: str, arch: str = "sm_90a") -> dict:
    """Registers per thread (and spills) that ptxas assigns to a PTX module: ``ptxas -v``.

    This is what the driver reports as ``n_regs`` after loading Triton's cubin; ptxas needs no
    GPU, so we can ask it on a laptop.
    """
    exe = ptxas_path()
    if exe is None:
        raise FileNotFoundError("ptxas not found (it ships with the triton wheel)")
    with tempfile.TemporaryDirectory() as d:
        src = pathlib.Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([str(exe), "-v", f"-arch={arch}", str(src), "-o", str(pathlib.Path(d) / "k.cubin")],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    text = out.stdout + out.stderr
    regs = re.search(r"Used (\d+) registers", text)
    if regs is None:
        raise RuntimeError(f"ptxas failed: {text.strip()[-300:]}")
    spill = re.search(r"(\d+) bytes spill stores", text)
    return {"registers": int(regs.group(1)), "spill_stores": int(spill.group(1)) if spill else 0}


# ---------------------------------------------------------------------------- latency hiding
def recorded_hbm_latency(gpu: str = "H200") -> float:
    """HBM load latency in cycles for ``gpu`` from ``data/gpu/memory_hierarchy.json`` (about 480 on H200).

    The default of :func:`latency_hiding` and :func:`warps_needed`, so the model and the
    recording cannot drift apart (the model used to assume 600).
    """
    from course_lib.gpu import hierarchy

    gpus = hierarchy.hierarchy()["gpus"]
    if gpu not in gpus:
        raise ValueError(f"no recorded GPU {gpu!r}; recorded: {sorted(gpus)}")
    return float(gpus[gpu]["latency_cycles_approx"]["hbm"])


def latency_hiding(warps: int, latency: float | None = None, work_per_load: float = 20.0,
                   issue_cycles: float = 1.0) -> float:  # fmt: skip
    """Fraction of issue slots used when each warp does ``work_per_load`` instructions per memory
    load that takes ``latency`` cycles (default: the H200's recorded HBM latency).

    One warp alternates work (``work_per_load`` x ``issue_cycles``) and waiting (``latency``);
    with W warps the scheduler fills the waits of one with the work of others, so utilisation is
    min(1, W x work / (work + latency)). Little's law says the same: to keep the pipe busy you
    need latency / work_per_warp warps in flight.
    """
    latency = recorded_hbm_latency() if latency is None else latency
    work = work_per_load * issue_cycles
    return min(1.0, warps * work / (work + latency))


def warps_needed(latency: float | None = None, work_per_load: float = 20.0) -> int:
    """Smallest warp count that reaches full utilisation in :func:`latency_hiding` (default
    latency: the H200's recorded HBM latency)."""
    latency = recorded_hbm_latency() if latency is None else latency
    return int(-(-(work_per_load + latency) // work_per_load))
