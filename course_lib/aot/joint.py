"""The joint forward+backward graph (teaches torch/_functorch/aot_autograd.py and
torch/_functorch/_aot_autograd/traced_function_transforms.py: ``create_joint``).

Position: Python function + example inputs --> ATen graph (make_fx) --> primitive graph
(course_lib.decomp) --> **joint graph**: ``(primals..., tangents...) -> (outputs..., grads...)``.

How: a function ``joint(primals, tangents)`` runs the primitive forward graph, then walks its
nodes in reverse applying the derivative rules of :mod:`course_lib.aot.rules` (reverse-mode AD
with a gradient accumulator per value). Tracing ``joint`` with make_fx records forward and
backward as one functional graph: no in-place ops, no autograd tape, just ATen primitives.
Real AOT Autograd does the same trace but lets torch's own autograd supply the backward
(``torch.autograd.grad`` inside make_fx); we use our own rules so every backward node is visible.

Before any of that, :func:`course_lib.aot.functionalize.functionalize` removes in-place ops and
views (torch runs the same step inside its trace): a graph input written in place becomes an
extra forward output (``Joint.mutated`` says which input). A running mean written so has no tangent;
an input that requires grad has one (``Joint.grad_mutated``): in eager, ``y[:, 0] = 5`` on an
activation puts the write into y's history, so y's producer gets no gradient at column 0.

Placeholders are named as in torch: ``primals_1..n`` then ``tangents_1..m``.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Collection
from typing import Any

import torch
import torch.utils._pytree as pytree

from course_lib import compat, decomp
from course_lib.aot import autograd_function
from course_lib.aot.autograd_function import capture_autograd_functions, inline_autograd_functions
from course_lib.aot.rules import (
    DERIVATIVES,
    ZERO_FORMULA,
    KeywordGrads,
    LeftToTorch,
    has_no_gradient,
    needed,
    needs_grad,
)
from course_lib.decomp.table import has_complex
from course_lib.fx import Graph, Node, fetch_attr, map_arg

aten = torch.ops.aten


def _flat(out: Any) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def backward_pass(graph: Graph, primals: list, tangents: list, wrt: list[int],
                  unreached: Collection[int] = (), formulas: Collection = (),
                  used: list | None = None) -> tuple[list, list]:  # fmt: skip
    """Run ``graph`` on ``primals`` and back-propagate ``tangents``; returns (outputs, grads).

    ``grads`` has one entry per index in ``wrt``, zeros when no rule sends a gradient to that input,
    or None for an index in ``unreached`` (see :func:`no_gradient`).

    A node takes torch's autograd formula (:func:`_autograd_rule`) instead of a course rule when its
    op is in ``formulas``, when one of its values is complex (the course's rules are written for
    real numbers; a complex product's gradient needs the conjugate, ``g * conj(b)``), or when the
    course's rule raises :class:`LeftToTorch`; each op that did is appended to ``used``.
    Raises :class:`MissingRule` (a KeyError) naming the op when a node has no rule.
    """
    used = [] if used is None else used
    env: dict[Node, Any] = {}
    inputs = iter(primals)
    for node in graph.nodes:
        if node.op == "placeholder":
            env[node] = next(inputs)
        elif node.op == "get_attr":  # a tensor constant the trace kept (a mask, a table of sines)
            env[node] = fetch_attr(graph.owning_module, node.target)
        elif node.op == "call_function":
            env[node] = node.target(*map_arg(node.args, env.get), **map_arg(node.kwargs, env.get))
        elif node.op == "output":
            out_nodes = _flat(node.args[0])
    outputs = [env[n] for n in out_nodes]
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    live = _depends_on([placeholders[i] for i in wrt])  # only these values need a gradient
    grad: dict[Node, Any] = {}  # a multi-output node's entry is a list, one gradient per output
    for n, t in zip(out_nodes, tangents):  # None: an output nothing differentiates (a running mean)
        if t is not None:
            _accumulate(grad, n, t)
    for node in reversed(graph.nodes):
        if node.op != "call_function" or node not in grad or has_no_gradient(node.target, env[node]):
            continue
        if node.target is operator.getitem:  # one output of a multi-output op: collect per index
            base, index = node.args
            items = grad.setdefault(base, [None] * len(env[base]))
            items[index] = grad[node] if items[index] is None else aten.add.Tensor(items[index], grad[node])
            continue
        args, kwargs = map_arg(node.args, env.get), map_arg(node.kwargs, env.get)
        op = node.target
        course = DERIVATIVES.get(op) or _custom_op_rule(op)
        torchs = op in formulas or (has_complex(env[node], args, kwargs) and has_torch_formula(op))
        if course is None and not torchs:
            raise MissingRule(op, node.name, origin=node.meta.get("original_aten"))
        wanted = ([_reads_live(a, live) for a in node.args], {k: _reads_live(a, live) for k, a in node.kwargs.items()})
        arg_grads = None
        with needs_grad(*wanted):  # a fused backward kernel skips the gradients nobody reads
            if torchs:
                try:
                    arg_grads = _autograd_rule(op)(grad[node], env[node], *args, **kwargs)
                except RuntimeError as exc:  # torch has no complex formula for it (zero_, slice_scatter, copy):
                    if course is None or not _no_formula(exc):  # a linear op, whose real rule is right
                        raise
                else:
                    used.append(op)
            if arg_grads is None:
                try:
                    arg_grads = course(grad[node], env[node], *args, **kwargs)
                except LeftToTorch:  # a case the course's rule leaves out (scatter_reduce's amax): torch's formula
                    if not has_torch_formula(op):
                        raise
                    used.append(op)
                    arg_grads = _autograd_rule(op)(grad[node], env[node], *args, **kwargs)
        if arg_grads and isinstance(arg_grads[-1], KeywordGrads):  # gradients for keyword arguments too
            for key, g1 in arg_grads[-1].items():
                if isinstance(node.kwargs.get(key), Node) and g1 is not None and node.kwargs[key] in live:
                    _accumulate(grad, node.kwargs[key], _in_dtype_of(g1, env[node.kwargs[key]]))
            arg_grads = arg_grads[:-1]
        for a, g in zip(node.args, arg_grads):
            pairs = zip(a, g) if isinstance(a, (list, tuple)) and isinstance(g, (list, tuple)) else [(a, g)]
            for a1, g1 in pairs:  # a list argument (cat's tensors) gets a list of gradients
                if isinstance(a1, Node) and g1 is not None and a1 in live:
                    _accumulate(grad, a1, _in_dtype_of(g1, env[a1]))
    grads = [grad.get(placeholders[i], None) for i in wrt]
    grads = [aten.mul.Tensor(primals[i], 0.0) if g is None and i not in unreached else g for g, i in zip(grads, wrt)]
    return outputs, grads


def _no_formula(exc: RuntimeError) -> bool:
    """torch's autograd says it cannot differentiate the op (not: the trace failed for another reason)."""
    text = str(exc)
    return (
        "derivative for" in text and "is not implemented" in text
    ) or "does not support automatic differentiation" in text


def _reads_live(arg, live: set) -> bool:
    """Does this argument (a value, or a list of them: cat's tensors) need a gradient?"""
    if isinstance(arg, (list, tuple)):
        return any(_reads_live(a, live) for a in arg)
    return isinstance(arg, Node) and arg in live


def no_gradient(aten_graph: Graph, wrt: list[int]) -> set[int]:
    """The inputs in ``wrt`` that torch's autograd gives None: no output depends on them along float
    (or complex) values of the ATen graph, only through a comparison, an index, a factory
    (``zeros_like(x)`` takes x's shape, not its values), ``detach``, or not at all.

    Read on the graph *before* the course's decompositions, at the level where torch's autograd
    records ops: ``sign(x)`` reaches its output through a float (its derivative formula gives
    zeros, a tensor), although decomposed it is ``where(x > 0, 1, ...)``, comparisons only.
    """

    def carries(
        u: Node, n: Node
    ) -> bool:  # backward_pass's test (has_no_gradient), less the ops torch records with zeros
        val = u.meta.get("val")
        tensors = [t for t in (val if isinstance(val, (tuple, list)) else [val]) if isinstance(t, torch.Tensor)]
        if u.op == "call_function" and u.target is autograd_function.OP:  # the author's backward decides
            return autograd_function.carries(u.args[0], u.args[1], n)
        return (u.op == "call_function" and bool(tensors)
                and (u.target in ZERO_FORMULA or not has_no_gradient(u.target, val)))  # fmt: skip

    placeholders = [n for n in aten_graph.nodes if n.op == "placeholder"]
    outputs = set(_flat(aten_graph.output_node().args[0]))
    none = set()
    for i in wrt:
        seen, stack = set(), [placeholders[i]]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(u for u in n.users if carries(u, n))
        if not seen & outputs:
            none.add(i)
    return none


class MissingRule(KeyError):
    """A node on the gradient path whose op has no derivative rule (``.op`` names it)."""

    def __init__(self, op, node_name: str, borrowed: list | None = None, origin=None):
        via = f", from torch's decomposition of {', '.join(map(str, borrowed))}" if borrowed else ""
        super().__init__(f"no derivative rule for {op} (node {node_name}{via})")
        self.op, self.node_name = op, node_name
        self.origin = origin  # the op whose decomposition made the node, when the trace kept it


def _custom_op_rule(op) -> Callable | None:
    """The derivative of a custom op (``torch.library.custom_op``, outside ``aten``) is the one its
    author registered with ``torch.library.register_autograd``; no table here can know it. The rule
    runs the op once more under autograd and asks ``torch.autograd.grad`` for the input gradients.

    That call is first traced on its own, with FakeTensors for the joint trace's values, as torch's
    AOT Autograd traces: a backward that reads a value (``offs.tolist()``) raises there. With real
    values, ``tolist()`` hands plain numbers to Python without the tracer seeing it, and the graph
    would keep this call's expert boundaries for every later call. Constants (``torch.tensor([2, 5])``
    written in the model) stay real, and may be read.

    Authors write backwards that fill a zeros buffer piece by piece (``torch.mm(..., out=buf[a:b])``,
    ``add_``). Such a trace is made functional by the course's own pass
    (:mod:`course_lib.aot.functionalize`), and its functional version is replayed into the joint
    trace: ``slice_scatter`` nodes where the author wrote. A backward without writes is recorded as it
    runs (often a second custom op, as transformers' ``grouped_mm_fallback_backward``). The repeated
    forward call is dead code when the backward does not read the output, and goes when the graph
    is cleaned.
    """
    if not isinstance(op, torch._ops.OpOverload) or op.namespace in ("aten", "prims"):
        return None
    if op is autograd_function.OP:  # a Function from a Dynamo graph: its author's backward, as traced
        return lambda grad, out, key, args: (None, _record(autograd_function.backward(key),
                                                           autograd_function.cotangents(key, _flat(grad), out),
                                                           "a torch.autograd.Function's backward"))  # fmt: skip

    def rule(grad, out, *args, **kwargs):
        parts = [pytree.tree_flatten(a) for a in (*args, *kwargs.values())]
        flat = [t for leaves, _ in parts for t in leaves]
        # the trace's values become inputs of the small trace (op(s, s): s once); its constants stay
        # constants, which the backward may read (offsets written as torch.tensor([...]) in the model)
        unique = list({id(t): t for t in flat if isinstance(t, torch.Tensor) and compat.traced_as_variable(t)}.values())
        slot = {id(t): i for i, t in enumerate(unique)}
        cotangents = [(j, g) for j, g in enumerate(_flat(grad)) if g is not None]
        floats = [i for i, t in enumerate(unique) if t.is_floating_point()]

        def author_backward(*tensors):
            gs, ts = tensors[: len(cotangents)], tensors[len(cotangents) :]
            a = _unflatten([ts[slot[id(t)]] if id(t) in slot else t for t in flat], parts)
            marked = [ts[i] for i in floats if not ts[i].requires_grad]
            for t in marked:  # values of a trace are leaves without grad: marked for this call only
                t.requires_grad_(True)
            try:
                with torch.enable_grad():
                    outs = _flat(op(*a[: len(args)], **dict(zip(kwargs, a[len(args) :]))))
                pairs = [(outs[j], g) for (j, _), g in zip(cotangents, gs) if outs[j].requires_grad]
                return torch.autograd.grad([o for o, _ in pairs], [ts[i] for i in floats], [g for _, g in pairs],
                                           allow_unused=True)  # fmt: skip
            finally:
                for t in marked:
                    t.requires_grad_(False)

        got = _record(author_backward, [g for _, g in cotangents] + unique, f"the backward registered for {op}")
        by_id = {id(unique[i]): g for i, g in zip(floats, got)}
        # a tensor passed twice (op(s, s)) got its whole gradient from autograd: it goes to its first
        # position only, since backward_pass adds every position's gradient to the same node
        return tuple(pytree.tree_map(lambda a: by_id.pop(id(a), None) if isinstance(a, torch.Tensor) else None,
                                     list(args)))  # fmt: skip

    return rule


def _record(backward: Callable, inputs: list, what: str) -> list:
    """``backward(*inputs)`` recorded into the joint trace. Traced on its own first, with FakeTensors
    (a backward that reads values raises); a backward that writes in place is replayed in its
    functional form (course_lib.aot.functionalize), one without writes as it runs."""
    from course_lib.aot.functionalize import functionalize, has_mutations

    mode = "real" if any(compat.is_fake(t) for t in inputs) else "fake"  # a symbolic joint trace is fake already
    with compat.outside_trace():
        func = functionalize(backward, *inputs, tracing_mode=mode)
    read = _reads_input_values(func.before)
    if read:
        raise NotImplementedError(f"{what} reads values of its inputs ({read}): "
                                  "its shapes depend on data, which a course graph cannot have")  # fmt: skip
    if has_mutations(func.before):
        return list(func.fn(*inputs)[: func.num_outputs])  # the functional version, replayed into the joint trace
    return list(backward(*inputs))  # recorded as written


def _reads_input_values(graph) -> str | None:
    """The first op of ``graph`` that reads values (``aten._local_scalar_dense``: ``.item()``,
    ``.tolist()``) of something computed from a graph input, else None. A FakeTensor trace records
    such a read as a node whose result is a size symbol; reads of constants are fine."""
    from_inputs = set()
    for n in graph.nodes:
        if n.op == "placeholder" or any(a in from_inputs for a in n.all_input_nodes):
            from_inputs.add(n)
            if n.op == "call_function" and torch.Tag.data_dependent_output in getattr(n.target, "tags", ()):
                return str(n.target)
    return None


def has_torch_formula(op) -> bool:
    """Whether torch's autograd has a derivative formula of its own for the ATen op ``op``: an entry of
    ``tools/autograd/derivatives.yaml``, compiled into the ``Autograd`` dispatch key. A composite op
    (``CompositeImplicitAutograd``) has none; it is differentiated through the ops it calls. Prims
    have no formulas (torch._decomp's entries are written in them, and are not differentiated)."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten" or _writes(op):
        return False  # an in-place op in a functional graph came from a borrowed entry: the entry goes
    name = op.name()
    return (torch._C._dispatch_has_kernel_for_dispatch_key(name, "Autograd")
            and not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"))  # fmt: skip


def _differentiable(a) -> bool:
    return isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex())


#: ops a trace without gradients picks, and the op torch's autograd differentiates in their place
#: (same arguments, same outputs): embedding_bag calls the forward-only kernel when nothing needs a
#: gradient, and the course traces plain tensors
WITH_AUTOGRAD = {aten._embedding_bag_forward_only.default: aten._embedding_bag.default}


def _autograd_rule(op) -> Callable:
    """A rule that asks torch's autograd for ``op``'s derivative: ``torch.func.vjp`` of the op at the
    node's inputs, applied to the node's output gradients. Under the joint trace, the ops that
    torch's formula calls are recorded (``rfft``'s backward is a complex FFT of the zero-padded
    gradient, ``linalg_solve``'s a second solve): the backward is still a graph of ATen ops, only
    its recipe is torch's. Formulas may write in place (``new_zeros`` then a slice ``copy_``), so
    the call runs under ``torch.func.functionalize``, which records ``slice_scatter`` instead, as
    torch's AOT Autograd does. The repeated forward call is dead code when the backward does not
    read the output, and goes when the graph is cleaned.
    """

    def rule(grad, out, *args, **kwargs):
        keys = [*range(len(args)), *kwargs]  # each argument, by position or keyword
        parts = [pytree.tree_flatten(a) for a in (*args, *kwargs.values())]  # a list argument has several tensors
        flat = [t for leaves, _ in parts for t in leaves]
        owner = [k for k, (leaves, _) in zip(keys, parts) for _ in leaves]
        # by position (mul(x, x) gets two gradients), only where one is read (linalg_pinv's atol has no formula)
        at = [i for i, t in enumerate(flat) if _differentiable(t) and needed(owner[i])]
        keep = [_differentiable(o) for o in _flat(out)]  # integer outputs (an info code) get no cotangent

        def call(*leaves):
            values = list(flat)
            for i, t in zip(at, leaves):
                values[i] = t
            a = _unflatten(values, parts)
            outs = _flat(WITH_AUTOGRAD.get(op, op)(*a[: len(args)], **dict(zip(kwargs, a[len(args) :]))))
            return tuple(o for o, d in zip(outs, keep) if d)

        def backward(cotangents, *leaves):
            outs, vjp = torch.func.vjp(call, *leaves)
            return vjp(tuple(aten.zeros_like.default(o) if g is None else g for o, g in zip(outs, cotangents)))

        cotangents = [g for g, d in zip(_flat(grad), keep) if d]
        got = torch.func.functionalize(backward, remove="mutations_and_views")(cotangents, *(flat[i] for i in at))
        values = [None] * len(flat)
        for i, g in zip(at, got):
            values[i] = g
        grads = _unflatten(values, parts)
        return (*grads[: len(args)], KeywordGrads({k: g for k, g in zip(kwargs, grads[len(args) :]) if g is not None}))

    return rule


def _unflatten(values: list, parts: list) -> list:
    """``values`` (one per leaf) put back into the arguments' structures, ``parts`` their tree_flatten."""
    out, i = [], 0
    for leaves, spec in parts:
        out.append(pytree.tree_unflatten(values[i : i + len(leaves)], spec))
        i += len(leaves)
    return out


def _depends_on(roots: list[Node]) -> set[Node]:
    seen, stack = set(), list(roots)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.users)
    return seen


