"""Parse the PTX that Triton emits into plain instruction records.

Teaches: what a PTX kernel is made of. The real producer is LLVM's NVPTX back end
(``llvm/lib/Target/NVPTX/NVPTXAsmPrinter.cpp``), reached from Triton through
``third_party/nvidia/backend/compiler.py`` (``make_ptx``); the real consumer is ``ptxas``, which
turns PTX into SASS. Position in the pipeline: PTX text -> :class:`PtxKernel` -> the SIMT
simulator in :mod:`course_lib.gpu.simt`.

Simplified: only the ``.entry`` function named by the caller is read; debug sections, ``.loc``
and ``.file`` lines are dropped; no ``.func`` calls. An instruction is
``[@[!]%p] opcode.mod.mod operand, operand, ...;``; operands stay text plus a kind tag.

Checked like ptxas's front end (section "the rules"): each opcode family in :data:`SPECS` lists
its types, modifiers, required modifiers and one letter per operand (destination, source, wide,
predicate, address...), from which operand counts, register widths and kinds against the type
(a ``.b32`` register holds any 32-bit value; ld/st/cvt may use a wider one), constants, vector
widths and state spaces follow. Opcodes with long, varied operand lists (wgmma, cp.async.bulk,
mbarrier, atom...) are in :data:`LOOSE_OPS`: their modifiers, types and registers are checked, most
operand counts are not. bench/bench_ptx_parser.py measures the agreement with ptxas itself.

Reference: NVIDIA, "Parallel Thread Execution ISA", chapters 4 (syntax) and 9 (instructions).
"""

from __future__ import annotations

import bisect
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
    """Classify one operand's text (its shape is checked later, by :func:`operand_error`)."""
    t = text.strip()
    if t.startswith("{"):
        return Operand("vec", t, tuple(p.strip() for p in t.strip("{} ").split(",")))
    if t.startswith("["):
        inner = t.strip("[] ").replace(" ", "")
        m = _ADDRESS.match(inner)
        if m is None:
            return Operand("mem", t, (inner, 0))
        terms = re.findall(r"([+-])(-?(?:0[xX][0-9a-fA-F]+|\d+))", m.group(2))
        offset = sum(int(num, 0) * (-1 if sign == "-" else 1) for sign, num in terms)
        return Operand("mem", t, (m.group(1), offset))
    if re.match(r"^%(tid|ntid|ctaid|nctaid|clusterid|nclusterid|cluster_ctaid|cluster_nctaid)\.[xyz]$", t) or (
        t[1:] in _SREG_BITS
    ):
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


#: ``[base]``, ``[base+8]``, ``[base+-16]``, ``[base+4+4]``; base: a register or a symbol (or a number: .local)
_ADDRESS = re.compile(r"^(%?[$\w.]+)((?:[+-]-?(?:0[xX][0-9a-fA-F]+|\d+))*)$")
#: special registers read with ``mov`` and their widths (``%tid.x`` and friends are 32-bit)
_SREG_BITS = {"laneid": 32, "warpid": 32, "nwarpid": 32, "smid": 32, "nsmid": 32, "gridid": 64, "lanemask_eq": 32,
              "lanemask_lt": 32, "lanemask_le": 32, "lanemask_gt": 32, "lanemask_ge": 32, "clock": 32,
              "clock64": 64, "globaltimer": 64, "globaltimer_lo": 32, "globaltimer_hi": 32,
              "dynamic_smem_size": 32, "total_smem_size": 32, "is_explicit_cluster": 1,
              "cluster_ctarank": 32, "cluster_nctarank": 32}  # fmt: skip


class PtxSyntaxError(ValueError):
    """PTX the parser cannot read; the message starts with ``line N, column C`` where known."""


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _col_of(text: str, pos: int) -> int:
    return pos - (text.rfind("\n", 0, pos) + 1) + 1


def _error_at(text: str, pos: int, what: str) -> PtxSyntaxError:
    return PtxSyntaxError(f"line {_line_of(text, pos)}, column {_col_of(text, pos)}: {what}")


def _entry_header(ptx: str, name: str) -> tuple[str, int, int]:
    """(parameter list, position of the body's ``{``, line of the parameter list's end)."""
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
    return m.group(1), start, _line_of(ptx, m.end())


@dataclasses.dataclass(frozen=True)
class _Stmt:
    """One ``;``-terminated statement of a body: its text and where it starts in the module."""

    text: str
    pos: int  # offset of ``text[0]`` in the module text


_ONLY_LABELS = re.compile(r"^(\s*[$A-Za-z_][\w$]*:)*\s*$")


def _statements(ptx: str, start: int, name: str) -> tuple[list[_Stmt], int]:
    """Split the body opened at ``start`` into statements; returns them and the closing ``}``'s position.

    A ``{`` where a statement would begin opens a scope (Triton's inline asm wraps its code in
    ``{ .reg .pred p; ... }``); a ``{`` after an opcode opens a vector operand, which must close
    before the ``;``. Brackets ``[...]`` must balance inside one statement too."""
    out: list[_Stmt] = []
    depth, cur, cur_pos, vec, bracket = 1, [], start + 1, -1, -1
    for i in range(start + 1, len(ptx)):
        ch = ptx[i]
        if ch in "{}" and _ONLY_LABELS.match("".join(cur)):  # no instruction begun: a scope brace
            depth += 1 if ch == "{" else -1
            if depth == 0:
                return out, i
            cur.append(" ")  # keeps ``cur`` aligned with the text: cur[k] is ptx[cur_pos + k]
            continue
        if ch == "{":
            if vec >= 0:
                raise _error_at(ptx, i, "'{' inside a vector operand that is already open")
            vec = i
        elif ch == "}":
            if vec < 0 and "\n" in _LABEL_PREFIX.sub("", "".join(cur).strip()).strip():  # a '}' closes the block
                lines = "".join(cur).rstrip().split("\n")
                while len(lines) > 1 and _ONLY_LABELS.match(lines[-1]):
                    lines.pop()  # labels between the instruction and the '}'
                end = cur_pos + len("\n".join(lines).rstrip())
                raise _error_at(ptx, end, "';' missing at the end of this instruction")
            if vec < 0:
                raise _error_at(ptx, i, "'}' with no '{' before it in this instruction")
            vec = -1
        elif ch == "[":
            if bracket >= 0:
                raise _error_at(ptx, i, "'[' inside an address that is already open")
            bracket = i
        elif ch == "]":
            if bracket < 0:
                raise _error_at(ptx, i, "']' with no '[' before it in this instruction")
            bracket = -1
        elif ch == ";":
            if vec >= 0:
                raise _error_at(ptx, vec, "the vector operand opened here is not closed ('}' missing before ';')")
            if bracket >= 0:
                raise _error_at(ptx, bracket, "the address opened here is not closed (']' missing before ';')")
            if not "".join(cur).strip():
                raise _error_at(ptx, i, "an empty statement: this ';' ends no instruction")
            out.append(_Stmt("".join(cur), cur_pos))
            cur, cur_pos = [], i + 1
            continue
        cur.append(ch)
    raise PtxSyntaxError(f"line {_line_of(ptx, start)}: the body of .entry {name} opened here never closes")


