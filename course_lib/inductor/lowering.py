"""Lowering: an ATen-level FX graph -> :class:`GraphIR` (buffers with element bodies).

Teaches ``torch/_inductor/lowering.py`` (``@register_lowering(aten.add)`` ...) and
``torch/_inductor/graph.py`` (``GraphLowering.run_node``: an FX Interpreter whose values are
IR nodes instead of tensors).

Every FX value becomes a :class:`TensorValue`: a shape, a dtype and ``fn(index) -> Expr``
that says how to compute one element from per-dimension index expressions. Views
(``view``, ``permute``, ``expand``, ``select``, ``slice``...) only rewrite the index function
and never copy. Pointwise ops and reductions are *realized* into a :class:`Buffer`.
``mm``, ``addmm``, ``convolution`` and every op without a lowering become extern calls
(Inductor's ``ExternKernel`` / ``FallbackKernel``), so a graph always lowers; it is refused
(:class:`Unsupported`, the backend then runs it in eager) only for non-tensor values, dtypes
the code generators do not know, or an extern call whose result size depends on its data.

Dynamic shapes: a size may be a sympy expression of size symbols ``s0, s1, ...``
(sizevars.py). They come from the inputs' symbolic sizes (``FakeTensor`` sizes that are
``SymInt``, and ``SymInt`` placeholders, as AOT Autograd hands them over after
``torch.compile(dynamic=True)``); torch's symbols are renamed ``s0, s1, ...`` in order of
appearance. A node whose value is a ``SymInt`` (``sym_size``, ``s0 * 4``) lowers to its
expression, so ``view(x, [s0, 4])`` gets symbolic sizes too.

Input: the graph AOT Autograd hands a backend after Inductor's decompositions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import sympy

from course_lib.inductor.ir import (
    DTYPES,
    FLOAT_DTYPES,
    FLOATING,
    Buffer,
    Const,
    GraphIR,
    IndexValue,
    Load,
    Op,
    compute_dtype,
    contiguous_strides,
    decompose,
    flat_index,
    loads,
    map_loads,
    subs_index,
    sym,
    upcast,
)  # fmt: skip
from course_lib.inductor.sizevars import (
    FloorDiv,
    Max,
    Min,
    ModIdx,
    SizeVars,
    free_sizes,
    from_torch,
    is_static,
    prod,
    size_symbol,
)


class Unsupported(Exception):
    """This graph cannot be compiled by course_lib; the message is the reason logged."""


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass
class TensorArg:
    """A tensor argument of an extern call or a graph output: ``as_strided(buf, size, stride, offset)``."""

    buf: str
    size: tuple
    stride: tuple
    offset: int = 0


@dataclass
class TensorValue:
    shape: tuple
    dtype: str
    fn: Callable  # list[sympy.Expr] -> Expr
    layout: tuple | None = None  # (buf, strides, offset) when an affine view of a buffer


def _one_element(nd: int, dims, keepdim: bool, idx) -> list:
    """Input index of a reduction's output element ``idx`` when every reduced axis has size 1."""
    it, full = iter(idx), []
    for d in range(nd):
        if d in dims:
            if keepdim:
                next(it)
            full.append(sympy.Integer(0))
        else:
            full.append(next(it))
    return full


def _as_tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def cast(expr, dtype: str):
    return expr if expr.dtype == dtype else Op("to_dtype", (expr,), dtype)


