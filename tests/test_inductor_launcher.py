"""course_lib.inductor.launcher: a launch site binds the compiled binary after its first launch and
then calls its C launcher directly, with the arguments in the order Triton's JIT passes them.

No GPU here: a fake kernel and a fake runtime stand in for Triton's JIT and driver; the interpreter
runs the real generated module (its launches return no binary, so it stays on the JIT); and a compat
test fails when Triton's JIT stops launching the way DirectLaunch copies.
"""

import dataclasses
import inspect

import pytest
import torch

import course_lib.inductor as ind
import course_lib.triton  # noqa: F401  (before any interpreted kernel: keeps triton.compile usable here)
from course_lib import compat, decomp
from course_lib.inductor import launcher
from course_lib.inductor.launcher import Binding, DirectLaunch

ARG_NAMES = ["in_ptr0", "out_ptr0", "xnumel", "rnumel", "XBLOCK", "RBLOCK"]


@dataclasses.dataclass
class FakeTensor:
    ptr: int

    def data_ptr(self) -> int:
        return self.ptr


class FakeCompiled:
    """What ``kernel[grid](...)`` returns: its ``src.fn`` knows the parameter names."""

    def __init__(self, names):
        self.src = type("Src", (), {"fn": type("Fn", (), {"arg_names": names})()})()


class FakeKernel:
    """``kernel[grid](*args, **kwargs)`` recorded, returning a FakeCompiled (or None: the interpreter)."""

    def __init__(self, names=ARG_NAMES, returns=True):
        self.calls, self.names, self.returns = [], names, returns

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.calls.append((grid, args, kwargs))
            return FakeCompiled(self.names) if self.returns else None

        return launch


class FakeRuntime:
    def __init__(self, binding=True):
        self.runs, self.device, self.has_binding = [], 0, binding

    def binding(self, compiled):
        return Binding(lambda *a: self.runs.append(a), 77, "packed") if self.has_binding else None

    def device_and_stream(self):
        return (lambda: self.device), (lambda d: 1000 + d)


def _site(kernel=None, runtime=None):
    return DirectLaunch(kernel or FakeKernel(), grid=(6,), ints=(96, 32), constexprs={"XBLOCK": 16, "RBLOCK": 32},
                        num_warps=4, runtime=runtime or FakeRuntime())  # fmt: skip


def test_first_launch_through_the_jit_then_the_c_launcher_with_the_jits_arguments():
    kernel, rt = FakeKernel(), FakeRuntime()
    site = _site(kernel, rt)
    a, b = FakeTensor(4096), FakeTensor(8192)
    site(a, b)
    assert kernel.calls == [((6, 1, 1), (a, b, 96, 32), {"XBLOCK": 16, "RBLOCK": 32, "num_warps": 4})]
    assert site.bound and rt.runs == []
    site(a, b)
    site(b, a)
    assert len(kernel.calls) == 1 and site.jit_launches == 1
    # (gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit, *every argument in order)
    assert rt.runs[0] == (6, 1, 1, 1000, 77, "packed", None, None, None, a, b, 96, 32, 16, 32)
    assert rt.runs[1][9:11] == (b, a)
    # the JIT's bound arguments are every parameter in declaration order: the same list
    (_, args, kwargs) = kernel.calls[0]
    jit_order = dict(zip(ARG_NAMES, args)) | {k: v for k, v in kwargs.items() if k in ARG_NAMES}
    assert tuple(jit_order[n] for n in ARG_NAMES) == rt.runs[0][9:]


def test_a_misaligned_pointer_goes_back_to_the_jit():
    kernel, rt = FakeKernel(), FakeRuntime()
    site = _site(kernel, rt)
    site(FakeTensor(4100), FakeTensor(8192))  # first launch misaligned: that binary is not kept
    assert not site.bound and site.refused is None
    site(FakeTensor(4096), FakeTensor(8192))
    assert site.bound
    site(FakeTensor(4096), FakeTensor(8200))  # 8-byte aligned only: the bound binary may assume 16
    assert len(kernel.calls) == 3 and len(rt.runs) == 0
    site(FakeTensor(4096), FakeTensor(8192))
    assert len(kernel.calls) == 3 and len(rt.runs) == 1


