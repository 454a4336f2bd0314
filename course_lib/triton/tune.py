"""Autotuning: measure on a GPU, otherwise recorded H200 timings, otherwise a cost model.

Teaches: ``python/triton/runtime/autotuner.py``. ``@triton.autotune(configs=[triton.Config(
{"BLOCK_M": 128, ...}, num_warps=8, num_stages=3), ...], key=["M", "N", "K"])`` wraps a kernel;
the first launch for each new value of ``key`` runs every config with ``triton.testing.do_bench``
and keeps the fastest in a cache (``prune_configs_by`` and ``early_config_prune`` drop configs
before timing). Inductor does the same for its generated kernels: ``torch/_inductor/runtime/
triton_heuristics.py`` builds a small config list per kernel kind (pointwise, reduction,
template) and times them at the kernel's first launch; ``max_autotune`` makes the lists longer
and adds matmul templates.

:func:`pick` says which source its numbers came from. The second half is the step before timing
(03b's exercise): :func:`prune` drops configs whose compile metadata (shared memory, registers,
spills) does not fit a GPU's :class:`Limits`, as ``prune_configs_by={"early_config_prune": ...}``
does, and :func:`autotune` times the rest; :func:`check_autotuner` checks a learner's version
against the persistent matmul's config space recorded on an H200 (``data/triton/autotune_sm90.json``).
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


# ----------------------------------------------------------------------------- pruning by compile metadata
#
# What ``@triton.autotune(..., prune_configs_by={"early_config_prune": fn})`` is for: a config
# whose kernel cannot launch (too much shared memory: Triton raises ``OutOfResources`` when the
# module is loaded) or that spills its accumulator to local memory is not worth a benchmark.
# Both facts are in the compiled kernel's metadata, known before any timing: ``metadata.shared``
# (bytes of shared memory per program) and ``n_regs`` / ``n_spills`` (from ptxas).

AUTOTUNE_RECORDING = "triton/autotune_sm90.json"

#: The persistent TMA matmul's config space (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), timed
#: at 4096^3 bf16 on the H200 by device/record_triton.py together with each config's compile metadata.
TMA_CONFIGS = [
    (128, 256, 64, 8, 2), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3),
    (128, 256, 64, 4, 3), (256, 128, 64, 4, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4),
    (128, 128, 64, 8, 5), (128, 128, 128, 8, 3), (128, 128, 128, 8, 4), (64, 256, 64, 4, 4),
    (64, 256, 64, 4, 5), (128, 256, 32, 8, 6), (128, 64, 64, 4, 5), (64, 128, 64, 4, 5),
]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one program may use on a GPU: shared memory per block (the opt-in maximum, ``cudaDevAttr
    MaxSharedMemoryPerBlockOptin``), the register file of an SM, and registers per thread."""

    smem_per_block: int
    regs_per_sm: int = 65536
    regs_per_thread: int = 255


#: Hopper (H100 / H200) as the H200 reported it through torch.cuda.get_device_properties.
H200_LIMITS = Limits(smem_per_block=232448)


def fits(meta: dict, limits: Limits) -> bool:
    """A config fits when its shared memory fits one block's budget, a block's registers fit the
    SM's file (registers per thread x 32 x num_warps), and ptxas did not spill."""
    threads = 32 * meta["num_warps"]
    return (meta["shared"] <= limits.smem_per_block and meta["registers"] * threads <= limits.regs_per_sm
            and meta["registers"] <= limits.regs_per_thread and meta["spills"] == 0)  # fmt: skip


def prune(configs: list, meta: dict, limits: Limits) -> list:
    """The configs that :func:`fits`, in their order (Triton's ``early_config_prune``)."""
    return [c for c in configs if fits(meta[c], limits)]


def autotune(configs: list, meta: dict, limits: Limits, measure) -> list:
    """Prune by metadata, time what is left once each, return it fastest first."""
    kept = prune(configs, meta, limits)
    times = {c: measure(c) for c in kept}
    return sorted(kept, key=times.__getitem__)


@dataclasses.dataclass
class Space:
    """A recorded config space: configs, their compile metadata, their H200 times (None: did not
    launch), the limits the H200 reported, and where the numbers come from."""

    configs: list
    meta: dict
    times_us: dict
    limits: Limits
    source: str


def recorded_space(path: str = AUTOTUNE_RECORDING) -> Space | None:
    """The persistent matmul's space as recorded on the H200 (None when the recording is absent)."""
    rec = recorded.load(path)
    if not rec:
        return None
    configs, meta, times = [], {}, {}
    for row in rec.value["configs"]:
        cfg = tuple(row["config"])
        configs.append(cfg)
        meta[cfg] = {k: row[k] for k in ("shared", "registers", "spills", "num_warps")}
        times[cfg] = row["time_us"]
    lim = rec.value["limits"]
    limits = Limits(lim["smem_per_block"], lim["regs_per_sm"], lim.get("regs_per_thread", 255))
    return Space(configs, meta, times, limits, rec.banner)