class Lowering:
    """One FX graph being lowered; holds the buffer list and name counter (no global state)."""

    def __init__(self, gm):
        self.gm = gm
        self.buffers: list[Buffer] = []
        self.env: dict = {}
        self.counter = 0
        self.indirect = 0
        self.sizevars = SizeVars()
        self.renames: dict = {}  # torch's size symbol -> ours (s0, s1, ... in order of appearance)
        self.scalar_inputs: dict = {}
        self.hints: dict = {}  # example values of course_lib.fake's size symbols, when it made them
        self.channels_last = False  # decided in run() by :func:`decide_layout_opt`
        self.keep_output_strides = False  # outputs with the trace's strides (see compile_graph)

    # -- sizes -------------------------------------------------------------------------
    def size(self, value):
        """An int, or the sympy expression of a size in our size symbols.

        ``value``: an int, a ``torch.SymInt`` (torch's ShapeEnv), or a sympy expression over
        course_lib.fake's symbols (their example values in :attr:`hints`).
        """
        from course_lib import compat

        if isinstance(value, int) or is_static(value):
            return int(value)
        if isinstance(value, sympy.Expr):  # course_lib.fake's ShapeEnv
            expr, hints = value, {s: self.hints[s] for s in value.free_symbols if s in self.hints}
        else:
            expr, hints = from_torch(compat.symint_expr(value)), compat.symbol_hints([value])
        for s in sorted(expr.free_symbols, key=str):
            if s not in self.renames:
                self.renames[s] = size_symbol(f"s{len(self.renames)}")
        for s, v in hints.items():
            self.sizevars.hints.setdefault(self.renames.get(s, s), v)
        out = expr.xreplace(self.renames)
        return int(out) if out.is_Integer else out

    def bind_sources(self, pos: int, shape) -> None:
        """Record where the call reads each size symbol: the first input dim that is exactly it."""
        for d, size in enumerate(shape):
            if not is_static(size) and size.is_Symbol and size not in self.sizevars.sources:
                self.sizevars.sources[size] = (pos, d)

    # -- buffers -------------------------------------------------------------------------
    def new_name(self) -> str:
        name = f"buf{self.counter}"
        self.counter += 1
        return name

    def add(self, buf: Buffer) -> Buffer:
        self.buffers.append(buf)
        return buf

    def buffer_value(self, buf: Buffer) -> TensorValue:
        return strided_value(buf.name, buf.shape, buf.stride, 0, buf.dtype)

    def pointwise(self, shape, dtype, fn, origin="") -> TensorValue:
        if dtype not in DTYPES:
            raise Unsupported(f"dtype {dtype} has no code generator rule (op {origin})")
        shape = tuple(shape)
        buf = Buffer(self.new_name(), "pointwise", shape, dtype, origin=origin)
        buf.body = _known_dtypes(upcast(cast(fn(buf.index_vars()), dtype), dtype), origin)
        return self.buffer_value(self.add(buf))

    def reduction(self, x: TensorValue, dims, keepdim, rtype, dtype, origin="") -> TensorValue:
        nd = len(x.shape)
        dims = sorted({d % nd for d in (dims if dims else range(nd))}) if nd else []
        out_shape = tuple(1 if d in dims else s for d, s in enumerate(x.shape) if keepdim or d not in dims)
        ranges = tuple(x.shape[d] for d in dims)
        if is_static(prod(ranges)) and prod(ranges) == 1:
            # nothing to combine (a 0-d input, or size-1 axes): the one element *is* the result.
            # Inductor's Reduction.create makes a Pointwise here too; a reduction loop over a single
            # element would have to get its accumulator update exactly right for no gain.
            return self.pointwise(out_shape, dtype, lambda idx: x.fn(_one_element(nd, dims, keepdim, idx)), origin)
        buf = Buffer(
            self.new_name(),
            "reduction",
            out_shape,
            dtype,
            reduction_ranges=tuple(x.shape[d] for d in dims),
            reduction_type=rtype,
            origin=origin,
        )
        ivars, rvars = iter(buf.index_vars()), iter(buf.reduction_vars())
        idx = []
        for d in range(nd):
            if d in dims:
                if keepdim:
                    next(ivars)
                idx.append(next(rvars))
            else:
                idx.append(next(ivars))
        # a half-precision reduction accumulates in float32 (the scheduler's accumulator); its
        # result is rounded once, when it is stored
        buf.body = _known_dtypes(upcast(cast(x.fn(idx), dtype), compute_dtype(dtype)), origin)
        return self.buffer_value(self.add(buf))

    def realize(self, v: TensorValue, origin="") -> TensorArg:
        """A tensor argument for an extern or an output: a view when affine, else a copy kernel."""
        if v.layout is None:
            v = self.pointwise(v.shape, v.dtype, v.fn, origin=origin or "realize")
        buf, strides, offset = v.layout
        return TensorArg(buf, tuple(v.shape), tuple(strides), offset)

    # -- the interpreter loop --------------------------------------------------------------
    def run(self, example_inputs, size_guards=()) -> GraphIR:
        inputs, outputs = [], []
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        import torch

        for pos, (node, ex) in enumerate(zip(placeholders, example_inputs, strict=True)):
            if isinstance(ex, torch.SymInt):  # a size handed over as a value (dynamic shapes)
                self.scalar_inputs[node.name] = self.env[node] = self.size(ex)
                inputs.append(node.name)
                continue
            if not isinstance(ex, torch.Tensor) and not _is_course_fake(ex):
                raise Unsupported(f"input {node.name} is a {type(ex).__name__}, not a tensor")
            shape = tuple(self.size(s) for s in ex.shape)
            stride = tuple(self.size(s) for s in (ex.stride() if callable(ex.stride) else ex.stride))
            self.bind_sources(pos, shape)
            buf = self.add(Buffer(node.name, "input", shape, dtype_name(ex.dtype), stride=stride, origin=node.name))
            inputs.append(buf.name)
            self.env[node] = self.buffer_value(buf)
        for pos, name in enumerate(inputs):  # a symbol seen only as a SymInt input is read from it
            expr = self.scalar_inputs.get(name)
            if expr is not None and not is_static(expr) and expr.is_Symbol:
                self.sizevars.sources.setdefault(expr, (pos, None))
        missing = [s for s in self.sizevars.hints if s not in self.sizevars.sources]
        if missing:
            raise Unsupported(f"size symbols {missing} are not the size of any input dim")
        for g in size_guards:  # what torch assumed about the sizes while tracing (s0 % 2 == 0 ...)
            g = from_torch(g)
            if g.free_symbols <= set(self.renames):
                self.sizevars.guards.append(g.xreplace(self.renames))
        self.channels_last = decide_layout_opt(self.gm, example_inputs)
        for node in self.gm.graph.nodes:
            if node.op == "call_function":
                self.env[node] = self.match_torch_shape(node, self.call_function(node))
            elif node.op == "output":
                for v in _as_tuple(node.args[0]):
                    outputs.append(self.output(v))
            elif node.op != "placeholder":
                raise Unsupported(f"FX op {node.op} ({node.name}) is not handled")
        return GraphIR(self.buffers, inputs, outputs, sizevars=self.sizevars, scalar_inputs=self.scalar_inputs)

    def match_torch_shape(self, node, value):
        """``value`` with the shape torch's trace gave ``node`` (``meta["val"]``) where the two differ.

        Where torch's size is a number and the course's a size expression with that value at the
        example sizes, torch knew more: a guard it recorded fixed the expression (LongT5 at 12 tokens:
        ``(s0 + (-s0) % 128) // 128`` blocks is 1, so broadcasting it against 1 gives 1, which the
        course's broadcast cannot see). The course takes torch's number and keeps the equality as
        a guard its call checks. Sizes that differ at the example sizes are a lowering bug: the graph
        is refused rather than computed with a wrong shape."""
        meta = node.meta.get("val")
        if not isinstance(value, TensorValue) or not hasattr(meta, "shape") or len(meta.shape) != len(value.shape):
            return value
        shape = list(value.shape)
        for d, (got, torch_size) in enumerate(zip(value.shape, meta.shape, strict=True)):
            want = self.size(torch_size)
            if got == want:
                continue
            try:
                same = self.sizevars.hint(got) == self.sizevars.hint(want)
            except (TypeError, KeyError, ValueError):  # a symbol without an example value
                continue
            if not same:
                raise Unsupported(f"{node.name}: size {got} of dim {d} where torch's trace has {want}")
            if is_static(want) or is_static(got):  # a guard fixed it: the number, checked at each call
                self.sizevars.guards.append(sympy.Eq(got, want))
                shape[d] = int(want) if is_static(want) else int(got)
        return value if shape == list(value.shape) else TensorValue(tuple(shape), value.dtype, value.fn, value.layout)

    def output(self, v):
        if v is None:
            return ("none",)
        if isinstance(v, int):  # a size the graph was specialised to (a static retrace of a dynamic graph)
            return ("size", sympy.Integer(v))
        val = self.env[v]
        if isinstance(val, int) or isinstance(val, sympy.Expr):
            # a size returned as a value: with dynamic shapes torch's partitioner saves the forward's
            # SymInt inputs (s0) for the backward graph, so the forward returns them
            return ("size", self.runtime_size(val, v))
        if not isinstance(val, TensorValue):
            raise Unsupported(f"output {v} is not a tensor")
        meta = v.meta.get("val") if self.keep_output_strides else None
        want = tuple(self.size(s) for s in meta.stride()) if meta is not None and hasattr(meta, "stride") else ()
        # the strides the graph's consumer was traced with; a stride with a function the code
        # generators do not print (see _index_functions_only) leaves that output in the course's layout
        if want and all(is_static(w) or _index_functions_only(w) for w in want):
            val = self.require_strides(val, want, origin=f"output {v.name}")
        arg = self.realize(val, origin=f"output {v.name}")
        return ("buf", arg.buf, arg.size, arg.stride, arg.offset)

    def arg(self, a):
        import torch.fx

        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        return a

    def call_function(self, node):
        target = node.target
        args, kwargs = self.arg(node.args), {k: self.arg(v) for k, v in node.kwargs.items()}
        if target is operator.getitem:
            base = args[0]
            if isinstance(base, tuple):
                return base[args[1]]
            return self.extern_item(node, base, args[1])
        key = str(target)
        meta = node.meta.get("val")
        import torch

        if isinstance(meta, torch.SymInt):  # sym_size, s0 * 4, ...: the value is a size expression
            return self.size(meta)
        _check_meta(node, meta)
        rule = LOWERINGS.get(key)
        if rule is not None and not _foreign_dtype(node):
            return rule(self, node, *args, **kwargs)
        return self.extern(node, args, kwargs)

    # -- externs ---------------------------------------------------------------------------
    def extern(self, node, args, kwargs) -> TensorValue | tuple:
        """Call the ATen op from the Python wrapper (Inductor's ExternKernel / FallbackKernel)."""
        import torch

        inputs = []

        def conv(a):
            if isinstance(a, TensorValue):
                t = self.realize(a, origin=f"input of {node.name}")
                inputs.append(t.buf)
                return t
            if isinstance(a, (list, tuple)):
                return type(a)(conv(x) for x in a)
            if isinstance(a, torch.dtype | torch.device | torch.layout | torch.memory_format) or a is None:
                return a
            if isinstance(a, (int, float, bool, str, complex)):  # complex: polar's backward multiplies by 1j
                return a
            if isinstance(a, sympy.Expr):  # a SymInt argument (new_zeros([s0, 8])): the wrapper computes it
                return self.runtime_size(a, node)
            raise Unsupported(f"argument {a!r} of {node.target} cannot be passed to an extern call")

        to_nhwc = CHANNELS_LAST_ARGS.get(str(node.target), ()) if self.channels_last else ()
        args = tuple(self.require_channels_last(a) if i in to_nhwc else a for i, a in enumerate(args))
        layouts = ATTENTION_LAYOUTS.get(str(node.target), {}) if _on_cuda(node) else {}
        args = tuple(self.require_layout(a, layouts[i]) if i in layouts else a for i, a in enumerate(args))
        args = tuple(self.require_storage(a, node.args[i]) if i in STORAGE_ARGS.get(str(node.target), ()) else a
                     for i, a in enumerate(args))  # fmt: skip
        cargs, ckw = conv(args), {k: conv(v) for k, v in kwargs.items()}
        meta = node.meta.get("val")
        spec = {"target": str(node.target), "args": cargs, "kwargs": ckw, "inputs": list(dict.fromkeys(inputs))}
        if isinstance(meta, torch.Tensor):
            shape, stride = self.extern_layout(node, meta)
            if to_nhwc and _nchw(shape):  # oneDNN answers channels-last inputs in channels-last
                stride = channels_last_strides(shape)
            buf = self.add(
                Buffer(
                    self.new_name(),
                    "extern",
                    shape,
                    dtype_name(meta.dtype),
                    stride=stride,
                    extern=spec,
                    origin=node.name,
                )
            )
            return self.buffer_value(buf)
        if isinstance(meta, (list, tuple)) and all(isinstance(m, torch.Tensor | int | torch.SymInt) or m is None
                                                   for m in meta):  # fmt: skip
            # FlashAttention also returns its sequence lengths (ints): a getitem of one is its
            # value (static shapes) or a size node (``call_function``'s SymInt branch)
            buf = self.add(
                Buffer(self.new_name(), "extern", (), "float32", extern={**spec, "multi": True}, origin=node.name)
            )
            return ExternTuple(buf.name)
        if meta is None and node.target._schema.returns == []:
            # an op called for its effect (``_assert_async``: a ``torch._check`` on data, raised at run
            # time): the wrapper calls it in order and binds nothing (externs are never eliminated)
            self.add(
                Buffer(self.new_name(), "extern", (), "float32", extern={**spec, "effect": True}, origin=node.name)
            )
            return None
        raise Unsupported(f"{node.target} returns {type(meta).__name__}, not tensors")

    def runtime_size(self, expr, node):
        """``expr`` (an int or a size expression in our symbols) when the wrapper can compute it at
        call time: every symbol in it is read off an input (``s0 = arg0_1.size(0)``). A size that
        only the op's data decides (``nonzero``'s row count, an unbacked ``u0`` in torch) has no
        input to read it from, so it is refused."""
        unbound = sorted(free_sizes(expr) - set(self.sizevars.sources), key=str)
        if unbound:
            raise Unsupported(
                f"{node.target} ({node.name}): size {expr} depends on data ({unbound} is no input's size)"
            )
        return expr

    def extern_layout(self, node, meta) -> tuple[tuple, tuple]:
        """Size and strides of an extern's result, in our size symbols.

        With dynamic shapes ``meta`` is a fake tensor whose sizes are ``SymInt`` (``mm`` of an
        ``[s0, 8]`` by an ``[8, 16]`` gives ``[s0, 16]``). The ATen call computes its own result at
        run time; the wrapper then checks the layout with ``restride(buf, (s0, 16), (16, 1))``,
        whose tuples it evaluates from the size symbols it bound at entry, exactly as it does for
        an ``empty_strided`` of a generated kernel's output (Inductor's ``FallbackKernel`` takes
        its ``FixedLayout`` from the fake result the same way)."""
        shape = tuple(self.runtime_size(self.size(s), node) for s in meta.shape)
        stride = tuple(self.runtime_size(self.size(s), node) for s in meta.stride())
        return shape, stride

    def buffer_by_name(self, name: str) -> Buffer:
        return next(b for b in reversed(self.buffers) if b.name == name)

    def require_channels_last(self, v):
        """``v`` laid out channels-last (NHWC in memory): itself when it already is, else a copy
        kernel that the scheduler may fuse with ``v``'s producer (Inductor's
        ``ExternKernel.require_channels_last`` in torch/_inductor/ir.py)."""
        if not isinstance(v, TensorValue) or not _nchw(v.shape):
            return v
        return self.require_strides(v, channels_last_strides(tuple(v.shape)), origin="channels_last")

    def require_layout(self, v, rule):
        """``v`` laid out as a layout rule of :data:`ATTENTION_LAYOUTS` asks (shape -> ``(accepts,
        strides)``, or None when the rule has nothing to ask of this shape)."""
        want = rule(v.shape) if isinstance(v, TensorValue) else None
        return v if want is None else self.require_strides(v, want[1], accepts=want[0], origin="attention_layout")

    def require_strides(self, v, want: tuple, accepts=None, origin: str = "require_strides"):
        """``v`` with strides ``want``, or any layout ``accepts(strides)`` approves: ``v`` itself when
        its layout qualifies, else a copy kernel with strides ``want`` that the scheduler may fuse with
        ``v``'s producer (Inductor's ``ExternKernel.require_stride_order`` / ``require_exact_strides``)."""
        want = tuple(want)
        if v.layout is not None and not v.layout[2]:
            have = tuple(v.layout[1])
            if accepts is not None and accepts(have):
                return v
            if all(s == w or n == 1 for n, s, w in zip(v.shape, have, want, strict=True)):
                # the same addresses (a size-1 dimension's stride moves nothing: a depthwise weight
                # [C, 1, kh, kw]): the same memory, viewed with the wanted strides, not a copy
                return v if have == want else strided_value(v.layout[0], tuple(v.shape), want, 0, v.dtype)
        buf = Buffer(self.new_name(), "pointwise", tuple(v.shape), v.dtype, stride=want, origin=origin)
        buf.body = upcast(cast(v.fn(buf.index_vars()), v.dtype), v.dtype)
        return self.buffer_value(self.add(buf))

    def require_storage(self, v, arg):
        """``v`` as a view of a buffer laid out as eager's storage of ``arg``: for an op that reads its
        input's storage rather than its elements (``as_strided``: sizes, strides and offset count in
        the storage). Any layout holds the same elements, so the course picks its own (a transpose
        may stay a view, a pointwise result may be stored in another order); here only eager's
        storage will do. Inductor freezes the stride order of an ``as_strided`` input for the same
        reason (``GraphLowering.run_node`` in torch/_inductor/graph.py).

        Eager's storage is that of the node at the root of ``arg``'s chain of views, a graph input
        or the op that allocated it. A view the course keeps as a view of an input is already one of
        that storage. Otherwise the root is stored with its own (eager's) strides (an input already
        is), and the chain of views is replayed on a meta tensor laid out so, which gives ``arg``'s
        strides and offset in that storage (the traced metadata's offset cannot be used: a trace of
        real tensors records 0 for every view)."""
        import torch

        meta = arg.meta.get("val") if hasattr(arg, "meta") else None
        if not isinstance(v, TensorValue) or not isinstance(meta, torch.Tensor):
            return v
        chain = _view_chain(arg)
        root = chain[0].args[0] if chain else arg
        if root.op == "placeholder" and v.layout is not None and self.buffer_by_name(v.layout[0]).kind == "input":
            return v
        whole, base = root.meta.get("val"), self.env.get(root)
        if not isinstance(whole, torch.Tensor) or not isinstance(base, TensorValue):
            raise Unsupported(f"{arg.name} is read through its storage, and {root.name} is not one tensor")
        shape, stride = tuple(whole.shape), tuple(whole.stride())
        if not all(isinstance(n, int) for n in shape + stride):
            raise Unsupported(f"{arg.name} is read through its storage: symbolic sizes are not replayed")
        t = torch.empty_strided(shape, stride, dtype=whole.dtype, device="meta")
        for node in chain:
            if node.target is operator.getitem:
                t = t[node.args[1]]
                continue
            values = []
            torch.fx.node.map_arg((node.args[1:], node.kwargs), values.append)
            if values:  # a size computed in the graph (dynamic shapes)
                raise Unsupported(f"{arg.name} is read through its storage: {node.name}'s sizes are values")
            t = node.target(t, *node.args[1:], **node.kwargs)
        if t.dtype != whole.dtype:  # a view as another dtype: the bytes, not the values, would be read
            raise Unsupported(f"{arg.name} is read through its storage as {t.dtype}, stored as {whole.dtype}")
        buf = self.require_strides(base, stride, origin="storage_layout")
        return strided_value(buf.layout[0], tuple(v.shape), tuple(t.stride()), t.storage_offset(), v.dtype)

    def extern_item(self, node, base, i):
        if not isinstance(base, ExternTuple):
            raise Unsupported(f"getitem on {type(base).__name__}")
        meta = node.meta["val"]
        shape, stride = self.extern_layout(node, meta)
        target = self.buffer_by_name(base.name).extern["target"]
        if self.channels_last and target in CHANNELS_LAST_ARGS and i in (0, 1) and _nchw(shape):
            stride = channels_last_strides(shape)  # grad_input, grad_weight: as their inputs
        buf = self.add(
            Buffer(
                self.new_name(),
                "alias",
                shape,
                dtype_name(meta.dtype),
                stride=stride,
                extern={"base": base.name, "item": i, "inputs": [base.name]},
                origin=node.name,
            )
        )
        return self.buffer_value(buf)


