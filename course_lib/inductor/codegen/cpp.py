"""C++/OpenMP code generation from kernel plans, built with gcc and loaded with ctypes.

Teaches ``torch/_inductor/codegen/cpp.py`` (``CppKernel``, ``CppOverrides``: one C++
expression per ``ops.*`` op) and ``torch/_inductor/codecache.py`` (``CppCodeCache``: the
source is hashed, compiled once, and the shared object loaded from the cache afterwards).

Dynamic shapes: a size that is a symbol (``s0``) becomes a kernel argument ``const int64_t ks0``
and loop bounds and indices are printed in terms of it, so one ``.so`` serves every size.

Position: :class:`KernelPlan` -> C++ source (one ``extern "C"`` function per kernel) -> ``.so``.

Before printing, neighbouring loops that walk memory as one are merged
(:func:`~course_lib.inductor.codegen.common.simplify_loops`, Inductor's ``_simplify_loops``),
so a ``[N, C, H, W]`` kernel has one inner loop of ``H*W``. The outer loop carries
``#pragma omp parallel for`` when the kernel has enough work (:data:`PARALLEL_THRESHOLD`,
Inductor's ``decide_parallel_depth``); the innermost loop carries ``#pragma omp simd`` (with a
``reduction`` clause for accumulators), which lets gcc -O3 vectorise it without -ffast-math.
Inductor instead emits explicit ``at::vec::Vectorized<float>`` code and tails.
A float sum over a long reduction loop is blocked (:data:`SUM_CHUNK`): a fresh partial sum per
chunk of the loop, added into the total, so rounding error grows with the chunk and the number
of chunks rather than with the whole length (Inductor's ``CascadeSumHelper``, ATen's cascade sum).
Every intermediate value is a scalar ``tmpN`` (common subexpressions computed once per loop
level); values that do not depend on the inner loop are hoisted above it.
"""

from __future__ import annotations

import ctypes
import functools
import math
import subprocess

import sympy

from course_lib.inductor.codegen.common import Kernel, Scope, depends_on, pointer_names, simplify_loops  # noqa: F401
from course_lib.inductor.ir import FLOATING, Const, IndexValue, Load, Op, nodes, walk
from course_lib.inductor.scheduler import KernelPlan
from course_lib.inductor.sizevars import FloorDiv, Max, Min, ModIdx, is_static, kernel_vars, nonnegative, prod

CTYPE = {"float32": "float", "float64": "double", "float16": "uint16_t", "bfloat16": "uint16_t", "int64": "int64_t", "int32": "int32_t", "int16": "int16_t",
         "int8": "int8_t", "uint8": "uint8_t", "bool": "bool"}  # fmt: skip

#: ops.* -> C++ (``CppOverrides``); {t} is the C type of the result.
CPP_RULES = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}",
    "neg": "-{0}", "exp": "std::exp({0})", "log": "std::log({0})", "sqrt": "std::sqrt({0})",
    "rsqrt": "({t})1 / std::sqrt({0})", "tanh": "std::tanh({0})", "erf": "std::erf({0})",
    "sigmoid": "({t})1 / (({t})1 + std::exp(-{0}))", "relu": "std::max({0}, ({t})0)",
    "abs": "std::abs({0})", "reciprocal": "({t})1 / {0}", "sin": "std::sin({0})", "cos": "std::cos({0})",
    "log1p": "std::log1p({0})", "expm1": "std::expm1({0})", "floor": "std::floor({0})", "ceil": "std::ceil({0})",
    "maximum": "max_keep_nan({0}, {1})", "minimum": "min_keep_nan({0}, {1})", "pow": "std::pow({0}, {1})",
    "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}", "ge": "{0} >= {1}", "eq": "{0} == {1}", "ne": "{0} != {1}",
    "logical_not": "!{0}", "logical_and": "{0} && {1}", "logical_or": "{0} || {1}", "bitwise_not": "~{0}",
    "where": "{0} ? {1} : {2}", "fma": "std::fma({0}, {1}, {2})", "to_dtype": "static_cast<{t}>({0})",
}  # fmt: skip

