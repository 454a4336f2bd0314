"""Oracles for exercises checked on many inputs, independent of the reference they ask for.

One fixed input lets a wrong answer pass by luck or by hard-coding; these checks call the
learner's code on many inputs and judge it with something other than course_lib's own answer:

* Module 1: random programs from :mod:`course_lib.ir.randprog` compiled to CFGs, with
  ``networkx.immediate_dominators`` / ``dominance_frontiers`` as the oracle;
* Module 3: Triton kernels on ragged sizes and strided rows in the interpreter, every access
  traced (:mod:`course_lib.triton.trace`), so a lane outside its tensor fails the check;
* Module 4: an FX interpreter on several graphs, counted from the graph itself;
* Module 5: the ring all-reduce on gloo processes with ``torch.distributed``'s point-to-point
  calls recorded: a ring only talks to its neighbours and sends 2(p-1)/p of the data;
* Module 6: OpenMP schedules simulated for 2, 4 and 8 threads (work per thread, not one machine).

Each function returns a :class:`~course_lib.check.compare.Verdict` (or lists for
:func:`~course_lib.check.compare.per_input`); a learner's ``NotImplementedError`` passes through
so the check reads "not attempted".
"""

from __future__ import annotations

import functools
import json
import math
import os
import socket
import sys
import tempfile
import traceback
from collections.abc import Callable

from course_lib.check.compare import Verdict, short_repr

# ----------------------------------------------------------------------------- Module 1: CFGs


def random_function(seed: int):
    """The CFG of random program ``seed`` (``course_lib.ir.randprog``), reachable blocks only."""
    from course_lib import ir
    from course_lib.ir import randprog

    prog = randprog.generate(seed, max_depth=3, n_stmts=7)
    return ir.from_source(prog.source, prog.name)


def random_functions(count: int = 30, first_seed: int = 0, min_blocks: int = 4) -> tuple[list[str], list]:
    """``count`` random CFGs with at least ``min_blocks`` blocks, and a label naming each seed."""
    labels, fns, seed = [], [], first_seed
    while len(fns) < count:
        fn = random_function(seed)
        if len(fn.blocks) >= min_blocks:
            labels.append(f"random program {seed} ({len(fn.blocks)} blocks; oracles.random_function({seed}))")
            fns.append(fn)
        seed += 1
    return labels, fns


def _digraph(fn):
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(b.label for b in fn.blocks)
    for b, succs in fn.succs().items():
        g.add_edges_from((b, s) for s in succs)
    return g


def nx_idoms(fn) -> dict:
    """Immediate dominators by networkx (Cooper-Harvey-Kennedy too, written by others); entry -> None."""
    import networkx as nx

    idom = dict(nx.immediate_dominators(_digraph(fn), fn.entry))
    idom[fn.entry] = None
    return idom


def nx_frontiers(fn) -> dict:
    """Dominance frontiers by networkx, as {label: set of labels} over reachable blocks."""
    import networkx as nx

    return {b: set(df) for b, df in nx.dominance_frontiers(_digraph(fn), fn.entry).items()}


def nx_iterated_df(df: dict, blocks) -> set:
    """DF+ as the least fixpoint DF+(S) = DF(S ∪ DF+(S)), computed by plain iteration."""
    result: set = set()
    while True:
        new = set().union(*(df.get(b, set()) for b in set(blocks) | result))
        if new == result:
            return result
        result = new


def def_block_cases(fns: list) -> list[tuple[dict, set]]:
    """(frontiers, blocks defining one variable) per function: the inputs of phi placement."""
    from course_lib.ir import ssa

    cases = []
    for fn in fns:
        df = nx_frontiers(fn)
        for _, blocks in sorted(ssa.def_blocks(fn).items()):
            if len(blocks) > 1:
                cases.append((df, set(blocks) & set(df)))
    return cases