@dataclass
class ExternTuple:
    name: str


# ---------------------------------------------------------------------------
# layout optimisation: convolutions in channels-last
# ---------------------------------------------------------------------------

#: extern -> positions of its 4-D tensor arguments that it gets channels-last (input, weight;
#: for the backward: grad_output, input, weight).
CHANNELS_LAST_ARGS = {"aten.convolution.default": (0, 1), "aten.convolution_backward.default": (0, 1, 2)}


# ---------------------------------------------------------------------------
# fused attention's layouts (CUDA): what Inductor's ``sdpa_constraint`` (torch/_inductor/lowering.py) asks
# ---------------------------------------------------------------------------


def _on_cuda(node) -> bool:
    val = node.meta.get("val")
    val = val[0] if isinstance(val, (list, tuple)) and val else val
    return getattr(getattr(val, "device", None), "type", None) == "cuda"


def _dense_last_dim(shape):
    """q, k, v: any layout whose last dimension is dense (stride 1), else a contiguous copy."""
    if not all(is_static(n) for n in shape):
        return None
    return (lambda have: have[-1] == 1 or shape[-1] == 1), contiguous_strides(shape)


#: the memory-efficient kernels read a bias in rows of whole 8-element (32-byte) steps
ATTENTION_BIAS_ALIGNMENT = 8


