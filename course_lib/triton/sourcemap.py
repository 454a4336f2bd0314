"""Which Python line each IR line came from, read from the location info every stage keeps.

Teaches: MLIR locations (``loc("file.py":37:12)``, named and fused locs, ``#locN`` aliases) in
TTIR/TTGIR, ``!DILocation(line: 37, ...)`` debug metadata in LLVM IR, ``.loc 1 37 12`` in PTX
(``third_party/nvidia/backend/compiler.py`` keeps line info on), and nvdisasm's
``//## File "...", line 37`` comments in SASS. Triton's code generator
(``python/triton/compiler/code_generator.py``) attaches the location of the Python AST node to
every op it builds; passes carry it along.

Two things make the raw locations lie, and both are undone here: code inlined from Triton's own
library (``tl.sum``'s combine function in ``standard.py``, philox in ``random.py``) carries that
file's line numbers, with the kernel's call further out in the inlining chain; and LLVM numbers
the lines of an inline-asm string from the call's line, so the ``ld.global`` on the 2nd line of
Triton's ``mov; ld.global`` asm claims the next Python line (ptxas copies that into SASS).
"""

from __future__ import annotations

import re

from course_lib.triton.compile import Stages

_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_FILE_LOC = re.compile(r'"([^"]*\.py)":(\d+):\d+|(#loc\d*)')
_LOC_USE = re.compile(r" loc\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")

Chain = list  # [(file basename, line), ...], innermost first: a line inside tl.sum, then the kernel's call


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


class _Picker:
    """Chooses, from a location chain, the line of the kernel's own source the instruction belongs to.

    Code inlined from ``triton/language/standard.py`` (``tl.sum``'s combine function) or from
    ``random.py`` (philox) carries *that* file's line, with the kernel's call site further out in
    the chain (MLIR ``callsite(callee at caller)``, LLVM ``inlinedAt``, PTX ``inlined_at``,
    ``nvdisasm -gi``'s ``inlined at``). We take the innermost entry that lies in the kernel's own
    lines; failing that, the innermost in the kernel's file (a ``@triton.jit`` helper beside it);
    else the line is unknown (never a line number of another file).
    """

    def __init__(self, stages: Stages):
        self.file = _kernel_file(stages)
        self.lo, self.hi = stages.first_line, stages.first_line + len(stages.source.splitlines())

    def __call__(self, chain: Chain) -> int | None:
        mine = [ln for f, ln in chain if ln > 0 and (self.file is None or _base(f) == self.file)]
        inside = [ln for ln in mine if self.lo <= ln < self.hi]
        return (inside or mine or [None])[0]


def _kernel_file(stages: Stages) -> str | None:
    """Basename of the kernel's file: the module location ``#loc = loc("file.py":line:col)``."""
    raw = stages.raw.get("ttir", "")
    m = re.search(r'^#loc = loc\("([^"]+)":', raw, re.M) or re.search(r'loc\("([^"]+\.py)":', raw)
    return _base(m.group(1)) if m else None


def _mlir_map(raw: str, pick: _Picker) -> list[tuple[str, int | None]]:
    defs = {}
    for line in raw.splitlines():
        m = _LOC_DEF.match(line)
        if m:
            defs[m.group(1)] = m.group(2)

    def chain(body: str, depth: int = 0) -> Chain:
        out = []
        for m in _FILE_LOC.finditer(body):  # text order: callsite(callee at caller) lists the callee first
            if m.group(1):
                out.append((m.group(1), int(m.group(2))))
            elif m.group(3) in defs and depth < 20:
                out += chain(defs[m.group(3)], depth + 1)
        return out

    out = []
    for line in raw.splitlines():
        if line.startswith("#loc"):
            continue
        at = line.rfind(" loc(")
        py = pick(chain(line[at:])) if at >= 0 else None
        out.append((_LOC_USE.sub("", line).rstrip(), py))
    return out


_DI = re.compile(r"^(!\d+) = (?:distinct )?!DI(\w+)\((.*)\)\s*$", re.M)
_DI_FIELD = re.compile(r'(\w+): (!\d+|"[^"]*"|-?\d+)')


def _llir_map(raw: str, pick: _Picker) -> list[tuple[str, int | None]]:
    nodes = {m.group(1): (m.group(2), dict(_DI_FIELD.findall(m.group(3)))) for m in _DI.finditer(raw)}

    def file_of(ref: str | None, depth: int = 0) -> str:
        kind, f = nodes.get(ref, ("", {}))
        if kind == "File":
            return f.get("filename", "").strip('"')
        return file_of(f.get("file") or f.get("scope"), depth + 1) if depth < 20 and f else ""

    def chain(ref: str | None) -> Chain:
        out = []
        while ref in nodes and nodes[ref][0] == "Location" and len(out) < 20:
            f = nodes[ref][1]
            out.append((file_of(f.get("scope")), int(f.get("line", 0))))
            ref = f.get("inlinedAt")
        return out

    out = []
    for line in raw.splitlines():
        if line.startswith("!"):
            continue
        m = re.search(r"!dbg (!\d+)", line)
        out.append((re.sub(r",? !dbg !\d+", "", line), pick(chain(m.group(1))) if m else None))
    return out


_DOT_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
_DOT_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')


