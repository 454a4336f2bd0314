"""Reading Inductor's C++: its vectorised loops, ``at::vec::Vectorized`` types, SLEEF calls, OpenMP.

Inductor's C++ backend (``torch/_inductor/codegen/cpp.py``: ``CppKernel`` for scalar loops,
``CppVecKernel`` for vector loops, ``CppKernelProxy`` choosing between them) does not hope
that gcc vectorises its loops. It writes the vector code itself against ATen's portable SIMD
layer ``at::vec`` (``aten/src/ATen/cpu/vec/``): ``Vectorized<float>::loadu`` is one unaligned
vector load, ``tmp.exp()`` a vector exp, ``store`` a vector store, and the loop steps by the
vector's lane count (8 for AVX2, 16 for AVX-512). ATen implements ``exp``/``tanh``/``log`` on
those types by calling SLEEF (``Sleef_expf8_u10``: 8 floats, 1.0 ULP), a vector math library.

This module finds those pieces in real Inductor output (obtained through
``course_lib.compat.inductor_run_and_get_code``) and follows each vector method into the
installed ATen header to name the SLEEF function it calls.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re

_STEP = re.compile(r"for\s*\(\s*int64_t\s+(\w+)\s*=.*?;\s*\1\s*\+=\s*static_cast<int64_t>\((\d+)L\)\)")
_METHOD = re.compile(r"\btmp\d+\.(\w+)\(\)")
_SLEEF = re.compile(r"\bSleef_\w+")
# Rule table: CPU capability (torch.backends.cpu.get_cpu_capability()) -> float header.
VEC_HEADERS = {
    "AVX512": "ATen/cpu/vec/vec512/vec512_float.h",
    "AVX2": "ATen/cpu/vec/vec256/vec256_float.h",
    "SVE256": "ATen/cpu/vec/sve/vec_float.h",
    "NEON": "ATen/cpu/vec/vec128/vec128_float_neon.h",
}


@dataclasses.dataclass(frozen=True)
class CppKernel:
    """One C++ kernel from Inductor's output code."""

    name: str
    source: str

    @property
    def pragmas(self) -> list[str]:
        """The ``#pragma omp ...`` lines, in order."""
        return [ln.strip() for ln in self.source.splitlines() if ln.strip().startswith("#pragma")]

    @property
    def vector_lines(self) -> list[str]:
        """Lines that use ``at::vec`` types (loads, broadcasts, conversions)."""
        return [ln.strip() for ln in self.source.splitlines() if "at::vec::" in ln]

    @property
    def loop_steps(self) -> list[int]:
        """The step of each ``for`` loop: 8 on AVX2 marks the vector loop, 1 a scalar tail."""
        return [int(m[2]) for m in _STEP.finditer(self.source)]

    @property
    def vector_methods(self) -> list[str]:
        """Methods called on temporaries (``tmp1.exp()`` -> ``exp``), first use order."""
        return list(dict.fromkeys(_METHOD.findall(self.source)))


@dataclasses.dataclass(frozen=True)
class InductorCpp:
    """Inductor's output for one function: the wrapper module and its C++ kernels."""

    wrapper: str
    kernels: list[CppKernel]


def parse_output_code(code: str) -> InductorCpp:
    """Pull every ``cpp_fused_*`` kernel's C++ out of Inductor's Python output module."""
    from course_lib import compat

    kernels = [CppKernel(n, src) for n, kind, src in compat.inductor_code_kernels(code) if kind.startswith("cpp")]
    return InductorCpp(code, kernels)


def inductor_cpp(fn, *args) -> InductorCpp:
    """Compile ``fn`` with torch.compile on CPU and return its C++ kernels (runs Inductor)."""
    from course_lib import compat

    _, codes = compat.inductor_run_and_get_code(fn, *args)
    return parse_output_code("\n".join(codes))