def test_another_device_goes_back_to_the_jit():
    kernel, rt = FakeKernel(), FakeRuntime()
    site = _site(kernel, rt)
    a, b = FakeTensor(0), FakeTensor(256)
    site(a, b)
    rt.device = 1
    site(a, b)
    assert len(kernel.calls) == 2 and rt.runs == []


@pytest.mark.parametrize(
    "kernel, runtime, reason",
    [
        (FakeKernel(returns=False), FakeRuntime(), "interpreter"),
        (FakeKernel(), FakeRuntime(binding=False), "no direct launcher"),
        (FakeKernel(names=["in_ptr0", "out_ptr0", "xnumel", "rnumel", "RBLOCK", "XBLOCK"]), FakeRuntime(), "last"),
    ],
)
def test_refusals_stay_on_the_jit_and_say_why(kernel, runtime, reason):
    site = _site(kernel, runtime)
    for _ in range(3):
        site(FakeTensor(0), FakeTensor(64))
    assert not site.bound and reason in site.refused and site.jit_launches == 3 and runtime.runs == []
    assert launcher.report([site])["jit"] == 1


def test_course_direct_launch_0_turns_it_off(monkeypatch):
    monkeypatch.setenv(launcher.DIRECT_ENV, "0")
    kernel, rt = FakeKernel(), FakeRuntime()
    site = _site(kernel, rt)
    site(FakeTensor(0), FakeTensor(64))
    site(FakeTensor(0), FakeTensor(64))
    assert not site.bound and len(kernel.calls) == 2 and "COURSE_DIRECT_LAUNCH" in repr(site)


def _ln_gelu(x, w):
    return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (x.shape[-1],), w) * 2.0).sum(0)


@pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="the interpreter path: with a GPU, Triton compiles natively "
    "and these CPU tensors cannot reach a compiled kernel",
)
def test_generated_module_launches_through_sites_in_the_interpreter():
    torch.manual_seed(0)
    x, w = torch.randn(8, 48), torch.randn(48)
    gm = compat.make_fx(_ln_gelu, x, w, decompositions=decomp.DECOMPOSITIONS)
    c = ind.compile_graph(gm, [x, w], codegen="triton")
    assert "DirectLaunch(" in c.kernel_code and "[grid]" not in c.kernel_code
    for _ in range(2):
        torch.testing.assert_close(c(x, w)[0], _ln_gelu(x, w), rtol=1e-5, atol=1e-5)
    sites = [v for v in c.call.__globals__["kernel0"].__globals__.values() if isinstance(v, DirectLaunch)]
    assert sites and all(not s.bound and "interpreter" in s.refused and s.jit_launches == 2 for s in sites)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("static", ["1", "0"])
def test_generated_module_launches_directly_on_the_gpu(static, monkeypatch):
    """On a GPU every site binds after its first launch; with torch's C++ launcher where this torch
    has one (``COURSE_STATIC_LAUNCH=0``: Triton's). Odd sizes (an int specialised to 1 is a constant
    the static launcher must not pass) and repeated calls still match eager."""
    monkeypatch.setenv("COURSE_STATIC_LAUNCH", static)
    torch.manual_seed(0)
    for rows, cols in ((8, 48), (1, 33), (5, 4096)):
        x, w = torch.randn(rows, cols, device="cuda"), torch.randn(cols, device="cuda")
        gm = compat.make_fx(_ln_gelu, x, w, decompositions=decomp.DECOMPOSITIONS)
        c = ind.compile_graph(gm, [x, w], codegen="triton")
        for _ in range(3):
            torch.testing.assert_close(c(x, w)[0], _ln_gelu(x, w), rtol=1e-4, atol=1e-4)
        sites = [v for v in c.call.__globals__["kernel0"].__globals__.values() if isinstance(v, DirectLaunch)]
        assert sites and all(s.bound and s.jit_launches == 1 for s in sites), sites
        expect = static == "1" and hasattr(torch._C, "_StaticCudaLauncher")
        assert all(s.static == expect for s in sites), [s.refused for s in sites]


