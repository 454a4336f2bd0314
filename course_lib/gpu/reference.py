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


# A hand-written kernel (Triton rarely emits a divergent branch: it predicates instead). Even
# lanes take one path, odd lanes the other, and both meet again at DONE before the store.
DIVERGENT_PTX = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry divergent(.param .u64 out_ptr)
{
    .reg .pred  %p<2>;
    .reg .b32   %r<4>;
    .reg .b64   %rd<4>;
    ld.param.u64    %rd1, [out_ptr];
    mov.u32         %r1, %tid.x;
    and.b32         %r2, %r1, 1;
    setp.eq.s32     %p1, %r2, 0;
    @%p1 bra        EVEN;
    add.s32         %r3, %r1, 100;      // odd lanes: i + 100
    bra.uni         DONE;
EVEN:
    shl.b32         %r3, %r1, 1;        // even lanes: i * 2
DONE:
    mul.wide.u32    %rd2, %r1, 4;
    add.s64         %rd3, %rd1, %rd2;
    st.global.u32   [%rd3], %r3;
    ret;
}
"""
