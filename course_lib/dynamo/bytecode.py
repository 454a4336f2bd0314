"""Views of CPython bytecode: instructions with stack effects, code-object fields, frames and
the line table (teaches what torch/_dynamo/bytecode_analysis.py and bytecode_transformation.py
read; CPython's Python/ceval.c and Include/cpython/code.h define it).

Position: a Python function --> the instruction list the symbolic interpreter walks.

Works on Python 3.11 and 3.12 (the two the course runs on): everything comes from the ``dis``
module, so opcode names and jump targets (``argval`` is the target *offset*) are the running
interpreter's own. ``CACHE`` entries (3.11+ inline caches) are hidden, as ``dis`` does by default.
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
import sys
import types
from typing import Any

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

JUMP_OPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


@dataclasses.dataclass(frozen=True)
class Instr:
    """One instruction, as the translator sees it (a trimmed ``dis.Instruction``)."""

    index: int
    offset: int
    opname: str
    arg: int | None
    argval: Any
    argrepr: str
    line: int | None
    is_jump_target: bool
    stack_effect: int | None

    def __str__(self) -> str:
        return f"{self.offset:>4} {self.opname:<24} {self.argrepr}"


def code_of(fn: Any) -> types.CodeType:
    """The code object of a function, method, nn.Module (its forward) or code object."""
    if isinstance(fn, types.CodeType):
        return fn
    if hasattr(fn, "forward") and not inspect.isfunction(fn):
        fn = fn.forward
    fn = getattr(fn, "__func__", fn)
    return fn.__code__


def _stack_effect(ins: dis.Instruction, jump: bool = False) -> int | None:
    if ins.opname == "RETURN_GENERATOR":  # dis says 0; resuming pushes the value sent in (POP_TOP drops it)
        return 1
    if ins.opcode < dis.HAVE_ARGUMENT:
        arg = None
    else:
        arg = ins.arg or 0
    try:
        return dis.stack_effect(ins.opcode, arg, jump=jump)
    except ValueError:  # pseudo/specialised ops dis cannot size
        return None


def instructions(fn: Any) -> list[Instr]:
    """The instructions of ``fn`` in order, with the stack effect of each (non-jumping path)."""
    out = []
    for i, ins in enumerate(dis.get_instructions(code_of(fn))):
        line = ins.positions.lineno if ins.positions else None
        out.append(
            Instr(
                i,
                ins.offset,
                ins.opname,
                ins.arg,
                ins.argval,
                ins.argrepr,
                line,
                ins.is_jump_target,
                _stack_effect(ins),
            )
        )
    return out


# Instructions after which the next one is not reached by falling through.
NO_FALLTHROUGH = frozenset({
    "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
    "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT",
})  # fmt: skip


def stack_depths(fn: Any) -> list[int]:
    """The stack depth *before* each instruction, following the control flow as the compiler does
    when it sizes ``co_stacksize`` (CPython's ``stackdepth()``): a jump target gets the depth the
    jump leaves (``dis.stack_effect(..., jump=True)``), a handler the depth its exception-table
    entry names plus what is pushed for it (``lasti``, the exception).

    Summing the effects line by line is wrong after a loop: on 3.12 ``FOR_ITER`` jumps to
    ``END_FOR`` (which pops two) from the loop's start, not from the ``JUMP_BACKWARD`` above it."""
    code = code_of(fn)
    ins = list(dis.get_instructions(code))
    at = {i.offset: k for k, i in enumerate(ins)}
    depth: dict[int, int] = {0: 0}
    for entry in exception_entries(code):
        depth.setdefault(at[entry.target], entry.depth + int(entry.lasti) + 1)
    todo = list(depth)
    while todo:
        k = todo.pop()
        i = ins[k]
        successors = []
        if i.opcode in JUMP_OPS and i.argval in at:
            successors.append((at[i.argval], _stack_effect(i, jump=True)))
        if i.opname not in NO_FALLTHROUGH and k + 1 < len(ins):
            successors.append((k + 1, _stack_effect(i)))
        for nxt, effect in successors:
            if nxt not in depth:
                depth[nxt] = depth[k] + (effect or 0)
                todo.append(nxt)
    out, last = [], 0
    for k, i in enumerate(ins):  # unreachable code (rare: the compiler drops it) keeps the running sum
        out.append(depth.get(k, last))
        effect = _stack_effect(i)
        last = out[-1] + (effect or 0)
    return out


@dataclasses.dataclass(frozen=True)
class ExceptionEntry:
    """One row of the exception table (3.11+, ``dis``'s "ExceptionTable"): an exception raised by
    an instruction in ``[start, end)`` continues at ``target`` with the stack cut to ``depth``
    (plus the offset of the raising instruction when ``lasti``)."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def exception_entries(fn: Any) -> list[ExceptionEntry]:
    """The exception table of ``fn``'s code, as ``dis`` decodes ``co_exceptiontable``."""
    return [ExceptionEntry(e.start, e.end, e.target, e.depth, bool(e.lasti))
            for e in dis.Bytecode(code_of(fn)).exception_entries]  # fmt: skip


def dis_table(fn: Any) -> list[tuple]:
    """Rows (offset, line, opname, argrepr, stack effect, stack depth after) for display; the
    depth follows the control flow (:func:`stack_depths`)."""
    rows = []
    for ins, before in zip(instructions(fn), stack_depths(fn), strict=True):
        eff = ins.stack_effect if ins.stack_effect is not None else 0
        arg = ins.argrepr if ins.argrepr else ("" if ins.arg is None else str(ins.arg))
        rows.append((ins.offset, ins.line or "", ins.opname, arg, f"{eff:+d}", before + eff))
    return rows


def show_dis(fn: Any):
    """``dis`` as a table with stack effects (course_lib.viz.table)."""
    from course_lib import viz

    return viz.table(dis_table(fn), headers=("offset", "line", "opname", "arg", "effect", "depth"))


CODE_FIELDS = (
    "co_name", "co_qualname", "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals",
    "co_stacksize", "co_flags", "co_varnames", "co_cellvars", "co_freevars", "co_names", "co_consts",
    "co_firstlineno",
)  # fmt: skip


def code_fields(fn: Any) -> dict[str, Any]:
    """The code object's fields that the interpreter (and Dynamo) read; constants that are code
    objects are shown as ``<code name>``; line numbers are relative to the first line."""
    code = code_of(fn)
    fields = {}
    for name in CODE_FIELDS:
        value = getattr(code, name, None)
        if name == "co_consts":
            value = tuple(f"<code {c.co_name}>" if isinstance(c, types.CodeType) else c for c in value)
        if name == "co_flags":
            value = " | ".join(n for v, n in sorted(dis.COMPILER_FLAG_NAMES.items()) if value & v)
        if name == "co_firstlineno":
            continue
        fields[name] = value
    return fields


def line_table(fn: Any) -> list[tuple[int, int, int]]:
    """(start offset, end offset, line relative to the def line) from ``co_lines()``
    (PEP 626; the compressed table itself is ``co_linetable``)."""
    code = code_of(fn)
    rows: list[list[int]] = []
    for start, end, line in code.co_lines():
        rel = line - code.co_firstlineno if line is not None else -1
        if rows and rows[-1][2] == rel and rows[-1][1] == start:
            rows[-1][1] = end  # merge runs of the same line
        elif start != end:
            rows.append([start, end, rel])
    return [tuple(r) for r in rows]


@dataclasses.dataclass
class FrameView:
    """What a frame holds when it starts: the code, its locals (arguments), globals read, and
    whether its closure cells exist. (A PEP 523 callback receives exactly this.)"""

    name: str
    locals: dict[str, str]
    globals_read: list[str]
    freevars: tuple[str, ...]
    lasti: int

    def __str__(self) -> str:
        locs = ", ".join(f"{k}={v}" for k, v in self.locals.items())
        return f"frame {self.name}(locals: {locs}; globals read: {', '.join(self.globals_read)}; lasti={self.lasti})"


def short(value: Any) -> str:
    """A deterministic one-word description of a value (tensors by dtype and shape)."""
    try:
        import torch

        if isinstance(value, torch.Tensor):
            return f"Tensor({str(value.dtype).replace('torch.', '')}{list(value.shape)})"
        if isinstance(value, torch.nn.Module):
            return type(value).__name__ + "()"
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, (int, float, str, bool, type(None))):
        return repr(value)
    return type(value).__name__


def frame_view(frame: Any) -> FrameView:
    """Describe a frame object (a ``types.FrameType`` or the PEP 523 hook's frame wrapper)."""
    code = frame.f_code
    globals_read = [n for n in code.co_names if n in frame.f_globals]
    locals_ = {k: short(v) for k, v in frame.f_locals.items()}
    return FrameView(code.co_name, locals_, globals_read, code.co_freevars, frame.f_lasti)
