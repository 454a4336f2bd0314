"""course_lib.inductor internals: lowering text, fusion rules, ladder, memory plan, codegens,
and random pointwise/reduction/broadcast graphs (hypothesis) against eager."""

import functools
import importlib
import os
import pathlib
import random
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import course_lib.inductor as ind
from course_lib import compat
from course_lib.inductor import scheduler, triton_codegen

DEC = compat.inductor_decomposition_table()


def _trace(fn, *args):
    return compat.make_fx(fn, *args, decompositions=DEC)


def _softmax(x):
    return (torch.softmax(x, -1),)


def test_ir_pre_fusion_text_for_softmax():
    x = torch.randn(8, 16)
    graph = ind.lower(_trace(_softmax, x), [x])
    text = str(graph)
    assert (
        text.splitlines()[0] == "buf0: Reduction(dtype=float32, size=[8, 1], reduction_ranges=[16], reduction_type=max)"
    )
    assert "return exp(load(buf1, 16*i0 + i1))" in text
    assert "truediv(load(buf2, 16*i0 + i1), load(buf3, i0))" in text


def test_ladder_kernel_counts_and_bytes_for_softmax():
    x = torch.randn(64, 128)
    rungs = ind.ladder(ind.lower(_trace(_softmax, x), [x]))
    counts = {k: ind.schedule_stats(s)["kernels"] for k, s in rungs.items()}
    assert counts == {"unfused": 5, "vertical": 1, "greedy": 1}
    b = {k: ind.schedule_stats(s)["bytes"] for k, s in rungs.items()}
    assert b["greedy"] == 2 * x.numel() * 4  # read x once, write the result once
    assert b["unfused"] > 3 * b["greedy"]


def test_can_fuse_reports_reasons():
    x = torch.randn(8, 16)

    def f(x):
        return (x.sum(0), x.sum(1))  # two reductions over different axes

    graph = ind.lower(_trace(f, x), [x])
    groups = [[b.name] for b in scheduler.computed(graph)]
    owner = {n: i for i, g in enumerate(groups) for n in g}
    ok, reason = ind.can_fuse(graph, groups, owner, 0, 1)
    assert not ok and "iteration spaces" in reason


def test_a_pointwise_node_of_another_shape_is_inlined_into_its_reader():
    """A linear layer's bias add on ``[B*T, C]``, then the head split ``[B, H, T, D]``: the two
    share no iteration space, but the bias add is read only by the copy, so it is recomputed inside
    the copy's kernel (never stored). Returned as well, it must be stored: two kernels again."""
    x, w, b = torch.randn(2, 17, 32), torch.randn(32, 32), torch.randn(32)

    def heads(x, w, b, keep=False):
        y = x.reshape(34, 32) @ w.t() + b
        z = y.reshape(2, 17, 4, 8).permute(0, 2, 1, 3).contiguous()
        return (z, y) if keep else (z,)

    for keep, n_kernels in ((False, 1), (True, 2)):
        fn = functools.partial(heads, keep=keep)  # make_fx traces the three tensors
        c = ind.compile_graph(_trace(fn, x, w, b), [x, w, b])
        kernels = [k for k in c.schedule.kernels if k.kind == "kernel"]
        assert len(kernels) == n_kernels, c.schedule
        if not keep:
            assert len(kernels[0].nodes) == 2 and len(kernels[0].plan.writes) == 1, c.schedule
            assert kernels[0].plan.group == ((2, 4, 17), (8,))
        for got, ref in zip(c(x, w, b), fn(x, w, b), strict=True):
            torch.testing.assert_close(got, ref)


