"""Tensors on the symbolic stack (teaches torch/_dynamo/variables/tensor.py: ``TensorVariable``,
its ``call_method`` and ``var_getattr``).

A :class:`TensorVar` holds the example value (computed eagerly while capturing; real Dynamo holds a
fake tensor, see course_lib.fake) and, when a graph computed it, its FX node. Methods become
``call_method`` nodes, except the ones in the tables below: those whose answer is a Python value
are *specialised* (the number is read now and baked into the graph), those that need the data
are graph breaks, and in-place ones are breaks (Dynamo captures mutation; we do not model it).
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

import torch

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.variables.base import ConstVar, Var, python_call

# Tensor methods and attributes whose answer is a Python value: specialised, not captured.
TENSOR_STATIC_METHODS = {
    "size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous", "element_size",
    "is_floating_point", "get_device", "is_complex",
}  # fmt: skip
TENSOR_STATIC_ATTRS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout", "is_leaf"}
# The static reads that depend on sizes (they specialise a dynamic dim: see OutputGraph.size_read).
SIZE_READS = {"size", "numel", "nelement", "stride", "is_contiguous", "shape"}
# Tensor methods that need the data itself: a graph break (Dynamo: capture_scalar_outputs=False).
TENSOR_DATA_METHODS = {
    "item": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
    "tolist": "Tensor.tolist() needs the data",
    "numpy": "Tensor.numpy() leaves torch",
    "__bool__": "bool(tensor) needs the data",
    "__int__": "int(tensor) needs the data",
    "__float__": "float(tensor) needs the data",
}


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

    def has_tensor(self) -> bool:
        return True

    def call_method(self, tx, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if tx.eager:
            return python_call(getattr(self.value, name), args, kwargs)
        if name in TENSOR_DATA_METHODS:
            raise Unsupported(TENSOR_DATA_METHODS[name])
        if name in TENSOR_STATIC_METHODS:
            if name in SIZE_READS:
                tx.output.size_read(f"Tensor.{name}()")
            return python_call(getattr(self.value, name), args, kwargs)
        if name.endswith("_") and not name.endswith("__"):
            raise Unsupported(f"in-place Tensor.{name}: course_lib.dynamo does not model mutation")
        example = getattr(self.value, name)(
            *[a.as_python() for a in args], **{k: v.as_python() for k, v in kwargs.items()}
        )
        return tx.add_node("call_method", name, [self, *args], kwargs, example)

    def var_getattr(self, tx, name: str) -> Var:
        from course_lib.dynamo.variables.functions import MethodVar

        if name in TENSOR_STATIC_ATTRS:
            if name in SIZE_READS:
                tx.output.size_read(f"Tensor.{name}")
            return ConstVar(getattr(self.value, name))
        if callable(getattr(torch.Tensor, name, None)):
            return MethodVar(self, name)
        return tx.call_operator(getattr, [self, ConstVar(name)])

    def getitem(self, tx, index: Var) -> Var:
        return tx.call_operator(operator.getitem, [self, index])

    def unpack(self, tx) -> list[Var]:
        tx.output.size_read("iterating over a tensor")
        return [self.getitem(tx, ConstVar(i)) for i in range(self.value.shape[0])]

    def truth(self, tx) -> bool:
        if tx.eager:
            return bool(self.value)
        raise Unsupported("generic_jump TensorVariable()")


__all__ = ["SIZE_READS", "TENSOR_DATA_METHODS", "TENSOR_STATIC_ATTRS", "TENSOR_STATIC_METHODS", "TensorVar"]
