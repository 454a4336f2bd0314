"""The memory hierarchy, the roofline, and what tiling saves.

Teaches: why most kernels are limited by bytes, not FLOPs. The roofline model (Williams,
Waterman, Patterson, "Roofline: an insightful visual performance model", CACM 2009) says a
kernel doing I FLOPs per byte of DRAM traffic reaches at most min(peak_flops, I x bandwidth).
Tiling raises I: a matmul tile of BM x BN outputs reuses each loaded element of A BN times and
each element of B BM times. Real counterparts: Nsight Compute's roofline chart; Inductor's
``torch/_inductor/codegen/triton.py`` picks tile sizes with the same trade-off in mind.

The numbers come from ``data/gpu/memory_hierarchy.json`` (vendor datasheets and whitepapers,
cited inside the file).
"""

from __future__ import annotations

import dataclasses
import json

from course_lib import env


def hierarchy() -> dict:
    """The sourced table from ``data/gpu/memory_hierarchy.json``."""
    return json.loads((env.data_dir() / "gpu" / "memory_hierarchy.json").read_text())


def hierarchy_rows() -> tuple[list, list]:
    """(rows, headers) for a table of the hierarchy: one row per GPU."""
    g = hierarchy()["gpus"]
    headers = ["GPU", "SMs", "regs/SM KiB", "shared max/SM KiB", "L2 MiB", "HBM GB", "HBM GB/s",
               "L2 lat (cyc, approx)", "HBM lat (cyc, approx)", "FP32 TFLOP/s", "BF16 TC TFLOP/s"]  # fmt: skip
    rows = [[name, d["sms"], d["registers_per_sm_bytes"] // 1024, d["shared_max_per_sm_bytes"] // 1024,
             d["l2_bytes"] // 2**20, d["hbm_gb"], d["hbm_bandwidth_gbs"],
             d["latency_cycles_approx"]["l2"], d["latency_cycles_approx"]["hbm"],
             d["peak_fp32_tflops"], d["peak_bf16_tensor_tflops"]] for name, d in g.items()]  # fmt: skip
    return rows, headers


@dataclasses.dataclass(frozen=True)
class KernelCost:
    """FLOPs and DRAM bytes of one kernel launch (the minimum traffic: each byte once)."""

    name: str
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gbs: float) -> float:
    """The roofline: min(peak, intensity x bandwidth), in TFLOP/s."""
    return min(peak_tflops, intensity * bandwidth_gbs / 1e3)


def ridge_point(peak_tflops: float, bandwidth_gbs: float) -> float:
    """FLOPs per byte where the kernel stops being memory bound."""
    return peak_tflops * 1e3 / bandwidth_gbs


def course_kernels(n: int = 1 << 24, rows: int = 4096, cols: int = 4096, mnk: int = 4096) -> list:
    """The kernels of Modules 3 and 4 with their FLOP and byte counts (fp32 unless named)."""
    return [
        KernelCost("vector add (M3)", n, 12 * n),
        KernelCost("fused x*2+y, silu, where (M3/M4 fused)", 8 * n, 10 * n),  # fp16 x, fp32 y, fp32 out
        KernelCost("unfused: 3 pointwise kernels (M4)", 8 * n, 3 * 12 * n),
        KernelCost("row softmax (M3)", 5 * rows * cols, 8 * rows * cols),
        KernelCost("layer norm (M4)", 8 * rows * cols, 8 * rows * cols),
        KernelCost("matmul bf16 4096^3 (M3)", 2 * mnk**3, 2 * 3 * mnk * mnk),
    ]


def tiled_matmul_loads(m: int, n: int, k: int, bm: int, bn: int) -> int:
    """Elements loaded from global memory by a matmul tiled into BM x BN output tiles.

    Each output tile walks K and loads BM x K of A and K x BN of B, so the total is
    M*N*K*(1/BN + 1/BM); with 1 x 1 "tiles" (no reuse) it is 2*M*N*K.
    """
    tiles = -(-m // bm) * -(-n // bn)
    return tiles * (bm * k + k * bn)


def tile_intensity(bm: int, bn: int, elem_bytes: int = 2) -> float:
    """FLOPs per byte loaded of one BM x BN tile step: 2*BM*BN*BK / ((BM+BN)*BK*elem)."""
    return 2 * bm * bn / ((bm + bn) * elem_bytes)