def reaching_definitions_roundrobin(fn) -> tuple[dict, dict]:
    """(into, out) of reaching definitions, by round-robin iteration of the textbook equations.

    Written without :mod:`course_lib.ir.dataflow` on purpose (no worklist, no Analysis): sweep all
    blocks in order until nothing changes. OUT[b] = gen/kill applied instruction by instruction;
    IN[b] = union of OUT[p] over predecessors; the entry starts with the parameters.
    """
    preds = fn.preds()
    params = frozenset((p, "param", -1) for p, _ in fn.params)
    into = {b.label: frozenset() for b in fn.blocks}
    out = dict(into)
    changed = True
    while changed:
        changed = False
        for b in fn.blocks:
            fact = params if b.label == fn.entry else frozenset().union(*(out[p] for p in preds[b.label]))
            cur = set(fact)
            for k, instr in enumerate(b.all()):
                for d in instr.defs():
                    cur = {site for site in cur if site[0] != d} | {(d, b.label, k)}
            if fact != into[b.label] or frozenset(cur) != out[b.label]:
                into[b.label], out[b.label], changed = fact, frozenset(cur), True
    return into, out


def check_analysis(make_analysis, fns: list, labels: list[str], oracle=reaching_definitions_roundrobin) -> Verdict:
    """Solve ``make_analysis(fn)`` with course_lib's worklist solver on each function; compare into/out."""
    from course_lib.ir import dataflow

    for label, fn in zip(labels, fns):
        analysis = make_analysis(fn)
        if not isinstance(analysis, dataflow.Analysis):
            return Verdict(False, f"return a dataflow.Analysis, not {type(analysis).__name__}")
        result = dataflow.solve(fn, analysis)
        want_in, want_out = oracle(fn)
        for b in (blk.label for blk in fn.blocks):
            for side, got, want in (("into", result.into, want_in), ("out", result.out, want_out)):
                if frozenset(got.get(b, ())) != want[b]:
                    missing, extra = (
                        sorted(want[b] - frozenset(got.get(b, ()))),
                        sorted(frozenset(got.get(b, ())) - want[b]),
                    )
                    return Verdict(False, f"{label}, block {b}, {side}: missing {missing[:4]}, unexpected {extra[:4]}")
    return Verdict(True, f"into and out right for every block of {len(fns)} functions")


# ----------------------------------------------------------------------------- Module 3: Triton kernels


def _padded(values, pad: int):
    """``values`` copied into the middle of a larger buffer: lanes past either end hit the padding."""
    import torch

    buf = torch.full((values.numel() + 2 * pad,), float("nan"), dtype=values.dtype)
    view = buf[pad : pad + values.numel()].view(values.shape)
    view.copy_(values)
    return view


def _traced(kernel, launch, tensors: dict):
    from course_lib.triton import trace

    tr = trace.trace(launch, tensors, kernel)
    return tr.out_of_bounds()


def check_add_kernel(kernel, sizes=(1, 37, 128, 1000, 1025), blocks=(32, 128), device: str = "cpu") -> Verdict:
    """``kernel[(cdiv(n, BLOCK),)](x, y, out, n, BLOCK=...)`` on ragged sizes; out-of-bounds lanes fail."""
    import torch
    import triton

    gen = torch.Generator().manual_seed(0)
    for n in sizes:
        for block in blocks:
            x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
            if device != "cpu":  # no tracer on a GPU: values only
                xd, yd, out = x.to(device), y.to(device), torch.full((n,), float("nan"), device=device)
                kernel[(triton.cdiv(n, block),)](xd, yd, out, n, BLOCK=block)
                oob = []
            else:
                xd, yd = _padded(x, 4 * block), _padded(y, 4 * block)
                out = _padded(torch.full((n,), float("nan")), 4 * block)
                tensors = {"x": xd, "y": yd, "out": out}
                launch = functools.partial(kernel[(triton.cdiv(n, block),)], xd, yd, out, n, BLOCK=block)
                oob = _traced(kernel, launch, tensors)
            if oob:
                return Verdict(False, f"n={n}, BLOCK={block}: {oob[0]} (the last program's lanes need a mask)")
            if not torch.equal(out.cpu(), x + y):
                bad = int((out.cpu() != x + y).nonzero()[0, 0])
                return Verdict(
                    False,
                    f"n={n}, BLOCK={block}: out[{bad}] = {float(out[bad]):.4g}, x + y = {float((x + y)[bad]):.4g}",
                )
    return Verdict(True, f"right and in bounds for n in {list(sizes)} with BLOCK in {list(blocks)}")


SOFTMAX_CASES = [((7, 100), 128, 0), ((3, 1), 16, 0), ((5, 257), 512, 0), ((2, 64), 64, 0), ((4, 90), 128, 37)]


