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
import dataclasses
import inspect
import math
import random
import re

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


def compile_fused(target: str = "sm_90", block: int = 32, num_warps: int = 4, aligned: bool = False):
    """Every compiler stage of :func:`fused_gelu_rowsum` for ``target``, with no GPU needed.

    ``aligned=True`` compiles as ``@triton.jit`` does for a launch whose pointers are 16-byte
    aligned and whose ``n_cols`` / ``stride_row`` are multiples of 16 (vector loads allowed).
    """
    from course_lib.triton import compile_stages

    return compile_stages(fused_gelu_rowsum, FUSED_SIGNATURE, {"BLOCK": block}, target=target,
                          num_warps=num_warps, aligned=aligned)  # fmt: skip


# ----------------------------------------------------------------------------- exercise cases
# What the tour's checks run the learner's code on, and the oracles they compare with. The
# oracles are guarded in the notebook (``guard=``): a learner's answer may not call them.

_GLOBAL_CONSTANTS = ("SCALE", "OFFSET", "EPS")


@dataclasses.dataclass(frozen=True)
class BytecodeCase:
    """A generated function, its source, and the globals it reads (known from how it was built)."""

    fn: object
    source: str
    reads: frozenset


def bytecode_case(seed: int) -> BytecodeCase:
    """A random small function built from statements whose global reads are known by construction.

    The traps: attribute and method names (``torch.relu``, ``t0.sum()``) sit in ``co_names`` but
    are not globals; ``COUNT = ...`` under ``global COUNT`` stores a global without reading it;
    ``TOTAL += ...`` reads it; builtins (``abs``, ``len``, ``max``) are read like globals.
    """
    rng = random.Random(seed)
    params = ["a", "b", "c"][: rng.randint(1, 3)]
    values, reads, lines, declared = list(params), set(), [], []

    def atom() -> str:
        if rng.random() < 0.25:
            name = rng.choice(_GLOBAL_CONSTANTS)
            reads.add(name)
            return name
        return rng.choice(values) if rng.random() < 0.85 else str(rng.randint(1, 9))

    forms = (
        lambda: f"{atom()} {rng.choice('+-*')} {atom()}",
        lambda: (reads.add("torch"), f"torch.relu({atom()})")[1],
        lambda: (reads.add("torch"), f"torch.nn.functional.gelu({atom()})")[1],
        lambda: (reads.update(("math", "abs")), f"math.sqrt(abs({atom()}))")[1],
        lambda: f"{rng.choice(values)}.sum()",
        lambda: f"{rng.choice(values)}.clamp(min=0).mean()",
        lambda: (reads.add("len"), f"len({atom()})")[1],
        lambda: (reads.add("max"), f"max({atom()}, {atom()})")[1],
    )
    for k in range(rng.randint(2, 5)):
        roll = rng.random()
        if roll < 0.12 and "COUNT" not in declared:
            declared.append("COUNT")
            lines.append(f"COUNT = {rng.choice(forms)()}")  # a store: not a read
        elif roll < 0.22 and "TOTAL" not in declared:
            declared.append("TOTAL")
            reads.add("TOTAL")
            lines.append(f"TOTAL += {rng.choice(forms)()}")  # load, add, store
        else:
            lines.append(f"t{k} = {rng.choice(forms)()}")
            values.append(f"t{k}")
    lines.append(f"return {values[-1]}")
    if declared:
        lines.insert(0, "global " + ", ".join(declared))
    name = f"generated_{seed}"
    source = f"def {name}({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in lines)
    namespace = {"torch": torch, "math": math, "SCALE": 2.0, "OFFSET": 1.0, "EPS": 1e-5,
                 "COUNT": 0, "TOTAL": 0}  # fmt: skip
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return BytecodeCase(namespace[name], source, frozenset(reads))


def bytecode_cases(count: int = 30, seed: int = 0) -> list[BytecodeCase]:
    """``model`` (it reads only ``torch``) and ``count - 1`` generated functions."""
    return [BytecodeCase(model, inspect.getsource(model), frozenset({"torch"}))] + [
        bytecode_case(seed + k) for k in range(count - 1)
    ]


