"""The reference is not the answer: swap course_lib's reference for a guard while a check runs.

An exercise "write immediate dominators" sits in a notebook that has ``cfg.idoms`` one attribute
away. While the check runs, each guarded name (``"course_lib.ir.cfg:idoms"``) is replaced, in
its module, in every course_lib module that imported it and in the notebook's namespace, by a
wrapper that looks at who is calling: course_lib's own code (the checker computing the expected
value, another reference function) gets the real function; the learner's code gets
:class:`ReferenceCalled`, which the check reports as a failure. Everything is put back when the
check ends, passed or not.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

COURSE_LIB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ReferenceCalled(Exception):
    """The learner's code called the reference implementation the exercise asks them to write."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def inside_course_lib(filename: str) -> bool:
    return os.path.abspath(filename).startswith(COURSE_LIB + os.sep)


def _wrap(name: str, original: Any) -> Any:
    @functools.wraps(original)
    def guard(*args, **kwargs):
        if inside_course_lib(sys._getframe(1).f_code.co_filename):
            return original(*args, **kwargs)
        raise ReferenceCalled(name)

    guard.__course_guard__ = original
    return guard


def _resolve(target: str | tuple) -> tuple[Any, str, str]:
    """``"pkg.mod:attr"`` or ``(module_or_object, "attr")`` -> (owner, attr, display name)."""
    if isinstance(target, tuple):
        owner, attr = target
        short = getattr(owner, "__name__", type(owner).__name__).replace("course_lib.", "")
        return owner, attr, f"{short}.{attr}"
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"guard target {target!r} must read 'package.module:attribute'")
    short = module.replace("course_lib.", "")
    try:
        owner = importlib.import_module(module)
    except ImportError:
        owner = None
    return owner, attr, f"{short}.{attr}"


def learner_namespace() -> dict:
    """The globals of the first frame outside course_lib: the notebook (or test) that runs the check."""
    frame = sys._getframe(1)
    while frame is not None and inside_course_lib(frame.f_code.co_filename):
        frame = frame.f_back
    return frame.f_globals if frame is not None else {}


def _course_lib_namespaces() -> list[dict]:
    """The globals of every loaded course_lib module (``from x import f`` makes aliases there)."""
    return [vars(m) for name, m in list(sys.modules.items()) if name.startswith("course_lib") and m is not None]


@contextlib.contextmanager
def guarded(targets: Iterable[str | tuple], namespace: dict | None = None) -> Iterator[None]:
    """Replace each target by its guard (in its module and in ``namespace``) for the ``with`` body."""
    undo: list[tuple[Any, str, Any]] = []
    try:
        for target in targets:
            owner, attr, name = _resolve(target)
            original = getattr(owner, attr, None)
            if original is None:  # a renamed reference must not break the notebook; say so
                print(f"course_lib.check: cannot guard {name}: no such attribute (renamed?)", file=sys.stderr)
                continue
            original = getattr(original, "__course_guard__", original)
            guard = _wrap(name, original)
            undo.append((owner, attr, original))
            setattr(owner, attr, guard)
            for names in [namespace or {}] + _course_lib_namespaces():  # every alias of it, too
                for key, value in list(names.items()):
                    if value is original:
                        undo.append((names, key, original))
                        names[key] = guard
        yield
    finally:
        for owner, attr, original in reversed(undo):
            if isinstance(owner, dict):
                owner[attr] = original
            else:
                setattr(owner, attr, original)