REDUCTION_INIT = {
    "sum": "0",
    "max": "-std::numeric_limits<{t}>::infinity()",
    "min": "std::numeric_limits<{t}>::infinity()",
}
REDUCTION_INIT_INT = {"sum": "0", "max": "std::numeric_limits<{t}>::lowest()", "min": "std::numeric_limits<{t}>::max()"}
REDUCTION_COMBINE = {
    "sum": "{acc} = {acc} + {v};",
    "max": "{acc} = max_keep_nan({acc}, {v});",
    "min": "{acc} = min_keep_nan({acc}, {v});",
}
#: ``omp simd``/``parallel`` reduction clause per reduction; a float max or min combines the lanes'
#: (or threads') values with the header's ``max_keep_nan``, the built-in ``max`` would drop a NaN
OMP_REDUCTION = {"sum": "+", "max": "max", "min": "min"}
OMP_REDUCTION_FLOAT = {**OMP_REDUCTION, "max": "max_keep_nan", "min": "min_keep_nan"}

HEADER = """#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>

// Python's // and % of a size expression that may be negative (-s0 % 128, a padding to a block):
// C's / and % truncate toward 0, Python's floor. Functions rather than inline conditionals, so that
// a nested size expression prints once (Pegasus-X's indices had grown to 245 MB of C++).
#ifndef COURSE_PYDIV
#define COURSE_PYDIV
static inline int64_t course_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t course_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
#endif
// Half-precision floats are kept as their 16 bits (uint16_t) and converted by the functions below,
// written branch-free on plain integers so that the loops around them vectorise: GCC 12 has no
// arithmetic __bf16 (13 does), and its _Float16 converts through a library call per element.
// bfloat16 is the top half of a float32: widened by a shift, narrowed rounding to nearest even with
// a NaN kept a NaN (c10::BFloat16's round_to_nearest_even). float16 follows F. Giesen's conversions
// (half_to_float, float_to_half_fast3_rtne), as c10::Half does. (Guarded: the source repeats this
// header after the precompiled copy was included.)
#ifndef COURSE_HALF
#define COURSE_HALF
static inline float course_bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint32_t course_float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
static inline float course_bf16_to_float(uint16_t b) { return course_bits_to_float(uint32_t(b) << 16); }
static inline uint16_t course_float_to_bf16(float f) {
  uint32_t u = course_float_to_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7fffffffu) > 0x7f800000u ? uint16_t(0x7fc0) : uint16_t(rounded);
}
// (a select as masks: GCC 12 does not if-convert these loops, and a branch a value stalls the loop)
static inline uint32_t course_select(bool take_a, uint32_t a, uint32_t b) {
  uint32_t m = 0u - uint32_t(take_a);
  return (a & m) | (b & ~m);
}
static inline float course_f16_to_float(uint16_t h) {
  uint32_t em = h & 0x7fffu;
  uint32_t normal = (em << 13) + (112u << 23) + course_select(em >= 0x7c00u, 112u << 23, 0u);  // inf, NaN: 255
  uint32_t subnormal = course_float_to_bits(float(em) * 5.9604644775390625e-08f);  // em * 2^-24, exact
  return course_bits_to_float(course_select(em < 0x0400u, subnormal, normal) | (uint32_t(h & 0x8000u) << 16));
}
static inline uint16_t course_float_to_f16(float f) {
  uint32_t u = course_float_to_bits(f);
  uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t inf_nan = course_select(u > (255u << 23), 0x7e00u, 0x7c00u);
  uint32_t subnormal = course_float_to_bits(course_bits_to_float(u) + 0.5f) - (126u << 23);
  uint32_t normal = (u - (112u << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  uint32_t finite = course_select(u < (113u << 23), subnormal, normal);
  return uint16_t(course_select(u >= (143u << 23), inf_nan, finite) | (sign >> 16));
}
#endif

// torch.maximum, torch.minimum, amax and amin give NaN where any input is NaN. std::max does not
// (std::max(1.0f, NAN) is 1), nor does OpenMP's built-in max reduction: its vector maximum keeps
// one operand when the other is NaN. These keep the NaN, and so does the reduction declared with
// them, which combines the loop's vector lanes or threads (ATen's vec::maximum; Inductor's
// max_propagate_nan). For an integer `a != a` is false and this is the plain maximum.
#ifndef COURSE_NAN
#define COURSE_NAN
template <typename T> static inline T max_keep_nan(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> static inline T min_keep_nan(T a, T b) { return (a < b || a != a) ? a : b; }
#pragma omp declare reduction(max_keep_nan : float, double : omp_out = max_keep_nan(omp_out, omp_in)) \
    initializer(omp_priv = omp_orig)
#pragma omp declare reduction(min_keep_nan : float, double : omp_out = min_keep_nan(omp_out, omp_in)) \
    initializer(omp_priv = omp_orig)
#endif
"""

