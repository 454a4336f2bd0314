"""The graph being captured, and what happens when it ends (teaches torch/_dynamo/output_graph.py).

Position: tensor operations seen by the translator --> a course_lib.fx Graph per captured region
--> the backend's compiled callable.

``OutputGraph`` owns the current FX graph. Tensors that the graph did not compute (the frame's
inputs, tensors computed before a graph break) become placeholders the first time the graph
uses them. When the region ends, at a ``return`` or at a graph break, :meth:`compile_and_run`
adds an output node listing the live tensors the graph computed, hands the graph to the
backend, runs the compiled code on the graph's inputs, and writes its results back into those
tensors' Vars, so everything after the region sees the values the compiled code produced. Then
the containers mutated in the region are written back into their Python objects
(:meth:`apply_side_effects`; Dynamo's ``SideEffects`` replays them after the graph runs).

Automatic dynamic: ``dynamic`` maps a tensor input's source name to ``{dim: size symbol}``. Those
dims get a symbol in the TENSOR_MATCH guard and ``SHAPE_ENV`` guards on the symbol (``2 <= s0``:
sizes 0 and 1 are specialised, as in torch; two dims that share a symbol must stay equal), and
each placeholder's ``meta["course_dynamic_dims"]`` lists its dynamic dims for the backend
(:func:`graph_dynamic_dims`). Simplification: we hold concrete example tensors, not SymInts, so a
size read into Python (``x.shape[0]``, ``len(x)``, ``numel``) specialises every dynamic dim of
the capture (:meth:`size_read`); Dynamo would keep a SymInt and guard only where it branches.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

import torch

from course_lib import fx
from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.guards import Guard, guard_for
from course_lib.dynamo.source import Source
from course_lib.dynamo.variables import (
    BuiltinVar,
    ConstVar,
    DictVar,
    DictViewVar,
    IteratorVar,
    ListVar,
    PyObjVar,
    SetVar,
    TensorVar,
    TorchFnVar,
    Var,
    wrap,
)


@dataclasses.dataclass
class CapturedGraph:
    """One graph the capture produced, and why it ended."""

    graph: fx.Graph
    frame: str
    reason: str  # "return" or the graph-break reason
    graph_break: bool
    line: int | None
    compiled: Any = None

    @property
    def op_count(self) -> int:
        return sum(n.op.startswith("call_") for n in self.graph.nodes)


@dataclasses.dataclass
class BreakRecord:
    """A graph break: where it happened and why (``BreakReason`` shown by explain)."""

    reason: str
    frame: str
    line: int | None
    instruction: str

    def __str__(self) -> str:
        return f"{self.frame}, line {self.line}, {self.instruction}: {self.reason}"


class OutputGraph:
    """State shared by every frame of one capture: graphs, guards, breaks."""

    def __init__(self, backend: Callable, compiled_cache: dict[str, Any] | None = None,
                 dynamic: dict[str, dict[int, str]] | None = None):  # fmt: skip
        self.backend = backend
        self.dynamic: dict[str, dict[int, str]] = {k: dict(v) for k, v in (dynamic or {}).items()}
        self.specialized: str | None = None  # why the dynamic dims were given up (a size read)
        self.symbol_home: dict[str, tuple[Source, int]] = {}  # size symbol -> first (source, dim)
        self.sizes_seen: dict[str, tuple] = {}  # source name -> the example's sizes
        self.mutated: dict[int, Var] = {}  # containers changed since the region began (side effects)
        self.compiled_cache = compiled_cache if compiled_cache is not None else {}
        self.graphs: list[CapturedGraph] = []
        self.guards: dict[tuple, Guard] = {}
        self.nested_guards: list[Guard] = []  # guards of frames entered at graph breaks
        self.mutations: list[tuple] = []
        self.breaks: list[BreakRecord] = []
        self.frames: list[str] = []
        self.graph_id = 0
        self._new_graph()

    # -- the current graph ----------------------------------------------------------------
    def _new_graph(self) -> None:
        self.graph_id += 1
        self.graph = fx.Graph(owning_module=torch.nn.Module())
        self.inputs: list[tuple[fx.Node, TensorVar]] = []
        self.placeholder_of: dict[int, fx.Node] = {}
        self.attr_names: dict[int, str] = {}
        self.reenter_grad: tuple[bool, bool] | None = None  # (outer, inside) across a break in a block

    def node_of(self, var: TensorVar) -> fx.Node:
        """The node for a tensor in the current graph (a new placeholder if it came from outside)."""
        if var.graph_id == self.graph_id and var.node is not None:
            return var.node
        if id(var) not in self.placeholder_of:
            name = var.source.name if var.source is not None else "tensor"
            first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
            with self.graph.inserting_before(first):
                node = self.graph.placeholder(_clean(name))
            node.meta["example"] = var.value
            self.placeholder_of[id(var)] = node
            self.inputs.append((node, var))
        return self.placeholder_of[id(var)]

    def register_module(self, module: torch.nn.Module, source_name: str) -> str:
        """Make ``module`` reachable from the graph's root, under a name derived from its source."""
        if id(module) not in self.attr_names:
            name = _clean(source_name)
            self.graph.owning_module.add_module(name, module)
            self.attr_names[id(module)] = name
        return self.attr_names[id(module)]

    def register_tensor(self, tensor: torch.Tensor, source_name: str) -> str:
        if id(tensor) not in self.attr_names:
            name = _clean(source_name)
            setattr(self.graph.owning_module, name, tensor) if not isinstance(tensor, torch.nn.Parameter) else (
                self.graph.owning_module.register_parameter(name, tensor)
            )
            self.attr_names[id(tensor)] = name
        return self.attr_names[id(tensor)]

    def remember(self, var: Any, attr: str) -> None:
        """Log ``var.attr`` before a handler mutates it, so a broken instruction can be undone."""
        value = getattr(var, attr)
        copy = list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
        self.mutations.append((var, attr, set(value) if isinstance(value, set) else copy))

    def mutate(self, var: Var) -> None:
        """A rule is about to change container ``var``: log it for undo and as a side effect."""
        self.remember(var, "items")
        self.mutated.setdefault(id(var), var)

    def apply_side_effects(self) -> None:
        """Write every mutated container back into its Python object (its ``real``)."""
        for var in list(self.mutated.values()):
            var.as_python()
        self.mutated.clear()

    def snapshot(self) -> tuple[set, int]:
        return set(self.graph._nodes), len(self.mutations)

    def restore(self, snapshot: tuple[set, int]) -> None:
        """Undo the nodes added and the Var mutations made since ``snapshot`` (an instruction
        that turned out to break, e.g. an inlined call that advanced a shared iterator)."""
        snapshot, n_mutations = snapshot
        while len(self.mutations) > n_mutations:
            var, attr, value = self.mutations.pop()
            setattr(var, attr, value)
        for node in reversed(self.graph.nodes):
            if node not in snapshot:
                for user in list(node.users):
                    user.args, user.kwargs = (), {}
                self.graph.erase_node(node)
        self.placeholder_of = {k: n for k, n in self.placeholder_of.items() if n in snapshot}
        self.inputs = [(n, v) for n, v in self.inputs if n in snapshot]

    # -- building nodes (torch: OutputGraph.create_proxy and builder.wrap_fx_proxy) -----------------
    def graph_arg(self, var: Var) -> Any:
        """A Var as an FX node argument (tensors by node, constants by value)."""
        if isinstance(var, TensorVar):
            return self.node_of(var)
        if isinstance(var, ListVar):
            items = [self.graph_arg(v) for v in var.items]
            return items if var.kind == "list" else tuple(items)
        if isinstance(var, DictVar):
            return {k: self.graph_arg(v) for k, v in var.items.items()}
        if isinstance(var, (ConstVar, PyObjVar, TorchFnVar, BuiltinVar)):
            return var.as_python()
        raise Unsupported(f"{var.describe()} cannot be a graph argument")

    def add_node(self, op: str, target: Any, args: list[Var], kwargs: dict[str, Var], example: Any) -> Var:
        """Record one node and wrap its example value (tuples of tensors become getitem nodes)."""
        graph = self.graph
        node = graph.create_node(
            op, target, tuple(self.graph_arg(a) for a in args), {k: self.graph_arg(v) for k, v in kwargs.items()}
        )
        return self.wrap_result(node, example)

    def wrap_result(self, node, example: Any) -> Var:
        gid = self.graph_id
        if isinstance(example, torch.Tensor):
            node.meta["example"] = example
            return TensorVar(example, node, gid)
        if isinstance(example, (tuple, list)) and any(isinstance(e, torch.Tensor) for e in example):
            items = []
            for i, e in enumerate(example):
                item = self.graph.call_function(operator.getitem, (node, i))
                items.append(self.wrap_result(item, e))
            named = type(example) if isinstance(example, tuple) and type(example) is not tuple else None
            return ListVar(items, "tuple", tuple_cls=named)
        if not node.users:  # a Python answer (numel, is_tensor...): specialise, drop the node
            self.graph.erase_node(node)
        return wrap(example)

    # -- guards -------------------------------------------------------------------------------
    def use(self, var: Var) -> Var:
        """Record the guard for a sourced value the first time it is used."""
        if var.source is not None and not var.guarded:
            var.guarded = True
            symbols = self.dynamic.get(var.source.name) if isinstance(var, TensorVar) else None
            guard = guard_for(var, symbols)
            if guard is not None:
                self.guards.setdefault((guard.source.name, guard.kind), guard)
            if isinstance(var, TensorVar):
                self.sizes_seen[var.source.name] = tuple(var.value.shape)
            for dim, sym in (symbols or {}).items():
                self.add_symbol_guard(var.source, dim, sym)
        return var

    def add_symbol_guard(self, source: Source, dim: int, sym: str) -> None:
        """``2 <= s0`` for a symbol's first dim; ``size == first size`` for the dims sharing it."""
        if sym not in self.symbol_home:
            self.symbol_home[sym] = (source, dim)
            guard = Guard(source, "SHAPE_ENV", (dim, ">=", 2))
        else:
            guard = Guard(source, "SHAPE_ENV", (dim, "==", self.symbol_home[sym]))
        self.guards.setdefault((source.name, f"SHAPE_ENV[{dim}]"), guard)

    def size_read(self, what: str) -> None:
        """Python code read a size: specialise the capture's dynamic dims (see the docstring)."""
        if not self.dynamic or self.specialized is not None:
            return
        self.specialized = what
        self.dynamic = {}
        for key, guard in list(self.guards.items()):
            if guard.kind == "SHAPE_ENV":
                del self.guards[key]
            elif guard.kind == "TENSOR_MATCH" and guard.source.name in self.sizes_seen:
                dtype, _, device, rg = guard.expected
                guard.expected = (dtype, self.sizes_seen[guard.source.name], device, rg)

    def discard_graph(self) -> None:
        """Drop the current graph without compiling it (its tensors keep their eager values)."""
        self.apply_side_effects()
        self._new_graph()

    def drop_redundant_grad_mode(self) -> None:
        """Erase a pair of adjacent ``set_grad_enabled`` nodes that switch the mode and straight
        back (the exits of ``with no_grad(): with enable_grad(): ...``), walking from the mode the
        graph starts in; Dynamo's OutputGraph.cleanup_graph does the same with the same walk."""
        grad = self.grad_mode_at_start()
        nodes = self.graph.nodes
        erased: set = set()
        for node1, node2 in zip(nodes, nodes[1:]):
            if _is_grad_switch(node1) and node1.args == (not grad,) and node1 not in erased:
                grad = node1.args[0]
                if _is_grad_switch(node2) and node2.args == (not grad,) and node2 not in erased:
                    grad = node2.args[0]
                    erased |= {node1, node2}
        for node in erased:
            self.graph.erase_node(node)

    def drop_unused_getitems(self) -> None:
        """Erase ``x[i]`` / ``t[0]`` nodes nobody uses, last to first. Dynamo keeps every other op
        the code ran, used or not (remove_unused_graphargs drops only getitem, get_attr and
        symbolic-int nodes); AOT Autograd and Inductor remove dead ops later."""
        for node in reversed(self.graph.nodes):
            if not node.users and node.op == "call_function" and node.target is operator.getitem:
                self.graph.erase_node(node)

    # -- ending a region ----------------------------------------------------------------------
    def compile_and_run(self, live: list[Var], reason: str, graph_break: bool, frame: str, line: int | None) -> None:
        """Finish the current graph with the live tensors it computed as outputs, compile, run."""
        live = list(live) + list(self.mutated.values())  # tensors put into a mutated container are live
        outputs = [v for v in _tensors_in(live) if v.graph_id == self.graph_id and v.node is not None]
        outer, inside = self.grad_mode_at_start(), torch.is_grad_enabled()
        reenter = graph_break and inside != outer  # a break inside `with torch.no_grad():`
        if reenter:  # as Dynamo: the graph leaves the block at its end, the next one enters it again
            self.grad_switch(outer, before=inside)
        self.graph.output(tuple(v.node for v in outputs))
        self.drop_redundant_grad_mode()
        self.drop_unused_getitems()  # and no other dead-code elimination: `y = x.sum()` unused stays
        if any(n.op.startswith("call_") for n in self.graph.nodes):
            key = str(self.graph)
            self.mark_dynamic_placeholders()
            if key not in self.compiled_cache:
                example = [v.value for _, v in self.inputs]
                self.compiled_cache[key] = self.backend(self.graph, example)
            compiled = self.compiled_cache[key]
            results = compiled(*[v.value for _, v in self.inputs])
            for var, value in zip(outputs, results, strict=True):
                var.value = value
            self.graphs.append(CapturedGraph(self.graph, frame, reason, graph_break, line, compiled))
        for var in outputs:  # the values now live outside any graph
            var.node, var.graph_id = None, -1
        self.apply_side_effects()
        self._new_graph()
        if reenter:
            torch.set_grad_enabled(inside)  # the breaking instruction runs inside the block
            self.reenter_grad = (outer, inside)

    def after_eager_instruction(self) -> None:
        """After the instruction at a break ran: the new graph enters the block again (a
        ``set_grad_enabled`` node first), unless that instruction itself changed the mode (it was
        the exit of a block we do not model)."""
        if self.reenter_grad is not None and torch.is_grad_enabled() == self.reenter_grad[1]:
            self.grad_switch(self.reenter_grad[1], before=self.reenter_grad[0])
        self.reenter_grad = None

    def grad_switch(self, enabled: bool, before: bool):
        """A ``set_grad_enabled`` node; ``meta["grad_before"]`` keeps the mode it switches from."""
        node = self.graph.call_function(torch.set_grad_enabled, (enabled,))
        node.meta["grad_before"] = before
        return node

    def grad_mode_at_start(self) -> bool:
        """The grad mode the current graph starts in: what its first switch switched from; with no
        switch, the mode now (instructions run eagerly only between graphs, so it cannot differ)."""
        first = next((n for n in self.graph.nodes if _is_grad_switch(n)), None)
        return first.meta["grad_before"] if first is not None else torch.is_grad_enabled()

    def mark_dynamic_placeholders(self) -> None:
        """``meta["course_dynamic_dims"]`` on each placeholder whose input has dynamic dims."""
        for node, var in self.inputs:
            dims = self.dynamic.get(var.source.name) if var.source is not None else None
            if dims:
                node.meta["course_dynamic_dims"] = tuple(sorted(dims))
                node.meta["course_size_symbols"] = tuple(dims[d] for d in sorted(dims))


