"""Why graphs left the course pipeline: each reason logged once, all of them in a report
(teaches ``torch._dynamo.utils.counters`` and the "graph break" / fallback summaries that
``TORCH_LOGS`` and ``torch._dynamo.explain`` print).

Position: called by :mod:`course_lib.inductor.compile_fx` whenever a graph goes to torch's AOT
Autograd ("aot-fallback") or runs in eager ("fallback"); read by the learner with
``course_lib.inductor.fallback_report()``.

The log is per process, like torch's counters: a compiled model may be called from anywhere,
and the question "what did not compile since I started?" has one answer per process.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter

log = logging.getLogger("course_lib.inductor")


@dataclasses.dataclass
class FallbackReport:
    """``(kind, what happened, reason) -> how many graphs``; prints as a table."""

    counts: Counter = dataclasses.field(default_factory=Counter)

    def note(self, kind: str, what: str, reason: str) -> None:
        key = (kind, what, reason)
        if key not in self.counts:  # log a reason the first time only
            log.warning("course_lib.inductor: %s (%s)", what, reason)
        self.counts[key] += 1

    def clear(self) -> None:
        self.counts.clear()

    def __bool__(self) -> bool:
        return bool(self.counts)

    def __str__(self) -> str:
        if not self.counts:
            return "course_lib fallbacks: none (every graph went through course_lib.aot and course_lib.inductor)"
        lines = [f"course_lib fallbacks: {sum(self.counts.values())} graph(s)"]
        for (kind, what, reason), n in sorted(self.counts.items()):
            lines.append(f"  {n:3d} x {kind:12s} {what}: {reason}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": str(self)}


REPORT = FallbackReport()


def fallback_report() -> FallbackReport:
    """Every fallback in this process so far (``print(course_lib.inductor.fallback_report())``)."""
    return REPORT
