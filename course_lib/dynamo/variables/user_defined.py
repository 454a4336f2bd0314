"""Objects of user dataclasses built inside the traced code (teaches
torch/_dynamo/variables/user_defined.py: a dataclass instance tracked field by field).

``Stats(mean=x.mean(0), std=x.std(0))`` in traced code --> :class:`DataclassVar` whose fields are
Vars (tensors stay graph values); reading ``out.mean`` gives the field's Var back; ``out.mean = y``
changes the field (logged for undo). The Python object is made only when the value leaves the
traced code (``as_python``), with the fields' final values.

Only plain dataclasses are modelled: no ``__post_init__``, no ``default_factory``, every field set
by ``__init__``. Calling any other class stays a graph break.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.variables.base import Var


def plain_dataclass(cls: Any) -> bool:
    """A dataclass whose generated ``__init__`` only stores its arguments."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)) or hasattr(cls, "__post_init__"):
        return False
    fields = dataclasses.fields(cls)
    return all(f.init and f.default_factory is dataclasses.MISSING for f in fields)


@dataclasses.dataclass(eq=False)
class DataclassVar(Var):
    """An instance of ``cls`` made in traced code: field name -> Var."""

    cls: type
    items: dict[str, Var]
    real: Any = None  # made once, on the first as_python, so the object keeps one identity

    @staticmethod
    def build(cls: type, args: list[Var], kwargs: dict[str, Var]) -> DataclassVar:
        from course_lib.dynamo.variables.builder import wrap

        try:
            bound = inspect.signature(cls).bind(*args, **kwargs)
        except TypeError as exc:
            raise Unsupported(f"call to {cls.__name__}: {exc}") from None
        bound.apply_defaults()
        items = {k: v if isinstance(v, Var) else wrap(v) for k, v in bound.arguments.items()}
        return DataclassVar(cls, items)

    def as_python(self):
        if self.real is None:
            self.real = object.__new__(self.cls)
        for name, var in self.items.items():
            object.__setattr__(self.real, name, var.as_python())  # object's: frozen dataclasses too
        return self.real

    def describe(self) -> str:
        return f"{self.cls.__name__} (dataclass)"

    def has_tensor(self) -> bool:
        return any(v.has_tensor() for v in self.items.values())

    def var_getattr(self, tx, name: str) -> Var:
        if name in self.items:
            return self.items[name]
        raise Unsupported(f"attribute {name} of {self.describe()} (only its fields are modelled)")

    def set_field(self, tx, name: str, value: Var) -> None:
        if name not in self.items:
            raise Unsupported(f"new attribute {name} on {self.describe()}")
        tx.output.remember(self, "items")
        self.items[name] = value


@dataclasses.dataclass(eq=False)
class SuperVar(Var):
    """``super()`` inside a method (torch/_dynamo/variables/misc.py: SuperVariable). The zero-argument
    form reads the frame's ``__class__`` cell and first argument, which the translator passes in."""

    cls: type
    obj: Var

    def as_python(self):
        return super(self.cls, self.obj.as_python())

    def describe(self) -> str:
        return f"super({self.cls.__name__})"

    def var_getattr(self, tx, name: str) -> Var:
        """The attribute found after ``cls`` in the MRO; a user method comes back bound to ``obj``."""
        from course_lib.dynamo.variables.builder import is_user_function, wrap

        mro = type(self.obj.as_python()).__mro__
        for klass in mro[mro.index(self.cls) + 1 :]:
            if name in vars(klass):
                raw = vars(klass)[name]
                if is_user_function(raw):
                    return BoundUserMethodVar(raw, self.obj)
                if isinstance(raw, (int, float, str, bool, type(None))):
                    return wrap(raw)
                raise Unsupported(f"super().{name} is {type(raw).__name__} from {klass.__name__}, not user code")
        raise Unsupported(f"super().{name}: not found after {self.cls.__name__} in the MRO")


@dataclasses.dataclass(eq=False)
class BoundUserMethodVar(Var):
    """A user function bound to a tracked ``self`` (what ``super().forward`` gives): calls are inlined."""

    fn: Any
    obj: Var

    def as_python(self):
        return self.fn.__get__(self.obj.as_python())

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        from course_lib.dynamo.variables.functions import FunctionVar

        if tx.eager:
            return tx.call_eagerly(FunctionVar(self.fn), [self.obj, *args], kwargs)
        return tx.inline_call(FunctionVar(self.fn), [self.obj, *args], kwargs)


def zero_arg_super(tx) -> SuperVar:
    """``super()`` with no arguments: CPython finds ``__class__`` (a cell the compiler makes for
    methods that use super) and the frame's first argument; so do we."""
    cell = tx.cells.get("__class__")
    first = tx.code.co_varnames[0] if tx.code.co_argcount else None
    if cell is None or cell.contents is None or first is None:
        raise Unsupported("super() outside a method")
    self_var = tx.locals.get(first)
    if self_var is None and first in tx.cells:  # self captured by a closure: it lives in a cell
        self_var = tx.cells[first].contents
    return SuperVar(cell.contents.as_python(), self_var)


__all__ = ["BoundUserMethodVar", "DataclassVar", "SuperVar", "plain_dataclass", "zero_arg_super"]
