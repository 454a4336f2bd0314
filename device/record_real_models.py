"""Record the real-model suite on the GPU machine: each transformers model (tiny config, random
weights) through ``backend="course_lib"`` on CUDA (course_lib.aot, then Triton kernels), inference
and one training step against eager, which graphs fell back and why, and the time of one training
step eager, through Inductor and through the course backend.

Usage (device/run_all.sh runs it): ``python3 device/record_real_models.py OUT_DIR``; writes
``OUT_DIR/real_models.json`` (kept in data/real_models/). Falls back to CPU with a note when no
GPU is present, so the script itself can be tried anywhere.

How, to fit a short GPU lease: one process per (model, backend) job, all compiling at once on the
machine's cores; a barrier once every job has compiled; then the jobs take turns (a lock) to time
their steps, so no timing overlaps another job's work. Correctness runs in full fp32 (TF32 off, see
``real_models.compare``); one extra job repeats MobileNetV2 through Inductor with TF32 on, which
shows what TF32 alone does to that model. Timing: median of 20 training steps (forward, loss,
backward) after 3 warm-up steps, ``torch.cuda.synchronize()`` before and after each step.

Launch overhead (issue 21): the course job times its compiled model twice, launching each Triton
kernel directly (``course_ms``, course_lib.inductor.launcher) and through Triton's JIT dispatch
(``course_jit_ms``, ``launcher.set_direct(False)``), and directly through Triton's Python launcher
instead of torch's C++ one (``course_triton_launcher_ms``, ``launcher.set_static(False)``); on CUDA a third job per model compiles with
``COURSE_CUDAGRAPHS=1`` (each graph replayed as one CUDA graph, ``course_cg_ms``) and checks the
gradients of a step taken while replaying (``cg_grad_error``). ``launch_overhead_us`` in the meta
times one tiny kernel's launch each way (``RECORD_CUDAGRAPHS=0`` drops the CUDA-graph jobs).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import platform
import sys
import time
import traceback

DEADLINE_S = float(os.environ.get("RECORD_DEADLINE_S", "400"))  # then rows not in yet are recorded as missing


def _job(kind: str, name: str, device: str, barrier, lock, out: str) -> None:
    """One (model, backend) job; writes ``out`` (a JSON row)."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # the jobs already fill the cores
    from course_lib.aot import real_models
    from course_lib.inductor import fallback_report

    row: dict = {"name": name, "job": kind}
    keep: dict = {}
    t0 = time.perf_counter()
    try:
        if kind == "course":
            fallback_report().clear()
            cmp = real_models.compare(name, backend="course_lib", device=device, keep=keep)
            row.update(dataclasses.asdict(cmp), ok=cmp.ok(), fallbacks=str(fallback_report()))
        elif kind == "course_cg":  # the course backend with COURSE_CUDAGRAPHS=1 (each graph replayed as a CUDA graph)
            os.environ["COURSE_CUDAGRAPHS"] = "1"
            os.environ.setdefault("COURSE_COMPILE_WORKERS", "2")  # ten more jobs compiling at once
            cmp = real_models.compare(name, backend="course_lib", device=device, keep=keep)
            row.update(cg_grad_error_first_call=cmp.grad_error)
        elif kind == "inductor":
            cmp = real_models.compare(name, backend="inductor", device=device, keep=keep)
            row.update(inductor_grad_error=cmp.grad_error, inductor_ok=cmp.ok(), inductor_compile_s=cmp.compile_s)
        else:  # "inductor_tf32": the same check with TF32 convolutions, as torch runs by default
            cmp = real_models.compare(name, backend="inductor", device=device, allow_tf32=True)
            row.update(tf32_inductor_grad_error=cmp.grad_error, tf32_inductor_train_output_error=cmp.train_output_error)
    except Exception as exc:  # record the failure, go on with the barrier and the others
        row[f"{kind}_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        row[f"{kind}_trace"] = traceback.format_exc()[-2000:]
        if kind == "course":
            row["ok"] = False
    row["seconds"] = round(time.perf_counter() - t0, 1)
    try:
        barrier.wait(timeout=DEADLINE_S)
    except Exception:  # a job that died or ran out of time: time what we have anyway
        pass
    if keep:
        with lock, real_models.tf32(False):
            if kind == "course":
                row["eager_ms"] = real_models.step_ms(keep["eager"], keep["eager"], keep["inputs"])
                row["course_ms"] = real_models.step_ms(keep["twin"], keep["compiled"], keep["inputs"])
                # the same compiled model with every launch through Triton's JIT dispatch (kernel[grid])
                from course_lib.inductor import launcher

                row["launch_sites"] = launcher.report(launcher.sites())
                row["static_sites"] = sum(s.static for s in launcher.sites())  # before set_direct unbinds them
                launcher.set_direct(False)
                row["course_jit_ms"] = real_models.step_ms(keep["twin"], keep["compiled"], keep["inputs"])
                launcher.set_direct(True)
                # direct launches through Triton's Python launcher instead of torch's C++ one
                launcher.set_static(False)
                row["course_triton_launcher_ms"] = real_models.step_ms(keep["twin"], keep["compiled"], keep["inputs"])
                launcher.set_static(True)
            elif kind == "course_cg":
                from course_lib.inductor import cudagraphs

                try:
                    row["course_cg_ms"] = real_models.step_ms(keep["twin"], keep["compiled"], keep["inputs"])
                    row["cg_grad_error"] = _replayed_grad_error(keep)  # after step_ms, every graph is replaying
                except Exception as exc:  # recorded beside the other jobs' rows
                    row["course_cg_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                row["cudagraphs"] = cudagraphs.summary()
            else:
                row["inductor_ms"] = real_models.step_ms(keep["twin"], keep["compiled"], keep["inputs"])
    pathlib.Path(out).write_text(json.dumps(row, default=str))


def _replayed_grad_error(keep: dict) -> float:
    """Worst relative parameter-gradient difference of one more training step, compiled (its graphs
    replaying by now) against eager, both from the same weights."""
    from course_lib.aot import real_models

    grads = []
    for module, run in ((keep["eager"], keep["eager"]), (keep["twin"], keep["compiled"])):
        module.zero_grad(set_to_none=True)
        real_models.loss_of(run(**keep["inputs"])).backward()
        grads.append({n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None})
    eager, course = grads
    scale = max(float(g.abs().max()) for g in eager.values())
    return max(float((course[n] - g).abs().max()) / max(float(g.abs().max()), 1e-3 * scale) for n, g in eager.items())


def launch_overhead(n: int = 2000, device: str = "cuda") -> dict:
    """Microseconds of host time per launch of one tiny course kernel (``x * 2 + 1`` on 1024 floats),
    ``n`` launches back to back then one synchronise: the direct launch (a bound DirectLaunch site),
    the same kernel through ``kernel[grid]`` (Triton's JIT dispatch), and eager's ``torch.mul``."""
    import torch

    import course_lib.inductor as ind
    from course_lib import compat, decomp
    from course_lib.inductor.launcher import DirectLaunch

    def fn(x):
        return (x * 2.0 + 1.0,)

    x = torch.randn(1024, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    c = ind.compile_graph(compat.make_fx(fn, x, decompositions=decomp.DECOMPOSITIONS), [x], codegen="triton")
    got = c(x)[0]
    c(x)
    torch.testing.assert_close(got, fn(x)[0])
    module = c.call.__globals__["kernel0"].__globals__
    site = next(v for v in module.values() if isinstance(v, DirectLaunch))
    y = torch.empty_like(x)

    def per_launch_us(launch) -> float:
        launch()
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            launch()
        sync()
        return round((time.perf_counter() - t0) / n * 1e6, 2)

    return {"bound": site.bound, "refused": site.refused, "direct_us": per_launch_us(lambda: site(x, y)),
            "jit_us": per_launch_us(lambda: site.kernel[site.grid](x, y, *site.ints, **site.constexprs,
                                                                   num_warps=site.num_warps)),
            "eager_mul_us": per_launch_us(lambda: torch.mul(x, 2.0, out=y)),
            "course_graph_call_us": per_launch_us(lambda: c(x))}  # fmt: skip


def _merge(parts: list[dict]) -> dict:
    row: dict = {}
    for p in parts:
        row.update({k: v for k, v in p.items() if k not in ("job", "seconds")})
        row[f"{p['job']}_job_s"] = p.get("seconds")
    if "course_ms" in row and "eager_ms" in row:
        row["course_over_eager"] = round(row["course_ms"] / row["eager_ms"], 3)
    if "course_ms" in row and "inductor_ms" in row:
        row["course_over_inductor"] = round(row["course_ms"] / row["inductor_ms"], 3)
    if "course_cg_ms" in row and "eager_ms" in row:
        row["course_cg_over_eager"] = round(row["course_cg_ms"] / row["eager_ms"], 3)
    if "course_jit_ms" in row and "eager_ms" in row:
        row["course_jit_over_eager"] = round(row["course_jit_ms"] / row["eager_ms"], 3)
    return row


def _geomean(xs: list[float]) -> float | None:
    return round(math.exp(sum(math.log(x) for x in xs) / len(xs)), 3) if xs else None


def main(out_dir: str) -> None:
    import multiprocessing as mp

    import torch

    from course_lib.aot import real_models

    out = pathlib.Path(out_dir)
    parts_dir = out / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    names = [n for n in os.environ.get("RECORD_MODELS", ",".join(real_models.MODELS)).split(",") if n]
    kinds = ("course", "inductor", "course_cg") if device == "cuda" and os.environ.get("RECORD_CUDAGRAPHS", "1") == "1" else (
        "course", "inductor")  # fmt: skip
    jobs = [(kind, name) for name in names for kind in kinds]
    if "mobilenet_v2" in names:
        jobs.append(("inductor_tf32", "mobilenet_v2"))
    ctx = mp.get_context("spawn")
    barrier, lock = ctx.Barrier(len(jobs)), ctx.Lock()
    t0 = time.perf_counter()
    procs = []
    for kind, name in jobs:
        path = str(parts_dir / f"{name}.{kind}.json")
        p = ctx.Process(target=_job, args=(kind, name, device, barrier, lock, path))
        p.start()
        procs.append((p, kind, name, path))
    for p, *_ in procs:
        p.join(timeout=max(1.0, DEADLINE_S + 60 - (time.perf_counter() - t0)))
        if p.is_alive():
            p.terminate()
    by_name: dict[str, list[dict]] = {}
    for _, kind, name, path in procs:
        part = json.loads(pathlib.Path(path).read_text()) if os.path.exists(path) else {
            "name": name, "job": kind, f"{kind}_error": "no result before the deadline"}  # fmt: skip
        by_name.setdefault(name, []).append(part)
    rows = [_merge(by_name[name]) for name in names]
    overhead: dict = {}
    if device == "cuda":
        try:
            overhead = launch_overhead()
        except Exception as exc:  # recorded, never fatal
            overhead = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    for r in rows:
        print(json.dumps({k: v for k, v in r.items() if not k.endswith("trace")}), flush=True)
    timed = [r for r in rows if "course_over_eager" in r]
    meta = {"device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
            "torch": torch.__version__, "python": platform.python_version(),
            "precision": "fp32 (TF32 off for convolutions and matmuls) unless a field says tf32",
            "timing": "median of 20 training steps (forward, loss, backward) after 3 warm-up steps, "
                      "torch.cuda.synchronize() before and after each; one job timing at a time",
            "compile_note": "jobs compiled concurrently, one process per (model, backend) on the machine's cores",
            "geomean_course_over_eager": _geomean([r["course_over_eager"] for r in timed]),
            "geomean_course_over_inductor": _geomean([r["course_over_inductor"] for r in timed
                                                      if "course_over_inductor" in r]),
            "geomean_course_jit_over_eager": _geomean([r["course_jit_over_eager"] for r in timed
                                                       if "course_jit_over_eager" in r]),
            "geomean_course_cg_over_eager": _geomean([r["course_cg_over_eager"] for r in timed
                                                      if "course_cg_over_eager" in r]),
            "launch_overhead_us": overhead,
            "course_jit_note": "course_jit_ms: the same compiled model timed again with every Triton launch "
                               "through kernel[grid] (launcher.set_direct(False)); course_ms launches directly",
            "wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
    try:
        import transformers

        meta["transformers"] = transformers.__version__
    except ImportError:
        pass
    (out / "real_models.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(json.dumps(meta), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "rec/real_models")
