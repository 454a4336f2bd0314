"""Compiling course_lib.inductor's Triton kernels: repeats folded, a process pool, a cache by source.

The kernels are compiled for sm_90 on the CPU (Triton's compiler needs a target, not a GPU).
"""

import base64
import json

import pytest
import torch

import course_lib.inductor as ind
import course_lib.triton  # noqa: F401  (before any interpreted kernel: keeps triton.compile usable here)
from course_lib import compat, decomp
from course_lib.inductor import async_compile


def _compile(fn, *args):
    gm = compat.make_fx(fn, *args, decompositions=decomp.DECOMPOSITIONS)
    return ind.compile_graph(gm, list(args), codegen="triton")


def _two_blocks(x, y):
    """Two identical blocks (softmax of a row, then a scale) on different inputs, and a sum."""
    a = torch.softmax(x, -1) * 2.0
    b = torch.softmax(y, -1) * 2.0
    return (a @ b.T, (a - b).sum())


@pytest.fixture
def graph():
    torch.manual_seed(0)
    x, y = torch.randn(4, 32), torch.randn(4, 32)
    return _compile(_two_blocks, x, y), (x, y)


def test_a_repeated_kernel_is_one_function(graph):
    c, (x, y) = graph
    code = c.kernel_code
    assert "kernel1 = kernel0  # the same kernel as kernel0" in code, code
    assert code.count("@triton.jit\ndef kernel") == c.kernel_count - 1  # (besides the module's jit helpers)
    for got, ref in zip(c(x, y), _two_blocks(x, y), strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_specialisation_made_by_hand_follows_the_jit_rules(graph):
    c, _ = graph
    launch = c.call.__globals__["kernel0"]
    target = course_lib.triton.compile.gpu_target("sm_90")
    spec = json.loads(compat.triton_specialization(launch.jit_fn, launch.signature, launch.constexprs,
                                                   {"xnumel": 1, "rnumel": 32}, target, 4))  # fmt: skip
    names = list(compat.triton_jit_function(launch.jit_fn).arg_names)
    assert spec["signature"]["xnumel"] == "constexpr"  # an int equal to 1 is baked in
    assert [names.index("xnumel")] in spec["constant_keys"]
    assert [names.index("rnumel")] in spec["attrs_keys"]  # 32 is divisible by 16
    assert [0] in spec["attrs_keys"] and spec["target"] == {"backend": "cuda", "arch": 90, "warp_size": 32}


def test_pool_compiles_each_distinct_kernel_once_and_caches_it(graph, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    c, _ = graph
    jobs = async_compile.jobs_for(c, "sm_90")
    assert len(jobs) == c.kernel_count and len({j.key for j in jobs}) == c.kernel_count - 1
    pool = async_compile.AsyncCompile(workers=2)
    try:
        report = pool.compile(jobs)
        assert (report.kernels, report.unique, report.compiled) == (len(jobs), len(jobs) - 1, len(jobs) - 1)
        for record in report.results.values():
            assert base64.b64decode(record["binary_b64"])[:4] == b"\x7fELF" and record["ptx_lines"] > 10
        assert pool.compile(jobs).compiled == 0  # in memory
    finally:
        pool.close()
    fresh = async_compile.AsyncCompile(workers=1).compile(jobs)  # another process's view: the disk records
    assert fresh.compiled == 0 and fresh.unique == len(jobs) - 1
    assert "cached" in str(fresh)


def test_precompile_submits_what_the_jit_would_compile(graph, tmp_path, monkeypatch):
    """On a GPU the specialisation comes from Triton's JIT (compat.triton_capture_specialization);
    here it is made by hand, and the rest of the path runs as it would there."""
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(async_compile, "_SHARED", [async_compile.AsyncCompile(workers=1)])
    c, _ = graph
    target = course_lib.triton.compile.gpu_target("sm_90")

    def capture(kernel, args, kwargs):
        launch = next(f for f in fns.values() if f.jit_fn is kernel)
        assert args[-2:] == (launch.int_args["xnumel"], launch.int_args["rnumel"])
        assert all(isinstance(a, torch.dtype) for a in args[:-2])  # tensors as dtypes (MockTensor)
        return compat.triton_specialization(kernel, launch.signature, launch.constexprs, launch.int_args, target,
                                            kwargs["num_warps"])  # fmt: skip

    monkeypatch.setattr(compat, "triton_capture_specialization", capture)
    fns = {k.name: c.call.__globals__[k.name] for k in c.schedule.kernels if k.kind == "kernel"}
    fn = fns["kernel0"].jit_fn.fn
    report = async_compile.precompile(fns, fn.__module__, fn.__code__.co_filename)
    assert report is not None and report.unique == len(fns) - 1 and report.compiled == len(fns) - 1
    monkeypatch.setenv("COURSE_COMPILE_WORKERS", "0")
    assert not async_compile.enabled()


def test_a_kernel_triton_cannot_compile_fails_the_graph_not_the_first_launch(graph, tmp_path, monkeypatch):
    """Jamba in bf16 on the H100 (Triton 3.6): one generated kernel stopped a Triton pass. The
    precompile now says which, raising while the graph compiles (so it runs in eager with that
    reason) instead of leaving the JIT to fail at the first launch inside the training step."""
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(async_compile, "_SHARED", [async_compile.AsyncCompile(workers=1)])
    c, _ = graph
    target = course_lib.triton.compile.gpu_target("sm_90")
    fns = {k.name: c.call.__globals__[k.name] for k in c.schedule.kernels if k.kind == "kernel"}

    def capture(kernel, args, kwargs):
        launch = next(f for f in fns.values() if f.jit_fn is kernel)
        return compat.triton_specialization(kernel, launch.signature, launch.constexprs, launch.int_args, target,
                                            kwargs["num_warps"])  # fmt: skip

    def broken(fn, spec):
        raise RuntimeError("PassManager::run failed")

    monkeypatch.setattr(compat, "triton_capture_specialization", capture)
    monkeypatch.setattr(compat, "triton_compile_specialization", broken)
    fn = fns["kernel0"].jit_fn.fn
    with pytest.raises(async_compile.KernelCompileError, match="could not compile kernel0: RuntimeError: PassManager"):
        async_compile.precompile(fns, fn.__module__, fn.__code__.co_filename)
    assert not list(tmp_path.rglob("*.json"))  # a failure is not cached for other processes


class _H200Driver:
    """Stands in for Triton's CUDA driver: the JIT asks it for the device, stream and target only."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0

    def get_current_target(self):
        return course_lib.triton.compile.gpu_target("sm_90")


def test_captured_specialisation_compiles_to_the_binary_the_launch_looks_up(graph):
    """What the pool compiles must be what the JIT's first launch asks for: the same Triton cache key.
    Triton's JIT is driven here by a stand-in H200 driver (no GPU), with real launch arguments."""
    from triton.runtime import driver

    c, _ = graph
    launch = c.call.__globals__["kernel2"]
    jit = compat.triton_jit_function(launch.jit_fn)
    args = (*[torch.float32] * 5, launch.int_args["xnumel"], launch.int_args["rnumel"])
    kwargs = {**launch.constexprs, "num_warps": launch.num_warps}
    before = driver._active  # None on a CPU machine; reset_active() would try to create a CUDA driver
    driver.set_active(_H200Driver())
    try:
        with compat.triton_compile_scope(launch.jit_fn):
            spec = compat.triton_capture_specialization(jit, args, kwargs)
            assert spec is not None and json.loads(spec)["signature"]["xnumel"] == "constexpr"  # xnumel is 1
            by_pool = compat.triton_compile_specialization(jit, spec)
            by_launch = jit.warmup(*args, grid=(1,), **kwargs)  # what a launch with these arguments compiles
    finally:
        driver._active = before
    assert by_pool.hash == by_launch.hash


def test_triton_36_specialisation_without_target_still_compiles_the_launch_binary(graph, monkeypatch):
    """Triton 3.6's JIT serialises a specialisation without its target: its
    ``serialize_specialization_data(name, signature, constants, attrs, options, key)`` has no target
    parameter (3.9 added one and writes ``'target': target.__dict__``). That made the pool fail with
    KeyError 'target' on the H200 (torch 2.11 / triton 3.6). This fake mirrors 3.6: the installed
    3.9 serialiser's output with the key removed. The capture must add the current target, and the
    pool's compile must still hit the launch's cache key."""
    from triton.runtime import driver
    from triton.runtime import jit as jit_mod

    real = jit_mod.serialize_specialization_data

    def serialize_36(*args, **kwargs):
        d = json.loads(real(*args, **kwargs))
        d.pop("target")
        return json.dumps(d)

    monkeypatch.setattr(jit_mod, "serialize_specialization_data", serialize_36)
    c, _ = graph
    launch = c.call.__globals__["kernel2"]
    jit = compat.triton_jit_function(launch.jit_fn)
    args = (*[torch.float32] * 5, launch.int_args["xnumel"], launch.int_args["rnumel"])
    kwargs = {**launch.constexprs, "num_warps": launch.num_warps}
    bare = json.loads(compat.triton_specialization(launch.jit_fn, launch.signature, launch.constexprs,
                                                   launch.int_args, compat.require("triton.backends.compiler",
                                                   "GPUTarget")("cuda", 90, 32), launch.num_warps))  # fmt: skip
    bare.pop("target")
    with pytest.raises(compat.CompatError, match="no 'target'"):
        compat.triton_compile_specialization(jit, json.dumps(bare))  # a clear error, not a KeyError
    before = driver._active
    driver.set_active(_H200Driver())
    try:
        with compat.triton_compile_scope(launch.jit_fn):
            spec = compat.triton_capture_specialization(jit, args, kwargs)
            assert json.loads(spec)["target"] == {"backend": "cuda", "arch": 90, "warp_size": 32}
            by_pool = compat.triton_compile_specialization(jit, spec)
            by_launch = jit.warmup(*args, grid=(1,), **kwargs)
    finally:
        driver._active = before
    assert by_pool.hash == by_launch.hash


def test_built_module_is_registered_once(graph):
    """build() puts the generated module in sys.modules, so a precompile job importing it by name
    gets the same module object (no second copy of the kernels in the process)."""
    import sys

    from course_lib.triton.compile import _import_kernel_module

    c, _ = graph
    fn = c.call.__globals__["kernel0"].jit_fn.fn
    assert sys.modules[fn.__module__].kernel0.fn is fn
    assert _import_kernel_module(fn.__module__, fn.__code__.co_filename) is sys.modules[fn.__module__]


def _use_pool_then_return() -> None:
    print(async_compile.AsyncCompile(workers=2).pool().submit(sum, [1, 2]).result())


def test_a_multiprocessing_child_that_used_the_pool_exits():
    """multiprocessing children skip atexit and join their non-daemon children (the pool's idle
    workers) on the way out: without the pool's Finalize hook such a child never ends (the H200
    recording's jobs hung so)."""
    import multiprocessing

    proc = multiprocessing.get_context("spawn").Process(target=_use_pool_then_return)
    proc.start()
    proc.join(120)
    alive = proc.is_alive()
    if alive:
        proc.kill()
    assert not alive and proc.exitcode == 0, "the child did not exit after its work"