def _check_after_body(ptx: str, end: int, name: str) -> None:
    """After an .entry's closing brace only module-level directives may follow (.file, .section, .entry)."""
    rest = ptx[end + 1 :]
    m = re.search(r"\S", rest)
    if m and rest[m.start()] != ".":
        raise _error_at(
            ptx, end + 1 + m.start(), f"text after the end of .entry {name}'s body (a '}}' too many above?)"
        )


def _missing_semicolon(ptx: str, stmt: _Stmt) -> None:
    """An instruction whose ``;`` was forgotten swallows the next line: say so at the line that lacks it."""
    lines = stmt.text.split("\n")
    offset = stmt.pos
    for k in range(1, len(lines)):
        offset += len(lines[k - 1]) + 1
        nxt = _LABEL_PREFIX.sub("", lines[k]).strip()
        before = lines[:k]
        while len(before) > 1 and _ONLY_LABELS.match(before[-1]):
            before.pop()  # labels between the instruction and the next one
        prev = "\n".join(before)
        if nxt and _ONLY_LABELS.match(prev) is None and re.match(r"^(@!?%?\w|[a-z][a-z0-9_]*(\.\S+)?(\s|$)|\.)", nxt):
            end = stmt.pos + len(prev.rstrip())
            raise _error_at(ptx, end, "';' missing at the end of this instruction")


_LABEL_PREFIX = re.compile(r"^(\s*[$A-Za-z_][\w$]*:)+")
_VARIABLE = re.compile(r"\.(?:global|const|shared|local)\s+(?:\.[\w:]+\s+|\d+\s+)*([A-Za-z_$][\w$]*)\s*[\[;=]")
_DEBUG_LINE = re.compile(r"^[ \t]*\.(loc|file)\b[^\n]*", re.M)


def parse_ptx(ptx: str, name: str | None = None) -> PtxKernel:
    """Parse the ``.entry`` called ``name`` (default: the first) of a PTX module.

    Every instruction is checked against the rule tables below (opcode, modifiers, types, operand
    count and kinds, register classes, declared registers and labels); malformed text raises
    :class:`PtxSyntaxError` naming the line and column and saying what is wrong."""
    if not isinstance(ptx, str):
        raise TypeError(f"parse_ptx expects PTX text (str), got {type(ptx).__name__}")
    ptx = _COMMENT.sub(lambda c: re.sub(r"[^\n]", " ", c.group(0)), ptx)  # keep lines and columns
    ptx = _DEBUG_LINE.sub(lambda d: " " * len(d.group(0)), ptx)  # .loc/.file end at the newline, not at ';'
    names = kernel_names(ptx)
    if not names and name is None:
        raise PtxSyntaxError("no .entry function in this PTX")
    name = name or names[0]
    params_text, start, first_line = _entry_header(ptx, name)
    params = []
    for p in params_text.split(","):
        if p.strip():
            ty = re.search(r"\.param\s+\.(\w+)", p)
            if ty is None:
                raise PtxSyntaxError(f"line {first_line}: parameter {p.strip()!r} of .entry {name} has no .param type")
            params.append((p.split()[-1], ty.group(1)))
    stmts, end = _statements(ptx, start, name)
    _check_after_body(ptx, end, name)
    body = ptx[start + 1 : end]
    shared, offset = {}, 0
    module_level = ptx[: ptx.index(".entry")]
    for align, _ty, sym, size in _SHARED.findall(module_level + body):
        align = int(align or 4)
        offset = (offset + align - 1) // align * align
        shared[sym] = (offset, int(size or 0))
        offset += int(size or 0)
    regs = {p: (ty, int(n)) for ty, p, n in _REGDECL.findall(body)}
    reqntid = re.search(r"\.reqntid\s+(\d+)", ptx[:start])
    instrs, labels, where = [], {}, []
    newlines = [m.start() for m in re.finditer("\n", ptx)]  # line of a position: a binary search
    for stmt in stmts:
        _missing_semicolon(ptx, stmt)
        text, pos = stmt.text, stmt.pos
        while (lab := _LABEL.match(text)) is not None:
            labels[lab.group(1)] = len(instrs)
            pos += lab.end()
            text = text[lab.end() :]
        lead = len(text) - len(text.lstrip())
        text, pos = " ".join(text.split()), pos + lead
        if not text or text.startswith("."):
            continue
        instrs.append(_parse_instr(len(instrs), text, bisect.bisect_right(newlines, pos) + 1, ptx, pos))
        where.append(pos)
    symbols = set(_VARIABLE.findall(ptx))
    ctx = _Context(ptx, labels, regs, _simple_regs(body), {p for p, _ in params}, set(shared), symbols)
    for ins, pos in zip(instrs, where, strict=True):
        _check_instr(ins, ctx, pos)
    version = re.search(r"\.version\s+([\d.]+)", ptx)
    target = re.search(r"\.target\s+(\w+)", ptx)
    return PtxKernel(
        name, params, regs, shared, instrs, labels,
        version.group(1) if version else "", target.group(1) if target else "",
        int(reqntid.group(1)) if reqntid else None,
    )  # fmt: skip


def _parse_instr(index: int, text: str, line: int, ptx: str = "", pos: int = 0) -> Instr:
    """``[@[!]%p] opcode.mod.mod operand, operand, ...`` (the operands' shapes are checked later)."""
    guard, neg = None, False
    rest = text
    if rest.startswith("@"):
        if " " not in rest:
            raise PtxSyntaxError(f"line {line}, column {_col_of(ptx, pos) if ptx else 1}: guard {rest!r} is "
                                 "not followed by an instruction")  # fmt: skip
        g, rest = rest.split(None, 1)
        neg = g.startswith("@!")
        guard = g.lstrip("@!")
    parts = rest.split(None, 1)
    opcode = parts[0]
    if not re.match(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_:]+)*$", opcode):
        col = _col_of(ptx, pos + text.index(opcode)) if ptx else 1
        why = "a ',' right after the opcode" if opcode.endswith(",") else "not a PTX opcode"
        raise PtxSyntaxError(f"line {line}, column {col}: {opcode!r} is {why} (in `{text}`)")
    try:
        ops = tuple(parse_operand(o) for o in _split_top(parts[1])) if len(parts) > 1 else ()
    except ValueError as exc:  # a number PTX cannot read, say 0x
        raise PtxSyntaxError(f"line {line}: cannot read the operands of `{text}` ({exc})") from None
    if len(parts) > 1 and (parts[1].rstrip().endswith(",") or re.search(r",\s*,", parts[1])):
        ops = ops + (Operand("empty", ""),)  # reported by the checker with its column
    op, *mods = opcode.split(".")
    return Instr(index, op, tuple(mods), ops, guard, neg, text, line)


def _simple_regs(body: str) -> dict:
    """Names declared one by one, with their type (``.reg .pred p;`` inside Triton's inline-asm blocks)."""
    names = {}
    for ty, decl in re.findall(r"\.reg\s+\.(\w+)\s+([^;<]+);", body):
        names.update((n.strip(), ty) for n in decl.split(","))
    return names


