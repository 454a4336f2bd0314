"""Functionalization: in-place ops and views out, copies back in (teaches
torch/_subclasses/functional_tensor.py and torch/_functorch/_aot_autograd/functional_utils.py).

Position: Python function --> ATen graph *with* mutations and views (make_fx) -->
**functionalize** --> ATen graph with neither: ``(inputs) -> (*outputs, *new values of the
mutated inputs)`` --> course_lib.decomp --> joint graph (course_lib.aot.joint).

Why: the joint graph, the partitioner and the fusion scheduler all assume a value never
changes after it is made. ``x.relu_()`` breaks that. Functionalization runs the ATen graph
once more, node by node, and rewrites as it goes:

* an in-place op ``x.add_(y)`` becomes ``x2 = add(x, y)``; later readers of ``x`` read ``x2``;
* a write through a view (``x[0].mul_(2)``) rebuilds the view's base with a *scatter*
  (``select_scatter(x, new_row, 0, 0)``), and every other view of that base is re-derived
  from the new base the next time it is read (the "alias tracking" of FunctionalTensor);
* an op that mutates an argument it does not return (batch norm's ``running_mean``) is swapped
  for its functional variant, which returns the new value as an extra output;
* a graph *input* that was written to comes back as an extra output; the caller copies it
  back into the real tensor after the compiled graph has run (torch's runtime wrapper does
  ``input.copy_(updated)`` the same way, so the compiled graph itself stays pure).

Rules are tables: :data:`INVERSE_VIEW` (how to write a view's new value back into its base)
and :data:`FUNCTIONAL_VARIANT` (which functional op replaces an op with a mutable argument).

Simplifications against torch: torch functionalizes *while* tracing (a tensor subclass wraps
every value); we interpret an already traced ATen graph, which shows the same rewrite as a
graph-to-graph pass. Aliasing between two graph *inputs* is not detected (torch checks storages).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

import torch

from course_lib.fx import Graph, Node, map_arg
from course_lib.fx.interpreter import fetch_attr

aten = torch.ops.aten


# ------------------------------------------------------------------ writes autograd does not see


@torch.library.custom_op("course_lib::hidden_write", mutates_args=())
def hidden_write(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """``new``'s values, with ``old``'s place in autograd: the derivative passes straight to ``old``.

    Eager hides some writes from autograd: ``w.data.clamp_(-1, 1)``, ``w.detach().mul_(2)``, or any
    in-place op under ``torch.no_grad()``. The tensor's values change; its history does not, so a
    later use sends its whole gradient to the tensor's producer, as if the write had not happened.
    Written functionally the new value is ``clamp(detach(w))``, which no gradient reaches: this op
    stands between them (torch's AOT Autograd calls such writes "hidden from autograd")."""
    return new.clone()


@hidden_write.register_fake
def _(old, new):
    return torch.empty_like(new)


hidden_write.register_autograd(lambda ctx, grad: (grad, None))
HIDDEN_WRITE = torch.ops.course_lib.hidden_write.default


# ------------------------------------------------------------------ rule tables


def _inverse_reshape(base, new, *args):
    return aten.reshape.default(new, list(base.shape))


def _inverse_permute(base, new, perm):
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p % len(perm)] = i
    return aten.permute.default(new, inverse)


#: view op -> ``inverse(base, new_view_value, *view_args) -> new base`` (torch: the ``*_scatter`` ops
#: and ``FunctionalTensor``'s "reapply views" in functional_utils.py).
INVERSE_VIEW: dict = {
    aten.view.default: _inverse_reshape,
    aten._unsafe_view.default: _inverse_reshape,
    aten.reshape.default: _inverse_reshape,
    aten.unsqueeze.default: _inverse_reshape,
    aten.squeeze.dim: _inverse_reshape,
    aten.squeeze.dims: _inverse_reshape,
    aten.squeeze.default: _inverse_reshape,
    aten.alias.default: lambda base, new: new,
    aten.detach.default: lambda base, new: new,
    aten.permute.default: _inverse_permute,
    aten.transpose.int: lambda base, new, d0, d1: aten.transpose.int(new, d0, d1),
    aten.t.default: lambda base, new: aten.t.default(new),
    aten.select.int: lambda base, new, dim, index: aten.select_scatter.default(base, new, dim, index),
    aten.slice.Tensor: lambda base, new, dim=0, start=None, end=None, step=1: aten.slice_scatter.default(
        base, new, dim, start, end, step
    ),
    aten.as_strided.default: lambda base, new, size, stride, offset=None: aten.as_strided_scatter.default(
        base, new, size, stride, offset
    ),
}


