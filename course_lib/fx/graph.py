"""FX's IR: a :class:`Graph` is an ordered list of :class:`Node`\\ s (teaches torch/fx/graph.py, torch/fx/node.py).

Position in the pipeline: Python function --(dynamo or symbolic_trace)--> **Graph** --> passes
--> aot / decomp / inductor.

A node is one of six opcodes, exactly FX's:

============== ================================ =======================================
op             target                           meaning
============== ================================ =======================================
placeholder    argument name                    a function input
get_attr       dotted attribute path            fetch a parameter/buffer of the module
call_function  a Python callable                ``target(*args, **kwargs)``
call_method    a method name (str)              ``args[0].target(*args[1:], **kwargs)``
call_module    dotted submodule path            ``module.target(*args, **kwargs)``
output         "output"                         the value(s) the graph returns
============== ================================ =======================================

Invariants (checked by :meth:`Graph.lint`): every node a node uses appears earlier in
``graph.nodes``; ``users`` is exactly the set of nodes that mention a node in their args or
kwargs; names are unique; there is at most one output node and it is last.

Simplifications against torch.fx: the node list is a Python list (FX uses a doubly linked
list, so insertion is O(1) there and O(n) here); no ``type`` annotations, no stack traces, no
pytree in/out specs; ``meta`` is a plain dict the passes fill (``meta["val"]`` / ``meta["shape"]``).
"""

from __future__ import annotations

import builtins
import contextlib
import keyword
import operator
import re
from collections.abc import Callable, Iterator
from typing import Any

OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")

# Operators that FX prints (and generates code for) as Python infix/prefix syntax.
INFIX = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
    operator.rshift: ">>", operator.lt: "<", operator.le: "<=", operator.gt: ">",
    operator.ge: ">=", operator.eq: "==", operator.ne: "!=",
}  # fmt: skip
PREFIX = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}


