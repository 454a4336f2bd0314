"""Triton code generation from the same kernel plans the C++ generator prints.

Teaches ``torch/_inductor/codegen/triton.py`` (``TritonKernel``, ``TritonOverrides``, the
``XBLOCK`` / ``RBLOCK`` tiling, persistent reductions) and ``triton_heuristics.py`` (block
size choice).

Position: :class:`KernelPlan` -> a Python module of ``@triton.jit`` kernels plus launchers.

* pointwise kernel: one program handles ``XBLOCK`` consecutive elements of the flattened
  iteration space; each loop variable is recovered with ``//`` and ``%``.
* reduction kernel: programs own ``XBLOCK`` rows, and a row is a ``[XBLOCK, RBLOCK]`` tile.
  *Persistent* when the whole row fits one tile (``RBLOCK >= rnumel``): every phase reuses the
  loaded tile, nothing is read twice. Otherwise each phase loops over the row in ``RBLOCK``
  chunks, accumulating elementwise and reducing the accumulator tile at the end; the loads of
  every pass but the last ask L2 to keep the row (``eviction_policy='evict_last'``), as Inductor's do.
* Welford: a looped row whose kernel takes ``sum(x)`` and then ``sum((x - mean) ** 2)`` (layernorm,
  variance) gets both from one pass, each lane keeping a running (mean, M2, count) and the lanes
  merged at the end by the combine rule (Inductor's ``welford_reduce`` and
  ``triton_helpers.welford_combine``): the row is read once for its statistics, not twice.
  Softmax's ``max(x)`` then ``sum(exp(x - max))`` fold the same way (online softmax, Inductor's
  ``prepare_softmax_online``): a running max per lane, its sum rescaled when the max grows.
* split reduction: a whole-tensor reduction (one output) runs on many programs that each reduce a
  chunk to a partial, then one program combines the partials (Inductor's split reductions).

On CPU the module runs in Triton's interpreter (``TRITON_INTERPRET=1``, set by course_lib);
on a GPU the same source compiles natively.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import os
import re
import sys

import sympy

from course_lib.inductor.codegen.common import Kernel, Scope, depends_on
from course_lib.inductor.ir import FLOATING, Const, IndexValue, Load, Op
from course_lib.inductor.lowering import Unsupported
from course_lib.inductor.scheduler import Acc, KernelPlan, acc_refs
from course_lib.inductor.sizevars import FloorDiv, Max, Min, ModIdx, kernel_vars, nonnegative

TL_DTYPE = {"float32": "tl.float32", "float64": "tl.float64", "float16": "tl.float16", "bfloat16": "tl.bfloat16",
            "int64": "tl.int64", "int32": "tl.int32",
            "int16": "tl.int16", "int8": "tl.int8", "uint8": "tl.uint8", "bool": "tl.int1"}  # fmt: skip

#: ops.* -> Triton (``TritonOverrides``), one line per op, to read beside ``cpp.CPP_RULES``.
TRITON_RULES = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}",
    "neg": "-{0}", "exp": "tl.exp({0})", "log": "tl.log({0})", "sqrt": "tl.sqrt({0})",
    "rsqrt": "tl.rsqrt({0})", "tanh": "2 * tl.sigmoid(2 * {0}) - 1", "erf": "tl.erf({0})",
    "sigmoid": "tl.sigmoid({0})", "relu": "tl.maximum({0}, 0, propagate_nan=tl.PropagateNan.ALL)",
    "abs": "tl.abs({0})",
    "reciprocal": "1 / {0}", "sin": "tl.sin({0})", "cos": "tl.cos({0})", "log1p": "tl.log(1 + {0})",
    "expm1": "tl.exp({0}) - 1", "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
    "maximum": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",  # NaN in, NaN out: see NAN_REDUCE
    "minimum": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}", "ge": "{0} >= {1}", "eq": "{0} == {1}", "ne": "{0} != {1}",
    "logical_not": "{0} == 0", "logical_and": "{0} & {1}", "logical_or": "{0} | {1}", "bitwise_not": "~{0}",
    "where": "tl.where({0}, {1}, {2})", "fma": "tl.fma({0}, {1}, {2})", "to_dtype": "{0}.to({t})",
}  # fmt: skip

#: x ** n for small whole n, written out as Inductor does (exact, and no libdevice call)
POW_SPECIAL = {
    0: "tl.full({0}.shape, 1, {0}.dtype)",  # 0 ** 0 is 1; exp2(0 * log2(0)) would be NaN
    2: "{0} * {0}",
    3: "{0} * {0} * {0}",
    1: "{0}",
    0.5: "tl.sqrt({0})",
    -1: "1 / {0}",
    -0.5: "tl.rsqrt({0})",
}

TRITON_COMBINE = {"sum": "{0} + {1}", "max": TRITON_RULES["maximum"], "min": TRITON_RULES["minimum"]}
TRITON_INIT = {"sum": "0", "max": 'float("-inf")', "min": 'float("inf")'}


def reduction_init(rtype: str, dtype: str) -> str:
    """What a masked lane holds in a reduction: nothing moves a sum, max or min. An integer max starts
    at its type's lowest value: ``float("-inf")`` would turn the ``tl.where`` around it into float32,
    which holds integers exactly only up to 2**24."""
    if rtype == "sum" or dtype in FLOATING:
        return TRITON_INIT[rtype]
    if dtype == "bool":
        return "0" if rtype == "max" else "1"
    import torch

    info = torch.iinfo(getattr(torch, dtype))
    return str(info.min if rtype == "max" else info.max)


# torch.maximum, amax and their min twins give NaN where an input is NaN. tl.maximum's default
# (PropagateNan.NONE, PTX max.f32) returns the other operand, and so does tl.max, which reduces with
# it; ALL is max.NaN.f32, one instruction too. A float max or min reduction therefore reduces with a
# helper of the module (Inductor's triton_helpers.max2 reduces with its NaN-keeping maximum);
# integers keep tl.max, which widens narrow types first.
NAN_REDUCE = {"max": "max_keep_nan", "min": "min_keep_nan"}
KEEP_NAN_HELPERS = """@triton.jit
def max_keep_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def min_keep_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
"""


def reduce_all(rtype: str, dtype: str) -> str:
    """A reduction of a whole tile to a scalar, as a format of the tile ({0})."""
    if rtype in NAN_REDUCE and dtype in FLOATING:
        return f"tl.reduce({{0}}, None, {NAN_REDUCE[rtype]})"
    return f"tl.{rtype}({{0}})"


def reduce_rows(rtype: str, dtype: str) -> str:
    """A reduction of a ``[XBLOCK, R]`` tile along its rows, kept two-dimensional (``[XBLOCK, 1]``)."""
    if rtype in NAN_REDUCE and dtype in FLOATING:
        return f"tl.reduce({{0}}, 1, {NAN_REDUCE[rtype]})[:, None]"
    return f"tl.{rtype}({{0}}, 1)[:, None]"


def pow_rule(expr) -> str:
    """``x ** c`` for a constant c: small powers multiplied out, others through exp2 and log2.

    Inductor calls ``libdevice.pow``; Triton's CPU interpreter has no libdevice, so the course
    writes |x|**c = exp2(c * log2|x|) and puts the sign back for odd whole c (a negative base
    with a fractional c gives NaN, as pow does).
    """
    if not isinstance(expr.args[1], Const):
        raise Unsupported("pow with a tensor exponent")
    c = expr.args[1].value
    if c in POW_SPECIAL:
        return POW_SPECIAL[c]
    mag = "tl.exp2({1} * tl.log2(tl.abs({0})))"
    if float(c).is_integer():
        return f"tl.where({{0}} < 0, -{mag}, {mag})" if int(c) % 2 else mag
    # a negative base gives NaN, as pow does, except -inf: (-inf) ** 2.5 is inf, (-inf) ** -2.5 is 0
    at_minus_inf = 'float("inf")' if c > 0 else "0.0"
    return f'tl.where({{0}} == float("-inf"), {at_minus_inf}, tl.exp2({{1}} * tl.log2({{0}})))'


# Reduction tiling, chosen from a sweep on the H200 (bench/notes/gpu_reductions.md; rows of 4096 float32):
# a persistent tile of one row a program reached 0.95-1.01 of copy bandwidth, the old looped 16 x 256
# tile 0.40-0.59, because its three passes over 16 rows a program overflowed L2 before the re-reads.
# Rows up to PERSISTENT_RNUMEL are reduced in one tile held in registers: the row is read once.
# Raised from 8192 to 32768 by the sweep of bench/notes/gpu_long_rows.md (H200, rows of 32768 float32):
# persistent at 32 warps (32 elements a thread, 64 registers, no spills) ran layernorm_long at 0.86 of
# copy bandwidth (0.96 x Inductor's time) and softmax_long at 0.95 (0.70 x), where the looped kernel
# (read twice) reached 0.58 and 0.81. At 16 warps layernorm's 64 elements a thread spilled (ptxas:
# 128 registers, 26 bytes spilled; 0.77); at 65536 a row (64 a thread at 32 warps) it spills 106 bytes
# and falls to 0.39: a longer row is looped.
PERSISTENT_RNUMEL = 32768
# A lone row (one output, ``xnumel == 1``) is not one program's work however short: one SM of 132
# would hold it all. Past this length it is split (below). Cross entropy's loss over 16384 rows as one
# persistent program took the workload from 0.080 to 0.096 ms (16 warps) or 0.134 ms (32 warps).
ONE_ROW_PERSISTENT_RNUMEL = 8192
# Longer rows: one row a program, walked in chunks of LOOPED_RBLOCK elements, 4 a thread (32 warps for
# 4096). A looped row is read twice (statistics, then the output pass); the second read is cheap only
# if the row is still in L2. Rows in flight = programs resident at once: a 32-warp program of 42
# registers (layernorm's Welford) fits one an SM, of 32 (softmax) two. With 2048-element chunks and 4
# warps all 2048 rows of 32768 were resident together (256 MiB): the second read went to DRAM (0.50 of
# copy bandwidth). Rows of 65536 (256 KiB; 1024 of them), fraction of copy bandwidth on the H200
# (bench/notes/gpu_long_rows.md): with the output pass walking forwards, 8192 a step 0.61 (layernorm)
# and 0.68 (softmax), 4096 a step 0.63 and 0.67; walking backwards (LOOPED_REVERSE_LAST), 8192 0.60 and
# 0.71, 4096 0.67 and 0.70. Inductor's configs for such rows reach R0_BLOCK 32768 and 32 warps (0.62, 0.63).
LOOPED_RBLOCK = 4096
LOOPED_ELEMENTS_PER_THREAD = 4
# Row split (a GPU that can launch cooperatively): a long row is cut into parts of ROW_SPLIT_PART
# elements, one program a part, each holding its part in registers, so the row is read once. The parts
# of a row exchange partial statistics through global memory and wait for each other at a per-row
# counter; that wait ends only if all of them run at once, which a cooperative launch promises (or
# refuses to launch). So the grid is what the GPU holds at once, and the row groups walk the rows.
# Rows of 65536 on an H100 (bench/notes/gpu_long_rows.md, bench/proto_row_coop.py): parts of 8192 at
# 16 warps, the next row's part loaded before the wait, reached 0.86 (layernorm) and 0.89 (softmax) of
# copy bandwidth, where the looped kernel reads the row twice (0.67 / 0.70 on the H200).
# Measured on the H200 at 7da6698 (triton 3.6), the generated kernel was correct but 45-60x SLOWER than the
# looped one: its [1, 1] merged statistics sent every [1, RBLOCK] value through shared memory under
# Triton 3.6 (see row_split_source). With scalar statistics (7bd7211), on the H200 at 0bef30f: layernorm_xlong
# 0.185 ms (0.70 of copy bandwidth), softmax_xlong 0.175 ms (0.74), against 0.196 / 0.186 looped and 0.208 /
# 0.206 for Inductor; parts of 4096 or 16384 were no faster. On by default where it can run (a GPU whose
# Triton launches cooperatively); ``COURSE_ROW_SPLIT=0`` keeps long rows looped.
ROW_SPLIT = True
ROW_SPLIT_PART = 8192
# Publish ahead: a part publishes the *next* row's partials before it waits for this row's, so the wait
# overlaps a whole part's load and reduction and the other parts have usually arrived by then (the
# registers hold two rows' parts; still 64 registers, no spills). Rows of 65536, fraction of copy
# bandwidth without -> with: H200 layernorm 0.70 -> 0.72, softmax 0.74 -> 0.74; H100 0.84 -> 0.86 and
# 0.86 -> 0.88 (bench_gpu_inductor's sweep, 2026-12-06).
ROW_SPLIT_AHEAD = True
ROW_SPLIT_WARPS = 0  # warps a part; 0: reduction_warps(RBLOCK), 16 for parts of 8192
# Flagged partials: each partial is published as one 64-bit word, its row's number + 1 above its float32
# bits, written by a relaxed atomic exchange (one indivisible write). A waiting part reads the row's words
# until every one carries the row's number, and has the values with them: one trip to L2 a poll, where the
# counter costs a release fence, the counter's poll and then a second trip for the partials. The words
# start at 0 ("no row yet"), zeroed every call. The poll's words cost registers, and a row split lives on
# two 16-warp programs an SM (64 registers or fewer): rows of 65536 on an H100 (triton 3.6,
# bench_gpu_inductor's sweep, 2026-12-07), fraction of copy bandwidth, counter -> flags: softmax 0.870 ->
# 0.907 at 63-64 registers; layer norm 0.858 -> 0.717 at 87 registers, one program an SM (capped at 64,
# ROW_SPLIT_MAXNREG: 0.846, 6 B spilled). Publishing 2 values instead of 3 (a Welford part's count follows
# from its index, part_count) did not bring layer norm down: 89 registers (triton 3.6's ptxas, sm_90a). So
# the kernel carries both protocols behind the constexpr FLAGS, and the launch site compiles both at its
# first launch and keeps flags unless they fit fewer programs on this GPU (DirectLaunch's ``choices``):
# the rule is the occupancy the measurement showed, not the kernel's name. On an H100 (2026-12-08) the sites
# kept the counter for layer norm (0.855; flags forced: 0.722 at 88 registers) and flags for softmax (0.913;
# the counter alone 0.877), and flags for layer norm in parts of 4096, where both need 80 registers (0.858
# against 0.825).
ROW_SPLIT_FLAGS = True
# A cap on a row split's registers a thread (ptxas's -maxrregcount; 0: none). Two 16-warp programs fit an SM
# at 64 or fewer. Triton 3.6 gives the flagged layer norm 87 (one program an SM); capped at 64 it spilled 6
# bytes on the H100 and reached 0.846 of copy bandwidth, 1% behind the counter's 0.858: off.
ROW_SPLIT_MAXNREG = 0
ROW_SPLIT_MAX_PARTS = 32  # longer rows (past 262144 elements) stay looped
PROGRAM_TILE = 4096  # elements one program's tile holds: short rows are packed XBLOCK rows a program
# A whole-tensor reduction (one output: a loss's mean, cross entropy's sum over rows) is split: up to
# SPLIT_MAX programs each reduce a chunk to a partial, a second one-program kernel reduces the partials
# (Inductor's split reduction). As one program it ran on one SM of 132, latency-bound (cross entropy's
# gather of 16384 targets: 8 dependent rounds of DRAM latency, about 40% of that workload's time).
# Inductor's ``num_splits`` (torch/_inductor/ir.py) aims at about 4 programs an SM for a reduction of
# 2**26 elements: 512 partials on the H200's 132 SMs. 256 partials of 2048-element steps kept ~2 MiB
# of loads in flight, half what the memory system needs to stream at full rate (0.50 of copy bw).
SPLIT_MAX = 512  # partials at most (a power of two: the second kernel loads them as one tile)
SPLIT_RBLOCK = 512  # smallest chunk step of a split program
SPLIT_RBLOCK_MAX = 4096  # largest: 16 KiB a step a program, 8 warps


PERSISTENT_ELEMENTS_PER_WARP = 512  # a persistent tile's warps: one per 512 elements (16 a thread)...
# ... at most 32 (1024 threads): a 32768-element row then holds 32 elements a thread. With 16 at most
# (64 a thread) layernorm_long spilled and ran at 0.77 of copy bandwidth; at 8 warps (128 a thread,
# 255 registers) 0.52. Tiles up to 8192 keep their 2 to 16 warps.
PERSISTENT_MAX_WARPS = 32
# Eviction hints on a looped row's loads (see TritonKernel.eviction). Without them softmax_long
# (looped) ran at 0.69 of copy bandwidth instead of 0.81; layernorm_long was unchanged (0.57).
LOOPED_EVICTION = True
# A looped row's last pass walks the row backwards: its first steps read the chunks the pass before
# read last, which are the likeliest still in L2 (the reuse distance of chunk k is then twice the
# row's tail after k, not the whole row). See TritonKernel.phase.
LOOPED_REVERSE_LAST = True


def reduction_warps(tile: int) -> int:
    """Warps for a reduction program touching ``tile`` elements at once: 512 elements a warp, 2 to 32.
    (Inductor's ``triton_heuristics`` also scales ``num_warps`` with the block; between 4 and 16 the
    sweep above moved the time of a 4096-element row by under 3%, 8 was never worse; a 32768-element
    row needs 32, see PERSISTENT_MAX_WARPS.)"""
    return max(2, min(PERSISTENT_MAX_WARPS, tile // PERSISTENT_ELEMENTS_PER_WARP))


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def py_index(expr) -> str:
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name
    if isinstance(expr, (FloorDiv, ModIdx)):  # a divisor such as 4*ks0 in parentheses: x // 4*ks0 is (x // 4)*ks0
        a, b = py_index(expr.args[0]), py_index(expr.args[1])
        if nonnegative(expr.args[0]):
            return f"(({a}) {'//' if isinstance(expr, FloorDiv) else '%'} ({b}))"
        # a size that may be negative (-ks0 % 128): compiled Triton's // and % truncate toward 0 (C's
        # sdiv/srem), Python floors. ((a % b) + b) % b is the floor remainder either way, and
        # subtracting it first makes the division exact
        mod = f"(((({a}) % ({b})) + ({b})) % ({b}))"
        return mod if isinstance(expr, ModIdx) else f"((({a}) - {mod}) // ({b}))"
    if expr.is_Add:
        return "(" + " + ".join(py_index(a) for a in sorted(expr.args, key=sympy.default_sort_key)) + ")"
    if expr.is_Mul:
        return "*".join(py_index(a) for a in sorted(expr.args, key=sympy.default_sort_key))
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:  # s0**2: the numel of an [s0, s0] tensor
        return "(" + "*".join([py_index(expr.base)] * int(expr.exp)) + ")"
    if isinstance(expr, (Max, Min)):  # a size the bounds could not decide
        fn = "tl.maximum" if isinstance(expr, Max) else "tl.minimum"
        return functools.reduce(lambda x, y: f"{fn}({x}, {y})", map(py_index, expr.args))
    raise Unsupported(f"cannot print index {expr} for Triton")


def tile_index(expr) -> str:
    """An index as a tile: a constant index is broadcast over ``xindex`` so that a scalar
    address still matches a block mask (Inductor writes ``tl.full([1, 1], 0, tl.int32)``)."""
    text = py_index(expr)
    return text if sympy.sympify(expr).free_symbols else f"{text} + 0 * xindex"


def py_const(value, dtype) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    v = float(value) if dtype in FLOATING else int(value)
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        return f'float("{v}")'
    return repr(v)


def tl_const(value, dtype) -> str:
    """A constant as a typed one-element tensor: a Python literal has no ``.to()``, and a value
    the kernel must hold in ``dtype`` (an index that simplified to 0, a cast constant) needs one."""
    return f"tl.full([1], {py_const(value, dtype)}, {TL_DTYPE[dtype]})"


# ---------------------------------------------------------------------------
# Welford: mean and variance of a looped row in one pass
# ---------------------------------------------------------------------------

#: Merge two running (mean, M2, count) summaries of disjoint parts of a row (Chan et al.'s parallel
#: rule, Inductor's ``triton_helpers.welford_combine``). M2 is the sum of squared deviations from the
#: mean. An empty part (count 0) changes nothing, so masked lanes may take part.
WELFORD_COMBINE = """@triton.jit
def welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    share_b = tl.where(n == 0, 0.0, n_b / tl.where(n == 0, 1.0, n))  # b's share of the merged count
    delta = mean_b - mean_a
    return mean_a + delta * share_b, m2_a + m2_b + delta * delta * n_a * share_b, n