def _in_dtype_of(g, value):
    """``g`` in the dtype of the value it is the gradient of. torch's autograd engine does this to
    every gradient a derivative formula returns (``validate_outputs`` in ``engine.cpp``): a formula
    is written once for all dtypes, so ``mul(bf16, float32)`` gives its bf16 operand a float32
    gradient, and T5's layer norm (``x.to(float32) ... .to(bf16)``) hands float32 gradients to a
    bf16 matmul."""
    if (isinstance(g, torch.Tensor) and isinstance(value, torch.Tensor) and value.is_floating_point()
            and g.dtype != value.dtype):  # fmt: skip
        return aten._to_copy.default(g, dtype=value.dtype)
    return g


def _accumulate(grad: dict, node: Node, g) -> None:
    grad[node] = aten.add.Tensor(grad[node], g) if node in grad else g


@dataclasses.dataclass
class Joint:
    """A joint graph and how to read its inputs and outputs.

    ``graph``: placeholders ``primals_*`` then ``tangents_*``; output ``(*outputs, *grads)``.
    ``wrt``: which primals get a gradient (in order; one no gradient reaches is left out, and gets
    None); ``forward``: the primitive forward graph.
    ``num_outputs`` counts every forward output: the function's own, then one updated value per
    input in ``mutated``. Those have no tangent (nothing differentiates a running mean), except the
    ones in ``grad_mutated``: inputs that require grad (an activation written in place), whose
    updated values take tangents after the function's own outputs', in the order of ``mutated``.
    """

    graph: Graph
    num_primals: int
    num_outputs: int
    wrt: list[int]
    forward: Graph
    mutated: list[int] = dataclasses.field(default_factory=list)
    borrowed: list = dataclasses.field(default_factory=list)  # ops decomposed with torch's table (joint_graph)
    formulas: list = dataclasses.field(default_factory=list)  # ops differentiated by torch's autograd formula
    grad_mutated: list[int] = dataclasses.field(default_factory=list)

    @property
    def num_user_outputs(self) -> int:
        return self.num_outputs - len(self.mutated)

    @property
    def differentiable_outputs(self) -> list[bool]:
        """Per output of the function: False for an input passed through that takes no gradient (a
        buffer: CTRL's ``self.pos_encoding.to(...)``), which leaves the compiled Function without a
        gradient history, as it does in eager; with one, the buffer written back into the model would
        tie the next step's backward to this step's graph."""
        placeholders = [n for n in self.forward.nodes if n.op == "placeholder"]
        # an input handed back as it came (a no-op .to()) that no gradient is taken for; any other
        # output keeps its history, as torch's ops give one (fill, matrix_power(x, 0): no path from x)
        constant = {p for i, p in enumerate(placeholders) if i not in self.wrt}
        return [not (isinstance(o, Node) and o in constant)
                for o in _flat(self.forward.output_node().args[0])[: self.num_user_outputs]]  # fmt: skip

    @property
    def primals(self) -> list[Node]:
        return [n for n in self.graph.nodes if n.op == "placeholder"][: self.num_primals]

    @property
    def tangents(self) -> list[Node]:
        return [n for n in self.graph.nodes if n.op == "placeholder"][self.num_primals :]

    @property
    def outputs(self) -> list[Node]:
        return _flat(self.graph.output_node().args[0])

    def __str__(self) -> str:
        return str(self.graph)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": str(self)}


