"""Module 3: Triton. Kernels, memory-access tracing, and the compiler pipeline with no GPU.

Teaches (real files): ``python/triton/runtime/jit.py`` (``@triton.jit``, launching),
``python/triton/runtime/interpreter.py`` (``TRITON_INTERPRET=1``: kernels run in numpy),
``python/triton/compiler/compiler.py`` (the stage list), ``third_party/nvidia/backend/compiler.py``
and ``third_party/amd/backend/compiler.py`` (the passes of each stage),
``lib/Dialect/TritonGPU/IR/LinearLayoutConversions.cpp`` (layouts) and
``python/triton/runtime/autotuner.py`` (``triton.autotune``).

Submodules: ``compile`` (:func:`compile_stages`), ``kernels`` (reference kernels and their
launchers), ``trace`` (which program touched which element), ``sourcemap`` (IR line -> Python
line), ``layouts`` (``#blocked`` ownership), ``tune`` (autotuning with a cost model and
recorded H200 timings).
"""

from __future__ import annotations

import course_lib  # noqa: F401  (sets TRITON_INTERPRET before triton is imported)
from course_lib import env as _env

if _env.triton_interpreted():
    from course_lib import compat as _compat

    _compat.triton_interpreter_scoped_device_calls()  # interpreted launches must not break triton.compile

from course_lib.triton.compile import TARGETS, Stages, compile_stages, instruction_mix, ptx_mix

__all__ = ["TARGETS", "Stages", "compile_stages", "instruction_mix", "ptx_mix"]