#: Elements of work below which a kernel runs on the calling thread alone. Inductor decides the
#: same way (``CppKernel.decide_parallel_depth`` in torch/_inductor/codegen/cpp.py: no parallel
#: loop while a thread's share is below ``config.cpp.min_chunk_size``), as does ATen's
#: ``at::parallel_for`` with its ``GRAIN_SIZE`` of 32768 (aten/src/ATen/Parallel.h). Waking the
#: OpenMP team and joining it costs microseconds on an idle machine and up to a scheduler tick
#: (milliseconds) when the other core is busy; an 8192-element kernel computes in about one.
PARALLEL_THRESHOLD = 32768

#: ops worth keeping in a row buffer rather than computing again in a later pass over the row
EXPENSIVE = {"exp", "log", "tanh", "erf", "sin", "cos", "pow", "sqrt", "rsqrt", "sigmoid", "log1p", "expm1",
             "truediv"}  # fmt: skip
ROW_BUFFER_LIMIT = 16384  # elements per row (64 KiB of float32 on each thread's stack)

#: Steps of a reduction loop summed into one partial accumulator before it is added to the total.
#: A running float sum of ``n`` terms carries rounding error that grows with ``n`` (each addition
#: rounds the whole sum so far); ``omp simd`` splits the loop over the vector's lanes (8 floats
#: with AVX2), which divides ``n`` by 8 but no more: a sum of 1M values in [0, 1) was off by
#: 5.7e-7 relative, ATen's by 3.6e-8. A loop longer than this runs as blocks of ``SUM_CHUNK``
#: steps: the vectorised inner loop sums one block into a fresh ``part_`` accumulator, which is
#: then added to the ``acc_`` total (a two-level, or blocked, sum: pairwise summation taken one
#: level), so a lane adds about ``SUM_CHUNK / 8`` terms and a thread's total ``n / SUM_CHUNK``.
#: Measured on 1M values in [0, 1): 3e-8 relative, as eager. Inductor sums blocks of 4096 vectors
#: and then adds the blocks' sums in a pairwise tree (``CascadeSumHelper`` in
#: torch/csrc/inductor/cpp_prefix.h), ATen in a 16-way tree (``cascade_sum`` in
#: aten/src/ATen/native/cpu/SumKernel.cpp): their error grows with log(n), a blocked sum's with
#: both levels' lengths: blocks of 4096 (a thread's total of 10M values then adds over 1000)
#: left twice the error of 16384 at 1M and 10M values, on 1 and 2 threads. A smaller block
#: would split a full reduction more evenly over many threads (they take whole blocks); the
#: extra loop costs one horizontal add of the vector accumulator per block.
SUM_CHUNK = 16384


#: half-precision dtype -> (widening, narrowing) function of :data:`HEADER` (C++ holds the bits)
HALF_BITS = {"bfloat16": ("course_bf16_to_float", "course_float_to_bf16"),
             "float16": ("course_f16_to_float", "course_float_to_f16")}  # fmt: skip


def _half_conversion(value: str, src: str, dst: str) -> str:
    """A conversion from or to a half-precision float, through float32."""
    if src == dst:
        return value
    if src in HALF_BITS:
        value, src = f"{HALF_BITS[src][0]}({value})", "float32"
    if dst in HALF_BITS:
        return f"{HALF_BITS[dst][1]}({value if src == 'float32' else f'static_cast<float>({value})'})"
    return value if dst == "float32" else f"static_cast<{CTYPE[dst]}>({value})"