def _aligned_bias(shape):
    """The bias: last dimension dense, every other stride a multiple of 8 elements (a broadcast
    dimension may keep stride 0); a copy pads the rows to 8 elements (``preprocess_mask`` in ATen)."""
    if not all(is_static(n) for n in shape):
        return None
    a = ATTENTION_BIAS_ALIGNMENT

    def accepts(have):
        return (have[-1] == 1 or shape[-1] == 1) and all(st % a == 0 for st in have[:-1])

    strides, step = [1], shape[-1]
    for n in reversed(shape[:-1]):
        step = -(-step // a) * a
        strides.append(step)
        step *= n
    return accepts, tuple(reversed(strides))


def _heads_inner(shape):
    """``out`` and its gradient for the backward kernel: ``[B, H, L, D]`` stored as ``[B, L, H, D]``,
    the layout the forward kernel returns (Inductor's stride order (3, 1, 2, 0); another layout
    crashes the kernel, pytorch/pytorch#138772). Exactly these strides."""
    if len(shape) != 4 or not all(is_static(n) for n in shape):
        return None
    _, heads, seq, d = shape
    return None, (seq * heads * d, d, heads * d, 1)


def _view_chain(node) -> list:
    """The view ops (and pieces of a multi-output view: ``split``'s ``getitem``) from the node that
    owns ``node``'s storage, a graph input or the op that allocated it, down to ``node``."""
    chain = []
    while node.op == "call_function":
        op = node.args[0] if node.target is operator.getitem else node  # a piece: judge the op
        if not getattr(op.target, "is_view", False):
            break
        chain.append(node)
        if op is not node:
            chain.append(op)
        node = op.args[0]
    return chain[::-1]


#: extern -> positions of the tensor arguments it reads through their storage (see ``require_storage``)
STORAGE_ARGS = {"aten.as_strided.default": (0,), "aten.as_strided_copy.default": (0,),
                "aten.as_strided_scatter.default": (0,)}  # fmt: skip


#: extern -> {argument position: layout rule, shape -> (accepts(strides) or None for exact, strides) or None}
ATTENTION_LAYOUTS = {
    "aten._scaled_dot_product_efficient_attention.default": {
        0: _dense_last_dim, 1: _dense_last_dim, 2: _dense_last_dim, 3: _aligned_bias},
    "aten._scaled_dot_product_efficient_attention_backward.default": {
        0: _heads_inner, 1: _dense_last_dim, 2: _dense_last_dim, 3: _dense_last_dim, 4: _aligned_bias,
        5: _heads_inner},
    "aten._scaled_dot_product_flash_attention.default": {0: _dense_last_dim, 1: _dense_last_dim, 2: _dense_last_dim},
    "aten._scaled_dot_product_flash_attention_backward.default": {
        0: _dense_last_dim, 1: _dense_last_dim, 2: _dense_last_dim, 3: _dense_last_dim, 4: _dense_last_dim},
}  # fmt: skip


def _nchw(shape) -> bool:
    return len(shape) == 4 and all(is_static(s) for s in shape)


def channels_last_strides(shape: tuple) -> tuple:
    """Strides of an ``[N, C, H, W]`` tensor stored as ``[N, H, W, C]`` (torch.channels_last)."""
    _, c, h, w = shape
    return (c * h * w, 1, w * c, c)


def decide_layout_opt(gm, example_inputs) -> bool:
    """Run the graph's convolutions channels-last? (Inductor: ``GraphLowering.decide_layout_opt``
    in torch/_inductor/graph.py.) Inductor says yes on CPU whenever oneDNN (mkldnn) is there
    and the graph has a convolution: oneDNN's NCHW path reorders activations into a blocked
    layout and back on every call, its channels-last path reads NHWC as it is (measured on the
    course's tiny ResNet: a training step 2.5x faster in eager with channels-last). Static 4-D
    shapes only, as Inductor (its dynamic-shape path skips the optimisation).
    """
    import torch

    if not torch.backends.mkldnn.is_available() or not torch.backends.mkldnn.enabled:
        return False
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    if not tensors or any(t.device.type != "cpu" for t in tensors):
        return False
    for node in gm.graph.nodes:
        if node.op == "call_function" and str(node.target) in CHANNELS_LAST_ARGS:
            val = node.args[0].meta.get("val") if hasattr(node.args[0], "meta") else None
            if val is not None and _nchw(val.shape) and all(isinstance(s, int) for s in val.shape):
                return True
    return False


def _foreign_dtype(node) -> bool:
    """True when a tensor the node reads or makes has a dtype the code generators have no rule for
    (complex: an FFT's output, RoPE written with ``view_as_complex``). The node becomes an extern
    call, ATen computing it, so the rest of the graph still compiles: Inductor does the same
    (``unsupported_input_tensor`` in torch/_inductor/lowering.py sends complex ops to ATen)."""
    import torch
    import torch.utils._pytree as pytree

    values = [node.meta.get("val"), *(a.meta.get("val") for a in node.all_input_nodes)]
    return any(isinstance(t, torch.Tensor) and dtype_name(t.dtype) not in DTYPES for t in pytree.tree_leaves(values))


def _known_dtypes(expr, origin: str):
    """``expr`` when every value in it (loads, constants, intermediates) has a dtype the code
    generators know (:data:`DTYPES`); else :class:`Unsupported`, before a code generator meets
    a dtype it has no C type for (a bf16 input read by a fused kernel)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if getattr(e, "dtype", "float32") not in DTYPES:
            raise Unsupported(f"dtype {e.dtype} has no code generator rule ({e} in op {origin})")
        stack += list(getattr(e, "args", ())) + [v for _, v in getattr(e, "indirect", ())]
    return expr


def _check_meta(node, meta):
    import torch

    vals = meta if isinstance(meta, (list, tuple)) else [meta]
    for v in vals:
        if isinstance(v, (torch.SymFloat, torch.SymBool)):
            raise Unsupported(f"{node.name} computes a symbolic scalar ({node.target})")


def _is_course_fake(value) -> bool:
    """A course_lib.fake.FakeTensor (shape, dtype and a stride tuple, no data)."""
    return type(value).__name__ == "FakeTensor" and type(value).__module__.startswith("course_lib.fake")


def exact_div(a, b):
    """``a / b`` for sizes known to divide (``view(-1)``)."""
    if is_static(a) and is_static(b):
        return int(a) // int(b)
    return sympy.cancel(sympy.sympify(a) / b)


def strided_value(buf, shape, strides, offset, dtype) -> TensorValue:
    def fn(idx):
        return Load(buf, flat_index(idx, strides, offset), dtype)

    return TensorValue(tuple(shape), dtype, fn, (buf, tuple(strides), offset))


# ---------------------------------------------------------------------------
# views: rewrite the index function (and the affine layout when there is one)
# ---------------------------------------------------------------------------


def view(x: TensorValue, shape) -> TensorValue:
    shape = list(shape)
    if any(is_static(s) and s == -1 for s in shape):
        known = prod([s for s in shape if not (is_static(s) and s == -1)])
        shape[[is_static(s) and s == -1 for s in shape].index(True)] = exact_div(prod(x.shape), known)
    shape = tuple(shape)
    if x.layout is not None and x.layout[1] == contiguous_strides(x.shape):
        buf, _, offset = x.layout
        return strided_value(buf, shape, contiguous_strides(shape), offset, x.dtype)
    new_strides = contiguous_strides(shape)

    def fn(idx):
        flat = flat_index(idx, new_strides)
        ranges = {i: s for i, s in zip(idx, shape) if isinstance(i, sympy.Symbol)}
        return x.fn(decompose(flat, x.shape, ranges))

    return TensorValue(shape, x.dtype, fn, None)


def permute(x: TensorValue, dims) -> TensorValue:
    dims = [d % len(x.shape) for d in dims]
    inv = [dims.index(d) for d in range(len(dims))]
    layout = None
    if x.layout is not None:
        buf, st, off = x.layout
        layout = (buf, tuple(st[d] for d in dims), off)
    return TensorValue(
        tuple(x.shape[d] for d in dims), x.dtype, lambda idx: x.fn([idx[inv[d]] for d in range(len(dims))]), layout
    )


def expand(x: TensorValue, sizes) -> TensorValue:
    sizes = list(sizes)
    lead = len(sizes) - len(x.shape)
    out = tuple(x.shape[d - lead] if s == -1 else s for d, s in enumerate(sizes))
    layout = None
    if x.layout is not None:
        buf, st, off = x.layout
        layout = (
            buf,
            tuple(0 if d < lead or x.shape[d - lead] == 1 and out[d] != 1 else st[d - lead] for d in range(len(out))),
            off,
        )

    def fn(idx):
        return x.fn([sympy.Integer(0) if x.shape[d] == 1 else idx[d + lead] for d in range(len(x.shape))])

    return TensorValue(out, x.dtype, fn, layout)


def select(x: TensorValue, dim, index) -> TensorValue:
    dim %= len(x.shape)
    index = index % x.shape[dim] if is_static(x.shape[dim]) else (index + x.shape[dim] if index < 0 else index)
    layout = None
    if x.layout is not None:
        buf, st, off = x.layout
        layout = (buf, st[:dim] + st[dim + 1 :], off + index * st[dim])
    shape = x.shape[:dim] + x.shape[dim + 1 :]
    return TensorValue(
        shape, x.dtype, lambda idx: x.fn(list(idx[:dim]) + [sympy.sympify(index)] + list(idx[dim:])), layout
    )


def slice_(x: TensorValue, dim=0, start=None, end=None, step=1, hint=None) -> TensorValue:
    """``x[..., start:end:step, ...]`` along ``dim``. ``hint`` (a size expression's example value)
    clamps bounds against symbolic sizes as torch did when it traced (see :func:`lower_slice`)."""
    dim %= len(x.shape)
    size = x.shape[dim]
    start, end = _slice_bound(start, size, 0, hint), _slice_bound(end, size, size, hint)
    if all(is_static(v) for v in (size, start, end)):
        n = max(0, (end - start + step - 1) // step)
    else:  # torch guarded start <= end when it traced; only the arithmetic is left
        n = end - start if step == 1 else FloorDiv(end - start + step - 1, step)
    layout = None
    if x.layout is not None:
        buf, st, off = x.layout
        layout = (buf, st[:dim] + (st[dim] * step,) + st[dim + 1 :], off + start * st[dim])
    shape = x.shape[:dim] + (n,) + x.shape[dim + 1 :]

    def fn(idx):
        idx = list(idx)
        idx[dim] = idx[dim] * step + start
        return x.fn(idx)

    return TensorValue(shape, x.dtype, fn, layout)


def _slice_bound(v, size, default, hint=None):
    """A slice bound clamped into ``[0, size]``, as Python and torch clamp (``x[-4095:]`` of 8 rows
    starts at 0, not at -4087). Where the size or the bound is symbolic, each comparison is decided
    on the example values (``hint``), as torch's trace decided and guarded it; a huge end is the end."""
    if v is None:
        return default
    if is_static(v) and is_static(size):
        return max(0, v + size) if v < 0 else min(v, size)
    if is_static(v) and v >= 2**62:
        return size
    try:
        bound = v + size if (hint(v) if hint is not None else v) < 0 else v
        at, n = (hint(bound), hint(size)) if hint is not None else (0, 0)
    except (TypeError, KeyError, ValueError):  # a symbol without an example value: lower_slice checks
        return v + size if is_static(v) and v < 0 else v
    if at < 0:  # x[-1023:] of s0 rows, s0 <= 1023
        return sympy.Integer(0)
    return size if at > n else bound


def lower_slice(ctx, node, x, dim=0, start=None, end=None, step=1):
    """``slice`` with torch's clamping of bounds against symbolic sizes.

    ``x[:, -1023:]`` of a length ``s0``: torch's trace, seeing ``s0 = 12``, clamped the start to 0,
    gave the result size ``s0`` and guarded ``s0 <= 1023``. Without the clamp the start is
    ``s0 - 1023`` and the result has 1023 rows: a read past the end (found by training a
    sliding-window model at several lengths). The size computed here must be torch's
    (``meta["val"]``); where it is not, the graph is refused rather than read out of bounds."""
    out = slice_(x, dim, start, end, step, hint=ctx.sizevars.hint)
    meta = node.meta.get("val")
    d = dim % len(x.shape)
    if (
        meta is not None
        and hasattr(meta, "shape")
        and not all(v is None or is_static(v) for v in (x.shape[d], start, end))
    ):
        want = ctx.size(meta.shape[d])
        if sympy.simplify(sympy.sympify(out.shape[d]) - want) != 0:
            raise Unsupported(f"slice of {x.shape[d]} from {start} to {end}: torch's size is {want}, "
                              f"the course's {out.shape[d]}")  # fmt: skip
    return out


def unsqueeze(x: TensorValue, dim) -> TensorValue:
    dim %= len(x.shape) + 1
    layout = None
    if x.layout is not None:
        buf, st, off = x.layout
        layout = (buf, st[:dim] + (0,) + st[dim:], off)
    shape = x.shape[:dim] + (1,) + x.shape[dim:]
    return TensorValue(shape, x.dtype, lambda idx: x.fn(list(idx[:dim]) + list(idx[dim + 1 :])), layout)


def squeeze(x: TensorValue, dims=None) -> TensorValue:
    nd = len(x.shape)
    dims = range(nd) if dims is None else [d % max(nd, 1) for d in _as_tuple(dims)]
    drop = {d for d in dims if nd and x.shape[d] == 1}
    keep = [d for d in range(nd) if d not in drop]
    layout = None
    if x.layout is not None:
        buf, st, off = x.layout
        layout = (buf, tuple(st[d] for d in keep), off)

    def fn(idx):
        full, it = [], iter(idx)
        for d in range(nd):
            full.append(sympy.Integer(0) if d in drop else next(it))
        return x.fn(full)

    return TensorValue(tuple(x.shape[d] for d in keep), x.dtype, fn, layout)


# ---------------------------------------------------------------------------
# pointwise ops
# ---------------------------------------------------------------------------


def broadcast_fn(x, out_shape):
    """Index function of ``x`` read at an element of the broadcast shape ``out_shape``."""
    if not isinstance(x, TensorValue):
        return None
    lead = len(out_shape) - len(x.shape)
    return lambda idx: x.fn([sympy.Integer(0) if x.shape[d] == 1 else idx[d + lead] for d in range(len(x.shape))])


def broadcast_shapes(*shapes):
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for d, size in enumerate(s):
            k = d + nd - len(s)
            out[k] = size if out[k] == 1 else out[k]
    return tuple(out)


def scalar_value(v, dtype: str):
    """A Python scalar operand as a value; a size expression (dynamic shapes) becomes ``index_expr``."""
    if isinstance(v, sympy.Expr) and not v.is_Number:
        return IndexValue(v, dtype)
    return Const(v, dtype)


def _scalar_dtype(v, like):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, sympy.Expr)):
        return like if like not in ("bool",) else "int64"
    return like if like in FLOAT_DTYPES else "float32"


