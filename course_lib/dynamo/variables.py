"""What sits on the symbolic stack: variable trackers (teaches torch/_dynamo/variables/*.py),
their sources, and guards (torch/_dynamo/source.py, torch/_dynamo/guards.py).

Position: Python values of a frame --> ``Var`` objects the translator pushes and pops.

Every ``Var`` knows its concrete Python value (``as_python()``); a :class:`TensorVar` also knows
the FX node that computes it in the current graph. A ``Var`` read from the frame's inputs carries
a :class:`Source` (``L['x']``, ``G['scale']``, ``L['self'].lin``); the first time the translator
*uses* such a value it records a :class:`Guard` on it, because the graph it builds is only valid
while that value stays the same (a constant), has the same identity (a module, a function) or
the same dtype/shape/device/requires_grad (a tensor).

Simplification: real Dynamo's trackers do not hold concrete tensors (they hold fake tensors,
see course_lib.fake); ours hold the real example value, computed eagerly while capturing.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import torch

# ----------------------------------------------------------------------------- sources


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a value came from: ``L['x']`` (a local of the frame), ``G['w']`` (a global), then a
    path of ``.attr`` / ``[index]`` steps. ``resolve`` re-reads it from a new call's frame."""

    base: str  # "L" or "G"
    key: str
    path: tuple = ()
    globals: Any = dataclasses.field(default=None, compare=False, hash=False, repr=False)

    def attr(self, name: str) -> Source:
        return Source(self.base, self.key, self.path + (("attr", name),), self.globals)

    def item(self, index: Any) -> Source:
        return Source(self.base, self.key, self.path + (("item", index),), self.globals)

    @property
    def name(self) -> str:
        text = f"{self.base}[{self.key!r}]"
        for kind, step in self.path:
            text += f".{step}" if kind == "attr" else f"[{step!r}]"
        return text

    def resolve(self, f_locals: dict[str, Any]) -> Any:
        value = f_locals[self.key] if self.base == "L" else self.globals[self.key]
        for kind, step in self.path:
            value = getattr(value, step) if kind == "attr" else value[step]
        return value

    def __str__(self) -> str:
        return self.name


# ----------------------------------------------------------------------------- guards


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclasses.dataclass
class Guard:
    """A condition on one input the compiled code relies on. ``check`` returns None when it
    holds, else a sentence saying what changed (like Dynamo's recompilation reasons)."""

    source: Source
    kind: str  # TENSOR_MATCH | CONSTANT_MATCH | ID_MATCH | LIST_LENGTH | TYPE_MATCH
    expected: Any

    def __str__(self) -> str:
        if self.kind == "TENSOR_MATCH":
            dtype, shape, device, rg = self.expected
            return (
                f"{self.source.name}: TENSOR_MATCH dtype={_dtype_name(dtype)} shape={list(shape)} "
                f"device={device} requires_grad={rg}"
            )
        if self.kind == "ID_MATCH":
            return f"{self.source.name}: ID_MATCH (the same {type(self.expected).__name__} object)"
        if self.kind == "LIST_LENGTH":
            return f"{self.source.name}: LIST_LENGTH == {self.expected}"
        if self.kind == "TYPE_MATCH":
            return f"{self.source.name}: TYPE_MATCH {self.expected.__name__}"
        return f"{self.source.name}: CONSTANT_MATCH == {self.expected!r}"

    def check(self, f_locals: dict[str, Any]) -> str | None:
        name = self.source.name
        try:
            value = self.source.resolve(f_locals)
        except (KeyError, AttributeError, IndexError, TypeError) as exc:
            return f"{name} can no longer be read ({type(exc).__name__})"
        if self.kind == "TENSOR_MATCH":
            if not isinstance(value, torch.Tensor):
                return f"{name} is no longer a tensor (got {type(value).__name__})"
            dtype, shape, device, rg = self.expected
            if value.dtype != dtype:
                return f"tensor {name} dtype mismatch. expected {_dtype_name(dtype)}, actual {_dtype_name(value.dtype)}"
            if value.dim() != len(shape):
                return f"tensor {name} rank mismatch. expected {len(shape)}, actual {value.dim()}"
            for i, (want, got) in enumerate(zip(shape, value.shape)):
                if want != got:
                    return f"tensor {name} size mismatch at index {i}. expected {want}, actual {got}"
            if str(value.device) != device:
                return f"tensor {name} device mismatch. expected {device}, actual {value.device}"
            if value.requires_grad != rg:
                return f"tensor {name} requires_grad mismatch. expected requires_grad={int(rg)}"
            return None
        if self.kind == "ID_MATCH":
            return None if value is self.expected else f"{name} is a different object than when compiled"
        if self.kind == "LIST_LENGTH":
            if not isinstance(value, (list, tuple)) or len(value) != self.expected:
                return f"len({name}) changed: expected {self.expected}, actual {len(value) if hasattr(value, '__len__') else '?'}"
            return None
        if self.kind == "TYPE_MATCH":
            return None if type(value) is self.expected else f"type({name}) changed to {type(value).__name__}"
        if type(value) is not type(self.expected) or value != self.expected:
            return f"{name} == {self.expected!r} failed (now {value!r})"
        return None


