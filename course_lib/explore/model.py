"""The explorer's data: panes of lines, each line naming the lines it came from.

Provenance is stored one way only, upstream ("this PTX line came from that Triton line"); the
reverse direction ("what did this FX node become") is the same edges read backwards. A line id
is ``<pane key>:<local name>`` (``real.fx0:gelu``, ``course.ptx:k0:41``); Python lines are
``py:<file line>``, shared by both sides.

Each edge says whether it is *exact* (a recorded fact: Dynamo's ``stack_trace``, torch's
``from_node``, Inductor's kernel origins, Triton's ``loc``) or *approximate* (a line of a fused
kernel linked to every node the kernel fused, a backward node linked through the forward nodes it
reads). :meth:`Exploration.upstream` and :meth:`Exploration.downstream` walk the edges
transitively; the HTML page does the same walk in JavaScript.
"""

from __future__ import annotations

import collections
import dataclasses


@dataclasses.dataclass
class Line:
    """One line of one pane and the upstream lines it came from."""

    id: str
    text: str
    sources: tuple[str, ...] = ()
    exact: bool = True  # False: the edges to ``sources`` are an approximation (see the module doc)
    tag: str = ""  # "saved" (a tensor the forward saves for the backward), "kernel", "guard", ...
    via: str = ""  # "data": no recorded origin, linked to the values it reads (walked upstream only)


@dataclasses.dataclass
class Pane:
    """One stage on one side: ``side`` is "real", "course" or "both" (the Python source)."""

    key: str
    side: str
    stage: str
    title: str
    lines: list[Line]
    lang: str = "text"
    note: str = ""


@dataclasses.dataclass
class Exploration:
    """Every stage of one function, both sides, with provenance. Prints and renders itself."""

    name: str
    panes: list[Pane]
    summary: list[tuple[str, str, str]]  # (stage, course, real)
    notes: list[str] = dataclasses.field(default_factory=list)
    first_line: int = 1  # file line of the ``def``: python ids are file lines, shown relative to it

    def __post_init__(self):
        self._by_id = {ln.id: ln for p in self.panes for ln in p.lines}
        down = collections.defaultdict(list)
        for ln in self._by_id.values():
            if ln.via == "data":  # reading a value is not being made from it: not a downstream edge
                continue
            for s in ln.sources:
                down[s].append(ln.id)
        self._down = dict(down)

    # ---------------------------------------------------------------- look-up

    def pane(self, key: str) -> Pane:
        for p in self.panes:
            if p.key == key:
                return p
        raise KeyError(f"no pane {key!r}; panes: {', '.join(p.key for p in self.panes)}")

    def panes_of(self, side: str, stage: str) -> list[Pane]:
        return [p for p in self.panes if p.side == side and p.stage == stage]

    def line(self, line_id: str) -> Line:
        if line_id not in self._by_id:
            raise KeyError(f"no line {line_id!r} in this exploration")
        return self._by_id[line_id]

    def _walk(self, start: str, step) -> list[str]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in step(todo.pop()):
                if nxt not in seen and nxt in self._by_id:
                    seen.add(nxt)
                    todo.append(nxt)
        seen.discard(start)
        return sorted(seen)

    def upstream(self, line_id: str) -> list[str]:
        """Every line ``line_id`` came from, transitively."""
        return self._walk(line_id, lambda i: self._by_id[i].sources if i in self._by_id else ())

    def downstream(self, line_id: str) -> list[str]:
        """Every line that came from ``line_id``, transitively."""
        return self._walk(line_id, lambda i: self._down.get(i, ()))

    def python_lines(self, line_id: str) -> list[int]:
        """The Python lines (numbered from 1 at the ``def``) a line traces back to."""
        ups = [line_id, *self.upstream(line_id)]
        return sorted({int(i[3:]) - self.first_line + 1 for i in ups if i.startswith("py:")})

    def ptx_lines(self, side: str = "course") -> list[Line]:
        return [ln for p in self.panes_of(side, "ptx") for ln in p.lines]

    def exact_share(self, pane_key: str) -> float:
        lines = [ln for ln in self.pane(pane_key).lines if ln.sources]
        return sum(ln.exact for ln in lines) / len(lines) if lines else 1.0

    # ---------------------------------------------------------------- display

    def __str__(self) -> str:
        out = [f"explore({self.name}): {len(self.panes)} panes"]
        for stage, course, real in self.summary:
            out.append(f"  {stage:<22} course: {course:<34} real: {real}")
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)

    def html(self) -> str:
        """The self-contained page (one file, no server, no network)."""
        from course_lib.explore.page import render

        return render(self)

    def _repr_html_(self) -> str:
        from course_lib.explore.page import inline

        return inline(self)

    def show(self, *stages: str, height: int = 720):
        """The inline page with only the panes of ``stages`` open (``ex.show("fx", "guards")``)."""
        from course_lib.explore.page import inline

        return _Html(inline(self, height, stages or None))

    def save(self, path) -> str:
        import pathlib

        pathlib.Path(path).write_text(self.html(), encoding="utf-8")
        return str(path)


@dataclasses.dataclass
class _Html:
    """An HTML snippet a notebook displays (``_repr_html_``); prints as one line of text."""

    html: str

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return "<stack explorer page: open in JupyterLab to click through it>"
