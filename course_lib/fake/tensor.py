"""Fake tensors and symbolic sizes (teaches torch/_subclasses/fake_tensor.py and
torch/fx/experimental/symbolic_shapes.py: ``ShapeEnv``, SymInt, guards).

Position: ATen Graph + input *metadata* --> **propagate** --> every node's shape, dtype, stride
and device (``node.meta["fake"]``), plus the guards under which the graph is valid.

A :class:`FakeTensor` is metadata only: no storage, no compute. Sizes are ints or sympy
expressions over symbols ``s0, s1, ...`` (the role of torch's SymInt). A :class:`ShapeEnv`
creates the symbols and records guards:

* 0/1 specialisation: a dimension whose example size is 0 or 1 never gets a symbol (size 1
  broadcasts, size 0 is empty, so code generated for "any n" would be wrong for them); the
  env records that it specialised.
* duck sizing: two dimensions with the same example size share one symbol (torch's default),
  unless ``duck=False``.
* guards: when a shape rule needs a fact (mm's inner sizes equal, a view keeps numel, a
  broadcast pairs a symbol with a concrete size), the env checks it on the example sizes
  (hints) and records it as a guard, e.g. ``Eq(s1, s2)``. The compiled graph is reused only
  while every guard holds.

Simplification: torch's FakeTensorMode runs every ATen op's meta function under dispatch; we
have shape rules for the primitive set only (:data:`RULES`), so graphs are decomposed first.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import sympy
import torch

aten = torch.ops.aten
Size = int | sympy.Expr


def contiguous_strides(shape: tuple[Size, ...]) -> tuple[Size, ...]:
    strides, acc = [], sympy.Integer(1)
    for s in reversed(shape):
        strides.append(_simp(acc))
        acc = acc * s
    return tuple(reversed(strides))


def _simp(x: Any) -> Size:
    x = sympy.sympify(x)
    return int(x) if x.is_Integer else x


@dataclasses.dataclass(frozen=True)
class FakeTensor:
    """Shape, dtype, stride and device of a tensor; no data."""

    shape: tuple[Size, ...]
    dtype: torch.dtype
    stride: tuple[Size, ...]
    device: str = "cpu"

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> Size:
        return _simp(math.prod(self.shape, start=sympy.Integer(1)))

    def __repr__(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        stride = ", ".join(map(str, self.stride)) + ("," if len(self.stride) == 1 else "")
        return f"FakeTensor({dt}[{', '.join(map(str, self.shape))}], stride=({stride}))"


def fake(shape, dtype=torch.float32, device="cpu") -> FakeTensor:
    shape = tuple(_simp(s) for s in shape)
    return FakeTensor(shape, dtype, contiguous_strides(shape), device)


class ShapeEnv:
    """Creates size symbols and records guards (torch.fx.experimental.symbolic_shapes.ShapeEnv)."""

    def __init__(self, duck: bool = True):
        self.duck = duck
        self.hints: dict[sympy.Symbol, int] = {}
        self.guards: list[sympy.Basic] = []
        self.specialised: list[str] = []
        self._by_hint: dict[int, sympy.Symbol] = {}

    def size(self, hint: int, where: str = "") -> Size:
        """A symbol for a dimension of example size ``hint`` (or ``hint`` itself if 0/1)."""
        if hint in (0, 1):
            self.specialised.append(f"{where or 'a size'} == {hint}")
            return hint
        if self.duck and hint in self._by_hint:
            return self._by_hint[hint]
        sym = sympy.Symbol(f"s{len(self.hints)}", positive=True, integer=True)
        self.hints[sym] = hint
        self._by_hint.setdefault(hint, sym)
        return sym

    def from_tensor(self, t: torch.Tensor, dynamic: tuple[int, ...] | None = None, name: str = "x") -> FakeTensor:
        """A FakeTensor for ``t``; dims in ``dynamic`` (default: all) get symbols."""
        dims = range(t.dim()) if dynamic is None else dynamic
        shape = tuple(self.size(s, f"{name}.size({i})") if i in dims else s for i, s in enumerate(t.shape))
        return fake(shape, t.dtype, str(t.device))

    def hint(self, expr: Size) -> int:
        return int(sympy.sympify(expr).subs(self.hints))

    def guard_eq(self, a: Size, b: Size, why: str = "") -> None:
        """Require ``a == b``; checked on the hints, recorded unless trivially true."""
        rel = sympy.Eq(sympy.sympify(a), sympy.sympify(b))
        if rel is sympy.true:
            return
        if self.hint(a) != self.hint(b):
            raise ValueError(f"shape mismatch {why}: {a} != {b} (example sizes {self.hint(a)} != {self.hint(b)})")
        if rel not in self.guards:
            self.guards.append(rel)

    def guard_text(self) -> list[str]:
        return [str(g) for g in self.guards]