@dataclasses.dataclass(frozen=True)
class Variant:
    """A functional op for an op that writes to some arguments: ``writes[arg index] = output index``.

    ``num_outputs``: how many of the original op's outputs the variant's first outputs stand for;
    ``extra(*args)`` makes the outputs the original op has beyond those (none by default).
    ``unwritten``: the op to call instead when every written argument is None (then nothing is
    written, and the call takes the other arguments in order)."""

    op: Any
    writes: dict
    num_outputs: int
    extra: Callable | None = None
    unwritten: Any = None


def _cudnn_reserve(input, *args, **kwargs) -> tuple:
    """cuDNN batch norm's fourth output, its reserve space, feeds only ``cudnn_batch_norm_backward``;
    our derivative rules never call that, so an empty byte tensor stands in (as in torch's own
    decomposition of ``cudnn_batch_norm``)."""
    return (aten.new_empty.default(input, [0], dtype=torch.uint8),)


#: batch norm without running statistics (``F.batch_norm(x, None, None, training=True)``: BiT's
#: weight-standardised convolutions normalise their weights so): nothing to write, the batch's own
#: statistics only; torch's decomposition of ``native_batch_norm`` picks the same op
_NO_STATS = aten._native_batch_norm_legit.no_stats


def _batch_norm_in_training(input, weight, bias, running_mean, running_var, momentum, eps):
    """``_batch_norm_with_update`` (batch norm in training, updating the running statistics; newer
    torch calls it from ``F.batch_norm``) has no ``training`` argument: it always is."""
    return aten._native_batch_norm_legit_functional.default(input, weight, bias, running_mean, running_var,
                                                             True, momentum, eps)  # fmt: skip


#: ops that mutate an argument they do not return, and their functional replacement
#: (torch generates these as ``*_functional`` ops; see ``_native_batch_norm_legit_functional``).
FUNCTIONAL_VARIANT: dict = {
    aten._native_batch_norm_legit.default: Variant(
        aten._native_batch_norm_legit_functional.default, {3: 3, 4: 4}, 3, unwritten=_NO_STATS
    ),
    aten.native_batch_norm.default: Variant(
        aten._native_batch_norm_legit_functional.default, {3: 3, 4: 4}, 3, unwritten=_NO_STATS
    ),
    # on a GPU, batch norm dispatches to cuDNN: (out, mean, invstd, reserve); the trace reads all four
    aten.cudnn_batch_norm.default: Variant(
        aten._native_batch_norm_legit_functional.default, {3: 3, 4: 4}, 3, _cudnn_reserve, _NO_STATS
    ),
    # (out, mean, invstd, reserve), as cuDNN's
    aten._batch_norm_with_update.default: Variant(_batch_norm_in_training, {3: 3, 4: 4}, 3, _cudnn_reserve),
}


def _written_args(op) -> list[int]:
    """Indices of the arguments an op writes to, from its schema (``Tensor(a!) self``)."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return []
    return [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]


def _view_source(op) -> int | None:
    """Index of the argument an op's output is a view of (``Tensor(a) self -> Tensor(a)``), else None."""
    schema = getattr(op, "_schema", None)
    if schema is None or len(schema.returns) != 1 or schema.returns[0].alias_info is None:
        return None
    if schema.returns[0].alias_info.is_write:
        return None  # an in-place op returns its own (written) argument
    set_ = schema.returns[0].alias_info.before_set
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.before_set == set_:
            return i
    return None


def _bernoulli_p(self, p: float = 0.5, *, generator=None):
    """``bernoulli.p`` with ``bernoulli_.float``'s default p (a trace leaves out an argument
    equal to its default: dropout at 0.5 draws ``bernoulli_(x)``)."""
    return aten.bernoulli.p(self, p, generator=generator)


#: in-place ops whose out-of-place twin has another overload name. Dropout on a CPU is
#: ``empty_like(x).bernoulli_(1 - p)``: the in-place draw is ``bernoulli_.float``, the functional
#: one ``bernoulli.p`` (a fresh tensor of draws shaped like ``self``, whose values it ignores).
RENAMED_OUT_OF_PLACE: dict = {aten.bernoulli_.float: _bernoulli_p}


#: in-place ops that change a tensor's shape and strides, never its values
METADATA_MUTATIONS = {aten.transpose_.default: aten.transpose.int, aten.t_.default: aten.t.default,
                      aten.unsqueeze_.default: aten.unsqueeze.default, aten.squeeze_.default: aten.squeeze.default,
                      aten.squeeze_.dim: aten.squeeze.dim, aten.squeeze_.dims: aten.squeeze.dims,
                      aten.swapdims_.default: aten.swapdims.default, aten.swapaxes_.default: aten.swapaxes.default}  # fmt: skip