def _wanted(args: tuple) -> list[int]:
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and _differentiable(a)]
    marked = [i for i in tensors if args[i].requires_grad]
    return marked or tensors


def joint_graph(fn: Callable, *args: Any, wrt: list[int] | None = None) -> Joint:
    """Trace ``fn(*args)`` forward and backward into one functional graph of primitives.

    Gradients are taken for the inputs that ``requires_grad`` (all float tensors if none do),
    or for the indices in ``wrt``. The tangents have the outputs' shapes.

    The long tail: the course writes derivative rules for primitives and a few dozen ops, torch has
    rules for every op. When a node on the gradient path has no rule and no course decomposition
    (``celu``, ``huber_loss``, ``reflection_pad2d``...), but torch's own table (``torch._decomp``)
    has one, the trace starts again with that entry borrowed: the op becomes ops that do have
    rules. Inductor does the same, starting from ``core_aten_decompositions()`` and adding its own.
    ``Joint.borrowed`` lists what was borrowed.

    Last, an ATen op torch can neither decompose nor leave to its parts (FFTs, ``linalg_*``,
    ``segment_reduce``, ``special_erfcx``) has a formula in torch's ``derivatives.yaml``: the trace
    starts again with that op differentiated by torch's autograd (:func:`_autograd_rule`), which is
    how torch's AOT Autograd differentiates every op. ``Joint.formulas`` lists them, with the ops
    of nodes that took a formula for another reason (complex values, see :func:`backward_pass`).
    Only an op with none of these four sources (a prim: prims have no autograd) raises
    :class:`MissingRule`.
    """
    if isinstance(fn, torch.fx.GraphModule):  # a Dynamo graph: its autograd.Functions keep their backwards
        fn = inline_autograd_functions(fn)
    else:  # a plain function calls Function.apply itself: each call becomes the same custom op
        fn = capture_autograd_functions(fn)
    table, borrowed, formulas = decomp.DECOMPOSITIONS, [], []
    via: dict[str, str] = {}  # borrowed op -> the op whose entry called it (_unsafe_index from reflection_pad1d)

    def give_back(origins=()) -> bool:
        """The borrowed ops among ``origins`` (the ops whose entries made the failing nodes, where the trace
        knows them; else every borrowed op) that have a formula take it instead of torch's entry, and the
        entries borrowed for their entries' sake go too (False: none had a formula)."""
        nonlocal table, borrowed, formulas
        names = {str(op) for op in origins if op is not None}  # the tracer's OpOverload may be another object
        known = [op for op in borrowed if str(op) in names]
        back = [op for op in (known or borrowed) if has_torch_formula(op)]
        gone = {str(op) for op in back}
        drop = [op for op in borrowed if op in back or via.get(str(op)) in gone]
        table = {op: entry for op, entry in table.items() if op not in drop}
        borrowed, formulas = [op for op in borrowed if op not in drop], [*formulas, *back]
        return bool(back)

    while True:
        try:
            joint = _joint_graph(fn, args, wrt, table, formulas)
        except MissingRule as exc:
            if _writes(exc.op) and give_back([exc.origin]):  # a borrowed entry's in-place op (see below)
                continue
            entry = decomp.torch_decomposition(exc.op)
            if entry is not None and exc.op not in table:
                table, borrowed = {**table, exc.op: entry}, [*borrowed, exc.op]
                if exc.origin is not None and str(exc.origin) != str(exc.op):
                    via[str(exc.op)] = str(exc.origin)
                continue
            if has_torch_formula(exc.op) and exc.op not in formulas:
                formulas = [*formulas, exc.op]
                continue
            # a prim from a borrowed entry (prims.erfcx, from torch's special_erfcx, itself from its
            # log_ndtr): prims have no formulas, so the borrowed ops take their own formulas instead.
            # Keeping the outer entry would differentiate its where() branches: NaN times 0 is NaN
            if give_back([exc.origin]):
                continue
            if borrowed:  # say where the op came from: prims.lgamma from torch's entry for aten.lgamma
                raise MissingRule(exc.op, exc.node_name, borrowed) from None
            raise
        writing = [n for n in joint.forward.nodes if n.op == "call_function" and _writes(n.target)]
        # an entry that fills a new tensor in place: not a functional graph
        if writing and give_back([n.meta.get("original_aten") for n in writing]):
            continue
        if writing:
            raise NotImplementedError(f"torch's decomposition of {', '.join(map(str, borrowed))} writes in place "
                                      f"({writing[0].target}); course_lib.aot traces functional graphs only")  # fmt: skip
        joint.borrowed = borrowed
        return joint