def _compute_dtype(operands):
    dts = [o.dtype for o in operands if isinstance(o, TensorValue)]
    floats = [d for d in dts if d in FLOATING]  # halves compare in float32
    if floats:
        return "float64" if "float64" in floats else "float32"
    if any(isinstance(o, float) for o in operands):
        return "float32"
    return (
        "int64"
        if any(d != "bool" for d in dts) or any(isinstance(o, int) and not isinstance(o, bool) for o in operands)
        else "bool"
    )


def make_pointwise(op: str, compute: str = "out"):
    """A lowering for an elementwise ``op``; ``compute`` is ``out`` (operate in the result dtype)
    or ``promote`` (comparisons: operate in the promoted input dtype, return bool)."""

    def lower(ctx: Lowering, node, *args, **kwargs):
        args = list(args)
        alpha = kwargs.get("alpha")
        out_dtype = dtype_name(node.meta["val"].dtype)
        # half-precision results are computed in float32, their Python scalars too (eager's "opmath")
        cdt = compute_dtype(out_dtype) if compute == "out" else _compute_dtype(args)
        kind = BOOL_OPS.get(op, op) if cdt == "bool" else op
        if op in ("floor", "ceil") and cdt not in FLOATING:  # an integer is whole: tl.floor takes floats only
            return ctx.pointwise(args[0].shape, out_dtype, lambda idx: cast(args[0].fn(idx), cdt), origin=node.name)
        shape = broadcast_shapes(*[a.shape for a in args if isinstance(a, TensorValue)])
        fns = [broadcast_fn(a, shape) for a in args]

        def fn(idx):
            vals = [cast(f(idx), cdt) if f else scalar_value(a, _scalar_dtype(a, cdt)) for f, a in zip(fns, args)]
            vals = [cast(v, cdt) for v in vals]
            if alpha is not None and alpha != 1:
                vals[1] = Op("mul", (vals[1], scalar_value(alpha, cdt)), cdt)
            return Op(kind, tuple(vals), out_dtype if compute == "promote" else cdt)

        return ctx.pointwise(shape, out_dtype, fn, origin=node.name)

    return lower


