"""Prototype, not part of course_lib: rows of 65536 floats, each split over S programs of one launch.

Each program holds 65536 / S elements of its row in registers, writes its partial statistics (mean and
M2 for layer norm, max and sum of exponentials for softmax) to global memory, arrives at a per-row
counter and spins until all S programs of its row have arrived; then it combines the S partials and
writes its part of the output. The row is read from HBM once, where the course's looped kernel reads it
twice (the second time mostly from L2).

Why it is not in course_lib: a program waits for programs with *higher* ids. That finishes only if the
S programs of a row are resident at once, which CUDA does not promise for an ordinary launch (it works
when blocks are dispatched in id order, as here). Inductor's cooperative reductions
(``config.triton.cooperative_reductions``, ``triton_helpers.x_grid_barrier``) use the same barrier but
only for a few outputs (at most 16), with a cooperative launch that guarantees residency; 1024 rows x S
programs is more than an H200 holds at once. Results on the H200: bench/notes/gpu_long_rows.md.
Run on a CUDA machine: ``python bench/proto_row_barrier.py``.
"""

import json
import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.testing import do_bench, do_bench_cudagraph


@triton.jit
def exchange(ws_ptr, cnt_ptr, row, part, a, b, S: tl.constexpr):
    """Publish this program's two partial statistics (a, b), wait until the S programs of ``row`` have
    published theirs, and return all S pairs."""
    tl.store(ws_ptr + (row * S + part) * 2, a)
    tl.store(ws_ptr + (row * S + part) * 2 + 1, b)
    tl.debug_barrier()  # every thread's stores happen before the release below
    tl.atomic_add(cnt_ptr + row, 1, sem="release")
    c = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    while c < S:  # spins until the row's last program arrives (see the module docstring)
        c = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    tl.debug_barrier()
    idx = tl.arange(0, S)
    a_all = tl.load(ws_ptr + (row * S + idx) * 2, cache_modifier=".cg")  # .cg: from L2, not a stale L1
    b_all = tl.load(ws_ptr + (row * S + idx) * 2 + 1, cache_modifier=".cg")
    return a_all, b_all


@triton.jit
def ln_coop(x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, cnt_ptr, N, eps, S: tl.constexpr, BLOCK: tl.constexpr):
    row, part = tl.program_id(0) // S, tl.program_id(0) % S
    cols = part * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols)
    mean_p = tl.sum(x, 0) / BLOCK
    d = x - mean_p
    means, m2s = exchange(ws_ptr, cnt_ptr, row, part, mean_p, tl.sum(d * d, 0), S)
    mean = tl.sum(means, 0) / S
    dm = means - mean
    m2 = tl.sum(m2s, 0) + BLOCK * tl.sum(dm * dm, 0)  # Chan's merge of equal-sized parts
    rstd = 1 / tl.sqrt(m2 / N + eps)
    w = tl.load(w_ptr + cols, eviction_policy="evict_last")
    b = tl.load(b_ptr + cols, eviction_policy="evict_last")
    tl.store(y_ptr + row * N + cols, (x - mean) * rstd * w + b)


@triton.jit
def sm_coop(x_ptr, y_ptr, ws_ptr, cnt_ptr, N, S: tl.constexpr, BLOCK: tl.constexpr):
    row, part = tl.program_id(0) // S, tl.program_id(0) % S
    cols = part * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols)
    m_p = tl.max(x, 0)
    ms, ss = exchange(ws_ptr, cnt_ptr, row, part, m_p, tl.sum(tl.exp(x - m_p), 0), S)
    m = tl.max(ms, 0)
    s = tl.sum(ss * tl.exp(ms - m), 0)
    tl.store(y_ptr + row * N + cols, tl.exp(x - m) / s)


def main():
    rows, n = 1024, 65536
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, n, generator=g).cuda()
    w, b = torch.randn(n, generator=g).cuda(), torch.randn(n, generator=g).cuda()
    src = torch.randn(16384, 4096, device="cuda")
    dst = torch.empty_like(src)
    bw = 2 * src.numel() * 4 / (do_bench(lambda: dst.copy_(src), rep=200, return_mode="median") * 1e-3)
    print("copy GB/s", bw / 1e9, flush=True)
    out = {}
    for S, warps in ((4, 32), (8, 16), (8, 32), (16, 8), (16, 16), (32, 4), (32, 8)):
        BLOCK = n // S
        y = torch.empty_like(x)
        ws = torch.empty(rows * S * 2, device="cuda")

        def ln():
            cnt = torch.zeros(rows, dtype=torch.int32, device="cuda")
            ln_coop[(rows * S,)](x, w, b, y, ws, cnt, n, 1e-5, S=S, BLOCK=BLOCK, num_warps=warps)

        def sm():
            cnt = torch.zeros(rows, dtype=torch.int32, device="cuda")
            sm_coop[(rows * S,)](x, y, ws, cnt, n, S=S, BLOCK=BLOCK, num_warps=warps)

        for name, f, ref, nbytes in (
            ("layernorm", ln, lambda: F.layer_norm(x, (n,), w, b), 2 * x.numel() * 4 + 2 * n * 4),
            ("softmax", sm, lambda: torch.softmax(x, -1), 2 * x.numel() * 4),
        ):
            try:
                f()
                torch.cuda.synchronize()
                err = (y - ref()).abs().max().item()
                ms = do_bench(f, warmup=25, rep=100, return_mode="median")
                gms = do_bench_cudagraph(f, rep=100, return_mode="median")
                r = {"ms": ms, "bw": nbytes / (ms * 1e-3) / bw, "graph_bw": nbytes / (gms * 1e-3) / bw, "err": err}
            except Exception as exc:
                r = {"error": str(exc)[:300]}
            print(name, S, warps, r, flush=True)
            out[f"{name}_S{S}_w{warps}"] = r
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe3.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
