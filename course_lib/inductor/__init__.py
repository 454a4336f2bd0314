"""course_lib.inductor: a small Inductor: loop IR, fusion, C++/OpenMP and Triton code, a backend.

Teaches ``torch/_inductor`` (lowering.py, ir.py, scheduler.py, codegen/cpp.py,
codegen/triton.py, codegen/wrapper.py, compile_fx.py). The pipeline, one module per stage::

    ATen FX graph --lowering--> GraphIR (buffers, sympy indices)   ir.py / lowering.py
        --scheduler--> Schedule (fused kernels, memory plan)       scheduler.py
        --codegen--> kernel source -> .so / Triton module          codegen/cpp.py, codegen/triton.py
        --wrapper--> Python ``call(args)``                          codegen/wrapper.py
    compile_fx(gm, example_inputs): the torch.compile backend      compile_fx.py
    index algebra and size symbols (dynamic shapes), all stages    sizevars.py

Use it as ``torch.compile(model, backend=course_lib.inductor.compile_fx)`` or
``backend="course_lib"`` (registered with Dynamo when this package is imported); the backend
runs torch's AOT Autograd. ``compile_with_course_aot(fn)`` runs the all-course pipeline
instead: course_lib.aot's joint graph and partition, then this package on both graphs.
``compile_dynamic(fn, *args, dynamic={0: (0,)})`` is the all-course path with symbolic sizes:
course_lib.decomp and course_lib.fake trace with size symbols, one C++ compile serves every size.
"""

from __future__ import annotations

from course_lib.inductor.compile_fx import (
    BACKENDS,
    CompiledGraph,
    compile_dynamic,
    compile_fx,
    compile_graph,
    compile_with_course_aot,
    inner_compiler,
    schedule_graph,
)
from course_lib.inductor.fallbacks import FallbackReport, fallback_report
from course_lib.inductor.ir import Buffer, GraphIR
from course_lib.inductor.lowering import LOWERINGS, Unsupported, lower
from course_lib.inductor.scheduler import can_fuse, fuse, kernel_stats, ladder, schedule_stats, unfused

__all__ = [
    "BACKENDS", "LOWERINGS", "Buffer", "CompiledGraph", "GraphIR", "Unsupported", "can_fuse", "compile_dynamic",
    "compile_fx", "compile_graph",
    "compile_with_course_aot", "FallbackReport", "fallback_report",
    "fuse", "inner_compiler", "kernel_stats", "ladder", "lower", "register", "schedule_graph", "schedule_stats",
    "unfused",
]  # fmt: skip


def register() -> None:
    """Register :func:`compile_fx` with Dynamo under the name ``"course_lib"``."""
    from course_lib import compat

    compat.register_dynamo_backend("course_lib", compile_fx)


register()