def cpu_capability() -> str:
    """The ISA ATen dispatches to on this machine: ``"AVX2"``, ``"AVX512"``, ``"DEFAULT"``..."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def vec_header(capability: str | None = None) -> pathlib.Path | None:
    """The installed ATen header defining ``Vectorized<float>`` for ``capability``."""
    import torch.utils.cpp_extension

    rel = VEC_HEADERS.get(capability or cpu_capability())
    if rel is None:
        return None
    for inc in torch.utils.cpp_extension.include_paths():
        path = pathlib.Path(inc) / rel
        if path.exists():
            return path
    return None


def method_body(header_text: str, method: str) -> str | None:
    """The body of ``Vectorized<float> method() const { ... }`` in an ATen header (brace matched)."""
    m = re.search(rf"Vectorized<float>\s+{re.escape(method)}\s*\(\s*\)\s*const\s*\{{", header_text)
    if not m:
        return None
    depth, i = 1, m.end()
    while depth and i < len(header_text):
        depth += {"{": 1, "}": -1}.get(header_text[i], 0)
        i += 1
    return header_text[m.start() : i]


@functools.cache
def _header_text(path: str) -> str:
    return pathlib.Path(path).read_text()


def sleef_calls(methods, capability: str | None = None) -> dict[str, str]:
    """For each vector method, the SLEEF function its ATen implementation calls (or a note).

    ``{"exp": "Sleef_expf8_u10", "tanh": "Sleef_tanhf8_u10"}`` on AVX2. Methods implemented
    with plain intrinsics (``abs``, ``sqrt``...) map to ``"(intrinsics, no SLEEF)"``.
    """
    header = vec_header(capability)
    if header is None:
        return {m: "(no vectorised header for this CPU)" for m in methods}
    text = _header_text(str(header))
    out = {}
    for method in methods:
        body = method_body(text, method)
        if body is None:
            out[method] = "(inherited from vec_base.h)"
            continue
        calls = _SLEEF.findall(body)
        out[method] = calls[0] if calls else "(intrinsics, no SLEEF)"
    return out


def annotate(kernel: CppKernel, capability: str | None = None) -> str:
    """The kernel's C++ with a comment on each vector line: what it is, and SLEEF calls."""
    sleef = sleef_calls(kernel.vector_methods, capability)
    out = []
    for line in kernel.source.splitlines():
        note = ""
        s = line.strip()
        if s.startswith("#pragma omp"):
            note = "OpenMP: threads share this loop"
        elif "::loadu(" in s:
            note = "vector load (unaligned)"
        elif re.search(r"\.store\(", s):
            note = "vector store"
        elif (m := _METHOD.search(s)) and m[1] in sleef:
            note = f"vector {m[1]} -> {sleef[m[1]]}"
        elif _STEP.search(s):
            steps = _STEP.search(s)[2]
            note = f"steps by {steps}: {'vector' if int(steps) > 1 else 'scalar'} loop"
        out.append(f"{line}  // <<< {note}" if note else line)
    return "\n".join(out)


def course_cpp(fn, *args) -> str | None:
    """course_lib.inductor's (Module 4) C++ for ``fn``, or None when that package is absent or fails.

    Uses its ``compile_fx`` as the torch.compile backend and its ``record`` hook, which keeps
    each compiled graph's ``kernel_code``.
    """
    try:
        import functools

        import torch

        from course_lib import inductor as course_inductor

        record: list = []
        torch.compiler.reset()
        torch.compile(fn, backend=functools.partial(course_inductor.compile_fx, record=record))(*args)
        torch.compiler.reset()
    except Exception:  # noqa: BLE001 - Module 4 missing or unable: the notebook says so
        return None
    codes = [entry[1].kernel_code for entry in record if entry[0] == "compiled"]
    return codes[0] if codes else None


RECORDED = "cpu/inductor_fused_tanh_exp.py.txt"


def inductor_cpp_or_recorded(fn, *args) -> tuple[InductorCpp, str]:
    """Live Inductor output for ``fn`` or, when torch.compile fails here, the recorded one.

    Returns ``(output, where)`` with ``where`` = ``"live"`` or a sentence naming the recording.
    """
    try:
        return inductor_cpp(fn, *args), "live"
    except Exception as exc:  # noqa: BLE001 - no compiler, broken toolchain...
        from course_lib import env

        path = env.data_dir() / RECORDED
        if not path.exists():
            raise
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
        return parse_output_code(path.read_text()), f"recorded (data/{RECORDED}; live compile failed: {reason})"


# ----------------------------------------------------------------------------- what "fast math" means to gcc
# The switches -ffast-math groups (GCC manual, "Options That Control Optimization"); gcc prints
# the state each ends in for a given command line with ``-Q --help=optimizers,common``.
MATH_SWITCHES = ("math-errno", "trapping-math", "signed-zeros", "finite-math-only", "associative-math",
                 "reciprocal-math", "unsafe-math-optimizations", "fp-contract", "excess-precision")  # fmt: skip


def gcc_math_state(flags: list[str], compiler: str = "gcc") -> dict[str, str] | None:
    """Final state of each of :data:`MATH_SWITCHES` after ``-O3 <flags>``, as gcc reports it.

    Later flags override earlier ones, and some flags set several switches at once (in gcc's
    ``opts.cc``, ``-fno-unsafe-math-optimizations`` turns trapping math and signed zeros back on),
    so the list must be read as a whole. None when the compiler is missing.
    """
    import re
    import shutil
    import subprocess

    if shutil.which(compiler) is None:
        return None
    out = subprocess.run([compiler, "-O3", *flags, "-Q", "--help=optimizers,common"], capture_output=True,
                         text=True, check=False).stdout  # fmt: skip
    state = {}
    for name in MATH_SWITCHES:
        m = re.search(rf"^\s+-f{re.escape(name)}(?:=\S*)?\s+(\S+)", out, re.M)
        state[name] = m.group(1).strip("[]") if m else "?"
    return state