# ============================================================================ the rules
# PTX ISA chapter 9, as tables. A type's width in bits; registers declared ``.reg .b32`` hold any
# 32-bit type, so the check is on width and kind (bit / signed-unsigned / float), as ptxas does.
TYPE_BITS = {
    "pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "tf32": 32, "f16x2": 32, "bf16x2": 32, "u16x2": 32, "s16x2": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128,
    "e4m3": 8, "e5m2": 8, "e4m3x2": 16, "e5m2x2": 16, "e2m1x2": 8, "e2m3x2": 16, "e3m2x2": 16, "ue8m0x2": 16,
    "e4m3x4": 32, "e5m2x4": 32, "e2m1x4": 16, "s4": 4, "u4": 4,
}  # fmt: skip
INT = frozenset({"u16", "u32", "u64", "s16", "s32", "s64"})
FLOAT = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f64"})
BITS = frozenset({"b16", "b32", "b64"})
MEMORY = frozenset({"b8", "b16", "b32", "b64", "b128", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "f32",
                    "f64"})  # fmt: skip
SPACES = frozenset({"global", "shared", "shared::cta", "shared::cluster", "local", "const", "param", "param::entry"})
ROUND = frozenset({"rn", "rz", "rm", "rp"})
ROUND_INT = frozenset({"rni", "rzi", "rmi", "rpi"})
SCOPES = frozenset({"cta", "cluster", "gpu", "sys"})
CMP = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu",
                 "geu", "num", "nan"})  # fmt: skip
CACHE_HINTS = frozenset({"L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last",
                         "L1::no_allocate", "L2::evict_normal", "L2::evict_first", "L2::evict_last",
                         "L2::cache_hint", "L2::64B", "L2::128B", "L2::256B"})  # fmt: skip


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """What one opcode family accepts.

    ``sigs`` maps a modifier that changes the operand list ("" for the default) to a string with one
    letter per operand: ``d``/``a`` destination/source of the instruction's type, ``W`` twice its
    width (``mul.wide``), ``p`` predicate, ``u``/``U`` a 32-bit integer source (shift amounts, lanes) /
    destination (``popc``), ``D``/``S``
    cvt's destination/source types, ``v`` ld/st data (register may be wider; a vector for .vN),
    ``A`` an address ``[...]``, ``h`` a 64-bit cache policy, ``l`` a label, ``x`` anything.
    ``need``: (modifiers, which types) pairs: one of the modifiers is required for those types."""

    sigs: dict
    types: frozenset = frozenset()
    mods: frozenset = frozenset()
    ntypes: int | tuple = 1
    need: tuple = ()
    vector: bool = False
    spaces: bool = False


def _spec(sigs, types=(), mods=(), **kw) -> OpSpec:
    return OpSpec(sigs if isinstance(sigs, dict) else {"": sigs}, frozenset(types), frozenset(mods), **kw)


_ARITH = INT | FLOAT
_FMODS = ROUND | {"ftz", "sat"}
SPECS = {
    "add": _spec("daa", _ARITH | {"u16x2", "s16x2"}, _FMODS | {"cc"}),
    "sub": _spec("daa", _ARITH | {"u16x2", "s16x2"}, _FMODS | {"cc"}),
    "mul": _spec({"": "daa", "wide": "Waa"}, _ARITH, _FMODS | {"lo", "hi", "wide"}, need=((("lo", "hi", "wide"), INT),)),
    "mad": _spec({"": "daaa", "wide": "WaaW"}, _ARITH, _FMODS | {"lo", "hi", "wide", "cc"},
                 need=((("lo", "hi", "wide"), INT), (tuple(ROUND), {"f32", "f64"}))),
    "fma": _spec("daaa", FLOAT, _FMODS | {"relu", "oob"}, need=((tuple(ROUND), FLOAT),)),
    "div": _spec("daa", INT | {"f32", "f64"}, _FMODS | {"approx", "full"},
                 need=((tuple(ROUND | {"approx", "full"}), {"f32", "f64"}),)),
    "rem": _spec("daa", INT),
    "min": _spec("daa", _ARITH | {"u16x2", "s16x2"}, {"ftz", "NaN", "xorsign", "abs", "relu"}),
    "max": _spec("daa", _ARITH | {"u16x2", "s16x2"}, {"ftz", "NaN", "xorsign", "abs", "relu"}),
    "abs": _spec("da", {"s16", "s32", "s64"} | FLOAT, {"ftz"}),
    "neg": _spec("da", {"s16", "s32", "s64"} | FLOAT, {"ftz"}),
    "and": _spec("daa", BITS | {"pred"}),
    "or": _spec("daa", BITS | {"pred"}),
    "xor": _spec("daa", BITS | {"pred"}),
    "not": _spec("da", BITS | {"pred"}),
    "cnot": _spec("da", BITS),
    "shl": _spec("dau", BITS),
    "shr": _spec("dau", BITS | INT),
    "mov": _spec("da", BITS | INT | {"pred", "b128", "f32", "f64"}),
    "selp": _spec("daap", BITS | INT | {"f32", "f64"}),
    "setp": _spec({"": "paa", "and": "paap", "or": "paap", "xor": "paap"}, BITS | INT | FLOAT,
                  CMP | {"ftz", "and", "or", "xor"}, need=((tuple(CMP), BITS | INT | FLOAT),)),
    "cvt": _spec("DS", set(TYPE_BITS) - {"pred", "b8", "b16", "b32", "b64", "b128"},  # converts values, not bits
                 ROUND | ROUND_INT | {"ftz", "sat", "relu", "satfinite"}, ntypes=2),
    "cvta": _spec("da", {"u32", "u64"}, {"to"}, spaces=True),
    "ld": _spec({"": "vA", "L2::cache_hint": "vAh"}, MEMORY,
                {"weak", "volatile", "relaxed", "acquire", "mmio", "ca", "cg", "cs", "lu", "cv", "nc", "unified"}
                | SCOPES | CACHE_HINTS, vector=True, spaces=True),
    "st": _spec({"": "Av", "L2::cache_hint": "Avh"}, MEMORY,
                {"weak", "volatile", "relaxed", "release", "mmio", "wb", "cg", "cs", "wt"} | SCOPES | CACHE_HINTS,
                vector=True, spaces=True),
    "shfl": _spec("daaaa", {"b32"}, {"sync", "up", "down", "bfly", "idx"},
                  need=((("sync",), {"b32"}), (("up", "down", "bfly", "idx"), {"b32"}))),
    "bfe": _spec("dauu", {"u32", "u64", "s32", "s64"}),
    "bfi": _spec("daauu", {"b32", "b64"}),
    "prmt": _spec("daaa", {"b32"}, {"f4e", "b4e", "rc8", "ecl", "ecr", "rc16"}),
    "popc": _spec("Ua", {"b32", "b64"}),
    "clz": _spec("Ua", {"b32", "b64"}),
    "brev": _spec("da", {"b32", "b64"}),
    "copysign": _spec("daa", {"f32", "f64"}),
    "lop3": _spec("daaax", {"b32"}),
    "ex2": _spec("da", {"f32", "f16", "bf16", "f16x2", "bf16x2"}, {"approx", "ftz"}, need=((("approx",), FLOAT),)),
    "lg2": _spec("da", {"f32"}, {"approx", "ftz"}, need=((("approx",), {"f32"}),)),
    "sin": _spec("da", {"f32"}, {"approx", "ftz"}, need=((("approx",), {"f32"}),)),
    "cos": _spec("da", {"f32"}, {"approx", "ftz"}, need=((("approx",), {"f32"}),)),
    "tanh": _spec("da", {"f32", "f16", "bf16", "f16x2", "bf16x2"}, {"approx"}, need=((("approx",), FLOAT),)),
    "rsqrt": _spec("da", {"f32", "f64"}, {"approx", "ftz"}, need=((("approx",), {"f32", "f64"}),)),
    "sqrt": _spec("da", {"f32", "f64"}, ROUND | {"approx", "ftz"}, need=((tuple(ROUND | {"approx"}), {"f32", "f64"}),)),
    "rcp": _spec("da", {"f32", "f64"}, ROUND | {"approx", "ftz"}, need=((tuple(ROUND | {"approx"}), {"f32", "f64"}),)),
    "set": _spec({"": "daa", "and": "daap", "or": "daap", "xor": "daap"}, {"u32", "s32", "f32"} | BITS | INT | FLOAT,
                 CMP | {"ftz", "and", "or", "xor"}, ntypes=2, need=((tuple(CMP), BITS | INT | FLOAT),)),
    "redux": _spec("dau", {"u32", "s32", "b32", "f32"}, {"sync", "add", "min", "max", "and", "or", "xor", "abs", "NaN"},
                   need=((("sync",), None), (("add", "min", "max", "and", "or", "xor"), None))),
    "bra": _spec("l", (), {"uni"}, ntypes=0),
    "elect": _spec("xx", (), {"sync"}, ntypes=0, need=((("sync",), None),)),
    "bar": _spec({"": "u|uu", "red": "dup|duup"}, {"u32", "pred"}, {"sync", "arrive", "red", "aligned", "cta", "popc",
                 "and", "or"}, ntypes=(0, 1), need=((("sync", "arrive", "red"), None),)),
    "barrier": _spec({"": "u|uu", "red": "dup|duup"}, {"u32", "pred"}, {"sync", "arrive", "red", "aligned", "cta",
                     "popc", "and", "or"}, ntypes=(0, 1), need=((("sync", "arrive", "red"), None),)),
    "ret": _spec("", (), {"uni"}, ntypes=0),
    "exit": _spec("", (), (), ntypes=0),
}  # fmt: skip

