"""``with torch.no_grad():``, ``with torch.enable_grad():`` and ``contextlib.nullcontext()`` (teaches
torch/_dynamo/variables/ctx_manager.py: GradModeVariable).

Position: ``torch.no_grad`` read from a global --> :class:`GradModeClassVar`; calling it -->
:class:`GradModeVar`; ``BEFORE_WITH`` enters it --> a ``set_grad_enabled(False)`` node in the graph
and :class:`GradModeExitVar` on the stack; the ``with``'s exit call --> ``set_grad_enabled(prior)``.

As in Dynamo, the grad mode is a piece of global state the graph itself sets and restores, so the
graph is right whatever the mode is when it runs. Dynamo's nodes call the private
``torch._C._set_grad_enabled``; ours call the public ``torch.set_grad_enabled`` (same effect, one
node each). The mode is also really switched while we capture, so example values get the right
``requires_grad``; the switch is logged in the output's undo list, so an instruction that breaks
after entering the block (an inlined helper that prints inside ``no_grad``) is undone with it.

Other context managers are not modelled: ``BEFORE_WITH`` on them is a graph break and the
``with`` runs eagerly (symbolic_convert.BEFORE_WITH).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.variables.base import ConstVar, Var

# the classes whose instances we model, and the grad mode each one enters
GRAD_MODE_CLASSES: dict[Any, bool] = {torch.no_grad: False, torch.enable_grad: True}


class _GradState:
    """The global grad mode as an attribute, so OutputGraph.remember/restore can undo a change."""

    @property
    def enabled(self) -> bool:
        return torch.is_grad_enabled()

    @enabled.setter
    def enabled(self, value: bool) -> None:
        torch.set_grad_enabled(value)


GRAD_STATE = _GradState()


def set_grad_mode(tx, enabled: bool) -> None:
    """Switch the grad mode now and record the switch as a graph node (kept by DCE: impure)."""
    tx.output.remember(GRAD_STATE, "enabled")
    before, GRAD_STATE.enabled = GRAD_STATE.enabled, enabled
    tx.output.grad_switch(enabled, before)


@dataclasses.dataclass(eq=False)
class GradModeClassVar(Var):
    """``torch.no_grad`` / ``torch.enable_grad`` / ``torch.set_grad_enabled`` themselves, before the call."""

    value: Any

    def as_python(self):
        return self.value

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if self.value is torch.set_grad_enabled:  # switches at the call, a `with` only restores
            if len(args) != 1 or kwargs or not isinstance(args[0].as_python(), bool):
                raise Unsupported("torch.set_grad_enabled takes one constant bool here")
            prior = torch.is_grad_enabled()
            set_grad_mode(tx, args[0].as_python())
            return SetGradEnabledVar(prior)
        if args or kwargs:
            raise Unsupported(f"torch.{self.value.__name__} called with arguments")
        return GradModeVar(GRAD_MODE_CLASSES[self.value])


@dataclasses.dataclass(eq=False)
class GradModeVar(Var):
    """A ``torch.no_grad()`` object, not yet entered."""

    enabled: bool

    def as_python(self):
        return torch.enable_grad() if self.enabled else torch.no_grad()

    def describe(self) -> str:
        return "torch.enable_grad()" if self.enabled else "torch.no_grad()"

    def enter(self, tx) -> tuple[Var, Var]:
        """``__enter__``: remember the mode to restore, switch to ours. (exit, what ``as`` binds)."""
        prior = torch.is_grad_enabled()
        set_grad_mode(tx, self.enabled)
        return GradModeExitVar(prior), ConstVar(None)


class ExitVar(Var):
    """A modelled ``__exit__`` (what BEFORE_WITH leaves on the stack for the end of the block)."""


@dataclasses.dataclass(eq=False)
class GradModeExitVar(ExitVar):
    """The bound ``__exit__`` that BEFORE_WITH leaves on the stack: calling it restores ``prior``."""

    prior: bool

    def as_python(self):
        def __exit__(*exc_info):
            torch.set_grad_enabled(self.prior)

        return __exit__

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        set_grad_mode(tx, self.prior)
        return ConstVar(None)  # None: an exception inside the block is not swallowed


@dataclasses.dataclass(eq=False)
class SetGradEnabledVar(Var):
    """What ``torch.set_grad_enabled(b)`` returns: the mode is already switched; as a context
    manager its exit switches back to ``prior``."""

    prior: bool

    def as_python(self):
        raise Unsupported("a torch.set_grad_enabled object cannot leave the traced code")

    def enter(self, tx) -> tuple[Var, Var]:
        return GradModeExitVar(self.prior), ConstVar(None)


@dataclasses.dataclass(eq=False)
class NullContextVar(Var):
    """``contextlib.nullcontext(value)``: entering it gives ``value`` back, nothing else happens."""

    value: Var

    def as_python(self):
        return contextlib.nullcontext(self.value.as_python())

    def enter(self, tx) -> tuple[Var, Var]:
        return NullExitVar(), self.value


@dataclasses.dataclass(eq=False)
class NullExitVar(ExitVar):
    def as_python(self):
        return lambda *exc_info: None

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return ConstVar(None)


@dataclasses.dataclass(eq=False)
class NullContextClassVar(Var):
    """``contextlib.nullcontext`` itself."""

    value: Any

    def as_python(self):
        return self.value

    def call_function(self, tx, args: list[Var], kwargs: dict[str, Var]) -> Var:
        if len(args) + len(kwargs) > 1:
            raise Unsupported("nullcontext() takes at most one argument")
        return NullContextVar(args[0] if args else kwargs.get("enter_result", ConstVar(None)))


MODELLED_CONTEXTS = (GradModeVar, SetGradEnabledVar, NullContextVar)

__all__ = [
    "ExitVar",
    "MODELLED_CONTEXTS",
    "NullContextClassVar",
    "NullContextVar",
    "GRAD_MODE_CLASSES",
    "GRAD_STATE",
    "GradModeClassVar",
    "GradModeExitVar",
    "GradModeVar",
    "set_grad_mode",
]
