"""Where Triton's LLVM IR comes from: MLIR dialects, lowered step by step to the LLVM dialect.

Teaches: Triton's ``python/triton/compiler/compiler.py`` and
``third_party/nvidia/backend/compiler.py`` (stages ``make_ttir``, ``make_ttgir``,
``make_llir``, ``make_ptx``), MLIR's dialect idea (``tt.*`` Triton ops, ``arith.*``,
``scf.*``, ``ttg.*`` with layouts, then ``llvm.*``), and ``mlir/lib/Target/LLVMIR`` (the
*translation* from the ``llvm`` dialect, still MLIR, to real LLVM IR, after which the NVPTX
back end of :mod:`course_lib.llvm.targets` takes over). Position: Python kernel -> TTIR ->
TTGIR -> LLVM dialect -> LLVM IR -> PTX.

All of it runs without a GPU. There is one Triton pipeline in the course,
:func:`course_lib.triton.compile_stages` (Module 3); this module is Module 2's view of it:
the same compile, read as a walk through MLIR dialects (:meth:`TritonStages.dialects`).
"""

from __future__ import annotations

import dataclasses
import re

from course_lib.triton.compile import compile_stages as _triton_compile_stages

# Module 3's vector add: one program handles BLOCK elements.
from course_lib.triton.kernels import SIGNATURES, add_kernel

ADD_SIGNATURE = SIGNATURES["add"][1]

#: the stages Module 2 reads, in pipeline order
MLIR_STAGES = ("ttir", "ttgir", "llvm_dialect", "llir", "ptx")


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


def compile_stages(kernel=add_kernel, signature=None, constexprs=None, arch: int = 90) -> TritonStages:
    """Compile ``kernel`` for ``sm_<arch>`` through :func:`course_lib.triton.compile_stages` and
    keep the MLIR-side stages and the names of the MLIR passes that ran (no GPU needed)."""
    signature = signature or ADD_SIGNATURE
    constexprs = constexprs if constexprs is not None else {"BLOCK": 256}
    result = _triton_compile_stages(kernel, signature, constexprs, target=f"sm_{arch}", passes=True)
    return TritonStages({k: result[k] for k in MLIR_STAGES}, result.pass_names())