def test_unflatten_undoes_dense_layouts_only():
    from course_lib.inductor.sizevars import unflatten

    i = [scheduler.sym(f"i{d}") for d in range(4)]
    ranges = dict(zip(i, (2, 3, 4, 5), strict=True))
    nhwc = (60, 1, 15, 3)  # [2, 3, 4, 5] channels-last
    offset = sum(a * s for a, s in zip(i, nhwc, strict=True))
    assert unflatten(offset, (2, 3, 4, 5), nhwc, ranges) == i
    assert unflatten(offset, (2, 3, 4, 5), (64, 1, 16, 3), ranges) is None  # padded rows: not dense
    assert unflatten(offset, (2, 3, 4, 5), (60, 0, 15, 3), ranges) is None  # broadcast: not dense


VIEW_OPS = [torch.exp, torch.tanh, lambda t: t * 0.5 + 1, F.gelu]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(dims=st.sampled_from([(2, 3, 4), (3, 2, 5), (4, 4, 2), (1, 6, 3)]), perm=st.permutations([0, 1, 2]),
       ops=st.tuples(st.integers(0, 3), st.integers(0, 3)), tail=st.sampled_from(["pointwise", "reduce", "keep"]))  # fmt: skip
def test_random_views_between_pointwise_nodes_match_eager(dims, perm, ops, tail):
    """A pointwise node on ``[a*b, c]``, viewed as ``[a, b, c]``, permuted and copied, then a pointwise
    node or a reduction over the last dimension, or the first node returned too (so it is stored):
    every rung, the numpy executor, gcc and Triton (its interpreter here), against eager."""
    a, b, c = dims

    def fn(x):
        y = VIEW_OPS[ops[0]](x)
        z = VIEW_OPS[ops[1]](y.reshape(a, b, c).permute(*perm).contiguous())
        if tail == "reduce":
            return (z.sum(-1),)
        return (z, y) if tail == "keep" else (z,)

    x = torch.randn(a * b, c)
    ref = fn(x)
    gm = _trace(fn, x)
    runs = [("unfused", "python"), ("vertical", "python"), ("greedy", "python"), ("greedy", None), ("greedy", "triton")]
    for fusion, codegen in runs:
        for r, g in zip(ref, ind.compile_graph(gm, [x], fusion=fusion, codegen=codegen)(x), strict=True):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)


def test_reduction_read_at_other_row_is_illegal():
    x = torch.randn(8, 16)

    def f(x):
        m = x.amax(-1, keepdim=True)
        return (x - m.flip(0),)  # row i reads row 7-i's max

    graph = ind.lower(_trace(f, x), [x])
    sched = ind.fuse(graph)
    assert sched.graph is graph and ind.schedule_stats(sched)["kernels"] >= 2
    out = ind.compile_graph(_trace(f, x), [x])(x)[0]
    torch.testing.assert_close(out, f(x)[0])


def test_memory_plan_reuses_and_works_in_place():
    x = torch.randn(32, 32)

    def f(x):
        a = torch.exp(x).sum(-1, keepdim=True)  # buffers live only inside kernels
        b = (x * 2).t().contiguous() + 1  # a transpose stops fusion
        return (b.t().contiguous() * a,)

    c = ind.compile_graph(_trace(f, x), [x], fusion="unfused")
    kinds = {v[0] for v in c.schedule.plan.values()}
    assert "inplace" in kinds or "reuse" in kinds
    assert "# in-place" in c.wrapper_code or "# reuse" in c.wrapper_code
    torch.testing.assert_close(c(x)[0], f(x)[0])


def test_cpp_source_has_openmp_and_simd():
    x = torch.randn(256, 128)  # 32768 elements: enough work to wake a second thread
    c = ind.compile_graph(_trace(_softmax, x), [x])
    assert "#pragma omp parallel for" in c.kernel_code and "#pragma omp simd reduction(max_keep_nan:" in c.kernel_code
    assert c.kernel_code.count('extern "C"') == 1
    assert "kernel0(x_1.data_ptr(), buf4.data_ptr())" in c.wrapper_code