# ----------------------------------------------------------------------------- variables


@dataclasses.dataclass(eq=False)
class Var:
    """Base class. ``source`` is set for values read from the frame's inputs or globals."""

    source: Source | None = dataclasses.field(default=None, kw_only=True)
    guarded: bool = dataclasses.field(default=False, kw_only=True)

    def as_python(self) -> Any:
        raise NotImplementedError(type(self).__name__)

    def describe(self) -> str:
        return type(self).__name__


@dataclasses.dataclass(eq=False)
class TensorVar(Var):
    """A tensor: its example value and, when it was computed in graph ``graph_id``, its node."""

    value: torch.Tensor
    node: Any = None
    graph_id: int = -1

    def as_python(self):
        return self.value

    def describe(self) -> str:
        return "TensorVariable()"


@dataclasses.dataclass(eq=False)
class ConstVar(Var):
    """A Python constant the graph specialises on (int, float, str, None, dtype, torch.Size...)."""

    value: Any

    def as_python(self):
        return self.value


@dataclasses.dataclass(eq=False)
class ListVar(Var):
    """A list or tuple of Vars (``kind`` says which)."""

    items: list
    kind: str = "list"

    def as_python(self):
        values = [v.as_python() for v in self.items]
        return values if self.kind == "list" else tuple(values)


@dataclasses.dataclass(eq=False)
class DictVar(Var):
    items: dict

    def as_python(self):
        return {k: v.as_python() for k, v in self.items.items()}


@dataclasses.dataclass(eq=False)
class ModuleVar(Var):
    """An nn.Module; guarded by identity (``ID_MATCH``), its attributes read through sources."""

    value: torch.nn.Module

    def as_python(self):
        return self.value


@dataclasses.dataclass(eq=False)
class FunctionVar(Var):
    """A user Python function: calls to it are inlined (``InliningInstructionTranslator``)."""

    value: types.FunctionType

    def as_python(self):
        return self.value


@dataclasses.dataclass(eq=False)
class NestedFunctionVar(Var):
    """A function made by MAKE_FUNCTION inside traced code (a closure, lambda or comprehension)."""

    code: types.CodeType
    globals: dict
    defaults: tuple = ()
    kwdefaults: dict = dataclasses.field(default_factory=dict)
    closure: tuple = ()  # CellVars

    def as_python(self):
        cells = tuple(types.CellType(c.contents.as_python() if c.contents is not None else None) for c in self.closure)
        fn = types.FunctionType(
            self.code,
            self.globals,
            self.code.co_name,
            tuple(d.as_python() for d in self.defaults) or None,
            cells or None,
        )
        fn.__kwdefaults__ = {k: v.as_python() for k, v in self.kwdefaults.items()} or None
        return fn


@dataclasses.dataclass(eq=False)
class CellVar(Var):
    """A closure cell; shared between the frame that made it and the functions that use it."""

    contents: Var | None = None

    def as_python(self):
        return types.CellType(self.contents.as_python() if self.contents is not None else None)


