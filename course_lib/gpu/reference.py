"""The reference kernels' PTX, compiled by Triton for sm_90a (and sm_80 for the matmul), stored in data/gpu/ptx/.

``data/gpu/ptx/generate_ptx.py`` holds the Triton sources and regenerates the files (it needs
no GPU: ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``); ``kernels.json``
records each kernel's launch shape and the registers ptxas assigns.
"""

from __future__ import annotations

import json

from course_lib import env


def ptx(name: str) -> str:
    """PTX text of a stored kernel, e.g. ``ptx("row_softmax")``."""
    return (env.data_dir() / "gpu" / "ptx" / f"{name}.ptx").read_text()


def kernels() -> dict:
    """Metadata of the stored kernels (kernel name, arch, num_warps, shared bytes, registers)."""
    return json.loads((env.data_dir() / "gpu" / "ptx" / "kernels.json").read_text())