def _writes(op) -> bool:
    return getattr(getattr(op, "_schema", None), "is_mutable", False)


def _joint_graph(fn: Callable, args: tuple, wrt: list[int] | None, table: dict, formulas: Collection = ()) -> Joint:
    from course_lib.aot.functionalize import functionalize

    plain = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    wrt = _wanted(args) if wrt is None else list(wrt)
    func = functionalize(fn, *plain)  # no in-place ops, no views written through, inputs untouched
    forward = decomp.trace(func.fn, *plain, table=table, provenance=True)  # which entry made each node
    # an input that requires grad and is written in place: its updated value is differentiated too
    grad_mutated = [i for i in func.mutated if i in wrt and args[i].requires_grad]
    tangents = [torch.ones_like(o) for o in [*func.example_outputs, *(plain[i] for i in grad_mutated)]]
    n, n_out = len(plain), func.num_outputs + len(func.mutated)
    reached: list[int] = []
    used: list = []  # the ops whose nodes took torch's formulas

    def joint(*flat):
        user, written = flat[n : n + func.num_outputs], iter(flat[n + func.num_outputs :])
        aligned = [*user, *(next(written) if i in grad_mutated else None for i in func.mutated)]
        outs, grads = backward_pass(forward, list(flat[:n]), aligned, wrt, unreached, formulas, used)
        reached[:] = [i for i, g in zip(wrt, grads) if g is not None]
        return (*outs, *(g for g in grads if g is not None))

    unreached = set(wrt)  # first try: every input no rule reaches gets None
    table = {**table, autograd_function.OP: _inline_function}  # a Function's forward: its ops in the joint graph
    graph = decomp.trace(joint, *plain, *tangents, table=table)
    if len(reached) < len(wrt):  # some did: which of them torch gives None (rare; one more trace)
        unreached = no_gradient(decomp.trace(func.fn, *plain, table={}), wrt)
        if set(wrt) - set(reached) - unreached:
            graph = decomp.trace(joint, *plain, *tangents, table=table)
    graph.eliminate_dead_code()
    _trim_output_masks(graph)
    _rename_placeholders(graph, n)
    # an input no gradient reaches (hinge_embedding_loss's target, read by a comparison only) has no
    # output in the joint graph, and gets None in backward, as in torch
    return Joint(
        graph, n, n_out, reached, forward, func.mutated, formulas=list(dict.fromkeys(used)), grad_mutated=grad_mutated
    )