@dataclasses.dataclass(eq=False)
class TorchFnVar(Var):
    """A callable from torch (``torch.relu``, ``torch.nn.functional.gelu``): becomes a call_function node."""

    value: Any

    def as_python(self):
        return self.value


@dataclasses.dataclass(eq=False)
class BuiltinVar(Var):
    """A Python builtin (``len``, ``range``, ``print``...) handled by a rule in the translator."""

    value: Any

    def as_python(self):
        return self.value


@dataclasses.dataclass(eq=False)
class MethodVar(Var):
    """``obj.name`` about to be called (what LOAD_METHOD / LOAD_ATTR with the method bit push)."""

    obj: Var
    name: str

    def as_python(self):
        return getattr(self.obj.as_python(), self.name)


@dataclasses.dataclass(eq=False)
class IteratorVar(Var):
    """An iterator over a known list of Vars (loops over Python containers are unrolled)."""

    items: list
    pos: int = 0

    def as_python(self):
        return iter([v.as_python() for v in self.items[self.pos :]])


@dataclasses.dataclass(eq=False)
class PyObjVar(Var):
    """Any other object (a Python module such as ``torch`` or ``math``, a class, a code object)."""

    value: Any

    def as_python(self):
        return self.value


@dataclasses.dataclass(eq=False)
class NullVar(Var):
    """The NULL that PUSH_NULL / LOAD_GLOBAL / LOAD_METHOD put below a callable."""

    def as_python(self):
        return None


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
    int,
    float,
    bool,
    str,
    bytes,
    type(None),
    complex,
    torch.dtype,
    torch.device,
    torch.Size,
    range,
    slice,
    type(Ellipsis),
)


_PLAIN_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))), type(iter("")))


def wrap(value: Any, source: Source | None = None) -> Var:
    """The Var for a concrete value (VariableBuilder in torch/_dynamo/variables/builder.py)."""
    if isinstance(value, torch.Tensor):
        return TensorVar(value, source=source)
    if isinstance(value, torch.nn.Module):
        return ModuleVar(value, source=source)
    if isinstance(value, CONSTANT_TYPES):
        return ConstVar(value, source=source)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        items = [wrap(v, source.item(i) if source else None) for i, v in enumerate(value)]
        return ListVar(items, "list" if isinstance(value, list) else "tuple", source=source)
    if type(value) in _PLAIN_ITERATORS:  # e.g. a comprehension's ".0" argument
        return IteratorVar([wrap(v) for v in value], source=None)
    if isinstance(value, dict):
        return DictVar({k: wrap(v, source.item(k) if source else None) for k, v in value.items()}, source=source)
    if is_user_function(value):
        return FunctionVar(value, source=source)
    if isinstance(value, types.FunctionType) and is_torch_callable(value):
        return TorchFnVar(value, source=source)
    if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
        return TorchFnVar(value, source=source) if is_torch_callable(value) else BuiltinVar(value, source=source)
    if isinstance(value, type) and value.__module__ == "builtins":
        return BuiltinVar(value, source=source)
    if callable(value) and is_torch_callable(value) and not isinstance(value, type):
        return TorchFnVar(value, source=source)
    return PyObjVar(value, source=source)


def guard_for(var: Var) -> Guard | None:
    """The guard that using ``var`` (which has a source) installs, or None."""
    src = var.source
    if src is None:
        return None
    if isinstance(var, TensorVar):
        v = var.value
        return Guard(src, "TENSOR_MATCH", (v.dtype, tuple(v.shape), str(v.device), v.requires_grad))
    if isinstance(var, ConstVar):
        return Guard(src, "CONSTANT_MATCH", var.value)
    if isinstance(var, (ModuleVar, FunctionVar)):
        return Guard(src, "ID_MATCH", var.value)
    if isinstance(var, ListVar):
        return Guard(src, "LIST_LENGTH", len(var.items))
    if isinstance(var, DictVar):
        return Guard(src, "TYPE_MATCH", dict)
    if isinstance(var, PyObjVar) and not isinstance(var.value, types.ModuleType):
        return Guard(src, "ID_MATCH", var.value)
    return None
