"""course_lib: a small, working reimplementation of each stage of the PyTorch 2 / LLVM stack.

Each subpackage teaches one real component (its docstring names the real source file) and is
shown beside that component in the labs::

    ir        Module 1  three-address IR, SSA, dataflow, optimisations, loops, back end
    llvm      Module 2  course IR -> LLVM IR (llvmlite), pass pipelines, JIT, targets
    triton    Module 3  kernels, the TTIR -> TTGIR -> LLVM IR -> PTX -> SASS pipeline
    dynamo    Module 4  bytecode, symbolic interpretation, guards, graph breaks
    fx        Module 4  Graph / Node / Proxy tracer, interpreter, passes
    decomp    Module 4  decomposition table to a primitive set
    fake      Module 4  fake tensors and symbolic shapes
    aot       Module 4  joint forward/backward graphs and partitioners
    inductor  Module 4  loop IR, fusion, C++ and Triton code generation, a torch.compile backend
    gpu       Module 5  SIMT simulator running real PTX, occupancy, roofline, collectives
    cpu       Module 6  vectorisation reports, intrinsics, OpenMP, caches

Shared pieces: ``check`` (exercise checks), ``viz`` (graphs and IR panes), ``recorded``
(artefacts recorded on a GPU machine), ``env`` (what this machine has), ``compat`` (the one
place that touches private torch/triton APIs), ``doctor()``.

Importing course_lib is cheap: subpackages load on first use, and no torch import happens here.
It does set Triton's mode (interpreter when there is no GPU) before anything imports triton.
"""

from __future__ import annotations

import importlib

from course_lib import env as env

env.configure_triton()

_SUBMODULES = {
    "aot", "check", "compat", "cpu", "decomp", "doctor_report", "dynamo", "fake", "fx", "gpu",
    "inductor", "ir", "llvm", "recorded", "triton", "viz",
}  # fmt: skip

__all__ = sorted(_SUBMODULES | {"doctor", "env"})


def doctor(*, show: bool = True):
    """Report versions, tools, and the mode the labs will run in, with what to do if missing.

    The first cell of every notebook calls this. Returns the :class:`DoctorReport`.
    """
    from course_lib.doctor_report import run

    report = run()
    if show and not _in_ipython():
        print(report)  # in Jupyter the returned object renders itself as a table
    return report


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"course_lib.{name}")
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")