def test_precompiled_header_is_built_once_and_used(tmp_path, monkeypatch):
    from course_lib.inductor import cpp

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    header = cpp.precompiled_header(cpp.CFLAGS)
    assert header and (tmp_path / "inductor" / (pathlib.Path(header).name + ".gch")).stat().st_size > 0
    assert cpp.precompiled_header(cpp.CFLAGS) == header
    x = torch.randn(8, 16)
    c = ind.compile_graph(_trace(_softmax, x), [x])
    torch.testing.assert_close(c(x)[0], torch.softmax(x, -1))


def test_cpp_flattens_outer_loops_into_one_parallel_loop():
    s = torch.randn(3, 2, 64, 256)  # read transposed: the three outer loops cannot merge into one
    c = ind.compile_graph(_trace(lambda t: (torch.softmax(t.transpose(0, 1) * 0.5, -1),), s), [s])
    assert "for (int64_t x = 0; x < 384; x++)" in c.kernel_code and "const int64_t x1 = (x / 64) % 3;" in c.kernel_code
    torch.testing.assert_close(c(s)[0], torch.softmax(s.transpose(0, 1) * 0.5, -1))


def test_cpp_small_kernels_stay_on_one_thread():
    """Below PARALLEL_THRESHOLD elements no OpenMP team is woken (Inductor's decide_parallel_depth)."""
    from course_lib.inductor import cpp

    small, big = torch.randn(2, 3, 4, 16), torch.randn(4, 64, 128)
    for x, parallel in ((small, False), (big, True)):
        c = ind.compile_graph(_trace(lambda t: (torch.softmax(t * 0.5, -1), t.sum(-1)), x), [x])
        assert ("#pragma omp parallel" in c.kernel_code) is parallel, (x.shape, c.kernel_code)
        out = c(x)
        torch.testing.assert_close(out[0], torch.softmax(x * 0.5, -1))
        torch.testing.assert_close(out[1], x.sum(-1))
    assert small.numel() < cpp.PARALLEL_THRESHOLD <= big.numel()


def test_cpp_row_buffer_computes_softmax_exp_once(monkeypatch):
    x = torch.randn(64, 128)
    gm = _trace(_softmax, x)
    c = ind.compile_graph(gm, [x])
    assert c.kernel_code.count("std::exp(") == 1 and "float row_buf0[128];" in c.kernel_code
    assert "(float)1 / acc_" in c.kernel_code  # the sum's reciprocal, once per row
    torch.testing.assert_close(c(x)[0], torch.softmax(x, -1))
    from course_lib.inductor import cpp

    monkeypatch.setattr(cpp, "ROW_BUFFER_LIMIT", 0)  # without it: exp in both passes
    c0 = ind.compile_graph(gm, [x])
    assert c0.kernel_code.count("std::exp(") == 2 and "row_buf" not in c0.kernel_code
    torch.testing.assert_close(c0(x)[0], torch.softmax(x, -1))


@pytest.mark.parametrize("persistent", [1024, 4])
def test_triton_kernels_in_interpreter(persistent, monkeypatch):
    monkeypatch.setattr(triton_codegen, "PERSISTENT_RNUMEL", persistent)
    x, w, b = torch.randn(6, 20), torch.randn(20), torch.randn(20)

    def f(x, w, b):
        return ((F.layer_norm(x, (20,), w, b) + F.gelu(x)).sum(0),)

    for fusion in ("unfused", "greedy"):
        c = ind.compile_graph(_trace(f, x, w, b), [x, w, b], fusion=fusion, codegen="triton")
        torch.testing.assert_close(c(x, w, b)[0], f(x, w, b)[0], rtol=1e-4, atol=1e-4)
    assert ("for roffset in range" in c.kernel_code) == (persistent == 4)
    assert "XBLOCK" in c.kernel_code and "tl.sum(" in c.kernel_code


# ---------------------------------------------------------------------------
# random graphs
# ---------------------------------------------------------------------------

UNARY = [torch.exp, torch.tanh, torch.sigmoid, torch.relu, torch.abs, torch.neg, lambda t: t * 0.5, torch.sin,
         lambda t: torch.sqrt(t.abs() + 1), F.gelu, F.silu]  # fmt: skip
