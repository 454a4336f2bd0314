"""Prototype of course_lib's row split (``ROW_SPLIT`` in course_lib/inductor/codegen/triton.py), kept as
the sweep that chose its constants: a row too long for registers, split over S programs that exchange
partial statistics at a per-row counter, with the grid sized to what the GPU holds at once and launched
cooperatively (CUDA then promises co-residency, or refuses the launch), so the wait cannot hang. (The
first prototype, one program a part for every row in one ordinary launch, relied on blocks being
dispatched in order; it is in git history at 3e652be, bench/proto_row_barrier.py.)

Each of the G programs keeps one S-th of a row in registers (and, for layer norm, the same S-th of the
weight and bias, loaded once for every row it walks); the G / S groups walk the rows. Optionally the
next row's part is loaded before the barrier, so its latency hides behind the wait.
Run on a CUDA machine: ``python bench/proto_row_coop.py`` (writes $OUT/proto_row_coop.json).
"""

import json
import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.testing import do_bench, do_bench_cudagraph


@triton.jit
def publish(ws_ptr, cnt_ptr, row, part, a, b, S: tl.constexpr):
    """Write this part's two partial statistics of ``row``, then count them in (release)."""
    tl.store(ws_ptr + (row * S + part) * 2, a)
    tl.store(ws_ptr + (row * S + part) * 2 + 1, b)
    tl.debug_barrier()
    tl.atomic_add(cnt_ptr + row, 1, sem="release")


@triton.jit
def collect(ws_ptr, cnt_ptr, row, S: tl.constexpr):
    """Wait until all S parts of ``row`` are counted in (acquire), then read their partials."""
    c = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    while c < S:
        c = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    tl.debug_barrier()
    idx = tl.arange(0, S)
    a_all = tl.load(ws_ptr + (row * S + idx) * 2, cache_modifier=".cg")
    b_all = tl.load(ws_ptr + (row * S + idx) * 2 + 1, cache_modifier=".cg")
    return a_all, b_all


@triton.jit
def pack(v, gen):
    """A partial and the row it belongs to in one 64-bit word (``row + 1`` above its float32 bits)."""
    return (gen.to(tl.int64) << 32) | (v.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF)


@triton.jit
def publish_flag(ws_ptr, row, part, a, b, S: tl.constexpr):
    """Flagged partials: each word carries its row, so a reader needs no counter and the writer no
    release fence; a relaxed 64-bit exchange is one indivisible write."""
    tl.atomic_xchg(ws_ptr + (row * S + part) * 2, pack(a, row + 1), sem="relaxed")
    tl.atomic_xchg(ws_ptr + (row * S + part) * 2 + 1, pack(b, row + 1), sem="relaxed")


