"""The tour (notebook 00): one small function followed through the real PyTorch 2 stack.

``model(x, w, b) = gelu(x @ w + b).sum(-1)`` has the three kinds of work every later module
meets: a matmul (an extern call to a BLAS library), pointwise ops (bias add, GELU) and a
reduction (the row sum). The tour shows what each real stage makes of it:

    Python source -> bytecode (dis) -> Dynamo's FX graph and guards -> AOT Autograd's forward
    and backward graphs -> the decomposed ATen graph -> Inductor's C++ -> a Triton kernel for
    the fused GELU + row sum -> TTIR -> TTGIR -> LLVM IR -> PTX -> SASS (and AMDGCN)

The helpers here are the small pieces of glue the notebook needs; each stage itself is the real
tool (through :mod:`course_lib.compat`) or a course_lib module.
"""

from __future__ import annotations

import collections

import torch
import triton
import triton.language as tl

import course_lib.triton  # noqa: F401  (its interpreter fixes must be in place before any launch)
from course_lib import compat


def model(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A matmul, two pointwise ops and a reduction: ``gelu(x @ w + b).sum(-1)``."""
    h = x @ w + b
    return torch.nn.functional.gelu(h).sum(dim=-1)


def make_inputs(m: int = 8, k: int = 16, n: int = 32, requires_grad: bool = False, seed: int = 0):
    """Seeded inputs ``(x[m, k], w[k, n], b[n])``; ``w`` and ``b`` are the parameters."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g)
    w = (torch.randn(k, n, generator=g) / k**0.5).requires_grad_(requires_grad)
    b = torch.randn(n, generator=g).requires_grad_(requires_grad)
    return x, w, b


# ----------------------------------------------------------------------------- FX helpers


def op_counts(gm) -> dict[str, int]:
    """How many times each ``call_function`` target appears in an FX graph, by name."""
    g = getattr(gm, "graph", gm)
    return dict(collections.Counter(str(n.target) for n in g.nodes if n.op == "call_function"))


def saved_tensors(forward_gm, num_outputs: int = 1) -> list[str]:
    """Names of the tensors AOT Autograd's forward graph returns for the backward.

    The forward returns the user's outputs first, then everything the backward needs.
    """
    out = next(n for n in forward_gm.graph.nodes if n.op == "output")
    values = out.args[0]
    return [v.name for v in values[num_outputs:]]


def backward_inputs(backward_gm) -> list[str]:
    """Placeholder names of the backward graph that are not incoming gradients (tangents)."""
    return [n.name for n in backward_gm.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]


# ----------------------------------------------------------------------------- Inductor output


def inductor_kernels(code: str) -> list[str]:
    """Names of the kernels Inductor generated in one output-code module."""
    return [name for name, _, _ in compat.inductor_code_kernels(code)]


def inductor_externs(code: str) -> list[str]:
    """Library calls (``extern_kernels.addmm`` ...) the wrapper makes instead of generating code."""
    return compat.inductor_code_externs(code)


def inductor_kernel_sources(code: str) -> list[str]:
    """The generated C++ (or Triton) source of each kernel, in order."""
    return [src for _, _, src in compat.inductor_code_kernels(code)]


def inductor_wrapper_call(code: str) -> str:
    """The body of the wrapper's ``call`` method: allocations, extern calls, kernel launches."""
    return compat.inductor_code_wrapper_call(code)


# ----------------------------------------------------------------------------- Triton


@triton.jit
def fused_gelu_rowsum(h_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    """out[row] = sum_j gelu(h[row, j]): the part of ``model`` that Inductor fuses.

    One program per row; the row is loaded as one block of BLOCK lanes (masked past n_cols),
    GELU is computed with erf like aten.gelu's default, and tl.sum reduces the block.
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    h = tl.load(h_ptr + row * stride_row + cols, mask=mask, other=0.0)
    g = 0.5 * h * (1.0 + tl.erf(h * 0.7071067811865476))
    tl.store(out_ptr + row, tl.sum(g, axis=0))


FUSED_SIGNATURE = {"h_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride_row": "i32", "BLOCK": "constexpr"}


def run_fused(h: torch.Tensor) -> torch.Tensor:
    """Launch :func:`fused_gelu_rowsum` on ``h`` (interpreter on CPU, native on a GPU)."""
    h = h.contiguous()
    out = torch.empty(h.shape[0], dtype=h.dtype, device=h.device)
    block = triton.next_power_of_2(h.shape[1])
    fused_gelu_rowsum[(h.shape[0],)](h, out, h.shape[1], h.stride(0), BLOCK=block)
    return out


def compile_fused(target: str = "sm_90", block: int = 32):
    """Every compiler stage of :func:`fused_gelu_rowsum` for ``target``, with no GPU needed."""
    from course_lib.triton import compile_stages

    return compile_stages(fused_gelu_rowsum, FUSED_SIGNATURE, {"BLOCK": block}, target=target)


# ----------------------------------------------------------------------------- the map

STAGES = (
    ("Python source, bytecode", "4 (Dynamo)", "course_lib.dynamo", "CPython: Python/ceval.c, Lib/dis.py"),
    ("Dynamo: FX graph + guards", "4 (Dynamo, FX)", "course_lib.dynamo, course_lib.fx",
     "torch/_dynamo/symbolic_convert.py, torch/_dynamo/guards.py"),
    ("AOT Autograd: forward/backward graphs", "4 (AOT)", "course_lib.aot", "torch/_functorch/aot_autograd.py, partitioners.py"),
    ("Decomposed ATen graph", "4 (decompositions)", "course_lib.decomp, course_lib.fake", "torch/_decomp/decompositions.py"),
    ("Inductor: loop IR, fusion, C++", "4 (Inductor), 6 (CPU)", "course_lib.inductor, course_lib.cpu",
     "torch/_inductor/lowering.py, scheduler.py, codegen/cpp.py"),
    ("Triton kernel -> TTIR -> TTGIR", "3 (Triton)", "course_lib.triton", "triton/compiler/compiler.py, lib/Dialect/TritonGPU"),
    ("LLVM IR -> PTX / AMDGCN", "2 (LLVM)", "course_lib.llvm", "llvm/lib/Target/NVPTX, llvm/lib/Target/AMDGPU"),
    ("PTX -> SASS, warps, memory", "5 (GPU)", "course_lib.gpu", "ptxas; the CUDA programming guide"),
    ("Why any of it is correct", "1 (compiler theory)", "course_lib.ir", "SSA, dataflow, loops, register allocation"),
)  # fmt: skip