def check_softmax_kernel(kernel, cases=SOFTMAX_CASES, device: str = "cpu") -> Verdict:
    """A row-softmax kernel on ragged widths and on rows with a stride wider than the row."""
    import torch

    gen = torch.Generator().manual_seed(1)
    for (rows, cols), block, extra in cases:
        wide = torch.randn(rows, cols + extra, generator=gen) * 4
        x = wide[:, :cols]  # extra > 0: a strided view, stride(0) = cols + extra
        want = x.softmax(-1)
        label = f"x of shape {(rows, cols)} with stride {x.stride(0)}, BLOCK={block}"
        if device != "cpu":
            xd = x.to(device)
            out = torch.empty_like(xd)
            kernel[(rows,)](xd, out, cols, xd.stride(0), out.stride(0), BLOCK=block)
            oob = []
        else:
            xd = _padded(wide.contiguous(), 2 * block)[:, :cols]
            out = _padded(torch.zeros(rows, cols), 2 * block)
            tensors = {"x": xd.as_strided((xd.numel() + rows * extra,), (1,)), "out": out}
            launch = functools.partial(kernel[(rows,)], xd, out, cols, xd.stride(0), out.stride(0), BLOCK=block)
            oob = _traced(kernel, launch, tensors)
        if oob:
            return Verdict(False, f"{label}: {oob[0]}")
        err = float((out.cpu() - want).abs().max())
        if not err <= 1e-5:
            return Verdict(False, f"{label}: max error {err:.3g} against torch.softmax")
    return Verdict(True, f"right and in bounds on {len(cases)} shapes (ragged widths, a strided view)")


MATMUL_CASES = [  # (M, N, K), (BLOCK_M, BLOCK_N, BLOCK_K), which input is a transposed view
    ((37, 45, 70), (16, 16, 16), ""),
    ((64, 32, 48), (32, 32, 16), "a"),
    ((20, 33, 9), (16, 16, 16), "b"),
    ((1, 5, 100), (16, 16, 32), "ab"),
]


def _matmul_input(rows: int, cols: int, transposed: bool, pad: int, gen):
    import torch

    if transposed:  # stored as cols x rows, viewed as rows x cols: strides (1, rows)
        return _padded(torch.randn(cols, rows, generator=gen), pad).t()
    return _padded(torch.randn(rows, cols, generator=gen), pad)


def check_matmul_kernel(kernel, cases=MATMUL_CASES, device: str = "cpu") -> Verdict:
    """``kernel[(cdiv(M, BM), cdiv(N, BN))](a, b, c, M, N, K, strides..., BLOCK_M=, BLOCK_N=, BLOCK_K=)``.

    Ragged M, N and K (K not a multiple of BLOCK_K), and transposed views of A and B (the kernel
    must use the strides it is given); every access traced on CPU, so a K tail without a mask fails.
    """
    import torch
    import triton

    gen = torch.Generator().manual_seed(2)
    for (m, n, k), (bm, bn, bk), trans in cases:
        a = _matmul_input(m, k, "a" in trans, 2 * bm * bk, gen)
        b = _matmul_input(k, n, "b" in trans, 2 * bk * bn, gen)
        c = _padded(torch.full((m, n), float("nan")), 2 * bm * bn)
        want = a @ b
        label = f"M, N, K = {m}, {n}, {k} with BLOCK {bm}x{bn}x{bk}" + (
            f", {' and '.join(trans)} transposed" if trans else ""
        )
        if device != "cpu":
            a, b, c = a.to(device), b.to(device), c.to(device)
        args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        launch = functools.partial(
            kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))], *args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk
        )
        if device != "cpu":
            launch()
            oob = []
        else:
            oob = _traced(kernel, launch, {"A": a, "B": b, "C": c})
        if oob:
            return Verdict(False, f"{label}: {oob[0]}")
        err = float((c.cpu() - want).abs().max())
        if not err <= 1e-3:
            return Verdict(False, f"{label}: max error {err:.3g} against torch's a @ b")
    return Verdict(True, f"right and in bounds on {len(cases)} cases (ragged M, N, K; transposed A and B)")


# ----------------------------------------------------------------------------- Module 4: FX


