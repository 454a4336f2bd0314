"""Dicts and their views (teaches torch/_dynamo/variables/dicts.py: ``ConstDictVariable``,
``DefaultDictVariable``, the ``dict_keys`` / ``dict_values`` / ``dict_items`` views).

Keys are Python constants; values are Vars. ``cls`` remembers the dict's type (``dict``,
``OrderedDict``, ``defaultdict`` or a subclass that overrides none of dict's methods), so the
object handed back to Python is of the same type. Mutation goes through the rules below and is
tracked as in lists.py (``real`` is the Python dict this Var stands for). ``keys()``,
``values()`` and ``items()`` return live views of the Var, as Python's views are live.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.variables.base import ConstVar, Var, any_tensor, python_call

_MISSING = object()


@dataclasses.dataclass(eq=False)
class DictVar(Var):
    items: dict
    cls: type = dict
    default_factory: Any = None  # a Var, for defaultdict
    real: Any = dataclasses.field(default=None, kw_only=True)

    def _new_real(self) -> dict:
        if self.cls is collections.defaultdict:
            return collections.defaultdict(self.default_factory.as_python() if self.default_factory else None)
        try:
            return self.cls()
        except TypeError:  # a subclass whose constructor wants arguments
            return self.cls.__new__(self.cls)

    def as_python(self):
        values = {k: v.as_python() for k, v in self.items.items()}
        if self.real is None:
            self.real = self._new_real()
            self.real.update(values)
        elif list(values) != list(self.real) or any(values[k] is not self.real[k] for k in values):
            self.real.clear()
            self.real.update(values)  # key order follows the Var's (as Python would have it)
        return self.real

    def peek(self):
        return self.real if self.real is not None else self.as_python()

    def refresh(self, wrap) -> None:
        """Eager code may have changed the real dict: read its entries back into Vars."""
        if self.real is None:
            return
        mine = {k: v.peek() for k, v in self.items.items()}
        if list(mine) == list(self.real) and all(mine[k] is self.real[k] for k in mine):
            return
        old = {id(v.peek()): v for v in self.items.values()}
        self.items.clear()
        self.items.update({k: old.get(id(x)) or wrap(x) for k, x in self.real.items()})

    def describe(self) -> str:
        return f"{self.cls.__name__}Variable()"

    def has_tensor(self) -> bool:
        return any_tensor(self.items.values())

    def key_of(self, var: Var) -> Any:
        if var.has_tensor():
            raise Unsupported("a tensor as a dict key (keys by identity are not modelled)")
        return var.as_python()

    def unpack(self, tx) -> list[Var]:
        return [ConstVar(k) for k in self.items]

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getitem(self, tx, index: Var) -> Var:
        key = self.key_of(index)
        if key not in self.items:
            if self.cls is collections.defaultdict and self.default_factory is not None:
                tx.output.mutate(self)
                self.items[key] = tx.call_function(self.default_factory, [], {})
            else:
                raise KeyError(key)
        return tx.use(self.items[key])

    def setitem(self, tx, key: Var, value: Var) -> None:
        k = self.key_of(key)
        tx.output.mutate(self)
        self.items[k] = value

    def delitem(self, tx, key: Var) -> None:
        tx.output.mutate(self)
        del self.items[self.key_of(key)]

    def call_method(self, tx, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        rule = DICT_METHODS.get(name)
        if rule is None:
            if name == "move_to_end" and self.cls is collections.OrderedDict:
                rule = _move_to_end
            elif not self.has_tensor() and not any_tensor([*args, *kwargs.values()]):
                return python_call(getattr(self.as_python(), name), args, kwargs)
            else:
                raise Unsupported(f"method {name} of {self.describe()}")
        if name in MUTATING_DICT_METHODS:
            tx.output.mutate(self)
        return rule(tx, self, *args, **kwargs)


# --- dict methods: one rule each -------------------------------------------------------------
def _get(tx, d, key, default=None):
    k = d.key_of(key)
    return tx.use(d.items[k]) if k in d.items else (default or ConstVar(None))


def _setdefault(tx, d, key, default=None):
    return d.items.setdefault(d.key_of(key), default or ConstVar(None))


def _update(tx, d, other=None, **kwargs):
    if other is not None:
        if isinstance(other, DictVar):
            d.items.update(other.items)
        else:  # an iterable of (key, value) pairs
            for pair in other.unpack(tx):
                k, v = pair.unpack(tx)
                d.items[d.key_of(k)] = v
    d.items.update(kwargs)
    return ConstVar(None)


def _pop(tx, d, key, default=_MISSING):
    k = d.key_of(key)
    if k not in d.items and default is not _MISSING:
        return default
    return d.items.pop(k)


def _popitem(tx, d):
    k, v = d.items.popitem()
    from course_lib.dynamo.variables.lists import ListVar

    return ListVar([ConstVar(k), v], "tuple")


def _clear(tx, d):
    d.items.clear()
    return ConstVar(None)


def _copy(tx, d):
    return DictVar(dict(d.items), d.cls, d.default_factory)


def _view(kind):
    return lambda tx, d: DictViewVar(d, kind)


def _contains(tx, d, key):
    return ConstVar(d.key_of(key) in d.items)


def _move_to_end(tx, d, key, last=None):
    tx.output.mutate(d)
    k = d.key_of(key)
    value = d.items.pop(k)
    if last is None or last.as_python():
        d.items[k] = value
    else:
        d.items = {k: value, **d.items}
    return ConstVar(None)


DICT_METHODS = {
    "get": _get, "setdefault": _setdefault, "update": _update, "pop": _pop, "popitem": _popitem,
    "clear": _clear, "copy": _copy, "keys": _view("keys"), "values": _view("values"), "items": _view("items"),
    "__contains__": _contains, "__getitem__": lambda tx, d, k: d.getitem(tx, k),
}  # fmt: skip
MUTATING_DICT_METHODS = {"setdefault", "update", "pop", "popitem", "clear"}


@dataclasses.dataclass(eq=False)
class DictViewVar(Var):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view of a DictVar."""

    dict_var: DictVar
    kind: str  # keys | values | items

    def as_python(self):
        return getattr(self.dict_var.as_python(), self.kind)()

    def elements(self) -> list[Var]:
        from course_lib.dynamo.variables.lists import ListVar

        d = self.dict_var.items
        if self.kind == "keys":
            return [ConstVar(k) for k in d]
        if self.kind == "values":
            return list(d.values())
        return [ListVar([ConstVar(k), v], "tuple") for k, v in d.items()]

    def unpack(self, tx) -> list[Var]:
        return [tx.use(v) for v in self.elements()]

    def truth(self, tx) -> bool:
        return bool(self.dict_var.items)

    def has_tensor(self) -> bool:
        return self.kind != "keys" and self.dict_var.has_tensor()

    def describe(self) -> str:
        return f"Dict{self.kind.capitalize()}Variable()"


__all__ = ["DICT_METHODS", "DictVar", "DictViewVar"]