BINARY = [torch.add, torch.sub, torch.mul, torch.maximum, lambda a, b: torch.where(a > b, a, b * 2),
          lambda a, b: a / (b.abs() + 1)]  # fmt: skip


def build_random(spec, n_rows, n_cols):
    """A random program: each step applies a unary/binary op, a broadcast or a reduction."""

    def fn(x, y, v):
        vals = [x, y]
        for kind, a, b, op in spec:
            p, q = vals[a % len(vals)], vals[b % len(vals)]
            if kind == "unary":
                r = UNARY[op % len(UNARY)](p)
            elif kind == "binary":
                r = BINARY[op % len(BINARY)](p, q)
            elif kind == "bcast":
                r = p + v if op % 2 else p * v.unsqueeze(-1)[: p.shape[0]] if p.shape[0] == n_rows else p + v
            else:
                red = [torch.sum, torch.amax, torch.mean, torch.amin][op % 4]
                r = p - red(p, dim=-1, keepdim=True) if op % 3 else p / (1 + red(p.abs(), dim=0, keepdim=True))
            vals.append(r)
        return (vals[-1], vals[len(vals) // 2].sum(-1))

    return fn


step = st.tuples(st.sampled_from(["unary", "binary", "bcast", "reduce"]), st.integers(0, 9), st.integers(0, 9),
                 st.integers(0, 20))  # fmt: skip


def _inputs(n_rows, n_cols, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n_rows, n_cols, generator=g), torch.randn(n_rows, n_cols, generator=g),
            torch.randn(n_cols, generator=g))  # fmt: skip


@settings(max_examples=200, deadline=None, derandomize=True)
@given(spec=st.lists(step, min_size=1, max_size=6), shape=st.sampled_from([(4, 8), (3, 5), (8, 8)]))
def test_random_graphs_every_rung_matches_eager(spec, shape):
    """200 random graphs; each rung of the ladder, run by the numpy plan executor, vs eager."""
    if shape[0] != shape[1]:
        spec = [s if s[0] != "bcast" or s[3] % 2 else (s[0], s[1], s[2], 1) for s in spec]
    fn = build_random(spec, *shape)
    args = _inputs(*shape)
    ref = fn(*args)
    gm = _trace(fn, *args)
    for fusion in ("unfused", "vertical", "greedy"):
        got = ind.compile_graph(gm, list(args), fusion=fusion, codegen="python")(*args)
        for r, g in zip(ref, got, strict=True):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4, equal_nan=True)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(spec=st.lists(step, min_size=1, max_size=5), shape=st.sampled_from([(4, 8), (8, 8)]))
def test_random_graphs_forward_and_backward_through_course_aot(spec, shape):
    """Random graphs differentiated by course_lib.aot, both graphs compiled (numpy executor), vs autograd."""
    if shape[0] != shape[1]:
        spec = [s if s[0] != "bcast" or s[3] % 2 else (s[0], s[1], s[2], 1) for s in spec]
    fn = build_random(spec, *shape)

    def loss(x, y, v):
        a, b = fn(x, y, v)
        return a.sum() + b.sum()

    args = [a.requires_grad_() for a in _inputs(*shape)]
    ref = loss(*args)
    want = torch.autograd.grad(ref, args, allow_unused=True)
    mine = [a.detach().clone().requires_grad_() for a in args]
    with mock.patch.dict(os.environ, {"COURSE_INDUCTOR_STRICT": "1"}):
        out = ind.compile_with_course_aot(loss, codegen="python")(*mine)
        out.backward()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4, equal_nan=True)
    for w, a in zip(want, mine):
        if w is None:  # an input the loss does not depend on: no gradient, as in torch
            assert a.grad is None
            continue
        torch.testing.assert_close(a.grad, w, rtol=1e-3, atol=1e-4, equal_nan=True)


