"""Loop-level IR: the buffers and per-element bodies Inductor's lowering produces.

Teaches ``torch/_inductor/ir.py`` (``Pointwise``, ``Reduction``, ``ComputedBuffer``,
``ExternKernel``) and the ``ops.*`` vocabulary of ``torch/_inductor/virtualized.py``.

Position: ATen FX graph --lowering.py--> **GraphIR** (this file) --scheduler.py--> kernels.

Each realized buffer is one node. Its body is an expression tree that computes one element,
given the node's index variables ``i0, i1, ...`` (one per output dimension) and, for a
reduction, ``r0, r1, ...`` (one per reduced dimension). Memory is touched only through
:class:`Load` with a sympy index expression, so "which element of which buffer" is plain
algebra that fusion and code generation can compare and substitute.

Sizes are ints, or sympy expressions of size symbols ``s0, s1, ...`` when the graph is compiled
for dynamic shapes (sizevars.py).

Simplified against Inductor: every buffer is contiguous except graph inputs and extern outputs,
every pointwise op is realized (Inductor already inlines pointwise chains while lowering; here
the scheduler does all the fusing so the ladder is visible), reductions are two-pass (no Welford).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import sympy

# the index algebra lives in sizevars.py; these names are re-exported for lowering.py and the notebooks
from course_lib.inductor.sizevars import (  # noqa: F401
    FloorDiv,
    ModIdx,
    SizeVars,
    contiguous_strides,
    decompose,
    flat_index,
    prod,
    split_div_mod,
    subs_index,
    sym,
)

# ---------------------------------------------------------------------------
# element expressions (the ops.* vocabulary)
# ---------------------------------------------------------------------------


def _cached_hash(self) -> int:
    """A frozen dataclass hashes its fields on every call, so a set of expressions rehashed whole
    subtrees each time: exponential for a recurrence, where step t's expression holds step t-1's
    twice (RWKV's and Kimi-Linear's compiles took 200 s). Computed once, kept on the instance."""
    h = self.__dict__.get("_hash")
    if h is None:
        h = self.__dict__["_hash"] = hash(tuple(getattr(self, f) for f in self.__dataclass_fields__))
    return h


def walk(expr):
    """Every distinct sub-expression of ``expr`` (each object once, however often it is shared),
    children before parents, the index expressions of indirect loads included. Expressions are
    DAGs: a walk that recursed into every use of a shared node would be exponential in depth."""
    seen, order, stack = set(), [], [(expr, False)]
    while stack:
        e, done = stack.pop()
        if done:
            order.append(e)
            continue
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.append((e, True))
        kids = e.args if isinstance(e, Op) else [x for _, x in e.indirect] if isinstance(e, Load) else ()
        stack.extend((k, False) for k in reversed(kids))
    return order


def nodes(expr):
    """Every distinct sub-expression of ``expr``, parents first, lazily: for ``any(...)`` tests that
    stop at the first hit (:func:`walk` lists them all, children first)."""
    seen, stack = set(), [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(e.args if isinstance(e, Op) else [x for _, x in e.indirect] if isinstance(e, Load) else ())


@dataclass(frozen=True)
class Load:
    """Read ``buf`` at flat element ``index``; ``indirect`` binds symbols to loaded values
    (``gather``: the index itself depends on data)."""

    buf: str
    index: sympy.Expr
    dtype: str
    indirect: tuple = ()

    def __str__(self):
        ind = "".join(f", {s}={e}" for s, e in self.indirect)
        return f"load({self.buf}, {self.index}{ind})"

    __hash__ = _cached_hash


@dataclass(frozen=True)
class Const:
    value: float | int | bool
    dtype: str

    def __str__(self):
        return f"constant({self.value!r}, {self.dtype})"


@dataclass(frozen=True)
class IndexValue:
    """The index expression itself as a value (``iota``, masks such as ``i0 == target``)."""

    index: sympy.Expr
    dtype: str

    def __str__(self):
        return f"index_expr({self.index}, {self.dtype})"


@dataclass(frozen=True)
class Op:
    op: str
    args: tuple
    dtype: str

    def __str__(self):
        return f"{self.op}({', '.join(str(a) for a in self.args)})"

    __hash__ = _cached_hash


Expr = Load | Const | IndexValue | Op

#: unary and binary ops every code generator must implement (arity per op).
ARITY = {
    "add": 2, "sub": 2, "mul": 2, "truediv": 2, "maximum": 2, "minimum": 2, "pow": 2,
    "lt": 2, "le": 2, "gt": 2, "ge": 2, "eq": 2, "ne": 2, "logical_and": 2, "logical_or": 2,
    "neg": 1, "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "erf": 1, "sigmoid": 1,
    "relu": 1, "abs": 1, "reciprocal": 1, "sin": 1, "cos": 1, "log1p": 1, "expm1": 1,
    "logical_not": 1, "bitwise_not": 1, "floor": 1, "ceil": 1, "to_dtype": 1, "where": 3, "fma": 3,
}  # fmt: skip

FLOAT_DTYPES = ("float32", "float64")
#: storage-only floats: loaded, then computed in float32, and rounded back on store (Inductor's
#: ``upcast_to_fp32``: a GPU's half-precision arithmetic units are no faster for memory-bound
#: kernels, and float32 keeps the intermediate steps of a fused kernel from rounding)
HALF_DTYPES = ("float16", "bfloat16")
FLOATING = FLOAT_DTYPES + HALF_DTYPES  # every float a buffer may hold
DTYPES = ("float32", "float64", *HALF_DTYPES, "int64", "int32", "int16", "int8", "uint8", "bool")


#: dtypes every value of which a half-precision float holds exactly (8 significant bits in bfloat16)
EXACT_IN_HALF = ("bool", "int8", "uint8")


def compute_dtype(dtype: str) -> str:
    """The dtype a kernel computes a value of ``dtype`` in: float32 for the half-precision floats."""
    return "float32" if dtype in HALF_DTYPES else dtype


def upcast(expr, dtype: str):
    """``expr`` (a buffer's body, or a reduction's operand when ``dtype`` is a compute dtype)
    with half-precision values computed in float32: a half load is converted as it is read, a half
    op or constant becomes a float32 one, and a conversion *to* half inside the body stays a
    rounding (to half, back to float32), since the model asked for it. The result is converted
    to ``dtype`` when that is half (the store). A body without half values comes back as it is."""
    if not _has_half(expr) and dtype not in HALF_DTYPES:
        return expr
    out = _upcast(expr)
    if dtype in HALF_DTYPES:
        if _is_round_trip(out, dtype):
            return out.args[0]
        return Op("to_dtype", (out,), dtype)
    return out


def _has_half(e) -> bool:
    if getattr(e, "dtype", None) in HALF_DTYPES:
        return True
    return any(_has_half(a) for a in getattr(e, "args", ())) or any(_has_half(x) for _, x in getattr(e, "indirect", ()))


def _is_round_trip(e, half: str) -> bool:
    return isinstance(e, Op) and e.op == "to_dtype" and e.dtype == "float32" and e.args[0].dtype == half


def _upcast(e):
    if isinstance(e, Load):
        ld = Load(e.buf, e.index, e.dtype, tuple((s, _upcast(x)) for s, x in e.indirect)) if e.indirect else e
        return Op("to_dtype", (ld,), "float32") if e.dtype in HALF_DTYPES else ld
    if isinstance(e, Op):
        args = tuple(_upcast(a) for a in e.args)
        if e.dtype not in HALF_DTYPES:
            if e.op == "to_dtype" and args[0].dtype == e.dtype:  # a half value widened: once is enough
                return args[0]
            return Op(e.op, args, e.dtype)
        if e.op != "to_dtype":
            return Op(e.op, args, "float32")
        (x,) = args
        if _is_round_trip(x, e.dtype):  # a half value read and converted back: already rounded
            return x
        if x.dtype in EXACT_IN_HALF:  # a mask or a byte: no rounding to do
            return Op("to_dtype", (x,), "float32")
        return Op("to_dtype", (Op("to_dtype", (x,), e.dtype),), "float32")
    if isinstance(e, Const | IndexValue) and e.dtype in HALF_DTYPES:
        return dataclasses.replace(e, dtype="float32")
    return e


def loads(expr) -> list[Load]:
    """Every distinct Load in ``expr``, in first-use order."""
    return list(dict.fromkeys(e for e in walk(expr) if isinstance(e, Load)))


def map_loads(expr, fn):
    """Rebuild ``expr`` with every Load replaced by ``fn(load)``."""
    if isinstance(expr, Load):
        return fn(expr)
    if isinstance(expr, Op):
        return Op(expr.op, tuple(map_loads(a, fn) for a in expr.args), expr.dtype)
    return expr


def count_ops(expr) -> int:
    """Arithmetic ops in one element's body (the flop estimate of the roofline), a shared
    sub-expression counted at every use, as the expression reads (in one pass over the DAG)."""
    count: dict[int, int] = {}
    for e in walk(expr):
        if isinstance(e, Op):
            count[id(e)] = (0 if e.op == "to_dtype" else 1) + sum(count[id(a)] for a in e.args)
        elif isinstance(e, Load):
            count[id(e)] = sum(count[id(x)] for _, x in e.indirect)
        else:
            count[id(e)] = 0
    return count[id(expr)]


# ---------------------------------------------------------------------------
# buffers
# ---------------------------------------------------------------------------

ITEMSIZE = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}


@dataclass
class Buffer:
    """One node of the pre-fusion IR.

    kind: ``input`` (graph placeholder), ``pointwise``, ``reduction``, ``extern`` (an ATen
    call the wrapper makes: matmul, convolution, anything not lowered), ``alias`` (an
    element of an extern's tuple result).
    """

    name: str
    kind: str
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] = ()
    body: Expr | None = None
    reduction_ranges: tuple[int, ...] = ()
    reduction_type: str | None = None
    extern: dict = field(default_factory=dict)  # target, args template, tensor inputs
    origin: str = ""  # the FX node it came from

    def __post_init__(self):
        if not self.stride:
            self.stride = contiguous_strides(self.shape)

    @property
    def numel(self):
        """Element count: an int, or a sympy expression of size symbols (dynamic shapes)."""
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE.get(self.dtype, 4)

    def index_vars(self) -> list[sympy.Symbol]:
        return [sym(f"i{d}") for d in range(len(self.shape))]

    def reduction_vars(self) -> list[sympy.Symbol]:
        return [sym(f"r{d}") for d in range(len(self.reduction_ranges))]

    def reads(self) -> list[str]:
        """Buffer names this node reads, in first-use order."""
        if self.kind in ("pointwise", "reduction"):
            return list(dict.fromkeys(ld.buf for ld in loads(self.body)))
        return list(self.extern.get("inputs", ()))

    def __str__(self):
        head = f"{self.name}: {self.kind.capitalize()}(dtype={self.dtype}, size={list(self.shape)}"
        if self.kind == "reduction":
            head += f", reduction_ranges={list(self.reduction_ranges)}, reduction_type={self.reduction_type}"
        if self.kind in ("pointwise", "reduction"):
            args = ", ".join(str(v) for v in self.index_vars() + self.reduction_vars())
            return f"{head})\n    def inner_fn({args}):\n        return {self.body}"
        if self.kind == "extern":
            return (
                f"{head}, stride={list(self.stride)})\n    {self.extern['target']}({', '.join(self.extern['inputs'])})"
            )
        return f"{head}, stride={list(self.stride)})"


@dataclass
class GraphIR:
    """All buffers of one graph in execution order, plus its inputs and outputs."""

    buffers: list[Buffer]
    inputs: list[str]
    outputs: list  # per output: ("buf", name, size, stride, offset) | ("none",) | ("size", int or size expression)
    fallback_reason: str | None = None
    sizevars: SizeVars = field(default_factory=SizeVars)  # size symbols of a dynamic-shape graph
    scalar_inputs: dict = field(default_factory=dict)  # SymInt placeholder name -> its size expression

    def buffer(self, name: str) -> Buffer:
        """The buffer called ``name`` (the name index is built once, on first use)."""
        index = self.__dict__.get("_index")
        if index is None or len(index) != len(self.buffers):
            index = self.__dict__["_index"] = {b.name: b for b in self.buffers}
        return index[name]

    def position(self, name: str) -> int:
        """Execution-order position of a buffer."""
        positions = self.__dict__.get("_positions")
        if positions is None or len(positions) != len(self.buffers):
            positions = self.__dict__["_positions"] = {b.name: i for i, b in enumerate(self.buffers)}
        return positions[name]

    def nbytes(self, name: str) -> int:
        """Bytes of a buffer, size symbols evaluated at their example values."""
        b = self.buffer(name)
        return self.sizevars.hint(b.numel) * ITEMSIZE.get(b.dtype, 4)

    def __str__(self):
        """Printed like ``ir_pre_fusion.txt`` under TORCH_COMPILE_DEBUG=1."""
        return "\n".join(str(b) for b in self.buffers if b.kind not in ("input",))

    def replace(self, **kw) -> GraphIR:
        return dataclasses.replace(self, **kw)

    @property
    def dynamic(self) -> bool:
        """True when some size is a symbol (compiled once for many sizes)."""
        return bool(self.sizevars)
