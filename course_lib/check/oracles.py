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
import tempfile
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


# ----------------------------------------------------------------------------- Module 4: FX, AOT, Inductor
#
# Random inputs for Module 4's exercises. Each generator is seeded and returns plain data, so a
# failing case names its seed and the learner can rebuild it (``oracles.random_fx_graph(7)``).

_UNARY = ("sin", "relu", "tanh", "neg")  # torch functions (neg: operator.neg), shape-preserving
_BINARY = ("mul", "add", "sub")  # operator functions


def _fx_target(name: str):
    import operator

    import torch

    return getattr(operator, name) if name in _BINARY or name == "neg" else getattr(torch, name)


def random_fx_graph(seed: int, n_ops: int = 9, fma_rate: float = 0.0):
    """A random straight-line course_lib FX graph: 1-3 inputs, ``n_ops`` pointwise ops, some dead.

    Every value may feed any later op, so some values end up unused (dead code); with
    ``fma_rate`` > 0 that share of steps emits ``a * b + c`` (the multiply used once, by the add).
    The output returns the last value and, half the time, one earlier value.
    """
    import random

    from course_lib import fx

    rng = random.Random(seed)
    g = fx.Graph()
    vals = [g.placeholder(f"x{k}") for k in range(rng.randint(1, 3))]
    for _ in range(n_ops):
        if rng.random() < fma_rate:
            a, b, c = (rng.choice(vals) for _ in range(3))
            vals.append(g.call_function(_fx_target("add"), (g.call_function(_fx_target("mul"), (a, b)), c)))
        elif rng.random() < 0.5:
            vals.append(g.call_function(_fx_target(rng.choice(_UNARY)), (rng.choice(vals),)))
        else:
            vals.append(g.call_function(_fx_target(rng.choice(_BINARY)), (rng.choice(vals), rng.choice(vals))))
    outs = [vals[-1]] + ([rng.choice(vals[:-1])] if rng.random() < 0.5 else [])
    g.output(tuple(outs) if len(outs) > 1 else outs[0])
    return g


