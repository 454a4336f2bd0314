"""Record Module 5's GPU measurements on an NVIDIA GPU (made for the H200; < 4 minutes).

Usage:  python device/record_gpu.py OUT_DIR
Writes OUT_DIR/copy_bandwidth.json, matmul_throughput.json and occupancy_effects.json (with
the registers the driver reports per Triton kernel) via course_lib.recorded.save; the lead
copies them to data/gpu/.
Works with torch 2.11 / triton 3.6 and newer; uses only public torch/triton APIs.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


try:  # module level: Triton's JIT resolves names through the kernel's globals
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - the course always has triton
    triton = tl = None

if triton is not None:

    @triton.jit
    def persist_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        """Grid-stride copy: with a grid of k blocks per SM, exactly k blocks are resident."""
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        for start in range(pid * BLOCK, n, nprog * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _kernels():
    """The two Triton kernels of the occupancy experiment."""
    return persist_copy, add_kernel


def _time_ms(fn, iters: int = 10, warmup: int = 3) -> float:
    """Median milliseconds of fn() measured with CUDA events."""
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def _copy_ms(n: int, iters: int) -> float:
    import torch

    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    return _time_ms(lambda: dst.copy_(src), iters=iters)


def copy_bandwidth() -> dict:
    """Device-to-device copy (read + write bytes) and pinned host<->device copies."""
    import torch

    rows = []
    for mib in (1, 4, 16, 64, 256, 1024, 4096):
        n = mib << 20
        ms = _copy_ms(n, iters=20 if mib < 1024 else 5)
        rows.append({"bytes": n, "kind": "device-to-device", "ms": ms, "gbs": 2 * n / ms / 1e6})
        torch.cuda.empty_cache()
    n = 1 << 30
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    ms = _time_ms(lambda: dev.copy_(host, non_blocking=True), iters=5)
    rows.append({"bytes": n, "kind": "host-to-device (pinned)", "ms": ms, "gbs": n / ms / 1e6})
    ms = _time_ms(lambda: host.copy_(dev, non_blocking=True), iters=5)
    rows.append({"bytes": n, "kind": "device-to-host (pinned)", "ms": ms, "gbs": n / ms / 1e6})
    return {"rows": rows, "note": "device-to-device counts read + write bytes"}


def matmul_throughput() -> dict:
    import torch

    rows = []
    for dtype, tf32 in ((torch.bfloat16, False), (torch.float16, False), (torch.float32, False), (torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for n in (512, 1024, 2048, 4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            ms = _time_ms(lambda: a @ b, iters=10 if n < 8192 else 5)
            name = "tf32" if tf32 else str(dtype).replace("torch.", "")
            rows.append({"dtype": name, "n": n, "ms": ms, "tflops": 2 * n**3 / ms / 1e9})
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"rows": rows}


def occupancy_effects() -> dict:
    """Bandwidth of a persistent copy kernel vs resident warps per SM (latency hiding), and
    vector-add bandwidth vs num_warps, with registers and the course's occupancy calculator."""
    import torch
    import triton

    from course_lib.gpu import occupancy

    persist_copy, add_kernel = _kernels()
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    n = 1 << 28
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    persistent = []
    for blocks_per_sm in (1, 2, 4, 8, 16, 32):
        grid = (blocks_per_sm * sms,)
        ms = _time_ms(lambda: persist_copy[grid](x, y, n, BLOCK=256, num_warps=2), iters=5)
        persistent.append({"warps_per_sm": 2 * blocks_per_sm, "ms": ms, "gbs": 2 * 4 * n / ms / 1e6})
    z = torch.empty_like(x)
    sweep = []
    for num_warps in (1, 2, 4, 8, 16):
        block = 1024
        grid = (triton.cdiv(n, block),)
        k = add_kernel[grid](x, y, z, n, BLOCK=block, num_warps=num_warps)
        ms = _time_ms(lambda: add_kernel[grid](x, y, z, n, BLOCK=block, num_warps=num_warps), iters=5)
        regs = int(getattr(k, "n_regs", 0) or 0)
        shared = int(getattr(k.metadata, "shared", 0) or 0)
        occ = occupancy("sm_90", 32 * num_warps, max(regs, 1), shared)
        sweep.append({"num_warps": num_warps, "BLOCK": block, "registers": regs, "shared": shared,
                      "active_warps": occ.active_warps, "limiting": occ.limiting, "ms": ms,
                      "gbs": 3 * 4 * n / ms / 1e6})  # fmt: skip
    return {"sms": sms, "persistent_copy": persistent, "vector_add_num_warps": sweep}


def main(out: str) -> None:
    import torch

    from course_lib import recorded

    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing recorded")
        return
    out_dir = pathlib.Path(out)
    cmd = "python device/record_gpu.py OUT"
    for name, fn in (("copy_bandwidth", copy_bandwidth), ("matmul_throughput", matmul_throughput),
                     ("occupancy_effects", occupancy_effects)):  # fmt: skip
        t = time.time()
        value = fn()
        recorded.save(out_dir / f"{name}.json", value, meta={"command": cmd})
        print(f"{name}: {time.time() - t:.1f}s", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "rec/gpu")
