"""Automatic dynamic shapes: after a recompile caused by a size change, that size becomes a symbol
(teaches torch/_dynamo/pgo.py: ``FrameStateSizeEntry`` and ``update_automatic_dynamic``, and
``_automatic_dynamic`` in torch/_dynamo/variables/builder.py).

Position: ``OptimizedFunction`` (eval_frame.py), on a cache miss --> :class:`FrameState` says which
dims of which input tensors changed since the first compile --> ``OutputGraph(dynamic=...)`` puts a
symbol in their guards (``shape=[s0, 3]``, ``2 <= L['x'].size()[0]``) and lists them in each
placeholder's ``meta["course_dynamic_dims"]`` for the backend.

What real Dynamo does, and we copy: the first call compiles a static graph. A later call whose
size differs fails the guard; the frame state then records that dim as changed, and the
recompile treats it as dynamic (``s0``), so later sizes hit the cache. Sizes 0 and 1 are never
made symbols (0/1 specialisation: broadcasting and empty tensors behave differently there), so a
size-1 call compiles its own static entry. Two dynamic dims with the same size share one symbol
(duck sizing) and a guard keeps them equal. Only the frame's tensor arguments (sources under
``L[...]``, not parameters) become dynamic, as ``force_parameter_static_shapes`` does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from course_lib.dynamo.guards import Guard
from course_lib.dynamo.source import Source


@dataclasses.dataclass
class FrameState:
    """Per optimized function: the sizes seen for each tensor input, ``None`` where they changed."""

    sizes: dict[str, list[int | None]] = dataclasses.field(default_factory=dict)
    sources: dict[str, Source] = dataclasses.field(default_factory=dict)
    all_dynamic: bool = False  # ``dynamic=True``: every dim a symbol from the first compile

    def record(self, guards: list[Guard], f_locals: dict[str, Any]) -> None:
        """After a compile: remember the sizes of the tensor inputs the capture guarded."""
        for guard in guards:
            if guard.kind == "TENSOR_MATCH" and _is_input(guard.source, f_locals):
                self.sources.setdefault(guard.source.name, guard.source)
                self._merge(guard.source.name, _sizes(guard.source, f_locals))

    def dynamic_dims(self, f_locals: dict[str, Any]) -> dict[str, dict[int, str]]:
        """Before a recompile: merge this call's sizes, and name a symbol for each changed dim
        whose size now is not 0 or 1 (duck sizing: one symbol per distinct size)."""
        if self.all_dynamic:
            for name, value in f_locals.items():
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                    self.sources.setdefault(f"L[{name!r}]", Source("L", name))
                    self.sizes[f"L[{name!r}]"] = [None] * value.dim()
        symbol_of_size: dict[int, str] = {}
        out: dict[str, dict[int, str]] = {}
        for name, source in self.sources.items():
            now = _sizes(source, f_locals)
            if now is None:
                continue
            self._merge(name, now)
            for dim, (seen, size) in enumerate(zip(self.sizes[name], now)):
                if seen is None and size not in (0, 1):
                    sym = symbol_of_size.setdefault(size, f"s{len(symbol_of_size)}")
                    out.setdefault(name, {})[dim] = sym
        return out

    def _merge(self, name: str, sizes: tuple | None) -> None:
        if sizes is None:
            return
        old = self.sizes.get(name)
        if old is None or len(old) != len(sizes):  # first sight, or the rank changed: start again
            self.sizes[name] = list(sizes)
        else:
            self.sizes[name] = [o if o == s else None for o, s in zip(old, sizes)]


def _sizes(source: Source, f_locals: dict[str, Any]) -> tuple | None:
    try:
        value = source.resolve(f_locals)
    except (KeyError, AttributeError, IndexError, TypeError):
        return None
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None


def _is_input(source: Source, f_locals: dict[str, Any]) -> bool:
    if source.base != "L":
        return False
    try:
        value = source.resolve(f_locals)
    except (KeyError, AttributeError, IndexError, TypeError):
        return False
    return isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter)


__all__ = ["FrameState"]
