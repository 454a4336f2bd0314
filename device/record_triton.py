"""Record Module 3's H200 measurements: python device/record_triton.py OUT_DIR  (about 2 minutes).

Checks every reference kernel of course_lib.triton.kernels against torch on the GPU, then
measures with triton.testing.do_bench: copy bandwidth (torch copy_), vector add and softmax as
a fraction of it, bf16 matmul at 4096^3 per config (course_lib.triton.tune.MATMUL_CONFIGS) vs
torch.matmul, flash attention vs scaled_dot_product_attention; and writes PTX/SASS of the
matmul for sm_90. Outputs (recorded.save JSON + text) go to OUT_DIR, which the lead copies to
data/triton/. Works with torch 2.11 / triton 3.6 and torch 2.13 / triton 3.9.
"""

# ruff: noqa: F821, B023  (each lambda is timed at once by do_bench; the tensors are deleted after their section)
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import course_lib  # noqa: E402,F401  (sets Triton's mode before triton is imported)


def check_kernels(K, torch) -> dict:
    torch.manual_seed(0)
    dev = "cuda"
    out = {}
    x, y = torch.randn(100_003, device=dev), torch.randn(100_003, device=dev)
    out["add"] = (K.add(x, y) - (x + y)).abs().max().item()
    a = torch.randn(300, 781, device=dev)
    out["softmax"] = (K.softmax(a) - a.softmax(-1)).abs().max().item()
    out["online_softmax"] = (K.softmax(a, online=True, block=128) - a.softmax(-1)).abs().max().item()
    w, b = torch.randn(781, device=dev), torch.randn(781, device=dev)
    out["layernorm"] = (K.layernorm(a, w, b) - torch.nn.functional.layer_norm(a, (781,), w, b)).abs().max().item()
    m1, m2 = (
        torch.randn(333, 517, device=dev, dtype=torch.float16),
        torch.randn(517, 259, device=dev, dtype=torch.float16),
    )
    out["matmul"] = (K.matmul(m1, m2, 64, 64, 32).float() - (m1.float() @ m2.float())).abs().max().item()
    q, k, v = (torch.randn(2, 3, 200, 64, device=dev, dtype=torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    out["attention"] = (K.flash_attention(q, k, v, 64, 64) - ref).abs().max().item()
    return out


def measure(K, tune, torch, triton) -> dict:
    bench = triton.testing.do_bench
    res = {}
    n = 1 << 27  # 512 MiB of fp32 per tensor
    x, y, o = torch.randn(n, device="cuda"), torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    ms = bench(lambda: o.copy_(x))
    res["copy_gbs"] = 2 * n * 4 / ms / 1e6
    best = None
    for block, warps in ((1024, 4), (2048, 8), (4096, 8)):
        t = bench(lambda: K.add_kernel[(triton.cdiv(n, block),)](x, y, o, n, BLOCK=block, num_warps=warps))
        best = t if best is None or t < best else best
    res["add_gbs"] = 3 * n * 4 / best / 1e6
    res["add_fraction_of_copy"] = res["add_gbs"] / res["copy_gbs"]
    del x, y, o
    rows, cols = 32768, 4096
    a, out = torch.randn(rows, cols, device="cuda"), torch.empty(rows, cols, device="cuda")
    t = min(
        bench(lambda: K.softmax_kernel[(rows,)](a, out, cols, cols, cols, BLOCK=cols, num_warps=w)) for w in (8, 16)
    )
    res["softmax_gbs"] = 2 * rows * cols * 4 / t / 1e6
    res["softmax_fraction_of_copy"] = res["softmax_gbs"] / res["copy_gbs"]
    res["torch_softmax_gbs"] = 2 * rows * cols * 4 / bench(lambda: torch.softmax(a, -1)) / 1e6
    del a, out
    M = N = Kd = 4096
    A = torch.randn(M, Kd, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(Kd, N, device="cuda", dtype=torch.bfloat16)
    timings = {}
    for cfg in tune.MATMUL_CONFIGS:
        bm, bn, bk, w, s = cfg
        try:
            timings[tune.config_name(cfg)] = 1000 * bench(
                lambda: K.matmul(A, B, bm, bn, bk, 8, num_warps=w, num_stages=s)
            )
        except Exception as exc:  # out of shared memory etc.
            timings[tune.config_name(cfg)] = None
            print("config", cfg, "failed:", type(exc).__name__)
    ok = {k: v for k, v in timings.items() if v is not None}
    best_name = min(ok, key=ok.get)
    torch_us = 1000 * bench(lambda: torch.matmul(A, B))
    res["matmul"] = {
        "best_config": best_name,
        "triton_us": ok[best_name],
        "torch_us": torch_us,
        "fraction_of_cublas": torch_us / ok[best_name],
        "tflops": 2 * M * N * Kd / ok[best_name] / 1e6,
    }
    res["matmul_timings_us"] = {f"{M}x{N}x{Kd}": ok}
    del A, B
    b, h, s, d = 4, 16, 4096, 64
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    best = None
    for bm, bn, w, st in ((128, 64, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3), (128, 128, 8, 2)):
        try:
            t = bench(lambda: K.flash_attention(q, k, v, bm, bn, num_warps=w, num_stages=st))
        except Exception as exc:
            print("attention config failed:", bm, bn, w, st, type(exc).__name__)
            continue
        if best is None or t < best[0]:
            best = (t, f"{bm}x{bn}/w{w}/s{st}")
    sdpa = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))
    res["attention"] = {
        "shape": [b, h, s, d],
        "best_config": best[1],
        "triton_us": 1000 * best[0],
        "sdpa_us": 1000 * sdpa,
        "fraction_of_sdpa": sdpa / best[0],
    }
    return res


def main(out_dir: str) -> None:
    import torch
    import triton

    from course_lib import recorded
    from course_lib.triton import compile_stages, instruction_mix, tune
    from course_lib.triton import kernels as K

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cmd = "python device/record_triton.py OUT"
    errors = check_kernels(K, torch)
    print("max errors vs torch:", errors)
    res = measure(K, tune, torch, triton)
    res["max_abs_error_vs_torch"] = errors
    goals = {"add_fraction_of_copy": 0.85, "matmul": 0.80, "attention": 0.70}
    res["goals"] = goals
    recorded.save(out / "perf.json", res, meta={"command": cmd})
    recorded.save(out / "matmul_configs.json", {"timings_us": res["matmul_timings_us"]}, meta={"command": cmd})
    kern, sig, consts = K.signature("matmul")
    st = compile_stages(
        kern,
        {**sig, "a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16"},
        {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8},
        "sm_90",
        num_warps=8,
        num_stages=3,
    )
    (out / "matmul_sm90.ptx").write_text(st["ptx"])
    (out / "matmul_sm90.sass").write_text(st["sass"])
    recorded.save(
        out / "artefacts.json",
        {
            "metadata": st.metadata,
            "sass_mix": instruction_mix(st["sass"]),
            "files": ["matmul_sm90.ptx", "matmul_sm90.sass"],
        },
        meta={"command": cmd},
    )
    print({k: v for k, v in res.items() if k != "matmul_timings_us"})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out_triton")