def test_compat_triton_still_launches_the_way_direct_launch_copies():
    """Triton's JIT launch is ``kernel.run(grid_0, grid_1, grid_2, stream, kernel.function,
    kernel.packed_metadata, launch_metadata, enter, exit, *bound_args.values())``: if an upgrade
    changes that call, DirectLaunch must change with it."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    src = " ".join(inspect.getsource(JITFunction.run).split())
    assert "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata," in src
    assert "*bound_args.values())" in src
    init = inspect.getsource(CompiledKernel.__init__)
    assert "self.packed_metadata =" in init and "self.function =" in init
    assert hasattr(CompiledKernel, "run") and hasattr(CompiledKernel, "_init_handles")
    assert compat.triton_launch_binding(object()) is None
    assert not compat._hook_active(None) and compat._hook_active(print)


# ---------------------------------------------------------------------------- the wrapper's per-call work


def test_compat_fast_allocation_and_reinterpret_match_torch():
    empty = compat.inductor_empty_strided("cpu")
    t = empty((3, 4), (1, 3), torch.float64)
    assert (t.shape, t.stride(), t.dtype, t.device.type) == ((3, 4), (1, 3), torch.float64, "cpu")
    base = torch.arange(40.0)[5:]
    fast = compat.inductor_reinterpret_tensor()(base, (3, 2), (4, 1), 7)
    torch.testing.assert_close(fast, torch.as_strided(base, (3, 2), (4, 1), base.storage_offset() + 7))
    assert fast.data_ptr() == base.data_ptr() + 7 * base.element_size()  # an alias, not a copy


def _mm_then_view(x, w):
    y = (x * 2.0).reshape(4, 6) @ w  # the extern mm reads a re-viewed buffer
    return y.t() + 1.0, (x + 1.0).reshape(6, 4)


def test_wrapper_allocates_with_the_fast_path_and_returns_real_views():
    torch.manual_seed(0)
    x, w = torch.randn(2, 2, 6), torch.randn(6, 5)
    gm = compat.make_fx(_mm_then_view, x, w, decompositions=decomp.DECOMPOSITIONS)
    c = ind.compile_graph(gm, [x, w])
    code = c.wrapper_code
    assert "empty_strided(" in code and "device=device" not in code, code
    assert "aten.mm.default(reinterpret_tensor(" in code, code
    for got, ref in zip(c(x, w), _mm_then_view(x, w), strict=True):
        torch.testing.assert_close(got, ref)


def test_set_direct_off_and_on_again():
    kernel, rt = FakeKernel(), FakeRuntime()
    site = _site(kernel, rt)
    a, b = FakeTensor(0), FakeTensor(64)
    site(a, b)
    assert site in launcher.sites()
    launcher.set_direct(False, [site])
    site(a, b)
    assert not site.bound and len(kernel.calls) == 2 and rt.runs == []
    launcher.set_direct(True, [site])
    site(a, b)  # binds again through the JIT
    site(a, b)
    assert site.bound and len(kernel.calls) == 3 and len(rt.runs) == 1


# ---------------------------------------------------------------------------- COURSE_CUDAGRAPHS (no GPU: a fake graph)


class FakeCudaGraph:
    """Records the thunks a call registers while capturing; ``replay`` runs them on the recorded tensors."""

    recording: list | None = None

    def __init__(self):
        self.thunks = []

    def replay(self):
        for thunk in self.thunks:
            thunk()


class _capture:
    def __init__(self, graph):
        self.graph = graph

    def __enter__(self):
        FakeCudaGraph.recording = self.graph.thunks

    def __exit__(self, *exc):
        FakeCudaGraph.recording = None


def _graph_call(out):
    """``call([x, w, k])`` -> ``(out,)`` with ``out = x * w + k``: like a wrapper, it writes a buffer it owns."""

    def call(args):
        x, w, k = args

        def thunk():
            out.copy_(x * w + k)

        if FakeCudaGraph.recording is not None:
            FakeCudaGraph.recording.append(thunk)  # captured: runs only at replay, on these tensors
        else:
            thunk()
        return (out,)

    return call


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeCudaGraph)
    monkeypatch.setattr(torch.cuda, "graph", _capture)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def test_cudagraph_call_records_once_then_replays_with_inputs_copied_in(fake_cuda):
    from course_lib.inductor.cudagraphs import CudaGraphCall

    w = torch.nn.Parameter(torch.randn(5), requires_grad=False)  # a parameter: read in place
    runner = CudaGraphCall(_graph_call(torch.empty(5)))
    for _ in range(4):
        x = torch.randn(5)  # a new tensor every call: copied into the graph's own input
        (got,) = runner([x, w, 1.0])
        torch.testing.assert_close(got, x * w + 1.0)
    assert (runner.eager_calls, runner.replays, runner.static) == (1, 3, [False, True, True])
    moved = torch.nn.Parameter(w.clone(), requires_grad=False)  # a static input elsewhere: runs normally
    torch.testing.assert_close(runner([x, moved, 1.0])[0], x * moved + 1.0)
    torch.testing.assert_close(runner([x, w, 2.0])[0], x * w + 2.0)  # a scalar changed: normally too
    assert (runner.eager_calls, runner.replays) == (3, 3)


def test_cudagraph_call_that_cannot_be_captured_runs_normally(fake_cuda, monkeypatch):
    from course_lib.inductor.cudagraphs import CudaGraphCall

    def no_capture(graph):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "graph", no_capture)
    runner = CudaGraphCall(_graph_call(torch.empty(3)))
    x, w = torch.randn(3), torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(runner([x, w, 0.5])[0], x * w + 0.5)
    assert runner.replays == 0 and "capturing" in runner.refused


def test_cudagraphs_off_by_default_and_never_on_cpu(monkeypatch):
    from course_lib.inductor import cudagraphs

    monkeypatch.delenv(cudagraphs.ENV, raising=False)
    assert not cudagraphs.enabled("cuda")
    monkeypatch.setenv(cudagraphs.ENV, "1")
    assert cudagraphs.enabled("cuda") and not cudagraphs.enabled("cpu")


def test_cudagraph_backward_reads_the_forwards_outputs_in_place(fake_cuda):
    from course_lib.inductor.cudagraphs import CudaGraphCall

    fw = CudaGraphCall(_graph_call(torch.empty(4)))
    bw = CudaGraphCall(_graph_call(torch.empty(4)))
    w = torch.nn.Parameter(torch.randn(4), requires_grad=False)
    for _ in range(3):
        x = torch.randn(4)
        (saved,) = fw([x, w, 0.0])
        (grad,) = bw([saved, w, 1.0])
        torch.testing.assert_close(grad, x * w * w + 1.0)
    assert bw.static == [True, True, True] and bw.replays == 2 and fw.replays == 2
    assert cudagraphs_summary()["replays"] >= 4


def cudagraphs_summary():
    from course_lib.inductor import cudagraphs

    return cudagraphs.summary()


def test_a_launcher_that_refuses_the_arguments_sends_the_site_back_to_the_jit():
    kernel, rt = FakeKernel(), FakeRuntime()

    def refusing(*args):
        raise TypeError("function takes exactly 14 arguments (15 given)")

    rt.binding = lambda compiled: Binding(refusing, 77, "packed")
    site = _site(kernel, rt)
    a, b = FakeTensor(0), FakeTensor(64)
    for _ in range(3):
        site(a, b)
    assert not site.bound and "14 arguments" in site.refused and len(kernel.calls) == 3  # no launch lost


# ---------------------------------------------------------------------------
# a row split's site: its grid sized at the first launch, launched cooperatively
# ---------------------------------------------------------------------------


class CoopRuntime(FakeRuntime):
    """A GPU that holds ``resident`` programs at once."""

    def __init__(self, resident):
        super().__init__()
        self.resident = resident

    def compile(self, kernel, args, kwargs):
        assert kwargs["launch_cooperative_grid"] is True and kwargs["num_warps"] == 16
        self.asked = kwargs
        return "binary"

    def resident_programs(self, compiled, num_warps):
        return self.resident


class TooLargeKernel(FakeKernel):
    """CUDA refuses a cooperative grid over ``limit`` programs, as ``cuLaunchKernelEx`` does."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def __getitem__(self, grid):
        launch = super().__getitem__(grid)
        if grid[0] > self.limit:
            return lambda *a, **k: (_ for _ in ()).throw(RuntimeError("too many blocks in cooperative launch"))
        return launch