#: Opcodes the parser knows but checks loosely: the opcode, its modifiers against :data:`VOCABULARY`,
#: its type names, declared registers and labels (their operand lists are long and varied).
LOOSE_OPS = frozenset("""
    atom red vote match activemask mbarrier cp wgmma mma ldmatrix stmatrix movmatrix fence membar
    createpolicy griddepcontrol setmaxnreg tensormap multimem getctarank mapa nanosleep trap brkpt prefetch
    prefetchu isspacep discard applypriority call brx dp4a dp2a sad slct ldu suld sust sured tex tld4 txq
    alloca stacksave stackrestore clusterlaunchcontrol tcgen05 istypep szext bmsk addc subc madc mul24 mad24
    testp fns bfind pmevent
""".split())  # fmt: skip
#: Modifiers of the loosely checked opcodes (those of :data:`SPECS` are added below).
VOCABULARY = frozenset("""
    sync aligned async bulk tensor tile im2col 1d 2d 3d 4d 5d shared::cta shared::cluster global mbarrier
    complete_tx::bytes mbarrier::complete_tx::bytes bulk_group commit_group wait_group wait_all read ca cg cs L2::cache_hint
    multicast::cluster init inval arrive arrive_drop expect_tx try_wait test_wait parity complete_tx
    proxy acq_rel sc release acquire relaxed cta cluster gpu sys fence commit_group wait_group mma_async
    add inc dec exch cas and or xor min max noftz popc all any uni ballot trans x1 x2 x4 m8n8 m16n8 m8n16
    row col fractional L2::evict_last L2::evict_first L2::evict_normal L2::evict_unchanged fraction range
    red satfinite ftz rn rz rm rp approx wait launch_dependents warp setmaxnreg inc dec b1 pipe
    noinc shared global local const param space
""".split())  # fmt: skip
_SHAPE = re.compile(r"^(m\d+n\d+k\d+|m\d+n\d+|x\d+|\d+d|v\d+)$")
_TYPE_LIKE = re.compile(r"^(?:[bsuf]\d+|[bsuf]\d+x\d+|bf\d+\w*|e\dm\d\w*|pred|tf32|ue8m0\w*|s4|u4|i\d+)$")
ARITY = {
    op: tuple(sorted({len(alt) for sig in spec.sigs.values() for alt in sig.split("|")})) for op, spec in SPECS.items()
}
#: which operand is an address ``[...]`` (kept for callers; the checks read the ``A`` in :data:`SPECS`)
ADDRESS_AT = {"ld": 1, "st": 0, "atom": 1, "red": 0}


@dataclasses.dataclass(frozen=True)
class _Context:
    """What the checks of one kernel look things up in."""

    ptx: str
    labels: dict
    regs: dict  # prefix -> (type, count), from ``.reg .b32 %r<19>``
    simple: dict  # name -> type, from ``.reg .pred p``
    params: set
    shared: set
    symbols: set  # module-level variables (.global / .const / .shared), addressable by name


#: register prefixes LLVM's NVPTX back end declares with ``.reg .type %r<N>``
_LLVM_REG = re.compile(r"^%(p|rs|r|rd|f|fd|h|hh|rq)(\d+)$")
_ANY_REG = re.compile(r"^%([A-Za-z_]+)(\d+)$")
_SPECIAL = {"envreg", "pm", "pm_", "reserved_smem_offset_"}  # %envreg3, %pm0, ...


def _registers(op: Operand) -> list[str]:
    if op.kind == "vec":
        return [p.lstrip("!") for p in op.parts if p.startswith(("%", "!%"))]
    if op.kind == "mem":
        return re.findall(r"%\w+", op.text)
    return [r.lstrip("!") for r in op.text.split("|")] if op.kind == "reg" else []


class _Fail(Exception):
    """A rule broken by one instruction: the sentence and the token it is about (for the column)."""

    def __init__(self, what: str, token: str = "") -> None:
        super().__init__(what)
        self.what, self.token = what, token


def _check_instr(ins: Instr, ctx: _Context, pos: int = -1) -> None:
    """Check one parsed instruction against the tables; raise PtxSyntaxError with line and column."""
    try:
        _check_shapes(ins)
        _check_names(ins, ctx)
        spec = SPECS.get(ins.op)
        if spec is None:
            _check_loose(ins, ctx)
        else:
            _check_spec(ins, spec, ctx)
    except _Fail as f:
        col = 1
        if pos >= 0:
            line_start = ctx.ptx.rfind("\n", 0, pos) + 1
            line_text = ctx.ptx[line_start : ctx.ptx.find("\n", pos) if "\n" in ctx.ptx[pos:] else len(ctx.ptx)]
            k = line_text.find(f.token, pos - line_start) if f.token else -1
            col = (k if k >= 0 else pos - line_start) + 1
        raise PtxSyntaxError(f"line {ins.line}, column {col}: {f.what} (in `{ins.text}`)") from None