def lower_where(ctx, node, cond, a, b):
    out_dtype = dtype_name(node.meta["val"].dtype)
    shape = broadcast_shapes(*[v.shape for v in (cond, a, b) if isinstance(v, TensorValue)])
    fc, fa, fb = (broadcast_fn(v, shape) for v in (cond, a, b))

    def fn(idx):
        c = cast(fc(idx), "bool") if fc else Const(bool(cond), "bool")
        x = cast(fa(idx), out_dtype) if fa else scalar_value(a, out_dtype)
        y = cast(fb(idx), out_dtype) if fb else scalar_value(b, out_dtype)
        return Op("where", (c, x, y), out_dtype)

    return ctx.pointwise(shape, out_dtype, fn, origin=node.name)


def lower_pow(ctx, node, x, exponent):
    if isinstance(exponent, (int, float)) and exponent == 2:
        return make_pointwise("mul")(ctx, node, x, x)
    if isinstance(exponent, (int, float)) and exponent == 0.5:
        return make_pointwise("sqrt")(ctx, node, x)
    return make_pointwise("pow")(ctx, node, x, exponent)


def lower_convert(ctx, node, x, dtype, *rest):
    """A dtype conversion, fused as ``to_dtype`` into the kernels around it (float16 and
    bfloat16 included: kernels load and store them, computing in float32).

    From or to a dtype the code generators have no rule for (``float8_e4m3fn``, complex), ATen
    converts instead, as an extern call: the rest of the graph still compiles, only the
    conversion leaves the kernels."""
    out = dtype_name(dtype)
    if out not in DTYPES or x.dtype not in DTYPES:
        return ctx.extern(node, ctx.arg(node.args), {k: ctx.arg(v) for k, v in node.kwargs.items()})
    return ctx.pointwise(x.shape, out, lambda idx: cast(x.fn(idx), out), origin=node.name)


