"""Compile a graph's Triton kernels in a process pool, and each distinct kernel once.

Teaches ``torch/_inductor/async_compile.py`` (``AsyncCompile``: while the wrapper is generated,
each kernel's compile is submitted to a pool of worker processes; ``async_compile.wait(globals())``
blocks until every kernel is ready, before the first call) and ``torch/_inductor/codecache.py``
(``TritonCodeCache``: a kernel is stored and looked up by a hash of its source, so a kernel seen
before, in this graph or an earlier one, is not compiled again).

Why a pool: one Triton compile (TTIR -> TTGIR -> LLVM IR -> PTX, then ``ptxas`` to a cubin) takes
a fraction of a second to seconds, almost all of it in one thread of C++ and ``ptxas``. A model
has tens to hundreds of kernels; compiled one after another on first launch (what ``@triton.jit``
does) that is the cold-compile time a user waits. Kernels are independent, so N processes take
about 1/N of it. Why a cache by source: a transformer's twelve layers produce the same kernels
twelve times (:func:`course_lib.inductor.codegen.triton.module_source` already folds repeats
inside one module into one function); the key also catches repeats across graphs and runs.

Position: the Triton module course_lib.inductor generated -> one job per distinct kernel ->
``triton.compile`` in a worker -> Triton's own disk cache (on a GPU, the launch then finds its
binary there) and a JSON record under the course's artefact cache (``.cache/course_lib/triton_bin``).

Simplified: jobs are plain data (module file, kernel name, Triton's specialisation JSON); the
worker imports the module itself, as Inductor's workers load the kernel from its cache file.
Workers are forked (Linux), so they start in milliseconds with the parent's imports; they never
touch the GPU driver, because ``triton.compile`` with an explicit target needs none.
"""

from __future__ import annotations

import base64
import concurrent.futures
import dataclasses
import itertools
import json
import multiprocessing
import multiprocessing.util
import os
import time

from course_lib import env

#: ``COURSE_COMPILE_WORKERS=n`` sets the pool size (1: compile in this process, one after another).
WORKERS_ENV = "COURSE_COMPILE_WORKERS"
TIMEOUT_S = 120  # one kernel's compile takes seconds; a worker silent this long is stuck


def _triton_environ() -> tuple:
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("TRITON_")))


