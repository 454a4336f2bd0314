"""Callables on the symbolic stack (teaches torch/_dynamo/variables/functions.py
(``UserFunctionVariable``, ``NestedUserFunctionVariable``), torch.py (``TorchInGraphFunctionVariable``),
misc.py (``GetAttrVariable`` for a bound method) and nn_module.py (``NNModuleVariable``).

``call_function(tx, args, kwargs)`` says what calling each kind means: a user function is inlined
(a child translator shares the graph), a torch function becomes a ``call_function`` node, a leaf
``nn.Module`` a ``call_module`` node, a bound method asks its object's ``call_method``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any

import torch

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.variables.base import CellVar, ConstVar, Var

# torch functions that change global state instead of computing a value: a break in Dynamo too
GLOBAL_STATE_FNS = {"manual_seed", "set_grad_enabled", "seed", "set_default_dtype", "set_printoptions"}


@dataclasses.dataclass(eq=False)
class FunctionVar(Var):
    """A user Python function: calls to it are inlined (``InliningInstructionTranslator``)."""

    value: types.FunctionType

    def as_python(self):
        return self.value

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return tx.inline_call(self, args, kwargs)

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.builder import wrap

        return wrap(getattr(self.value, name))


@dataclasses.dataclass(eq=False)
class NestedFunctionVar(Var):
    """A function made by MAKE_FUNCTION inside traced code (a closure, lambda or comprehension).
    ``real`` is the Python function made the first time it leaves the graph (kept, so attributes
    that Python code sets on it, as ``functools.wraps`` does, stay on it)."""

    code: types.CodeType
    globals: dict
    defaults: tuple = ()
    kwdefaults: dict = dataclasses.field(default_factory=dict)
    closure: tuple = ()  # CellVars
    real: Any = dataclasses.field(default=None, kw_only=True)

    def as_python(self):
        if self.real is None:
            cells = tuple(c.as_python() for c in self.closure)  # the CellVars' own cells: writes come back
            fn = types.FunctionType(self.code, self.globals, self.code.co_name,
                                    tuple(d.as_python() for d in self.defaults) or None, cells or None)  # fmt: skip
            fn.__kwdefaults__ = {k: v.as_python() for k, v in self.kwdefaults.items()} or None
            fn.__qualname__ = self.code.co_qualname
            self.real = fn
        return self.real

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return tx.inline_call(self, args, kwargs)

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.builder import wrap

        return wrap(getattr(self.as_python(), name))


@dataclasses.dataclass(eq=False)
class TorchFnVar(Var):
    """A callable from torch (``torch.relu``, ``torch.nn.functional.gelu``): becomes a call_function node."""

    value: Any

    def as_python(self):
        return self.value

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        name = getattr(self.value, "__name__", "")
        if name in GLOBAL_STATE_FNS:
            raise Unsupported(f"torch.{name} changes global state")
        example = self.value(*[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()})
        return tx.add_node("call_function", self.value, args, kwargs, example)

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.builder import wrap

        return wrap(getattr(self.value, name))


@dataclasses.dataclass(eq=False)
class MethodVar(Var):
    """``obj.name`` about to be called (what LOAD_METHOD / LOAD_ATTR with the method bit push)."""

    obj: Var
    name: str

    def as_python(self):
        return getattr(self.obj.as_python(), self.name)

    def has_tensor(self) -> bool:
        return self.obj.has_tensor()

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return self.obj.call_method(tx, self.name, args, kwargs)


@dataclasses.dataclass(eq=False)
class ModuleVar(Var):
    """An nn.Module; guarded by identity (``ID_MATCH``), its attributes read through sources."""

    value: torch.nn.Module

    def as_python(self):
        return self.value

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        module = self.value
        if is_leaf_module(module):
            name = tx.output.register_module(module, self.source.name if self.source else type(module).__name__)
            example = module(*[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()})
            return tx.add_node("call_module", name, args, kwargs, example)
        return tx.inline_call(FunctionVar(type(module).forward), [self, *args], kwargs)

    def call_method(self, tx, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        from course_lib.dynamo.variables.builder import is_user_function

        if name in MODULE_WALKS and not args and not kwargs:
            return self.walk(tx, name)
        fn = getattr(type(self.value), name)
        if name == "forward" or is_user_function(fn) or not is_leaf_module(self.value):
            return tx.inline_call(FunctionVar(fn), [self, *args], kwargs)
        raise Unsupported(f"method {name} of {type(self.value).__name__}")

    def walk(self, tx, name: str) -> Var:
        """``self.parameters()``, ``self.named_modules()``...: the real module answers which
        dotted names there are; each is then read as attributes (``self.a.weight``), so parameters
        become get_attr nodes and submodules ModuleVars with sources, as in any other read. Dynamo
        inlines these generators; running them ahead is the same since they have no side effects."""
        from course_lib.dynamo.variables.lists import IteratorVar, ListVar

        items = []
        for qualified, _ in getattr(self.value, MODULE_WALKS[name])():
            var: Var = self
            for part in filter(None, qualified.split(".")):
                var = var.var_getattr(tx, part)
            items.append(ListVar([ConstVar(qualified), var], "tuple") if name.startswith("named_") else var)
        return IteratorVar(items)

    def unpack(self, tx) -> list[Var]:
        from course_lib.dynamo.variables.builder import wrap

        if not isinstance(self.value, (torch.nn.Sequential, torch.nn.ModuleList)):
            return super().unpack(tx)
        src = self.source
        return [tx.use(wrap(m, src.item(i) if src else None)) for i, m in enumerate(self.value)]

    def getitem(self, tx, index: Var) -> Var:  # nn.Sequential / ModuleList indexing
        from course_lib.dynamo.variables.builder import wrap

        key = index.as_python()
        return tx.use(wrap(self.value[key], self.source.item(key) if self.source else None))

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.builder import wrap
        from course_lib.dynamo.variables.tensor import TensorVar

        mod = self.value
        src = self.source.attr(name) if self.source is not None else None
        if name in mod._modules:
            return tx.use(ModuleVar(mod._modules[name], source=src))
        if name in mod._parameters or name in mod._buffers:
            tensor = getattr(mod, name)
            var = TensorVar(tensor, source=src)
            if not tx.eager:
                target = tx.output.register_tensor(tensor, src.name if src else name)
                var.node, var.graph_id = tx.output.graph.get_attr(target), tx.output.graph_id
            return var
        value = getattr(mod, name)
        if isinstance(value, types.MethodType):
            return MethodVar(self, name)
        return tx.use(wrap(value, src))


@dataclasses.dataclass(eq=False)
class PartialVar(Var):
    """``functools.partial(fn, *args, **kwargs)`` made in traced code (Dynamo's
    FunctoolsPartialVariable): calling it calls ``fn`` with the stored arguments first."""

    fn: Var
    args: list[Var]
    kwargs: dict[str, Var]

    def as_python(self):
        return functools.partial(self.fn.as_python(), *[a.as_python() for a in self.args],
                                 **{k: v.as_python() for k, v in self.kwargs.items()})  # fmt: skip

    def has_tensor(self) -> bool:
        return any(v.has_tensor() for v in [*self.args, *self.kwargs.values()])

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return tx.call_function(self.fn, [*self.args, *args], {**self.kwargs, **kwargs})


@dataclasses.dataclass(eq=False)
class PartialClassVar(Var):
    """``functools.partial`` itself."""

    value: Any

    def as_python(self):
        return self.value

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if not args:
            raise Unsupported("functools.partial() without a function")
        return PartialVar(args[0], list(args[1:]), dict(kwargs))


# module methods that walk the module tree -> the named_* method that lists the dotted names
MODULE_WALKS = {
    "parameters": "named_parameters", "named_parameters": "named_parameters", "buffers": "named_buffers",
    "named_buffers": "named_buffers", "modules": "named_modules", "named_modules": "named_modules",
    "children": "named_children", "named_children": "named_children",
}  # fmt: skip


def is_leaf_module(module: torch.nn.Module) -> bool:
    """A torch.nn module other than a container: called as one ``call_module`` node."""
    cls = type(module)
    return cls.__module__.startswith("torch.nn") and cls.__name__ not in ("Sequential", "ModuleList", "ModuleDict")


__all__ = ["CellVar", "FunctionVar", "MethodVar", "ModuleVar", "NestedFunctionVar", "TorchFnVar", "is_leaf_module"]