def _check_shapes(ins: Instr) -> None:
    """Punctuation: no empty operand, no two operands without a comma, well-formed [] and {}."""
    for op in ins.operands:
        if op.kind == "empty":
            raise _Fail("an empty operand: two commas in a row, or a comma before ';'", ",")
        closer = {"vec": "}", "mem": "]"}.get(op.kind)
        if closer and (not op.text.endswith(closer) or op.text.count(op.text[0]) > 1 and op.kind == "vec"):
            raise _Fail(f"',' missing after {op.text[: op.text.index(closer) + 1]!r}", op.text)
        if op.kind == "mem" and op.text.count("[") > 1:
            raise _Fail(f"',' missing after {op.text[: op.text.index(']') + 1]!r}", op.text)
        if op.kind == "vec":
            if any(not p or " " in p for p in op.parts):
                raise _Fail(f"a malformed vector operand {op.text!r}: {{%r1, %r2}} expected", op.text[:8])
            continue
        if op.kind == "mem":  # cp.async.bulk.tensor's [%rd1, {%r1, %r2}] is checked loosely
            inner = op.text.strip("[] ").replace(" ", "")
            if ins.op in SPECS and _ADDRESS.match(inner) is None:
                raise _Fail(f"a malformed address {op.text!r}: [%rd1], [%rd1+8] or [symbol] expected", op.text)
            if re.match(r"^0[fFdD][0-9a-fA-F]+([+-]|$)", inner):
                raise _Fail(f"a float constant cannot be an address ({op.text})", op.text)
            if re.match(r"^-?(0[xX][0-9a-fA-F]+|\d+)([+-]|$)", inner) and "local" not in ins.mods:
                raise _Fail(f"a constant address {op.text!r} is only allowed for .local", op.text)
            continue
        words = op.text.split()
        if len(words) > 1:
            raise _Fail(f"',' missing between {words[0]!r} and {words[1]!r}", words[1])
        if "|" in op.text and ins.op not in ("setp", "shfl", "vote", "match", "elect", "mbarrier", "cp", "redux"):
            raise _Fail(f"{ins.op} has no second destination ('{op.text}')", op.text)


def _check_names(ins: Instr, ctx: _Context) -> None:
    """Labels are defined; registers are declared (their prefix and the index below the count)."""
    if ins.guard is not None:
        g = ins.guard
        if _reg_type(g, ctx) is None:
            raise _Fail(f"guard {g} is not a declared register", g)
        if _reg_type(g, ctx) != "pred":
            raise _Fail(f"guard {g} is a .{_reg_type(g, ctx)} register; a guard must be a .pred", g)
    for op in ins.operands:
        if op.kind == "label" and op.text not in ctx.labels:
            raise _Fail(f"label {op.text} is not defined", op.text)
        for name in _registers(op):
            if name != "_" and _reg_type(name, ctx) is None:
                raise _Fail(f"register {name} is not declared by any .reg line", name)


def _reg_type(name: str, ctx: _Context) -> str | None:
    """The declared type of a register, ``"sreg"`` for special ones, None when undeclared."""
    if name in ctx.simple:
        return ctx.simple[name]
    m = _LLVM_REG.match(name) or _ANY_REG.match(name)
    if m is None:
        return "sreg" if name[1:] in _SREG_BITS or "." in name else None
    if m.group(1) in _SPECIAL:
        return "sreg"
    prefix = "%" + m.group(1)
    if prefix not in ctx.regs or int(m.group(2)) >= ctx.regs[prefix][1]:
        return None
    return ctx.regs[prefix][0]


def _split_mods(ins: Instr) -> tuple[list, list, list, list]:
    """(types, state spaces, vector widths, other modifiers) of an instruction, in order."""
    types, spaces, vectors, other = [], [], [], []
    for m in ins.mods:
        if m in TYPE_BITS:
            types.append(m)
        elif m in SPACES:
            spaces.append(m)
        elif re.fullmatch(r"v\d+", m):
            vectors.append(m)
        else:
            other.append(m)
    return types, spaces, vectors, other


def _check_loose(ins: Instr, ctx: _Context) -> None:
    if ins.op not in LOOSE_OPS:
        raise _Fail(f"{ins.op!r} is not a PTX instruction", ins.op)
    types, spaces, vectors, other = _split_mods(ins)
    first = ins.operands[0] if ins.operands else None
    if ins.op in _LOOSE_RESULT and first is not None and first.kind != "mem" and not _NO_RESULT & set(ins.mods):
        names = first.parts if first.kind == "vec" else first.text.split("|")
        bad = [m for m in names if m[:1] not in ("%", "_") and m not in ctx.simple]
        if bad:
            raise _Fail(f"the result of {ins.op} must go to a register, not {bad[0]!r}", bad[0])
    if spaces and ins.op not in _LOOSE_SPACES:
        raise _Fail(f"{ins.op} takes no state space (.{spaces[0]})", "." + spaces[0])
    if (
        ins.op == "cp"
        and "async" in other
        and "bulk" not in other
        and spaces[:1] + spaces[1:]
        and (len(spaces) != 2 or spaces[0] not in ("shared", "shared::cta") or spaces[1] != "global")
    ):
        raise _Fail("cp.async copies .global to .shared (cp.async.cg.shared.global)", "." + spaces[0])
    if ins.op in _LOOSE_ARITY:
        want = _LOOSE_ARITY[ins.op] + ("cas" in other) + ("L2::cache_hint" in other)
        if len(ins.operands) != want:
            raise _Fail(f"{ins.op}{'.cas' if 'cas' in other else ''} takes {want} operands; this has "
                        f"{len(ins.operands)}", ins.op)  # fmt: skip
        mem = [o for o in ins.operands if o.kind == "mem"]
        if mem and _ADDRESS.match(mem[0].text.strip("[] ").replace(" ", "")):
            _check_address(ins, mem[0], spaces, ctx)
    if ins.op == "createpolicy" and first is not None and _reg_type(first.text, ctx) not in (None, "b64", "u64"):
        raise _Fail(f"createpolicy writes a 64-bit policy; {first.text} is .{_reg_type(first.text, ctx)}", first.text)
    for op, group, words in _LOOSE_NEEDS:
        if ins.op == op and not any(m in group for m in other):
            raise _Fail(f"{ins.op} needs {words}", ins.op)
    for v in vectors:
        if ins.op not in ("atom", "red", "ldu", "multimem") or v not in ("v2", "v4", "v8"):
            raise _Fail(f"'.{v}' is not a vector width {ins.op} takes", "." + v)
        if ins.op in ("atom", "red") and not set(types) & {"f16", "bf16", "f16x2", "bf16x2", "f32"}:
            raise _Fail(f"vector {ins.op} (.{v}) works on .f16 .bf16 .f32 only", "." + v)
    for t in types:
        if ins.op in _LOOSE_TYPES and t not in _LOOSE_TYPES[ins.op]:
            raise _Fail(
                f"{ins.op} does not take type .{t} ({' '.join('.' + x for x in _LOOSE_TYPES[ins.op])})", "." + t
            )
    for m in other:
        if _TYPE_LIKE.match(m):
            raise _Fail(f"'.{m}' is not a PTX type", "." + m)
        if m not in VOCABULARY and m not in _ALL_MODS and not _SHAPE.match(m):
            raise _Fail(f"'.{m}' is not a modifier of {ins.op}", "." + m)
    dups = [m for m in other if other.count(m) > 1 and m not in _REPEATABLE]
    if dups:
        raise _Fail(f"modifier '.{dups[0]}' is given twice", "." + dups[0])
    if ins.op == "wgmma" and "mma_async" in other:
        _check_wgmma(ins, types, other)


#: wgmma.mma_async's operands after the accumulator, by input type, with A in shared memory (a descriptor)
#: or in registers: descriptors, scale-d, then immediate scale-a/b and transpose-a/b flags
WGMMA_OPERANDS = {"f16": (8, 7), "bf16": (8, 7), "tf32": (6, 6), "e4m3": (6, 6), "e5m2": (6, 6), "s8": (4, 4),
                  "u8": (4, 4), "b1": (4, 4)}  # fmt: skip


