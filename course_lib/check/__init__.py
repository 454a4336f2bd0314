"""Exercise checks: run a learner's answer, compare it with the reference, explain the result.

Every check cell in the labs calls :meth:`Lab.run`. A check has four outcomes:

* ``passed``        the answer matches;
* ``failed``        it ran but does not match: expected vs got, a diff, and the hint;
* ``not attempted`` the stub still raises ``NotImplementedError``;
* ``raised``        the learner's code raised another exception: its type, message and the
                    learner's own line (never a traceback from inside course_lib).

A check never lets an exception out of the cell, so a lab runs end to end whatever state the
learner's answers are in. Under CI the environment variable ``COURSE_CHECK_STRICT`` turns the
outcomes back into errors: ``solutions`` fails on anything but ``passed`` (the reference answer
must pass), ``labs`` fails on ``failed`` / ``raised`` (a stub must read as not attempted, and a
broken reference must not hide).

Comparators take ``(expected, got)`` and return ``True``/``False``, ``(ok, message)`` or a
:class:`Verdict`; they may also raise ``AssertionError(message)``. ``verify`` functions take
``got`` alone, for answers checked by a property rather than against one value.
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

PASSED, FAILED, NOT_ATTEMPTED, RAISED = "passed", "failed", "not attempted", "raised"
_ICONS = {PASSED: "✅", FAILED: "❌", NOT_ATTEMPTED: "⬜", RAISED: "💥"}
_COLOURS = {PASSED: "#e6f4ea", FAILED: "#fce8e6", NOT_ATTEMPTED: "#f1f3f4", RAISED: "#fef7e0"}
_MAX_REPR = 2000


class CheckFailed(AssertionError):
    """Raised only in strict mode (CI), when an outcome is not allowed."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a comparator found: ``ok``, and a sentence (and optional diff) saying why."""

    ok: bool
    message: str = ""
    diff: str = ""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one exercise check; prints as text and renders as HTML."""

    name: str
    status: str
    message: str = ""
    expected: str = ""
    got: str = ""
    diff: str = ""
    hint: str = ""

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def __str__(self) -> str:
        lines = [f"[{self.status.upper()}] {self.name}"]
        if self.message:
            lines.append(f"  {self.message}")
        if self.status == FAILED:
            if self.expected:
                lines.append("  expected: " + _indent(self.expected))
            if self.got:
                lines.append("  got:      " + _indent(self.got))
            if self.diff:
                lines.append("  diff (- expected, + got):\n" + _indent(self.diff, "    ", first=True))
        if self.hint and self.status != PASSED:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        parts = [f"<b>{_ICONS[self.status]} {esc(self.name)}: {esc(self.status)}</b>"]
        if self.message:
            parts.append(f"<div>{esc(self.message)}</div>")
        if self.status == FAILED:
            for label, text in (("expected", self.expected), ("got", self.got)):
                if text:
                    parts.append(f"<div><i>{label}</i><pre style='margin:0'>{esc(text)}</pre></div>")
            if self.diff:
                parts.append(f"<div><i>diff (- expected, + got)</i>{_diff_html(self.diff)}</div>")
        if self.hint and self.status != PASSED:
            parts.append(f"<div><i>hint:</i> {esc(self.hint)}</div>")
        style = f"background:{_COLOURS[self.status]};padding:6px 10px;border-radius:4px"
        return f"<div style='{style}'>{''.join(parts)}</div>"


def _indent(text: str, pad: str = "            ", first: bool = False) -> str:
    lines = text.splitlines() or [""]
    head = pad + lines[0] if first else lines[0]
    return "\n".join([head] + [pad + line for line in lines[1:]])


def _diff_html(diff: str) -> str:
    rows = []
    for line in diff.splitlines():
        colour = "#137333" if line.startswith("+") else "#c5221f" if line.startswith("-") else "#5f6368"
        rows.append(f"<span style='color:{colour}'>{html.escape(line)}</span>")
    return "<pre style='margin:0'>" + "\n".join(rows) + "</pre>"


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


# ----------------------------------------------------------------------------- comparators


def equal(expected: Any, got: Any) -> Verdict:
    """``==``; arrays and tensors must have the same shape and equal elements everywhere."""
    if hasattr(expected, "shape") or hasattr(got, "shape"):
        if getattr(expected, "shape", None) != getattr(got, "shape", None):
            return Verdict(False, f"shape {getattr(got, 'shape', None)} but expected {getattr(expected, 'shape', None)}")
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


def _as_verdict(outcome: Any) -> Verdict:
    if isinstance(outcome, Verdict):
        return outcome
    if isinstance(outcome, tuple) and len(outcome) == 2:
        return Verdict(bool(outcome[0]), str(outcome[1]))
    return Verdict(bool(outcome))


# ----------------------------------------------------------------------------- running


def _learner_frame(exc: BaseException) -> str:
    """The last traceback line that is not inside course_lib (the learner's own code)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(here)]
    if not frames:
        return ""
    f = frames[-1]
    where = "your cell" if f.filename.startswith("<") or "ipykernel" in f.filename else os.path.basename(f.filename)
    return f"{where}, line {f.lineno}, in {f.name}: {f.line or ''}".rstrip(": ")


class Lab:
    """A notebook's exercises: run checks, remember outcomes, print the progress summary."""

    def __init__(self, title: str):
        self.title = title
        self.results: dict[str, CheckResult] = {}
        global _current
        _current = self

    def run(
        self,
        name: str,
        attempt: Callable[[], Any],
        expected: Any = None,
        *,
        compare: Callable[[Any, Any], Any] | None = None,
        verify: Callable[[Any], Any] | None = None,
        hint: str = "",
    ) -> CheckResult:
        """Check one exercise. ``attempt`` is a zero-argument callable calling the learner's code.

        ``expected`` may be a value or a zero-argument callable computing the reference lazily.
        Give ``verify`` instead of ``expected``/``compare`` to check a property of the answer.
        """
        result = self._evaluate(name, attempt, expected, compare, verify, hint)
        self.results[name] = result
        _enforce_strict(result)
        return result

    def _evaluate(self, name, attempt, expected, compare, verify, hint) -> CheckResult:
        try:
            got = attempt()
        except NotImplementedError:
            return CheckResult(name, NOT_ATTEMPTED, "replace the `raise NotImplementedError` with your code", hint=hint)
        except Exception as exc:  # the learner's code raised: show their line, not ours
            where = _learner_frame(exc)
            msg = f"{type(exc).__name__}: {exc}" + (f"  (at {where})" if where else "")
            return CheckResult(name, RAISED, msg, hint=hint)
        try:
            if verify is not None:
                verdict = _as_verdict(verify(got))
                exp_text = ""
            else:
                exp = expected() if callable(expected) else expected
                verdict = _as_verdict((compare or equal)(exp, got))
                exp_text = short_repr(exp)
        except AssertionError as exc:
            verdict, exp_text = Verdict(False, str(exc)), ""
        except Exception as exc:  # the answer has the wrong shape for the comparator
            verdict = Verdict(False, f"could not compare the answer ({type(exc).__name__}: {exc})")
            exp_text = ""
        status = PASSED if verdict.ok else FAILED
        return CheckResult(name, status, verdict.message, exp_text, short_repr(got), verdict.diff, hint)

    def summary(self) -> "Summary":
        return Summary(self.title, tuple(self.results.values()))


@dataclasses.dataclass(frozen=True)
class Summary:
    title: str
    results: tuple[CheckResult, ...]

    def counts(self) -> dict[str, int]:
        out = {PASSED: 0, FAILED: 0, NOT_ATTEMPTED: 0, RAISED: 0}
        for r in self.results:
            out[r.status] += 1
        return out

    def __str__(self) -> str:
        c = self.counts()
        head = f"{self.title}: {c[PASSED]}/{len(self.results)} passed"
        rest = ", ".join(f"{v} {k}" for k, v in c.items() if k != PASSED and v)
        lines = [head + (f" ({rest})" if rest else "")]
        lines += [f"  {_ICONS[r.status]} {r.status:<13} {r.name}" for r in self.results]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        c = self.counts()
        total = max(len(self.results), 1)
        bar = "".join(
            f"<div style='width:{100 * c[s] / total:.1f}%;background:{col};height:10px'></div>"
            for s, col in (("passed", "#34a853"), ("failed", "#ea4335"), ("raised", "#fbbc04"),
                           ("not attempted", "#dadce0"))
        )  # fmt: skip
        rows = "".join(
            f"<tr><td>{_ICONS[r.status]}</td><td>{html.escape(r.name)}</td><td>{r.status}</td></tr>"
            for r in self.results
        )
        return (
            f"<div><b>{html.escape(self.title)}</b>: {c[PASSED]}/{len(self.results)} passed"
            f"<div style='display:flex;width:300px;border:1px solid #ccc'>{bar}</div>"
            f"<table>{rows}</table></div>"
        )


_current: Lab | None = None


def run(name: str, attempt: Callable[[], Any], expected: Any = None, **kwargs) -> CheckResult:
    """:meth:`Lab.run` on the most recently created lab (a default one if none exists)."""
    lab = _current if _current is not None else Lab("exercises")
    return lab.run(name, attempt, expected, **kwargs)


def _enforce_strict(result: CheckResult) -> None:
    mode = os.environ.get("COURSE_CHECK_STRICT", "")
    if not mode:
        return
    allowed = {"solutions": {PASSED}, "labs": {PASSED, NOT_ATTEMPTED}}.get(mode)
    if allowed is None:
        print(f"COURSE_CHECK_STRICT={mode!r} is not one of 'solutions', 'labs'; ignored", file=sys.stderr)
        return
    if result.status not in allowed:
        raise CheckFailed(f"strict mode ({mode}): {result}")