def test_random_graphs_compiled_with_gcc():
    """A few random graphs through the real C++ path (gcc), greedy fusion, vs eager."""
    rng = random.Random(0)
    kinds = ["unary", "binary", "bcast", "reduce"]
    for _ in range(12):
        spec = [(rng.choice(kinds), rng.randrange(10), rng.randrange(10), rng.randrange(21)) for _ in range(5)]
        spec = [s if s[0] != "bcast" else (s[0], s[1], s[2], 1) for s in spec]
        fn = build_random(spec, 4, 8)
        args = _inputs(4, 8)
        got = ind.compile_graph(_trace(fn, *args), list(args))(*args)
        for r, g in zip(fn(*args), got, strict=True):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4, equal_nan=True)


def test_in_place_only_when_no_later_store_reads_the_donor():
    """A kernel writing two outputs must not overwrite an input that its second store still reads."""
    x, s = torch.randn(4, 8), torch.randn(())

    def f(x, s):
        d = torch.exp(x) + 1  # an intermediate that dies in the next kernel
        t = d.sum(0, keepdim=True)  # a column reduction: its own kernel
        return (-s.expand(4, 8) + 0 * t, d / t + s)

    for fusion in ("unfused", "greedy"):
        for codegen in ("python", "cpp"):
            c = ind.compile_graph(_trace(f, x, s), [x, s], fusion=fusion, codegen=codegen)
            for got, want in zip(c(x, s), f(x, s), strict=True):
                torch.testing.assert_close(got, want)


@pytest.mark.parametrize("c", [0, 2, 3, 5, -2, 1.7, 0.5])
def test_triton_pow_rule_in_interpreter(c):
    x = torch.randn(8, 32)
    x[0, :4] = 0.0  # 0 ** 0 is 1, 0 ** -2 is inf
    got = ind.compile_graph(_trace(lambda t: (t.pow(c),), x), [x], codegen="triton")(x)[0]
    torch.testing.assert_close(got, x.pow(c), rtol=1e-4, atol=1e-5, equal_nan=True)


def test_triton_kernels_compile_to_ptx():
    """The same generated Triton source goes through the real compiler (course_lib.triton)."""
    x = torch.randn(8, 64)
    c = ind.compile_graph(_trace(_softmax, x), [x], codegen="triton")
    stages = triton_codegen.compile_to_ptx(c, target="sm_90")
    assert ".visible .entry kernel0" in stages["kernel0"]["ptx"]


def test_scalar_outputs_in_triton():
    x, t = torch.randn(6, 10), torch.randint(0, 10, (6,))
    fn = lambda a, b: (F.cross_entropy(a, b),)  # noqa: E731
    c = ind.compile_graph(_trace(fn, x, t), [x, t], codegen="triton")
    torch.testing.assert_close(c(x, t)[0], fn(x, t)[0])


def test_cpp_merges_loops_that_walk_memory_as_one():
    """simplify_loops (Inductor's SizeVarAllocator._simplify_loops): a batch-norm-like kernel on
    [2, 16, 4, 4] loops over N, C and one inner loop of H*W = 16; a transposed read keeps its loops."""
    from course_lib.inductor.codegen import common

    x, w = torch.randn(2, 16, 4, 4), torch.randn(1, 16, 1, 1)
    c = ind.compile_graph(_trace(lambda a, b: (torch.relu(a * b + 1.0),), x, w), [x, w])
    assert "r0 < 16; r0++" in c.kernel_code and "x1 < 16; x1++" in c.kernel_code, c.kernel_code
    torch.testing.assert_close(c(x, w)[0], torch.relu(x * w + 1.0))
    k = [k for k in c.schedule.kernels if k.kind == "kernel"][0]
    assert common.simplify_loops(k.plan).group == ((2, 16), (16,))
    t = torch.randn(4, 8, 16)
    ct = ind.compile_graph(_trace(lambda a: (a.transpose(1, 2) * 2.0,), t), [t])
    kt = [k for k in ct.schedule.kernels if k.kind == "kernel"][0]
    assert common.simplify_loops(kt.plan).group == kt.plan.group  # strides do not line up: nothing merges
    torch.testing.assert_close(ct(t)[0], t.transpose(1, 2) * 2.0)


