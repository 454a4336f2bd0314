"""Cold compile of a real model's GPU kernels, with and without the pool and the kernel cache.

No GPU is needed: course_lib.inductor's Triton code does not depend on the device, and Triton's
compiler builds a cubin for ``sm_90`` (H100/H200) on any machine. So the kernels of GPT-2 with
12 identical layers (transformers, random weights, small width) are generated here, and their
compile to cubins is timed three ways:

* before: every kernel of every graph compiled one after another, as ``@triton.jit`` does on the
  first launch of each (a repeated layer's kernels compiled again, because each had its own name).
* cache only: each distinct kernel once (source hash), one after another in this process.
* pool + cache: each distinct kernel once (source hash), in ``course_lib.inductor.async_compile``'s
  process pool (``workers`` processes), into an empty artefact cache.
* warm: the same again from a fresh process's point of view (empty memory, the disk records kept).

Triton's own disk cache is bypassed (``TRITON_ALWAYS_COMPILE=1``) so "cold" means cold. Inductor's
cold compile of the same model cannot be timed on this machine: with CPU tensors Inductor writes C++,
not Triton; its GPU numbers come from the device recording (data/inductor/).

``main(results_dir)`` writes ``compile.json``; ``--smoke`` runs a 2-layer model with a pool of 2.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

LAYERS = 12


def gpt2(layers: int):
    """GPT-2 (transformers' GPT2LMHeadModel) with ``layers`` blocks, width 64, 16 tokens."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=96, bos_token_id=0, eos_token_id=0, n_embd=64, n_layer=layers, n_head=4, n_positions=64,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    config._attn_implementation = "sdpa"
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(0))
    return model, ids


def graphs_of(model, ids) -> list:
    """course_lib.inductor's compiled graphs of the model's forward (Triton code; run once in the
    interpreter, which also checks it against eager)."""
    import torch

    import course_lib.inductor as ind
    from course_lib import compat

    compat.dynamo_reset()
    rec: list = []
    compiled = torch.compile(model, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen="triton", record=rec))
    with torch.no_grad():
        got, ref = compiled(ids).logits, model(ids).logits
    if not torch.allclose(got, ref, rtol=1e-3, atol=1e-3):
        raise AssertionError("course_lib's Triton forward of GPT-2 differs from eager")
    return [c for kind, c in rec if kind == "compiled"]


def before(jobs) -> float:
    """Every kernel compiled in this process, one after another, no cache (the old path)."""
    from course_lib.inductor import async_compile

    t0 = time.perf_counter()
    for job in jobs:
        async_compile._run_job(job)
    return time.perf_counter() - t0


def run(layers: int = LAYERS, workers: int | None = None) -> dict:
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # Triton's disk cache would make every compile warm
    import course_lib.triton  # noqa: F401  (before any interpreted kernel runs: keeps triton.compile usable)
    from course_lib.inductor import async_compile

    model, ids = gpt2(layers)
    graphs = graphs_of(model, ids)
    jobs = [j for c in graphs for j in async_compile.jobs_for(c)]
    names = sum(len(c.schedule.kernels) for c in graphs)
    result = {"model": f"GPT-2, {layers} layers", "target": "sm_90", "graphs": len(graphs), "kernels": len(jobs),
              "schedule_steps": names, "distinct_sources": len({j.key for j in jobs}),
              "cpus": len(os.sched_getaffinity(0)), "load_average": os.getloadavg()[0]}  # fmt: skip
    with tempfile.TemporaryDirectory() as cache:
        os.environ["COURSE_CACHE_DIR"] = cache  # an empty artefact cache for the pool's records
        warm_up = async_compile.AsyncCompile(workers=1, disk_cache=False)
        warm_up.compile(jobs[:1])  # pay Triton's one-time set-up before either timing
        result["before_s"] = before(jobs)
        distinct = list({j.key: j for j in jobs}.values())
        result["distinct_serial_s"] = before(distinct)  # the cache alone, no pool
        pool = async_compile.AsyncCompile(workers=workers)
        report = pool.compile(jobs)
        pool.close()
        result.update(workers=report.workers, compiled=report.compiled, pool_cache_s=report.seconds)
        again = async_compile.AsyncCompile(workers=workers).compile(jobs)
        result.update(warm_compiled=again.compiled, warm_s=again.seconds)
        result["per_kernel_s"] = sorted(r["seconds"] for r in report.results.values())
    result["speedup"] = result["before_s"] / result["pool_cache_s"]
    return result


def table(r: dict) -> str:
    return "\n".join([
        f"{r['model']}, kernels for {r['target']} ({r['graphs']} graph(s), {r['cpus']} CPUs, load {r['load_average']:.1f})",
        f"  before: {r['kernels']} kernels compiled one by one        {r['before_s']:7.2f} s",
        f"  cache:  {r['distinct_sources']} distinct kernels compiled one by one       {r['distinct_serial_s']:7.2f} s",
        f"  pool:   {r['distinct_sources']} distinct, {r['compiled']} compiled by {r['workers']} workers     "
        f"{r['pool_cache_s']:7.2f} s  ({r['speedup']:.1f}x)",
        f"  warm:   {r['warm_compiled']} compiled, records read from the cache      {r['warm_s']:7.2f} s",
    ])  # fmt: skip


def main(results_dir: pathlib.Path) -> None:
    result = run()
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "compile.json").write_text(json.dumps(result, indent=1))
    print(table(result))


if __name__ == "__main__":
    if "--smoke" in sys.argv:
        print(table(run(layers=2, workers=2)))
    else:
        main(pathlib.Path(__file__).parent / "results")
