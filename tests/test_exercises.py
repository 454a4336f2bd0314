"""The checks issue 19 found fooled: each wrong answer now fails, and the solution still passes.

Each test runs the same oracle (``course_lib.check.oracles``) or guard the notebook's check cell
uses, once with the notebook's solution and once with the answer that used to pass.
"""

import operator

import pytest
import torch

from course_lib import check
from course_lib.aot.rules import sum_to  # as 04b imports it
from course_lib.check import oracles


@pytest.fixture(autouse=True)
def _not_strict(monkeypatch):
    monkeypatch.delenv("COURSE_CHECK_STRICT", raising=False)
    monkeypatch.delenv("COURSE_INSTRUCTOR", raising=False)


# ----------------------------------------------------------------------------- 01a: dominators on random CFGs


def first_pred_idoms(fn):
    """Wrong: idom = the first predecessor. Right on straight-line code and on some CFGs."""
    from course_lib.ir import cfg

    preds = fn.preds()
    return {b: (preds[b][0] if b != fn.entry else None) for b in cfg.reverse_postorder(fn)}


def _run_idoms(answer, guard=("course_lib.ir.cfg:idoms",)):
    labels, fns = oracles.random_functions(30)
    return check.Lab("t").run("idoms", lambda: [answer(f) for f in fns], expected=lambda: [oracles.nx_idoms(f) for f in fns],
                              compare=check.per_input(labels), guard=guard)  # fmt: skip


def test_dominators_checked_on_random_cfgs_against_networkx():
    from course_lib.ir import cfg

    assert _run_idoms(cfg.idoms, guard=()).passed  # the right answer: course_lib's own, unguarded
    r = _run_idoms(first_pred_idoms)
    assert r.status == check.FAILED and "random program" in r.message


def test_the_one_cfg_of_the_lesson_did_not_tell_the_wrong_answer_apart():
    """Why many inputs: on collatz's CFG the wrong answer happens to be right."""
    from course_lib import ir
    from course_lib.ir import cfg

    def straight(x: int) -> int:
        if x > 0:
            x = x + 1
        return x

    g = ir.from_python(straight)
    assert first_pred_idoms(g) == cfg.idoms(g)  # fooled on one input
    assert _run_idoms(first_pred_idoms).status == check.FAILED  # not on thirty


def test_calling_the_reference_fails_the_dominator_check():
    from course_lib.ir import cfg

    r = _run_idoms(lambda f: cfg.idoms(f))
    assert r.status == check.FAILED and "you called the reference implementation" in r.message


def test_dominance_frontiers_on_random_cfgs():
    from course_lib.ir import cfg

    labels, fns = oracles.random_functions(30)

    def run(answer, guard=("course_lib.ir.cfg:dominance_frontiers",)):
        return check.Lab("t").run("df", lambda: [answer(f, oracles.nx_idoms(f)) for f in fns],
                                  expected=lambda: [oracles.nx_frontiers(f) for f in fns], compare=check.per_input(labels),
                                  guard=guard)  # fmt: skip

    def only_preds(fn, idom):  # wrong: adds the join to its predecessors' frontiers only (no walk up)
        df = {b: set() for b in idom}
        for j in idom:
            ps = [p for p in fn.preds()[j] if p in idom]
            if len(ps) >= 2:
                for p in ps:
                    if p != idom[j]:
                        df[p].add(j)
        return df

    assert run(lambda f, idom: cfg.dominance_frontiers(f), guard=()).passed  # the right answer, unguarded
    assert run(only_preds).status == check.FAILED


# ----------------------------------------------------------------------------- 03a: masks and shapes of kernels

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _add_unmasked(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


@triton.jit
def _add_store_masked_only(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs), mask=offs < n)


def test_add_kernel_without_a_mask_fails_through_the_memory_tracer():
    from course_lib.triton import kernels

    assert oracles.check_add_kernel(kernels.add_kernel).ok  # the right answer: course_lib's own kernel
    v = oracles.check_add_kernel(_add_unmasked)
    assert not v.ok and "out-of-bounds" in v.message
    v = oracles.check_add_kernel(_add_store_masked_only)  # the store is masked, the loads read past the end
    assert not v.ok and "out-of-bounds load" in v.message


@triton.jit
def _softmax_ignores_stride(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _softmax_other_zero(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)  # padding lanes join the sum
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride_out + cols, e / tl.sum(e, axis=0), mask=mask)


def test_softmax_checked_on_ragged_and_strided_shapes():
    from course_lib.triton import kernels

    assert oracles.check_softmax_kernel(kernels.softmax_kernel).ok  # the right answer: course_lib's own kernel
    # ignoring the stride is right on the lesson's one contiguous 7 x 100 input; a strided view tells
    v = oracles.check_softmax_kernel(_softmax_ignores_stride)
    assert not v.ok and "stride" in v.message
    v = oracles.check_softmax_kernel(_softmax_other_zero)
    assert not v.ok and "max error" in v.message


# ----------------------------------------------------------------------------- 04a: the counting interpreter


def chk_run_and_count(graph, *inputs):
    from course_lib import fx

    counts = {}

    class Counter(fx.Interpreter):
        def call_function(self, target, args, kwargs):
            name = fx.target_name(target)
            counts[name] = counts.get(name, 0) + 1
            return super().call_function(target, args, kwargs)

    return Counter(graph).run(*inputs), counts


def test_hard_coded_counts_fail_the_interpreter_check():
    from course_lib import fx

    assert oracles.check_call_counter(chk_run_and_count).ok

    def hard_coded(graph, *inputs):
        return fx.Interpreter(graph).run(*inputs), {"operator.mul": 1, "torch.relu": 1, "operator.add": 1}

    v = oracles.check_call_counter(hard_coded)
    assert not v.ok and "counts" in v.message


# ----------------------------------------------------------------------------- 04b: sum_to must not call sum_to


def test_sum_to_exercise_fails_when_it_calls_the_reference():
    def cheat(g, shape):
        return sum_to(g, shape)  # a global name, as the notebook imported it

    def verify_sum_to(fn):
        g = torch.randn(2, 3, 4, dtype=torch.float64)
        return bool(torch.allclose(fn(g, [3, 1]), g.sum(dim=(0, 2)).view(3, 1)))

    r = check.Lab("t").run("sum_to", lambda: cheat, verify=verify_sum_to, guard=["course_lib.aot.rules:sum_to"])
    assert r.status == check.FAILED and "aot.rules.sum_to" in r.message
    r = check.Lab("t").run("sum_to", lambda: (lambda g, s: g.sum(dim=(0, 2)).view(3, 1)), verify=verify_sum_to,
                           guard=["course_lib.aot.rules:sum_to"])  # fmt: skip
    assert r.passed