def cpp_index(expr, names: dict | None = None) -> str:
    """Print a sympy index expression as C (``FloorDiv`` -> ``/``, ``ModIdx`` -> ``%``)."""
    names = names or {}
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return names.get(expr.name, expr.name)
    if isinstance(expr, (FloorDiv, ModIdx)):  # a divisor such as 4*ks0 in parentheses: x / 4*ks0 is (x / 4)*ks0
        a, b = cpp_index(expr.args[0], names), _cpp_operand(expr.args[1], names)
        if nonnegative(expr.args[0]):
            # an index, or a size such as s0 - s0 % 512: C's truncating / and % are Python's // and %
            return f"(({a}) {'/' if isinstance(expr, FloorDiv) else '%'} {b})"
        # a size expression that may be negative (-s0 % 128, a padding): C truncates toward 0, Python floors
        return f"{'course_floordiv' if isinstance(expr, FloorDiv) else 'course_mod'}({a}, {b})"
    if expr.is_Add:
        terms = sorted(expr.args, key=lambda a: (a.is_Integer, sympy.default_sort_key(a)))
        return " + ".join(cpp_index(a, names) for a in terms)
    if expr.is_Mul:  # a sum as a factor (s1*(s0 + 1)) keeps its parentheses
        factors = sorted(expr.args, key=sympy.default_sort_key)
        return "*".join(f"({cpp_index(a, names)})" if a.is_Add else cpp_index(a, names) for a in factors)
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:  # s0**2: numel of an [s0, s0] tensor
        return "(" + "*".join([_cpp_operand(expr.base, names)] * int(expr.exp)) + ")"
    if isinstance(expr, (Max, Min)):  # a size the bounds could not decide (Max(0, 2048 - s0))
        fn = "std::max" if isinstance(expr, Max) else "std::min"
        return functools.reduce(lambda x, y: f"{fn}<int64_t>({x}, {y})", (cpp_index(a, names) for a in expr.args))
    raise ValueError(f"cannot print index {expr}")


def _cpp_operand(expr, names: dict) -> str:
    """``cpp_index`` of a right operand of ``/``, ``%`` or ``*``: in parentheses unless a number or a name."""
    text = cpp_index(expr, names)
    return text if expr.is_Integer or expr.is_Symbol else f"({text})"


def cpp_const(value, dtype) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    if dtype in FLOATING:
        v = float(value)
        if math.isinf(v):
            return ("-" if v < 0 else "") + f"std::numeric_limits<{CTYPE[dtype]}>::infinity()"
        if math.isnan(v):
            return f"std::numeric_limits<{CTYPE[dtype]}>::quiet_NaN()"
        return f"static_cast<{CTYPE[dtype]}>({v!r})"
    return f"static_cast<{CTYPE[dtype]}>({int(value)})"


def _inner_ops(expr, inner_syms: set, out: set) -> None:
    """Collect the Op nodes of ``expr`` whose value changes with the inner loop variables (one
    pass over the expression DAG, children first)."""
    varies: dict[int, bool] = {}
    for e in walk(expr):
        if isinstance(e, Op):
            varies[id(e)] = any(varies[id(a)] for a in e.args)
            if varies[id(e)]:
                out.add(e)
        elif isinstance(e, (Load, IndexValue)):
            kids = [x for _, x in e.indirect] if isinstance(e, Load) else []
            varies[id(e)] = bool(sympy.sympify(e.index).free_symbols & inner_syms) or any(varies[id(x)] for x in kids)
        else:
            varies[id(e)] = False


def _costly(expr) -> bool:
    return any(isinstance(e, Op) and e.op in EXPENSIVE for e in nodes(expr)) if isinstance(expr, Op) else False