def fx_inputs(graph, seed: int = 0, shape=(3, 4)) -> list:
    """One random tensor per placeholder of ``graph``."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=gen) for n in graph.nodes if n.op == "placeholder"]


def _same_values(a, b) -> bool:
    import torch

    a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    return len(a) == len(b) and all(torch.allclose(x, y, atol=1e-6, equal_nan=True) for x, y in zip(a, b))


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


def _node_counts(graph) -> dict[str, int]:
    from course_lib import fx

    want: dict[str, int] = {}
    for n in graph.nodes:
        if n.op == "call_function":
            want[fx.target_name(n.target)] = want.get(fx.target_name(n.target), 0) + 1
    return want


def check_call_counter(run_and_count: Callable, x=None, random_graphs: int = 8) -> Verdict:
    """``run_and_count(graph, *inputs) -> (result, {target name: calls})`` on 3 traced and random graphs.

    The oracle is the graph itself: a graph without loops runs each ``call_function`` node once,
    so the counts are the node counts per target; the result must equal the function's (eager).
    """
    import torch

    from course_lib import fx

    x = torch.randn(3, 3, generator=torch.Generator().manual_seed(0)) if x is None else x
    cases = [(f.__name__, fx.symbolic_trace(f), [x], f(x)) for f in _counter_graphs()]
    for seed in range(random_graphs):
        g = random_fx_graph(seed)
        inputs = fx_inputs(g, seed)
        cases.append((f"random graph {seed} (oracles.random_fx_graph({seed}))", g, inputs, g(*inputs)))
    for label, graph, inputs, want_value in cases:
        want = _node_counts(graph)
        result, counts = run_and_count(graph, *inputs)
        if not _same_values(result, want_value):
            return Verdict(False, f"on {label}: the result differs from running the graph")
        if counts != want:
            return Verdict(False, f"on {label}: counts {short_repr(counts)}, but the graph has {short_repr(want)}")
    return Verdict(True, f"results and counts right on {len(cases)} graphs ({random_graphs} random)")


def check_dce(dce: Callable, count: int = 12, functions: tuple = ()) -> Verdict:
    """``dce(graph) -> erased names`` on ``functions`` (traced) and random graphs, against ``fx.dce`` on a copy.

    The erased names and their order, the graph left behind (printed) and its values must match;
    the graph must still lint.
    """
    from course_lib import fx

    cases = [(f.__name__, functools.partial(fx.symbolic_trace, f)) for f in functions]
    cases += [(f"random graph {s} (oracles.random_fx_graph({s}))", functools.partial(random_fx_graph, s))
              for s in range(count)]  # fmt: skip
    for seed, (label, make) in enumerate(cases):
        graph, ref = make(), make()
        inputs = fx_inputs(graph, seed)
        before = graph(*inputs)
        erased, want = dce(graph), fx.dce(ref)
        if list(erased or ()) != want:
            return Verdict(False, f"on {label}: erased {erased}, expected {want}")
        graph.lint()
        if str(graph) != str(ref) or not _same_values(graph(*inputs), before):
            return Verdict(False, f"on {label}: the graph left behind differs", _text_diff(str(ref), str(graph)))
    return Verdict(True, f"same erasures and graphs as fx.dce on {len(cases)} graphs ({count} random)")


def _text_diff(want: str, got: str) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "got", lineterm="", n=1))


def _fma_pattern(a, b, c):
    return a * b + c


def check_fma_rewrite(fuse: Callable, count: int = 10) -> Verdict:
    """``fuse(graph) -> matches`` rewriting ``a * b + c`` to ``torch.addcmul`` on random graphs.

    The oracle: ``fx.replace_pattern`` with the canonical pattern on a copy gives the count; the
    learner's graph must compute the same values, hold that many ``addcmul`` nodes and no match left.
    """
    import torch

    from course_lib import fx

    pattern = fx.symbolic_trace(_fma_pattern)
    for seed in range(count):
        graph, ref = random_fx_graph(seed, fma_rate=0.4), random_fx_graph(seed, fma_rate=0.4)
        inputs = fx_inputs(graph, seed)
        before = graph(*inputs)
        got = fuse(graph)
        want = len(fx.replace_pattern(ref, pattern, lambda a, b, c: torch.addcmul(c, a, b)))
        label = f"random graph {seed} (oracles.random_fx_graph({seed}, fma_rate=0.4))"
        fused = sum(1 for n in graph.nodes if n.op == "call_function" and n.target is torch.addcmul)
        if got != want or fused != want:
            return Verdict(False, f"on {label}: returned {got}, graph has {fused} addcmul nodes; expected {want}")
        if fx.find_matches(graph, pattern):
            return Verdict(False, f"on {label}: an a * b + c is left in the graph")
        if not _same_values(graph(*inputs), before):
            return Verdict(False, f"on {label}: the rewritten graph computes different values")
    return Verdict(True, f"same rewrites as fx.replace_pattern on {count} random graphs")


GUARD_PROPERTIES = ("dtype", "shape", "device", "requires_grad")  # TENSOR_MATCH's order


def tensor_guard_probes(count: int = 40, seed: int = 0) -> list[tuple[tuple, object, str | None]]:
    """(recorded (dtype, shape, device, requires_grad), probe value, first property that differs).

    Each probe is built by changing a random subset of the recorded properties (or by being a
    Python number), so the answer is known by construction, not from a reference.
    """
    import random

    import torch

    rng = random.Random(seed)
    dtypes = (torch.float32, torch.float64, torch.float16, torch.int64)
    probes = []
    for _ in range(count):
        shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(0, 3)))
        rec = (rng.choice(dtypes[:3]), shape, "cpu", rng.random() < 0.5)
        if rng.random() < 0.1:
            probes.append((rec, rng.choice((3.0, 2, None)), "type"))
            continue
        change = [p for p in GUARD_PROPERTIES if p != "device" and rng.random() < 0.3]
        dtype = rng.choice([d for d in dtypes[:3] if d != rec[0]]) if "dtype" in change else rec[0]
        new_shape = shape + (2,) if "shape" in change else shape
        grad = (not rec[3]) if "requires_grad" in change else rec[3]
        value = torch.zeros(new_shape, dtype=dtype, requires_grad=grad)
        probes.append((rec, value, change[0] if change else None))
    return probes


def random_broadcast(rng, max_rank: int = 4, max_size: int = 5) -> tuple[tuple, tuple]:
    """(input shape, output shape) of a random broadcast: the input aligns right, some dims are 1."""
    out = tuple(rng.randint(1, max_size) for _ in range(rng.randint(0, max_rank) if rng.random() < 0.1 else
                                                          rng.randint(1, max_rank)))  # fmt: skip
    keep = rng.randint(max(0, len(out) - 2), len(out))  # the input drops at most two leading dims
    shape = tuple(1 if rng.random() < 0.35 else s for s in out[len(out) - keep :])
    return shape, out


def broadcast_cases(count: int = 30, seed: int = 0) -> list[tuple[tuple, tuple]]:
    """``count`` random (input shape, output shape) broadcasts, seeded."""
    import random

    rng = random.Random(seed)
    return [random_broadcast(rng) for _ in range(count)]


def broadcast_operand_pairs(count: int = 20, seed: int = 0) -> list[tuple[tuple, tuple]]:
    """(shape of a, shape of b) that broadcast against each other (``a * b``), seeded."""
    import random

    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        sa, out = random_broadcast(rng)
        sb = tuple(1 if rng.random() < 0.35 else s for s in out[rng.randint(0, min(2, len(out))) :])
        pairs.append((sa, sb) if rng.random() < 0.5 else (sb, sa))
    return pairs


def index_cases(count: int = 30, seed: int = 0) -> list[tuple[list, list[int], int]]:
    """(index symbols, strides, offset): contiguous, transposed, broadcast (stride 0) and padded rows."""
    import random

    from course_lib.inductor import ir

    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        sizes = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
        strides, step = [0] * len(sizes), 1
        for d in reversed(range(len(sizes))):
            strides[d] = step
            step *= sizes[d] + rng.choice((0, 0, 3))  # sometimes a padded row
        if rng.random() < 0.3:  # a permuted view
            rng.shuffle(strides)
        strides = [0 if rng.random() < 0.15 else s for s in strides]  # an expanded dimension
        cases.append(([ir.sym(f"i{d}") for d in range(len(sizes))], strides, rng.choice((0, 0, 5, 128))))
    return cases


def group_cases(count: int = 30, seed: int = 0) -> list[tuple[tuple, tuple, bool]]:
    """(shape, reduction ranges, is_reduction) with size-1 dims sprinkled in, seeded."""
    import random

    rng = random.Random(seed)

    def sizes(n):
        return tuple(rng.choice((1, 1, 2, 7, 16, 64)) for _ in range(n))

    cases = []
    for _ in range(count):
        red = rng.random() < 0.5
        cases.append((sizes(rng.randint(0, 3)), sizes(rng.randint(1, 2)) if red else (), red))
    return cases


class _SetsGraph:
    """Two nodes given as read/write sets, enough of a GraphIR for ``scheduler.score_fusion``."""

    def __init__(self, case):
        reads_a, writes_a, reads_b, writes_b, nbytes = case
        self._reads = {**{w: set() for w in writes_a | writes_b}, min(writes_a): reads_a, min(writes_b): reads_b}
        self._nbytes = nbytes
        self.groups = [sorted(writes_a), sorted(writes_b)]

    def buffer(self, name):
        reads = self._reads[name]
        return type("Node", (), {"reads": lambda self_: reads})()

    def nbytes(self, name):
        return self._nbytes[name]


def score_cases(count: int = 30, seed: int = 0) -> list[tuple[set, set, set, set, dict]]:
    """(reads_a, writes_a, reads_b, writes_b, nbytes) over 8 buffers, seeded; writes of a and b disjoint."""
    import random

    rng = random.Random(seed)
    names = [f"buf{k}" for k in range(8)]
    cases = []
    for _ in range(count):
        nbytes = {n: 4 * rng.choice((1, 64, 256, 4096)) for n in names}
        wa, wb = {rng.choice(names[:4])}, {rng.choice(names[4:])}
        ra = set(rng.sample(names, rng.randint(0, 4))) - wa
        rb = set(rng.sample(names, rng.randint(0, 4))) - wb
        cases.append((ra, wa, rb, wb, nbytes))
    return cases


def score_reference(case) -> int:
    """``scheduler.score_fusion`` on the two nodes of a :func:`score_cases` case."""
    from course_lib.inductor import scheduler

    g = _SetsGraph(case)
    return scheduler.score_fusion(g, g.groups, 0, 1)


def half_problems(expr, parent=None) -> list[str]:
    """What in a kernel body still computes in half precision: an op or a constant of a half dtype
    (a conversion *to* half is a rounding, allowed), or a half load used without widening."""
    from course_lib.inductor.ir import HALF_DTYPES, Const, Load, Op

    found = []
    if isinstance(expr, Op):
        if expr.dtype in HALF_DTYPES and expr.op != "to_dtype":
            found.append(f"{expr.op} computed in {expr.dtype}")
        for a in expr.args:
            found += half_problems(a, expr)
    elif isinstance(expr, Const) and expr.dtype in HALF_DTYPES:
        found.append(f"the constant {expr.value} in {expr.dtype}")
    elif (
        isinstance(expr, Load)
        and expr.dtype in HALF_DTYPES
        and not (isinstance(parent, Op) and parent.op == "to_dtype")
    ):
        found.append(f"a {expr.dtype} load of {expr.buf} used by {parent.op if parent else 'the store'} as it is")
    return found


def _random_half_body(rng, depth: int):
    """A body as the lowering builds one for bfloat16 tensors: loads, constants, ops in their
    operands' dtype, conversions where dtypes meet."""
    from course_lib.inductor.ir import Const, Load, Op, sym

    if depth == 0 or rng.random() < 0.2:
        r = rng.random()
        if r < 0.5:
            return Load(f"buf{rng.randrange(3)}", sym("i0"), "bfloat16")
        if r < 0.7:
            return Load("buf3", sym("i0"), "float32")
        return Const(round(rng.uniform(-2.0, 2.0), 3), rng.choice(["bfloat16", "float32"]))
    if rng.random() < 0.2:
        x = _random_half_body(rng, depth - 1)
        return Op("to_dtype", (x,), "bfloat16" if x.dtype == "float32" else "float32")
    op = rng.choice(["add", "mul", "sub", "maximum", "exp", "tanh"])
    args = [_random_half_body(rng, depth - 1) for _ in range(1 if op in ("exp", "tanh") else 2)]
    dtype = "float32" if any(a.dtype == "float32" for a in args) else "bfloat16"
    return Op(op, tuple(a if a.dtype == dtype else Op("to_dtype", (a,), dtype) for a in args), dtype)


