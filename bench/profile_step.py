"""Where the host time of one training step goes: cProfile over many steps of a real model.

``python bench/profile_step.py convnext --device cuda --steps 200 --backend course_lib``
prints the functions with the most own time (``tottime``) and the most time including callees,
after the model has compiled and warmed up. On a GPU the steps are asynchronous: the profile is
the host's work (Python, launches, allocation); one synchronise at the end, outside the profile.
Use it beside eager (``--backend eager``) to see what a compiled step does that eager does not.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats


def main() -> None:
    import torch

    import course_lib.inductor  # noqa: F401  (registers backend="course_lib" without the installed entry point)
    from course_lib.aot import real_models

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--backend", default="course_lib", help="course_lib, inductor or eager")
    parser.add_argument("--top", type=int, default=25)
    cli = parser.parse_args()
    model, inputs = real_models.build(cli.model)
    model, inputs = model.to(cli.device).train(), {k: v.to(cli.device) for k, v in inputs.items()}
    run = model if cli.backend == "eager" else torch.compile(model, backend=cli.backend)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        real_models.loss_of(run(**inputs)).backward()

    for _ in range(5):
        step()
    if cli.device.startswith("cuda"):
        torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(cli.steps):
        step()
    prof.disable()
    if cli.device.startswith("cuda"):  # what a step asks of the GPU: kernels and runtime calls, counted
        torch.cuda.synchronize()
        import collections
        import time

        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(10):
                step()
            torch.cuda.synchronize()
        kinds = collections.Counter()
        for e in p.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                kinds["gpu kernels and copies"] += 1
            elif e.name.startswith("cu") and "Launch" in e.name:  # cudaLaunchKernel, cuLaunchKernel...
                kinds[e.name] += 1
        print(f"=== {cli.model} {cli.backend}: a step, counted over 10 ===")
        print({k: v / 10 for k, v in kinds.items()})
        t = time.perf_counter()
        for _ in range(cli.steps):
            step()
        host = time.perf_counter() - t
        torch.cuda.synchronize()
        print(
            f"host time a step {host / cli.steps * 1e3:.3f} ms, with the GPU's {(time.perf_counter() - t) / cli.steps * 1e3:.3f} ms"
        )
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(cli.top)
        print(f"=== {cli.model} {cli.backend} by {key}, {cli.steps} steps ===")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