def _check_wgmma(ins: Instr, types: list, other: list) -> None:
    """``wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16 {d...}, a, b, scale-d, ...``: operand count
    and accumulator size (N/2 registers of 32 bits for an f32/s32 result, N/4 for f16)."""
    shape = next((m for m in other if re.fullmatch(r"m64n\d+k\d+", m)), None)
    ab = [t for t in types[1:]] or [m for m in other if m in ("e4m3", "e5m2", "b1")]
    if shape is None or len(types) < 2 or ab[0] not in WGMMA_OPERANDS or not ins.operands:
        return
    a_in_regs = len(ins.operands) > 1 and ins.operands[1].kind == "vec"
    want = WGMMA_OPERANDS[ab[0]][1 if a_in_regs else 0]
    if len(ins.operands) != want:
        raise _Fail(f"wgmma.mma_async with .{ab[0]} inputs takes {want} operands; this has {len(ins.operands)}",
                    ins.op)  # fmt: skip
    n = int(shape.split("n")[1].split("k")[0])
    regs = n // 4 if types[0] == "f16" else n // 2
    d = ins.operands[0]
    if d.kind != "vec" or len(d.parts) != regs:
        have = len(d.parts) if d.kind == "vec" else 1
        raise _Fail(f"{shape}.{types[0]} accumulates in {regs} registers; this vector has {have}", d.text[:8])


#: operands of atom (d, [a], b; cas: one more) and red ([a], b); an L2 cache policy adds one
_LOOSE_ARITY = {"atom": 3, "red": 2}
#: the types some loosely checked opcodes take
_LOOSE_TYPES = {"ldmatrix": ("b16", "b8"), "stmatrix": ("b16", "b8"), "elect": (), "createpolicy": ("b64",)}
#: (opcode, one of these modifiers is required, in words) for loosely checked opcodes
_LOOSE_NEEDS = (
    ("ldmatrix", {"x1", "x2", "x4"}, "a count (.x1 .x2 .x4)"), ("stmatrix", {"x1", "x2", "x4"}, "a count (.x1 .x2 .x4)"),
    ("ldmatrix", {"m8n8", "m16n16", "m8n16"}, "a shape (.m8n8)"), ("stmatrix", {"m8n8", "m16n8"}, "a shape (.m8n8)"),
)  # fmt: skip
#: loosely checked opcodes that name a state space (cp.async.cg.shared.global, fence.proxy.async.shared::cta)
_LOOSE_SPACES = frozenset(
    """cp atom red mbarrier ldmatrix stmatrix prefetch prefetchu ldu fence multimem isspacep
    getctarank mapa tensormap discard applypriority membar suld sust sured tcgen05 cvta""".split()
)
#: loosely checked opcodes whose first operand (when not an address) is a result
_LOOSE_RESULT = frozenset(
    """atom redux vote match activemask elect ldmatrix mma wgmma createpolicy getctarank mapa
    ldu isspacep dp4a dp2a sad slct mul24 mad24 addc subc madc bfind fns szext bmsk testp suld tex tld4 txq istypep
    movmatrix alloca stacksave mbarrier""".split()
)
_NO_RESULT = frozenset({"wait_group", "commit_group", "fence", "wait_all", "init", "inval"})  # wgmma.wait_group 0
_ALL_MODS = frozenset().union(*(s.mods for s in SPECS.values()))


def _check_spec(ins: Instr, spec: OpSpec, ctx: _Context) -> None:
    types, spaces, vectors, other = _split_mods(ins)
    _check_modifiers(ins, spec, types, spaces, vectors, other)
    sig = next((spec.sigs[m] for m in ins.mods if m in spec.sigs and m), spec.sigs[""])
    if ins.op == "cvt" and types[0].endswith(("x2", "x4")) and types[1] == "f32":
        sig = "DSS" if types[0].endswith("x2") else "DSSSS"  # cvt.rn.f16x2.f32 d, a, b: one source per half
    sig = next((alt for alt in sig.split("|") if len(alt) == len(ins.operands)), sig.split("|")[0])
    if len(ins.operands) != len(sig):
        names = {"d": "d", "a": "a", "W": "d", "p": "p", "u": "n", "U": "d", "D": "d", "S": "a", "v": "data", "A": "[addr]",
                 "h": "policy", "l": "label", "x": "x"}  # fmt: skip
        want = ", ".join(names[c] for c in sig) or "no operands"
        raise _Fail(f"{ins.op} takes {len(sig)} operand(s) ({want}); this has {len(ins.operands)}", ins.op)
    for k, (role, op) in enumerate(zip(sig, ins.operands, strict=True)):
        _check_operand(ins, spec, role, k, op, types, spaces, vectors, ctx)


def _check_modifiers(ins, spec, types, spaces, vectors, other) -> None:
    for m in other:
        if m not in spec.mods:
            if _TYPE_LIKE.match(m):
                raise _Fail(f"'.{m}' is not a PTX type", "." + m)
            known = m in _ALL_MODS or m in VOCABULARY
            why = f"'.{m}' does not apply to {ins.op}" if known else f"'.{m}' is not a PTX modifier"
            raise _Fail(f"{why} ({ins.op} takes {' '.join('.' + x for x in sorted(spec.mods)) or 'none'})", "." + m)
    dups = [m for m in other if other.count(m) > 1 and m not in _REPEATABLE]
    if dups:
        raise _Fail(f"modifier '.{dups[0]}' is given twice", "." + dups[0])
    for group in _EXCLUSIVE:
        both = [m for m in other if m in group]
        if len(both) > 1:
            raise _Fail(f"'.{both[0]}' and '.{both[1]}' exclude each other", "." + both[1])
    counts = spec.ntypes if isinstance(spec.ntypes, tuple) else (spec.ntypes,)
    if len(types) not in counts:
        want = " or ".join(f"{n} type(s)" if n else "no type" for n in counts)
        raise _Fail(f"{ins.op} takes {want}; this has {len(types)} ({' '.join('.' + t for t in types) or 'none'})",
                    ins.op)  # fmt: skip
    for t in types:
        if t not in spec.types:
            allowed = " ".join("." + x for x in sorted(spec.types))
            raise _Fail(f"{ins.op} does not take type .{t} (it takes {allowed})", "." + t)
    for group, when in spec.need:  # when: the types that need it (None: every form)
        applies = when is None or (types and types[-1] in when)
        if applies and not any(g in other for g in group):
            form = f"{ins.op}.{types[-1]}" if types else ins.op
            raise _Fail(f"{form} needs one of {' '.join('.' + g for g in sorted(group))}", ins.op)
    if ins.op == "cvt":
        _check_cvt_rounding(types, other)
    elif types:
        _check_kind_modifiers(ins, types[-1], other)
    if spaces and not spec.spaces:
        raise _Fail(f"{ins.op} takes no state space (.{spaces[0]})", "." + spaces[0])
    if len(spaces) > 1:
        raise _Fail(f"{ins.op} takes one state space; this has {len(spaces)}", "." + spaces[1])
    if ins.op == "st" and spaces and spaces[0] in ("const", "param", "param::entry"):
        raise _Fail(f"st cannot write the read-only .{spaces[0]} space", "." + spaces[0])
    for m in other:
        if spaces and any(m in group for group in _SPACE_FORBIDS.get(spaces[0], ())):
            raise _Fail(f"'.{m}' cannot be used with the .{spaces[0]} space", "." + m)
    for mod, needs, what in _REQUIRES:
        if ins.op in ("ld", "st") and mod in ins.mods and not any(n in ins.mods for n in needs):
            raise _Fail(f"'.{mod}' needs {what}", "." + mod)
    if vectors:
        _check_vector(ins, spec, types, vectors)