class CppKernel(Kernel):
    """Generate one kernel function from its plan."""

    def __init__(self, name: str, plan: KernelPlan, ptrs: dict[str, str] | None, dtypes: dict[str, str]):
        super().__init__(name, simplify_loops(plan))  # fewer, longer loops where memory allows
        if ptrs is not None:
            self.ptrs = self.args.ptrs = ptrs
        self.dtypes = dtypes
        self.phase = 0
        self.row_buffers = self._row_buffers()
        self.parallel = self._parallel_pragma()

    def _parallel_pragma(self) -> str | None:
        """``#pragma omp parallel for`` for the outermost loop, or None: run on one thread.

        A kernel whose whole iteration space (outer times inner) is below
        :data:`PARALLEL_THRESHOLD` runs serially; one whose size is known only at the call
        decides there, with OpenMP's ``if()`` clause.
        """
        n = prod(self.plan.group[0] + self.plan.group[1])
        if is_static(n):
            return "#pragma omp parallel for" if n >= PARALLEL_THRESHOLD else None
        return f"#pragma omp parallel for if({self.index(n)} >= {PARALLEL_THRESHOLD})"

    def index(self, expr, names: dict | None = None) -> str:
        """An index or a size as C, size symbols printed as the kernel's ``ksN`` arguments."""
        return cpp_index(expr, {**self.args.size_names, **(names or {})})

    def _row_buffers(self) -> dict:
        """Costly inner values that two passes over the same row both compute: expr -> buffer name.

        Softmax is the case: pass 2 sums ``exp(x - max)`` and pass 3 divides the same
        ``exp(x - max)`` by the sum. The first pass to compute it also stores it in a
        thread-private row buffer, the later ones load it back from L1: one exp per element,
        as in ATen's hand-written softmax kernel.
        """
        outer_sizes, inner_sizes = self.plan.group
        if not outer_sizes or not inner_sizes or not all(map(is_static, inner_sizes)):
            return {}  # a row buffer is a stack array: its length must be known when compiling
        if math.prod(inner_sizes) > ROW_BUFFER_LIMIT:
            return {}
        seen: dict = {}  # expr -> first phase computing it
        shared: set = set()
        for i, phase in enumerate(self.plan.phases):
            found: set = set()
            for item in phase.reductions + phase.stores:
                _inner_ops(item[2], self.inner_syms, found)
            for e in found:
                if e in seen and seen[e] != i:
                    shared.add(e)
                seen.setdefault(e, i)
        costly = [e for e in shared if _costly(e)]
        inside: set = set()
        for e in costly:
            sub: set = set()
            for a in e.args:
                _inner_ops(a, self.inner_syms, sub)
            inside |= sub
        keep = sorted((e for e in costly if e not in inside), key=str)  # outermost shared values only
        return {e: (f"row_buf{i}", seen[e]) for i, e in enumerate(keep)}

    def _row_index(self) -> str:
        """The row buffer's index: the inner loop variables, row-major."""
        _, inner_sizes = self.plan.group
        _, rs = kernel_vars(self.plan.group)
        flat, stride = 0, 1
        for size, r in reversed(list(zip(inner_sizes, rs))):
            flat, stride = flat + r * stride, stride * size
        return self.index(flat)

    def emit(self, expr, outer: Scope, inner: Scope) -> str:
        """Emit ``expr`` at the outermost scope where it is invariant; return its name."""
        scope = inner if depends_on(expr, self.inner_syms) else outer
        known = self.reuse(expr, scope, cpp_const)
        if known:
            return known
        if isinstance(expr, IndexValue):
            code = f"static_cast<{CTYPE[expr.dtype]}>({self.index(expr.index)})"
        elif isinstance(expr, Load):
            names = {}
            for s, e in expr.indirect:
                names[s.name] = self.emit(e, outer, inner)
            code = f"{self.ptrs[expr.buf]}[{self.index(expr.index, names)}]"
        elif expr in self.row_buffers and self.row_buffers[expr][1] != self.phase:
            code = f"{self.row_buffers[expr][0]}[{self._row_index()}]"  # computed by an earlier pass
        elif self._hoisted_divisor(expr, scope, inner):
            # x / d with d fixed across the inner loop: one reciprocal per row, a multiply per
            # element (a vector divide costs several multiplies; the result may differ by an ulp)
            recip = self.emit(Op("reciprocal", (expr.args[1],), expr.dtype), outer, inner)
            code = f"{self.emit(expr.args[0], outer, inner)} * {recip}"
        else:
            args = [self.emit(a, outer, inner) for a in expr.args]
            code = CPP_RULES[expr.op].format(*args, t=CTYPE[expr.dtype])
            if expr.op == "to_dtype" and {expr.dtype, expr.args[0].dtype} & HALF_BITS.keys():
                code = _half_conversion(args[0], expr.args[0].dtype, expr.dtype)
        name = self.tmp()
        scope.lines.append(f"{CTYPE[expr.dtype]} {name} = {code};")
        scope.cse[expr] = name
        if expr in self.row_buffers and self.row_buffers[expr][1] == self.phase:
            scope.lines.append(f"{self.row_buffers[expr][0]}[{self._row_index()}] = {name};")
        return name

    def _hoisted_divisor(self, expr, scope: Scope, inner: Scope) -> bool:
        return (isinstance(expr, Op) and expr.op == "truediv" and scope is inner and expr.dtype in ("float32", "float64")
                and not depends_on(expr.args[1], self.inner_syms) and not isinstance(expr.args[1], Const))  # fmt: skip

    def loops(self, sizes, syms, body: list[str], pragma_inner: str, pragma_outer: str | None,
              chunk: tuple | None = None) -> list[str]:  # fmt: skip
        """Nested ``for`` loops over ``sizes`` around ``body``, the pragmas on the outermost and
        innermost loops. ``chunk = (steps, head, tail)`` runs the innermost loop in blocks of
        ``steps``: a loop over the blocks opens each with ``head``, runs the (vectorised) loop
        over one block, then closes it with ``tail`` (:data:`SUM_CHUNK`)."""
        lines, indent = [], ""
        for d, (size, s) in enumerate(zip(sizes, syms)):
            last = d == len(sizes) - 1
            if last and chunk is not None:
                steps, head, tail = chunk
                n = self.index(size)
                if d == 0 and pragma_outer:
                    lines.append(indent + pragma_outer)  # threads take whole blocks
                lines += [f"{indent}for (int64_t {s}_start = 0; {s}_start < {n}; {s}_start += {steps})", indent + "{"]
                even = is_static(size) and int(size) % steps == 0  # every block full: a constant trip count
                end = f"{s}_start + {steps}" if even else f"std::min<int64_t>({s}_start + {steps}, {n})"
                block = [f"const int64_t {s}_end = {end};", *head]
                if pragma_inner:
                    block.append(pragma_inner)
                block += [f"for (int64_t {s} = {s}_start; {s} < {s}_end; {s}++)", "{"]
                block += ["    " + ln for ln in body] + ["}", *tail]
                return lines + [indent + "    " + ln for ln in block] + [indent + "}"]
            if d == 0 and pragma_outer and last and pragma_inner:
                # one loop both split over threads and vectorised: OpenMP's combined construct
                # (two pragmas on one loop do not compile; the clauses are the same reduction)
                lines.append(indent + pragma_outer.replace("parallel for", "parallel for simd", 1))
            else:
                if d == 0 and pragma_outer:
                    lines.append(indent + pragma_outer)
                if last and pragma_inner:
                    lines.append(indent + pragma_inner)
            lines.append(f"{indent}for (int64_t {s} = 0; {s} < {self.index(size)}; {s}++)")
            indent += "    "
        if not sizes:
            return ["{"] + ["    " + ln for ln in body] + ["}"]
        return lines[: -0 or None] + [indent[:-4] + "{"] + [indent + ln for ln in body] + [indent[:-4] + "}"]

    def _blocked(self, phase) -> bool:
        """Does this phase run its innermost reduction loop in blocks of :data:`SUM_CHUNK`?

        Yes when it sums floats and that loop may be longer than one block (a size symbol may
        be). Only the innermost reduction loop is blocked: the loops merged by
        :func:`simplify_loops` leave several reduction loops only where memory is not walked
        as one, and those outer reduction loops still add each row's sum into the total.
        Max and min round nothing, and integer sums are exact: their loops stay as they were.
        """
        _, inner_sizes = self.plan.group
        if not inner_sizes or not any(t == "sum" and d in ("float32", "float64") for _, t, _, d in phase.reductions):
            return False
        n = inner_sizes[-1]
        return not is_static(n) or int(n) > SUM_CHUNK

    def phase_code(self, phase, outer: Scope) -> None:
        outer_sizes, inner_sizes = self.plan.group
        xs, rs = kernel_vars(self.plan.group)
        inner = Scope(outer)
        blocked = self._blocked(phase)
        clauses, block_clauses, head, tail = {}, {}, [], []
        for buf, rtype, expr, dtype in phase.reductions:
            acc = f"acc_{buf}"
            table = REDUCTION_INIT if dtype in ("float32", "float64") else REDUCTION_INIT_INT
            outer.lines.append(f"{CTYPE[dtype]} {acc} = {table[rtype].format(t=CTYPE[dtype])};")
            v = self.emit(expr, outer, inner)
            target = acc
            if blocked and rtype == "sum" and dtype in ("float32", "float64"):
                target = f"part_{buf}"  # this block's partial sum, added to the total after the block
                head.append(f"{CTYPE[dtype]} {target} = 0;")
                tail.append(REDUCTION_COMBINE["sum"].format(acc=acc, v=target))
            inner.lines.append(REDUCTION_COMBINE[rtype].format(acc=target, v=v))
            omp = OMP_REDUCTION_FLOAT if dtype in ("float32", "float64") else OMP_REDUCTION
            clauses.setdefault(omp[rtype], []).append(acc)
            block_clauses.setdefault(omp[rtype], []).append(target)
        for buf, index, expr, _dtype in phase.stores:
            v = self.emit(expr, outer, inner)
            target = inner if index.free_symbols & self.inner_syms or not inner_sizes else outer
            (target if inner_sizes else outer).lines.append(f"{self.ptrs[buf]}[{self.index(index)}] = {v};")

        def spell(clauses):
            return " ".join(f"reduction({op}:{','.join(a)})" for op, a in sorted(clauses.items()))

        red = spell(clauses)
        simd = f"#pragma omp simd {spell(block_clauses)}".rstrip()  # the vectorised loop's accumulators
        par = None
        if not outer_sizes and self.parallel is not None:
            par = f"{self.parallel} {red}".rstrip()  # each thread's totals, combined at the end
        if inner_sizes:
            chunk = (SUM_CHUNK, head, tail) if blocked else None
            outer.lines.extend(self.loops(inner_sizes, rs, inner.lines, simd, par, chunk))
        for buf, *_ in phase.reductions:
            self.accs[buf] = f"acc_{buf}"

    def source(self) -> str:
        outer_sizes, _ = self.plan.group
        xs, _ = kernel_vars(self.plan.group)
        outer = Scope()
        for e, (buf, _) in self.row_buffers.items():
            outer.lines.append(f"{CTYPE[e.dtype]} {buf}[{math.prod(self.plan.group[1])}];")
        for i, phase in enumerate(self.plan.phases):
            self.phase = i
            self.phase_code(phase, outer)
        for buf, index, expr, _dtype in self.plan.outer_stores:
            v = self.emit(expr, outer, outer)
            outer.lines.append(f"{self.ptrs[buf]}[{self.index(index)}] = {v};")
        params = [f"const {CTYPE[self.dtypes[b]]}* __restrict__ {self.ptrs[b]}" for b in self.plan.reads]
        params += [f"{CTYPE[self.dtypes[b]]}* __restrict__ {self.ptrs[b]}" for b in self.plan.writes]
        params += [f"const int64_t {name}" for name in self.args.size_names.values()]
        lines = [f'extern "C" void {self.name}({", ".join(params)})', "{"]
        if len(outer_sizes) > 1 and self.parallel:
            # one flat parallel loop, its indices recovered by / and %: gcc's collapse(n) costs
            # far more per row (measured: softmax over [4, 16, 256, 256] took twice as long)
            unflatten = [f"const int64_t {x} = {self._unflatten('x', outer_sizes, d)};" for d, x in enumerate(xs)]
            body = self.loops([prod(outer_sizes)], ["x"], unflatten + outer.lines, None, self.parallel)
        elif outer_sizes:
            par = self.parallel if not is_static(outer_sizes[0]) or outer_sizes[0] > 1 else None
            body = self.loops(outer_sizes, xs, outer.lines, None, par)
        else:
            body = outer.lines
        lines += ["    " + ln for ln in body] + ["}"]
        return "\n".join(lines)

    def _unflatten(self, flat: str, sizes, d: int) -> str:
        """Index ``d`` of a row-major position ``flat`` over ``sizes``."""
        inner = prod(sizes[d + 1 :])
        divisor = self.index(inner) if is_static(inner) else f"({self.index(inner)})"
        q = f"{flat} / {divisor}" if inner != 1 else flat
        size = self.index(sizes[d]) if is_static(sizes[d]) else f"({self.index(sizes[d])})"  # % (4*ks0)
        return q if d == 0 else f"({q}) % {size}"


