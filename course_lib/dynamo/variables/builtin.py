"""Python builtins, one rule per builtin in a table (teaches torch/_dynamo/variables/builtin.py:
``BuiltinVariable`` and its ``call_<name>`` handlers).

``BUILTIN_RULES[fn](tx, args, kwargs)`` returns the Var for ``fn(*args, **kwargs)``, or None when
the rule does not apply to these arguments; then a builtin in ``FOLDABLE`` whose arguments hold
no tensor is folded (called now, the answer specialised), and anything else is a graph break.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import math
import operator
from typing import Any

import torch

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.variables.base import ConstVar, Var, any_tensor, python_call
from course_lib.dynamo.variables.dicts import DictVar, DictViewVar
from course_lib.dynamo.variables.lists import IteratorVar, ListVar, SetVar
from course_lib.dynamo.variables.tensor import TensorVar


@dataclasses.dataclass(eq=False)
class BuiltinVar(Var):
    """A Python builtin (``len``, ``range``, ``print``...) handled by a rule in BUILTIN_RULES."""

    value: Any

    def as_python(self):
        return self.value

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return call_builtin(tx, self.value, args, kwargs)

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.builder import wrap

        return wrap(getattr(self.value, name))


def call_builtin(tx, fn, args: list[Var], kwargs: dict[str, Var]) -> Var:
    rule = BUILTIN_RULES.get(fn)
    if rule is not None:
        out = rule(tx, args, kwargs)
        if out is not None:
            return out
    module = getattr(fn, "__module__", None)
    if module in ("_operator", "operator") and any_tensor(args) and not kwargs:
        return tx.call_operator(fn, args)  # operator.add(x, y) on tensors: a node, as x + y is
    pure = fn in FOLDABLE or module in ("math", "_operator", "operator")
    if pure and not any_tensor([*args, *kwargs.values()]):
        return python_call(fn, args, kwargs)
    if isinstance(fn, type) and issubclass(fn, BaseException) and not any_tensor([*args, *kwargs.values()]):
        from course_lib.dynamo.variables.base import PyObjVar

        return PyObjVar(python_call(fn, args, kwargs).as_python())  # ValueError("msg"), about to be raised
    raise Unsupported(f"builtin {getattr(fn, '__name__', fn)} is not supported with these arguments")


def has_rule(fn: Any) -> bool:
    try:
        return fn in BUILTIN_RULES
    except TypeError:  # unhashable
        return False


# --- the rules --------------------------------------------------------------------------------
def _print(tx, args, kwargs):
    raise Unsupported("Failed to trace builtin operator: print (a side effect Dynamo cannot put in a graph)")


def _len(tx, args, kwargs):
    (obj,) = args
    if isinstance(obj, TensorVar):
        tx.output.size_read("len(tensor)")
        return ConstVar(len(obj.value))
    if isinstance(obj, (ListVar, DictVar, SetVar)):
        return ConstVar(len(obj.items))
    if isinstance(obj, DictViewVar):
        return ConstVar(len(obj.dict_var.items))
    return None


def _isinstance(tx, args, kwargs):
    obj, cls = args
    return ConstVar(isinstance(obj.peek(), cls.as_python()))


def _range(tx, args, kwargs):
    return ConstVar(range(*[a.as_python() for a in args]))


def _enumerate(tx, args, kwargs):
    start = (args[1] if len(args) > 1 else kwargs.get("start", ConstVar(0))).as_python()
    return IteratorVar([ListVar([ConstVar(i + start), v], "tuple") for i, v in enumerate(args[0].unpack(tx))])


def _zip(tx, args, kwargs):
    columns = [a.unpack(tx) for a in args]
    if kwargs.get("strict") is not None and kwargs["strict"].as_python() and len({len(c) for c in columns}) > 1:
        return None  # let Python raise its ValueError when the break runs it
    return IteratorVar([ListVar(list(row), "tuple") for row in zip(*columns)])


def _list_or_tuple(kind):
    def rule(tx, args, kwargs):
        return ListVar(list(args[0].unpack(tx)) if args else [], kind)

    return rule


def _dict(cls):
    def rule(tx, args, kwargs):
        out = DictVar({}, cls)
        if cls is collections.defaultdict:
            out.default_factory = args[0] if args and not isinstance(args[0], ConstVar) else None
            args = args[1:]
        if args:
            src = args[0]
            if isinstance(src, DictVar):
                out.items.update(src.items)
            else:
                for pair in src.unpack(tx):
                    k, v = pair.unpack(tx)
                    out.items[out.key_of(k)] = v
        out.items.update(kwargs)
        return out

    return rule


def _set(frozen):
    def rule(tx, args, kwargs):
        items = args[0].unpack(tx) if args else []
        if any_tensor(items):
            return None
        return SetVar({v.as_python() for v in items}, frozen=frozen)

    return rule


def _reversed(tx, args, kwargs):
    return IteratorVar(list(reversed(args[0].unpack(tx))))


def _iter(tx, args, kwargs):
    if len(args) != 1:
        return None
    return args[0] if isinstance(args[0], IteratorVar) else IteratorVar(args[0].unpack(tx))


def _next(tx, args, kwargs):
    it = args[0]
    if not isinstance(it, IteratorVar):
        return None
    if it.pos >= len(it.items) and len(args) > 1:
        return args[1]
    return it.next(tx)


def _getattr(tx, args, kwargs):
    if len(args) == 3:
        try:
            return tx.load_attr(args[0], args[1].as_python())
        except AttributeError:
            return args[2]
    return tx.load_attr(args[0], args[1].as_python())


def _hasattr(tx, args, kwargs):
    return ConstVar(hasattr(args[0].peek(), args[1].as_python()))


def _type(tx, args, kwargs):
    from course_lib.dynamo.variables.builder import wrap

    return wrap(type(args[0].peek())) if len(args) == 1 else None


def _scalar_of_tensor(tx, args, kwargs):
    if args and isinstance(args[0], TensorVar):
        raise Unsupported("converting a tensor to a Python number needs its data")
    return None


def _abs(tx, args, kwargs):
    return tx.call_operator(operator.abs, args) if isinstance(args[0], TensorVar) else None


def _sum(tx, args, kwargs):
    if not args or len(args) > 2 or set(kwargs) - {"start"} or ("start" in kwargs and len(args) > 1):
        return None  # Python raises the TypeError when the break runs it
    items = args[0].unpack(tx)  # consumes an iterator, so the items are used from here on
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstVar(0))
    for item in items:
        total = tx.binary(operator.add, total, item)
    return total


def _min_max(fn):
    def rule(tx, args, kwargs):
        items = args[0].unpack(tx) if len(args) == 1 else list(args)
        if any_tensor(items):
            raise Unsupported(f"{fn.__name__} of tensors compares their data")
        if kwargs.get("key") is not None and not isinstance(kwargs["key"], BuiltinVar):
            raise Unsupported(f"{fn.__name__} with a key function")
        return python_call(lambda *vals, **kw: fn(vals, **kw), items, kwargs)

    return rule


def _map(tx, args, kwargs):
    fn, *iterables = args
    columns = [a.unpack(tx) for a in iterables]
    return IteratorVar([tx.call_function(fn, list(row), {}) for row in zip(*columns)])


def _filter(tx, args, kwargs):
    fn, iterable = args
    keep = []
    for item in iterable.unpack(tx):
        test = item if isinstance(fn, ConstVar) and fn.value is None else tx.call_function(fn, [item], {})
        if tx.truth(test):
            keep.append(item)
    return IteratorVar(keep)


def _sorted(tx, args, kwargs):
    items = args[0].unpack(tx)
    key = kwargs.get("key")
    if key is None or isinstance(key, ConstVar) and key.value is None:
        if any_tensor(items):
            raise Unsupported("sorted() of tensors compares their data")
        return python_call(lambda *vals, **kw: sorted(vals, **kw), items, kwargs)
    # a key function (a lambda, a user function): call it on each item as traced code, then sort
    # the items by the constant keys (stable, as sorted() is); the items themselves may be tensors
    keys = [tx.call_function(key, [item], {}) for item in items]
    if any_tensor(keys):
        raise Unsupported("sorted() with a key that returns tensors compares their data")
    reverse = kwargs["reverse"].as_python() if "reverse" in kwargs else False
    order = sorted(range(len(items)), key=lambda i: keys[i].as_python(), reverse=reverse)
    return ListVar([items[i] for i in order], "list")


def _reduce(tx, args, kwargs):
    fn, iterable, *init = args
    items = iterable.unpack(tx)
    total, rest = (init[0], items) if init else (items[0], items[1:])
    for item in rest:
        total = tx.call_function(fn, [total, item], {})
    return total


def _chain(tx, args, kwargs):
    return IteratorVar([item for a in args for item in a.unpack(tx)])


def _callable(tx, args, kwargs):
    from course_lib.dynamo.variables.builder import is_callable_var

    return ConstVar(is_callable_var(args[0]))


def _any_all(fn):
    def rule(tx, args, kwargs):
        items = args[0].unpack(tx)
        return ConstVar(fn(tx.truth(v) for v in items))

    return rule


def _torch_size(tx, args, kwargs):
    return ConstVar(torch.Size(*[a.as_python() for a in args]))


def _setattr(tx, args, kwargs):
    raise Unsupported("setattr: attribute mutation is not modelled")


BUILTIN_RULES = {
    print: _print, len: _len, isinstance: _isinstance, range: _range, enumerate: _enumerate, zip: _zip,
    list: _list_or_tuple("list"), tuple: _list_or_tuple("tuple"), dict: _dict(dict),
    collections.OrderedDict: _dict(collections.OrderedDict), collections.defaultdict: _dict(collections.defaultdict),
    set: _set(False), frozenset: _set(True), reversed: _reversed, iter: _iter, next: _next,
    getattr: _getattr, hasattr: _hasattr, type: _type, setattr: _setattr,
    int: _scalar_of_tensor, float: _scalar_of_tensor, bool: _scalar_of_tensor, complex: _scalar_of_tensor,
    abs: _abs, sum: _sum, min: _min_max(min), max: _min_max(max), map: _map, filter: _filter,
    callable: _callable, any: _any_all(any), all: _any_all(all), torch.Size: _torch_size, sorted: _sorted,
    functools.reduce: _reduce, itertools.chain: _chain,
}  # fmt: skip

# Builtins with no side effect: folded when no argument holds a tensor.
FOLDABLE = {
    abs, min, max, sum, int, float, bool, str, round, divmod, pow, len, repr, hash, any, all, chr, ord, sorted,
    reversed, isinstance, issubclass, id, format, bin, hex, oct, complex, slice, math.sqrt, math.ceil, math.floor,
}  # fmt: skip

__all__ = ["BUILTIN_RULES", "FOLDABLE", "BuiltinVar", "call_builtin", "has_rule"]
