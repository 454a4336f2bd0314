"""The torch.compile backend: Dynamo graph -> AOT Autograd -> lower -> fuse -> codegen -> call.

Teaches ``torch/_inductor/compile_fx.py`` (``compile_fx``: decompose and AOT-trace the Dynamo
graph, then ``compile_fx_inner`` on the forward and the backward graph separately) and
``torch/_inductor/graph.py`` (``GraphLowering.compile_to_module``).

``compile_fx(gm, example_inputs)`` is what ``torch.compile(model, backend=compile_fx)`` (or
``backend="course_lib"``) calls. A graph course_lib cannot compile runs in eager with the
reason logged on the ``course_lib.inductor`` logger; compilation never raises into the model.
Set ``COURSE_INDUCTOR_DEBUG=1`` to print every stage (pre-fusion IR, schedule, C++, wrapper).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from course_lib.inductor import cpp, wrapper
from course_lib.inductor.ir import GraphIR
from course_lib.inductor.lowering import Unsupported, lower
from course_lib.inductor.scheduler import Schedule, fuse, unfused

log = logging.getLogger("course_lib.inductor")


@dataclass
class CompiledGraph:
    """Every stage of one compiled graph, kept for display (Triton's ``kernel.asm`` idea)."""

    graph: GraphIR
    schedule: Schedule
    kernel_code: str  # C++ translation unit or Triton module source
    wrapper_code: str
    call: object
    codegen: str
    timings: dict = field(default_factory=dict)

    def __call__(self, *args):
        return self.call(list(args))

    @property
    def kernel_count(self) -> int:
        return sum(k.kind == "kernel" for k in self.schedule.kernels)

    def output_code(self) -> str:
        """Kernels then wrapper, the shape of Inductor's output code file."""
        return self.kernel_code + "\n\n# ---- wrapper ----\n" + self.wrapper_code


def schedule_graph(graph: GraphIR, fusion: str = "greedy") -> Schedule:
    if fusion == "unfused":
        return unfused(graph)
    return fuse(graph, vertical_only=(fusion == "vertical"))


def _device_of(example_inputs):
    import torch

    for t in example_inputs:
        if isinstance(t, torch.Tensor):
            return t.device
    return torch.device("cpu")


def compile_graph(gm, example_inputs, fusion: str = "greedy", codegen: str | None = None) -> CompiledGraph:
    """Compile one ATen-level graph (what AOT Autograd hands ``fw_compiler``/``bw_compiler``).

    ``fusion``: ``unfused`` | ``vertical`` | ``greedy``; ``codegen``: ``cpp`` | ``triton`` |
    ``python`` (numpy reference executor); default C++ on CPU, Triton on CUDA. Raises :class:`Unsupported` when it cannot.
    """
    t0 = time.perf_counter()
    device = _device_of(example_inputs)
    codegen = codegen or ("triton" if device.type == "cuda" else "cpp")
    if device.type not in ("cpu", "cuda"):
        raise Unsupported(f"device {device.type}")
    if codegen == "cpp" and device.type != "cpu":
        raise Unsupported("C++ kernels need CPU tensors")
    graph = lower(gm, example_inputs)
    t1 = time.perf_counter()
    sched = schedule_graph(graph, fusion)
    t2 = time.perf_counter()
    dtypes = {b.name: b.dtype for b in graph.buffers}
    kernels = [k for k in sched.kernels if k.kind == "kernel"]
    if codegen == "cpp":
        bodies = [cpp.kernel_source(k.name, k.plan, dtypes) for k in kernels]
        source = cpp.HEADER + "\n" + "\n\n".join(bodies) + "\n"
        fns = {}
        if kernels:
            fns = cpp.load(cpp.compile_source(source), [k.name for k in kernels])
            for k in kernels:
                fns[k.name].argtypes = [cpp.ctypes.c_void_p] * (len(k.plan.reads) + len(k.plan.writes))
        call_names = {k.name: k.name for k in kernels}
        wsrc = wrapper.wrapper_source(sched, call_names, pointer_args=True)
    elif codegen == "python":
        from course_lib.inductor import interpret

        source, fns = "# kernels run by course_lib.inductor.interpret (numpy)", interpret.build(kernels)
        wsrc = wrapper.wrapper_source(sched, {k.name: k.name for k in kernels}, pointer_args=False)
    else:
        from course_lib.inductor import triton_codegen

        source, fns = triton_codegen.build(kernels, dtypes)
        call_names = {k.name: k.name for k in kernels}
        wsrc = wrapper.wrapper_source(sched, call_names, pointer_args=False)
    t3 = time.perf_counter()
    call = wrapper.make_call(wsrc, {k: v for k, v in fns.items() if not k.startswith("__")}, device)
    out = CompiledGraph(
        graph, sched, source, wsrc, call, codegen, {"lower": t1 - t0, "schedule": t2 - t1, "codegen+build": t3 - t2}
    )
    if os.environ.get("COURSE_INDUCTOR_DEBUG") == "1":
        print(
            f"# ---- ir_pre_fusion ----\n{graph}\n# ---- schedule ----\n{sched}\n# ---- output code ----\n{out.output_code()}"
        )
    return out


def _boxed(fn):
    fn._boxed_call = True
    return fn


def inner_compiler(fusion: str = "greedy", codegen: str | None = None, record: list | None = None):
    """``compile_fx_inner``: compile one AOT graph, or fall back to running it in eager."""

    def compiler(gm, example_inputs):
        try:
            compiled = compile_graph(gm, example_inputs, fusion=fusion, codegen=codegen)
        except Exception as exc:  # never crash the user's model: run this graph in eager
            if os.environ.get("COURSE_INDUCTOR_STRICT") == "1":
                raise
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            log.warning("course_lib.inductor: graph runs in eager (%s)", reason)
            if record is not None:
                record.append(("fallback", reason))

            def eager(args):
                return gm(*args)

            return _boxed(eager)
        if record is not None:
            record.append(("compiled", compiled))
        call = compiled.call

        def run(args):
            return call(args)

        return _boxed(run)

    return compiler


def compile_fx(gm, example_inputs, fusion: str = "greedy", codegen: str | None = None, record: list | None = None):
    """A torch.compile backend: ``torch.compile(model, backend=compile_fx)``.

    Runs AOT Autograd (forward and backward graphs, Inductor's decomposition table) and
    compiles both graphs with :func:`compile_graph`. ``record``, when given, collects one entry
    per graph: ``("compiled", CompiledGraph)`` or ``("fallback", reason)``.
    """
    from course_lib import compat

    inner = inner_compiler(fusion, codegen, record)
    try:
        return compat.inductor_aot_module(gm, example_inputs, inner, inner, compat.inductor_decomposition_table())
    except Exception as exc:  # AOT tracing itself failed: run the whole Dynamo graph in eager
        log.warning("course_lib.inductor: AOT tracing failed, graph runs in eager (%s)", str(exc).splitlines()[0])
        if record is not None:
            record.append(("fallback", f"aot: {exc}".splitlines()[0]))
        return gm.forward


def course_aot_compiler(fusion: str = "greedy", codegen: str | None = None, record: list | None = None):
    """A compiler for ``course_lib.aot.aot_function``: the whole course pipeline end to end.

    course_lib.aot hands over a course_lib.fx Graph of ATen primitives (the backward one
    without example inputs), so the graph is converted to torch.fx, re-traced on the first
    call's real arguments to get shapes (``node.meta["val"]``), then compiled here.
    """

    def compiler(graph, example_inputs):
        from course_lib import compat, fx

        gm = fx.to_torch_fx(graph)
        cache = {}

        def run(*args):
            if "fn" not in cache:
                traced = compat.make_fx(gm, *args)
                try:
                    cache["fn"] = compile_graph(traced, list(args), fusion=fusion, codegen=codegen)
                    if record is not None:
                        record.append(("compiled", cache["fn"]))
                except Exception as exc:  # eager fallback, as in compile_fx
                    if os.environ.get("COURSE_INDUCTOR_STRICT") == "1":
                        raise
                    log.warning("course_lib.inductor: graph runs in eager (%s)", str(exc).splitlines()[0])
                    cache["fn"] = traced
            return cache["fn"](*args)

        return run

    return compiler


def compile_with_course_aot(fn, fusion: str = "greedy", codegen: str | None = None, record: list | None = None):
    """``course_lib.aot.aot_function(fn)`` with course_lib.inductor compiling both graphs."""
    from course_lib import aot

    comp = course_aot_compiler(fusion, codegen, record)
    return aot.aot_function(fn, fw_compiler=comp, bw_compiler=comp)
