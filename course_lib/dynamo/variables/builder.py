"""From a Python value to its Var (teaches torch/_dynamo/variables/builder.py: ``VariableBuilder``).

``wrap(value, source)`` picks the tracker kind. Containers keep the object they came from
(``real``), so a mutation made while capturing is written back into it (see lists.py).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import types
from typing import Any

import torch

from course_lib.dynamo.source import Source
from course_lib.dynamo.variables.base import ConstVar, PyObjVar, Var
from course_lib.dynamo.variables.builtin import BuiltinVar, has_rule
from course_lib.dynamo.variables.ctx_manager import GRAD_MODE_CLASSES, GradModeClassVar, NullContextClassVar
from course_lib.dynamo.variables.dicts import DictVar
from course_lib.dynamo.variables.functions import (
    FunctionVar,
    MethodVar,
    ModuleVar,
    NestedFunctionVar,
    PartialClassVar,
    TorchFnVar,
)
from course_lib.dynamo.variables.lists import IteratorVar, ListVar, SetVar, field_names
from course_lib.dynamo.variables.tensor import TensorVar

SKIP_MODULES = ("torch", "course_lib", "numpy", "builtins", "math", "operator", "functools", "typing", "collections")


def is_user_function(fn: Any) -> bool:
    """A function Dynamo would inline: Python code outside torch / the standard library."""
    if not isinstance(fn, types.FunctionType):
        return False
    module = fn.__module__ or ""
    return module.split(".")[0] not in SKIP_MODULES


def is_torch_callable(fn: Any) -> bool:
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("torch"):
        return True
    name = getattr(fn, "__name__", None)
    return name is not None and getattr(torch, name, None) is fn


CONSTANT_TYPES = (
    int, float, bool, str, bytes, type(None), complex, torch.dtype, torch.device, torch.Size, range, slice,
    type(Ellipsis), type(NotImplemented),
)  # fmt: skip

_PLAIN_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))), type(iter("")))
_DICT_METHODS_THAT_MATTER = ("__getitem__", "__setitem__", "__delitem__", "__iter__", "__len__", "__contains__",
                             "get", "keys", "values", "items", "update", "setdefault", "pop", "__missing__")  # fmt: skip
_KNOWN_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def plain_dict_type(cls: type) -> bool:
    """A dict type whose behaviour DictVar models: dict, OrderedDict, defaultdict, or a subclass of
    one of them that overrides none of the methods a DictVar answers itself."""
    if cls in _KNOWN_DICTS:
        return True
    base = next((b for b in cls.__mro__ if b in _KNOWN_DICTS), None)
    return base is not None and all(getattr(cls, m, None) is getattr(base, m, None) for m in _DICT_METHODS_THAT_MATTER)


def wrap(value: Any, source: Source | None = None) -> Var:
    """The Var for a concrete value (VariableBuilder in torch/_dynamo/variables/builder.py)."""
    if isinstance(value, torch.Tensor):
        return TensorVar(value, source=source)
    if isinstance(value, torch.nn.Module):
        return ModuleVar(value, source=source)
    if isinstance(value, CONSTANT_TYPES):
        return ConstVar(value, source=source)
    if type(value) in (list, tuple):  # namedtuples and list subclasses stay opaque objects
        items = [wrap(v, source.item(i) if source else None) for i, v in enumerate(value)]
        return ListVar(items, "list" if isinstance(value, list) else "tuple", source=source, real=value)
    if isinstance(value, tuple) and field_names(type(value)):  # namedtuple, torch.return_types
        items = [wrap(v, source.item(i) if source else None) for i, v in enumerate(value)]
        return ListVar(items, "tuple", source=source, real=value, tuple_cls=type(value))
    if type(value) in _PLAIN_ITERATORS:  # e.g. a comprehension's ".0" argument
        return IteratorVar([wrap(v) for v in value], source=None)
    if isinstance(value, dict) and plain_dict_type(type(value)):
        items = {k: wrap(v, source.item(k) if source else None) for k, v in value.items()}
        factory = getattr(value, "default_factory", None)
        return DictVar(items, type(value), wrap(factory) if factory is not None else None, source=source, real=value)
    if type(value) in (set, frozenset) and not any(isinstance(v, torch.Tensor) for v in value):
        return SetVar(set(value), frozen=type(value) is frozenset, source=source, real=value)
    if is_user_function(value):
        return FunctionVar(value, source=source)
    if isinstance(value, types.FunctionType) and is_torch_callable(value):
        return TorchFnVar(value, source=source)
    if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
        return TorchFnVar(value, source=source) if is_torch_callable(value) else BuiltinVar(value, source=source)
    if isinstance(value, type) and (
        value in GRAD_MODE_CLASSES or value is torch.set_grad_enabled
    ):  # torch.no_grad: a context manager we model
        return GradModeClassVar(value, source=source)
    if value is functools.partial:
        return PartialClassVar(value, source=source)
    if value is contextlib.nullcontext:
        return NullContextClassVar(value, source=source)
    if isinstance(value, type) and (value.__module__ == "builtins" or has_rule(value)):
        return BuiltinVar(value, source=source)
    if callable(value) and is_torch_callable(value) and not isinstance(value, type):
        return TorchFnVar(value, source=source)
    return PyObjVar(value, source=source)


def is_callable_var(var: Var) -> bool:
    if isinstance(var, (FunctionVar, NestedFunctionVar, TorchFnVar, BuiltinVar, MethodVar, ModuleVar)):
        return True
    return callable(var.peek())


__all__ = ["CONSTANT_TYPES", "SKIP_MODULES", "is_callable_var", "is_torch_callable", "is_user_function", "wrap"]