def _evaluate_body(expr, values: dict, only_conversions_round: bool):
    """A body's values, computed in float32. Each result is rounded to its op's dtype (as eager
    rounds after every op), or, with ``only_conversions_round``, only at a ``to_dtype``: what a
    kernel that widens correctly computes. Constants of a half dtype are rounded in the first
    case only (a kernel keeps a Python scalar in float32)."""
    import torch

    from course_lib.inductor.ir import Const, Load, Op

    def rounded(t, dtype):
        return t.to(getattr(torch, dtype)).float()

    if isinstance(expr, Load):
        return values[expr.buf]
    if isinstance(expr, Const):
        full = torch.full_like(values["buf3"], float(expr.value))
        return full if only_conversions_round else rounded(full, expr.dtype)
    if not isinstance(expr, Op):
        raise TypeError(f"a body holds Load, Const and Op nodes, not {type(expr).__name__}: {short_repr(expr)}")
    args = [_evaluate_body(a, values, only_conversions_round) for a in expr.args]
    fns = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "maximum": torch.maximum, "exp": torch.exp,
           "tanh": torch.tanh, "to_dtype": lambda x: x}  # fmt: skip
    if expr.op not in fns:
        raise ValueError(f"unexpected op {expr.op!r} in the answer")
    out = fns[expr.op](*args)
    return rounded(out, expr.dtype) if expr.op == "to_dtype" or not only_conversions_round else out


