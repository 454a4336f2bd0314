"""Where a traced value came from (teaches torch/_dynamo/source.py: ``LocalSource``,
``GlobalSource``, ``AttrSource``, ``GetItemSource``).

Position: a value read from the frame --> its :class:`Source` --> the guard that re-reads it on
the next call (guards.py).

Real Dynamo builds a tree of Source classes, one per way of reaching a value; ours is one frozen
dataclass: a base (``L`` local / ``G`` global), a key, and a path of ``.attr`` / ``[index]`` steps.
"""

from __future__ import annotations

import dataclasses
from typing import Any


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


__all__ = ["Source"]