"""


@dataclasses.dataclass(frozen=True)
class WelfordPair:
    """``total = sum(value)`` in one phase and ``m2 = sum((value - total / n) ** 2)`` in the next,
    over the same row of ``n`` elements: one Welford pass yields both (``mean`` is ``total / n`` as
    the later phases spell it, so they read the running mean itself)."""

    total: str  # buffer of sum(value)
    m2: str  # buffer of the sum of squared deviations
    value: object  # the expression summed, per element
    mean: object  # Op("truediv", (Acc(total), Const(n)))
    dtype: str


def part_count(part: str) -> str:
    """Elements of a row that part ``part`` of a row split holds, as float32: RBLOCK, fewer in the
    last part, 0 past it. Every part knows every part's count, so a Welford part publishes only its
    mean and M2 (2 values, where publishing the count as well made 3; see ROW_SPLIT_FLAGS)."""
    return f"tl.minimum(tl.maximum(rnumel - {part} * RBLOCK, 0), RBLOCK).to(tl.float32)"


def _square_of(expr):
    """``d`` when ``expr`` is ``d * d`` or ``d ** 2``, else None."""
    if isinstance(expr, Op) and expr.op == "mul" and expr.args[0] == expr.args[1]:
        return expr.args[0]
    if isinstance(expr, Op) and expr.op == "pow" and expr.args[1] == Const(2, expr.args[1].dtype):
        return expr.args[0]
    return None


def _welford_pair(first, second, rnumel: int) -> WelfordPair | None:
    """Do reductions ``first`` and ``second`` (``(buf, type, expr, dtype)``) form sum and M2?"""
    (a, atype, value, dtype), (b, btype, expr, _) = first, second
    if atype != "sum" or btype != "sum" or dtype not in ("float32", "float64") or acc_refs(expr) != {a}:
        return None
    dev = _square_of(expr)
    if not (isinstance(dev, Op) and dev.op == "sub" and dev.args[0] == value):
        return None
    mean = dev.args[1]
    ok = (isinstance(mean, Op) and mean.op == "truediv" and mean.args[0] == Acc(a, dtype)
          and isinstance(mean.args[1], Const) and mean.args[1].value == rnumel)  # fmt: skip
    return WelfordPair(a, b, value, mean, dtype) if ok else None


#: Merge two running (max, sum of exp(x - max)) summaries of parts of a row (online softmax,
#: Inductor's ``triton_helpers.online_softmax_combine``): rescale each sum to the larger max. A part
#: that saw no finite value (max -inf) adds nothing; -inf - -inf would otherwise make a NaN.
ONLINE_SOFTMAX_COMBINE = """@triton.jit
def online_softmax_combine(max_a, sum_a, max_b, sum_b):
    m = tl.maximum(max_a, max_b)
    part_a = tl.where(max_a == float("-inf"), 0.0, sum_a * tl.exp(max_a - m))
    part_b = tl.where(max_b == float("-inf"), 0.0, sum_b * tl.exp(max_b - m))
    return m, part_a + part_b
