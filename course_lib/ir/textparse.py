"""Parser for the IR's text form: ``parse(str(fn)) == fn`` (round trip).

Teaches that a textual IR is a real interface (LLVM's ``lib/AsmParser/LLParser.cpp`` reads
what ``AsmWriter.cpp`` prints; MLIR does the same for every dialect). A hand-written lexer
and a recursive-descent parser, one method per grammar rule; errors give line and column.

Grammar (one instruction per line)::

    program  := function+
    function := 'func' NAME '(' [NAME ':' TYPE {',' NAME ':' TYPE}] ')' '->' TYPE '{' block+ '}'
    block    := NAME ':' instr*
    instr    := NAME ':' TYPE '=' rhs | 'store' opnd ',' opnd ',' opnd | 'call' call
              | 'jump' NAME | 'br' opnd ',' NAME ',' NAME | 'ret' [opnd]
    rhs      := OP opnd [',' opnd] | 'phi' '[' opnd ',' NAME ']' {',' ...} | 'load' NAME ',' opnd
              | 'alloc' opnd ',' opnd | call
    call     := 'call' NAME '(' [opnd {',' opnd}] ')'
    opnd     := NAME | NUMBER
"""

from __future__ import annotations

import re

from course_lib.ir.core import (
    BINARY_OPS,
    TYPES,
    UNARY_OPS,
    VOID,
    Alloc,
    BasicBlock,
    Branch,
    Call,
    Const,
    Function,
    Jump,
    Load,
    Op,
    Phi,
    Return,
    Store,
)


class IRParseError(Exception):
    """A syntax error in IR text; ``line`` and ``col`` are 1-based."""

    def __init__(self, msg: str, line: int, col: int):
        self.line, self.col = line, col
        super().__init__(f"line {line}, column {col}: {msg}")


TOKEN = re.compile(
    r"\s*(?:(?P<num>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+|inf|nan)(?![\w.]))"
    r"|(?P<type>list\[(?:int|float)\])|(?P<name>[A-Za-z_$][\w.$]*)|(?P<arrow>->)|(?P<punct>[(){}\[\],:=]))"
)


