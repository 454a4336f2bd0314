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
    line: int = 0  # line of the PTX text it came from (1-based; 0: unknown)

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


def _entry_text(ptx: str, name: str) -> tuple[str, str, int]:
    """(parameter list, body, line of the body's first character). The body keeps every newline
    of the original text, so a position in it gives back the PTX line number."""
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if not m:
        opened = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(", ptx)
        if opened:
            raise PtxSyntaxError(
                f"line {_line_of(ptx, opened.end())}: the parameter list of .entry {name} is not closed"
            )
        raise PtxSyntaxError(f"no .entry {name!r} in this PTX (it has: {', '.join(kernel_names(ptx)) or 'none'})")
    start = ptx.find("{", m.end())
    if start < 0:
        raise PtxSyntaxError(f"line {_line_of(ptx, m.end())}: .entry {name} has no body ('{{' expected)")
    depth, i = 0, start
    while True:  # braces inside the body are only vector operands, which balance
        if i >= len(ptx):
            raise PtxSyntaxError(f"line {_line_of(ptx, start)}: the body of .entry {name} opened here never closes")
        if ptx[i] == "{":
            depth += 1
        elif ptx[i] == "}":
            depth -= 1
            if depth == 0:
                break
        i += 1
    return m.group(1), ptx[m.end() : start] + " " + ptx[start + 1 : i], _line_of(ptx, m.end())


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


class PtxSyntaxError(ValueError):
    """PTX the parser cannot read; the message starts with ``line N, column C`` where known."""


def parse_ptx(ptx: str, name: str | None = None) -> PtxKernel:
    """Parse the ``.entry`` called ``name`` (default: the first) of a PTX module.

    Malformed text raises :class:`PtxSyntaxError` naming the line and column."""
    if not isinstance(ptx, str):
        raise TypeError(f"parse_ptx expects PTX text (str), got {type(ptx).__name__}")
    ptx = _COMMENT.sub(lambda c: "\n" * c.group(0).count("\n"), ptx)  # keep line numbers
    names = kernel_names(ptx)
    if not names and name is None:
        raise PtxSyntaxError("no .entry function in this PTX")
    name = name or names[0]
    params_text, body, first_line = _entry_text(ptx, name)
    params = []
    for p in params_text.split(","):
        if p.strip():
            ty = re.search(r"\.param\s+\.(\w+)", p)
            if ty is None:
                raise PtxSyntaxError(f"line {first_line}: parameter {p.strip()!r} of .entry {name} has no .param type")
            params.append((p.split()[-1], ty.group(1)))
    shared, offset = {}, 0
    module_level = ptx[: ptx.index(".entry")]
    for align, _ty, sym, size in _SHARED.findall(module_level + body):
        align = int(align or 4)
        offset = (offset + align - 1) // align * align
        shared[sym] = (offset, int(size or 0))
        offset += int(size or 0)
    regs = {p: (ty, int(n)) for ty, p, n in _REGDECL.findall(body)}
    reqntid = re.search(r"\.reqntid\s+(\d+)", body)
    body = "\n".join("" if re.match(r"\s*\.(loc|file)\b", ln) else ln for ln in body.splitlines())
    instrs, labels = [], {}
    line = first_line
    for stmt in body.split(";"):
        kept, at = [], None
        for k, text_line in enumerate(stmt.split("\n")):
            while (lab := _LABEL.match(text_line)) is not None:
                labels[lab.group(1)] = len(instrs)
                text_line = text_line[lab.end() :]
            if at is None and text_line.strip():
                at = line + k
            kept.append(text_line)
        line += stmt.count("\n")
        text = " ".join(" ".join(kept).split())
        while text[:1] in ("{", "}"):  # a scope block ``{ .reg .b16 t; cvt...; }`` (Triton's inline asm)
            text = text[1:].lstrip()
        if not text or text.startswith("."):
            continue
        instrs.append(_parse_instr(len(instrs), text, at or line))
    for ins in instrs:
        _check_instr(ins, labels, regs, _simple_regs(body))
    version = re.search(r"\.version\s+([\d.]+)", ptx)
    target = re.search(r"\.target\s+(\w+)", ptx)
    return PtxKernel(
        name, params, regs, shared, instrs, labels,
        version.group(1) if version else "", target.group(1) if target else "",
        int(reqntid.group(1)) if reqntid else None,
    )  # fmt: skip


#: How many operands an instruction takes (the ones Triton's PTX uses most); others are not checked.
ARITY = {
    "ld": (2, 3), "st": (2, 3), "mov": (2,), "cvt": (2, 3), "cvta": (2,), "neg": (2,), "abs": (2,), "not": (2,),
    "add": (3,), "sub": (3,), "mul": (3,), "div": (3,), "rem": (3,), "and": (3,), "or": (3,), "xor": (3,),
    "min": (3,), "max": (3,), "shl": (3,), "shr": (3,), "mad": (4,), "fma": (4,), "selp": (4,),
    "setp": (3, 4), "bra": (1,), "ret": (0,), "exit": (0,),
    **{op: (2,) for op in ("ex2", "lg2", "sqrt", "rsqrt", "rcp", "sin", "cos", "tanh")},
}  # fmt: skip
#: which operand is an address ``[...]``
ADDRESS_AT = {"ld": 1, "st": 0, "atom": 1, "red": 0}
#: register prefixes LLVM's NVPTX back end declares with ``.reg .type %r<N>``
_LLVM_REG = re.compile(r"^%(p|rs|r|rd|f|fd|h|hh|rq)(\d+)$")
_ANY_REG = re.compile(r"^%([A-Za-z_]+)(\d+)$")
_SPECIAL = {"clock", "envreg", "pm", "pm_", "globaltimer", "reserved_smem_offset_"}  # %clock64, %envreg3, ...


def _simple_regs(body: str) -> set:
    """Names declared one by one (``.reg .pred p;`` inside Triton's inline-asm blocks)."""
    names = set()
    for decl in re.findall(r"\.reg\s+\.\w+\s+([^;<]+);", body):
        names.update(n.strip() for n in decl.split(","))
    return names


def _registers(op: Operand) -> list[str]:
    if op.kind == "vec":
        return [p for p in op.parts if p.startswith("%")]
    if op.kind == "mem":
        return [op.parts[0]] if op.parts[0].startswith("%") else []
    return op.text.split("|") if op.kind == "reg" else []


def _check_instr(ins: Instr, labels: dict, regs: dict, simple: set) -> None:
    """Operand counts, address operands, labels and declared registers of one parsed instruction."""
    where = f"line {ins.line}: `{ins.text}`"
    if ins.op in ARITY and len(ins.operands) not in ARITY[ins.op]:
        want = " or ".join(str(n) for n in ARITY[ins.op])
        raise PtxSyntaxError(f"{where} has {len(ins.operands)} operand(s); {ins.op} takes {want}")
    at = ADDRESS_AT.get(ins.op)
    if at is not None and (len(ins.operands) <= at or ins.operands[at].kind != "mem"):
        raise PtxSyntaxError(f"{where}: operand {at + 1} of {ins.op} must be an address in brackets, [%rd1+8]")
    for op in ins.operands:
        if op.kind == "label" and op.text not in labels:
            raise PtxSyntaxError(f"{where} names label {op.text}, which is not defined")
        for name in _registers(op):
            m = _LLVM_REG.match(name) or _ANY_REG.match(name)
            if not m or name in simple or m.group(1) in _SPECIAL:
                continue
            prefix = "%" + m.group(1)
            if prefix not in regs or int(m.group(2)) >= regs[prefix][1]:
                raise PtxSyntaxError(f"{where} uses register {name}, which no .reg line declares")


def _parse_instr(index: int, text: str, line: int = 0) -> Instr:
    guard, neg = None, False
    rest = text
    if rest.startswith("@"):
        if " " not in rest:
            raise PtxSyntaxError(f"line {line}, column 1: guard {rest!r} is not followed by an instruction")
        g, rest = rest.split(None, 1)
        neg = g.startswith("@!")
        guard = g.lstrip("@!")
    parts = rest.split(None, 1)
    opcode = parts[0]
    if not re.match(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_:]+)*$", opcode):
        raise PtxSyntaxError(f"line {line}, column 1: {opcode!r} is not a PTX opcode (in `{text}`)")
    try:
        ops = tuple(parse_operand(o) for o in _split_top(parts[1])) if len(parts) > 1 else ()
    except (AttributeError, ValueError) as exc:
        raise PtxSyntaxError(f"line {line}: cannot read the operands of `{text}` ({exc})") from None
    op, *mods = opcode.split(".")
    return Instr(index, op, tuple(mods), ops, guard, neg, text, line)