_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
CHANGES = ("new values", "batch size m", "inner size k", "output size n", "dtype",
           "x.requires_grad", "w.requires_grad", "b.requires_grad", "x transposed in memory")  # fmt: skip


def _model_args(m, k, n, dtype, grads, transposed, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(dtype)
    if transposed:  # same shape and values, column-major strides
        x = x.t().contiguous().t()
    w = torch.randn(k, n, generator=g).to(dtype)
    b = torch.randn(n, generator=g).to(dtype)
    return tuple(t.requires_grad_(r) for t, r in zip((x, w, b), grads))


def recompile_cases(count: int = 24, seed: int = 0) -> tuple[list[str], list[tuple[tuple, tuple]]]:
    """Pairs of argument tuples ``(first call, second call)`` for :func:`model`, and a label each.

    Every change of :data:`CHANGES` appears alone once, then new values only or two random changes; sizes are
    2..9 (size 0 and 1 are special cases for Dynamo's shape guards), all on the CPU.
    """
    rng = random.Random(seed)
    labels, pairs = [], []
    for i in range(count):
        if i < len(CHANGES):
            picked = [CHANGES[i]]
        else:  # a third of the rest change nothing a guard could see
            picked = ["new values"] if rng.random() < 1 / 3 else rng.sample(CHANGES[1:], 2)
        m, k, n = (rng.randint(2, 6) for _ in range(3))
        dtype, grads = rng.choice(_DTYPES), [rng.random() < 0.3 for _ in range(3)]
        first = _model_args(m, k, n, dtype, grads, False, 2 * i)
        m2 = m + rng.randint(1, 3) if "batch size m" in picked else m
        k2 = k + rng.randint(1, 3) if "inner size k" in picked else k
        n2 = n + rng.randint(1, 3) if "output size n" in picked else n
        dtype2 = rng.choice([d for d in _DTYPES if d != dtype]) if "dtype" in picked else dtype
        grads2 = [r != (f"{name}.requires_grad" in picked) for r, name in zip(grads, "xwb")]
        second = _model_args(m2, k2, n2, dtype2, grads2, "x transposed in memory" in picked, 2 * i + 1)
        labels.append(f"pairs[{i}] (second call: {', '.join(picked)})")
        pairs.append((first, second))
    return labels, pairs


def dynamo_compiles(fn, *calls: tuple) -> int:
    """How many graphs the real Dynamo hands to a backend when ``fn`` is called with each of ``calls``.

    Dynamo is reset before (a cold cache) and after; the backend counts and runs the graph as is.
    """
    compiled_graphs = []

    def counting_backend(gm, example_inputs):
        compiled_graphs.append(gm)
        return gm.forward

    compat.dynamo_reset()
    try:
        compiled = torch.compile(fn, backend=counting_backend)
        for args in calls:
            compiled(*args)
    finally:
        compat.dynamo_reset()
    return len(compiled_graphs)


PTX_CASES = ((32, 4, False), (256, 4, False), (1024, 4, False), (256, 4, True), (1024, 4, True),
             (1024, 1, True), (4096, 4, True))  # fmt: skip
"""(BLOCK, num_warps, aligned) the PTX exercise compiles :func:`fused_gelu_rowsum` at."""

_LDG = re.compile(r"\bLDG\b(?:\.\w+)*")


def sass_global_loads(sass: str) -> tuple[int, int]:
    """``(load instructions, 32-bit values loaded)`` per thread, read from ptxas's SASS.

    ``LDG.E`` loads 32 bits, ``LDG.E.64`` 64, ``LDG.E.128`` 128; this is the oracle the PTX
    exercise is compared with (another tool's output, not the PTX text).
    """
    instructions = values = 0
    for line in sass.splitlines():
        for op in _LDG.findall(line.split(";")[0]):
            bits = next((int(p) for p in op.split(".")[1:] if p.isdigit()), 32)
            instructions, values = instructions + 1, values + bits // 32
    return instructions, values


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
