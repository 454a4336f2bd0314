"""Exercise checks: run a learner's answer, compare it with the reference, explain the result.

Teaches nothing of the stack itself; it is the grader every lab calls (the role of nbgrader's
autograder cells and of the GPU-Puzzles / Triton-Puzzles checkers). Every check cell calls
:meth:`Lab.run`. A check has four outcomes:

* ``passed``        the answer matches;
* ``failed``        it ran but does not match: what was got, a diff where that helps, hints;
* ``not attempted`` the stub still raises ``NotImplementedError``;
* ``raised``        the learner's code raised another exception: its type, message and the
                    learner's own line (never a traceback from inside course_lib).

What a learner is shown depends on how far they got (a check is a teacher, not an answer key):

* no hint before an attempt; after the n-th failed attempt the first n hints (``hint`` may be a
  list: a nudge first, then stronger ones; never the code);
* a *prediction* (``predict=True``) never shows the expected value: a miss says how far off and
  in which direction (:mod:`course_lib.check.feedback`); after two misses the ``explanation``;
* ``COURSE_INSTRUCTOR=1`` shows everything: expected value, every hint, the explanation;
* ``guard=["course_lib.ir.cfg:idoms", ...]`` swaps the reference for a guard while the check
  runs (:mod:`course_lib.check.guard`), so calling it fails with "you called the reference".

A check never lets an exception out of the cell, so a lab runs end to end whatever state the
learner's answers are in. Under CI the environment variable ``COURSE_CHECK_STRICT`` turns the
outcomes back into errors: ``solutions`` fails on anything but ``passed`` (the reference answer
must pass), ``labs`` fails on ``failed`` / ``raised`` (a stub must read as not attempted, and a
broken reference must not hide).

Comparators live in :mod:`course_lib.check.compare`; oracles for exercises checked on many
inputs (random CFGs, ragged kernel shapes, collective traffic) in :mod:`course_lib.check.oracles`.
"""

from __future__ import annotations

import dataclasses
import html
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from course_lib.check import feedback
from course_lib.check.compare import (  # noqa: F401  (public names of course_lib.check)
    Verdict,
    as_verdict,
    close,
    equal,
    per_input,
    predicate,
    same_set,
    same_text,
    short_repr,
)
from course_lib.check.guard import COURSE_LIB, ReferenceCalled, guarded, learner_namespace

_as_verdict = as_verdict  # the old private name

PASSED, FAILED, NOT_ATTEMPTED, RAISED = "passed", "failed", "not attempted", "raised"

# Status marks that need no emoji font (without one, emoji show as empty boxes): a short word for
# text, a coloured CSS badge for HTML.
_MARKS = {PASSED: "PASS", FAILED: "FAIL", NOT_ATTEMPTED: "TODO", RAISED: "ERROR"}
_BADGE_COLOURS = {PASSED: "#137333", FAILED: "#c5221f", NOT_ATTEMPTED: "#5f6368", RAISED: "#b06000"}
_COLOURS = {PASSED: "#e6f4ea", FAILED: "#fce8e6", NOT_ATTEMPTED: "#f1f3f4", RAISED: "#fef7e0"}
EXPLANATION_AFTER = 2  # failed attempts before a prediction offers its explanation


class CheckFailed(AssertionError):
    """Raised only in strict mode (CI), when an outcome is not allowed."""


def instructor_mode() -> bool:
    """``COURSE_INSTRUCTOR=1`` (or ``true``/``yes``): show expected values, every hint, explanations."""
    return os.environ.get("COURSE_INSTRUCTOR", "").strip().lower() in {"1", "true", "yes", "on"}