def out_of_place(op):
    """``aten.add_.Tensor`` -> ``aten.add.Tensor``; ``copy_`` -> ``copy``; None when there is none."""
    if op in RENAMED_OUT_OF_PLACE:
        return RENAMED_OUT_OF_PLACE[op]
    packet, overload = op.name().split("::")[1].split(".")[0], op._overloadname
    if not packet.endswith("_"):
        return None
    functional = getattr(aten, packet[:-1], None)
    return getattr(functional, overload, None) if functional is not None else None


def _out_argument(op) -> str | None:
    """The name of the one keyword-only argument an ``out=`` overload writes (``mm.out``'s ``out``)."""
    written = [op._schema.arguments[i] for i in _written_args(op)]
    return written[0].name if len(written) == 1 and written[0].kwarg_only and len(op._schema.returns) == 1 else None


def out_variant_source(op):
    """``aten.mm.out`` -> ``aten.mm.default``: the overload of the same op whose arguments are the
    ``out=`` overload's without ``out``; None when there is none."""
    name = _out_argument(op)
    packet = getattr(aten, op.name().split("::")[1].split(".")[0], None)
    if name is None or packet is None:
        return None
    want = [(a.name, str(a.type)) for a in op._schema.arguments if a.name != name]
    for overload in packet.overloads():
        candidate = getattr(packet, overload)
        if candidate is not op and [(a.name, str(a.type)) for a in candidate._schema.arguments] == want:
            return candidate
    return None


# ------------------------------------------------------------------ the interpreter


@dataclasses.dataclass
class _Alias:
    """A value that is a view: its base node and the view ops from the base down to it."""

    base: Node
    chain: list  # [(op, args after self, kwargs)]
    stamp: int  # the base's version when this value was last derived


