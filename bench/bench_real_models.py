"""Benchmark: real models (transformers, tiny configs, random weights) in eager, through
``torch.compile`` with Inductor, and with ``backend="course_lib"``, in one process.

Per model (course_lib.aot.real_models): cold compile time of one training step (first call,
forward and backward, minus one eager step; Inductor's cache in a fresh temporary directory),
and the median runtime of a training step (forward, loss, backward) for eager, Inductor and
course_lib, timed in interleaved rounds so a noisy neighbour hits all three alike. Prints a
table, the geomean ratios course/eager, course/Inductor and course's cold compile over
Inductor's, and which graphs left the course pipeline (a fallback is counted, not hidden).
Writes ``results_dir/real_models.json``. ``BENCH_MODELS="gpt2 resnet"`` (or
``python bench/bench_real_models.py --models gpt2 resnet --rounds 15``) picks a subset;
``--device cuda`` runs the same on a GPU (every timed step between two ``torch.cuda.synchronize()``).
``--decomposed-attention`` adds a fourth contestant to the rounds: course_lib with attention decomposed
into bmm, softmax, bmm on every device (``course_lib.decomp.FUSED_ATTENTION`` emptied while it
compiles), so the fused kernel's gain is measured in the same rounds (``fused_vs_decomposed``).
``--dtype bfloat16`` (or ``float16``) trains every contestant in half precision.
The configs are the test suite's (two layers, widths of 32): small enough that per-call
overhead (Python wrappers, kernel launches, waking OpenMP threads) weighs as much as arithmetic.

Cold compile is cold for both compilers: Inductor's cache and course_lib's artefact cache
(``COURSE_CACHE_DIR``: the g++ outputs and precompiled header) start in fresh temporary
directories. On a shared machine the medians move with the neighbours' load (recorded as the
load average beside each row); the ratios of the fastest rounds (``best_*``) move less.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import statistics
import tempfile
import time

ROUNDS = 7


def _step(model, inputs):
    from course_lib.aot.real_models import loss_of

    model.zero_grad(set_to_none=True)
    loss = loss_of(model(**inputs))
    loss.backward()
    return loss


def _fallbacks(records: list) -> list[str]:
    return [f"{kind}: {reason}" for kind, reason in records if kind != "compiled"]


def _decomposed_attention(backend):
    """``backend`` with :data:`course_lib.decomp.FUSED_ATTENTION` empty while it compiles a graph."""
    from course_lib import decomp

    def compile_decomposed(gm, example_inputs):
        with decomp.fused_attention(()):
            return backend(gm, example_inputs)

    return compile_decomposed


def measure(name: str, rounds: int = ROUNDS, device: str = "cpu", decomposed_attention: bool = False,
            dtype: str = "float32") -> dict:  # fmt: skip
    import copy

    import torch

    from course_lib import compat
    from course_lib.aot import real_models
    from course_lib.inductor import compile_fx

    compat.dynamo_reset()
    base, inputs = real_models.build(name)
    dt = getattr(torch, dtype)
    base = base.to(device=device, dtype=dt)
    inputs = {k: v.to(device=device, dtype=dt if v.is_floating_point() else None) for k, v in inputs.items()}
    base.train()
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    records: list = []
    models = {"eager": base, "inductor": torch.compile(copy.deepcopy(base), backend="inductor"),
              "course_lib": torch.compile(copy.deepcopy(base),
                                          backend=lambda gm, ex: compile_fx(gm, ex, record=records))}  # fmt: skip
    if decomposed_attention:
        models["course_decomposed"] = torch.compile(
            copy.deepcopy(base), backend=_decomposed_attention(lambda gm, ex: compile_fx(gm, ex, record=records))
        )

    def timed(model) -> float:
        sync()
        t0 = time.perf_counter()
        _step(model, inputs)
        sync()
        return time.perf_counter() - t0

    eager_first = timed(base)
    compile_s = {key: timed(models[key]) - eager_first for key in models if key != "eager"}
    for model in models.values():  # warm-up: allocator, lazy CUDA/cuBLAS state, second-call paths
        timed(model)
    times: dict[str, list[float]] = {k: [] for k in models}
    load = os.getloadavg()[0]
    for _ in range(rounds):  # interleaved
        for key, model in models.items():
            times[key].append(timed(model))
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    extra = {"fused_vs_decomposed": med["course_lib"] / med["course_decomposed"]} if decomposed_attention else {}
    return {**extra, "model": name, "device": device, "dtype": dtype, "family": real_models.MODELS[name].family, "runtime_s": med, "best_s": best,
            "compile_s": compile_s, "course_vs_eager": med["course_lib"] / med["eager"],
            "course_vs_inductor": med["course_lib"] / med["inductor"],
            "best_course_vs_eager": best["course_lib"] / best["eager"],
            "best_course_vs_inductor": best["course_lib"] / best["inductor"],
            "cold_compile_vs_inductor": compile_s["course_lib"] / max(compile_s["inductor"], 1e-9),
            "load_avg": [round(load, 2), round(os.getloadavg()[0], 2)], "fallbacks": _fallbacks(records)}  # fmt: skip


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


RATIOS = ("course_vs_eager", "course_vs_inductor", "cold_compile_vs_inductor", "best_course_vs_eager",
          "best_course_vs_inductor")  # fmt: skip


def main(results_dir: pathlib.Path, models: list[str] | None = None, rounds: int = ROUNDS, device: str = "cpu",
         decomposed_attention: bool = False, dtype: str = "float32") -> None:  # fmt: skip
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bench-real-inductor-"))
    os.environ.setdefault("COURSE_CACHE_DIR", tempfile.mkdtemp(prefix="bench-real-course-"))
    from tqdm.auto import tqdm

    from course_lib.aot import real_models

    names = models or os.environ.get("BENCH_MODELS", "").split() or list(real_models.MODELS)
    unknown = [n for n in names if n not in real_models.MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(real_models.MODELS)}")
    rows = [measure(n, rounds, device, decomposed_attention, dtype) for n in tqdm(names, desc="real models")]
    summary = {
        k: geomean(r[k] for r in rows) for k in RATIOS + (("fused_vs_decomposed",) if decomposed_attention else ())
    }
    head = f"{'model':14s} {'eager ms':>9s} {'inductor':>9s} {'course':>9s} {'c/eager':>8s} {'c/ind':>7s} " \
           f"{'compile ind s':>13s} {'course s':>9s}  fallbacks"  # fmt: skip
    print(head)
    for r in rows:
        t, c = r["runtime_s"], r["compile_s"]
        print(f"{r['model']:14s} {t['eager'] * 1e3:9.2f} {t['inductor'] * 1e3:9.2f} {t['course_lib'] * 1e3:9.2f} "
              f"{r['course_vs_eager']:8.2f} {r['course_vs_inductor']:7.2f} {c['inductor']:13.1f} "
              f"{c['course_lib']:9.1f}  {len(r['fallbacks'])}  best c/e {r['best_course_vs_eager']:.2f} "
              f"c/i {r['best_course_vs_inductor']:.2f}  load {r['load_avg']}"
              + (f"  fused/decomposed attention {r['fused_vs_decomposed']:.2f}" if decomposed_attention else ""))  # fmt: skip
    print(
        "geomean: course/eager {course_vs_eager:.2f}x, course/Inductor {course_vs_inductor:.2f}x, "
        "cold compile course/Inductor {cold_compile_vs_inductor:.2f}x; fastest rounds: course/eager "
        "{best_course_vs_eager:.2f}x, course/Inductor {best_course_vs_inductor:.2f}x".format(**summary)
    )
    results_dir.mkdir(parents=True, exist_ok=True)
    out = {"rounds": rounds, "what": "one training step (forward, loss, backward), median of interleaved rounds",
           "threads": _threads(), "rows": rows, "geomean": summary}  # fmt: skip
    (results_dir / "real_models.json").write_text(json.dumps(out, indent=1) + "\n")


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="model names (default: all, or $BENCH_MODELS)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved timing rounds per model")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parent / "results")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--decomposed-attention", action="store_true",
                        help="also time course_lib with attention decomposed (bmm, softmax, bmm)")  # fmt: skip
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="parameters and floating inputs in this dtype (half-precision training)")  # fmt: skip
    cli = parser.parse_args()
    main(cli.out, cli.models, cli.rounds, cli.device, cli.decomposed_attention, cli.dtype)
