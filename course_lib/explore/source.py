"""The Python end of every chain: the function's source lines and its bytecode.

Python line ids are ``py:<line in the file>``, so a Dynamo ``stack_trace`` ("File ..., line 37"),
a bytecode position and a Triton ``loc`` all name the same line. Shown numbered from the ``def``.
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
import re

from course_lib.explore.model import Line, Pane


@dataclasses.dataclass
class Source:
    name: str
    filename: str
    first_line: int
    lines: list[str]

    def id(self, file_line: int) -> str | None:
        """``py:<line>`` when the line is inside the function, else None."""
        inside = self.first_line <= file_line < self.first_line + len(self.lines)
        return f"py:{file_line}" if inside else None

    @property
    def def_id(self) -> str:
        return f"py:{self.first_line}"


def source_of(fn) -> Source:
    """The function's source; a clear error for a builtin or a lambda typed at the prompt."""
    target = inspect.unwrap(getattr(fn, "forward", fn) if not inspect.isfunction(fn) else fn)
    try:
        lines, first = inspect.getsourcelines(target)
        filename = inspect.getsourcefile(target) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise ValueError(f"explore needs a Python function whose source can be read; {fn!r} has none ({exc})") from None
    name = getattr(target, "__qualname__", getattr(target, "__name__", "fn"))
    return Source(name, filename, first, [ln.rstrip("\n") for ln in lines])


def python_pane(src: Source) -> Pane:
    lines = [Line(f"py:{src.first_line + i}", f"{i + 1:>3}  {text}") for i, text in enumerate(src.lines)]
    return Pane("python", "both", "python", f"Python: {src.name}", lines, lang="python")


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def line_of_stack_trace(stack_trace: str | None, src: Source) -> str | None:
    """The innermost frame of a ``stack_trace`` that lies in the function's file and body."""
    if not stack_trace:
        return None
    hits = [(f, int(n)) for f, n in _FRAME.findall(stack_trace)]
    for f, n in reversed(hits):
        if f == src.filename and src.id(n):
            return src.id(n)
    return None


def bytecode_lines(code, src: Source, prefix: str) -> list[Line]:
    """One line per instruction; its source is the instruction's line (``co_positions``): exact."""
    out = []
    for i, ins in enumerate(dis.get_instructions(code)):
        line = ins.positions.lineno if ins.positions else None
        sid = src.id(line) if line else None
        arg = f" {ins.argrepr}" if ins.argrepr else ""
        out.append(Line(f"{prefix}:{i}", f"{ins.offset:>4} {ins.opname}{arg}", (sid,) if sid else ()))
    return out