def _dot_loc_map(raw: str, skip, pick: _Picker) -> list[tuple[str, int | None]]:
    """PTX / AMDGCN: ``.file N "name"`` and ``.loc file line col[, ..., inlined_at file line col]``.

    An ``inlined_at`` names only the next link; the link after it is read from an earlier
    ``.loc`` of that position (inlined code's positions repeat, so the table fills as we go).
    """
    files = {m.group(1): m.group(2) for m in (_DOT_FILE.match(ln) for ln in raw.splitlines()) if m}
    outer: dict = {}
    out, current = [], None
    asm_locs = None  # inside "// begin inline asm": how many .loc lines seen so far
    for line in raw.splitlines():
        if "begin inline asm" in line:
            asm_locs = 0
        elif "end inline asm" in line:
            asm_locs = None
        m = _DOT_LOC.match(line)
        if m and asm_locs is not None:
            # LLVM numbers the lines of an inline-asm string from the call's line: the 2nd line of
            # Triton's "mov.u32 $0, 0x0; ld.global ..." gets line + 1. Only the first .loc is real.
            asm_locs += 1
            if asm_locs > 1:
                continue
        if m:
            here = m.group(1, 2, 3)
            links = [here]
            if m.group(4):
                outer[here] = m.group(4, 5, 6)
            while links[-1] in outer and len(links) < 20:
                links.append(outer[links[-1]])
            current = pick([(files.get(f, ""), int(ln)) for f, ln, _ in links])
            continue
        if skip(line) or _DOT_FILE.match(line):
            continue
        out.append((line, current))
    return out


_SASS_LOC = re.compile(r"//## File (.*)$")
_SASS_LINK = re.compile(r'"([^"]*)", line (\d+)')


_PTX_MEM = re.compile(r"^\s*(?:@!?%p\w*\s+)?(?:ld|st|atom|red|cp\.async)\.")
_SASS_MEM = re.compile(r"\*/\s+(?:@!?U?P\w+\s+)?(?:LDG|STG|LDS|STS|LDGSTS|ATOMG|ATOMS|ATOM|RED|REDG)\b")


def _asm_shifted_lines(ptx: str, pick: _Picker) -> dict[int, int]:
    """For SASS memory instructions: kernel line ptxas reports -> the line of the Python call.

    ptxas builds SASS line info from the PTX ``.loc`` lines, including the shifted ones inside
    inline asm (see :func:`_dot_loc_map`): Triton's ``mov.u32 $0, 0x0; ld.global ...`` puts the
    load on the call's line + 1. A SASS load/store/atomic on such a shifted line L+1 belongs to
    line L when no PTX memory instruction really sits on L+1 and only one call shifts onto it
    (SASS has no columns to tell two apart, so ambiguous lines stay as ptxas wrote them).
    """
    files = {m.group(1): m.group(2) for m in (_DOT_FILE.match(ln) for ln in ptx.splitlines()) if m}
    shifted: dict[int, set] = {}
    real_mem: set = set()
    first = loc = None  # first .loc of the current inline-asm block (0: none yet); the .loc in force
    for line in ptx.splitlines():
        if "begin inline asm" in line:
            first = 0
        elif "end inline asm" in line:
            first = None
        m = _DOT_LOC.match(line)
        if m:
            mine = pick.file is None or _base(files.get(m.group(1), "")) == pick.file
            ln = int(m.group(2)) if mine else None
            if first == 0:
                first = ln or -1
            elif first and ln and ln != first:
                shifted.setdefault(ln, set()).add(first)
                ln = ("shifted", ln)
            loc = ln
            continue
        if _PTX_MEM.match(line) and isinstance(loc, int):
            real_mem.add(loc)
    return {ln: next(iter(f)) for ln, f in shifted.items() if len(f) == 1 and ln not in real_mem and -1 not in f}


def _sass_map(raw: str, pick: _Picker, ptx: str = "") -> list[tuple[str, int | None]]:
    """``nvdisasm -g`` writes ``//## File "f.py", line N``; ``-gi`` adds ``inlined at "g.py", line M``."""
    out, current = [], None
    fix = _asm_shifted_lines(ptx, pick) if ptx else {}
    for line in raw.splitlines():
        m = _SASS_LOC.search(line)
        if m:
            current = pick([(f, int(ln)) for f, ln in _SASS_LINK.findall(m.group(1))])
            continue
        if line.strip():
            out.append((line, fix.get(current, current) if _SASS_MEM.search(line) else current))
    return out


def line_map(stages: Stages, stage: str) -> list[tuple[str, int | None]]:
    """``[(IR line, Python line or None), ...]`` for one stage of a compile.

    The Python line is always a line of the kernel's own file (code inlined from Triton's
    library is attributed to the kernel line that called it); ``None`` where no such line is known.
    """
    raw = stages.raw[stage]
    pick = _Picker(stages)
    if stage in ("ttir", "ttgir"):
        return [(t, p) for t, p in _mlir_map(raw, pick) if t.strip()]
    if stage == "llir":
        return [(t, p) for t, p in _llir_map(raw, pick) if t.strip()]
    if stage == "ptx":
        raw = raw.split(".section\t.debug")[0].split(".section .debug")[0]
        skip = lambda s: not s.strip() or s.strip().startswith("$L__tmp")  # noqa: E731
        return _dot_loc_map(raw, skip, pick)
    if stage == "sass":
        return _sass_map(raw, pick, stages.raw.get("ptx", ""))
    if stage == "amdgcn":
        skip = lambda s: not s.strip() or s.strip().startswith(".Ltmp")  # noqa: E731
        return _dot_loc_map(raw, skip, pick)
    raise ValueError(f"no line map for stage {stage!r}; choose one of ttir, ttgir, llir, ptx, sass, amdgcn")


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