"""


@dataclasses.dataclass(frozen=True)
class OnlineSoftmaxPair:
    """``m = max(value)`` in one phase and ``sum(exp(value - m))`` in the next: softmax's two
    statistics from one pass, each lane rescaling its sum whenever its max grows."""

    total: str  # buffer of the max (named ``total`` like WelfordPair's first reduction)
    m2: str  # buffer of the sum of exponentials
    value: object
    dtype: str


def _online_softmax_pair(first, second) -> OnlineSoftmaxPair | None:
    (a, atype, value, dtype), (b, btype, expr, _) = first, second
    if atype != "max" or btype != "sum" or dtype not in ("float32", "float64") or acc_refs(expr) != {a}:
        return None
    if expr == Op("exp", (Op("sub", (value, Acc(a, dtype)), dtype),), dtype):
        return OnlineSoftmaxPair(a, b, value, dtype)
    return None


def fold_one_pass(phases: list, rnumel: int) -> tuple[list, dict[int, list]]:
    """Move each second statistic into the phase of the first, to be computed together in one pass:
    Welford (sum, then squared deviations from the mean) and online softmax (max, then sum of exp).

    Returns the new phases (a phase left empty is dropped) and, per new phase index, its pairs.
    The first reductions stay in their phase's list (the pair replaces how they are accumulated).
    """
    phases = [dataclasses.replace(p, reductions=list(p.reductions), stores=list(p.stores)) for p in phases]
    pairs: dict[int, list] = {}
    for i in range(len(phases) - 1):
        for first in phases[i].reductions:
            for second in phases[i + 1].reductions:
                pair = _welford_pair(first, second, rnumel) or _online_softmax_pair(first, second)
                if pair and all(pair.total != q.total for q in pairs.get(i, [])):
                    pairs.setdefault(i, []).append(pair)
                    phases[i + 1].reductions.remove(second)
                    break
    keep = [i for i, p in enumerate(phases) if p.reductions or p.stores]
    return [phases[i] for i in keep], {keep.index(i): v for i, v in pairs.items() if i in keep}


def _loads(expr):
    """The loads an expression reads, outermost first (the index of an indirect load included)."""
    if isinstance(expr, Load):
        yield expr
        for _, e in expr.indirect:
            yield from _loads(e)
    elif isinstance(expr, Op):
        for a in expr.args:
            yield from _loads(a)


class TritonKernel(Kernel):
    """One kernel plan printed as Triton. ``row_split``: True lets a long row (past
    ``persistent_rnumel``) be split over programs of a cooperative launch (see ROW_SPLIT; the
    backend passes True only where that launch exists); an int forces that many parts a row."""

    def __init__(self, name: str, plan: KernelPlan, persistent_rnumel: int = PERSISTENT_RNUMEL,
                 row_split: bool | int = False):  # fmt: skip
        super().__init__(name, plan)
        if self.args.sizes:
            raise Unsupported("the Triton backend compiles static sizes only (dynamic shapes: use codegen='cpp')")
        outer, inner = plan.group
        self.xnumel, self.rnumel = math.prod(outer), math.prod(inner)
        self.reduction = any(p.reductions for p in plan.phases)
        limit = persistent_rnumel if self.xnumel > 1 else min(persistent_rnumel, ONE_ROW_PERSISTENT_RNUMEL)
        self.persistent = self.reduction and self.rnumel <= limit
        self.rblock = next_pow2(self.rnumel) if self.persistent else min(next_pow2(self.rnumel), LOOPED_RBLOCK)
        # a looped row pays for every phase with a read of the row: fold sum + M2 (Welford) and
        # max + sum of exp (online softmax) into one pass each
        self.phases, self.welford = list(plan.phases), {}
        self.acc_names: dict[str, str] = {}
        if self.reduction and not self.persistent:
            self.phases, self.welford = fold_one_pass(plan.phases, self.rnumel)
        self.split = self.splittable()
        self.ws = {}  # reduction buffer -> (workspace pointer name, dtype) of its partials
        self.row_parts = 0  # programs a row of a row split (0: none)
        if row_split and self.reduction and not self.persistent and self.xnumel > 1 and self.row_splittable():
            parts = -(-self.rnumel // ROW_SPLIT_PART) if row_split is True else int(row_split)
            if parts <= ROW_SPLIT_MAX_PARTS:
                self.row_parts = parts
                self.rblock = next_pow2(-(-self.rnumel // parts))
                # one zeroed allocation: the partials' words, then a counter a row (a kernel argument of its own:
                # a pointer computed in the kernel would hold 2 registers through the loop)
                self.ws = {"partials": ("ws_ptr", "int64"), "arrivals": ("cnt_ptr", "int64")}
        if self.split:
            step = max(SPLIT_RBLOCK, next_pow2(-(-self.rnumel // SPLIT_MAX)))
            self.rblock = min(LOOPED_RBLOCK, SPLIT_RBLOCK_MAX, step)
            self.nsplit = min(SPLIT_MAX, next_pow2(-(-self.rnumel // self.rblock)))
            chunk = -(-self.rnumel // self.nsplit)
            self.rchunk = -(-chunk // self.rblock) * self.rblock  # a whole number of RBLOCK steps
            self.ws = {buf: (f"ws_ptr{i}", dtype) for i, (buf, _, _, dtype) in enumerate(self.phases[0].reductions)}

    #: ``tl.load``'s ``eviction_policy`` for the row loads being emitted ("" none): see :meth:`eviction`
    evict = ""

    def eviction(self, i: int) -> str:
        """A looped row read by several passes: keep it in L2 for the passes to come (``evict_last``),
        and let the last pass's read leave first (``evict_first``), as Inductor marks its loads."""
        if len(self.phases) < 2 or not LOOPED_EVICTION:
            return ""
        return "evict_first" if i == len(self.phases) - 1 else "evict_last"

    def splittable(self) -> bool:
        """One output element, a looped row, one pass of combinable reductions and nothing stored
        per element: the reduction can be cut into chunks whose partials combine exactly."""
        if not (self.reduction and not self.persistent and self.xnumel == 1 and len(self.phases) == 1):
            return False
        phase = self.phases[0]
        return not phase.stores and not self.welford and all(r[1] in TRITON_COMBINE for r in phase.reductions)

    def row_splittable(self) -> bool:
        """Statistics of the row (float32 sums, maxima, minima, Welford or online-softmax pairs),
        then the stores that use them: the shape of softmax, layer norm, RMS norm. Each part's
        partials then merge exactly; a gather (indirect load) is left to the looped kernel."""
        if len(self.phases) != 2:
            return False
        stats, out = self.phases
        if stats.stores or not stats.reductions or out.reductions or not out.stores:
            return False
        totals = {pair.total for pair in self.welford.get(0, [])}
        exprs = [e for _, _, e, _ in stats.reductions] + [e for _, _, e, _ in out.stores + self.plan.outer_stores]
        if any(load.indirect for e in exprs for load in _loads(e)):
            return False
        return all(dtype == "float32" and (buf in totals or rtype in TRITON_COMBINE)
                   for buf, rtype, _, dtype in stats.reductions)  # fmt: skip

    def row_values(self) -> int:
        """Values one part publishes a row (a 64-bit word each): 2 a Welford pair (mean, M2: the
        count is the part's size) or an online softmax (max, sum of exp), 1 any other reduction."""
        paired = {pair.total for pair in self.welford.get(0, [])}
        return sum(2 if buf in paired else 1 for buf, _, _, _ in self.phases[0].reductions)

    def arg_names(self) -> list[str]:
        ws = [w for w, _ in self.ws.values()]
        extra = ["RCHUNK: tl.constexpr", "NSPLIT: tl.constexpr"] if self.split else []
        extra += ["NPARTS: tl.constexpr", "NPARTS_P2: tl.constexpr", "FLAGS: tl.constexpr"] if self.row_parts else []
        return (
            list(self.ptrs.values()) + ws + ["xnumel", "rnumel", "XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"] + extra
        )

    def constexprs(self) -> dict:
        split = {"RCHUNK": self.rchunk, "NSPLIT": self.nsplit} if self.split else {}
        if self.row_parts:
            split = {"NPARTS": self.row_parts, "NPARTS_P2": next_pow2(self.row_parts), "FLAGS": ROW_SPLIT_FLAGS}
        return {"XBLOCK": self.xblock(), "RBLOCK": self.rblock, **split}

    def stages(self) -> list[tuple[str, int]]:
        """The ``@triton.jit`` functions one launch runs, in order, with their ``num_warps``."""
        if self.split:
            return [(f"{self.name}_partial", reduction_warps(self.rblock)), (self.name, reduction_warps(self.nsplit))]
        return [(self.name, self.num_warps())]

    def acc_name(self, buf: str) -> str:
        """``acc0``, ``acc1``... in the order the kernel meets its reductions: names local to the
        kernel, so two kernels built from the same plan print the same source."""
        return self.acc_names.setdefault(buf, f"acc{len(self.acc_names)}")

    def emit(self, expr, outer: Scope, inner: Scope, mask_inner: str, mask_outer: str) -> str:
        dep = depends_on(expr, self.inner_syms)
        scope = inner if dep else outer
        known = self.reuse(expr, scope, py_const)
        if known:
            return known
        if isinstance(expr, IndexValue) and sympy.sympify(expr.index).is_Number:
            # an index that simplified to a number (a size-1 dim's 0): a Python int has no .to()
            code = tl_const(expr.index, expr.dtype)
        elif isinstance(expr, IndexValue):
            code = f"({py_index(expr.index)}).to({TL_DTYPE[expr.dtype]})"
        elif isinstance(expr, Load):
            index = expr.index
            for s, e in expr.indirect:
                v = self.emit(e, outer, inner, mask_inner, mask_outer)
                index = sympy.sympify(index).xreplace({s: sympy.Symbol(v)})
            mask = mask_inner if dep else mask_outer
            per_row = sympy.sympify(index).free_symbols & set(kernel_vars(self.plan.group)[0])
            policy = self.evict if per_row else "evict_last"  # a weight that every row reads: keep it
            hinted = self.evict or (self.row_parts and not per_row)  # a row split hints only the weights
            evict = f", eviction_policy='{policy}'" if dep and hinted else ""
            code = f"tl.load({self.ptrs[expr.buf]} + {tile_index(index)}, {mask}, other=0{evict})"
        else:
            if expr.op == "pow":
                rule = pow_rule(expr)
            elif expr.op in TRITON_RULES:
                rule = TRITON_RULES[expr.op]
            else:
                raise Unsupported(f"no Triton rule for {expr.op}")
            args = [self.emit(a, outer, inner, mask_inner, mask_outer) for a in expr.args]
            code = rule.format(*args, t=TL_DTYPE[expr.dtype])
            if expr.op == "to_dtype" and isinstance(expr.args[0], Const):  # 1.to(tl.float32) is no Python
                code = tl_const(expr.args[0].value, expr.dtype)
        name = self.tmp()
        scope.lines.append(f"{name} = {code}")
        scope.cse[expr] = name
        return name

    def decompose_lines(self, flat: str, sizes, syms) -> list[str]:
        lines = []
        for d, (size, s) in enumerate(zip(sizes, syms)):
            div = math.prod(sizes[d + 1 :])
            expr = f"({flat} // {div})" if div > 1 else flat
            lines.append(f"{s} = {expr} % {size}" if d > 0 else f"{s} = {expr}")
        return lines

    def source(self) -> str:
        if self.split:
            return self.split_source()
        if self.row_parts:
            return self.row_split_source()
        outer_sizes, inner_sizes = self.plan.group
        xs, rs = kernel_vars(self.plan.group)
        args = ", ".join(self.arg_names())
        head = [f"@triton.jit\ndef {self.name}({args}):", "    xoffset = tl.program_id(0) * XBLOCK"]
        outer = Scope()
        if not self.reduction:  # flatten everything into x
            outer.lines += ["xindex = xoffset + tl.arange(0, XBLOCK)", "xmask = xindex < xnumel * rnumel"]
            outer.lines += self.decompose_lines("xindex", outer_sizes + inner_sizes, xs + rs)
            for phase in self.plan.phases:
                for buf, index, expr, _ in phase.stores:
                    v = self.emit(expr, outer, outer, "xmask", "xmask")
                    outer.lines.append(f"tl.store({self.ptrs[buf]} + {tile_index(index)}, {v}, xmask)")
            for buf, index, expr, _ in self.plan.outer_stores:
                v = self.emit(expr, outer, outer, "xmask", "xmask")
                outer.lines.append(f"tl.store({self.ptrs[buf]} + {tile_index(index)}, {v}, xmask)")
        else:
            outer.lines += ["xindex = xoffset + tl.arange(0, XBLOCK)[:, None]", "xmask = xindex < xnumel"]
            outer.lines += self.decompose_lines("xindex", outer_sizes, xs)
            if self.persistent:
                outer.lines += ["rindex = tl.arange(0, RBLOCK)[None, :]", "rmask = rindex < rnumel"]
                outer.lines += self.decompose_lines("rindex", inner_sizes, rs)
                shared = Scope(outer)  # persistent: one tile, all phases share loads
                for phase in self.plan.phases:
                    self.phase(phase, shared, shared, looped=False)
                outer.lines += shared.lines
                outer.cse.update(shared.cse)
            else:
                for i, phase in enumerate(self.phases):
                    self.evict = self.eviction(i)
                    # (a Welford pass counts its steps from the row's start: it keeps the forward walk)
                    backwards = LOOPED_REVERSE_LAST and 0 < i == len(self.phases) - 1 and not self.welford.get(i)
                    self.phase(phase, outer, None, looped=True, welford=self.welford.get(i, []), backwards=backwards)
                self.evict = ""
            for buf, index, expr, _ in self.plan.outer_stores:
                v = self.emit(expr, outer, outer, "xmask", "xmask")
                outer.lines.append(f"tl.store({self.ptrs[buf]} + {tile_index(index)}, {v}, xmask)")
        return "\n".join(head + ["    " + ln for ln in outer.lines])

    def split_source(self) -> str:
        """Two kernels: ``<name>_partial`` (program p reduces elements [p*RCHUNK, (p+1)*RCHUNK) and
        stores its partials) and ``<name>`` (one program reduces the NSPLIT partials of each reduction,
        in a fixed order, then stores the outputs)."""
        args = ", ".join(self.arg_names())
        start = ["xindex = tl.arange(0, XBLOCK)[:, None]", "xmask = xindex < xnumel"]
        part = Scope()
        part.lines += start + ["rstart = tl.program_id(0) * RCHUNK"]
        self.phase(self.phases[0], part, None, looped=True, rstart="rstart")
        for buf, (ws, _) in self.ws.items():
            part.lines.append(f"tl.store({ws} + tl.program_id(0) + 0 * xindex, {self.accs[buf]}, xmask)")
        final = Scope()
        final.lines += start + ["sindex = tl.arange(0, NSPLIT)[None, :]"]
        for buf, rtype, _, dtype in self.phases[0].reductions:
            acc, ws = self.accs[buf], self.ws[buf][0]
            final.lines += [f"{acc}_part = tl.load({ws} + sindex + 0 * xindex)",
                            f"{acc} = {reduce_rows(rtype, dtype).format(acc + '_part')}"]  # fmt: skip
        for buf, index, expr, _ in self.plan.outer_stores:
            v = self.emit(expr, final, final, "xmask", "xmask")
            final.lines.append(f"tl.store({self.ptrs[buf]} + {tile_index(index)}, {v}, xmask)")
        return "\n\n".join(
            f"@triton.jit\ndef {name}({args}):\n" + "\n".join("    " + ln for ln in scope.lines)
            for name, scope in ((f"{self.name}_partial", part), (self.name, final))
        )

    def row_partials(self, scope: Scope) -> tuple[list, list]:
        """Emit into ``scope`` this part's partial statistics of one row (its values are the loads
        ``scope`` sees). Returns the partials in workspace order, as ``(name, value a missing part
        publishes)``, and how each reduction merges them: ``(WelfordPair | OnlineSoftmaxPair |
        (buf, rtype, dtype), the merged tiles' names)``."""
        stats = self.phases[0]
        mask = "xmask & rmask"
        published, merges = [], []
        pairs = {pair.total: pair for pair in self.welford.get(0, [])}
        for buf, rtype, expr, dtype in stats.reductions:
            v = self.emit(expr, scope, scope, mask, "xmask")
            acc, pair = self.acc_name(buf), pairs.get(buf)
            if isinstance(pair, WelfordPair):  # this part's mean and M2; its count follows from its index
                n, mean, dev, m2 = f"{acc}_n", f"{acc}_mean", f"{acc}_dev", f"{acc}_m2"
                scope.lines += [f"{n} = {part_count('part')}",
                                f"{mean} = tl.sum(tl.where({mask}, {v}, 0.0)) / {n}",
                                f"{dev} = tl.where({mask}, {v} - {mean}, 0.0)",
                                f"{m2} = tl.sum({dev} * {dev})"]  # fmt: skip
                published += [(mean, 0), (m2, 0)]
                merges.append((pair, [f"wf_{acc}_mean", f"wf_{acc}_m2"]))
            elif pair is not None:  # online softmax: this part's max and its sum of exp(x - max)
                mx, total = f"{acc}_max", f"{acc}_sum"
                scope.lines += [f'{mx} = tl.max(tl.where({mask}, {v}, float("-inf")))',
                                f'{total} = tl.sum(tl.where({mask}, tl.exp({v} - tl.where({mx} == float("-inf"), '
                                f"0.0, {mx})), 0.0))"]  # fmt: skip
                published += [(mx, 'float("-inf")'), (total, 0)]
                merges.append((pair, [f"os_{acc}_max", f"os_{acc}_sum"]))
            else:
                part = f"{acc}_part"
                masked = f"tl.where({mask}, {v}, {reduction_init(rtype, dtype)})"
                scope.lines.append(f"{part} = {reduce_all(rtype, dtype).format(masked)}")
                published.append((part, reduction_init(rtype, dtype)))
                merges.append(((buf, rtype, dtype), [f"{acc}_tile"]))
        return published, merges

    def publish_lines(self, published: list, row: str) -> list[str]:
        """Write the partials to the row's workspace slot, one 64-bit word each (the float's bits in
        the low half). With FLAGS, each word also carries the row's number + 1 in its high half,
        written by a relaxed exchange: the word is its own arrival. Without, plain stores, then an
        arrival at the row's counter (release: the stores are visible before it counts)."""
        k, row = len(published), row if row.isidentifier() else f"({row})"
        bits = "({}.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF)"
        return [
            f"wslot = ws_ptr + ({row} * NPARTS + part) * {k}",
            "if FLAGS:",
            f"    wflag = tl.cast({row} + 1, tl.int64) << 32",
            *(f'    tl.atomic_xchg(wslot + {i}, wflag | {bits.format(name)}, sem="relaxed")'
              for i, (name, _) in enumerate(published)),
            "else:  # the float in the word's low half (little-endian)",
            "    wfloat = wslot.to(tl.pointer_type(tl.float32))",
            *(f"    tl.store(wfloat + {2 * i}, {name})" for i, (name, _) in enumerate(published)),
            "    tl.debug_barrier()  # the partials are written before this program arrives",
            f'    tl.atomic_add(cnt_ptr + {row}, 1, sem="release")',
        ]  # fmt: skip

    def collect_lines(self, published: list, tiles: list[str]) -> list[str]:
        """Wait until every part of row ``xrow`` has published, then decode the partials into ``tiles``
        (``[1, NPARTS_P2]``; a missing part's lanes hold the value it would publish). With FLAGS, poll
        the row's words until each carries the row's number: the values come with the last poll. Without,
        poll the row's counter, then read the words."""
        k = len(published)
        # volatile: every poll reads L2 afresh; a lane past NPARTS counts as arrived
        poll = [f"sword{i} = tl.load(sslot + {i}, sindex < NPARTS, other=0, volatile=True)" for i in range(k)]
        ready = " & ".join(f"((sword{i} >> 32) == sflag)" for i in range(k))
        poll.append(f"arrived = tl.min(tl.where(sindex < NPARTS, {ready}, True).to(tl.int32))")
        count = 'arrived = tl.atomic_add(cnt_ptr + xrow, 0, sem="acquire")'
        return [
            "sindex = tl.arange(0, NPARTS_P2)[None, :]",
            f"sslot = ws_ptr + (xrow * NPARTS + sindex) * {k}",
            "if FLAGS:",
            "    sflag = tl.cast(xrow + 1, tl.int64)",
            *("    " + ln for ln in poll),
            "    while arrived == 0:  # every part of the row is running (cooperative launch)",
            *("        " + ln for ln in poll),
            *(f"    {tile} = tl.where(sindex < NPARTS, (sword{i} & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True), "
              f"{other})" for i, ((_, other), tile) in enumerate(zip(published, tiles, strict=True))),
            "else:",
            f"    {count}",
            "    while arrived < NPARTS:  # every part of the row is running (cooperative launch)",
            f"        {count}",
            "    tl.debug_barrier()",
            "    sfloat = sslot.to(tl.pointer_type(tl.float32))",
            # .cg: from L2, where the other programs' partials are, not this SM's L1
            *(f"    {tile} = tl.load(sfloat + {2 * i}, sindex < NPARTS, other={other}, cache_modifier='.cg')"
              for i, ((_, other), tile) in enumerate(zip(published, tiles, strict=True))),
        ]  # fmt: skip

    def row_split_source(self) -> str:
        """One kernel, NPARTS programs a row, the grid what the GPU holds at once (a cooperative
        launch). Program p holds part ``p % NPARTS`` of a row in registers; the row groups
        (``p // NPARTS``) walk the rows. For each row a part loads its part of the next row, publishes
        partial statistics (ROW_SPLIT_AHEAD: the next row's, its first row's before the loop; else
        this row's, the next row's load in flight meanwhile), waits at this row's counter until every
        part has arrived, merges the NPARTS partials (the same combine rules as a looped row's
        lanes) and writes its part of the output.

        The partials and the merged statistics are scalars, not ``[1, 1]`` tiles: Triton 3.6 gave a
        ``[1, 1]`` merge result a layout of its own and moved every ``[1, RBLOCK]`` value computed from it
        through shared memory to the tile's layout (``ttg.convert_layout``; 5132 PTX lines against the
        hand-written prototype's 856), and the kernel ran 45-60x slower than the prototype on the H200.
        A scalar is broadcast in registers."""
        outer_sizes, inner_sizes = self.plan.group
        xs, rs = kernel_vars(self.plan.group)
        stats, out = self.phases
        mask = "xmask & rmask"
        pre = Scope()
        pre.lines += [
            "part = tl.program_id(0) % NPARTS",
            "xstart = tl.program_id(0) // NPARTS",
            "xstep = tl.num_programs(0) // NPARTS",
            "rindex = part * RBLOCK + tl.arange(0, RBLOCK)[None, :]",
            "rmask = rindex < rnumel",
            *self.decompose_lines("rindex", inner_sizes, rs),
            "xindex = xstart + tl.zeros([1, 1], tl.int32)",
            "xmask = xindex < xnumel",
            *self.decompose_lines("xindex", outer_sizes, xs),
        ]
        # the first row's loads, before the loop; the loop loads the next row's into <name>_next
        carried, seen = [], set()
        for load in (ld for _, _, e, _ in stats.reductions for ld in _loads(e)):
            if load not in seen:
                seen.add(load)
                name = self.emit(load, pre, pre, mask, "xmask")
                if sympy.sympify(load.index).free_symbols & set(xs):
                    carried.append((name, load))
        body = Scope(pre)
        body.lines += ["xindex = xrow + tl.zeros([1, 1], tl.int32)", "xmask = xindex < xnumel"]
        body.lines += self.decompose_lines("xindex", outer_sizes, xs)
        if carried:
            body.lines += ["xnext = xindex + xstep", "xmask_next = xnext < xnumel"]
            body.lines += self.decompose_lines("xnext", outer_sizes, [f"{x}_next" for x in xs])
            rename = {x: sympy.Symbol(f"{x}_next") for x in xs}
            for name, load in carried:
                index = sympy.sympify(load.index).xreplace(rename)
                m = "xmask_next & rmask" if depends_on(load, self.inner_syms) else "xmask_next"
                body.lines.append(f"{name}_next = tl.load({self.ptrs[load.buf]} + {tile_index(index)}, {m}, other=0)")
        if ROW_SPLIT_AHEAD and carried:  # publish ahead: the first row's partials before the loop, the next row's in it
            first = Scope(pre)  # its own scope: later rows must not reuse the first row's values
            published, merges = self.row_partials(first)
            pre.lines += ["if xstart < xnumel:"] + ["    " + ln for ln in first.lines]
            pre.lines += ["    " + ln for ln in self.publish_lines(published, "xstart")]
            nxt = Scope(pre)  # the same partials of the row after this one: its loads are the *_next values
            nxt.cse.update({load: f"{name}_next" for name, load in carried})
            self.row_partials(nxt)
            to_next = re.compile(r"\b(xindex|xmask|" + "|".join(str(x) for x in xs) + r")\b")
            lines = [to_next.sub(lambda m: "xnext" if m[1] == "xindex" else f"{m[1]}_next", ln) for ln in nxt.lines]
            body.lines += ["if xrow + xstep < xnumel:"] + ["    " + ln for ln in lines]
            body.lines += ["    " + ln for ln in self.publish_lines(published, "xrow + xstep")]
        else:  # this row's partials, published just before the wait (the next row's loads are in flight)
            published, merges = self.row_partials(body)
            body.lines += self.publish_lines(published, "xrow")
        body.lines += self.collect_lines(published, [t for _, names in merges for t in names])
        for what, _ in merges:  # scalars, as the partials: see the docstring
            if isinstance(what, WelfordPair):  # each part's count, from its index (0 past NPARTS)
                body.lines.append(f"wf_{self.acc_name(what.total)}_n = {part_count('sindex')}")
                self.welford_finish(what, body, scalar=True)
            elif isinstance(what, OnlineSoftmaxPair):
                self.online_softmax_finish(what, body, scalar=True)
            else:
                buf, rtype, dtype = what
                acc = self.acc_name(buf)
                body.lines.append(f"{acc} = {reduce_all(rtype, dtype).format(acc + '_tile')}")
                self.accs[buf] = acc
        self.phase(out, body, body, looped=False)
        for buf, index, expr, _ in self.plan.outer_stores:  # one value a row: written by part 0
            v = self.emit(expr, body, body, "xmask", "xmask")
            body.lines.append(
                f"tl.store({self.ptrs[buf]} + {tile_index(index)}, {v}, xmask & (0 * xindex + part == 0))"
            )
        body.lines += [f"{name} = {name}_next" for name, _ in carried]
        args = ", ".join(self.arg_names())
        lines = pre.lines + ["for xrow in range(xstart, xnumel, xstep):"] + ["    " + ln for ln in body.lines]
        return f"@triton.jit\ndef {self.name}({args}):\n" + "\n".join("    " + ln for ln in lines)

    def phase(self, phase, outer: Scope, shared, looped: bool, welford: list = (), rstart: str = "", backwards=False):
        _, inner_sizes = self.plan.group
        _, rs = kernel_vars(self.plan.group)
        mask = "xmask & rmask"
        if not looped:
            for buf, rtype, expr, _dtype in phase.reductions:
                v = self.emit(expr, outer, shared, mask, "xmask")
                masked = self.tmp()
                shared.lines.append(f"{masked} = tl.where({mask}, {v}, {reduction_init(rtype, _dtype)})")
                acc = self.acc_name(buf)
                shared.lines.append(f"{acc} = {reduce_rows(rtype, _dtype).format(masked)}")
                self.accs[buf] = acc
            for buf, index, expr, _ in phase.stores:
                v = self.emit(expr, outer, shared, mask, "xmask")
                shared.lines.append(f"tl.store({self.ptrs[buf]} + {tile_index(index)}, {v}, {mask})")
            # accumulators become visible to later phases through the shared scope
            return
        # looped: flush invariant lines first, then one loop per phase
        inner = Scope(outer)
        body = []
        by_total = {w.total: w for w in welford}
        for buf, rtype, expr, dtype in phase.reductions:
            if buf in by_total:
                pair = by_total[buf]
                update = self.welford_update if isinstance(pair, WelfordPair) else self.online_softmax_update
                update(pair, outer, inner, mask)
                continue
            acc = self.acc_name(buf)
            outer.lines.append(
                f"{acc}_tile = tl.full([XBLOCK, RBLOCK], {reduction_init(rtype, dtype)}, {TL_DTYPE[dtype]})"
            )
            v = self.emit(expr, outer, inner, mask, "xmask")
            inner.lines.append(
                f"{acc}_tile = tl.where({mask}, {TRITON_COMBINE[rtype].format(acc + '_tile', v)}, {acc}_tile)"
            )
        for buf, index, expr, _ in phase.stores:
            v = self.emit(expr, outer, inner, mask, "xmask")
            inner.lines.append(f"tl.store({self.ptrs[buf]} + {tile_index(index)}, {v}, {mask})")
        first = f"{rstart} + roffset" if rstart else "roffset"  # a split program walks its own chunk
        if backwards:  # the last chunk first (LOOPED_REVERSE_LAST); ``roffset`` still counts up
            outer.lines.append("rlast = (rnumel - 1) // RBLOCK * RBLOCK")
            first = "rlast - roffset"
        body = [f"rindex = {first} + tl.arange(0, RBLOCK)[None, :]", "rmask = rindex < rnumel"]
        body += self.decompose_lines("rindex", inner_sizes, rs) + inner.lines
        outer.lines.append(f"for roffset in range(0, {'RCHUNK' if rstart else 'rnumel'}, RBLOCK):")
        outer.lines += ["    " + ln for ln in body]
        for buf, rtype, _, dtype in phase.reductions:
            if buf in by_total:
                pair = by_total[buf]
                finish = self.welford_finish if isinstance(pair, WelfordPair) else self.online_softmax_finish
                finish(pair, outer)
                continue
            acc = self.acc_name(buf)
            outer.lines.append(f"{acc} = {reduce_rows(rtype, dtype).format(acc + '_tile')}")
            self.accs[buf] = acc

    def welford_update(self, w: WelfordPair, outer: Scope, inner: Scope, mask: str) -> None:
        """Per lane, fold one more element into its running (mean, M2, count) (``welford_reduce``)."""
        t, tile = TL_DTYPE[w.dtype], "wf_" + self.acc_name(w.total)
        for part in ("mean", "m2", "n"):
            outer.lines.append(f"{tile}_{part} = tl.zeros([XBLOCK, RBLOCK], {t})")
        v = self.emit(w.value, outer, inner, mask, "xmask")
        n, inv, delta, mean = self.tmp(), self.tmp(), self.tmp(), self.tmp()
        # Every lane that updates in step k (roffset = k * RBLOCK) has updated in each step before:
        # its count is k + 1, one scalar for the tile. One reciprocal a step, not a division an element.
        inner.lines += [
            f"{n} = {tile}_n + 1",
            f"{inv} = tl.full([1, 1], 1, {t}) / (roffset // RBLOCK + 1)",
            f"{delta} = {v} - {tile}_mean",
            f"{mean} = {tile}_mean + {delta} * {inv}",
            f"{tile}_m2 = tl.where({mask}, {tile}_m2 + {delta} * ({v} - {mean}), {tile}_m2)",
            f"{tile}_mean = tl.where({mask}, {mean}, {tile}_mean)",
            f"{tile}_n = tl.where({mask}, {n}, {tile}_n)",
        ]

    def welford_finish(self, w: WelfordPair, outer: Scope, scalar: bool = False) -> None:
        """Merge the lanes of each row; the sum, M2 and the mean the later phases read become visible
        (``scalar``: one row, merged into scalars; see row_split_source)."""
        total, m2 = self.acc_name(w.total), self.acc_name(w.m2)
        tile, mean = f"wf_{total}", f"mean_{total}"
        axis = "None" if scalar else "1"
        outer.lines.append(
            f"{mean}, {m2}, {tile}_count = tl.reduce(({tile}_mean, {tile}_m2, {tile}_n), {axis}, welford_combine)"
        )
        outer.lines += [] if scalar else [f"{mean} = {mean}[:, None]", f"{m2} = {m2}[:, None]"]
        outer.cse[w.mean] = mean  # later phases spell the mean as sum / n: read the running mean
        # a reader of the sum itself (rare) gets mean * n, written where it is used
        self.accs[w.total], self.accs[w.m2] = f"({mean} * {w.mean.args[1].value})", m2

    def online_softmax_update(self, w: OnlineSoftmaxPair, outer: Scope, inner: Scope, mask: str) -> None:
        """Per lane: the new max, and the running sum rescaled to it plus this element's term."""
        t, tile = TL_DTYPE[w.dtype], "os_" + self.acc_name(w.total)
        outer.lines += [f'{tile}_max = tl.full([XBLOCK, RBLOCK], float("-inf"), {t})',
                        f"{tile}_sum = tl.zeros([XBLOCK, RBLOCK], {t})"]  # fmt: skip
        v = self.emit(w.value, outer, inner, mask, "xmask")
        m, total = self.tmp(), self.tmp()
        inner.lines += [
            f"{m} = tl.maximum({tile}_max, {v})",
            f'{total} = tl.where({m} == float("-inf"), 0.0, {tile}_sum * tl.exp({tile}_max - {m}) + tl.exp({v} - {m}))',
            f"{tile}_max = tl.where({mask}, {m}, {tile}_max)",
            f"{tile}_sum = tl.where({mask}, {total}, {tile}_sum)",
        ]

    def online_softmax_finish(self, w: OnlineSoftmaxPair, outer: Scope, scalar: bool = False) -> None:
        """Merge the lanes of each row: the max and the sum of exp(x - max) the later phases read."""
        mx, total = self.acc_name(w.total), self.acc_name(w.m2)
        tile = f"os_{mx}"
        axis = "None" if scalar else "1"
        outer.lines.append(f"{mx}, {total} = tl.reduce(({tile}_max, {tile}_sum), {axis}, online_softmax_combine)")
        outer.lines += [] if scalar else [f"{mx} = {mx}[:, None]", f"{total} = {total}[:, None]"]
        self.accs[w.total], self.accs[w.m2] = mx, total

    def xblock(self) -> int:
        """Inductor's heuristics pick this per launch; one fixed rule here."""
        if not self.reduction:
            return min(next_pow2(self.xnumel * self.rnumel), 1024)
        if not self.persistent:
            return 1  # a looped row is walked by one program (a split row by NPARTS); more only overflow L2
        return max(1, min(next_pow2(self.xnumel), PROGRAM_TILE // self.rblock))

    def num_warps(self) -> int:
        """Pointwise kernels keep Triton's default (4); reductions scale with the program's tile
        (a looped row: LOOPED_ELEMENTS_PER_THREAD elements a thread a step, 2 to 32 warps)."""
        if not self.reduction:
            return 4
        if self.row_parts:  # a part of 8192 elements: 16 warps, 16 a thread
            return ROW_SPLIT_WARPS or reduction_warps(self.rblock)
        if not self.persistent:
            return max(2, min(32, self.rblock // (32 * LOOPED_ELEMENTS_PER_THREAD)))
        return reduction_warps(self.xblock() * self.rblock)

    def launcher(self) -> str:
        """``launch_<name>(tensors...)``: the kernel's launch with everything but the tensors fixed
        here (grid, ints, constexprs, num_warps), through a :class:`~course_lib.inductor.launcher.DirectLaunch`
        site that, on a GPU, skips Triton's JIT dispatch after the first launch."""
        if self.split:
            return self.split_launcher()
        if self.row_parts:
            return self.row_split_launcher()
        names = ", ".join(self.ptrs.values())
        total = self.xnumel * (1 if self.reduction else self.rnumel)
        site = self.launch_site(self.name, -(-total // self.xblock()), self.num_warps())
        return "\n".join([site, "", "", f"def launch_{self.name}({names}):", f"    site_{self.name}({names})"])

    def launch_site(self, kernel: str, programs: int, num_warps: int, extra: str = "") -> str:
        """One ``site_<kernel> = DirectLaunch(...)`` line: ``kernel[(programs,)](tensors..., xnumel,
        rnumel, **constexprs, num_warps=...)`` with the grid computed now, not per call."""
        consts = ", ".join(f"{k}={v}" for k, v in self.constexprs().items())
        return (
            f"site_{kernel} = DirectLaunch({kernel}, grid=({programs},), ints=({self.xnumel}, {self.rnumel}), "
            f"constexprs=dict({consts}), num_warps={num_warps}{extra})"
        )

    def row_split_launcher(self) -> str:
        """The workspace (``row_values`` words a part and row, then a counter a row: ``ws_ptr`` and
        ``cnt_ptr``), zeroed every call, then the launch; ``row_split=`` makes the site size its grid
        to what the GPU holds at once and launch it cooperatively, and ``choices=`` lets it take the
        counter where the flagged kernel would fit fewer programs (see DirectLaunch)."""
        names = ", ".join(self.ptrs.values())
        device = f"{next(iter(self.ptrs.values()))}.device"
        words = -(-self.xnumel * self.row_parts * self.row_values() // 2) * 2  # the counters 16-byte aligned
        extra = f", row_split={self.row_parts}"
        extra += ", choices=(dict(FLAGS=True), dict(FLAGS=False))" if ROW_SPLIT_FLAGS else ""
        extra += f", maxnreg={ROW_SPLIT_MAXNREG}" if ROW_SPLIT_MAXNREG else ""
        site = self.launch_site(self.name, self.xnumel * self.row_parts, self.num_warps(), extra)
        return "\n".join([site, "", "", f"def launch_{self.name}({names}):",
                          f"    ws = torch.zeros({words + self.xnumel}, dtype=torch.int64, device={device})",
                          f"    site_{self.name}({names}, ws, ws[{words}:])"])  # fmt: skip

    def split_launcher(self) -> str:
        """Allocate the partials (one float per program and reduction), then launch both kernels."""
        names = ", ".join(self.ptrs.values())
        device = next(iter(self.ptrs.values()))
        alloc = [f"    {ws} = torch.empty({self.nsplit}, dtype=torch.{dtype}, device={device}.device)"
                 for ws, dtype in self.ws.values()]  # fmt: skip
        args = ", ".join([names] + [w for w, _ in self.ws.values()])
        (part, wp), (final, wf) = self.stages()
        return "\n".join(
            [self.launch_site(part, self.nsplit, wp), self.launch_site(final, 1, wf), "", "",
             f"def launch_{self.name}({names}):", *alloc, f"    site_{part}({args})", f"    site_{final}({args})"]
        )  # fmt: skip


def row_split_available() -> bool:
    """May long rows be split (ROW_SPLIT)? Only where kernels run natively on a GPU whose Triton can
    launch cooperatively: Triton's interpreter runs programs one after another, and a part waiting
    for the parts after it would wait forever."""
    from course_lib import compat, env

    wanted = os.environ.get("COURSE_ROW_SPLIT", "1" if ROW_SPLIT else "0") != "0"
    if not wanted or env.triton_interpreted():
        return False
    return env.mode() == "gpu" and compat.triton_cooperative_launch()


def module_source(kernels, persistent_rnumel: int | None = None, row_split: bool | int = False) -> str:
    """The Triton module of ``kernels``; ``row_split`` as :class:`TritonKernel` takes it (the backend
    passes :func:`row_split_available`; True here shows what a GPU would run)."""
    persistent_rnumel = persistent_rnumel or PERSISTENT_RNUMEL
    parts = [
        "import triton",
        "import triton.language as tl",
        "",
        "from course_lib.inductor.launcher import DirectLaunch",
        "",
    ]
    body = []
    first_with: dict[str, str] = {}  # kernel source with its name blanked -> the first kernel that had it
    for k in kernels:
        tk = TritonKernel(k.name, k.plan, persistent_rnumel, row_split)
        src = tk.source()
        same = first_with.setdefault(canonical_source(src, k.name), k.name)
        if same != k.name:  # a repeated block (12 identical layers): one function, compiled once
            src = "\n".join(f"{n} = {n.replace(k.name, same, 1)}  # the same kernel as {same}" for n, _ in tk.stages())
        body += [src, "", tk.launcher(), ""]
        if any(name in src for name in NAN_REDUCE.values()) and KEEP_NAN_HELPERS not in parts:
            parts += [KEEP_NAN_HELPERS]
        kinds = {type(pair) for pairs in tk.welford.values() for pair in pairs}
        for kind, helper in ((WelfordPair, WELFORD_COMBINE), (OnlineSoftmaxPair, ONLINE_SOFTMAX_COMBINE)):
            if kind in kinds and helper not in parts:
                parts += [helper]
        if (tk.split or tk.row_parts) and "import torch" not in parts:
            parts.insert(0, "import torch")  # the launcher allocates the partials
    return "\n".join(parts + body)


def canonical_source(source: str, name: str) -> str:
    """A kernel's source with its own name blanked: two kernels that differ only by name are one
    kernel (Inductor's ``src_to_kernel`` reuse; its code cache keys kernels by a hash of this text)."""
    return re.sub(rf"\bdef {name}(_partial)?\(", r"def KERNEL\1(", source)


def build(kernels, graph, persistent_rnumel: int | None = None, row_split: bool | int | None = None):
    """The Triton backend of :data:`course_lib.inductor.compile_fx.BACKENDS`: write the module
    under the cache (``triton.jit`` needs a real file), import it, and return
    ``(source, {kernel name: launcher}, pointer_args=False)``. ``row_split`` None: where
    :func:`row_split_available`."""
    from course_lib import env

    dtypes = graph if isinstance(graph, dict) else {b.name: b.dtype for b in graph.buffers}
    row_split = row_split_available() if row_split is None else row_split
    source = module_source(kernels, persistent_rnumel, row_split)
    key = env.artefact_key(source)
    path = env.artefact("inductor", f"triton_{key}.py", lambda tmp: tmp.write_text(source))
    spec = importlib.util.spec_from_file_location(f"course_triton_{key}", path)
    mod = importlib.util.module_from_spec(spec)
    # Registered under its name, as an import would be: the precompile's jobs (and a worker, or the
    # parent running a job itself) import the module by that name and find this copy, not a second one.
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    fns = {}
    for k in kernels:
        launch = getattr(mod, f"launch_{k.name}")
        tk = TritonKernel(k.name, k.plan, persistent_rnumel or PERSISTENT_RNUMEL, row_split)
        launch.jit_fn = getattr(mod, k.name)  # the kernel that stores the outputs
        launch.signature = {
            **{p: "*" + TRITON_SIG[dtypes.get(b, "float32")] for b, p in tk.ptrs.items()},
            **{ws: "*" + TRITON_SIG[dtype] for ws, dtype in tk.ws.values()},
            "xnumel": "i32",
            "rnumel": "i32",
            **{c: "constexpr" for c in tk.constexprs()},
        }
        launch.constexprs = tk.constexprs()
        site = getattr(mod, f"site_{k.name}")
        launch.options = site.options  # launch options the JIT keys on too
        launch.choices = site.choices  # a row split's protocols: each is precompiled
        launch.num_warps = tk.stages()[-1][1]
        launch.int_args = {"xnumel": tk.xnumel, "rnumel": tk.rnumel}  # the JIT specialises on their values
        # every @triton.jit function the launch runs (two for a split reduction), with its num_warps
        launch.stages = [(name, getattr(mod, name), warps) for name, warps in tk.stages()]
        fns[k.name] = launch
    if env.mode() == "gpu" and not env.triton_interpreted():
        from course_lib.inductor import async_compile

        if async_compile.enabled():  # compile the kernels in a process pool now, not one by one at first launch
            async_compile.precompile(fns, spec.name, str(path))
    return source, fns, False


TRITON_SIG = {"float32": "fp32", "float64": "fp64", "float16": "fp16", "bfloat16": "bf16", "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
              "uint8": "u8", "bool": "i1"}  # fmt: skip


def compile_to_ptx(compiled, target: str = "sm_90", aligned: bool = False, constexprs: dict | None = None) -> dict:
    """Every stage (TTIR ... PTX) of each Triton kernel of a ``CompiledGraph`` built with
    ``codegen="triton"``, through course_lib.triton.compile_stages (no GPU needed). Keyed by jit function
    name (a split reduction has ``<name>_partial`` too); a kernel that is an alias of an earlier
    identical one is left out. ``aligned=True`` compiles for 16-byte-aligned pointers and sizes divisible
    by 16, as a launch with such tensors specialises (vector loads: fewer registers). ``constexprs``
    overrides a kernel's own where it has them (``{"FLAGS": False}``: a row split's counter protocol)."""
    from course_lib.triton import compile_stages

    call_globals = compiled.call.__globals__
    out, seen = {}, set()
    for k in compiled.schedule.kernels:
        if k.kind == "kernel":
            launch = call_globals[k.name]
            for name, jit_fn, warps in launch.stages:
                if id(jit_fn) in seen:  # an alias of an identical kernel (a repeated layer): compiled once, shown once
                    continue
                seen.add(id(jit_fn))
                consts = {
                    **launch.constexprs,
                    **{k: v for k, v in (constexprs or {}).items() if k in launch.constexprs},
                }
                out[name] = compile_stages(jit_fn, launch.signature, consts, target, num_warps=warps, aligned=aligned)
    return out
