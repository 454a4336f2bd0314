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


__all__ = ["DataclassVar", "plain_dataclass"]