def _row_split_site(kernel, resident, rows=300, parts=8):
    return DirectLaunch(kernel, grid=(rows * parts,), ints=(rows, 65536), constexprs={"XBLOCK": 1, "RBLOCK": 8192},
                        num_warps=16, runtime=CoopRuntime(resident), row_split=parts)  # fmt: skip


@pytest.mark.parametrize(
    ("resident", "rows", "grid", "balanced"),
    [(264, 300, 264, False), (270, 300, 264, False), (264, 300, 240, True), (264, 1024, 256, True),
     (264, 1023, 264, True), (4000, 300, 2400, True)],
)  # fmt: skip
def test_a_row_split_grid_is_whole_row_groups_the_gpu_holds(resident, rows, grid, balanced, monkeypatch):
    """264 programs resident: 33 groups of 8; 270: still 33; more than the rows need: one group a row.
    Balanced (BALANCED_ROUNDS), the fewest groups that take as many rounds: 300 rows over 33 groups is
    10 rounds, which 30 groups also take; 1024 rows 32 rounds (32 groups); 1023 rows are 31 full rounds
    of 33."""
    monkeypatch.setattr(launcher, "BALANCED_ROUNDS", balanced)
    kernel = FakeKernel()
    site = _row_split_site(kernel, resident, rows)
    site(FakeTensor(4096), FakeTensor(8192))
    ((launched, _, kwargs),) = kernel.calls
    assert launched == (grid, 1, 1) and kwargs["launch_cooperative_grid"] is True


