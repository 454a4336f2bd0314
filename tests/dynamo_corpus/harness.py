"""Run one corpus function eagerly and through course_lib.dynamo, and compare (used by
tests/test_dynamo_functions.py and by record_torch.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from typing import Any

import torch


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, containers compared element by element (tensors allclose)."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True))  # fmt: skip
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


@dataclasses.dataclass
class Outcome:
    value: Any = None
    error: type | None = None
    args: tuple = ()
    printed: str = ""


def run_eager(fn, make_args) -> Outcome:
    args = make_args()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            return Outcome(fn(*args), None, args, out.getvalue())
        except Exception as exc:  # the function raises on purpose: the compiled run must raise the same
            return Outcome(None, type(exc), args, out.getvalue())


def run_ours(fn, make_args):
    """(Outcome, ExplainOutput or None)."""
    from course_lib import dynamo

    args = make_args()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            e = dynamo.explain(fn, *args)
            return Outcome(e.out, None, args, out.getvalue()), e
        except Exception as exc:
            return Outcome(None, type(exc), args, out.getvalue()), None


def mismatch(want: Outcome, got: Outcome) -> str | None:
    """Why the compiled run differs from eager, or None."""
    if want.error is not None or got.error is not None:
        if want.error is not got.error:
            return f"eager raised {want.error}, ours raised {got.error}"
        return None
    if not same(want.value, got.value):
        return f"result differs: eager {want.value!r}, ours {got.value!r}"
    if not same(want.args, got.args):
        return f"inputs after the call differ: eager {want.args!r}, ours {got.args!r}"
    if want.printed != got.printed:
        return f"printed output differs: eager {want.printed!r}, ours {got.printed!r}"
    return None