def _inline_function(key: int, args: list) -> list:
    """A Dynamo graph's autograd.Function (:mod:`course_lib.aot.autograd_function`) as the ops of its
    forward, in their functional form: the author's ``masked_fill_`` becomes ``masked_fill``."""
    return _record(lambda *a: autograd_function.forward(key, list(a), copy=False), list(args),
                   "a torch.autograd.Function's forward")  # fmt: skip


# Multi-output backward externs that take an ``output_mask``: which gradients to compute at all.
MASKED_BACKWARDS = {aten.convolution_backward.default: 10}


def _trim_output_masks(graph: Graph) -> None:
    """Ask a backward extern only for the gradients the graph reads. The convolution rule asks
    ``convolution_backward`` for every gradient; when nothing reads one (a CNN's first convolution:
    the pixels need no gradient), dead-code elimination has removed its ``getitem``, so the mask
    entry goes to False and the library skips that work, as torch's autograd does by passing
    ``output_mask`` from ``needs_input_grad`` (tools/autograd/derivatives.yaml, ``grad_input_mask``)."""
    for node in graph.nodes:
        pos = MASKED_BACKWARDS.get(node.target) if node.op == "call_function" else None
        if pos is None or len(node.args) <= pos:
            continue
        read = {u.args[1] for u in node.users if u.target is operator.getitem}
        mask = [bool(m) and i in read for i, m in enumerate(node.args[pos])]
        node.args = (*node.args[:pos], mask, *node.args[pos + 1 :])


def _rename_placeholders(graph: Graph, num_primals: int) -> None:
    for i, node in enumerate(n for n in graph.nodes if n.op == "placeholder"):
        name = f"primals_{i + 1}" if i < num_primals else f"tangents_{i - num_primals + 1}"
        node.name = node.target = name
