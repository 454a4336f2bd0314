"""Autotuning: measure on a GPU, otherwise recorded H200 timings, otherwise a cost model.

Teaches: ``python/triton/runtime/autotuner.py``. ``@triton.autotune(configs=[triton.Config(
{"BLOCK_M": 128, ...}, num_warps=8, num_stages=3), ...], key=["M", "N", "K"])`` wraps a kernel;
the first launch for each new value of ``key`` runs every config with ``triton.testing.do_bench``
and keeps the fastest in a cache (``prune_configs_by`` and ``early_config_prune`` drop configs
before timing). Inductor does the same for its generated kernels: ``torch/_inductor/runtime/
triton_heuristics.py`` builds a small config list per kernel kind (pointwise, reduction,
template) and benchmarks them when ``max_autotune`` is on, otherwise takes a heuristic pick.

:func:`pick` says which source its numbers came from.
"""

from __future__ import annotations

import dataclasses

from course_lib import env, recorded

RECORDING = "triton/matmul_configs.json"

#: Matmul configs (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) the device script times.
MATMUL_CONFIGS = [
    (128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 32, 4, 4), (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 3), (256, 128, 64, 8, 3), (128, 64, 64, 4, 4), (32, 32, 32, 4, 2),
]  # fmt: skip

H200 = {"sms": 132, "tflops_bf16": 989.0, "hbm_gbs": 4800.0, "smem_bytes": 232448, "regs_per_sm": 65536}


def config_name(cfg) -> str:
    bm, bn, bk, w, s = cfg
    return f"{bm}x{bn}x{bk}/w{w}/s{s}"


def model_time_us(cfg, M: int, N: int, K: int, dtype_bytes: int = 2, hw: dict = H200) -> float:
    """A roofline-style estimate for one matmul config (microseconds).

    Compute: 2MNK / peak, scaled by how full the last *wave* of tiles is (tiles / (waves * SMs)).
    Memory: each tile reads a BLOCK_M x K strip of A and K x BLOCK_N strip of B. Infeasible
    configs (shared memory of the pipeline over the SM's) get infinity; small tiles pay for
    fewer FLOPs per byte and a smaller MMA, modelled as a peak fraction min(1, BM*BN/(128*128)).
    The pipeline holds ``num_stages`` A and B tiles, as Triton's sm_90 compilation does (sm_80's
    ``cp.async`` pipeline holds ``num_stages - 1``; 03b measures both).
    """
    bm, bn, bk, warps, stages = cfg
    smem = (bm * bk + bk * bn) * dtype_bytes * stages
    if smem > hw["smem_bytes"]:
        return float("inf")
    tiles = -(-M // bm) * -(-N // bn)
    waves = -(-tiles // hw["sms"])
    fill = tiles / (waves * hw["sms"])
    eff = min(1.0, bm * bn / (128 * 128)) * fill
    compute = 2 * M * N * K / (hw["tflops_bf16"] * 1e12 * eff)
    traffic = (M * K * -(-N // bn) + K * N * -(-M // bm) + M * N) * dtype_bytes
    memory = traffic / (hw["hbm_gbs"] * 1e9)
    return max(compute, memory) * 1e6


@dataclasses.dataclass
class Choice:
    best: tuple
    source: str  # "do_bench on this GPU" | "recorded H200 timings" | "analytic cost model"
    times_us: dict  # config name -> time


def pick(M: int = 4096, N: int = 4096, K: int = 4096, configs=MATMUL_CONFIGS, measure=None) -> Choice:
    """Choose a matmul config. ``measure(cfg) -> microseconds`` is used on a GPU (do_bench);
    without one, recorded H200 timings for the same shape, else :func:`model_time_us`."""
    if measure is not None and env.has_cuda():
        times = {config_name(c): measure(c) for c in configs}
        source = "do_bench on this GPU"
    else:
        rec = recorded.load(RECORDING)
        shape = f"{M}x{N}x{K}"
        if rec and shape in rec.value.get("timings_us", {}):
            got = rec.value["timings_us"][shape]
            configs = [c for c in configs if config_name(c) in got]
            times = {config_name(c): got[config_name(c)] for c in configs}
            source = "recorded H200 timings"
        else:
            times = {config_name(c): model_time_us(c, M, N, K) for c in configs}
            source = "analytic cost model"
    best = min(configs, key=lambda c: times[config_name(c)])
    return Choice(best, source, times)