@triton.jit
def collect_flag(ws_ptr, row, S: tl.constexpr):
    """Read all S parts' words (volatile: from L2) until every one carries ``row + 1``; the values
    come with them, one round trip a poll instead of the counter's poll and then the partials' load."""
    idx = tl.arange(0, S)
    wa = tl.load(ws_ptr + (row * S + idx) * 2, volatile=True)
    wb = tl.load(ws_ptr + (row * S + idx) * 2 + 1, volatile=True)
    ok = tl.min(((wa >> 32) == row + 1) & ((wb >> 32) == row + 1), 0)
    while ok == 0:
        wa = tl.load(ws_ptr + (row * S + idx) * 2, volatile=True)
        wb = tl.load(ws_ptr + (row * S + idx) * 2 + 1, volatile=True)
        ok = tl.min(((wa >> 32) == row + 1) & ((wb >> 32) == row + 1), 0)
    a_all = (wa & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    b_all = (wb & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return a_all, b_all


@triton.jit
def publish_any(ws_ptr, cnt_ptr, row, part, a, b, S: tl.constexpr, FLAG: tl.constexpr):
    if FLAG:
        publish_flag(ws_ptr, row, part, a, b, S)
    else:
        publish(ws_ptr, cnt_ptr, row, part, a, b, S)


@triton.jit
def collect_any(ws_ptr, cnt_ptr, row, S: tl.constexpr, FLAG: tl.constexpr):
    if FLAG:
        a_all, b_all = collect_flag(ws_ptr, row, S)
    else:
        a_all, b_all = collect(ws_ptr, cnt_ptr, row, S)
    return a_all, b_all


@triton.jit
def exchange(ws_ptr, cnt_ptr, row, part, a, b, S: tl.constexpr):
    publish(ws_ptr, cnt_ptr, row, part, a, b, S)
    return collect(ws_ptr, cnt_ptr, row, S)


@triton.jit
def sm_partial(x):
    m = tl.max(x, 0)
    return m, tl.sum(tl.exp(x - m), 0)


@triton.jit
def ln_partial(x, BLOCK: tl.constexpr):
    mean = tl.sum(x, 0) / BLOCK
    d = x - mean
    return mean, tl.sum(d * d, 0)


@triton.jit
def first_part(x_ptr, R, N, S: tl.constexpr, BLOCK: tl.constexpr):
    """This program's part, its row group, the number of groups, its columns and its first row's values."""
    part = tl.program_id(0) % S
    group = tl.program_id(0) // S
    cols = part * BLOCK + tl.arange(0, BLOCK)
    return part, group, tl.num_programs(0) // S, cols, tl.load(x_ptr + group * N + cols, mask=group < R, other=0.0)


@triton.jit
def sm_ahead(x_ptr, y_ptr, ws_ptr, cnt_ptr, R, N, S: tl.constexpr, BLOCK: tl.constexpr, FLAG: tl.constexpr = False):
    """Publish ahead: row r+G's partials are loaded, reduced and published before waiting on row r,
    so the wait overlaps a whole part's read and the other parts have usually counted in by then."""
    part, group, ngroups, cols, x = first_part(x_ptr, R, N, S, BLOCK)
    if group < R:
        a, b = sm_partial(x)
        publish_any(ws_ptr, cnt_ptr, group, part, a, b, S, FLAG)
    for row in range(group, R, ngroups):
        nxt = row + ngroups
        x_next = tl.load(x_ptr + nxt * N + cols, mask=nxt < R, other=0.0)
        if nxt < R:
            a, b = sm_partial(x_next)
            publish_any(ws_ptr, cnt_ptr, nxt, part, a, b, S, FLAG)
        ms, ss = collect_any(ws_ptr, cnt_ptr, row, S, FLAG)
        m = tl.max(ms, 0)
        s = tl.sum(ss * tl.exp(ms - m), 0)
        tl.store(y_ptr + row * N + cols, tl.exp(x - m) / s)
        x = x_next


@triton.jit
def ln_ahead(x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, cnt_ptr, R, N, eps, S: tl.constexpr, BLOCK: tl.constexpr,
             FLAG: tl.constexpr = False):  # fmt: skip
    part, group, ngroups, cols, x = first_part(x_ptr, R, N, S, BLOCK)
    if group < R:
        a, b = ln_partial(x, BLOCK)
        publish_any(ws_ptr, cnt_ptr, group, part, a, b, S, FLAG)
    for row in range(group, R, ngroups):
        nxt = row + ngroups
        x_next = tl.load(x_ptr + nxt * N + cols, mask=nxt < R, other=0.0)
        if nxt < R:
            a, b = ln_partial(x_next, BLOCK)
            publish_any(ws_ptr, cnt_ptr, nxt, part, a, b, S, FLAG)
        means, m2s = collect_any(ws_ptr, cnt_ptr, row, S, FLAG)
        mean = tl.sum(means, 0) / S
        dm = means - mean
        m2 = tl.sum(m2s, 0) + BLOCK * tl.sum(dm * dm, 0)
        rstd = 1 / tl.sqrt(m2 / N + eps)
        w = tl.load(w_ptr + cols, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, eviction_policy="evict_last")
        tl.store(y_ptr + row * N + cols, (x - mean) * rstd * w + b)
        x = x_next


@triton.jit
def ln_pcoop(x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, cnt_ptr, R, N, eps, S: tl.constexpr, BLOCK: tl.constexpr,
             PREFETCH: tl.constexpr, HOLD_WB: tl.constexpr = True):  # fmt: skip
    part = tl.program_id(0) % S
    group = tl.program_id(0) // S
    ngroups = tl.num_programs(0) // S
    cols = part * BLOCK + tl.arange(0, BLOCK)
    if HOLD_WB:  # the weight and bias of this part, in registers for every row
        w = tl.load(w_ptr + cols)
        b = tl.load(b_ptr + cols)
    x = tl.load(x_ptr + group * N + cols, mask=group < R, other=0.0)
    for row in range(group, R, ngroups):
        mean_p = tl.sum(x, 0) / BLOCK
        d = x - mean_p
        m2_p = tl.sum(d * d, 0)
        if PREFETCH:
            nxt = row + ngroups
            x_next = tl.load(x_ptr + nxt * N + cols, mask=nxt < R, other=0.0)
        means, m2s = exchange(ws_ptr, cnt_ptr, row, part, mean_p, m2_p, S)
        mean = tl.sum(means, 0) / S
        dm = means - mean
        m2 = tl.sum(m2s, 0) + BLOCK * tl.sum(dm * dm, 0)
        rstd = 1 / tl.sqrt(m2 / N + eps)
        if not HOLD_WB:  # from L2 every row
            w = tl.load(w_ptr + cols, eviction_policy="evict_last")
            b = tl.load(b_ptr + cols, eviction_policy="evict_last")
        tl.store(y_ptr + row * N + cols, (x - mean) * rstd * w + b)
        if PREFETCH:
            x = x_next
        else:
            nxt = row + ngroups
            x = tl.load(x_ptr + nxt * N + cols, mask=nxt < R, other=0.0)


@triton.jit
def sm_pcoop(x_ptr, y_ptr, ws_ptr, cnt_ptr, R, N, S: tl.constexpr, BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    part = tl.program_id(0) % S
    group = tl.program_id(0) // S
    ngroups = tl.num_programs(0) // S
    cols = part * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + group * N + cols, mask=group < R, other=0.0)
    for row in range(group, R, ngroups):
        m_p = tl.max(x, 0)
        s_p = tl.sum(tl.exp(x - m_p), 0)
        if PREFETCH:
            nxt = row + ngroups
            x_next = tl.load(x_ptr + nxt * N + cols, mask=nxt < R, other=0.0)
        ms, ss = exchange(ws_ptr, cnt_ptr, row, part, m_p, s_p, S)
        m = tl.max(ms, 0)
        s = tl.sum(ss * tl.exp(ms - m), 0)
        tl.store(y_ptr + row * N + cols, tl.exp(x - m) / s)
        if PREFETCH:
            x = x_next
        else:
            nxt = row + ngroups
            x = tl.load(x_ptr + nxt * N + cols, mask=nxt < R, other=0.0)


def resident_programs(compiled, num_warps: int, props) -> int:
    """Programs the GPU holds at once: registers (allocated per warp in units of 256), threads, shared."""
    regs_per_warp = -(-compiled.n_regs * 32 // 256) * 256
    by_regs = (props["max_num_regs"] // regs_per_warp) // num_warps
    by_threads = 2048 // (32 * num_warps)
    shared = compiled.metadata.shared
    by_shared = props["max_shared_mem"] // shared if shared else 32
    return max(0, min(by_regs, by_threads, by_shared, 32)) * props["multiprocessor_count"]


def main():
    rows, n = 1024, 65536
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, n, generator=g).cuda()
    w, b = torch.randn(n, generator=g).cuda(), torch.randn(n, generator=g).cuda()
    src = torch.randn(16384, 4096, device="cuda")
    dst = torch.empty_like(src)
    bw = 2 * src.numel() * 4 / (do_bench(lambda: dst.copy_(src), rep=200, return_mode="median") * 1e-3)
    props = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
    out = {"copy_gbs": bw / 1e9, "device": torch.cuda.get_device_name(), "props": dict(props),
           "triton": triton.__version__, "torch": torch.__version__}  # fmt: skip
    print(out, flush=True)
    ref_ln, ref_sm = F.layer_norm(x, (n,), w, b), torch.softmax(x, -1)
    inductor = {}
    for name, f in (("layernorm", lambda: F.layer_norm(x, (n,), w, b)), ("softmax", lambda: torch.softmax(x, -1))):
        c = torch.compile(f)
        c()
        inductor[name] = do_bench(c, warmup=25, rep=100, return_mode="median")
    out["inductor_ms"] = inductor
    configs = ((4, 32), (8, 16), (8, 32), (16, 8), (16, 16), (32, 4), (32, 8))
    if os.environ.get("CONFIGS"):
        configs = [tuple(map(int, c.split("x"))) for c in os.environ["CONFIGS"].split(",")]
    workloads = os.environ.get("WORKLOADS", "layernorm,softmax,layernorm_stream").split(",")
    modes = os.environ.get("MODES", "pf0,pf1,ahead,flag").split(",")
    for S, warps in configs:
        BLOCK = n // S
        y = torch.empty_like(x)
        ws = torch.empty(rows * S * 2, device="cuda")
        wflag = torch.zeros(rows * S * 2, dtype=torch.int64, device="cuda")
        # no prefetch, the next row loaded before the wait, published ahead, published ahead with flagged partials
        for mode in ("pf0", "pf1", "ahead", "flag"):
            for name, kern, extra, ref, nbytes, more in (
                ("layernorm", ln_pcoop, (w, b), ref_ln, 2 * x.numel() * 4 + 2 * n * 4, {}),
                ("softmax", sm_pcoop, (), ref_sm, 2 * x.numel() * 4, {}),
                ("layernorm_stream", ln_pcoop, (w, b), ref_ln, 2 * x.numel() * 4 + 2 * n * 4, {"HOLD_WB": False}),
            ):
                ahead = mode in ("ahead", "flag")
                if name not in workloads or mode not in modes or (ahead and name == "layernorm"):
                    continue
                if ahead:  # weight and bias streamed from L2 (the registers hold two parts)
                    kern, more = (sm_ahead, {}) if name == "softmax" else (ln_ahead, {})
                    more = {"FLAG": mode == "flag"}
                else:
                    more = {**more, "PREFETCH": mode == "pf1"}
                key = f"{name}_S{S}_w{warps}_{mode}"
                try:
                    args = (x, *extra, y, wflag if mode == "flag" else ws)
                    tail = (rows, n) if name == "softmax" else (rows, n, 1e-5)
                    cnt = torch.zeros(rows, dtype=torch.int32, device="cuda")
                    kw = dict(S=S, BLOCK=BLOCK, num_warps=warps, launch_cooperative_grid=True, **more)
                    compiled = kern.warmup(*args, cnt, *tail, grid=(S,), **kw)
                    if hasattr(compiled, "_init_handles"):
                        compiled._init_handles()  # n_regs / n_spills are read when the binary loads
                    resident = resident_programs(compiled, warps, props)
                    res = {"regs": compiled.n_regs, "spills": compiled.n_spills, "resident": resident}
                    for per_sm_cap in (None,):
                        grid = resident if per_sm_cap is None else min(resident, props["multiprocessor_count"])
                        grid = grid // S * S
                        if grid == 0:
                            continue

                        def f():
                            c = torch.zeros(rows, dtype=torch.int32, device="cuda")
                            if mode == "flag":
                                wflag.zero_()  # every word "no row yet"
                            kern[(grid,)](*args, c, *tail, **kw)

                        f()
                        torch.cuda.synchronize()
                        err = (y - ref).abs().max().item()
                        ms = do_bench(f, warmup=25, rep=100, return_mode="median")
                        gms = do_bench_cudagraph(f, rep=100, return_mode="median")
                        tag = "full" if per_sm_cap is None else "1_per_sm"
                        res[tag] = {"grid": grid, "ms": ms, "bw": nbytes / (ms * 1e-3) / bw,
                                    "graph_bw": nbytes / (gms * 1e-3) / bw, "err": err,
                                    "vs_inductor": ms / inductor[name.split("_")[0]]}  # fmt: skip
                except Exception as exc:
                    res = {"error": f"{type(exc).__name__}: {exc}"[:400]}
                print(key, res, flush=True)
                out[key] = res
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "proto_row_coop.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
