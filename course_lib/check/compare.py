"""Comparators for exercise checks: ``(expected, got) -> Verdict``, and ``verify`` helpers.

Comparators take ``(expected, got)`` and return ``True``/``False``, ``(ok, message)`` or a
:class:`Verdict`; they may also raise ``AssertionError(message)``. ``verify`` functions take
``got`` alone, for answers checked by a property rather than against one value.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from typing import Any

_MAX_REPR = 2000


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a comparator found: ``ok``, and a sentence (and optional diff) saying why."""

    ok: bool
    message: str = ""
    diff: str = ""


def short_repr(value: Any, limit: int = _MAX_REPR) -> str:
    """``repr``/``str`` of a value, cut to ``limit`` characters, deterministic for sets."""
    if isinstance(value, (set, frozenset)):
        try:
            text = "{" + ", ".join(repr(v) for v in sorted(value, key=repr)) + "}"
        except TypeError:  # pragma: no cover - unorderable mixed sets
            text = repr(value)
    elif isinstance(value, str) and "\n" in value:
        text = value
    else:
        text = _tensor_summary(value) or repr(value)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"


def _tensor_summary(value: Any) -> str | None:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None or not hasattr(value, "tolist"):
        return None
    if _numel(value) <= 16:
        return f"tensor({value.tolist()}, dtype={dtype})"
    return f"<{type(value).__name__} shape={tuple(shape)} dtype={dtype}>"


def _numel(value: Any) -> int:
    n = 1
    for s in value.shape:
        n *= int(s)
    return n


def as_verdict(outcome: Any) -> Verdict:
    if isinstance(outcome, Verdict):
        return outcome
    if isinstance(outcome, tuple) and len(outcome) == 2:
        return Verdict(bool(outcome[0]), str(outcome[1]))
    return Verdict(bool(outcome))


def equal(expected: Any, got: Any) -> Verdict:
    """``==``; arrays and tensors must have the same shape and equal elements everywhere."""
    if hasattr(expected, "shape") or hasattr(got, "shape"):
        if getattr(expected, "shape", None) != getattr(got, "shape", None):
            return Verdict(
                False, f"shape {getattr(got, 'shape', None)} but expected {getattr(expected, 'shape', None)}"
            )
    try:
        result = expected == got
        ok = bool(result.all()) if hasattr(result, "all") else bool(result)
    except Exception:  # values that cannot be compared
        ok = False
    return Verdict(ok, "" if ok else "the answer differs from the expected value")


def same_set(expected: Any, got: Any) -> Verdict:
    """Set equality, reporting what is missing and what is extra."""
    try:
        exp, gt = set(expected), set(got)
    except TypeError:
        return Verdict(False, f"expected a set-like answer, got {type(got).__name__}")
    if exp == gt:
        return Verdict(True)
    missing, extra = exp - gt, gt - exp
    bits = []
    if missing:
        bits.append(f"missing {short_repr(missing)}")
    if extra:
        bits.append(f"unexpected {short_repr(extra)}")
    return Verdict(False, "; ".join(bits))


def same_text(expected: str, got: Any, *, strip: bool = True) -> Verdict:
    """Line-by-line text equality (IR, code), with a unified diff on mismatch."""
    if not isinstance(got, str):
        got = str(got)
    a, b = (expected.strip(), got.strip()) if strip else (expected, got)
    a_lines = [line.rstrip() for line in a.splitlines()]
    b_lines = [line.rstrip() for line in b.splitlines()]
    if a_lines == b_lines:
        return Verdict(True)
    diff = "\n".join(difflib.unified_diff(a_lines, b_lines, "expected", "got", lineterm="", n=1))
    first = next(i for i, (x, y) in enumerate(zip(a_lines + [None], b_lines + [None])) if x != y)
    return Verdict(False, f"texts differ from line {first + 1}", diff)


def close(rtol: float = 1e-5, atol: float = 1e-6) -> Callable[[Any, Any], Verdict]:
    """Comparator for tensors/arrays: shape, dtype kind, then max error and where it is."""

    def compare(expected: Any, got: Any) -> Verdict:
        import numpy as np

        exp, gt = _to_numpy(expected), _to_numpy(got)
        if gt is None:
            return Verdict(False, f"expected a tensor or array, got {type(got).__name__}")
        if exp.shape != gt.shape:
            return Verdict(False, f"shape {tuple(gt.shape)} but expected {tuple(exp.shape)}")
        if exp.size == 0:
            return Verdict(True)
        exp64, got64 = exp.astype(np.float64), gt.astype(np.float64)
        err = np.abs(exp64 - got64)
        nan_mismatch = np.isnan(exp64) != np.isnan(got64)
        err = np.where(np.isnan(exp64) & np.isnan(got64), 0.0, err)
        err = np.where(nan_mismatch, np.inf, err)
        bad = (err > atol + rtol * np.abs(np.nan_to_num(exp64))) | nan_mismatch
        if not bad.any():
            return Verdict(True, f"max abs error {float(err.max()):.3g}")
        where = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), err.shape)
        idx = tuple(int(i) for i in where)
        return Verdict(
            False,
            f"{int(bad.sum())} of {err.size} elements differ; worst at index {idx}: "
            f"expected {exp64[idx]:.6g}, got {got64[idx]:.6g} (|err| {err[idx]:.3g}, "
            f"allowed {atol:g} + {rtol:g}·|expected|)",
        )

    compare.__name__ = f"close(rtol={rtol}, atol={atol})"
    return compare


def _to_numpy(value: Any):
    import numpy as np

    if hasattr(value, "detach"):  # torch.Tensor, without importing torch here
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    if isinstance(value, (list, tuple, int, float, np.ndarray, np.generic)):
        return np.asarray(value)
    return None


def predicate(fn: Callable[[Any], bool], description: str) -> Callable[[Any], Verdict]:
    """A ``verify`` function from a boolean test and a sentence saying what it requires."""

    def verify(got: Any) -> Verdict:
        ok = bool(fn(got))
        return Verdict(ok, "" if ok else f"the answer should satisfy: {description}")

    return verify


def per_input(labels: list[str], compare: Callable[[Any, Any], Any] | None = None) -> Callable[[Any, Any], Verdict]:
    """Comparator for answers computed on many inputs: names the first input that differs.

    ``expected`` and ``got`` are lists with one entry per input; ``labels[k]`` says what input
    ``k`` was (e.g. "random program 17 (9 blocks)"), so the learner can reproduce it.
    """
    inner = compare or equal

    def compare_all(expected: list, got: Any) -> Verdict:
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return Verdict(False, f"expected one answer per input ({len(expected)} inputs)")
        for label, exp, g in zip(labels, expected, got):
            v = as_verdict(inner(exp, g))
            if not v.ok:
                head = f"wrong on {label}" + (f": {v.message}" if v.message else "")
                return Verdict(False, head, v.diff)
        return Verdict(True, f"right on all {len(expected)} inputs")

    return compare_all
