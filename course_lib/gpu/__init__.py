"""Module 5: GPU architecture. A SIMT simulator that runs the PTX Triton emits, memory, occupancy, collectives.

Stable API (notebooks and outside evaluators use these):

* ``run_ptx(ptx_text, kernel_name, grid, block, args)`` -> :class:`RunResult` (outputs plus
  per-warp statistics: issued instructions, divergence efficiency, global sectors/lines,
  shared-memory bank conflicts; memory events; a timeline).
* ``occupancy(arch, threads_per_block, registers_per_thread, shared_bytes_per_block)`` ->
  :class:`Occupancy` (active warps per SM and the limiting resource).

Submodules: ``ptx`` (parser), ``ptx_exec`` (instruction semantics), ``simt`` (warps, scheduling,
statistics), ``teach`` (CUDA-style kernels in Python), ``memory`` (coalescing, banks),
``hierarchy`` (sourced table, roofline, tiling), ``occupancy_calculator``, ``tensor_core``,
``collectives``, ``plots``, ``reference`` (the stored Triton PTX).
"""

from __future__ import annotations

from course_lib.gpu.memory import bank_wavefronts, lines_touched, sectors_touched
from course_lib.gpu.occupancy_calculator import Occupancy, occupancy
from course_lib.gpu.ptx import parse_ptx
from course_lib.gpu.ptx_exec import run_ptx
from course_lib.gpu.simt import RunResult, WarpStats
from course_lib.gpu.teach import launch

__all__ = [
    "Occupancy", "RunResult", "WarpStats", "bank_wavefronts", "launch", "lines_touched",
    "occupancy", "parse_ptx", "run_ptx", "sectors_touched",
]  # fmt: skip
