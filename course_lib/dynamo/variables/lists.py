"""Lists, tuples, sets and iterators (teaches torch/_dynamo/variables/lists.py, sets.py, iter.py,
and the side-effect tracking of torch/_dynamo/side_effects.py).

A container Var holds a Var per element, so tensors inside stay graph values. Mutation goes
through the rules here (``append``, ``x[i] = v``, ``x[a:b] = vs``...), which change the Var and
log it with ``tx.output.mutate(var)``. The Python object behind the Var (``real``: the input list
itself, or the one made the first time the value leaves the graph) is brought up to date when a
graph region ends (``OutputGraph.apply_side_effects``), as Dynamo replays its side effects after
the compiled graph runs; so an input list mutated by the function is mutated for the caller,
and two names for one list stay one list.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.variables.base import ConstVar, Var, any_tensor, python_call


def _same_objects(a: list, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


@dataclasses.dataclass(eq=False)
class ListVar(Var):
    """A list or tuple of Vars (``kind`` says which); ``real`` is the Python object it stands for."""

    items: list
    kind: str = "list"
    real: Any = dataclasses.field(default=None, kw_only=True)
    tuple_cls: Any = dataclasses.field(default=None, kw_only=True)  # a namedtuple / torch.return_types class

    def as_python(self):
        values = [v.as_python() for v in self.items]
        if self.kind == "tuple":
            if self.real is not None and _same_objects(values, self.real):
                return self.real
            if self.tuple_cls is not None:
                return self.tuple_cls(*values) if hasattr(self.tuple_cls, "_fields") else self.tuple_cls(values)
            return tuple(values)
        if self.real is None:
            self.real = values
        elif not _same_objects(values, self.real):
            self.real[:] = values  # write the pending mutations into the real list
        return self.real

    def peek(self):
        return self.real if self.real is not None else self.as_python()

    def refresh(self, wrap) -> None:
        """Eager code may have changed the real list: read its elements back into Vars
        (``wrap`` makes a Var for an element that is new)."""
        if self.real is None or self.kind != "list":
            return
        if _same_objects([v.peek() for v in self.items], self.real):
            return
        by_id = {id(v.peek()): v for v in self.items}
        self.items[:] = [by_id.get(id(x)) or wrap(x) for x in self.real]

    def describe(self) -> str:
        return f"{self.kind.capitalize()}Variable()"

    def var_getattr(self, tx, name: str) -> Var:
        fields = field_names(self.tuple_cls)
        if name in fields:  # p.x on a namedtuple, values on torch.sort's result
            return tx.use(self.items[fields.index(name)])
        return super().var_getattr(tx, name)

    def has_tensor(self) -> bool:
        return any_tensor(self.items)

    def unpack(self, tx) -> list[Var]:
        return [tx.use(v) for v in self.items]

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getitem(self, tx, index: Var) -> Var:
        if index.has_tensor():
            raise Unsupported("indexing a Python list with a tensor")
        key = index.as_python()
        if isinstance(key, slice):
            return ListVar(self.items[key], self.kind)
        return tx.use(self.items[key])

    def setitem(self, tx, key: Var, value: Var) -> None:
        if self.kind != "list":
            raise TypeError("'tuple' object does not support item assignment")
        k = key.as_python()
        tx.output.mutate(self)
        if isinstance(k, slice):  # lst[a:b] = values
            self.items[k] = value.unpack(tx)
        else:
            self.items[k] = value

    def delitem(self, tx, key: Var) -> None:
        tx.output.mutate(self)
        del self.items[key.as_python()]

    def call_method(self, tx, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        rule = LIST_METHODS.get(name) if self.kind == "list" else None
        if rule is not None:
            if name in MUTATING_LIST_METHODS:
                tx.output.mutate(self)
            return rule(tx, self, *args, **kwargs)
        if name in ("index", "count") and not (self.has_tensor() or any_tensor(args)):
            return python_call(getattr(self.as_python(), name), args, kwargs)
        if name in ("index", "count"):
            raise Unsupported(f"{self.kind}.{name} compares tensors, which needs their data")
        return super().call_method(tx, name, args, kwargs)


def field_names(cls: Any) -> tuple:
    """The field names of a namedtuple or a ``torch.return_types`` structseq (else ``()``)."""
    if cls is None:
        return ()
    return tuple(getattr(cls, "_fields", None) or getattr(cls, "__match_args__", ()))


# --- list methods: one rule each (Dynamo: ListVariable.call_method) ---------------------------
def _append(tx, lst, value):
    lst.items.append(value)
    return ConstVar(None)


def _extend(tx, lst, values):
    lst.items.extend(values.unpack(tx))
    return ConstVar(None)


def _insert(tx, lst, index, value):
    lst.items.insert(index.as_python(), value)
    return ConstVar(None)


def _pop(tx, lst, index=None):
    return lst.items.pop(*([] if index is None else [index.as_python()]))


def _remove(tx, lst, value):
    if value.has_tensor() or lst.has_tensor():
        raise Unsupported("list.remove compares tensors, which needs their data")
    lst.items.pop([v.as_python() for v in lst.items].index(value.as_python()))
    return ConstVar(None)


def _clear(tx, lst):
    lst.items.clear()
    return ConstVar(None)


def _reverse(tx, lst):
    lst.items.reverse()
    return ConstVar(None)


def _sort(tx, lst, key=None, reverse=None):
    if lst.has_tensor() or key is not None:
        raise Unsupported("list.sort with tensors or a key function")
    order = sorted(range(len(lst.items)), key=lambda i: lst.items[i].as_python(),
                   reverse=bool(reverse.as_python()) if reverse else False)  # fmt: skip
    lst.items[:] = [lst.items[i] for i in order]
    return ConstVar(None)


def _copy(tx, lst):
    return ListVar(list(lst.items), "list")


LIST_METHODS = {
    "append": _append, "extend": _extend, "insert": _insert, "pop": _pop, "remove": _remove,
    "clear": _clear, "reverse": _reverse, "sort": _sort, "copy": _copy,
}  # fmt: skip
MUTATING_LIST_METHODS = {"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort"}


@dataclasses.dataclass(eq=False)
class SetVar(Var):
    """A set of constants (Dynamo's SetVariable). Tensors in a set hash by identity: a break."""

    items: set
    real: Any = dataclasses.field(default=None, kw_only=True)
    frozen: bool = False

    def as_python(self):
        if self.frozen:
            return frozenset(self.items)
        if self.real is None:
            self.real = set(self.items)
        elif self.real != self.items:
            self.real.clear()
            self.real.update(self.items)
        return self.real

    def peek(self):
        return self.real if self.real is not None else self.as_python()

    def refresh(self, wrap) -> None:
        if self.real is not None and not self.frozen and self.real != self.items:
            self.items = set(self.real)

    def unpack(self, tx) -> list[Var]:
        return [ConstVar(v) for v in self.as_python()]

    def truth(self, tx) -> bool:
        return bool(self.items)

    def add(self, tx, value: Var) -> None:
        if value.has_tensor():
            raise Unsupported("a tensor in a set (sets of tensors are not modelled)")
        tx.output.mutate(self)
        self.items.add(value.as_python())

    def call_method(self, tx, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if any_tensor([*args, *kwargs.values()]):
            raise Unsupported(f"set.{name} with a tensor")
        if name in ("add", "update", "discard", "remove", "pop", "clear", "difference_update",
                    "intersection_update", "symmetric_difference_update"):  # fmt: skip
            tx.output.mutate(self)
        return python_call(getattr(self.items, name), args, kwargs)


@dataclasses.dataclass(eq=False)
class IteratorVar(Var):
    """An iterator over a known list of Vars (loops over Python containers are unrolled).
    ``items`` may be the very list a ListVar holds, so appending while iterating is seen."""

    items: list
    pos: int = 0

    def as_python(self):
        return iter([v.as_python() for v in self.items[self.pos :]])

    def unpack(self, tx) -> list[Var]:
        rest = self.items[self.pos :]
        tx.output.remember(self, "pos")
        self.pos = len(self.items)  # consumed, as list(it) consumes a Python iterator
        return rest

    def has_tensor(self) -> bool:
        return any_tensor(self.items[self.pos :])

    def next(self, tx) -> Var:
        if self.pos >= len(self.items):
            raise Unsupported("next() on an exhausted iterator raises StopIteration (not modelled)")
        tx.output.remember(self, "pos")
        self.pos += 1
        return self.items[self.pos - 1]


__all__ = ["IteratorVar", "LIST_METHODS", "ListVar", "SetVar"]
