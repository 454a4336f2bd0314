"""The base variable tracker and the simple ones (teaches torch/_dynamo/variables/base.py and
constant.py: ``VariableTracker``, ``ConstantVariable``).

Every ``Var`` knows its concrete Python value (``as_python()``). The rules that say what an
operation on a value means live on its class, as in torch's variables/: ``call_method(tx, name,
args, kwargs)``, ``var_getattr(tx, name)``, ``getitem(tx, index)``, ``unpack(tx)``, ``truth(tx)``.
A rule that cannot capture raises :class:`~course_lib.dynamo.exc.Unsupported` (a graph break).
When the translator runs an instruction eagerly (after a break), ``tx.eager`` is set and a rule
works on the Python values instead.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.source import Source


@dataclasses.dataclass(eq=False)
class Var:
    """Base class. ``source`` is set for values read from the frame's inputs or globals."""

    source: Source | None = dataclasses.field(default=None, kw_only=True)
    guarded: bool = dataclasses.field(default=False, kw_only=True)

    def as_python(self) -> Any:
        raise NotImplementedError(type(self).__name__)

    def peek(self) -> Any:
        """The Python object this Var stands for, without writing pending changes into it
        (containers override this; see ListVar.as_python)."""
        return self.as_python()

    def describe(self) -> str:
        return type(self).__name__

    def has_tensor(self) -> bool:
        return False

    # -- the rules (overridden per kind) ------------------------------------------------------
    def call_method(self, tx, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if tx.eager or not (self.has_tensor() or any(a.has_tensor() for a in [*args, *kwargs.values()])):
            return python_call(getattr(self.as_python(), name), args, kwargs)
        raise Unsupported(f"method {name} of {self.describe()}")

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.builder import wrap
        from course_lib.dynamo.variables.functions import MethodVar

        value = getattr(self.as_python(), name)
        return MethodVar(self, name) if callable(value) and not isinstance(value, type) else wrap(value)

    def getitem(self, tx, index: Var) -> Var:
        if tx.eager:
            from course_lib.dynamo.variables.builder import wrap

            return wrap(self.as_python()[index.as_python()])
        raise Unsupported(f"subscript of {self.describe()}")

    def unpack(self, tx) -> list[Var]:
        if tx.eager:  # after a break: iterate the real object (a generator runs to its end here)
            from course_lib.dynamo.variables.builder import wrap

            return [wrap(v) for v in self.as_python()]
        raise Unsupported(f"cannot iterate over {self.describe()}")

    def truth(self, tx) -> bool:
        return bool(self.as_python())

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        raise Unsupported(f"call to {callable_name(self)} is not supported")


@dataclasses.dataclass(eq=False)
class ConstVar(Var):
    """A Python constant the graph specialises on (int, float, str, None, dtype, torch.Size...)."""

    value: Any

    def as_python(self):
        return self.value

    def unpack(self, tx) -> list[Var]:
        try:
            return [ConstVar(v) for v in self.value]
        except TypeError:
            raise Unsupported(f"cannot iterate over {type(self.value).__name__}") from None

    def getitem(self, tx, index: Var) -> Var:
        if index.has_tensor():
            raise Unsupported("indexing a Python value with a tensor")
        from course_lib.dynamo.variables.builder import wrap

        return wrap(self.value[index.as_python()])


@dataclasses.dataclass(eq=False)
class PyObjVar(Var):
    """Any other object (a Python module such as ``torch`` or ``math``, a class, a code object)."""

    value: Any

    def as_python(self):
        return self.value

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.builder import wrap

        value = getattr(self.value, name)
        from_module = isinstance(self.value, types.ModuleType)
        src = self.source.attr(name) if self.source is not None and not from_module else None
        return tx.use(wrap(value, src))

    def call_method(self, tx, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if tx.eager:
            return python_call(getattr(self.value, name), args, kwargs)
        raise Unsupported(f"method {name} of {type(self.value).__name__} object")

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        from course_lib.dynamo.variables.builtin import call_builtin, has_rule

        if has_rule(self.value):  # a class with a rule (OrderedDict, defaultdict, torch.Size)
            return call_builtin(tx, self.value, args, kwargs)
        from course_lib.dynamo.variables.user_defined import DataclassVar, plain_dataclass

        if plain_dataclass(self.value):  # Stats(mean=..., std=...): tracked field by field
            return DataclassVar.build(self.value, args, kwargs)
        return super().call_function(tx, args, kwargs)


@dataclasses.dataclass(eq=False)
class CellVar(Var):
    """A closure cell; shared between the frame that made it and the functions that use it.

    ``real`` is the Python cell it stands for, once one exists (a closure handed to Python code
    at a graph break, or the cell of a frame entered at a break). Python code may write to it
    (``nonlocal n; n += 1``, a walrus in a 3.11 comprehension): the translator writes ``contents``
    out before an instruction runs eagerly and reads the cell back after it (Dynamo: the side
    effects of ``nonlocal`` are replayed on the real cell)."""

    contents: Var | None = None
    real: Any = dataclasses.field(default=None, kw_only=True)
    written: Any = dataclasses.field(default=None, kw_only=True)  # what write_out last put in the cell

    def __post_init__(self):
        if self.real is not None and self.written is None:  # made for an existing cell: it holds contents
            try:
                self.written = self.real.cell_contents
            except ValueError:
                pass

    def as_python(self):
        if self.real is None:  # an unassigned variable's cell holds None (a frame entered with it reads it)
            self.real = types.CellType(self.contents.as_python() if self.contents is not None else None)
            self.written = self.real.cell_contents
        return self.real

    def write_out(self) -> None:
        if self.real is not None and self.contents is not None:
            self.real.cell_contents = self.written = self.contents.as_python()

    def read_back(self, wrap) -> None:
        """Take the cell's value if Python code changed it since :meth:`write_out` (a change our own
        handlers made, ``STORE_DEREF``, is already in ``contents``)."""
        if self.real is None:
            return
        try:
            value = self.real.cell_contents
        except ValueError:  # an empty cell (deleted, or never set)
            return
        if value is not self.written:
            self.contents, self.written = wrap(value), value


@dataclasses.dataclass(eq=False)
class NullVar(Var):
    """The NULL that PUSH_NULL / LOAD_GLOBAL / LOAD_METHOD put below a callable."""

    def as_python(self):
        return None


def python_call(fn: Any, args: list[Var], kwargs: dict[str, Var]) -> Var:
    """Call ``fn`` on the Python values of ``args`` and wrap the answer (constant folding, or
    running an instruction eagerly after a graph break)."""
    from course_lib.dynamo.variables.builder import wrap

    return wrap(fn(*[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()}))


def any_tensor(values) -> bool:
    return any(v.has_tensor() for v in values)


def callable_name(fn: Var) -> str:
    value = getattr(fn, "value", None)
    if value is None:
        return fn.describe()
    return getattr(value, "__qualname__", None) or type(value).__name__


__all__ = ["CellVar", "ConstVar", "NullVar", "PyObjVar", "Var", "any_tensor", "callable_name", "python_call"]