class _Functionalizer:
    """Run an ATen graph on (tracing) tensors with every mutation turned into a new value."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.env: dict[Node, Any] = {}
        self.alias: dict[Node, _Alias] = {}
        self.version: dict[Node, int] = {}
        self.rewrites: list[str] = []  # a log of what was replaced, for the notebook

    # -- reading values ---------------------------------------------------------------
    def value(self, node: Node):
        """A node's current value: a view of a base that changed since is re-derived first."""
        a = self.alias.get(node)
        if a is not None and a.stamp != self.version.get(a.base, 0):
            v = self.env[a.base]
            for op, args, kwargs in a.chain:
                v = op(v, *args, **kwargs)
            self.env[node], a.stamp = v, self.version.get(a.base, 0)
        return self.env[node]

    def read(self, arg):
        return map_arg(arg, self.value)

    # -- writing values ---------------------------------------------------------------
    def write(self, node: Node, new) -> None:
        """``node`` now holds ``new``: update its base (through the inverse views) and bump its version."""
        a = self.alias.get(node)
        if a is None:
            self.env[node] = new
            self.version[node] = self.version.get(node, 0) + 1
            return
        values = [self.env[a.base]]  # base, then each view in the chain
        for op, args, kwargs in a.chain[:-1]:
            values.append(op(values[-1], *args, **kwargs))
        for (op, args, kwargs), old in zip(reversed(a.chain), reversed(values)):
            if op not in INVERSE_VIEW:
                raise NotImplementedError(f"functionalize: cannot write through a view made by {op}")
            new = INVERSE_VIEW[op](old, new, *args, **kwargs)
        if any(op is aten.detach.default for op, _, _ in a.chain):  # w.data.mul_(2): autograd never sees it
            new = HIDDEN_WRITE(self.env[a.base], new)
            self.rewrites.append(f"{a.base.name}: written through detach, hidden from autograd (hidden_write)")
        self.env[a.base] = new
        self.version[a.base] = self.version.get(a.base, 0) + 1
        a.stamp = -1  # node itself is re-derived on its next read

    def make_view(self, node: Node, src: Node, op, args, kwargs) -> None:
        parent = self.alias.get(src)
        base, chain = (parent.base, list(parent.chain)) if parent else (src, [])
        chain.append((op, tuple(args), dict(kwargs)))
        self.alias[node] = _Alias(base, chain, self.version.get(base, 0))

    def share_alias(self, node: Node, src: Node) -> None:
        """``node`` is the same tensor as ``src`` (an in-place op returns its argument)."""
        parent = self.alias.get(src)
        base, chain = (parent.base, list(parent.chain)) if parent else (src, [])
        self.alias[node] = _Alias(base, chain, -1)  # -1: derive the value on its first read

    # -- one node ---------------------------------------------------------------------
    def call(self, node: Node):
        op = node.target
        args, kwargs = self.read(node.args), self.read(node.kwargs)
        if op is operator.getitem:
            return args[0][args[1]]
        if op in FUNCTIONAL_VARIANT:
            return self.call_variant(node, FUNCTIONAL_VARIANT[op], args, kwargs)
        written = _written_args(op)
        if not written:
            if op is aten.view.default:
                # the trace saw a contiguous input; after decomposition it may not be (an attention
                # written as bmm + permute): reshape copies only when a view is impossible
                op = aten.reshape.default
            out = op(*args, **kwargs)
            src = _view_source(op)
            if src is not None and isinstance(node.args[src], Node) and isinstance(out, torch.Tensor):
                self.make_view(node, node.args[src], op, args[src + 1 :], kwargs)
            return out
        if op in METADATA_MUTATIONS:
            return self.restride(node, METADATA_MUTATIONS[op], args, kwargs)
        if _out_argument(op) is not None:
            return self.call_out(node, op, args, kwargs)
        functional = out_of_place(op)
        if functional is None or written != [0]:
            raise NotImplementedError(f"functionalize: no functional form for {op}")
        new = functional(*args, **kwargs)
        target = node.args[0]
        self.rewrites.append(f"{node.name}: {op} -> {functional}, then {target.name} holds the result")
        self.write(target, new)
        self.share_alias(node, target)
        return self.value(node)

    def call_out(self, node: Node, op, args, kwargs):
        """``torch.mm(a, b, out=buf[2:5])``: the functional op (``mm``), then its value copied into
        ``out``'s layout and dtype (``copy``), written to ``out`` like any write through a view."""
        name = _out_argument(op)
        functional = out_variant_source(op)
        if functional is None or not isinstance(node.kwargs.get(name), Node):
            raise NotImplementedError(f"functionalize: no functional form for {op}")
        new = aten.copy.default(kwargs[name], functional(*args, **{k: v for k, v in kwargs.items() if k != name}))
        target = node.kwargs[name]
        self.rewrites.append(f"{node.name}: {op} -> {functional}, then {target.name} holds the result")
        self.write(target, new)
        self.share_alias(node, target)
        return self.value(node)

    def restride(self, node: Node, view, args, kwargs):
        """``x.transpose_(1, 2)`` changes how ``x`` is viewed, not its values (stft does this to a
        tensor it made): from here on ``x`` is the view ``transpose(x, 1, 2)`` of what it was."""
        target = node.args[0]
        if target.op == "placeholder":  # the caller's tensor would change shape: torch's AOT handles that
            raise NotImplementedError(f"functionalize: {node.target} on a graph input")
        if target in self.alias:
            self.alias[target].chain.append((view, tuple(args[1:]), dict(kwargs)))
            self.alias[target].stamp = -1  # re-derived, through the new view, on its next read
        elif any(a.base is target for a in self.alias.values()):
            raise NotImplementedError(f"functionalize: {node.target} on a tensor that has views")
        else:
            self.env[target] = view(*args, **kwargs)
        self.rewrites.append(f"{node.name}: {node.target} -> {view}, then {target.name} is that view")
        self.share_alias(node, target)
        return self.value(node)

    def call_variant(self, node: Node, variant: Variant, args, kwargs):
        if variant.unwritten is not None and all(args[i] is None for i in variant.writes):
            kept = [a for i, a in enumerate(args) if i not in variant.writes]
            outs = variant.unwritten(*kept, **kwargs)
            self.rewrites.append(f"{node.name}: {node.target} -> {variant.unwritten}, nothing to write")
            extra = variant.extra(*args, **kwargs) if variant.extra else ()
            return (*outs[: variant.num_outputs], *extra)
        outs = variant.op(*args, **kwargs)
        for arg_index, out_index in variant.writes.items():
            target = node.args[arg_index]
            if isinstance(target, Node):
                self.write(target, outs[out_index])
        self.rewrites.append(f"{node.name}: {node.target} -> {variant.op}, new "
                             + ", ".join(node.args[i].name for i in variant.writes if isinstance(node.args[i], Node)))  # fmt: skip
        extra = variant.extra(*args, **kwargs) if variant.extra else ()
        return (*outs[: variant.num_outputs], *extra)

    def run(self, *inputs):
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        for n, v in zip(placeholders, inputs):
            self.env[n] = v
        for node in self.graph.nodes:
            if node.op == "call_function":
                self.env[node] = self.call(node)
            elif node.op == "get_attr":  # a constant make_fx lifted (a mask, a table of sines)
                self.env[node] = fetch_attr(self.graph.owning_module, node.target)
            elif node.op == "output":
                outs = self.read(node.args[0])
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        mutated = [i for i, n in enumerate(placeholders) if self.version.get(n, 0) > 0]
        return outs, [self.value(placeholders[i]) for i in mutated], mutated