def default_workers() -> int:
    """Inductor's ``compile_threads``: the CPUs this process may use, at most 32."""
    if os.environ.get(WORKERS_ENV):
        return max(1, int(os.environ[WORKERS_ENV]))
    return max(1, min(32, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


@dataclasses.dataclass(frozen=True)
class CompileJob:
    """One kernel to compile: where its ``@triton.jit`` function lives and how it is specialised."""

    name: str  # the kernel's name in its module (an alias of an identical kernel is fine)
    module: str  # module name, for import
    file: str  # the module's file (generated modules live under the cache, not on sys.path)
    spec: str  # Triton's specialisation JSON (compat.triton_capture_specialization / triton_specialization)
    source: str  # the kernel's source with its name blanked: with ``spec``, the cache key
    environ: tuple = ()  # the submitter's TRITON_* variables: Triton's cache folder and key read them

    @property
    def key(self) -> str:
        import triton

        return env.artefact_key(self.source, self.spec, triton.__version__)


@dataclasses.dataclass
class CompileReport:
    """What one :meth:`AsyncCompile.compile` call did (``seconds``: wall time of the whole call)."""

    kernels: int  # jobs asked for
    unique: int  # distinct keys among them
    compiled: int  # compiled now (the rest came from memory or disk)
    seconds: float
    workers: int
    results: dict = dataclasses.field(default_factory=dict, repr=False)  # key -> record

    def __str__(self) -> str:
        return (
            f"{self.kernels} kernels, {self.unique} distinct, {self.compiled} compiled "
            f"({self.unique - self.compiled} cached) with {self.workers} worker(s)"
        )


def _run_job(job: CompileJob) -> dict:
    """In a worker: import the kernel's module, compile the specialisation, return a JSON-able record."""
    from course_lib import compat
    from course_lib.triton import compile as triton_compile

    for name in [n for n in os.environ if n.startswith("TRITON_")]:
        os.environ.pop(name)
    os.environ.update(dict(job.environ))  # a pooled worker may outlive a change of cache folder
    if compat.triton_language_patched():
        raise RuntimeError("triton.language is patched by the interpreter in this process; cannot compile here")
    module = triton_compile._import_kernel_module(job.module, job.file)
    t0 = time.perf_counter()
    try:
        compiled = compat.triton_compile_specialization(getattr(module, job.name), job.spec)
    except Exception as exc:  # Triton refused this kernel: said to the caller, not a broken pool
        lines = [ln for ln in str(exc).splitlines() if ln.strip()] or [""]
        return {"name": job.name, "error": f"{type(exc).__name__}: {lines[0][:300]}"}
    seconds = time.perf_counter() - t0
    asm = compiled.asm
    binary = asm.get("cubin") or asm.get("hsaco") or b""
    return {
        "name": job.name,
        "seconds": seconds,
        "ptx_lines": asm.get("ptx", "").count("\n"),
        "binary_b64": base64.b64encode(binary).decode(),
    }


class AsyncCompile:
    """A pool of compile workers plus the in-memory side of the kernel cache.

    ``compile(jobs)`` returns when every job is done (``async_compile.wait`` in Inductor); a job
    whose key was compiled before, by this object or by any process (the JSON record under the
    artefact cache), is not compiled again.
    """

    def __init__(self, workers: int | None = None, disk_cache: bool = True, start: str | None = None):
        self.workers = workers or default_workers()
        self.start = start  # multiprocessing start method (default fork)
        self.disk_cache = disk_cache
        self.memory: dict[str, dict] = {}
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            # fork: workers inherit the imports and Triton's warm state, no start-up cost. With a CUDA
            # context in the parent that is safe only because a worker never calls the driver (it
            # compiles for an explicit target); a worker that hangs anyway is killed after TIMEOUT_S.
            # (spawn / forkserver would re-run the main script in every worker, and import torch there.)
            ctx = multiprocessing.get_context(self.start or "fork")
            self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
            # shut the workers down at exit. Not with atexit: a multiprocessing child never runs it,
            # and joins its non-daemon children (the pool's idle workers) at exit, for ever;
            # multiprocessing's finalizers run first there, and from atexit in the main process
            multiprocessing.util.Finalize(None, self.close, exitpriority=100)
        return self._pool

    def close(self, kill: bool = False) -> None:
        if self._pool is not None:
            if kill:  # a worker that hangs would block shutdown(): end the pool's processes
                for proc in list(getattr(self._pool, "_processes", {}).values()):
                    proc.terminate()
            self._pool.shutdown(wait=not kill, cancel_futures=True)
            self._pool = None

    def _from_disk(self, key: str) -> dict | None:
        path = env.cache_dir() / "triton_bin" / f"{key}.json"
        if not (self.disk_cache and path.is_file()):
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None

    def _to_disk(self, key: str, record: dict) -> None:
        if self.disk_cache:
            env.artefact("triton_bin", f"{key}.json", lambda tmp: tmp.write_text(json.dumps(record)))

    def compile(self, jobs: list[CompileJob]) -> CompileReport:
        t0 = time.perf_counter()
        first: dict[str, CompileJob] = {}
        for job in jobs:
            first.setdefault(job.key, job)
        todo = {}
        for key, job in first.items():
            if key not in self.memory:
                cached = self._from_disk(key)
                if cached is not None:
                    self.memory[key] = cached
                else:
                    todo[key] = job
        done = {}
        if todo and (self.workers <= 1 or self._pool is None):
            # The first compile in a process pays ~2 s of one-time set-up (Triton's backend, LLVM's
            # targets, ptxas's version). Do one job here first: workers forked afterwards inherit it.
            key = next(iter(todo))
            done[key] = _run_job(todo.pop(key))
        if self.workers <= 1:
            done.update({key: _run_job(job) for key, job in todo.items()})
        elif todo:
            futures = {key: self.pool().submit(_run_job, job) for key, job in todo.items()}
            try:
                done.update({key: f.result(timeout=TIMEOUT_S) for key, f in futures.items()})
            except Exception:
                self.close(kill=True)  # a broken or hung pool is not reused
                raise
        for key, record in done.items():
            self.memory[key] = record
            if "error" not in record:  # (a failure is not kept across processes: another Triton may pass)
                self._to_disk(key, record)
        return CompileReport(len(jobs), len(first), len(done), time.perf_counter() - t0, self.workers,
                             {k: self.memory[k] for k in first})  # fmt: skip


def jobs_for(compiled, target: str = "sm_90") -> list[CompileJob]:
    """One job per kernel of a ``CompiledGraph`` built with ``codegen="triton"``, specialised by hand
    as the JIT would specialise its launch on a GPU (:func:`course_lib.compat.triton_specialization`)."""
    from course_lib import compat
    from course_lib.inductor.codegen.triton import canonical_source
    from course_lib.triton.compile import gpu_target, kernel_source

    call_globals = compiled.call.__globals__
    jobs = []
    for k in compiled.schedule.kernels:
        if k.kind != "kernel":
            continue
        launch = call_globals[k.name]
        for name, jit_fn, warps in launch.stages:
            fn = compat.triton_jit_function(jit_fn).fn
            spec = compat.triton_specialization(jit_fn, launch.signature, launch.constexprs, launch.int_args,
                                                gpu_target(target), warps)  # fmt: skip
            src, _ = kernel_source(jit_fn)
            job = CompileJob(name, fn.__module__, fn.__code__.co_filename, spec, canonical_source(src, fn.__name__),
                             _triton_environ())  # fmt: skip
            jobs.append(job)
    return jobs


# ---------------------------------------------------------------------------
# on a GPU: compile a freshly built module's kernels before its first call
# ---------------------------------------------------------------------------

#: Triton pointer type -> torch dtype, for the ``MockTensor`` arguments of a specialisation capture
TORCH_DTYPES = {"*fp32": "float32", "*fp64": "float64", "*fp16": "float16", "*bf16": "bfloat16", "*i64": "int64", "*i32": "int32", "*i16": "int16",
                "*i8": "int8", "*u8": "uint8", "*i1": "bool"}  # fmt: skip

#: One pool per process, as Inductor keeps one ``AsyncCompile`` pool for every graph it compiles.
_SHARED: list[AsyncCompile] = []


def shared() -> AsyncCompile:
    if not _SHARED:
        _SHARED.append(AsyncCompile())
    return _SHARED[0]


def reset() -> None:
    """Close the process's pool and forget what it compiled (a benchmark's cold start)."""
    while _SHARED:
        _SHARED.pop().close()


def enabled() -> bool:
    """Precompile on a GPU unless ``COURSE_COMPILE_WORKERS=0`` (then each kernel compiles at its
    first launch, one after another, as ``@triton.jit`` alone does)."""
    return os.environ.get(WORKERS_ENV) != "0"


def precompile(fns: dict, module: str, file: str) -> CompileReport | None:
    """Compile every distinct kernel of a just-imported Triton module in the pool (GPU only).

    For each launcher, Triton's JIT is asked what it would compile for the launch (its
    specialisation, captured without compiling); the workers compile exactly that, so the binaries
    land in Triton's disk cache under the keys the first launch looks up, and that launch only loads
    them. Any failure here is logged and leaves the JIT to compile as usual.
    """
    import logging

    import torch

    from course_lib import compat
    from course_lib.inductor.codegen.triton import canonical_source
    from course_lib.triton.compile import kernel_source

    log = logging.getLogger("course_lib.inductor")
    try:
        jobs = []
        for launch in fns.values():
            ptrs = [getattr(torch, TORCH_DTYPES[t]) for t in launch.signature.values() if t.startswith("*")]
            args = (*ptrs, launch.int_args["xnumel"], launch.int_args["rnumel"])
            # a row split's site compiles each of its choices at its first launch (DirectLaunch.pick): all of them here
            for (name, jit_fn, warps), choice in itertools.product(
                launch.stages, getattr(launch, "choices", ()) or ({},)
            ):
                consts = {**launch.constexprs, **choice, **getattr(launch, "options", {}), "num_warps": warps}
                spec = compat.triton_capture_specialization(jit_fn, args, consts)
                if spec is None:
                    log.info("course_lib.inductor: this Triton cannot report a launch's specialisation; no precompile")
                    return None
                src, _ = kernel_source(jit_fn)
                fn_name = compat.triton_jit_function(jit_fn).fn.__name__
                jobs.append(CompileJob(name, module, file, spec, canonical_source(src, fn_name), _triton_environ()))
        report = shared().compile(jobs)
    except Exception as exc:  # never fail a compile because the pool could not help
        log.warning("course_lib.inductor: parallel precompile skipped (%s)", str(exc).splitlines()[0])
        return None
    refuse_failed(report)
    return report


class KernelCompileError(Exception):
    """Triton's compiler failed on generated kernels (raised while the graph is being compiled, so the
    graph can be compiled again with those kernels' nodes unfused, or run in eager with this reason,
    instead of the first launch raising into the model). ``kernels``: the names of those kernels."""

    def __init__(self, message: str, kernels=()):
        super().__init__(message)
        self.kernels = list(kernels)


def refuse_failed(report: CompileReport) -> None:
    """Raise :class:`KernelCompileError` naming the first kernel that did not compile, if any.

    Seen on the H100 (Triton 3.6): a 22-output fused kernel of Jamba in bf16 stopped Triton's
    ``TritonGPURemoveLayoutConversions`` pass ("operand #0 does not dominate this use"). Without this
    the error surfaced at the kernel's first launch, inside the user's training step."""
    failed = [r for r in report.results.values() if "error" in r]
    if failed:
        raise KernelCompileError(f"Triton could not compile {failed[0]['name']}: {failed[0]['error']}"
                                 + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""),
                                 [r["name"] for r in failed])  # fmt: skip