def lower_clone(ctx, node, x, **kw):
    return ctx.pointwise(x.shape, x.dtype, x.fn, origin=node.name)


def lower_full(ctx, node, size, value, **kw):
    dt = dtype_name(node.meta["val"].dtype)
    return TensorValue(tuple(size), dt, lambda idx: scalar_value(value, dt))  # full(.., s0): a size


def lower_scalar_tensor(ctx, node, value, **kw):
    dt = dtype_name(node.meta["val"].dtype)
    return TensorValue((), dt, lambda idx: scalar_value(value, dt))


def lower_iota(ctx, node, length, start=0, step=1, **kw):
    dt = dtype_name(node.meta["val"].dtype)
    return TensorValue((length,), dt, lambda idx: IndexValue(idx[0] * step + start, dt))


def lower_gather(ctx, node, x, dim, index, **kw):
    """``out[i] = x[i with i[dim] replaced by index[i]]``: an indirect load."""
    dim %= len(x.shape)
    producer = _pointwise_producer(ctx, x)
    if producer is not None:  # recompute the producer at the gathered index (Inductor inlines it)

        def inlined(idx):
            ctx.indirect += 1
            s = sym(f"ind{ctx.indirect - 1}")
            full = list(idx)
            full[dim] = s
            body = subs_index(producer.body, dict(zip(producer.index_vars(), full)))
            bound = ((s, cast(index.fn(idx), "int64")),)
            ranges = {v: n for v, n in zip(idx, index.shape) if isinstance(v, sympy.Symbol)}
            ranges[s] = x.shape[dim]
            return _inline_indirect(ctx, body, s, bound, ranges)

        return ctx.pointwise(index.shape, x.dtype, inlined, origin=node.name)
    x_arg = ctx.realize(x, origin=node.name)

    def fn(idx):
        ctx.indirect += 1
        s = sym(f"ind{ctx.indirect - 1}")
        full = list(idx)
        full[dim] = s
        return Load(
            x_arg.buf, flat_index(full, x_arg.stride, x_arg.offset), x.dtype, ((s, cast(index.fn(idx), "int64")),)
        )

    return ctx.pointwise(index.shape, x.dtype, fn, origin=node.name)


def _inline_indirect(ctx, body, s, bound, ranges, depth=0):
    """Attach the indirect binding of ``s`` to every load that uses it, first recomputing
    pointwise producers read at an ``s``-dependent index (up to a few levels deep)."""

    def visit(ld):
        if s not in sympy.sympify(ld.index).free_symbols:
            return ld
        prod = next((b for b in ctx.buffers if b.name == ld.buf), None)
        if (
            depth < 4
            and prod is not None
            and prod.kind == "pointwise"
            and not ld.indirect
            and prod.stride == contiguous_strides(prod.shape)
            and not reads_index_values(prod.body)
        ):
            if not any(l2.indirect for l2 in loads(prod.body)):
                idx = decompose(ld.index, prod.shape, ranges)
                inner = subs_index(prod.body, dict(zip(prod.index_vars(), idx)))
                return _inline_indirect(ctx, inner, s, bound, ranges, depth + 1)
        return Load(ld.buf, ld.index, ld.dtype, ld.indirect + bound)

    return map_loads(body, visit)


def _pointwise_producer(ctx, x: TensorValue):
    """The pointwise Buffer ``x`` is a plain (contiguous, unviewed) read of, if any."""
    if x.layout is None:
        return None
    buf, strides, offset = x.layout
    b = next((b for b in ctx.buffers if b.name == buf), None)
    if b is None or b.kind != "pointwise" or offset or tuple(b.shape) != tuple(x.shape) or tuple(strides) != b.stride:
        return None
    if any(ld.indirect for ld in loads(b.body)) or reads_index_values(b.body):
        return None
    return b


def reads_index_values(expr) -> bool:
    """Does ``expr`` use a loop index as a value (an iota, a position mask)? Such a producer is not
    recomputed at a gathered index: its index value would need the gather's binding as well."""
    if isinstance(expr, IndexValue):
        return True
    if isinstance(expr, Op):
        return any(reads_index_values(a) for a in expr.args)
    if isinstance(expr, Load):
        return any(reads_index_values(e) for _, e in expr.indirect)
    return False


def make_reduction(rtype: str):
    def lower(ctx, node, x, dims=None, keepdim=False, **kw):
        out = dtype_name(node.meta["val"].dtype)
        return ctx.reduction(x, _as_tuple(dims) if dims is not None else None, keepdim, rtype, out, origin=node.name)

    return lower


def _reduced_count(x, dims):
    nd = len(x.shape)
    dims = range(nd) if not dims else [d % nd for d in _as_tuple(dims)]
    return prod([x.shape[d] for d in sorted(set(dims))])


def count_value(n, dtype: str):
    """An element count as a value: a constant, or (symbolic size) the size expression itself."""
    return Const(float(n), dtype) if is_static(n) else IndexValue(n, dtype)


def lower_mean(ctx, node, x, dims=None, keepdim=False, dtype=None):
    out = dtype_name(node.meta["val"].dtype)
    s = ctx.reduction(x, _as_tuple(dims) if dims else None, keepdim, "sum", out, origin=node.name)
    n = _reduced_count(x, dims)
    return ctx.pointwise(
        s.shape, out, lambda idx: Op("truediv", (s.fn(idx), count_value(n, out)), out), origin=node.name
    )


def lower_var_mean(ctx, node, x, dims=None, correction=None, keepdim=False, **kw):
    """Two passes: ``mean = sum(x) / n``, then ``var = sum((x - mean)^2) / (n - correction)``."""
    out = dtype_name(node.meta["val"][0].dtype)
    dims = _as_tuple(dims) if dims is not None else None
    n = _reduced_count(x, dims)
    corr = 1 if correction is None else correction
    s = ctx.reduction(x, dims, True, "sum", out, origin=node.name)
    mean = ctx.pointwise(
        s.shape, out, lambda idx: Op("truediv", (s.fn(idx), count_value(n, out)), out), origin=node.name
    )
    mb = broadcast_fn(mean, x.shape)

    def sq(idx):
        d = Op("sub", (cast(x.fn(idx), out), mb(idx)), out)
        return Op("mul", (d, d), out)

    sq_v = ctx.pointwise(x.shape, out, sq, origin=node.name)
    ss = ctx.reduction(sq_v, dims, keepdim, "sum", out, origin=node.name)
    var = ctx.pointwise(
        ss.shape,
        out,
        lambda idx: Op("truediv", (ss.fn(idx), count_value(max(n - corr, 0) if is_static(n) else n - corr, out)), out),
        origin=node.name,
    )
    if not keepdim:
        mean = squeeze(mean, [d for d in range(len(x.shape)) if dims is None or d in [e % len(x.shape) for e in dims]])
    return (var, mean)