def test_cpp_one_loop_both_parallel_and_simd():
    """A full reduction over enough elements is one loop under ``parallel for simd`` (two
    separate pragmas on one loop do not compile; the graph fell back to eager)."""
    x = torch.randn(65536, generator=torch.Generator().manual_seed(0))
    c = ind.compile_graph(_trace(lambda t: (t * 2.0 + 1.0, t.amax()), x), [x])
    assert "#pragma omp parallel for simd reduction(max_keep_nan:" in c.kernel_code
    out = c(x)
    torch.testing.assert_close(out[0], x * 2.0 + 1.0)
    torch.testing.assert_close(out[1], x.amax())
    # a long float sum is blocked (tests/test_inductor_cpp_accuracy.py): threads share the blocks,
    # each block's partial sum is vectorised, and a max in the same loop keeps its own clause
    c = ind.compile_graph(_trace(lambda t: (t.sum(), t.amax()), x), [x])
    assert "#pragma omp parallel for reduction(+:" in c.kernel_code and "part_buf" in c.kernel_code
    # any float32 summation order is off by up to ~log2(n) * eps * sum|x| (pairwise); against float64,
    # with a tenth of that, so a draw whose sum is near 0 cannot fail a fixed absolute tolerance
    exact = x.double().sum()
    assert abs(c(x)[0].double() - exact) <= 0.1 * 16 * 2**-24 * x.abs().double().sum()
    torch.testing.assert_close(c(x)[1], x.amax())


def test_convolutions_run_channels_last_on_cpu():
    """Inductor's layout optimisation (GraphLowering.decide_layout_opt): on CPU with oneDNN a
    graph's convolutions get channels-last arguments (copy kernels) and give channels-last
    results; values, and the gradients of a small conv net, still match eager."""
    from course_lib.inductor import lowering

    x, w1, w2 = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4, 4, 3, 3)

    def f(a, b, c):
        return (F.conv2d(torch.relu(F.conv2d(a, b, padding=1)) * 0.5, c, padding=1),)

    c = ind.compile_graph(_trace(f, x, w1, w2), [x, w1, w2])
    assert c.graph.buffers and lowering.decide_layout_opt(_trace(f, x, w1, w2), [x, w1, w2])
    nhwc = lowering.channels_last_strides((2, 3, 8, 8))
    assert nhwc == (192, 1, 24, 3) and f"{nhwc}, torch.float32)" in c.wrapper_code
    convs = [b for b in c.graph.buffers if b.kind == "extern" and "convolution" in b.extern["target"]]
    assert len(convs) == 2 and all(b.stride == lowering.channels_last_strides(b.shape) for b in convs)
    torch.testing.assert_close(c(x, w1, w2)[0], f(x, w1, w2)[0], rtol=1e-4, atol=1e-4)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1)
    )
    twin = __import__("copy").deepcopy(net)
    compat.dynamo_reset()
    record: list = []
    compiled = torch.compile(twin, backend=lambda gm, ex: ind.compile_fx(gm, ex, record=record))
    compiled(x).square().mean().backward()
    net(x).square().mean().backward()
    assert [k for k, _ in record] == ["compiled", "compiled"]  # forward and backward, no fallback
    for (n, p), q in zip(net.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=n)