#: flags ptxas lets a programmer repeat (checked against ptxas: .sync.sync is accepted, .ftz.ftz is not)
_REPEATABLE = frozenset({"sync", "approx", "sat", "uni"})
#: at most one modifier of each group
_EXCLUSIVE = (
    ROUND | ROUND_INT | {"approx", "full"}, frozenset({"lo", "hi", "wide"}), CMP, frozenset({"and", "or", "xor"}),
    frozenset({"up", "down", "bfly", "idx"}),
    frozenset({"ca", "cg", "cs", "lu", "cv", "wb", "wt"} | {h for h in CACHE_HINTS if h.startswith("L1::")}),
    frozenset({"weak", "volatile", "relaxed", "acquire", "release", "mmio"}), SCOPES,
    frozenset(h for h in CACHE_HINTS if h.startswith("L2::evict")),
)  # fmt: skip
_ORDERS = frozenset({"relaxed", "acquire", "release"})
#: ld/st modifiers a state space does not take (eviction hints are for global memory, memory orders for
#: memory other threads can see)
_SPACE_FORBIDS = {
    "shared": (CACHE_HINTS,), "shared::cta": (CACHE_HINTS,), "shared::cluster": (CACHE_HINTS,),
    "local": (CACHE_HINTS, _ORDERS), "const": (CACHE_HINTS, _ORDERS | {"volatile"}),
    "param": (CACHE_HINTS, _ORDERS | {"volatile"}), "param::entry": (CACHE_HINTS, _ORDERS | {"volatile"}),
}  # fmt: skip
#: (modifier, one of these must be present too, in words) for ld/st
_REQUIRES = (
    *((m, SCOPES, "a scope (.cta .cluster .gpu .sys)") for m in ("relaxed", "acquire", "release")),
    *((s, {"relaxed", "acquire", "release", "volatile"}, "a memory order (.relaxed .acquire .release)") for s in SCOPES),
    ("nc", {"global"}, "the .global space"),
)  # fmt: skip


def _check_vector(ins, spec, types, vectors) -> None:
    v = vectors[0]
    if not spec.vector:
        raise _Fail(f"{ins.op} takes no vector width (.{v})", "." + v)
    if len(vectors) > 1:
        raise _Fail(f"{ins.op} takes one vector width; this has {len(vectors)}", "." + vectors[1])
    if v not in ("v2", "v4"):
        raise _Fail(f"'.{v}' is not a vector width on sm_90 (.v2 or .v4)", "." + v)
    if int(v[1:]) * TYPE_BITS[types[0]] > 128:
        raise _Fail(f".{v}.{types[0]} moves {int(v[1:]) * TYPE_BITS[types[0]]} bits; a vector access moves at most "
                    "128", "." + v)  # fmt: skip


#: modifiers that only make sense for floating-point types, and those only for integers
FLOAT_ONLY = ROUND | {"ftz", "approx", "full", "relu", "NaN", "xorsign", "oob"}
INT_ONLY = frozenset({"lo", "hi", "wide", "cc"})
#: comparisons of integers (lo ls hi hs: unsigned) and of floats (the ``u`` forms are true on NaN)
CMP_FLOAT_ONLY = frozenset({"equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"})
CMP_INT_ONLY = frozenset({"lo", "ls", "hi", "hs"})


def _check_kind_modifiers(ins: Instr, ty: str, other: list) -> None:
    is_float = ty in FLOAT or ty == "tf32"
    bad = [m for m in other if (m in FLOAT_ONLY and not is_float) or (m in INT_ONLY and is_float)]
    if ins.op in ("setp", "set"):
        bad += [m for m in other if (m in CMP_FLOAT_ONLY and not is_float) or (m in CMP_INT_ONLY and is_float)]
        if ty in BITS:  # raw bits have no order: only equal / not equal
            bad += [m for m in other if m in CMP and m not in ("eq", "ne")]
    int_sat = ty == "s32" and (ins.op in ("add", "sub") or (ins.op == "mad" and "hi" in other))
    if "sat" in other and not is_float and not int_sat:
        bad.append("sat")  # saturating integer arithmetic: only add/sub.sat.s32 and mad.hi.sat.s32
    if bad:
        what = "floating-point" if not is_float else "integer"
        what = "signed, unsigned or float" if ty in BITS and bad[0] in CMP else what
        raise _Fail(f"'.{bad[0]}' applies to {what} types only, not .{ty}", "." + bad[0])


def _lane_bits(ty: str) -> int:
    """Width of one value of a type: 16 for .f16x2 (two halves in 32 bits)."""
    return TYPE_BITS[ty] // int(ty[-1]) if re.search(r"x\d$", ty) else TYPE_BITS[ty]


def _check_cvt_rounding(types, other) -> None:
    """cvt needs a rounding mode for float<-int (.rn), int<-float (.rzi) and narrowing float<-float (.rn)."""
    dst, src = types
    fdst, fsrc = dst in FLOAT or dst.startswith("e"), src in FLOAT or src.startswith("e")
    if fdst and not fsrc and not any(m in ROUND for m in other):
        raise _Fail(f"cvt.{dst}.{src} (integer to float) needs a rounding mode (.rn .rz .rm .rp)", "cvt")
    if fsrc and not fdst and dst in INT | {"u8", "s8"} and not any(m in ROUND_INT for m in other):
        raise _Fail(f"cvt.{dst}.{src} (float to integer) needs a rounding mode (.rni .rzi .rmi .rpi)", "cvt")
    if fdst and fsrc and _lane_bits(dst) < _lane_bits(src) and not any(m in ROUND for m in other):
        raise _Fail(f"cvt.{dst}.{src} (narrowing) needs a rounding mode (.rn .rz .rm .rp)", "cvt")
    wrong = [m for m in other if (m in ROUND and not fdst) or (m in ROUND_INT and not fsrc)]
    if wrong:
        raise _Fail(f"rounding '.{wrong[0]}' does not fit cvt.{dst}.{src} (.rn .rz .rm .rp round to a float, "
                    ".rni .rzi .rmi .rpi to an integer)", "." + wrong[0])  # fmt: skip


def _kind(ty: str) -> str:
    return "b" if ty.startswith("b") and ty != "bf16" and ty != "bf16x2" else "i" if ty in INT | {"u8", "s8"} else ty