class _Parser:
    def __init__(self, text: str):
        self.toks = []  # (kind, text, line, col)
        for ln, line in enumerate(text.splitlines(), 1):
            line = line.split(";", 1)[0]  # ';' starts a comment
            pos = 0
            while pos < len(line):
                if line[pos:].strip() == "":
                    break
                m = TOKEN.match(line, pos)
                if m is None or m.end() == pos:
                    col = pos + len(line[pos:]) - len(line[pos:].lstrip()) + 1
                    raise IRParseError(f"unexpected character {line[col - 1]!r}", ln, col)
                kind = m.lastgroup
                start = m.start(kind)
                self.toks.append((kind, m.group(kind), ln, start + 1))
                pos = m.end()
            self.toks.append(("nl", "", ln, len(line) + 1))
        self.toks.append(("eof", "", len(text.splitlines()) + 1, 1))
        self.k = 0

    # --- token helpers
    def peek(self):
        return self.toks[self.k]

    def skip_nl(self):
        while self.peek()[0] == "nl":
            self.k += 1

    def error(self, msg, tok=None):
        kind, text, ln, col = tok or self.peek()
        got = "end of line" if kind == "nl" else "end of input" if kind == "eof" else repr(text)
        raise IRParseError(f"{msg}, got {got}", ln, col)

    def expect(self, text=None, kind=None):
        tok = self.peek()
        if (
            (text is not None and tok[1] != text)
            or (kind is not None and tok[0] != kind)
            or tok[0] in ("nl", "eof")
            and text
        ):
            self.error(f"expected {text!r}" if text else f"expected a {kind}")
        self.k += 1
        return tok[1]

    def accept(self, text):
        if self.peek()[1] == text and self.peek()[0] not in ("nl", "eof"):
            self.k += 1
            return True
        return False

    def name(self):
        return self.expect(kind="name")

    def type_(self):
        tok = self.peek()
        if tok[1] in TYPES + (VOID,):
            self.k += 1
            return tok[1]
        self.error("expected a type (int, float, list[int], list[float], void)")

    def operand(self):
        kind, text, _, _ = self.peek()
        if kind == "num":
            self.k += 1
            if re.fullmatch(r"-?\d+", text):
                return Const(int(text))
            return Const(float(text))
        if kind == "name":
            self.k += 1
            return text
        self.error("expected a variable or a number")

    def end_line(self):
        if self.peek()[0] not in ("nl", "eof"):
            self.error("expected end of line")
        self.skip_nl()

    # --- grammar rules
    def program(self) -> list[Function]:
        fns = []
        self.skip_nl()
        while self.peek()[0] != "eof":
            fns.append(self.function())
            self.skip_nl()
        if not fns:
            self.error("expected 'func'")
        return fns

    def function(self) -> Function:
        self.expect("func")
        name = self.name()
        self.expect("(")
        params = []
        if not self.accept(")"):
            while True:
                p = self.name()
                self.expect(":")
                params.append((p, self.type_()))
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect("->")
        ret = self.type_()
        self.expect("{")
        self.end_line()
        blocks = []
        while not self.accept("}"):
            blocks.append(self.block())
        if not blocks:
            self.error("a function needs at least one block")
        return Function(name, params, ret, blocks)

    def block(self) -> BasicBlock:
        tok = self.peek()
        label = self.name()
        self.expect(":")
        self.end_line()
        b = BasicBlock(label)
        while True:
            tok = self.peek()
            if tok[1] == "}" or (
                tok[0] == "name" and self.toks[self.k + 1][1] == ":" and self.toks[self.k + 2][0] == "nl"
            ):
                break
            if tok[0] == "eof":
                self.error("expected '}'")
            instr = self.instr()
            self.end_line()
            if b.term is not None:
                raise IRParseError(f"instruction after the terminator of block {label}", tok[2], tok[3])
            if instr.is_terminator:
                b.term = instr
            else:
                b.instrs.append(instr)
        if b.term is None:
            self.error(f"block {label} has no terminator (jump, br or ret)")
        return b

    def instr(self):
        tok = self.peek()
        word = tok[1]
        if word == "store":
            self.k += 1
            a = self.name()
            self.expect(",")
            i = self.operand()
            self.expect(",")
            return Store(a, i, self.operand())
        if word == "jump":
            self.k += 1
            return Jump(self.name())
        if word == "br":
            self.k += 1
            c = self.operand()
            self.expect(",")
            t = self.name()
            self.expect(",")
            return Branch(c, t, self.name())
        if word == "ret":
            self.k += 1
            if self.peek()[0] in ("nl", "eof"):
                return Return(None)
            return Return(self.operand())
        if word == "call":
            f, args = self.call()
            return Call(None, VOID, f, args)
        dest = self.name()
        self.expect(":")
        ty = self.type_()
        self.expect("=")
        return self.rhs(dest, ty)

    def call(self):
        self.expect("call")
        f = self.name()
        self.expect("(")
        args = []
        if not self.accept(")"):
            while True:
                args.append(self.operand())
                if self.accept(")"):
                    break
                self.expect(",")
        return f, args

    def rhs(self, dest, ty):
        tok = self.peek()
        op = tok[1]
        if op == "call":
            f, args = self.call()
            return Call(dest, ty, f, args)
        self.k += 1
        if op == "phi":
            inc = {}
            while True:
                self.expect("[")
                v = self.operand()
                self.expect(",")
                inc[self.name()] = v
                self.expect("]")
                if not self.accept(","):
                    return Phi(dest, ty, inc)
        if op == "load":
            a = self.name()
            self.expect(",")
            return Load(dest, ty, a, self.operand())
        if op == "alloc":
            n = self.operand()
            self.expect(",")
            return Alloc(dest, ty, n, self.operand())
        if op in UNARY_OPS:
            return Op(dest, ty, op, [self.operand()])
        if op in BINARY_OPS:
            a = self.operand()
            self.expect(",")
            return Op(dest, ty, op, [a, self.operand()])
        self.error("expected an operation (add, copy, phi, load, call, ...)", tok)


def parse_program(text: str) -> list[Function]:
    """All functions in ``text``, in order; they share one callee table."""
    if not isinstance(text, str):
        raise TypeError(f"the IR parser reads text (str(fn) prints it), got {type(text).__name__}")
    fns = _Parser(text).program()
    table = {f.name: f for f in fns}
    for f in fns:
        f.callees = table
    return fns


def parse(text: str) -> Function:
    """Parse IR text; returns the last function (the earlier ones become its callees)."""
    return parse_program(text)[-1]