def _counter_graphs():
    import operator

    import torch

    def block(x):
        return torch.relu(x * 2) + x

    def repeated(x):
        y = torch.sin(x) * x
        z = torch.sin(y) * y
        return torch.relu(z + y) - x

    def mixed(x):
        return torch.tanh(x @ x.t()).sum(dim=0) * 3 + operator.neg(x).mean()

    return [block, repeated, mixed]


def check_call_counter(run_and_count: Callable, x=None) -> Verdict:
    """``run_and_count(graph, x) -> (result, {target name: calls})`` on three graphs.

    The oracle is the graph itself: a graph without loops runs each ``call_function`` node once,
    so the counts are the node counts per target.
    """
    import torch

    from course_lib import fx

    x = torch.randn(3, 3, generator=torch.Generator().manual_seed(0)) if x is None else x
    for f in _counter_graphs():
        graph = fx.symbolic_trace(f)
        want: dict[str, int] = {}
        for n in graph.nodes:
            if n.op == "call_function":
                want[fx.target_name(n.target)] = want.get(fx.target_name(n.target), 0) + 1
        result, counts = run_and_count(fx.symbolic_trace(f), x)
        if not torch.allclose(result, f(x)):
            return Verdict(False, f"on {f.__name__}: the result differs from eager")
        if counts != want:
            return Verdict(False, f"on {f.__name__}: counts {short_repr(counts)}, but the graph has {short_repr(want)}")
    return Verdict(True, "results and counts right on 3 graphs")


# ----------------------------------------------------------------------------- Module 5: collectives

_P2P = ("send", "recv", "isend", "irecv")
_COLLECTIVES = ("all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter")  # fmt: skip


def _record_traffic(fn, log: list):
    """Patch torch.distributed so p2p calls are logged and collectives refuse; returns an undo list."""
    import torch.distributed as dist

    undo = []

    def p2p(name, original):
        def call(tensor, peer=None, *args, **kwargs):
            target = peer if peer is not None else kwargs.get("dst", kwargs.get("src"))
            log.append((name, int(target), int(tensor.numel())))
            return original(tensor, peer, *args, **kwargs)

        return call

    def refuse(name):
        def call(*args, **kwargs):
            raise RuntimeError(f"dist.{name} is the library's collective; the exercise asks for point-to-point steps")

        return call

    for name in _P2P + _COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None:
            continue
        wrapper = p2p(name, original) if name in _P2P else refuse(name)
        undo.append((dist, name, original))
        setattr(dist, name, wrapper)
        for key, value in list(getattr(fn, "__globals__", {}).items()):
            if value is original:
                undo.append((fn.__globals__, key, original))
                fn.__globals__[key] = wrapper
    return undo