def _misfit(meta: dict, limits: Limits) -> str:
    """Why a config does not fit, in words ("" when it fits)."""
    threads = 32 * meta["num_warps"]
    if meta["shared"] > limits.smem_per_block:
        return f"needs {meta['shared']:,} bytes of shared memory; a block may have {limits.smem_per_block:,}"
    if meta["registers"] * threads > limits.regs_per_sm or meta["registers"] > limits.regs_per_thread:
        return (f"needs {meta['registers']} registers x {threads} threads; an SM has {limits.regs_per_sm:,} "
                f"registers")  # fmt: skip
    if meta["spills"]:
        return f"spills {meta['spills']} bytes per thread to local memory"
    return ""


class OutOfResources(RuntimeError):
    """What a launch of a config that does not fit raises on a GPU (Triton's ``OutOfResources``)."""


def recorded_measure(space: Space, limits: Limits, calls: list):
    """A ``measure(cfg)`` that replays the recording: the H200 time of ``cfg``; raises
    :class:`OutOfResources` for a config that does not fit ``limits``. Appends each call to ``calls``."""

    def measure(cfg):
        cfg = tuple(cfg)
        calls.append(cfg)
        if cfg not in space.meta:
            raise KeyError(f"{config_name(cfg)} is not in the config space")
        why = _misfit(space.meta[cfg], limits)
        if why or space.times_us[cfg] is None:
            raise OutOfResources(f"{config_name(cfg)} {why or 'did not launch on the H200'}")
        return space.times_us[cfg]

    return measure


# ----------------------------------------------------------------------------- checking a learner's autotuner


def _shuffled_times(space: Space, seed: int = 3) -> dict:
    """The same timings dealt to the configs in another order (a "different matrix"), so a
    ranking copied from the recording does not pass."""
    import random

    ok = [c for c in space.configs if space.times_us[c] is not None]
    values = [space.times_us[c] for c in ok]
    random.Random(seed).shuffle(values)
    return {**space.times_us, **dict(zip(ok, values))}


def autotune_cases(space: Space) -> list[tuple[str, Limits, dict]]:
    """(label, limits, timings): the H200 as recorded, and three variations of it that a rule
    with a wrong limit, a missing register test or a hard-coded ranking gets wrong."""
    h = space.limits
    return [
        ("the H200 as recorded", h, space.times_us),
        ("a GPU with 160 KiB of shared memory per block", dataclasses.replace(h, smem_per_block=163840),
         space.times_us),
        ("a GPU with half the H200's register file", dataclasses.replace(h, regs_per_sm=h.regs_per_sm // 2),
         space.times_us),
        ("the H200, timings of another problem size", h, _shuffled_times(space)),
    ]  # fmt: skip


def check_autotuner(fn, space: Space | None = None):
    """Verdict on ``fn(configs, meta, limits, measure) -> configs fastest first``.

    On every case of :func:`autotune_cases`: it must time each config that fits exactly once,
    never one that does not (that launch raises :class:`OutOfResources`, as on a GPU), and
    return the fitting configs fastest first. The expected ranking is never shown."""
    from course_lib.check.compare import Verdict

    space = space or recorded_space()
    if space is None:
        return Verdict(False, f"the H200 recording data/{AUTOTUNE_RECORDING} is missing; cannot check")
    for label, limits, times in autotune_cases(space):
        replay = Space(space.configs, space.meta, times, limits, space.source)
        calls: list = []
        try:
            got = fn(list(space.configs), {c: dict(m) for c, m in space.meta.items()}, limits,
                     recorded_measure(replay, limits, calls))  # fmt: skip
        except OutOfResources as exc:
            return Verdict(False, f"on {label}: you timed a config that cannot run there ({exc})")
        fitting = [c for c in space.configs if fits(space.meta[c], limits)]
        got = [tuple(c) for c in got] if isinstance(got, (list, tuple)) else got
        if not isinstance(got, list):
            return Verdict(False, f"on {label}: expected a list of configs, got {type(got).__name__}")
        if len(calls) != len(set(calls)):
            return Verdict(False, f"on {label}: you timed some configs more than once ({len(calls)} timings)")
        extra, missing = set(calls) - set(fitting), set(fitting) - set(calls)
        if extra:  # timed, caught the OutOfResources, went on: still a compile and a launch wasted
            return Verdict(False, f"on {label}: you timed {len(extra)} config(s) that the metadata rules out")
        if missing:
            return Verdict(False, f"on {label}: {len(missing)} config(s) that fit were never timed")
        if sorted(got) != sorted(fitting):
            return Verdict(False, f"on {label}: return every config you timed, and only those "
                                  f"({len(got)} returned, {len(calls)} timed)")  # fmt: skip
        ranked = sorted(fitting, key=times.__getitem__)
        if got != ranked:
            first = next(i for i, (a, b) in enumerate(zip(got, ranked)) if a != b)
            return Verdict(False, f"on {label}: the ranking is not fastest first (position {first + 1} is wrong)")
    return Verdict(True, f"pruned and ranked correctly on {len(autotune_cases(space))} cases")