def test_a_register_cap_reaches_the_compile_and_the_launch():
    """``maxnreg`` (codegen.triton.ROW_SPLIT_MAXNREG) is one of Triton's compile options: the site asks
    for it when it sizes the grid and when it launches, so the occupancy it sizes by is the capped one."""
    kernel = FakeKernel()
    site = DirectLaunch(kernel, grid=(2400,), ints=(300, 65536), constexprs={"XBLOCK": 1, "RBLOCK": 8192},
                        num_warps=16, runtime=CoopRuntime(264), row_split=8, maxnreg=64)  # fmt: skip
    site(FakeTensor(4096), FakeTensor(8192))
    ((_, _, kwargs),) = kernel.calls
    assert kwargs["maxnreg"] == 64 and kwargs["launch_cooperative_grid"] is True
    assert site.runtime.asked["maxnreg"] == 64


class ChoiceRuntime(CoopRuntime):
    """A GPU on which the binary compiled with FLAGS holds ``resident[FLAGS]`` programs at once."""

    def __init__(self, resident):
        super().__init__(resident)
        self.compiled = []

    def compile(self, kernel, args, kwargs):
        self.compiled.append(kwargs["FLAGS"])
        return ("binary", kwargs["FLAGS"])

    def resident_programs(self, compiled, num_warps):
        return self.resident[compiled[1]]


@pytest.mark.parametrize(
    ("resident", "forced", "kept", "grid"),
    [({True: 264, False: 264}, None, True, 264), ({True: 132, False: 264}, None, False, 264),
     ({True: 264, False: 132}, None, True, 264), ({True: 132, False: 264}, 0, True, 128)],
)  # fmt: skip
def test_a_row_split_keeps_the_choice_that_fits_the_most_programs(resident, forced, kept, grid, monkeypatch):
    """Flags preferred, the counter the alternative (codegen.triton.ROW_SPLIT_FLAGS): both are compiled at
    the first launch, and flags stay unless they fit fewer programs (87 registers: one 16-warp program an
    SM, against two). ROW_SPLIT_CHOICE forces one, whatever its grid; the launch uses the kept one."""
    monkeypatch.setattr(launcher, "ROW_SPLIT_CHOICE", forced)
    kernel, runtime = FakeKernel(), ChoiceRuntime(resident)
    site = DirectLaunch(kernel, grid=(2400,), ints=(300, 65536), runtime=runtime, row_split=8, num_warps=16,
                        constexprs={"XBLOCK": 1, "RBLOCK": 8192, "FLAGS": True},
                        choices=({"FLAGS": True}, {"FLAGS": False}))  # fmt: skip
    site(FakeTensor(4096), FakeTensor(8192))
    ((launched, _, kwargs),) = kernel.calls
    assert kwargs["FLAGS"] is kept and site.constexprs["FLAGS"] is kept and launched == (grid, 1, 1)
    assert runtime.compiled == ([True] if forced == 0 else [True, False])
    assert list(site.constexprs) == ["XBLOCK", "RBLOCK", "FLAGS"]  # the kernel's parameter order, for the binding