# ----------------------------------------------------------------------------- 05b: the ring all-reduce


def chk_ring(t, rank, world):
    import torch.distributed as dist

    chunks = list(t.chunk(world))
    right, left = (rank + 1) % world, (rank - 1) % world
    for s in range(world - 1):
        send_i, recv_i = (rank - s) % world, (rank - s - 1) % world
        buf = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i].contiguous(), right)
        dist.recv(buf, left)
        req.wait()
        chunks[recv_i].add_(buf)
    for s in range(world - 1):
        send_i, recv_i = (rank + 1 - s) % world, (rank - s) % world
        buf = torch.empty_like(chunks[recv_i])
        req = dist.isend(chunks[send_i].contiguous(), right)
        dist.recv(buf, left)
        req.wait()
        chunks[recv_i].copy_(buf)
    return t


def library_allreduce(t, rank, world):
    import torch.distributed as dist

    if world > 1:
        dist.all_reduce(t)
    return t


def everyone_to_everyone(t, rank, world):
    """Right values, wrong algorithm: every rank sends its whole tensor to every other rank."""
    import torch.distributed as dist

    total = t.clone()
    for step in range(1, world):
        buf = torch.empty_like(t)
        req = dist.isend(t.contiguous(), (rank + step) % world)
        dist.recv(buf, (rank - step) % world)
        req.wait()
        total += buf
    t.copy_(total)
    return t


def test_ring_allreduce_checks_the_traffic_not_just_the_values():
    assert oracles.check_ring_allreduce(chk_ring, worlds=(3,)).ok
    v = oracles.check_ring_allreduce(library_allreduce, worlds=(3,))
    assert not v.ok and "dist.all_reduce is the library's collective" in v.message
    v = oracles.check_ring_allreduce(everyone_to_everyone, worlds=(3,))
    assert not v.ok and ("neighbour" in v.message or "sent" in v.message)


# ----------------------------------------------------------------------------- 06b: the OpenMP schedule


@pytest.mark.parametrize(
    ("kind", "chunk", "ok"),
    [("dynamic", 16, True), ("guided", 1, True), ("static", 1, True), ("dynamic", 4000, False), ("static", 0, False),
     ("dynamic", 1000, False), ("cyclic", 1, False)],
)  # fmt: skip
def test_schedule_balance_is_simulated_not_assumed(kind, chunk, ok):
    assert oracles.schedule_balance(kind, chunk).ok is ok


def test_simulated_schedules_match_their_definitions():
    assert oracles.omp_finish_times("static", 0, 4, 2) == [1 + 2, 3 + 4]
    assert oracles.omp_finish_times("static", 1, 4, 2) == [1 + 3, 2 + 4]
    assert oracles.omp_finish_times("dynamic", 4000, 10, 4) == [55, 0, 0, 0]  # one chunk: one busy thread


def test_per_input_names_the_failing_input():
    v = check.per_input(["a", "b"])([1, 2], [1, 3])
    assert not v.ok and v.message.startswith("wrong on b")
    assert check.per_input(["a"], operator.eq)([1], [1]).ok


# ----------------------------------------------------------------------------- new: a dataflow analysis, the K loop


def chk_reaching_definitions(fn):
    from course_lib.ir import dataflow

    def transfer(block, fact):
        cur = set(fact)
        for k, instr in enumerate(block.all()):
            for d in instr.defs():
                cur = {s for s in cur if s[0] != d}
                cur.add((d, block.label, k))
        return frozenset(cur)

    init = frozenset((p, "param", -1) for p, _ in fn.params)
    return dataflow.Analysis("reaching definitions", "forward", init, lambda fs: frozenset().union(*fs), transfer,
                             top=frozenset())  # fmt: skip


