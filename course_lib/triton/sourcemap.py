"""Which Python line each IR line came from, read from the location info every stage keeps.

Teaches: MLIR locations (``loc("file.py":37:12)``, named and fused locs, ``#locN`` aliases) in
TTIR/TTGIR, ``!DILocation(line: 37, ...)`` debug metadata in LLVM IR, ``.loc 1 37 12`` in PTX
(``third_party/nvidia/backend/compiler.py`` keeps line info on), and nvdisasm's
``//## File "...", line 37`` comments in SASS. Triton's code generator
(``python/triton/compiler/code_generator.py``) attaches the location of the Python AST node to
every op it builds; passes carry it along.
"""

from __future__ import annotations

import re

from course_lib.triton.compile import Stages

_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_FILE_LOC = re.compile(r'"[^"]*\.py":(\d+):\d+')
_REF = re.compile(r"#loc\d*")
_LOC_USE = re.compile(r" loc\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")


def _mlir_map(raw: str) -> list[tuple[str, int | None]]:
    defs = {}
    for line in raw.splitlines():
        m = _LOC_DEF.match(line)
        if m:
            defs[m.group(1)] = m.group(2)

    def resolve(body: str, depth: int = 0) -> int | None:
        m = _FILE_LOC.search(body)
        if m:
            return int(m.group(1))
        if depth > 20:
            return None
        for ref in _REF.findall(body):
            if ref in defs:
                got = resolve(defs[ref], depth + 1)
                if got is not None:
                    return got
        return None

    out = []
    for line in raw.splitlines():
        if line.startswith("#loc"):
            continue
        at = line.rfind(" loc(")
        py = resolve(line[at:]) if at >= 0 else None
        out.append((_LOC_USE.sub("", line).rstrip(), py))
    return out


def _llir_map(raw: str) -> list[tuple[str, int | None]]:
    lines = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(!\d+) = !DILocation\(line: (\d+)", raw, re.M)}
    out = []
    for line in raw.splitlines():
        if line.startswith("!"):
            continue
        m = re.search(r"!dbg (!\d+)", line)
        out.append((re.sub(r",? !dbg !\d+", "", line), lines.get(m.group(1)) if m else None))
    return out


def _marker_map(raw: str, marker: re.Pattern, skip) -> list[tuple[str, int | None]]:
    out, current = [], None
    for line in raw.splitlines():
        m = marker.search(line)
        if m:
            current = int(m.group(1))
            continue
        if skip(line):
            continue
        out.append((line, current))
    return out


def line_map(stages: Stages, stage: str) -> list[tuple[str, int | None]]:
    """``[(IR line, Python line or None), ...]`` for one stage of a compile."""
    raw = stages.raw[stage]
    if stage in ("ttir", "ttgir"):
        return [(t, p) for t, p in _mlir_map(raw) if t.strip()]
    if stage == "llir":
        return [(t, p) for t, p in _llir_map(raw) if t.strip()]
    if stage == "ptx":
        raw = raw.split(".section\t.debug")[0].split(".section .debug")[0]
        skip = lambda s: not s.strip() or s.strip().startswith((".file", "$L__tmp"))  # noqa: E731
        return _marker_map(raw, re.compile(r"^\s*\.loc\s+\d+\s+(\d+)\s+\d+"), skip)
    if stage == "sass":
        return _marker_map(raw, re.compile(r'//## File ".*", line (\d+)'), lambda s: not s.strip())
    if stage == "amdgcn":
        skip = lambda s: not s.strip() or s.strip().startswith((".file", ".Ltmp"))  # noqa: E731
        return _marker_map(raw, re.compile(r"^\s*\.loc\s+\d+\s+(\d+)\s+\d+"), skip)
    raise ValueError(f"no line map for stage {stage!r}")


def lines_for(stages: Stages, stage: str, py_line: int) -> list[str]:
    """The IR lines of ``stage`` that came from Python line ``py_line`` (file line number)."""
    return [t for t, p in line_map(stages, stage) if p == py_line]


def annotated(stages: Stages, stage: str) -> str:
    """The stage's text with each line prefixed by its Python line relative to the ``def``
    (``L3 |``), or blank where no location is known."""
    rows = []
    for text, py in line_map(stages, stage):
        tag = f"L{py - stages.first_line + 1:<3}" if py is not None and py >= stages.first_line else "    "
        rows.append(f"{tag}| {text}")
    return "\n".join(rows) + "\n"


def numbered_source(stages: Stages) -> str:
    return "\n".join(f"L{i + 1:<3}| {ln}" for i, ln in enumerate(stages.source.splitlines())) + "\n"


def side_by_side(stages: Stages, stage: str = "ttgir"):
    """``viz.panes``: the numbered Python source beside the stage annotated with source lines."""
    from course_lib import viz

    lang = {"llir": "llvm"}.get(stage, stage)
    return viz.panes([("Python (line numbers from the def)", numbered_source(stages), "python"),
                      (f"{stage.upper()} (Lnn = Python line)", annotated(stages, stage), lang)])  # fmt: skip