def map_arg(value: Any, fn: Callable[[Node], Any]) -> Any:
    """Apply ``fn`` to every Node inside nested tuples/lists/dicts/slices (torch.fx.node.map_arg)."""
    if isinstance(value, Node):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_arg(v, fn) for v in value)
    if isinstance(value, list):
        return [map_arg(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_arg(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(map_arg(value.start, fn), map_arg(value.stop, fn), map_arg(value.step, fn))
    return value


def nodes_in(value: Any) -> list[Node]:
    """The Nodes mentioned in an argument structure, in order, without duplicates."""
    found: dict[Node, None] = {}
    map_arg(value, lambda n: found.setdefault(n, None))
    return list(found)


def target_name(target: Any) -> str:
    """How FX prints a target: ``operator.add``, ``torch.relu``, ``sum`` (methods are strings)."""
    if isinstance(target, str):
        return target
    if type(target).__name__ in ("OpOverload", "OpOverloadPacket"):
        return f"torch.ops.{target}"  # aten.add.Tensor, as torch.fx prints it
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    if module.startswith("torch") and hasattr(__import__("torch"), name):
        import torch

        if getattr(torch, name) is target:
            return f"torch.{name}"
    if module == "builtins":
        return name
    if name.startswith("_VariableFunctionsClass.") or module == "torch._C._VariableFunctions":
        return f"torch.{name.split('.')[-1]}"
    return f"{module}.{name}" if module else name


def _snake(name: str) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", name)
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    if not name or name[0].isdigit():
        name = "_" + name
    return name


def base_name(op: str, target: Any) -> str:
    """The name FX would choose for a new node before de-duplication."""
    if op in ("placeholder", "output") or isinstance(target, str):
        text = str(target).replace(".", "_")
    else:
        text = getattr(target, "__name__", None) or type(target).__name__
        if type(target).__name__ in ("OpOverload", "OpOverloadPacket"):  # aten.add.Tensor -> add
            text = str(target).split(".")[1]
    text = _snake(text.strip("_") or text)
    if keyword.iskeyword(text) or text in dir(builtins):
        text = text + "_1"  # FX never shadows a builtin: sum -> sum_1
    return text


def format_arg(value: Any) -> str:
    """Print an argument the way FX does: nodes as ``%name``, the rest as Python repr."""
    if isinstance(value, Node):
        return f"%{value.name}"
    if isinstance(value, tuple):
        inner = ", ".join(format_arg(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_arg(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_arg(v)}" for k, v in value.items()) + "}"
    return _repr_constant(value)


def _repr_constant(value: Any) -> str:
    if isinstance(value, float) and value != value:
        return "nan"
    module = type(value).__module__
    if module == "torch" and type(value).__name__ == "dtype":
        return str(value)
    if type(value).__name__ == "device":
        return f"device(type='{value.type}')" if value.index is None else repr(value)
    return repr(value)


class Node:
    """One operation in a :class:`Graph` (torch/fx/node.py).

    ``users`` is maintained automatically: setting ``args``/``kwargs`` updates the users of the
    nodes that appear in them. ``meta`` is free for passes (ShapeProp writes ``meta["val"]``).
    """

    def __init__(self, graph: Graph, name: str, op: str, target: Any, args: tuple, kwargs: dict):
        if op not in OPCODES:
            raise ValueError(f"unknown FX opcode {op!r}; expected one of {OPCODES}")
        self.graph = graph
        self._name = None
        self.name = name
        self.op = op
        self.target = target
        self.meta: dict[str, Any] = {}
        self.users: dict[Node, None] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._input_nodes: list[Node] = []
        self._update(tuple(args), dict(kwargs))

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:  # the graph counts the names in use (unique_name reads it)
        taken = self.graph._taken
        if self._name is not None:
            taken[self._name] -= 1
        taken[value] = taken.get(value, 0) + 1
        self._name = value

    # -- arguments and use lists ---------------------------------------------------------
    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, value: tuple) -> None:
        self._update(tuple(value), self._kwargs)

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value: dict) -> None:
        self._update(self._args, dict(value))

    @property
    def all_input_nodes(self) -> list[Node]:
        """Nodes this node reads, in order of first mention."""
        return list(self._input_nodes)

    def _update(self, args: tuple, kwargs: dict) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        self._input_nodes = nodes_in((args, kwargs))
        for new in self._input_nodes:
            new.users[self] = None

    def replace_all_uses_with(self, replacement: Any) -> list[Node]:
        """Make every user read ``replacement`` instead of this node; returns the users changed."""
        changed = list(self.users)
        swap = lambda n: replacement if n is self else n  # noqa: E731
        for user in changed:
            user._update(map_arg(user.args, swap), map_arg(user.kwargs, swap))
        return changed

    def replace_input_with(self, old: Node, new: Any) -> None:
        swap = lambda n: new if n is old else n  # noqa: E731
        self._update(map_arg(self.args, swap), map_arg(self.kwargs, swap))

    # -- printing ---------------------------------------------------------------------------
    def format_node(self) -> str:
        """One line of ``print(graph)``, in torch.fx's form."""
        if self.op == "output":
            return f"return {_format_output(self.args[0])}"
        head = f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target={target_name(self.target)}]"
        if self.op == "placeholder":
            return head + (f"(default={self.args[0]!r})" if self.args else "")
        if self.op == "get_attr":
            return head
        return head + f"(args = {format_arg(self.args)}, kwargs = {format_arg(self.kwargs)})"

    def __repr__(self) -> str:
        return self.name

    @property
    def next(self) -> Node | None:
        i = self.graph._index(self)
        return self.graph._nodes[i + 1] if i + 1 < len(self.graph._nodes) else None

    @property
    def prev(self) -> Node | None:
        i = self.graph._index(self)
        return self.graph._nodes[i - 1] if i > 0 else None

    def is_impure(self) -> bool:
        """Placeholders, outputs and in-place / random calls must survive DCE."""
        if self.op in ("placeholder", "output"):
            return True
        name = self.target if isinstance(self.target, str) else getattr(self.target, "__name__", "")
        if self.op in ("call_method", "call_function") and name.endswith("_") and not name.endswith("__"):
            return True  # x.add_(y): mutates its input
        return name in {"print", "manual_seed", "setitem", "set_grad_enabled"}  # global state, as torch.fx's list


def _format_output(value: Any) -> str:
    def plain(v):
        if isinstance(v, Node):
            return v.name
        if isinstance(v, tuple):
            return "(" + ", ".join(plain(x) for x in v) + ("," if len(v) == 1 else "") + ")"
        if isinstance(v, list):
            return "[" + ", ".join(plain(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {plain(x)}" for k, x in v.items()) + "}"
        return repr(v)

    return plain(value)


class Graph:
    """An ordered list of nodes plus the factory methods that append to it (torch.fx.Graph).

    ``owning_module`` is the ``nn.Module`` whose attributes ``get_attr`` / ``call_module``
    nodes name (set by :func:`course_lib.fx.symbolic_trace`); a graph without one can still be
    printed, linted and transformed, and run if it has no such nodes.
    """

    def __init__(self, owning_module: Any = None):
        self._nodes: list[Node] = []
        self._names: dict[str, int] = {}
        self._taken: dict[str, int] = {}  # name -> how many live nodes carry it (a node may be renamed)
        self._outputs = 0  # output nodes in the graph (0 or 1): nodes are appended before it
        self._insert_at: tuple[str, Node | None] = ("append", None)
        self.owning_module = owning_module

    # -- node list ------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        """The nodes in program order (a copy: safe to mutate the graph while iterating)."""
        return list(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def _index(self, node: Node) -> int:
        for i, n in enumerate(self._nodes):
            if n is node:
                return i
        raise ValueError(f"node {node.name} is not in this graph")

    def find_nodes(self, *, op: str, target: Any = None) -> list[Node]:
        return [n for n in self._nodes if n.op == op and (target is None or n.target == target)]

    def unique_name(self, candidate: str) -> str:
        """``add``, then ``add_1``, ``add_2``... (FX's _Namespace)."""
        candidate = _snake(candidate) if not candidate.isidentifier() else candidate
        match = re.fullmatch(r"(.*)_(\d+)", candidate)
        stem = candidate
        if candidate in self._names or self._taken.get(candidate):
            if match:
                stem = match.group(1)
            count = self._names.get(stem, 0)
            while True:
                count += 1
                name = f"{stem}_{count}"
                if not self._taken.get(name) and name not in self._names:
                    break
            self._names[stem] = count
            self._names[name] = 0
            return name
        self._names[candidate] = 0
        return candidate

    # -- creating nodes ---------------------------------------------------------------------
    def create_node(self, op: str, target: Any, args=(), kwargs=None, name: str | None = None) -> Node:
        """Make a node and insert it at the current insertion point (end by default)."""
        if op == "output" and self._outputs:
            raise ValueError("a graph has at most one output node")
        node = Node(self, self.unique_name(name or base_name(op, target)), op, target, args, kwargs or {})
        mode, anchor = self._insert_at
        if mode == "append" or anchor is None:
            if op == "output" or not self._outputs:
                self._nodes.append(node)
            else:  # before the output node, usually the last one (a scan per node made tracing quadratic)
                last = self._nodes[-1]
                self._nodes.insert(len(self._nodes) - 1 if last.op == "output" else self._output_index(), node)
        else:
            i = self._index(anchor)
            self._nodes.insert(i if mode == "before" else i + 1, node)
            if mode == "after":
                self._insert_at = ("after", node)  # consecutive inserts keep program order
        self._outputs += op == "output"
        return node

    def _output_index(self) -> int:
        return next(i for i, n in enumerate(self._nodes) if n.op == "output")

    def placeholder(self, name: str, default: Any = ...) -> Node:
        return self.create_node("placeholder", name, () if default is ... else (default,), name=name)

    def get_attr(self, qualified_name: str) -> Node:
        return self.create_node("get_attr", qualified_name)

    def call_function(self, target: Callable, args=(), kwargs=None) -> Node:
        return self.create_node("call_function", target, args, kwargs)

    def call_method(self, method_name: str, args=(), kwargs=None) -> Node:
        return self.create_node("call_method", method_name, args, kwargs)

    def call_module(self, module_name: str, args=(), kwargs=None) -> Node:
        return self.create_node("call_module", module_name, args, kwargs)

    def output(self, result: Any) -> Node:
        return self.create_node("output", "output", (result,))

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any] = lambda n: n) -> Node:
        """Copy ``node`` (from any graph) here, mapping its input nodes through ``arg_transform``."""
        new = self.create_node(
            node.op, node.target, map_arg(node.args, arg_transform), map_arg(node.kwargs, arg_transform),
            name=node.name,
        )  # fmt: skip
        new.meta = dict(node.meta)
        return new

    def graph_copy(self, other: Graph, env: dict[Node, Node]) -> Any:
        """Copy every node of ``other`` except its output; returns the mapped output value."""
        for node in other.nodes:
            if node.op == "output":
                return map_arg(node.args[0], lambda n: env[n])
            env[node] = self.node_copy(node, lambda n: env[n])
        return None

    def inserting_before(self, node: Node | None = None):
        return self._inserting("before", node)

    def inserting_after(self, node: Node | None = None):
        return self._inserting("after", node)

    @contextlib.contextmanager
    def _inserting(self, where: str, node: Node | None):
        """New nodes go ``where`` (before / after) ``node`` until the ``with`` block ends."""
        saved, self._insert_at = self._insert_at, (where, node)
        try:
            yield
        finally:
            self._insert_at = saved

    def erase_node(self, node: Node) -> None:
        """Remove a node nobody uses (raises if it still has users, as FX does)."""
        if node.users:
            raise RuntimeError(f"cannot erase node {node.name}: it still has users {list(node.users)}")
        node._update((), {})
        self._nodes.pop(self._index(node))
        self._taken[node.name] -= 1
        self._outputs -= node.op == "output"

    def eliminate_dead_code(self) -> bool:
        """Erase pure nodes without users, last to first; returns whether anything changed."""
        changed = False
        for node in reversed(self.nodes):
            if not node.users and not node.is_impure():
                self.erase_node(node)
                changed = True
        return changed

    def output_node(self) -> Node | None:
        outs = [n for n in self._nodes if n.op == "output"]
        return outs[0] if outs else None

    # -- checking and printing --------------------------------------------------------------
    def lint(self) -> None:
        """Check the invariants in the module docstring; raise ValueError naming the bad node."""
        seen: set[Node] = set()
        names: set[str] = set()
        for i, node in enumerate(self._nodes):
            if node.graph is not self:
                raise ValueError(f"node {node.name} belongs to another graph")
            if node.name in names:
                raise ValueError(f"duplicate node name {node.name}")
            names.add(node.name)
            for inp in node.all_input_nodes:
                if inp not in seen:
                    raise ValueError(
                        f"node {node.name} uses {inp.name} before it is defined (or it is not in the graph)"
                    )
                if node not in inp.users:
                    raise ValueError(f"{inp.name}.users is missing {node.name}")
            for user in node.users:
                if node not in user.all_input_nodes:
                    raise ValueError(f"{node.name}.users lists {user.name}, which does not use it")
            if node.op == "output" and i != len(self._nodes) - 1:
                raise ValueError("the output node must be last")
            seen.add(node)

    def __str__(self) -> str:
        lines = ["graph():"] + ["    " + n.format_node() for n in self._nodes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<course_lib.fx.Graph with {len(self._nodes)} nodes>"

    def print_tabular(self) -> str:
        """The table torch.fx's ``print_tabular`` prints (returned as text, and printed)."""
        from course_lib import viz

        rows = [(n.op, n.name, target_name(n.target), format_arg(n.args), format_arg(n.kwargs)) for n in self._nodes]
        text = str(viz.table(rows, headers=("opcode", "name", "target", "args", "kwargs")))
        print(text)
        return text

    # -- running ---------------------------------------------------------------------------
    def python_code(self, fn_name: str = "forward") -> str:
        """Python source equivalent to the graph (see :mod:`course_lib.fx.codegen`)."""
        from course_lib.fx.codegen import python_code

        return python_code(self, fn_name)

    @property
    def code(self) -> str:
        return self.python_code()

    def __call__(self, *args, **kwargs):
        """Run the graph with the reference :class:`~course_lib.fx.Interpreter`."""
        from course_lib.fx.interpreter import Interpreter

        return Interpreter(self).run(*args, **kwargs)

    def to_dot(self, **kw) -> str:
        from course_lib.fx.draw import to_dot

        return to_dot(self, **kw)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": str(self)}


def fetch_attr(module: Any, qualified_name: str) -> Any:
    """``a.b.c`` -> ``module.a.b.c`` (raises AttributeError naming the missing part)."""
    obj = module
    for part in qualified_name.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"the module has no attribute {qualified_name!r} (missing {part!r})")
        obj = getattr(obj, part)
    return obj