def badge(status: str) -> str:
    """An HTML badge for a status: coloured text, no emoji, no font needed beyond the page's own."""
    style = (f"display:inline-block;min-width:3.2em;text-align:center;font:bold 11px monospace;"
             f"color:white;background:{_BADGE_COLOURS[status]};border-radius:3px;padding:1px 4px")  # fmt: skip
    return f"<span style='{style}'>{_MARKS[status]}</span>"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one exercise check; prints as text and renders as HTML.

    ``hints`` are the hints this learner has earned so far (one per failed attempt, capped);
    ``expected`` is empty unless it may be shown (not a prediction, or instructor mode).
    """

    name: str
    status: str
    message: str = ""
    expected: str = ""
    got: str = ""
    diff: str = ""
    hints: tuple[str, ...] = ()
    explanation: str = ""
    attempt: int = 0
    hidden_hints: int = 0

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def hint(self) -> str:
        """The hints shown, joined (the old single-hint field)."""
        return " ".join(self.hints)

    def _lines(self) -> list[tuple[str, str]]:
        """(label, text) rows shared by the text and HTML renderings."""
        rows = []
        if self.message:
            rows.append(("", self.message))
        if self.status == FAILED:
            if self.expected:
                rows.append(("expected", self.expected))
            if self.got:
                rows.append(("got", self.got))
        for k, h in enumerate(self.hints, 1):
            rows.append((f"hint {k}", h))
        if self.hidden_hints and self.status in (FAILED, RAISED):
            rows.append(("", f"run the check again after another try for a stronger hint ({self.hidden_hints} left)"))
        if self.explanation:
            rows.append(("explanation", self.explanation))
        return rows

    def __str__(self) -> str:
        head = f"[{self.status.upper()}] {self.name}" + (f"  (attempt {self.attempt})" if self.attempt > 1 else "")
        lines = [head]
        for label, text in self._lines():
            lines.append(f"  {label + ': ' if label else ''}{_indent(text)}")
        if self.status == FAILED and self.diff:
            lines.append("  diff (- expected, + got):\n" + _indent(self.diff, "    ", first=True))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        attempt = f" <small>(attempt {self.attempt})</small>" if self.attempt > 1 else ""
        parts = [f"{badge(self.status)} <b>{esc(self.name)}</b>: {esc(self.status)}{attempt}"]
        for label, text in self._lines():
            if label in ("expected", "got"):
                parts.append(f"<div><i>{label}</i><pre style='margin:0'>{esc(text)}</pre></div>")
            else:
                parts.append(f"<div>{'<i>' + esc(label) + ':</i> ' if label else ''}{esc(text)}</div>")
        if self.status == FAILED and self.diff:
            parts.append(f"<div><i>diff (- expected, + got)</i>{_diff_html(self.diff)}</div>")
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


# ----------------------------------------------------------------------------- running


def _learner_frame(exc: BaseException) -> str:
    """The last traceback line that is not inside course_lib (the learner's own code)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(COURSE_LIB)]
    if not frames:
        return ""
    f = frames[-1]
    where = "your cell" if f.filename.startswith("<") or "ipykernel" in f.filename else os.path.basename(f.filename)
    return f"{where}, line {f.lineno}, in {f.name}: {f.line or ''}".rstrip(": ")


def _reference_message(exc: ReferenceCalled) -> str:
    return (f"you called the reference implementation ({exc.name}); this exercise asks you to write it. "
            "Use the building blocks the exercise names instead.")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Outcome:
    """What running and comparing found, before deciding what the learner may see."""

    status: str
    message: str = ""
    expected: Any = None
    has_expected: bool = False
    got: str = ""
    diff: str = ""


def _prediction_verdict(verdict: Verdict, exp: Any, has_exp: bool, got: Any, compare_raised: bool) -> Verdict:
    """A missed prediction says how far off, never the answer (:mod:`course_lib.check.feedback`).

    With an expected value, the comparator's own words (``close``'s "expected 48, got 12",
    ``same_set``'s "missing {...}", a diff) are replaced by feedback's. Without one (``verify``),
    the exercise's sentence stands, but the text of an exception raised while comparing does not:
    a ``KeyError`` there is the name of a key the answer has.
    """
    if verdict.message.startswith("you called the reference"):
        return verdict
    if has_exp:
        return Verdict(False, feedback.describe(exp, got))
    if compare_raised:
        kind = type(got).__name__
        return Verdict(False, f"could not check your answer: is your {kind} of the form the exercise asks for?")
    return Verdict(False, verdict.message)


class Lab:
    """A notebook's exercises: run checks, remember outcomes and attempts, print the progress summary."""

    def __init__(self, title: str):
        self.title = title
        self.results: dict[str, CheckResult] = {}
        self.attempts: dict[str, int] = {}  # runs that got past "not attempted"
        self.failures: dict[str, int] = {}  # of those, the ones that failed or raised
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
        hint: str | Iterable[str] = (),
        predict: bool = False,
        explanation: str = "",
        guard: Iterable[str | tuple] = (),
    ) -> CheckResult:
        """Check one exercise. ``attempt`` is a zero-argument callable calling the learner's code.

        ``expected`` may be a value or a zero-argument callable computing the reference lazily
        (before any guard is installed). Give ``verify`` instead of ``expected``/``compare`` to
        check a property of the answer. ``hint``: one string or a list, weakest first.
        ``predict``: the answer is a prediction, so a miss never shows the expected value.
        ``guard``: references (``"package.module:attr"``) the learner's code may not call.
        """
        hints = (hint,) if isinstance(hint, str) else tuple(hint)
        hints = tuple(h for h in hints if h)
        outcome = self._evaluate(attempt, expected, compare, verify, predict, tuple(guard), learner_namespace())
        result = self._present(name, outcome, hints, predict, explanation)
        self.results[name] = result
        _enforce_strict(result)
        return result

    def _evaluate(self, attempt, expected, compare, verify, predict, guard, namespace) -> _Outcome:
        with guarded(guard, namespace):
            try:
                got = attempt()
            except NotImplementedError:
                return _Outcome(NOT_ATTEMPTED, "replace the `raise NotImplementedError` with your code")
            except ReferenceCalled as exc:
                return _Outcome(FAILED, _reference_message(exc))
            except Exception as exc:  # the learner's code raised: show their line, not ours
                where = _learner_frame(exc)
                return _Outcome(RAISED, f"{type(exc).__name__}: {exc}" + (f"  (at {where})" if where else ""))
        exp, has_exp = None, False
        if verify is None:  # the reference runs outside the guard, after the attempt (labs skip it)
            try:
                exp, has_exp = (expected() if callable(expected) else expected), True
            except Exception as exc:  # a broken reference must not look like the learner's fault
                return _Outcome(RAISED, f"the check itself could not compute the expected value "
                                        f"({type(exc).__name__}: {exc}); please report it")  # fmt: skip
        compare_raised = False
        with guarded(guard, namespace):
            try:
                verdict = as_verdict(verify(got) if verify is not None else (compare or equal)(exp, got))
            except NotImplementedError:
                return _Outcome(NOT_ATTEMPTED, "replace the `raise NotImplementedError` with your code")
            except ReferenceCalled as exc:
                verdict = Verdict(False, _reference_message(exc))
            except AssertionError as exc:
                verdict = Verdict(False, str(exc))
            except Exception as exc:  # the answer has the wrong shape for the comparator
                verdict = Verdict(False, f"could not compare the answer ({type(exc).__name__}: {exc})")
                compare_raised = True
        if predict and not verdict.ok:
            verdict = _prediction_verdict(verdict, exp, has_exp, got, compare_raised)
        return _Outcome(PASSED if verdict.ok else FAILED, verdict.message, exp, has_exp, short_repr(got), verdict.diff)

    def _present(self, name: str, out: _Outcome, hints: tuple, predict: bool, explanation: str) -> CheckResult:
        """Apply the teaching rules: attempts, hints earned, expected shown or not."""
        if out.status != NOT_ATTEMPTED:
            self.attempts[name] = self.attempts.get(name, 0) + 1
        if out.status in (FAILED, RAISED):
            self.failures[name] = self.failures.get(name, 0) + 1
        fails = self.failures.get(name, 0)
        teacher = instructor_mode()
        shown = hints if teacher else (hints[:fails] if out.status in (FAILED, RAISED) else ())
        show_expected = out.has_expected and (teacher or (not predict and out.status == FAILED))
        offer = explanation if (teacher or (predict and out.status == FAILED and fails >= EXPLANATION_AFTER)) else ""
        return CheckResult(
            name,
            out.status,
            out.message,
            short_repr(out.expected) if show_expected else "",
            out.got if (out.status == FAILED or teacher) else "",
            out.diff if not predict or teacher else "",
            tuple(shown),
            offer,
            self.attempts.get(name, 0),
            0 if teacher or out.status not in (FAILED, RAISED) else max(0, len(hints) - len(shown)),
        )

    def summary(self) -> Summary:
        return Summary(self.title, tuple(self.results.values()), dict(self.attempts))


@dataclasses.dataclass(frozen=True)
class Summary:
    title: str
    results: tuple[CheckResult, ...]
    attempts: dict = dataclasses.field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        out = {PASSED: 0, FAILED: 0, NOT_ATTEMPTED: 0, RAISED: 0}
        for r in self.results:
            out[r.status] += 1
        return out

    def _tries(self, r: CheckResult) -> str:
        n = self.attempts.get(r.name, 0)
        return f"{n} attempt{'s' if n != 1 else ''}"

    def __str__(self) -> str:
        c = self.counts()
        head = f"{self.title}: {c[PASSED]}/{len(self.results)} passed"
        rest = ", ".join(f"{v} {k}" for k, v in c.items() if k != PASSED and v)
        lines = [head + (f" ({rest})" if rest else "")]
        lines += [f"  [{_MARKS[r.status]:<5}] {r.status:<13} {self._tries(r):<11} {r.name}" for r in self.results]
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
            f"<tr><td>{badge(r.status)}</td><td>{html.escape(r.name)}</td><td>{r.status}</td>"
            f"<td>{self._tries(r)}</td></tr>"
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