def test_reaching_definitions_written_in_the_framework_checked_on_random_programs():
    import dataclasses

    from course_lib.ir import dataflow

    labels, fns = oracles.random_functions(15)
    assert oracles.check_analysis(chk_reaching_definitions, fns, labels).ok

    def with_intersection(fn):  # wrong meet: only definitions reaching along every path
        return dataclasses.replace(chk_reaching_definitions(fn), merge=lambda fs: frozenset.intersection(*fs))

    def backward(fn):
        return dataclasses.replace(chk_reaching_definitions(fn), direction="backward")

    for wrong in (with_intersection, backward):
        v = oracles.check_analysis(wrong, fns, labels)
        assert not v.ok and "random program" in v.message
    # the round-robin oracle agrees with course_lib's own worklist analysis
    for fn in fns:
        r = dataflow.reaching_definitions(fn)
        assert (r.into, r.out) == oracles.reaching_definitions_roundrobin(fn)


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & ((k0 + rk)[None, :] < K)
        b_mask = ((k0 + rk)[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :] * stride_ak, mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :] * stride_bn, mask=b_mask, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _mm_assumes_contiguous(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                           stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & ((k0 + rk)[None, :] < K)
        b_mask = ((k0 + rk)[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=b_mask, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_matmul_k_loop_checked_on_ragged_and_transposed_inputs():
    assert oracles.check_matmul_kernel(_mm).ok
    v = oracles.check_matmul_kernel(_mm_assumes_contiguous)
    assert not v.ok and "transposed" in v.message


# ----------------------------------------------------------------------------- 05a: wavefronts (replaces padded_index)


def test_wavefront_count_needs_distinct_words_per_bank():
    import numpy as np

    from course_lib.gpu import memory

    lanes = np.arange(32)
    cases = [lanes * 4, lanes * 128, lanes * 132, np.full(32, 28), (lanes // 4) * 64]

    def solution(a):
        words = np.unique(np.asarray(a) // 4)
        return int(np.bincount(words % 32, minlength=32).max())

    def counts_lanes(a):  # wrong: a broadcast is not a conflict
        return int(np.bincount((np.asarray(a) // 4) % 32, minlength=32).max())

    def run(fn):
        return check.Lab("t").run("w", lambda: [fn(a) for a in cases], expected=lambda: [memory.bank_wavefronts(a) for a in cases],
                                  compare=check.per_input([str(k) for k in range(len(cases))]),
                                  guard=["course_lib.gpu.memory:bank_wavefronts"])  # fmt: skip

    assert run(solution).passed
    assert run(counts_lanes).status == check.FAILED
    assert "reference" in run(lambda a: memory.bank_wavefronts(a)).message


# ----------------------------------------------------------------------------- 05b: attention bytes (issue 24)


def test_attention_bytes_checked_on_many_shapes():
    import numpy as np

    from course_lib.gpu import flash

    g = np.random.default_rng(24)
    cases = [(4, 16, 4096, 64, 2), (1, 1, 1, 1, 1), (2, 3, 200, 64, 4)] + [
        (int(g.integers(1, 9)), int(g.integers(1, 33)), int(g.choice([128, 512, 2048])), int(g.choice([32, 64, 128])),
         int(g.choice([2, 4]))) for _ in range(30)]  # fmt: skip

    def solution(b, h, n, d, e):
        return b * h * (4 * n * d + 4 * n * n) * e, b * h * 4 * n * d * e

    def s_once(b, h, n, d, e):  # wrong: S written and read once, P never stored (2 N^2, not 4 N^2)
        return b * h * (4 * n * d + 2 * n * n) * e, b * h * 4 * n * d * e

    def per_head(b, h, n, d, e):  # wrong: forgets the batch and the heads
        return (4 * n * d + 4 * n * n) * e, 4 * n * d * e

    def run(fn):
        return check.Lab("t").run("a", lambda: [tuple(fn(*c)) for c in cases],
                                  expected=lambda: [(flash.naive_attention_bytes(*c), flash.flash_attention_bytes(*c))
                                                    for c in cases],
                                  compare=check.per_input([str(c) for c in cases]),
                                  guard=["course_lib.gpu.flash:naive_attention_bytes"])  # fmt: skip

    assert run(solution).passed
    assert run(s_once).status == check.FAILED
    assert run(per_head).status == check.FAILED
    assert "reference" in run(lambda *c: (flash.naive_attention_bytes(*c), 0)).message


# ----------------------------------------------------------------------------- 06b Ex3: tiles that fit the sets (issue 24)


def test_choose_tile_needs_associativity():
    from course_lib.cpu import caches

    cases = [(c, w, ln, e, a, ld) for c, w, ln in ((49152, 12, 64), (32768, 8, 64), (1 << 20, 16, 64), (8192, 2, 32))
             for e in (4, 8) for a in (2, 3) for ld in (1024, 1040, 1025, 1000, 96)]  # fmt: skip

    def capacity_only(c, w, ln, e, a, ld):  # wrong: the old rule, blind to sets
        return caches.tile_for(c, e, a)

    def one_line_per_row(c, w, ln, e, a, ld):  # wrong: counts each row as one line, starting sets only
        sets, t = c // (w * ln), 1
        while a * (2 * t) ** 2 * e <= c:
            starts = [(r * ld * e // ln) % sets for r in range(2 * t)]
            if a * max(starts.count(s) for s in set(starts)) > w:
                break
            t *= 2
        return t

    def run(fn):
        return check.Lab("t").run("tile", lambda: [fn(*c) for c in cases],
                                  expected=lambda: [caches.tile_for_cache(*c) for c in cases],
                                  compare=check.per_input([str(c) for c in cases]),
                                  guard=["course_lib.cpu.caches:tile_for", "course_lib.cpu.caches:tile_for_cache"])  # fmt: skip

    assert run(_tile_solution).passed
    assert run(capacity_only).status == check.FAILED
    assert run(one_line_per_row).status == check.FAILED


def _tile_solution(cache_bytes, ways, line_bytes, elem_bytes, arrays, ld):
    """The notebook's solution of 06b Exercise 3."""
    sets = cache_bytes // (ways * line_bytes)

    def busiest_set(t):
        per_set = {}
        for row in range(t):
            first = row * ld * elem_bytes
            for line in range(first // line_bytes, (first + t * elem_bytes - 1) // line_bytes + 1):
                per_set[line % sets] = per_set.get(line % sets, 0) + 1
        return max(per_set.values())

    t = 1
    while arrays * (2 * t) ** 2 * elem_bytes <= cache_bytes and arrays * busiest_set(2 * t) <= ways:
        t *= 2
    return t


# ----------------------------------------------------------------------------- 06b Ex2: which threads share a line (issue 24)


def test_false_sharing_pairs_checked_on_odd_layouts():
    import numpy as np

    from course_lib.cpu import openmp

    g = np.random.default_rng(2)
    cases = [([8 * t for t in range(4)], 8, 64), ([60, 68], 8, 64), ([4, 132], 72, 64)] + [
        ([int(b + t * s) for t in range(int(g.integers(2, 9)))], int(z), int(ln))
        for b, s, z, ln in ((g.integers(0, 200), g.choice([4, 8, 12, 24, 64, 72, 100]), g.choice([4, 8, 12, 24, 72]),
                             g.choice([32, 64, 128])) for _ in range(39))]  # fmt: skip

    def solution(offsets, size, line):
        owners = {}
        for t, off in enumerate(offsets):
            for ln in range(off // line, (off + size - 1) // line + 1):
                owners.setdefault(ln, set()).add(t)
        return {(t, u) for ts in owners.values() for t in ts for u in ts if t < u}

    def first_byte_only(offsets, size, line):  # wrong: forgets that a field can straddle two lines
        return {(t, u) for t in range(len(offsets)) for u in range(t + 1, len(offsets))
                if offsets[t] // line == offsets[u] // line}  # fmt: skip

    def neighbours_only(offsets, size, line):  # wrong: only adjacent threads can share
        return {p for p in solution(offsets, size, line) if p[1] == p[0] + 1}

    def run(fn):
        return check.Lab("t").run("fs", lambda: [set(fn(*c)) for c in cases],
                                  expected=lambda: [openmp.false_sharing_pairs(*c) for c in cases],
                                  compare=check.per_input([str(c) for c in cases]),
                                  guard=["course_lib.cpu.openmp:false_sharing_pairs"])  # fmt: skip

    assert run(solution).passed
    assert run(first_byte_only).status == check.FAILED
    assert run(neighbours_only).status == check.FAILED
    assert "reference" in run(lambda *c: openmp.false_sharing_pairs(*c)).message


# ----------------------------------------------------------------------------- 06a Ex2: predict gcc's verdicts (issue 24)


def test_gcc_verdict_prediction_is_checked_by_compiling():
    import shutil

    from course_lib.cpu import vectorise

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    truth = {name: v for name, (v, _) in vectorise.gcc_verdicts().items()}
    assert len(truth) == 9 and 2 <= sum(truth.values()) <= 7  # both answers occur

    def run(pred):
        return check.Lab("t").run("p", lambda: pred, expected=truth, predict=True)

    assert run(dict(truth)).passed
    all_yes = dict.fromkeys(truth, True)
    assert run(all_yes).status == check.FAILED
    flipped = {**truth, "early exit": not truth["early exit"]}
    v = run(flipped)
    assert v.status == check.FAILED and repr(truth) not in v.message  # the expected dict is never shown


# ----------------------------------------------------------------------------- 04a: random FX graphs (issue 19)


def _erase_dead(graph, order):
    erased = []
    for node in order:
        if not node.users and not node.is_impure():
            erased.append(node.name)
            graph.erase_node(node)
    return erased


def chk_dce(graph):
    """The notebook's solution: one walk from last to first."""
    return _erase_dead(graph, reversed(graph.nodes))


def test_dce_checked_on_random_graphs():
    from course_lib import fx

    def forward_walk(graph):  # wrong: first to last misses the inputs of nodes erased later
        return _erase_dead(graph, list(graph.nodes))

    def lesson_only(graph):  # wrong: the names erased from the lesson's graph, hard-coded
        return ["add", "cos"]

    assert oracles.check_dce(chk_dce).ok
    for wrong in (forward_walk, lesson_only):
        v = oracles.check_dce(wrong)
        assert not v.ok and "random graph" in v.message
    r = check.Lab("t").run("dce", lambda: oracles.check_dce(lambda g: fx.dce(g)), verify=lambda v: v,
                           guard=["course_lib.fx.passes:dce"])  # fmt: skip
    assert r.status == check.FAILED and "reference" in r.message


def test_fma_rewrite_checked_on_random_graphs():
    from course_lib import fx

    def solution(graph):
        return len(fx.replace_pattern(graph, lambda a, b, c: a * b + c, lambda a, b, c: torch.addcmul(c, a, b)))

    def first_match_only(graph):  # wrong: rewrites one match (two_fmas has two, found by eye)
        pattern = fx.symbolic_trace(lambda a, b, c: a * b + c)
        matches = fx.find_matches(graph, pattern)
        return solution(graph) if len(matches) <= 1 else 2

    assert oracles.check_fma_rewrite(solution).ok
    v = oracles.check_fma_rewrite(first_match_only)
    assert not v.ok and "random graph" in v.message
    assert not oracles.check_fma_rewrite(lambda g: 2).ok


def test_random_fx_graphs_are_deterministic_and_have_dead_code():
    g1, g2 = oracles.random_fx_graph(5), oracles.random_fx_graph(5)
    assert str(g1) == str(g2)
    assert sum(len(chk_dce(oracles.random_fx_graph(s))) > 0 for s in range(12)) >= 6


def test_tensor_guard_probes_know_their_answer():
    def solution(expected, value):
        if not isinstance(value, torch.Tensor):
            return "type"
        for name, want, got in zip(oracles.GUARD_PROPERTIES, expected,
                                   (value.dtype, tuple(value.shape), str(value.device), value.requires_grad)):  # fmt: skip
            if want != got:
                return name
        return None

    def shape_before_dtype(expected, value):  # wrong order: right whenever one property changes
        if isinstance(value, torch.Tensor) and tuple(value.shape) != tuple(expected[1]):
            return "shape"
        return solution(expected, value)

    probes = oracles.tensor_guard_probes(40)
    assert {want for *_, want in probes} == {None, "type", "dtype", "shape", "requires_grad"}
    assert all(solution(r, v) == want for r, v, want in probes)
    assert any(shape_before_dtype(r, v) != want for r, v, want in probes)


# ----------------------------------------------------------------------------- 04b: many shapes (issue 19)


def test_mul_rule_checked_on_random_broadcasts():
    def grads(rule, sa, sb, gen):
        a = torch.randn(sa, dtype=torch.float64, generator=gen).requires_grad_()
        b = torch.randn(sb, dtype=torch.float64, generator=gen).requires_grad_()
        out = a * b
        g = torch.randn(out.shape, dtype=torch.float64, generator=gen)
        want = torch.autograd.grad(out, (a, b), g)
        got = rule(g, out.detach(), a.detach(), b.detach())
        return all(w.shape == o.shape and torch.allclose(w, o) for w, o in zip(want, got))

    def solution(g, out, a, b):
        return sum_to(g * b, a.shape), sum_to(g * a, b.shape)

    def lesson_shapes_only(g, out, a, b):  # wrong: sums dim 0 for b, as (3, 4) * (4,) needs
        return g * b, (g * a).sum(0)

    pairs = oracles.broadcast_operand_pairs(20, seed=2)
    assert len({len(a) for a, _ in pairs}) >= 3  # ranks vary
    assert grads(lesson_shapes_only, (3, 4), (4,), torch.Generator().manual_seed(0))  # fooled on one input
    gen = torch.Generator().manual_seed(2)
    assert all(grads(solution, sa, sb, gen) for sa, sb in pairs)
    gen = torch.Generator().manual_seed(2)
    assert not all(grads(lesson_shapes_only, sa, sb, gen) for sa, sb in pairs)


# ----------------------------------------------------------------------------- 04c: indices, groups, scores (issue 19)


def test_inductor_index_exercises_checked_on_random_layouts():
    import sympy

    from course_lib.inductor import ir, lowering, scheduler

    cases = oracles.index_cases(30)
    want = [sympy.expand(ir.flat_index(*c)) for c in cases]

    def row_major_only(idx, strides, offset):  # wrong: ignores the strides given (contiguous assumed)
        return ir.flat_index(idx, [1] * len(idx), offset)

    assert [sympy.expand(row_major_only(*c)) for c in cases] != want
    assert any(0 in c[1] for c in cases) and any(c[2] for c in cases)  # broadcasts and offsets occur

    def ref_broadcast(out_idx, in_shape, out_shape):
        v = lowering.TensorValue(tuple(in_shape), "float32", lambda idx: idx)
        return list(lowering.broadcast_fn(v, out_shape)(out_idx))

    def left_aligned(out_idx, in_shape, out_shape):  # wrong: aligns on the left
        return [sympy.Integer(0) if s == 1 else out_idx[d] for d, s in enumerate(in_shape)]

    bcases = [([ir.sym(f"i{d}") for d in range(len(out))], inp, out) for inp, out in oracles.broadcast_cases(30, 1)]
    assert any(left_aligned(*c) != ref_broadcast(*c) for c in bcases)

    def keeps_ones(shape, ranges, is_reduction):  # wrong: forgets to drop size-1 dims
        return (tuple(shape), tuple(ranges)) if is_reduction else (tuple(shape[:-1]), tuple(shape[-1:]))

    gcases = oracles.group_cases(30)
    ref = [scheduler.node_group(ir.Buffer("b", "reduction" if c[2] else "pointwise", c[0], "float32",
                                          reduction_ranges=c[1])) for c in gcases]  # fmt: skip
    assert [keeps_ones(*c) for c in gcases] != ref


def test_fusion_score_checked_on_random_sets():
    def solution(ra, wa, rb, wb, nbytes):
        return sum(nbytes[b] for b in (ra | wa) & (rb | wb))

    def reads_only(ra, wa, rb, wb, nbytes):  # wrong: inputs both read, but not what one writes and the other reads
        return sum(nbytes[b] for b in ra & rb)

    cases = oracles.score_cases(30)
    want = [oracles.score_reference(c) for c in cases]
    assert [solution(*c) for c in cases] == want
    assert [reads_only(*c) for c in cases] != want
    assert len(set(want)) > 3  # not one repeated value


def test_a_guarded_reference_fails_the_index_exercise():
    from course_lib.inductor import ir

    cases = oracles.index_cases(5)
    r = check.Lab("t").run("flat index", lambda: [ir.flat_index(*c) for c in cases],
                           expected=lambda: [ir.flat_index(*c) for c in cases],
                           guard=["course_lib.inductor.ir:flat_index"])  # fmt: skip
    assert r.status == check.FAILED and "reference" in r.message


# ----------------------------------------------------------------------------- 01a/01b (issue 19): Module 1 on random inputs


def _lvn_first_key(block, commute=True, keep="first"):
    """A value-numbering answer; wrong variants ignore commutativity or keep the latest holder."""
    from course_lib.ir import dataflow

    table, out = {}, {}
    for i in block.instrs:
        key = dataflow.expr_key(i)
        if key is None:
            continue
        if not commute:
            key = (i.op, i.type) + tuple(str(a) for a in i.args)
        if key in table:
            out[i.dest] = table[key]
        if key not in table or keep == "latest":
            table[key] = i.dest
    return out


def test_value_numbering_checked_on_random_programs_against_a_pairwise_oracle():
    from course_lib import ir
    from course_lib.ir import passes, randprog

    progs = [randprog.value_numbering_program(seed) for seed in range(15)] + [
        randprog.generate(s) for s in range(500, 510)
    ]
    fns = [ir.to_ssa(ir.from_source(q.source, q.name, q.arg_types)) for q in progs]
    expected = [{b.label: passes.redundant_pairs(b) for b in fn.blocks} for fn in fns]
    labels = [f"program {q.seed}" for q in progs]

    def run(answer):
        return check.Lab("t").run("lvn", lambda: [{b.label: answer(b) for b in fn.blocks} for fn in fns],
                                  expected=expected, compare=check.per_input(labels))  # fmt: skip

    assert run(_lvn_first_key).status == check.PASSED
    assert run(lambda b: _lvn_first_key(b, commute=False)).status == check.FAILED
    assert run(lambda b: _lvn_first_key(b, keep="latest")).status == check.FAILED
    assert passes.semantically_commutative() == {"add", "mul", "min", "max", "eq", "ne"}
    # the learner's copies keep every program's result (the notebook's second, semantic check)
    for fn, q in zip(fns, progs):
        numbers = {d: e for b in fn.blocks for d, e in _lvn_first_key(b).items()}
        assert ir.interpret(passes.apply_value_numbers(fn, numbers), *q.fresh_args()) == q.expected()[0]


def test_interchange_legality_checked_on_random_vectors():
    from course_lib.ir import loopnest as ln

    cases = ln.random_interchange_cases(60)
    assert 10 < sum(ln.tuple_order_legal(v, o) for v, o in cases) < 55  # both answers occur

    def first_entry_only(vectors, order):  # wrong: looks at the new outermost entry only
        return all(v[order[0]] == "+" or v[order[0]] >= 0 for v in vectors)

    def right(vectors, order):
        return ln.interchange_legal(vectors, order)

    for answer, status in ((right, check.PASSED), (first_entry_only, check.FAILED)):
        r = check.Lab("t").run("interchange", lambda answer=answer: [answer(v, o) for v, o in cases],
                               expected=[ln.tuple_order_legal(v, o) for v, o in cases])  # fmt: skip
        assert r.status == status


def test_lru_checked_on_random_traces_against_stack_distances():
    from course_lib.ir.cache import Cache, hits_by_stack_distance, random_traces

    traces = random_traces(12)

    def lru(trace, size, line, ways):
        c = Cache(size, line, ways)
        return [c.access(a) for a in trace]

    def fifo(trace, size, line, ways):  # wrong: a hit does not refresh the line
        n_sets = max(1, size // (line * ways))
        sets, out = [[] for _ in range(n_sets)], []
        for a in trace:
            s = sets[(a // line) % n_sets]
            out.append(a // line in s)
            if a // line not in s:
                s.append(a // line)
                if len(s) > ways:
                    s.pop(0)
        return out

    expected = [hits_by_stack_distance(*t) for t in traces]
    assert [lru(*t) for t in traces] == expected
    assert [fifo(*t) for t in traces] != expected


# ----------------------------------------------------------------------------- 05a, 06b, 06c (engineer D)
def _copy2d_right(t, src, dst, rows, cols):
    col = t.bid.x * t.bdim.x + t.tid.x
    row = t.bid.y * t.bdim.y + t.tid.y
    with t.if_((row < rows) & (col < cols)):
        dst[row * cols + col] = src[row * cols + col]


def _copy2d_flat_guard(t, src, dst, rows, cols):  # wrong: a lane past a row's end reaches the next row
    i = (t.bid.y * t.bdim.y + t.tid.y) * cols + t.bid.x * t.bdim.x + t.tid.x
    with t.if_(i < rows * cols):
        dst[i] = src[i]


def _copy2d_lanes_down_columns(t, src, dst, rows, cols):  # wrong: lanes walk rows, a column per warp step
    lane, warp = t.tid.x, t.tid.y
    col = t.bid.x * 32 + (lane % 8) * 4 + warp
    row = t.bid.y * 4 + lane // 8
    with t.if_((row < rows) & (col < cols) & (lane < 32)):
        dst[row * cols + col] = src[row * cols + col]


def _copy2d_calls_reference(t, src, dst, rows, cols):
    from course_lib.gpu import checks

    checks._copy2d_reference(t, src, dst, rows, cols)


def test_copy2d_checked_on_the_memory_trace_not_only_the_output():
    from course_lib.gpu import checks

    assert checks.check_copy2d(_copy2d_right).ok
    flat = checks.check_copy2d(_copy2d_flat_guard)
    assert not flat.ok and "past an edge" in flat.message  # its output is a correct copy all the same
    scattered = checks.check_copy2d(_copy2d_lanes_down_columns)
    assert not scattered.ok and "sectors" in scattered.message
    r = check.Lab("t").run("copy", lambda: checks.check_copy2d(_copy2d_calls_reference), verify=lambda v: v,
                           guard=["course_lib.gpu.checks:_copy2d_reference"])  # fmt: skip
    assert r.status == check.FAILED and "reference" in r.message


def test_v4_load_mask_checked_against_the_real_ptx_on_ragged_n():
    import numpy as np

    from course_lib.gpu import checks

    def right(n, program, warp):
        return [bool(f < n) for f in program * 256 + (warp * 32 + np.arange(32)) * 4]

    def one_float_per_thread(n, program, warp):  # wrong: forgets the 4 elements each thread holds
        return [bool(f < n) for f in program * 256 + warp * 32 + np.arange(32)]

    sizes = (1008, 400, 48)
    real = {n: checks.real_v4_masks(n) for n in sizes}
    keys = [(n, p, w) for n in sizes for p, w in real[n]]
    assert all(right(*k) == real[k[0]][k[1:]] for k in keys)
    assert any(one_float_per_thread(*k) != real[k[0]][k[1:]] for k in keys)
    hard_coded = {k: right(1008, *k[1:]) for k in keys}  # the answer for the notebook's last n, reused
    assert any(hard_coded[k] != real[k[0]][k[1:]] for k in keys)
    with pytest.raises(ValueError, match="divisible by 16"):
        checks.real_v4_masks(1000 + 1)


def test_balanced_split_checked_on_random_workloads():
    import numpy as np

    from course_lib.cpu import openmp

    def right(costs, threads):
        running = np.concatenate([[0.0], np.cumsum(costs)])
        return [0, *(int(np.searchsorted(running, running[-1] * k / threads)) for k in range(1, threads)), len(costs)]

    def static_counts(costs, threads):  # wrong: equal iteration counts, what schedule(static) does
        return [round(k * len(costs) / threads) for k in range(threads + 1)]

    def calls_reference(costs, threads):
        return openmp.balanced_split(costs, threads)

    cases = openmp.random_workloads(seed=3)
    assert all(openmp.split_verdict(right(c, t), c, t)[0] for c, t in cases)
    assert not all(openmp.split_verdict(static_counts(c, t), c, t)[0] for c, t in cases)
    hard = right(*cases[0])  # one workload's answer used for every workload
    assert not all(openmp.split_verdict(hard, c, t)[0] for c, t in cases)

    def verify(answer):
        return check.Verdict(all(openmp.split_verdict(answer(c.copy(), t), c, t)[0] for c, t in cases), "")

    for answer, status in ((right, check.PASSED), (calls_reference, check.FAILED)):
        r = check.Lab("t").run("split", lambda a=answer: verify(a), verify=lambda v: v,
                               guard=["course_lib.cpu.openmp:balanced_split"])  # fmt: skip
        assert r.status == status


@pytest.fixture(scope="module")
def random_inductor_kernels():
    """One random graph compiled now (not one of the notebook's seeds 0, 1, 2, 5) and three kernels
    Inductor wrote for other random graphs, recorded in data/cpu/inductor_graphs (cheap, just as real)."""
    from course_lib.cpu import inductor_loops as il

    return [il.compile_graph(il.random_graph(6))] + [il.recorded_graph(s) for s in (2, 1, 0)]


def test_vector_loop_split_checked_on_real_inductor_kernels(random_inductor_kernels):
    import re

    from course_lib.cpu import inductor_loops as il

    num = r"static_cast<int64_t>\((\d+)L?\)"
    header = re.compile(rf"for\s*\(\s*int64_t\s+(\w+)\s*=\s*{num}\s*;\s*\1\s*<\s*{num}\s*;\s*\1\s*\+=\s*{num}\s*\)")

    def right(cpp):
        out = []
        for m in header.finditer(cpp):
            var, stop, lanes = m[1], int(m[3]), int(m[4])
            if lanes > 1:
                likely = re.compile(rf"C10_LIKELY\(\s*{var}\s*>=\s*{num}\s*&&\s*{var}\s*<\s*{num}\s*\)")
                full = likely.search(cpp, m.end())
                end = int(full[2]) if full else stop
                out.append((var, lanes, end, stop - end))
        return out

    def no_tail(cpp):  # wrong: takes the loop bound for the whole-vector bound
        return [(v, lanes, end + tail, 0) for v, lanes, end, tail in right(cpp)]

    cpps = [g.cpp for g in random_inductor_kernels]
    want = [[v.as_tuple() for v in il.vector_loops(c)] for c in cpps]
    assert [right(c) for c in cpps] == want
    assert any(t for loops in want for *_, t in loops), "the test graphs should have a masked tail"
    assert [no_tail(c) for c in cpps] != want
    assert [want[0]] * len(cpps) != want  # one kernel's answer does not fit the other
    for g in random_inductor_kernels:  # the parse agrees with arithmetic on the graph's own sizes
        for v in il.vector_loops(g.cpp):
            assert v.stop in g.case.ranges and (v.full_end, v.tail) == il.expected_split(v.stop, v.lanes)


def test_parallel_depth_rule_matches_inductor_and_wrong_rules_fail(random_inductor_kernels):
    import numpy as np

    from course_lib.cpu import inductor_loops as il

    assert random_inductor_kernels[0].live
    for g in random_inductor_kernels:  # each at the team size it was compiled for
        assert il.parallel_depth(g.case.ranges, g.threads) == il.omp_depth(g.cpp)

    def no_min_chunk(ranges, t):  # wrong: forgets that small loops stay serial
        par, depth = 1, 0
        for size in ranges:
            if par >= 2 * t or par == t:
                break
            depth, par = depth + 1, par * size
        return depth

    g = np.random.default_rng(7)
    nests = [([int(s) for s in g.choice([1, 2, 3, 7, 16, 100, 513, 4096], int(g.integers(1, 4)))],
              int(g.choice([1, 2, 4, 8]))) for _ in range(200)]  # fmt: skip
    assert any(no_min_chunk(r, t) != il.parallel_depth(r, t) for r, t in nests)
    assert il.parallel_depth([13, 77], 2) == 0 and il.parallel_depth([1, 4096], 2) == 2


def test_sleef_prediction_is_read_from_the_installed_header():
    from course_lib.cpu import inductor_view as iv

    if iv.vec_header() is None:
        pytest.skip("no SIMD Vectorized<float> header on this CPU")
    cands = ["exp", "log", "tanh", "sin", "erf", "log1p", "sqrt", "rsqrt", "abs", "neg", "floor", "reciprocal"]
    want = {m for m, c in iv.sleef_calls(cands).items() if c.startswith("Sleef_")}
    assert {"exp", "tanh"} <= want and not want & {"abs", "neg", "sqrt"}
    r = check.Lab("t").run("sleef", lambda: {"exp", "tanh", "log", "sin", "erf", "log1p", "sqrt"}, expected=want,
                           predict=True)  # fmt: skip
    assert r.status == check.FAILED and "sqrt" not in r.message.replace("'sqrt'", "")


# ----------------------------------------------------------------------------- 03b: the autotuner (issue 19)


def _autotuner(smem=None, registers=True, spills=True, rank=True):
    """03b's solution, with one of its rules optionally wrong."""

    def autotune(configs, meta, limits, measure):
        def ok(m):
            return (m["shared"] <= (smem or limits.smem_per_block)
                    and (not registers or m["registers"] * 32 * m["num_warps"] <= limits.regs_per_sm)
                    and (not spills or m["spills"] == 0))  # fmt: skip

        kept = [c for c in configs if ok(meta[c])]
        times = {c: measure(c) for c in kept}
        return sorted(kept, key=times.get) if rank else kept

    return autotune


def test_autotuner_checked_against_the_h200_recording():
    from course_lib.triton import tune

    guard = ["course_lib.triton.tune:prune", "course_lib.triton.tune:autotune", "course_lib.triton.tune:fits"]

    def run(fn):
        return check.Lab("t").run("autotune", lambda: fn, verify=tune.check_autotuner, guard=guard)

    assert run(_autotuner()).passed
    no_pruning = run(lambda configs, meta, limits, measure: sorted(configs, key=measure))
    assert no_pruning.status == check.FAILED and "cannot run there" in no_pruning.message
    for wrong in (_autotuner(smem=232448), _autotuner(smem=262144), _autotuner(registers=False),
                  _autotuner(spills=False), _autotuner(rank=False)):  # fmt: skip
        assert run(wrong).status == check.FAILED
    recorded_order = [tuple(c) for c in tune.autotune(*_h200_space())]  # the recording's ranking, hard-coded

    def hard_coded(configs, meta, limits, measure):  # prunes right, times, then ranks by the H200's order
        kept = [c for c in configs if _autotuner()([c], meta, limits, lambda c: 0.0)]
        for c in kept:
            measure(c)
        return sorted(kept, key=recorded_order.index)

    assert "another problem size" in run(hard_coded).message
    reference = run(lambda configs, meta, limits, measure: tune.autotune(configs, meta, limits, measure))
    assert reference.status == check.FAILED and "tune.autotune" in reference.message
    fits = run(lambda c, m, lim, measure: sorted([x for x in c if tune.fits(m[x], lim)], key=measure))
    assert fits.status == check.FAILED and "tune.fits" in fits.message


def _h200_space():
    from course_lib.triton import tune

    space = tune.recorded_space()
    return space.configs, space.meta, space.limits, tune.recorded_measure(space, space.limits, [])


def test_handler_exercises_refuse_the_translators_own_handler():
    from course_lib import dynamo
    from course_lib.dynamo import symbolic_convert

    def arith(x, y):
        return (x - y) / 2 + x * 3

    x, y = torch.randn(3), torch.randn(3)

    def graphs(handler=None):
        kw = {"translator_cls": dynamo.translator_with(BINARY_OP=handler)} if handler else {}
        return "\n".join(str(g) for g in dynamo.explain(arith, x, y, **kw).graphs)

    def delegate(tx, inst):  # "writes" the handler by calling the reference
        return symbolic_convert.InstructionTranslator.BINARY_OP(tx, inst)

    def swapped(tx, inst):  # wrong: pops a before b
        a, b = tx.pop(), tx.pop()
        tx.push(tx.binary(symbolic_convert.BINARY_OPS[inst.argrepr], a, b))

    def run(handler):
        return check.Lab("t").run("BINARY_OP", lambda: graphs(handler), expected=graphs, compare=check.same_text,
                                  guard=[(symbolic_convert.InstructionTranslator, "BINARY_OP")])  # fmt: skip

    assert "reference" in run(delegate).message
    assert run(swapped).status == check.FAILED
    assert symbolic_convert.InstructionTranslator.BINARY_OP.__name__ == "BINARY_OP"  # put back after the check
    assert not hasattr(symbolic_convert.InstructionTranslator.BINARY_OP, "__course_guard__")


def test_launch_prediction_is_checked_against_inductor():
    from course_lib.cpu import inductor_loops as il

    x, w = torch.randn(50, 70), torch.randn(70, 30)
    real = {"softmax(softmax(x) @ w)": il.compile_launch_counts(lambda x, w: torch.softmax(torch.softmax(x, -1) @ w, -1),
                                                                 x, w)}  # fmt: skip
    assert real == {"softmax(softmax(x) @ w)": (2, 1)}
    for guess, status in ((real, check.PASSED), ({k: (1, 0) for k in real}, check.FAILED)):
        r = check.Lab("t").run("launches", lambda g=guess: g, expected=real, predict=True)
        assert r.status == status
    assert "(2, 1)" not in str(r)  # a miss does not print the answer


# ----------------------------------------------------------------------------- 03c: predictions about Triton's passes (issue 23)


def test_coalesce_and_conversion_predictions_are_checked_against_the_compiler():
    from course_lib.triton import kernels, passes

    add, sig, consts = kernels.signature("add")
    cases = [(1024, True), (1024, False)]  # fp32, 4 warps, aligned

    def compiled(block, coalesce):
        run = passes.run_passes(add, sig, {"BLOCK": block}, drop=() if coalesce else ["coalesce"])
        sass = passes.compile_ttgir(run)["sass"]
        return passes.load_size_per_thread(run.final)[0], passes.vector_loads(sass).get("LDG.E.128", 0)

    def run_coalesce(pred):
        return check.Lab("t").run("c", lambda: [pred(*c) for c in cases], expected=lambda: [compiled(*c) for c in cases],
                                  compare=check.equal, predict=True)  # fmt: skip

    assert run_coalesce(lambda b, c: (4, 4) if c else (1, 0)).passed
    unchanged = run_coalesce(lambda b, c: (4, 4))  # wrong: coalesce is the only pass that widens the layout
    assert unchanged.status == check.FAILED and "(1, 0)" not in unchanged.message  # the truth is never shown
    assert run_coalesce(lambda b, c: (4, 8) if c else (1, 0)).status == check.FAILED  # forgot 2 runs per thread

    llvm_run = passes.run_passes(add, sig, consts, stages=("ttir", "ttgir", "llvm_dialect"))
    truth = {r.python: r.work() for r in passes.conversion_rows(llvm_run) if r.python in ("x + y", "tl.program_id(0)")}
    assert truth == {"x + y": {"llvm.fadd": 8}, "tl.program_id(0)": {"nvvm.read.ptx.sreg.ctaid.x": 1}}

    def run_lowering(pred):
        return check.Lab("t").run("l", lambda: pred, expected=truth, predict=True)

    assert run_lowering(dict(truth)).passed
    vectorised = {**truth, "x + y": {"llvm.fadd": 2}}  # wrong: arithmetic stays scalar in the LLVM dialect
    v = run_lowering(vectorised)
    assert v.status == check.FAILED and "'llvm.fadd': 8" not in v.message


# ----------------------------------------------------------------------------- 03b Ex1: the layout parser is guarded


def test_parsing_a_blocked_layout_with_the_reference_fails():
    from course_lib.triton import layouts

    line = "#blocked = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]}>"
    want = [{"sizePerThread": [1, 4], "threadsPerWarp": [8, 4], "warpsPerCTA": [4, 1], "order": [1, 0]}]

    def cheat(text):
        b = next(iter(layouts.parse_blocked(text).values()))
        return dict(zip(want[0], (list(b.size_per_thread), list(b.threads_per_warp), list(b.warps_per_cta),
                                  list(b.order))))  # fmt: skip

    r = check.Lab("t").run("blocked", lambda: [cheat(line)], expected=want,
                           guard=["course_lib.triton.layouts:parse_blocked"])  # fmt: skip
    assert r.status == check.FAILED and "layouts.parse_blocked" in r.message
    honest = {k: [1, 4] if k == "sizePerThread" else v for k, v in want[0].items()}
    assert check.Lab("t").run("blocked", lambda: [honest], expected=want).passed


# ----------------------------------------------------------------------------- 03a: references one attribute away (H's audit)


def test_03a_refuses_course_lib_kernels_and_guards_program_order():
    import triton
    import triton.language as tl

    from course_lib.triton import kernels as K

    @triton.jit
    def mine(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + tl.load(y_ptr + offs, mask=offs < n),
                 mask=offs < n)  # fmt: skip

    # what 03a's kernel_check asks before it runs an oracle: a kernel object is launched, never called
    assert all(K.is_reference(k) for k in (K.add_kernel, K.softmax_kernel, K.matmul_kernel, K.flash_attn_tma_kernel))
    assert not K.is_reference(mine) and not K.is_reference(lambda: None)
    shapes = [(64, 64, 16, 16, 2), (100, 70, 16, 16, 3)]
    r = check.Lab("t").run("order", lambda: [K.program_order(*s) for s in shapes],
                           expected=lambda: [K.program_order(*s) for s in shapes],
                           guard=["course_lib.triton.kernels:program_order"])  # fmt: skip
    assert r.status == check.FAILED and "kernels.program_order" in r.message


def test_autotuner_that_times_everything_and_catches_out_of_resources_fails():
    from course_lib.triton import tune

    def times_everything(configs, meta, limits, measure):  # no pruning: every launch tried, failures swallowed
        times = {}
        for c in configs:
            try:
                times[c] = measure(c)
            except tune.OutOfResources:
                pass
        return sorted(times, key=times.get)

    got = check.Lab("t").run("autotune", lambda: times_everything, verify=tune.check_autotuner)
    assert got.status == check.FAILED and "rules out" in got.message


def test_widening_a_bf16_body_is_checked_on_random_bodies():
    """04c's half-precision exercise: the reference passes; leaving arithmetic in bf16, dropping the
    graph's own roundings or rounding the Python scalars fails, each with its reason."""
    from course_lib.inductor import ir
    from course_lib.inductor.ir import Const, Load, Op

    assert oracles.widened_bodies(lambda e: ir.upcast(e, "float32")).ok
    v = oracles.widened_bodies(lambda e: e)
    assert not v.ok and "computed in bfloat16" in v.message

    def drop_roundings(e):
        if isinstance(e, Load):
            return Op("to_dtype", (e,), "float32") if e.dtype == "bfloat16" else e
        if isinstance(e, Const):
            return Const(e.value, "float32")
        args = tuple(drop_roundings(a) for a in e.args)
        if e.op == "to_dtype" and e.dtype == "bfloat16":
            return args[0] if args[0].dtype == "float32" else Op("to_dtype", args, "float32")
        return Op(e.op, args, "float32" if e.dtype == "bfloat16" else e.dtype)

    v = oracles.widened_bodies(drop_roundings)
    assert not v.ok and "values differ" in v.message

    def round_scalars(e):
        if isinstance(e, Const) and e.dtype == "bfloat16":
            return Op("to_dtype", (Op("to_dtype", (Const(e.value, "float32"),), "bfloat16"),), "float32")
        if isinstance(e, Op):
            return Op(e.op, tuple(round_scalars(a) for a in e.args), e.dtype)
        return e

    v = oracles.widened_bodies(lambda e: ir.upcast(round_scalars(e), "float32"))
    assert not v.ok and "values differ" in v.message