def graph_dynamic_dims(graph: fx.Graph) -> dict[int, tuple[int, ...]]:
    """``{placeholder position: dynamic dims}`` of a captured graph (what backends read)."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    return {i: n.meta["course_dynamic_dims"] for i, n in enumerate(placeholders) if n.meta.get("course_dynamic_dims")}


def _is_grad_switch(node) -> bool:
    return node.op == "call_function" and node.target is torch.set_grad_enabled


def _tensors_in(values: list[Var]) -> list[TensorVar]:
    seen: dict[int, TensorVar] = {}

    visited: set[int] = set()

    def visit(v):
        if id(v) in visited:  # a list that contains itself
            return
        visited.add(id(v))
        if isinstance(v, TensorVar):
            seen.setdefault(id(v), v)
        elif isinstance(v, (ListVar, IteratorVar)):
            for x in v.items:
                visit(x)
        elif isinstance(v, DictViewVar):
            visit(v.dict_var)
        elif isinstance(v, SetVar):
            return
        elif isinstance(v, DictVar) or (hasattr(v, "items") and isinstance(v.items, dict)):
            for x in v.items.values():
                visit(x)
        elif hasattr(v, "contents") and v.contents is not None:
            visit(v.contents)
        elif hasattr(v, "obj"):  # a bound method about to be called: x.sum().item
            visit(v.obj)
        elif hasattr(v, "closure"):
            for c in v.closure:
                visit(c)
        elif isinstance(getattr(v, "items", None), list):  # an iterator
            for x in v.items:
                visit(x)

    for v in values:
        visit(v)
    return list(seen.values())


def _clean(name: str) -> str:
    """``L['x']`` -> ``L_x_``, ``L['self'].lin`` -> ``L_self__lin`` (as Dynamo names graph inputs)."""
    out = "".join(c if c.isalnum() else "_" for c in name.replace("'", ""))
    return out if out and not out[0].isdigit() else "t_" + out
