"""Run LLVM IR on this CPU: MCJIT compiles a module to machine code in memory, ctypes calls it.

Teaches: ``llvm/lib/ExecutionEngine/MCJIT/MCJIT.cpp`` (the JIT llvmlite wraps) and what a JIT
is: the same back end as ``llc``, writing into executable memory instead of a ``.o`` file.
Position: LLVM IR -> a Python callable.

:func:`compile_function` is the general tool; :func:`course_lib.llvm.jit` (in ``lowering.py``)
lowers a course-IR function first and picks the ctypes signature from its types.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Sequence

import llvmlite.binding as llvm

from course_lib.llvm import passes

CTYPES = {"i1": ctypes.c_bool, "i8": ctypes.c_int8, "i32": ctypes.c_int32, "i64": ctypes.c_int64,
          "float": ctypes.c_float, "double": ctypes.c_double, "ptr": ctypes.c_void_p, "void": None}  # fmt: skip


@dataclasses.dataclass
class JitFunction:
    """A compiled function; calling it calls the machine code. Keeps its engine alive."""

    name: str
    cfunc: object
    engine: object
    module: object
    ir: str

    def __call__(self, *args):
        return self.cfunc(*args)

    def __repr__(self) -> str:
        return f"JitFunction({self.name})"


def compile_function(llvm_ir, name: str, restype: str, argtypes: Sequence[str], level: int = 2) -> JitFunction:
    """Optimise ``llvm_ir`` at ``O<level>``, JIT it, and return a callable for function ``name``.

    ``restype`` / ``argtypes`` are LLVM type names (``"i64"``, ``"double"``, ``"ptr"``...).
    """
    tm = passes.host_target_machine(opt=level, jit=True)
    mod = passes.optimize(llvm_ir, level, tm=tm) if level > 0 else passes.parse(llvm_ir)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    engine.run_static_constructors()
    address = engine.get_function_address(name)
    if not address:
        raise KeyError(f"no function {name!r} in the module")
    proto = ctypes.CFUNCTYPE(CTYPES[restype], *[CTYPES[a] for a in argtypes])
    return JitFunction(name, proto(address), engine, mod, str(mod))