def kernel_source(name: str, plan: KernelPlan, dtypes: dict[str, str]) -> str:
    return CppKernel(name, plan, None, dtypes).source()


# ---------------------------------------------------------------------------
# build and load (CppCodeCache)
# ---------------------------------------------------------------------------

#: ``-D__FAST_MATH__`` makes glibc's <math.h> declare the SIMD variants of expf, erff, tanhf...
#: (libmvec, linked with -lmvec) without turning on -ffast-math's unsafe rewrites (inf and NaN
#: keep their meaning, and only ``omp simd reduction`` loops are reassociated). Inductor gets
#: the same effect from Sleef through ``at::vec``.
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-fno-math-errno", "-D__FAST_MATH__", "-std=c++17"]
LIBS = ["-lmvec", "-lm"]


def precompiled_header(flags) -> str | None:
    """:data:`HEADER` compiled once per flag set into a ``.gch`` (``CppCodeCache`` has the same idea).

    Parsing <cmath> and <algorithm> is most of g++'s time on a small kernel (0.10 s of 0.15 s
    measured here); with ``-include prelude.h`` g++ loads the precompiled form instead, and
    the ``#include`` lines left in the source are skipped by their include guards. Returns the
    header's path, or None (compile without it) when g++ cannot build the ``.gch``.
    """
    from course_lib import env

    code_flags = [f for f in flags if f != "-shared"]
    key = env.artefact_key(HEADER, " ".join(code_flags))[:12]
    header = env.artefact("inductor", f"prelude{key}.h", lambda tmp: tmp.write_text(HEADER))
    try:  # g++ finds prelude.h.gch beside prelude.h
        build = lambda tmp: _gxx([*code_flags, "-x", "c++-header", str(header)], tmp)  # noqa: E731
        env.artefact("inductor", header.name + ".gch", build)
    except RuntimeError:
        return None
    return str(header)