def _ring_worker(rank: int, world: int, port: int, fn, numel: int, out_dir: str) -> None:
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        x = torch.randn(numel, generator=torch.Generator().manual_seed(1234 + rank))
        want = x.clone()
        dist.all_reduce(want)
        log: list = []
        _record_traffic(fn, log)  # the process ends after this; nothing to undo
        got = fn(x.clone(), rank, world)
        res = {"ok": bool(torch.allclose(got, want, atol=1e-5, rtol=1e-5)), "error_max": float((got - want).abs().max()),
               "log": log}  # fmt: skip
    except Exception:  # report, never hang the parent
        res = {"error": traceback.format_exc()[-800:]}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - the result is written already
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ring(fn, world: int, numel: int, timeout: float = 60.0) -> dict:
    """Run ``fn(tensor, rank, world)`` on ``world`` gloo processes; {rank: result or error}."""
    import multiprocessing

    import torch  # noqa: F401  (imported before forking, so workers start warm)

    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    port = _free_port()
    with tempfile.TemporaryDirectory() as out_dir:
        procs = [ctx.Process(target=_ring_worker, args=(r, world, port, fn, numel, out_dir)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout)
        for p in procs:
            if p.is_alive():
                p.kill()
        out = {}
        for r in range(world):
            path = os.path.join(out_dir, f"rank{r}.json")
            out[r] = json.load(open(path)) if os.path.exists(path) else {"error": "no result (timed out or crashed)"}
    return out


def ring_traffic_verdict(results: dict, world: int, numel: int) -> Verdict:
    """Values equal dist.all_reduce; every send goes right, every receive comes from the left; 2(p-1)/p of the data."""
    errors = [f"rank {r}: {v['error'].strip().splitlines()[-1]}" for r, v in results.items() if "error" in v]
    if errors:
        return Verdict(False, "; ".join(errors[:2]))
    if not all(v["ok"] for v in results.values()):
        bad = [r for r, v in results.items() if not v["ok"]]
        return Verdict(False, f"ranks {bad} differ from dist.all_reduce")
    budget = 2 * (world - 1) * math.ceil(numel / world)
    for r, v in results.items():
        right, left = (r + 1) % world, (r - 1) % world
        for op, peer, _ in v["log"]:
            if op in ("send", "isend") and peer != right:
                return Verdict(
                    False, f"rank {r} sent to rank {peer}; in a ring it only sends to its right neighbour {right}"
                )
            if op in ("recv", "irecv") and peer != left:
                return Verdict(
                    False, f"rank {r} received from rank {peer}; in a ring only from its left neighbour {left}"
                )
        sent = sum(n for op, _, n in v["log"] if op in ("send", "isend"))
        if sent > budget:
            return Verdict(False, f"rank {r} sent {sent} elements; a ring sends 2(p-1) chunks of numel/p (<= {budget})")
        if sent == 0:
            return Verdict(False, f"rank {r} sent nothing")
    return Verdict(
        True, f"{world} ranks equal dist.all_reduce; each sends {budget} elements or fewer, only to its right"
    )


def check_ring_allreduce(fn, worlds=(3, 4), numel: int = 50) -> Verdict:
    """The learner's ring all-reduce on 3 and 4 processes, values and traffic pattern."""
    import torch

    fn(torch.zeros(4), 0, 1)  # in this process, world 1: a stub raises NotImplementedError here
    for world in worlds:
        v = ring_traffic_verdict(run_ring(fn, world, numel), world, numel)
        if not v.ok:
            return Verdict(False, f"world={world}: {v.message}")
    return Verdict(True, f"worlds {list(worlds)}: {v.message.split(';', 1)[-1].strip()}")


# ----------------------------------------------------------------------------- Module 6: OpenMP


def omp_finish_times(kind: str, chunk: int, n: int, threads: int, cost=lambda i: i + 1) -> list[float]:
    """Simulated busy time of each thread for ``schedule(kind, chunk)`` over iterations 0..n-1.

    static: chunk 0 -> one contiguous block per thread, else chunks dealt round-robin.
    dynamic: chunks of ``chunk`` (1 if 0) handed to whichever thread is free first.
    guided: like dynamic, with chunks of max(chunk, ceil(remaining / threads)) (libgomp's rule).
    """
    busy = [0.0] * threads
    if kind == "static":
        if chunk <= 0:
            size = -(-n // threads)
            for t in range(threads):
                busy[t] = sum(cost(i) for i in range(t * size, min(n, (t + 1) * size)))
        else:
            for i in range(n):
                busy[(i // chunk) % threads] += cost(i)
        return busy
    start = 0
    while start < n:
        size = max(1, chunk) if kind == "dynamic" else max(max(1, chunk), -(-(n - start) // threads))
        t = min(range(threads), key=lambda k: busy[k])
        busy[t] += sum(cost(i) for i in range(start, min(n, start + size)))
        start += size
    return busy


def schedule_balance(kind: str, chunk: int, n: int = 4000, threads=(2, 4, 8), limit: float = 1.1) -> Verdict:
    """The busiest thread's time over the average, for several thread counts; at most ``limit``."""
    if kind not in ("static", "dynamic", "guided"):
        return Verdict(False, f"unknown schedule {kind!r}; use 'static', 'dynamic' or 'guided'")
    if not isinstance(chunk, int) or chunk < 0:
        return Verdict(False, "the chunk is a non-negative integer (0: the default)")
    worst = []
    for p in threads:
        busy = omp_finish_times(kind, chunk, n, p)
        worst.append((max(busy) / (sum(busy) / p), p))
    ratio, p = max(worst)
    text = ", ".join(f"{q} threads: {r:.2f}x" for r, q in sorted(worst, key=lambda w: w[1]))
    if ratio > limit:
        return Verdict(
            False, f"schedule({kind}, {chunk}): with {p} threads the busiest gets {ratio:.2f}x the average ({text})"
        )
    return Verdict(True, f"schedule({kind}, {chunk}): busiest thread vs average: {text}")
