"""Probe: host time of one Triton launch three ways (a CUDA machine): ``kernel[grid](...)``, the
binary's Python launcher ``CompiledKernel.run`` (what course_lib's DirectLaunch calls), and the C
``launch`` that launcher calls, with the argument list recorded from one real call.
Writes $OUT/proto_launch.json."""

import json
import os
import time

import torch
import triton
import triton.language as tl


@triton.jit
def add(a, b, c, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c + i, tl.load(a + i, i < n) + tl.load(b + i, i < n), i < n)


def host_us(f, n=20000):
    for _ in range(200):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return host


def main():
    a = torch.randn(4096, device="cuda")
    b, c = torch.randn_like(a), torch.empty_like(a)
    compiled = add[(4,)](a, b, c, 4096, BLOCK=1024)
    run = compiled.run
    dev = torch.cuda.current_device()
    stream = torch.cuda.current_stream().cuda_stream
    compiled._init_handles()
    fn, md = compiled.function, compiled.packed_metadata
    seen = []
    inner = run.launch

    def spy(*args):
        seen.append(args)
        return inner(*args)

    run.launch = spy
    run(4, 1, 1, stream, fn, md, None, None, None, a, b, c, 4096, 1024)
    run.launch = inner
    recorded = seen[0]
    out = {"triton": triton.__version__, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
           "recorded": [type(x).__name__ if not isinstance(x, (int, float, bool, type(None))) else x
                        for x in recorded[:-1]] + [repr(type(recorded[-1]))]}  # fmt: skip
    out["jit_us"] = host_us(lambda: add[(4,)](a, b, c, 4096, BLOCK=1024))
    out["run_us"] = host_us(lambda: run(4, 1, 1, stream, fn, md, None, None, None, a, b, c, 4096, 1024))
    out["c_launch_us"] = host_us(lambda: inner(*recorded))
    getter = torch._C._cuda_getCurrentRawStream
    out["run_with_stream_us"] = host_us(
        lambda: run(4, 1, 1, getter(dev), fn, md, None, None, None, a, b, c, 4096, 1024)
    )
    out["empty_call_us"] = host_us(lambda: None)
    from course_lib.inductor.launcher import DirectLaunch

    site = DirectLaunch(add, grid=(4,), ints=(4096,), constexprs={"BLOCK": 1024}, num_warps=4)
    site(a, b, c)
    out["site_bound"] = site.bound
    out["direct_launch_site_us"] = host_us(lambda: site(a, b, c))
    from course_lib.inductor import launcher

    out["site_static"] = site.static
    launcher.set_static(False, [site])
    site(a, b, c)
    out["direct_launch_site_triton_launcher_us"] = host_us(lambda: site(a, b, c))
    launcher.set_static(True, [site])
    site(a, b, c)
    out["data_ptr_3_us"] = host_us(lambda: (a.data_ptr(), b.data_ptr(), c.data_ptr()))
    out["device_getter_us"] = host_us(site._device)
    out["stream_getter_us"] = host_us(lambda: site._stream(0))
    try:  # torch's C++ launcher (Inductor's static launcher), as course_lib binds it
        from course_lib import compat

        launch, tys, constants, extra, nw, sh = compat.triton_static_launcher(compiled)
        f = compiled.function
        out["static_arg_tys"], out["static_constants"] = tys, sorted(constants)
        out["static_c_us"] = host_us(lambda: launch(f, 4, 1, 1, nw, sh, tys, (a, b, c, 4096, *extra), stream))
        out["static_site_bound"] = site.static
        c.zero_()
        launch(f, 4, 1, 1, nw, sh, tys, (a, b, c, 4096, *extra), stream)
        torch.cuda.synchronize()
        out["static_correct"] = bool(torch.equal(c, a + b))
    except Exception as exc:
        out["static_error"] = f"{type(exc).__name__}: {exc}"
    c.zero_()
    inner(*recorded)
    torch.cuda.synchronize()
    out["c_launch_correct"] = bool(torch.equal(c, a + b))
    print(out, flush=True)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "proto_launch.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