def widened_bodies(widen: Callable, n: int = 60, seed: int = 0) -> Verdict:
    """``widen`` (a bfloat16 body -> the same body computed in float32) on ``n`` random bodies. It must
    leave no arithmetic in half precision, and its result, run as typed (every op rounded to its
    dtype), must equal the original run in float32 with only the graph's conversions rounding:
    so a widened body rounds exactly where the model asked, and nowhere else."""
    import random

    import torch

    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    values = {f"buf{i}": (torch.randn(64, generator=gen) * 2).to(torch.bfloat16).float() for i in range(3)}
    values["buf3"] = torch.randn(64, generator=gen) * 2
    for k in range(n):
        body = _random_half_body(rng, 4)
        got = widen(body)
        problems = half_problems(got)
        if problems:
            return Verdict(False, f"body {k}, {short_repr(str(body), 120)}: {problems[0]}")
        want = _evaluate_body(body, values, only_conversions_round=True)
        have = _evaluate_body(got, values, only_conversions_round=False)
        differ = ~((have == want) | (have.isnan() & want.isnan()))
        if differ.any():
            return Verdict(False, f"body {k}, {short_repr(str(body), 120)}: {int(differ.sum())} of 64 values differ "
                                  "from float32 arithmetic rounded at the graph's own conversions")  # fmt: skip
    return Verdict(True, f"{n} random bodies: computed in float32, rounded where the graph converts")


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


def run_ring(fn, world: int, numel: int, timeout: float = 60.0) -> dict:
    """Run ``fn(tensor, rank, world)`` on ``world`` gloo processes; {rank: result or error}.

    The processes are :func:`course_lib.gpu.collectives.check_allreduce`'s (values compared with
    ``dist.all_reduce`` there); each rank's calls are recorded by a wrapper around ``fn`` that
    writes its log to a file the parent reads back: {"ok", "error_max", "log"} or {"error"}.
    """
    from course_lib.gpu import collectives

    with tempfile.TemporaryDirectory() as log_dir:

        def recorded(t, rank: int, world_: int):
            log: list = []
            _record_traffic(fn, log)  # in the worker process, which ends after this: nothing to undo
            try:
                return fn(t, rank, world_)
            finally:
                with open(os.path.join(log_dir, f"log{rank}.json"), "w") as f:
                    json.dump(log, f)

        results = collectives.check_allreduce({"answer": recorded}, world=world, numel=numel, timeout=timeout)
        out = {}
        for rank, res in results.items():
            if "error" in res:
                out[rank] = {"error": res["error"]}
                continue
            path = os.path.join(log_dir, f"log{rank}.json")
            log = json.load(open(path)) if os.path.exists(path) else []
            out[rank] = {"ok": res["answer"]["ok"], "error_max": res["answer"]["max_error"], "log": log}
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