def test_a_depthwise_weight_is_viewed_channels_last_not_copied():
    """``[C, 1, kh, kw]`` row-major and channels-last address the same bytes (the size-1 dimension's
    stride moves nothing), so the convolution gets a view of the weight; the input is still copied."""
    x, w = torch.randn(2, 4, 8, 8), torch.randn(4, 1, 3, 3)

    def f(a, b):
        return (F.conv2d(a, b, padding=1, groups=4),)

    c = ind.compile_graph(_trace(f, x, w), [x, w])
    copies = [b for b in c.graph.buffers if b.origin == "channels_last"]
    assert [b.shape for b in copies] == [(2, 4, 8, 8)], copies
    assert "reinterpret_tensor(b_1, (4, 1, 3, 3), (9, 1, 3, 1), 0)" in c.wrapper_code, c.wrapper_code
    torch.testing.assert_close(c(x, w)[0], f(x, w)[0], rtol=1e-4, atol=1e-5)


def test_memory_plan_never_reuses_across_layouts():
    """A channels-last buffer must not take over an NCHW tensor (the wrapper hands the tensor on)."""
    from course_lib.inductor.ir import Buffer

    a = Buffer("a", "pointwise", (2, 3, 4, 4), "float32")
    b = Buffer("b", "pointwise", (2, 3, 4, 4), "float32", stride=(48, 1, 12, 3))
    assert scheduler._same_layout(a, Buffer("c", "pointwise", (2, 3, 4, 4), "float32"))
    assert not scheduler._same_layout(a, b)


def test_memory_plan_keeps_a_buffer_alive_while_an_extern_views_it():
    """``split`` runs as an extern whose pieces are views of its argument. The argument's storage
    was recycled after the split's step while a piece was still read and returned (Qwen3-MoE's
    gate/up split on CUDA: wrong gradients). The schema's alias set now extends its life."""
    x = torch.randn(8, 16)

    def f(x):
        a, b = (x * 2).split(8, -1)
        d = (a.sin().sum(-1, keepdim=True) + x).cos()  # the same layout as x * 2: a reuse candidate
        return b, d, a.exp()

    c = ind.compile_graph(_trace(f, x), [x], fusion="unfused")
    assert "aten.split.Tensor" in c.wrapper_code
    split_arg = c.wrapper_code.split("aten.split.Tensor(")[1].split(",")[0]
    assert f"= {split_arg}; del {split_arg}  # reuse" not in c.wrapper_code, c.wrapper_code
    for got, want in zip(c(x), f(x), strict=True):
        torch.testing.assert_close(got, want)
    views = scheduler.viewed_storage(c.graph)
    assert any(split_arg in bases for bases in views.values()), views


def test_a_kernel_the_compiler_rejects_is_compiled_again_with_its_nodes_unfused(monkeypatch):
    """Triton 3.6 failed on one fused kernel of Jamba (bf16, H100). The graph is scheduled again with
    that kernel's nodes kept apart, the rest fused as before, and the report says so."""
    from course_lib.inductor import fallbacks
    from course_lib.inductor.async_compile import KernelCompileError

    module = importlib.import_module("course_lib.inductor.compile_fx")  # the package's attribute is the function
    build = module.BACKENDS["cpp"]
    x, y = torch.randn(16, 32), torch.randn(16, 32)

    def two_chains(x, y):
        return torch.softmax(x, -1), (y * 2 + 1).sin()

    def picky(kernels, graph):  # a compiler that fails on a fused kernel of softmax's nodes
        bad = [
            k.name for k in kernels if len(k.nodes) > 1 and any(graph.buffer(n).kind == "reduction" for n in k.nodes)
        ]
        if bad:
            raise KernelCompileError(f"Triton could not compile {bad[0]}: RuntimeError: PassManager::run failed", bad)
        return build(kernels, graph)

    monkeypatch.setitem(module.BACKENDS, "cpp", picky)
    fallbacks.REPORT.clear()
    c = ind.compile_graph(_trace(two_chains, x, y), [x, y])
    sizes = sorted(len(k.nodes) for k in c.schedule.kernels if k.kind == "kernel")
    assert sizes[-1] > 1 and sizes.count(1) >= 3, sizes  # the sin chain still fused; softmax's nodes one each
    for got, want in zip(c(x, y), two_chains(x, y), strict=True):
        torch.testing.assert_close(got, want)
    assert "compiled unfused" in str(fallbacks.REPORT) and "PassManager" in str(fallbacks.REPORT)
    with pytest.raises(ValueError, match="fusion must be one of greedy, vertical, unfused"):
        ind.compile_graph(_trace(two_chains, x, y), [x, y], fusion="maximal")

    def always(kernels, graph):  # every kernel rejected: once nothing is left to unfuse, the error stands
        raise KernelCompileError("Triton could not compile kernel0: RuntimeError", [k.name for k in kernels])

    monkeypatch.setitem(module.BACKENDS, "cpp", always)
    with pytest.raises(KernelCompileError):
        ind.compile_graph(_trace(two_chains, x, y), [x, y])
    fallbacks.REPORT.clear()