def _gxx(args: list[str], target) -> None:
    """Run ``g++ args -o target``; raise with g++'s diagnostics when it fails."""
    proc = subprocess.run(["g++", *args, "-o", str(target)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"g++ failed:\n{proc.stderr[-3000:]}")


def compile_source(source: str, flags=None) -> str:
    """Compile ``source`` into a shared object cached by the hash of source and flags; return its path."""
    from course_lib import env

    flags = list(flags or CFLAGS)
    key = env.artefact_key(source, " ".join(flags))
    src = env.artefact("inductor", f"k{key}.cpp", lambda tmp: tmp.write_text(source))  # kept for reading
    prelude = precompiled_header(flags) if source.startswith(HEADER) else None
    pre = ["-include", prelude] if prelude else []
    try:
        so = env.artefact("inductor", f"k{key}.so", lambda tmp: _gxx([*flags, *pre, str(src), *LIBS], tmp))
    except RuntimeError as exc:
        raise RuntimeError(f"g++ failed on {src.name}:\n{str(exc)[-3000:]}") from None
    return str(so)


def load(path: str, names: list[str]) -> dict:
    """``ctypes`` handles for the named kernel functions (every argument a ``void*``)."""
    lib = ctypes.CDLL(path)
    fns = {}
    for n in names:
        f = getattr(lib, n)
        f.restype = None
        fns[n] = f
    fns["__lib__"] = lib
    return fns


def build(kernels, graph):
    """The C++ backend of :data:`course_lib.inductor.compile_fx.BACKENDS`: one translation unit
    for every kernel, compiled once, each function given its ctypes argument types.

    Returns ``(source, {kernel name: callable}, pointer_args=True)``.
    """
    dtypes = {b.name: b.dtype for b in graph.buffers}
    gens = [CppKernel(k.name, k.plan, None, dtypes) for k in kernels]
    source = HEADER + "\n" + "\n\n".join(g.source() for g in gens) + "\n"
    fns = {}
    if kernels:
        fns = load(compile_source(source), [k.name for k in kernels])
        for g in gens:
            pointers = [ctypes.c_void_p] * len(g.ptrs)
            fns[g.name].argtypes = pointers + [ctypes.c_int64] * len(g.args.sizes)
    return source, {k: v for k, v in fns.items() if not k.startswith("__")}, True