def _check_operand(ins, spec, role, k, op, types, spaces, vectors, ctx) -> None:
    """One operand against its role letter (see :class:`OpSpec`)."""
    if role == "x":
        return
    if role == "A":
        if op.kind != "mem":
            raise _Fail(f"operand {k + 1} of {ins.op} must be an address in brackets, [%rd1+8]", op.text)
        return _check_address(ins, op, spaces, ctx)
    if op.kind == "mem":
        raise _Fail(f"operand {k + 1} of {ins.op} is an address; a register or a value is expected here", op.text)
    if role == "l":
        if op.kind not in ("label", "sym") or op.text not in ctx.labels:
            raise _Fail(f"{ins.op} needs a defined label; {op.text!r} is not one", op.text)
        return
    writes = k == 0 and role in "dDWvpU" and ins.op != "st"
    if writes and op.kind not in ("reg", "vec"):
        raise _Fail(f"the result of {ins.op} must go to a register, not {op.text!r}", op.text)
    if writes and op.kind == "vec" and any(not m.startswith("%") and m != "_" for m in op.parts):
        bad = next(m for m in op.parts if not m.startswith("%") and m != "_")
        raise _Fail(f"the results of {ins.op} must go to registers, not {bad!r}", bad)
    want, relaxed = _role_type(role, ins, types)
    if want is None:
        return
    members = op.parts if op.kind == "vec" else (op.text,)
    if op.kind == "vec":
        n = int(vectors[0][1:]) if role == "v" and vectors else None
        if role == "v" and n is not None and len(members) != n:
            raise _Fail(f".{vectors[0]} needs a vector of {n} registers; this has {len(members)}", op.text)
        if role != "v" and ins.op == "mov" and _kind(want) != "b":
            raise _Fail(f"mov packs and unpacks vectors with bit types only (.b32, .b64), not .{want}", op.text)
        if role != "v" and ins.op == "mov" and len(members) in (2, 4) and TYPE_BITS[want] % len(members) == 0:
            want = {8: "b8", 16: "b16", 32: "b32", 64: "b64"}.get(TYPE_BITS[want] // len(members))
            relaxed = False
            if want is None:
                raise _Fail(f"mov.{types[0]} cannot be split into {len(members)} parts", op.text)
        elif role != "v" and not (ins.op == "mov" or ins.op in ("setp", "shfl")):
            raise _Fail(f"operand {k + 1} of {ins.op} is a vector; one value is expected", op.text)
        elif role != "v" and len(members) != 2:
            raise _Fail(f"mov packs 2 or 4 registers; this vector has {len(members)}", op.text)
    elif role == "v" and vectors:
        raise _Fail(f".{vectors[0]} needs a vector operand {{%r1, %r2, ...}}, not {op.text!r}", op.text)
    if role == "v" and not vectors and op.kind == "vec" and len(members) != 1:
        raise _Fail(f"{len(members)} registers need a .v{len(members)} {ins.op}; a scalar {ins.op} moves one", op.text)
    for text in members:
        for part in text.split("|") if ins.op in ("setp", "shfl") else (text,):
            _check_value(ins, k, part.lstrip("!"), want if "|" not in text or part == text.split("|")[0] else "pred",
                         relaxed, ctx)  # fmt: skip


def _role_type(role: str, ins: Instr, types: list) -> tuple[str | None, bool]:
    """(the type an operand must hold, whether a wider register is allowed)."""
    t = types[-1] if types else None
    table = {
        "d": (t, False), "a": (t, False), "p": ("pred", False), "u": ("b32", False), "U": ("b32", False), "h": ("b64", False),
        "v": (t, True), "D": (types[0] if types else None, True), "S": (t, True),
        "W": ({16: "b32", 32: "b64", 64: "b128"}.get(TYPE_BITS.get(t, 0)) if t else None, False),
    }  # fmt: skip
    return table.get(role, (None, False))


def _check_value(ins, k, text, want, relaxed, ctx) -> None:
    """A register of the right width and kind, or an immediate of the right kind."""
    if text == "_":
        return
    if want.startswith(("bf16", "e", "ue")):
        relaxed = False  # bf16 and packed fp8 values: exactly their width (f16 may sit in a wider register)
    if want.startswith(("e", "ue")):
        if not text.startswith("%"):
            raise _Fail(f"{text!r}: .{want} takes a register, not a constant", text)
    if re.match(r"^0[fFdD][0-9a-fA-F]+$", text):
        if _kind(want) in ("i", "pred") or want in ("f16", "bf16", "f16x2", "bf16x2"):
            raise _Fail(f"{text} is a floating-point constant; .{want} needs an integer", text)
        bits = 32 if text[1] in "fF" else 64  # 0f: a 32-bit float's bits, 0d: a 64-bit double's
        if _kind(want) == "b" and TYPE_BITS[want] != bits:
            raise _Fail(f"{text} is a {bits}-bit float constant; .{want} holds {TYPE_BITS[want]} bits", text)
        return
    if re.match(r"^-?(0[xX][0-9a-fA-F]+|\d+)U?$", text):
        if want in FLOAT and ins.op != "mov":
            raise _Fail(f"{text} is an integer constant; .{want} needs a float constant (0f3F800000 is 1.0)", text)
        return
    if not text.startswith("%"):
        if ins.op in ("mov", "cvta") and (
            text in ctx.shared or text in ctx.params or re.match(r"^[A-Za-z_]\w*$", text)
        ):
            return  # the address of a variable
        raise _Fail(f"{text!r} is not a register or a constant", text)
    have = _reg_type(text, ctx)
    if have == "sreg":
        if want in FLOAT or want == "pred":
            raise _Fail(f"{text} is a special register; .{want} cannot read it (use .u32 or .u64)", text)
        bits = _SREG_BITS.get(text[1:], 32)
        if TYPE_BITS.get(want, 0) != bits and not (relaxed and TYPE_BITS.get(want, 0) <= bits):
            raise _Fail(f"{text} is {bits}-bit; .{want} needs {TYPE_BITS.get(want)} bits", text)
        return
    if have is None or have not in TYPE_BITS:
        return
    hb, wb = TYPE_BITS[have], TYPE_BITS[want]
    size_ok = hb == wb or (relaxed and hb > wb and have not in FLOAT)
    kind_ok = (have == "pred") == (want == "pred") and (
        _kind(have) == "b" or _kind(want) == "b" or _kind(have) == _kind(want) or relaxed
    )
    if not (size_ok and kind_ok):
        cls = f".{have} register"
        raise _Fail(f"{text} is a {cls} ({hb} bits); operand {k + 1} of {ins.op} needs .{want}"
                    + (" or wider" if relaxed else ""), text)  # fmt: skip


def _check_address(ins, op, spaces, ctx) -> None:
    base = op.parts[0]
    space = spaces[0] if spaces else "generic"
    if base.startswith("%"):
        have = _reg_type(base, ctx)
        bits = TYPE_BITS.get(have or "", _SREG_BITS.get(base[1:], 64))
        small = space.startswith(("shared", "local", "param", "const"))  # windows below 4 GiB
        if have == "pred" or bits not in ((16, 32, 64) if small else (32, 64)):
            raise _Fail(f"address register {base} is .{have}; an address is a 64-bit register", base)
        if bits < 64 and not small:
            raise _Fail(f"{base} is 32-bit; a .{space} address needs a 64-bit register (%rd)", base)
    elif re.match(r"^-?(0[xX][0-9a-fA-F]+|\d+)$", base):
        if space != "local":
            raise _Fail(f"a constant address [{base}] is only allowed for .local", base)
    elif base not in ctx.params and base not in ctx.shared and base not in ctx.symbols:
        raise _Fail(f"{base!r} in an address is not a register, a parameter or a declared variable", base)
    elif base in ctx.params and space not in ("param", "param::entry"):
        raise _Fail(f"{base} is a kernel parameter; it is read with ld.param, not ld.{space}", base)
    elif base in ctx.shared and space not in ("shared", "shared::cta", "shared::cluster", "generic"):
        raise _Fail(f"{base} is a .shared variable; .{space} cannot address it", base)