# ------------------------------------------------------------------ the API


@dataclasses.dataclass
class Functionalized:
    """A function with its mutations made explicit.

    ``fn(*args)`` returns ``(*outputs, *updated inputs)`` and never writes to anything;
    ``mutated`` lists the indices of the inputs it updates (the caller copies those back);
    ``before`` is the traced ATen graph with its in-place ops, ``rewrites`` says what changed.
    """

    fn: Callable
    num_outputs: int
    mutated: list[int]
    before: Graph
    rewrites: list[str]
    example_outputs: list

    def graph(self, *args) -> Graph:
        """The functional ATen graph for these inputs (no decompositions)."""
        from course_lib import decomp

        return decomp.trace(self.fn, *args, table={})


def has_mutations(graph: Graph) -> bool:
    return any(n.op == "call_function" and _written_args(n.target) for n in graph.nodes)


def functionalize(fn: Callable, *args, tracing_mode: str = "real") -> Functionalized:
    """Trace ``fn(*args)`` to ATen (mutations kept), then build its functional twin.

    Raises NotImplementedError naming the op when a mutation has no functional form here.
    ``tracing_mode="fake"`` traces FakeTensors (see :func:`course_lib.decomp.trace`).
    """
    from course_lib import decomp

    plain = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    before = decomp.trace(fn, *[a.clone() if isinstance(a, torch.Tensor) else a for a in plain], table={},
                          tracing_mode=tracing_mode)  # fmt: skip
    return functionalize_graph(before, *plain)


def functionalize_graph(before: Graph, *args) -> Functionalized:
    """:func:`functionalize` for an ATen graph already traced (``before``): the rewrite alone.

    Useful where the trace depends on the device: a CUDA trace has ``cudnn_batch_norm``, which a
    CPU build cannot run, but its functional variant runs anywhere.
    """
    plain = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    probe = _Functionalizer(before)  # one dry run on copies: how many outputs, which inputs change
    outs, _, mutated = probe.run(*[a.clone() if isinstance(a, torch.Tensor) else a for a in plain])

    def functional(*inputs):
        outs, updated, _ = _Functionalizer(before).run(*inputs)
        return (*outs, *updated)

    return Functionalized(functional, len(outs), mutated, before, probe.rewrites, outs)


def copy_back(args, updated, mutated: list[int]) -> None:
    """The runtime epilogue: write each updated value into the real input tensor, outside autograd."""
    with torch.no_grad():
        for i, new in zip(mutated, updated):
            if args[i] is not new:
                args[i].copy_(new)


def lift_constants(gm) -> tuple:
    """Turn a torch.fx GraphModule's tensor constants (``get_attr`` nodes make_fx adds for a mask or
    a table of sines) into extra placeholders at the end; returns ``(gm, constants)``.

    A backend then compiles a graph whose every tensor is an input, and the caller appends
    ``constants`` to each call's arguments (torch's AOT Autograd lifts them the same way).
    A constant the model made on the CPU (``torch.tensor(...)`` without a device: Mistral's mask
    value) moves to the device of the graph's inputs: a GPU kernel cannot read CPU memory.
    """
    graph = gm.graph
    gets = [n for n in graph.nodes if n.op == "get_attr"]
    if not gets:
        return gm, []
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    device = _graph_device(placeholders)
    last = placeholders[-1] if placeholders else None
    constants = []
    for n in gets:
        value = fetch_attr(gm, n.target)
        if isinstance(value, torch.Tensor) and device is not None and value.device != device:
            value = value.to(device)
            n.meta.pop("val", None)
        with graph.inserting_after(last) if last is not None else graph.inserting_before(next(iter(graph.nodes))):
            ph = graph.placeholder(f"const_{len(constants)}")
        ph.meta = dict(n.meta)
        ph.meta.setdefault("val", value)
        n.replace_all_uses_with(ph)
        graph.erase_node(n)
        constants.append(value)
        last = ph
    gm.recompile()
    return gm, constants


def _graph_device(placeholders) -> torch.device | None:
    """The device of a graph's tensor inputs (from ``meta["val"]``), None when they have none."""
    for n in placeholders:
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor):
            return val.device
    return None
