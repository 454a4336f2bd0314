"""Where Triton's LLVM IR comes from: MLIR dialects, lowered step by step to the LLVM dialect.

Teaches: Triton's ``python/triton/compiler/compiler.py`` and
``third_party/nvidia/backend/compiler.py`` (stages ``make_ttir``, ``make_ttgir``,
``make_llir``, ``make_ptx``), MLIR's dialect idea (``tt.*`` Triton ops, ``arith.*``,
``scf.*``, ``ttg.*`` with layouts, then ``llvm.*``), and ``mlir/lib/Target/LLVMIR`` (the
*translation* from the ``llvm`` dialect, still MLIR, to real LLVM IR, after which the NVPTX
back end of :mod:`course_lib.llvm.targets` takes over). Position: Python kernel -> TTIR ->
TTGIR -> LLVM dialect -> LLVM IR -> PTX.

All of it runs without a GPU: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``
compiles for an H100 on any machine. The LLVM-dialect module is not one of Triton's kept
stages; we get it from MLIR's own IR printing (``MLIR_ENABLE_DUMP=1``), which writes the module
before every MLIR pass to stderr: the last dump is the LLVM dialect just before translation.
Module 3 (``course_lib.triton``) covers the Triton pipeline in depth.
"""

from __future__ import annotations

import dataclasses
import os
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from course_lib.llvm import passes
# The same clean-up of debug info that Module 3 applies to its stages.
from course_lib.triton.compile import _strip_llir, _strip_ptx, strip_locations  # noqa: F401


# Module 3's vector add: one program handles BLOCK elements.
from course_lib.triton.kernels import SIGNATURES, add_kernel  # noqa: E402

ADD_SIGNATURE = SIGNATURES["add"][1]


@dataclasses.dataclass
class TritonStages:
    """Every IR of one compile: ``ttir``, ``ttgir``, ``llvm_dialect``, ``llir``, ``ptx``; ``passes`` run."""

    stages: dict[str, str]
    mlir_passes: list[str]

    def __getitem__(self, key: str) -> str:
        return self.stages[key]

    def dialects(self, key: str) -> list[str]:
        """The MLIR dialects whose operations appear in stage ``key`` (``tt``, ``arith``, ``llvm``...)."""
        return sorted(
            set(re.findall(r"= ([a-z_]+)\.[a-z_]+", self.stages[key]))
            | set(re.findall(r"^\s+([a-z_]+)\.[a-z_]+ ", self.stages[key], re.M))
        )


def _as_jit(kernel) -> JITFunction:
    # Under TRITON_INTERPRET=1 (no GPU) @triton.jit gives an interpreter wrapper; the compiler
    # needs the JITFunction of the same Python function (compat: an interpreter internal).
    from course_lib import compat

    return compat.triton_jit_function(kernel)


_DUMP = re.compile(r"^// -----// IR Dump (?:Before|After) (\w+).*$", re.M)


def compile_stages(kernel=add_kernel, signature=None, constexprs=None, arch: int = 90) -> TritonStages:
    """Compile ``kernel`` for ``sm_<arch>`` with Triton and keep every stage (no GPU needed)."""
    signature = signature or ADD_SIGNATURE
    constexprs = constexprs if constexprs is not None else {"BLOCK": 256}
    src = ASTSource(fn=_as_jit(kernel), signature=signature, constexprs=constexprs)
    saved = {k: os.environ.get(k) for k in ("MLIR_ENABLE_DUMP", "TRITON_ALWAYS_COMPILE")}
    os.environ.update(MLIR_ENABLE_DUMP="1", TRITON_ALWAYS_COMPILE="1")
    import course_lib.triton  # noqa: F401  (installs the interpreter fixes the compiler needs)
    from course_lib import compat

    try:
        with compat.triton_compile_scope(kernel):  # library calls (tl.max, ...) as real JITFunctions
            compiled, err = passes.capture_stderr(lambda: triton.compile(src, target=GPUTarget("cuda", arch, 32)))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    heads = list(_DUMP.finditer(err))
    llvm_dialect = err[heads[-1].end() :] if heads else ""
    stages = {
        "ttir": strip_locations(compiled.asm["ttir"]),
        "ttgir": strip_locations(compiled.asm["ttgir"]),
        "llvm_dialect": strip_locations(llvm_dialect),
        "llir": _strip_llir(compiled.asm["llir"]),
        "ptx": _strip_ptx(compiled.asm["ptx"]),
    }
    return TritonStages(stages, [m.group(1) for m in heads])
