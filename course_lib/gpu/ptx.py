"""Parse the PTX that Triton emits into plain instruction records.

Teaches: what a PTX kernel is made of. The real producer is LLVM's NVPTX back end
(``llvm/lib/Target/NVPTX/NVPTXAsmPrinter.cpp``), reached from Triton through
``third_party/nvidia/backend/compiler.py`` (``make_ptx``); the real consumer is ``ptxas``, which
turns PTX into SASS. Position in the pipeline: PTX text -> :class:`PtxKernel` -> the SIMT
simulator in :mod:`course_lib.gpu.simt`.

Simplified: only the ``.entry`` function named by the caller is read; debug sections, ``.loc``
and ``.file`` lines are dropped; no ``.func`` calls. An instruction is
``[@[!]%p] opcode.mod.mod operand, operand, ...;``; operands stay text plus a kind tag.

Reference: NVIDIA, "Parallel Thread Execution ISA", chapters 4 (syntax) and 9 (instructions).
"""

from __future__ import annotations

import dataclasses
import re

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_LABEL = re.compile(r"^\s*([$A-Za-z_][\w$]*):")
_REGDECL = re.compile(r"\.reg\s+\.(\w+)\s+(%\w+)<(\d+)>")
_SHARED = re.compile(r"\.shared\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(\w+)\[(\d*)\]")


@dataclasses.dataclass(frozen=True)
class Operand:
    """One operand. ``kind`` is reg | imm | fimm | mem | vec | label | sym | sreg."""

    kind: str
    text: str
    parts: tuple = ()  # vec: member registers; mem: (base, offset)

    def __str__(self) -> str:
        return self.text


@dataclasses.dataclass(frozen=True)
class Instr:
    """``[@guard] op.mods operands``; ``index`` is its position (the simulator's pc)."""

    index: int
    op: str
    mods: tuple
    operands: tuple
    guard: str | None = None
    guard_negated: bool = False
    text: str = ""

    @property
    def opcode(self) -> str:
        return ".".join((self.op,) + self.mods)

    def __str__(self) -> str:
        return self.text


@dataclasses.dataclass
class PtxKernel:
    """One ``.entry``: parameters in order, register declarations, shared symbols, code, labels."""

    name: str
    params: list  # [(name, ptx_type)]
    regs: dict  # prefix -> (ptx_type, count)
    shared: dict  # symbol -> (offset, size)  (size 0: dynamic, "extern" shared)
    instrs: list
    labels: dict  # label -> instruction index
    version: str = ""
    target: str = ""
    reqntid: int | None = None

    def __str__(self) -> str:
        lines = [f".entry {self.name}  ({len(self.params)} params, {len(self.instrs)} instructions)"]
        at = {v: k for k, v in self.labels.items()}
        for ins in self.instrs:
            if ins.index in at:
                lines.append(f"{at[ins.index]}:")
            lines.append(f"  {ins.index:3d}  {ins.text}")
        return "\n".join(lines)


def kernel_names(ptx: str) -> list[str]:
    """Names of the ``.entry`` functions in a PTX module, in order."""
    return re.findall(r"\.entry\s+(\w+)", ptx)


def _split_top(text: str) -> list[str]:
    """Split operands at commas that are not inside ``{}`` or ``[]``."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_operand(text: str) -> Operand:
    """Classify one operand's text."""
    t = text.strip()
    if t.startswith("{"):
        return Operand("vec", t, tuple(p.strip() for p in t.strip("{} ").split(",")))
    if t.startswith("["):
        inner = t.strip("[] ").replace(" ", "")
        m = re.match(r"^([^+\-]+)(?:([+\-])(\w+))?$", inner)
        base, sign, off = m.group(1), m.group(2), m.group(3)
        offset = int(off, 0) * (-1 if sign == "-" else 1) if off else 0
        return Operand("mem", t, (base, offset))
    if re.match(r"^%(tid|ntid|ctaid|nctaid)\.[xyz]$|^%(laneid|warpid|nwarpid|smid)$", t):
        return Operand("sreg", t)
    if t.startswith("%") or t == "_":
        return Operand("reg", t)
    if re.match(r"^0[fFdD][0-9a-fA-F]+$", t):
        return Operand("fimm", t)
    if re.match(r"^-?(0[xX][0-9a-fA-F]+|\d+)U?$", t):
        return Operand("imm", t.rstrip("U"))
    if t.startswith("$"):
        return Operand("label", t)
    return Operand("sym", t)


def _entry_text(ptx: str, name: str) -> tuple[str, str]:
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise ValueError(f"no .entry {name!r} in this PTX (it has: {', '.join(kernel_names(ptx))})")
    start = ptx.index("{", m.end())
    depth, i = 0, start
    while True:  # braces inside the body are only vector operands, which balance
        if ptx[i] == "{":
            depth += 1
        elif ptx[i] == "}":
            depth -= 1
            if depth == 0:
                break
        i += 1
    head = ptx[m.end() : start]
    return m.group(1), head + "\n" + ptx[start + 1 : i]


def parse_ptx(ptx: str, name: str | None = None) -> PtxKernel:
    """Parse the ``.entry`` called ``name`` (default: the first) of a PTX module."""
    ptx = _COMMENT.sub("", ptx)
    name = name or kernel_names(ptx)[0]
    params_text, body = _entry_text(ptx, name)
    params = [(p.split()[-1], re.search(r"\.param\s+\.(\w+)", p).group(1)) for p in params_text.split(",") if p.strip()]
    shared, offset = {}, 0
    module_level = ptx[: ptx.index(".entry")]
    for align, _ty, sym, size in _SHARED.findall(module_level + body):
        align = int(align or 4)
        offset = (offset + align - 1) // align * align
        shared[sym] = (offset, int(size or 0))
        offset += int(size or 0)
    regs = {p: (ty, int(n)) for ty, p, n in _REGDECL.findall(body)}
    reqntid = re.search(r"\.reqntid\s+(\d+)", body)
    body = "\n".join(ln for ln in body.splitlines() if not re.match(r"\s*\.(loc|file)\b", ln))
    instrs, labels = [], {}
    for stmt in body.split(";"):
        kept = []
        for line in stmt.split("\n"):
            while (lab := _LABEL.match(line)) is not None:
                labels[lab.group(1)] = len(instrs)
                line = line[lab.end() :]
            kept.append(line)
        text = " ".join(" ".join(kept).split())
        if not text or text.startswith(".") or text in ("{", "}"):
            continue
        instrs.append(_parse_instr(len(instrs), text))
    version = re.search(r"\.version\s+([\d.]+)", ptx)
    target = re.search(r"\.target\s+(\w+)", ptx)
    return PtxKernel(
        name, params, regs, shared, instrs, labels,
        version.group(1) if version else "", target.group(1) if target else "",
        int(reqntid.group(1)) if reqntid else None,
    )  # fmt: skip


def _parse_instr(index: int, text: str) -> Instr:
    guard, neg = None, False
    rest = text
    if rest.startswith("@"):
        g, rest = rest.split(None, 1)
        neg = g.startswith("@!")
        guard = g.lstrip("@!")
    parts = rest.split(None, 1)
    opcode = parts[0]
    ops = tuple(parse_operand(o) for o in _split_top(parts[1])) if len(parts) > 1 else ()
    op, *mods = opcode.split(".")
    return Instr(index, op, tuple(mods), ops, guard, neg, text)