def lower_view(ctx, node, x, shape):
    """``view``/``reshape``: the result's sizes come from torch's own shape inference
    (``meta["val"]``), which knows ``-1`` and size expressions (``s0 // 2``) better than we do."""
    meta = node.meta.get("val")
    if meta is not None and hasattr(meta, "shape"):
        shape = [ctx.size(s) for s in meta.shape]
    return view(x, shape)


def _view_rule(fn):
    return lambda ctx, node, *args, **kw: fn(*args, **kw)


_POINTWISE = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "truediv", "maximum": "maximum", "minimum": "minimum",
    "neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "erf": "erf",
    "sigmoid": "sigmoid", "relu": "relu", "abs": "abs", "reciprocal": "reciprocal", "sin": "sin", "cos": "cos",
    "log1p": "log1p", "expm1": "expm1", "floor": "floor", "ceil": "ceil", "logical_not": "logical_not",
    "logical_and": "logical_and", "logical_or": "logical_or", "bitwise_not": "bitwise_not",
}  # fmt: skip
#: what an arithmetic op means on bools (eager: True + True is True, ~True is False). C++ would
#: store 1 + 1 back into a bool as true, but Triton's int1 wraps it to 0 and its ~ flips 31 more bits.
BOOL_OPS = {"add": "logical_or", "mul": "logical_and", "maximum": "logical_or", "minimum": "logical_and",
            "bitwise_not": "logical_not"}  # fmt: skip
_COMPARE = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}

#: ATen overload name -> lowering (``torch/_inductor/lowering.py``'s ``lowerings`` dict).
LOWERINGS: dict[str, Callable] = {}
for _aten, _op in _POINTWISE.items():
    for _ov in ("Tensor", "Scalar", "default"):
        LOWERINGS[f"aten.{_aten}.{_ov}"] = make_pointwise(_op)
for _aten, _op in _COMPARE.items():
    for _ov in ("Tensor", "Scalar"):
        LOWERINGS[f"aten.{_aten}.{_ov}"] = make_pointwise(_op, compute="promote")
LOWERINGS.update({
    "aten.where.self": lower_where,
    "aten.pow.Tensor_Scalar": lower_pow,
    "prims.fma.default": make_pointwise("fma"),
    "prims.convert_element_type.default": lower_convert,
    "aten._to_copy.default": lambda ctx, node, x, **kw: lower_to_copy(ctx, node, x, **kw),
    "aten.clone.default": lower_clone,
    "course_lib.hidden_write.default": lambda ctx, node, old, new: lower_clone(ctx, node, new),  # new's values
    "aten.full.default": lower_full,
    "aten.scalar_tensor.default": lower_scalar_tensor,
    "prims.iota.default": lower_iota,
    "aten.gather.default": lower_gather,
    "aten.alias.default": lambda ctx, node, x: x,
    "aten.detach.default": lambda ctx, node, x: x,
    "aten.lift_fresh_copy.default": lower_clone,
    "aten.view.default": lower_view,
    "aten.reshape.default": lower_view,
    "aten._unsafe_view.default": lower_view,
    "aten.permute.default": _view_rule(permute),
    "aten.t.default": lambda ctx, node, x: permute(x, [1, 0]) if len(x.shape) == 2 else x,
    "aten.transpose.int": lambda ctx, node, x, a, b: permute(x, _swap(len(x.shape), a, b)),
    "aten.expand.default": _view_rule(expand),
    "aten.select.int": _view_rule(select),
    "aten.slice.Tensor": lower_slice,
    "aten.unsqueeze.default": _view_rule(unsqueeze),
    "aten.squeeze.dim": _view_rule(squeeze),
    "aten.squeeze.dims": _view_rule(squeeze),
    "aten.squeeze.default": _view_rule(squeeze),
    "aten.sum.dim_IntList": make_reduction("sum"),
    "aten.sum.default": make_reduction("sum"),
    "aten.amax.default": make_reduction("max"),
    "aten.amin.default": make_reduction("min"),
    "aten.mean.dim": lower_mean,
    "aten.mean.default": lower_mean,
    "aten.var_mean.correction": lower_var_mean,
})  # fmt: skip


def lower_to_copy(ctx, node, x, dtype=None, **kw):
    """``x.to(dtype)`` is a conversion in the kernel; ``x.to("cuda")`` of a tensor that lives on
    another device is ATen's copy, from the wrapper. (VideoMAE keeps its sinusoid table as a plain
    attribute, which ``model.to("cuda")`` leaves on the CPU; its forward moves it. Read by a Triton
    kernel in place, the CPU pointer was refused.)"""
    src, dst = getattr(node.args[0], "meta", {}).get("val"), node.meta.get("val")
    if getattr(src, "device", None) is not None and getattr(dst, "device", None) not in (None, src.device):
        return ctx.extern(node, (x,), {"dtype": dtype, **kw})
    return lower_convert(ctx, node, x, dtype or dst.dtype)


def _swap(nd, a, b):
    dims = list(range(nd))
    dims[a % nd], dims[b % nd] = dims[b % nd], dims[a % nd]
    return dims


def _index_functions_only(expr) -> bool:
    """True when every function in the size expression is one the code generators print."""
    allowed = (sympy.Symbol, sympy.Integer, sympy.Add, sympy.Mul, sympy.Pow, FloorDiv, ModIdx, Max, Min)
    return all(isinstance(e, allowed) for e in sympy.preorder_traversal(sympy.sympify(expr)))


def lower(gm, example_inputs, size_guards=(), hints=None, keep_output_strides: bool = False) -> GraphIR:
    """Lower an ATen FX GraphModule to the pre-fusion IR.

    ``example_inputs``: real tensors (static sizes), or fake tensors with ``SymInt`` sizes and
    ``SymInt`` values (symbolic sizes, from AOT Autograd or :func:`course_lib.compat.make_fx_dynamic`),
    or course_lib.fake FakeTensors whose sizes are sympy expressions (``hints``: their example values).
    """
    lowering = Lowering(gm)
    lowering.hints = dict(hints or {})
    lowering.keep_output_strides = keep_output_strides
    return eliminate_dead_buffers(lowering.run(example_inputs, size_guards))


def eliminate_dead_buffers(graph: GraphIR) -> GraphIR:
    """Drop computed buffers nobody reads (e.g. a producer that was inlined into a gather)."""
    live = {o[1] for o in graph.outputs if o[0] == "buf"}
    keep = []
    for b in reversed(graph.buffers):
        if b.kind in ("input", "extern", "alias") or b.name in live:
            keep.append(b)
            live.update(b.reads())
    return graph.replace(buffers=list(reversed(keep)))