def _partial_rotary(x):
    """GPT-NeoX / Phi's partial rotary: slices of a permuted view, rotated and cat back together."""
    q = x.view(2, 8, 2, 12).permute(0, 2, 1, 3)
    r, p = q[..., :4], q[..., 4:]
    r2 = torch.cat([-r[..., 2:], r[..., :2]], dim=-1)
    return torch.cat([r2 * 1.5, p], dim=-1).sum(-1)


def test_gather_does_not_inline_a_producer_that_reads_its_own_index():
    """Slice backward gathers from a gradient whose producer uses an iota; recomputing that producer
    at the gathered index left its index variable undeclared in the C++ (g++: 'ind3' was not declared)."""
    x = torch.randn(2, 8, 24, requires_grad=True)
    with mock.patch.dict(os.environ, {"COURSE_INDUCTOR_STRICT": "1"}):
        out = ind.compile_with_course_aot(lambda t: _partial_rotary(t).sum(), codegen="cpp")(x)
        (got,) = torch.autograd.grad(out, [x])
    (want,) = torch.autograd.grad(_partial_rotary(x).sum(), [x])
    torch.testing.assert_close(got, want)


def test_as_strided_reads_its_input_in_eagers_storage_layout():
    """``as_strided`` counts in its input's storage. A pointwise result of a transposed input is
    stored in the input's order by eager, in the result's own order by the course: the extern read
    other elements (Longformer's sliding-window chunks, in torch's AOT graph: wrong gradients).
    Now the op that allocated the storage is stored as eager stores it, and the chain of views
    from it is replayed for the offset; a view of a graph input is that input's storage."""
    x = torch.randn(2, 6, 4)

    def chunks(x):
        y = x.transpose(1, 2) * 2  # eager keeps x's layout: strides (24, 1, 4)
        return (torch.as_strided(y, (2, 3, 4), (24, 4, 1)) + 1,)

    def of_permuted(x):
        return (torch.as_strided((x * 2).transpose(1, 2), (2, 3, 4), (24, 4, 1)).exp(),)

    def of_input(x):
        return (torch.as_strided(x[1:], (3, 4), (4, 1), 26) * 3,)  # a window of the input, offset 24

    def of_window(x):
        return (torch.as_strided((x * 2)[1:], (3, 4), (4, 1), 26),)  # a window of an intermediate

    def of_piece(x):
        return (torch.as_strided((x * 2).split(1)[1], (3, 4), (4, 1), 26),)

    def of_reshaped_input(x):  # a view of an input that the course computes as a copy
        return (torch.as_strided(x.transpose(1, 2).view(2, 2, 2, 6), (3, 4), (4, 1), 2) * 1,)

    for mode in ("real", "fake"):  # a trace of real tensors records storage offset 0 for every view
        for fn in (chunks, of_permuted, of_input, of_window, of_piece, of_reshaped_input):
            c = ind.compile_graph(compat.make_fx(fn, x, tracing_mode=mode), [x])
            assert "aten.as_strided.default" in c.wrapper_code
            torch.testing.assert_close(c(x)[0], fn(x)[0])