def test_a_refused_cooperative_grid_is_halved_until_it_fits():
    """The occupancy estimate said 264; CUDA holds 100: 264 -> 128 -> 64 programs (whole groups of 8)."""
    kernel = TooLargeKernel(limit=100)
    site = _row_split_site(kernel, 264)
    site(FakeTensor(4096), FakeTensor(8192))
    assert [c[0] for c in kernel.calls] == [(64, 1, 1)] and site.grid == (64, 1, 1)


def test_a_row_split_with_no_room_for_its_parts_says_so():
    site = _row_split_site(FakeKernel(), resident=4)
    with pytest.raises(RuntimeError, match="do not fit the GPU at once"):
        site(FakeTensor(4096), FakeTensor(8192))


# ---------------------------------------------------------------------------
# torch's C++ launcher (torch._C._StaticCudaLauncher), where the binary allows it
# ---------------------------------------------------------------------------


class StaticRuntime(FakeRuntime):
    """A binding that offers a static launcher with the given argument types, constants and extras."""

    def __init__(self, types, constants, extra=()):
        super().__init__()
        self.static_calls = []
        self.static = (lambda *a: self.static_calls.append(a), types, frozenset(constants), extra, 4, 1024)

    def binding(self, compiled):
        return Binding(lambda *a: self.runs.append(a), 77, "packed", self.static)


@pytest.mark.parametrize(
    ("types", "constants", "extra", "passed"),
    [
        ("OOii", {4, 5}, (), (96, 32)),  # XBLOCK, RBLOCK compiled in
        ("OOiO", {3, 4, 5}, (None,), (96, None)),  # rnumel specialised too; a null scratch pointer at the end
    ],
)
def test_later_launches_go_through_torchs_cpp_launcher_without_the_constants(types, constants, extra, passed):
    rt = StaticRuntime(types, constants, extra)
    site = _site(runtime=rt)
    a, b = FakeTensor(4096), FakeTensor(8192)
    site(a, b)
    site(a, b)
    assert site.static and rt.runs == []
    # (function, gx, gy, gz, num_warps, shared, types, every passed argument, stream)
    assert rt.static_calls == [(77, 6, 1, 1, 4, 1024, types, (a, b, *passed), 1000)]


def test_a_static_launcher_whose_types_do_not_match_is_not_used():
    rt = StaticRuntime("OOi", {4, 5})  # one letter short: the signature was read wrongly
    site = _site(runtime=rt)
    a, b = FakeTensor(4096), FakeTensor(8192)
    site(a, b)
    site(a, b)
    assert site.bound and not site.static and len(rt.runs) == 1 and rt.static_calls == []


def test_a_row_split_keeps_tritons_cooperative_launcher():
    rt = StaticRuntime("OOii", {4, 5})
    site = DirectLaunch(FakeKernel(), grid=(16,), ints=(2, 32), constexprs={"XBLOCK": 1, "RBLOCK": 16},
                        num_warps=16, runtime=rt, row_split=2)  # fmt: skip
    rt.compile = lambda *a: "binary"
    rt.resident_programs = lambda *a: 8
    a, b = FakeTensor(4096), FakeTensor(8192)
    site(a, b)
    site(a, b)
    assert site.bound and not site.static and len(rt.runs) == 1


def test_set_static_false_rebinds_to_tritons_launcher():
    rt = StaticRuntime("OOii", {4, 5})
    kernel = FakeKernel()
    site = _site(kernel, rt)
    a, b = FakeTensor(4096), FakeTensor(8192)
    site(a, b)
    assert site.static
    try:
        launcher.set_static(False, [site])
        site(a, b)  # binds again, through the JIT
        site(a, b)
        assert site.bound and not site.static and len(kernel.calls) == 2 and len(rt.runs) == 1
    finally:
        launcher.set_static(True, [site])
    site(a, b)
    site(a, b)
    assert site.static and len(rt.static_calls) == 1
