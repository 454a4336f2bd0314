"""Guards: the conditions under which a captured graph may be reused (teaches torch/_dynamo/guards.py,
``TENSOR_MATCH`` / ``CONSTANT_MATCH`` / ``ID_MATCH`` and the shape-env guards on size symbols that
torch/fx/experimental/symbolic_shapes.py produces).

Position: a sourced value used by the translator --> :func:`guard_for` --> a :class:`Guard` kept with
the cache entry --> ``Guard.check(f_locals)`` on every later call (eval_frame.py).

Real Dynamo compiles all guards of an entry into one C++ ``GuardManager`` tree; ours is a list
checked in order, each failure a sentence like ``TORCH_LOGS=recompiles`` prints.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import torch

from course_lib.dynamo.source import Source


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _size_name(source: Source, dim: int) -> str:
    return f"{source.name}.size()[{dim}]"


@dataclasses.dataclass
class Guard:
    """A condition on one input the compiled code relies on. ``check`` returns None when it
    holds, else a sentence saying what changed (like Dynamo's recompilation reasons).

    ``TENSOR_MATCH``'s expected shape holds an int per static dim and a symbol name (``"s0"``)
    per dynamic dim (automatic dynamic); the symbol's own constraints are ``SHAPE_ENV`` guards,
    whose expected value is ``(dim, op, rhs)``: ``(0, ">=", 2)`` or ``(0, "==", (other_source, dim))``.
    """

    source: Source
    kind: str  # TENSOR_MATCH | CONSTANT_MATCH | ID_MATCH | LIST_LENGTH | TYPE_MATCH | SHAPE_ENV
    expected: Any

    def __str__(self) -> str:
        if self.kind == "TENSOR_MATCH":
            dtype, shape, device, rg = self.expected
            dims = ", ".join(str(d) for d in shape)
            return (
                f"{self.source.name}: TENSOR_MATCH dtype={_dtype_name(dtype)} shape=[{dims}] "
                f"device={device} requires_grad={rg}"
            )
        if self.kind == "SHAPE_ENV":
            dim, op, rhs = self.expected
            if op == ">=":
                return f"{self.source.name}: SHAPE_ENV {rhs} <= {_size_name(self.source, dim)}"
            other, odim = rhs
            return f"{self.source.name}: SHAPE_ENV {_size_name(self.source, dim)} == {_size_name(other, odim)}"
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
        return CHECKS[self.kind](self, name, value, f_locals)


def _check_tensor(guard: Guard, name: str, value: Any, f_locals: dict) -> str | None:
    if not isinstance(value, torch.Tensor):
        return f"{name} is no longer a tensor (got {type(value).__name__})"
    dtype, shape, device, rg = guard.expected
    if value.dtype != dtype:
        return f"tensor {name} dtype mismatch. expected {_dtype_name(dtype)}, actual {_dtype_name(value.dtype)}"
    if value.dim() != len(shape):
        return f"tensor {name} rank mismatch. expected {len(shape)}, actual {value.dim()}"
    for i, (want, got) in enumerate(zip(shape, value.shape)):
        if isinstance(want, int) and want != got:  # a str is a size symbol: any size passes here
            return f"tensor {name} size mismatch at index {i}. expected {want}, actual {got}"
    if str(value.device) != device:
        return f"tensor {name} device mismatch. expected {device}, actual {value.device}"
    if value.requires_grad != rg:
        return f"tensor {name} requires_grad mismatch. expected requires_grad={int(rg)}"
    return None


def _check_shape_env(guard: Guard, name: str, value: Any, f_locals: dict) -> str | None:
    dim, op, rhs = guard.expected
    if not isinstance(value, torch.Tensor) or value.dim() <= dim:
        return f"{name} has no dim {dim}"
    size = value.shape[dim]
    if op == ">=":
        return None if size >= rhs else f"{rhs} <= {_size_name(guard.source, dim)}  # (got {size})"
    other, odim = rhs
    try:
        other_size = other.resolve(f_locals).shape[odim]
    except (KeyError, AttributeError, IndexError, TypeError):
        return f"{_size_name(other, odim)} can no longer be read"
    if size != other_size:
        return f"{_size_name(guard.source, dim)} == {_size_name(other, odim)}  # (got {size} and {other_size})"
    return None


def _check_id(guard: Guard, name: str, value: Any, f_locals: dict) -> str | None:
    return None if value is guard.expected else f"{name} is a different object than when compiled"


def _check_length(guard: Guard, name: str, value: Any, f_locals: dict) -> str | None:
    if not isinstance(value, (list, tuple)) or len(value) != guard.expected:
        got = len(value) if hasattr(value, "__len__") else "?"
        return f"len({name}) changed: expected {guard.expected}, actual {got}"
    return None


def _check_type(guard: Guard, name: str, value: Any, f_locals: dict) -> str | None:
    return None if type(value) is guard.expected else f"type({name}) changed to {type(value).__name__}"


def _check_constant(guard: Guard, name: str, value: Any, f_locals: dict) -> str | None:
    if type(value) is not type(guard.expected) or value != guard.expected:
        return f"{name} == {guard.expected!r} failed (now {value!r})"
    return None


# guard kind -> its check (the rule table; Dynamo's GuardBuilder has one method per kind)
CHECKS = {
    "TENSOR_MATCH": _check_tensor,
    "SHAPE_ENV": _check_shape_env,
    "ID_MATCH": _check_id,
    "LIST_LENGTH": _check_length,
    "TYPE_MATCH": _check_type,
    "CONSTANT_MATCH": _check_constant,
}


def guard_for(var: Any, symbols: dict[int, str] | None = None) -> Guard | None:
    """The guard that using ``var`` (a Var with a source) installs, or None. ``symbols`` maps the
    tensor's dynamic dims to their size symbols (automatic dynamic)."""
    from course_lib.dynamo import variables as v

    src = var.source
    if src is None:
        return None
    if isinstance(var, v.TensorVar):
        t = var.value
        shape = tuple((symbols or {}).get(i, s) for i, s in enumerate(t.shape))
        return Guard(src, "TENSOR_MATCH", (t.dtype, shape, str(t.device), t.requires_grad))
    if isinstance(var, v.ConstVar):
        return Guard(src, "CONSTANT_MATCH", var.value)
    if isinstance(var, (v.ModuleVar, v.FunctionVar)):
        return Guard(src, "ID_MATCH", var.value)
    if isinstance(var, v.ListVar):
        return Guard(src, "LIST_LENGTH", len(var.items))
    if isinstance(var, v.DictVar):
        return Guard(src, "TYPE_MATCH", var.cls)
    if isinstance(var, v.PyObjVar) and not isinstance(var.value, types.ModuleType):
        return Guard(src, "ID_MATCH", var.value)
    return None


__all__ = ["CHECKS", "Guard", "guard_for"]
