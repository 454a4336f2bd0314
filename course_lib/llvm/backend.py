"""LLVM's back end, stage by stage: LLVM IR -> SelectionDAG -> MachineIR -> MCInst -> assembly.

Teaches: ``llvm/lib/CodeGen/SelectionDAG/SelectionDAGISel.cpp`` (instruction selection),
``llvm/lib/CodeGen/TargetPassConfig.cpp`` (the order of the codegen passes),
``llvm/lib/CodeGen/RegAllocGreedy.cpp`` and ``llvm/lib/MC`` (the MCInst layer that prints
assembly and encodes bytes). Position: LLVM IR -> machine code.

We drive the real command-line tool ``llc`` (``-print-after-all``, ``-stop-after=<pass>``,
``-asm-show-inst``), because llvmlite only exposes the end result. ``llc`` comes with the
system's LLVM package (Debian: ``llvm-19``; the newest installed one is used, see
:mod:`course_lib.llvm.tools`), whose version may be older than llvmlite's LLVM, so the input
here is simple hand-written or IR-builder text, which older LLVMs read.

The SelectionDAG itself is printed only by debug builds of llc (``-debug-only=isel``,
``-view-isel-dags``; release llc 14 and 19 reject both). So :func:`selection_dag` rebuilds the DAG
of one block the way ``SelectionDAGBuilder.cpp`` does, from the IR llc hands to isel
(:func:`isel_input`, ``-print-isel-input``), and :func:`match_selection` pairs its nodes with
the MachineInstrs llc really selected (``-stop-after=finalize-isel``).

Every function returns a :class:`ToolOutput`; when ``llc`` is missing it says so instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess

from course_lib import env, viz
from course_lib.llvm import tools

MISSING_LLC = tools.missing("llc", "the back-end walkthrough is skipped")

# The stages a learner follows, as llc pass names (-stop-after / -print-after take these).
STAGES = [
    ("LLVM IR entering the back end", "codegenprepare"),
    ("MachineIR after instruction selection (SSA, virtual registers)", "finalize-isel"),
    ("after PHI elimination and two-address rewriting", "twoaddressinstruction"),
    ("after register allocation (physical registers)", "virtregrewriter"),
    ("after prologue/epilogue insertion", "prologepilog"),
]


@dataclasses.dataclass(frozen=True)
class ToolOutput:
    """What ``llc`` printed (``text``), or why it could not run (``ok`` False)."""

    ok: bool
    text: str
    command: str = ""

    def __str__(self) -> str:
        return self.text


def llc_tool() -> tools.Tool | None:
    """The newest installed ``llc`` (LLVM 14 or later), or None."""
    return tools.find("llc")


def llc_path() -> str | None:
    tool = llc_tool()
    return tool.path if tool else None


def llc_version() -> str | None:
    """``"19.1.7"`` style version of the installed ``llc``, or None."""
    tool = llc_tool()
    return tool.version if tool else None


def _input_file(llvm_text: str) -> str:
    key = hashlib.sha256(llvm_text.encode()).hexdigest()[:16]
    path = env.cache_dir() / f"llc_{key}.ll"
    if not path.exists():
        path.write_text(llvm_text)
    return str(path)


def run_llc(llvm_text: str, *flags: str, triple: str = "x86_64-unknown-linux-gnu", stderr: bool = False) -> ToolOutput:
    """Run ``llc -O2 -mtriple=<triple> <flags> input.ll -o -``; stdout (or stderr) as text."""
    tool = llc_tool()
    if tool is None:
        return ToolOutput(False, MISSING_LLC)
    args = [
        tool.path,
        *tool.flags,
        "-O2",
        f"-mtriple={triple}",
        *flags,
        _input_file(tools.downgrade_ir(str(llvm_text))),
        "-o",
        "-",
    ]
    proc = subprocess.run(args, capture_output=True, text=True)
    shown = "llc -O2 " + " ".join([f"-mtriple={triple}", *flags]) + " input.ll -o -"
    if proc.returncode != 0:
        return ToolOutput(False, f"llc failed:\n{proc.stderr.strip()}", shown)
    return ToolOutput(True, _scrub(proc.stderr if stderr else proc.stdout), shown)


def _scrub(text: str) -> str:
    """Drop lines naming the cache file, so output is the same on every machine."""
    return "\n".join(ln for ln in text.splitlines() if "llc_" not in ln and "ModuleID" not in ln) + "\n"


def stop_after(llvm_text: str, pass_name: str, **kw) -> ToolOutput:
    """MachineIR (``.mir``, YAML + code) after codegen pass ``pass_name`` (``-stop-after``)."""
    return run_llc(llvm_text, f"-stop-after={pass_name}", **kw)


def print_after(llvm_text: str, pass_name: str, **kw) -> ToolOutput:
    """The dump ``-print-after=<pass>`` writes (IR for IR passes, MachineIR for machine passes)."""
    out = run_llc(llvm_text, f"-print-after={pass_name}", stderr=True, **kw)
    if not out.ok:
        return out
    return ToolOutput(True, out.text, out.command.replace(" -o -", " -o /dev/null"))


def pass_names(llvm_text: str, **kw) -> ToolOutput:
    """The codegen pipeline, one ``(pass-name)`` per line, from ``-print-after-all``."""
    out = run_llc(llvm_text, "-print-after-all", stderr=True, **kw)
    if not out.ok:
        return out
    names = re.findall(r"IR Dump After (.+?) \((\S+)\)", out.text)
    return ToolOutput(True, "\n".join(f"{short:32s} {long}" for long, short in names) + "\n", out.command)


def machine_code(dump: str) -> str:
    """Only the blocks and instructions of a MachineIR dump (drops liveness and CFG notes)."""
    skip = ("successors", "liveins", ";", "#", "Function Live Ins", "*** ")
    keep = []
    for line in dump.splitlines():
        s = re.sub(r"^\d+B\s+", "", line.strip())
        if s and not s.startswith(skip):
            keep.append(s if s.startswith("bb.") else "  " + s)
    return "\n".join(keep) + "\n"


def mcinst(llvm_text: str, **kw) -> ToolOutput:
    """Assembly with each instruction's MCInst (opcode enum and operands) as a comment."""
    return run_llc(llvm_text, "-asm-show-inst", **kw)


def walkthrough(llvm_text: str, **kw) -> list[tuple[str, ToolOutput]]:
    """``[(stage title, dump), ...]`` for every entry of :data:`STAGES`, then MCInst assembly."""
    out = [(title, print_after(llvm_text, name, **kw)) for title, name in STAGES]
    out.append(("MCInst (what the assembly printer and the encoder see)", mcinst(llvm_text, **kw)))
    return out


# ----------------------------------------------------------------------------- SelectionDAG
#
# Release builds of llc (Debian's llc-14 and llc-19 included) have no -debug-only=isel and no
# -view-isel-dags, so they cannot show the DAG. The course rebuilds it for one basic block, the
# way llvm/lib/CodeGen/SelectionDAG/SelectionDAGBuilder.cpp does before any DAG combine:
#   * every value defined in another block (arguments, phis, instructions) enters through
#     CopyFromReg of its virtual register; values used in other blocks leave through CopyToReg;
#   * loads hang off the current root ("chain") and are collected as pending; a store first
#     merges the pending loads with a TokenFactor, and becomes the new root;
#   * the terminator takes the "control root": the root merged with every pending CopyToReg.
# Simplified: one x86-64 flavour (return value in $rax/$eax/$xmm0, i8 shift amounts), no calls,
# no aggregates, leaf nodes named after the IR value instead of LLVM's numbered vregs.

BINARY = {"add": "add", "sub": "sub", "mul": "mul", "and": "and", "or": "or", "xor": "xor", "shl": "shl",
          "lshr": "srl", "ashr": "sra", "sdiv": "sdiv", "udiv": "udiv", "srem": "srem", "urem": "urem",
          "fadd": "fadd", "fsub": "fsub", "fmul": "fmul", "fdiv": "fdiv"}  # fmt: skip
CASTS = {"sext": "sign_extend", "zext": "zero_extend", "trunc": "truncate", "sitofp": "sint_to_fp",
         "fptosi": "fp_to_sint", "fpext": "fp_extend", "fptrunc": "fp_round"}  # fmt: skip
SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "float": 4, "double": 8, "ptr": 8}
RETURN_REGISTER = {"i64": "$rax", "ptr": "$rax", "i32": "$eax", "i16": "$ax", "i8": "$al", "i1": "$al",
                   "double": "$xmm0", "float": "$xmm0"}  # fmt: skip
CONDITION_CODES = {"slt": "lt", "sgt": "gt", "sle": "le", "sge": "ge"}  # icmp slt -> setlt; ult -> setult
LEAVES = ("EntryToken", "Constant", "Register", "BasicBlock", "CondCode")


@dataclasses.dataclass(frozen=True)
class SDNode:
    """One node: ``t<id>: <types> = <op><detail> <operands>``, as LLVM's DAG dumps print it."""

    id: int
    op: str  # ISD opcode name: "add", "load", "CopyFromReg", "Constant", ...
    types: tuple[str, ...]  # result types; "ch" is a chain (ordering) result, "glue" ties two nodes
    operands: tuple[tuple[int, int], ...] = ()  # (node id, result number)
    detail: str = ""  # "<1>" for a constant, "%i" for a register, "setlt", "%bb.body", "(load (s64))"
    ir: str = ""  # the IR value the node computes, for the matching table

    def __str__(self) -> str:
        ops = ", ".join(f"t{n}" + (f":{r}" if r else "") for n, r in self.operands)
        return f"t{self.id}: {','.join(self.types)} = {self.op}{self.detail}" + (f" {ops}" if ops else "")


@dataclasses.dataclass
class SelectionDAG:
    """The DAG of one block (the course's reconstruction; see the comment above)."""

    function: str
    block: str
    nodes: list[SDNode]
    root: int

    def users(self, node_id: int) -> list[SDNode]:
        return [n for n in self.nodes if any(op == node_id for op, _ in n.operands)]

    def is_chain_edge(self, user: SDNode, k: int) -> bool:
        node_id, result = user.operands[k]
        return self.nodes[node_id].types[result] in ("ch", "glue")

    def __str__(self) -> str:
        head = f"SelectionDAG of {self.function}:{self.block} ({len(self.nodes)} nodes; rebuilt by the course)"
        return "\n".join([head, *(f"  {n}" for n in self.nodes), f"  root: t{self.root}"]) + "\n"

    def dot(self) -> str:
        """DOT text: value edges black, chain edges dashed blue, glue red (as ``-view-isel-dags``)."""
        out = ["digraph dag {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
               f'  label="{self.function}:{self.block}: SelectionDAG as the course rebuilds it (not printed by llc)"; labelloc=t;']  # fmt: skip
        for n in self.nodes:
            leaf = n.op in LEAVES and n.op != "EntryToken"
            label = viz.dot_escape(f"t{n.id}: {n.op}{n.detail}\n{','.join(n.types)}", record=False).replace(
                "\\l", "\\n"
            )
            fill = "#eeeeee" if leaf else "#ffe4b3" if "ch" in n.types else "#cfe8ff"
            out.append(f'  t{n.id} [label="{label}", fillcolor="{fill}"{", shape=ellipse" if leaf else ""}];')
        for n in self.nodes:
            for src, res in n.operands:
                kind = self.nodes[src].types[res]
                style = {"ch": ' [style=dashed, color="#1f5fbf"]', "glue": ' [color="#c0392b"]'}.get(kind, "")
                out.append(f"  t{src} -> t{n.id}{style};")
        return "\n".join([*out, "}"])

    def graph(self) -> viz.GraphView:
        return viz.graph(self.dot())

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.graph()._repr_mimebundle_(include, exclude)


class _Builder:
    """SelectionDAGBuilder in miniature: one ``visit_<opcode>`` per IR instruction kind."""

    def __init__(self, fn, block):
        self.fn, self.block, self.nodes, self.cse, self.values = fn, block, [], {}, {}
        self.entry = self.node("EntryToken", ("ch", "glue"))
        self.root, self.pending_loads, self.pending_exports = self.entry, [], []
        names = [b.name for b in fn.blocks]
        k = names.index(block.name)
        self.next_block = names[k + 1] if k + 1 < len(names) else None
        self.exported = _values_used_elsewhere(fn, block)

    def node(self, op, types, operands=(), detail="", ir="", cse=True) -> tuple[int, int]:
        key = (op, types, tuple(operands), detail)
        if cse and key in self.cse:
            return self.cse[key]
        n = SDNode(len(self.nodes), op, tuple(types), tuple(operands), detail, ir)
        self.nodes.append(n)
        self.cse[key] = (n.id, 0)
        return (n.id, 0)

    def value(self, v) -> tuple[int, int]:
        """The DAG value for IR operand ``v``: a constant, a value of this block, or CopyFromReg."""
        ty = _mvt(v.type)
        if v.is_constant:
            return self.node("Constant", (ty,), detail=f"<{_constant(v)}>")
        name = _name(v)
        if name not in self.values:
            reg = self.node("Register", (ty,), detail=f" {name}")
            self.values[name] = (self.node("CopyFromReg", (ty, "ch"), [self.entry, reg], ir=name)[0], 0)
        return self.values[name]

    def flush(self, pending) -> tuple[int, int]:
        """LLVM's ``updateRoot``: merge the pending chains (and the root) into one."""
        chains = [*pending, *([] if self.root == self.entry or self.root in pending else [self.root])]
        pending.clear()
        if chains:
            self.root = chains[0] if len(chains) == 1 else self.node("TokenFactor", ("ch",), chains, cse=False)
        return self.root

    def control_root(self) -> tuple[int, int]:
        return self.flush(self.pending_exports)

    def export(self, name: str, ty: str, val: tuple[int, int]) -> None:
        reg = self.node("Register", (ty,), detail=f" {name}")
        self.pending_exports.append(self.node("CopyToReg", ("ch",), [self.entry, reg, val], ir=name, cse=False))

    def build(self) -> SelectionDAG:
        for ins in self.block.instructions:
            if ins.opcode == "phi":
                continue
            if ins.opcode in ("br", "ret", "switch"):
                self.phis_in_successors()
            visit = getattr(self, f"visit_{ins.opcode}", None)
            if visit is None and ins.opcode not in BINARY and ins.opcode not in CASTS:
                raise ValueError(f"the course's DAG builder does not handle {ins.opcode!r}: {str(ins).strip()}")
            val = visit(ins) if visit else self.visit_simple(ins)
            if val is not None:
                self.values[_name(ins)] = val
                if _name(ins) in self.exported:
                    self.export(_name(ins), _mvt(ins.type), val)
        self.control_root()
        return SelectionDAG(self.fn.name, self.block.name, self.nodes, self.root[0])

    def visit_simple(self, ins):
        op = BINARY.get(ins.opcode) or CASTS[ins.opcode]
        return self.node(op, (_mvt(ins.type),), [self.value(o) for o in ins.operands], ir=_name(ins))

    def visit_icmp(self, ins):
        pred = re.search(r"[if]cmp (?:samesign )?(\w+)", str(ins)).group(1)
        cc = self.node("CondCode", ("ch",), detail=f" set{CONDITION_CODES.get(pred, pred)}")
        a, b = [self.value(o) for o in ins.operands]
        return self.node("setcc", ("i1",), [a, b, cc], ir=_name(ins))

    visit_fcmp = visit_icmp

    def visit_select(self, ins):
        return self.node("select", (_mvt(ins.type),), [self.value(o) for o in ins.operands], ir=_name(ins))

    def visit_getelementptr(self, ins):
        # SelectionDAGBuilder::visitGetElementPtr: base + index * size, a shl for power-of-two sizes
        elem = re.search(r"getelementptr (?:inbounds |nuw |nusw )*([\w.]+),", str(ins)).group(1)
        operands = list(ins.operands)
        if elem not in SIZES or len(operands) != 2:
            raise ValueError(f"the course's DAG builder handles one-index GEPs over scalars only: {str(ins).strip()}")
        base, size = self.value(operands[0]), SIZES[elem]
        index = None if operands[1].is_constant else self.value(operands[1])
        if index is None:
            offset = self.node("Constant", ("i64",), detail=f"<{_constant(operands[1]) * size}>")
        elif size == 1:
            offset = index
        elif size & (size - 1) == 0:
            amount = self.node("Constant", ("i8",), detail=f"<{size.bit_length() - 1}>")  # x86 shift amounts are i8
            offset = self.node("shl", ("i64",), [index, amount], ir=_name(ins) + " (index * size)")
        else:
            offset = self.node("mul", ("i64",), [index, self.node("Constant", ("i64",), detail=f"<{size}>")])
        return self.node("add", ("i64",), [base, offset], ir=_name(ins))

    def visit_load(self, ins):
        ty = _mvt(ins.type)
        n = self.node("load", (ty, "ch"), [self.root, self.value(next(iter(ins.operands)))],
                      detail=f"<(load (s{SIZES.get(ty, 8) * 8}))>", ir=_name(ins), cse=False)  # fmt: skip
        self.pending_loads.append((n[0], 1))
        return n

    def visit_store(self, ins):
        chain = self.flush(self.pending_loads)
        value, pointer = list(ins.operands)
        ty = str(value.type)
        self.root = self.node("store", ("ch",), [chain, self.value(value), self.value(pointer)],
                              detail=f"<(store (s{SIZES.get(ty, 8) * 8}))>", ir="store " + _name(value), cse=False)  # fmt: skip
        return None

    def visit_br(self, ins):
        bb = lambda name: self.node("BasicBlock", ("ch",), detail=f" %{name}")  # noqa: E731
        operands = list(ins.operands)
        if len(operands) == 1:  # unconditional: a fall-through to the next block needs no node
            target = operands[0].name
            if target != self.next_block:
                self.root = self.node("br", ("ch",), [self.control_root(), bb(target)], ir="br", cse=False)
            return None
        cond, false, true = operands[0], operands[1].name, operands[2].name
        c = self.value(cond)
        if true == self.next_block:  # invert, so the likely fall-through is the next block
            true, false = false, true
            c = self.node("xor", ("i1",), [c, self.node("Constant", ("i1",), detail="<-1>")], ir=f"not {_name(cond)}")
        br = self.node("brcond", ("ch",), [self.control_root(), c, bb(true)], ir="br", cse=False)
        self.root = self.node("br", ("ch",), [br, bb(false)], ir="br", cse=False)  # emitted even for fall-through
        return None

    def visit_ret(self, ins):
        chain = self.control_root()
        ops = [chain]
        operands = list(ins.operands)
        if operands:
            ty = _mvt(operands[0].type)
            reg = self.node("Register", (ty,), detail=f" {RETURN_REGISTER[str(operands[0].type)]}")
            copy = self.node("CopyToReg", ("ch", "glue"), [chain, reg, self.value(operands[0])], ir="return value")
            ops = [copy, (copy[0], 1)]
        self.root = self.node("X86ISD::RET_GLUE", ("ch",), ops, ir="ret", cse=False)
        return None

    def phis_in_successors(self) -> None:
        """A phi in a successor that takes a constant from this block: copy it into the phi's register."""
        for succ in _successors(self.fn, self.block):
            for phi in (i for i in succ.instructions if i.opcode == "phi"):
                for v, b in zip(phi.operands, phi.incoming_blocks):
                    if b.name == self.block.name and v.is_constant:
                        self.export(_name(phi), _mvt(phi.type), self.value(v))


def _mvt(ty) -> str:
    """The DAG's value type for an IR type: a pointer is just a 64-bit integer to the back end."""
    return "i64" if str(ty) == "ptr" else str(ty)


def _name(v) -> str:
    if v.name:
        return "%" + v.name
    m = re.match(r"\s*(%[-\w.]+) =", str(v))
    return m.group(1) if m else str(v).strip()


def _constant(v) -> int:
    value = v.get_constant_value()
    return int(value) if str(v.type) != "i1" else (-1 if value else 0)


def _successors(fn, block) -> list:
    term = list(block.instructions)[-1]
    names = [o.name for o in term.operands if str(o.type) == "label"]
    return [b for b in fn.blocks if b.name in names]


def _values_used_elsewhere(fn, block) -> set[str]:
    """Values defined in ``block`` that another block, or any phi, reads: they need CopyToReg."""
    here = {_name(i) for i in block.instructions if str(i.type) != "void"}
    out = set()
    for b in fn.blocks:
        for ins in b.instructions:
            if b.name != block.name or ins.opcode == "phi":
                out |= {_name(o) for o in ins.operands if not o.is_constant and _name(o) in here}
    return out


def selection_dag(module, function: str, block: str) -> SelectionDAG:
    """The SelectionDAG of ``function``'s block ``block`` (IR text or a module), rebuilt by the course.

    Feed it :func:`isel_input` to see the block exactly as llc's instruction selector gets it
    (after CodeGenPrepare and loop strength reduction have rewritten the IR).
    """
    from course_lib.llvm import passes

    fn = passes.parse(module).get_function(function)
    blocks = {b.name: b for b in fn.blocks}
    if block not in blocks:
        raise ValueError(f"no block {block!r} in @{function}; blocks: {list(blocks)}")
    return _Builder(fn, blocks[block]).build()


def chain_user_ops(dag: SelectionDAG) -> list[str]:
    """02b, exercise 5's reference: sorted opcodes of the nodes with a chain (or glue) operand."""
    return sorted(n.op for n in dag.nodes if any(dag.nodes[i].types[r] in ("ch", "glue") for i, r in n.operands))


def isel_input(llvm_text: str, **kw) -> ToolOutput:
    """The IR llc hands to instruction selection (``-print-isel-input``), as module text."""
    out = run_llc(llvm_text, "-print-isel-input", stderr=True, **kw)
    if not out.ok:
        return out
    body = re.sub(r"\*\*\* Final LLVM Code input to ISel \*\*\*", "", out.text).strip() + "\n"
    return ToolOutput(True, body, out.command.replace(" -o -", " -o /dev/null"))


# ----------------------------------------------------------------------------- DAG node -> selected MachineInstr

# What x86-64 instruction selection turns each ISD node into (opcode name patterns in the MIR).
X86_SELECTED = {
    "add": r"(ADD|INC|LEA)", "sub": r"(SUB|DEC|NEG)", "mul": r"(IMUL|LEA|SHL)", "and": r"AND", "or": r"OR",
    "xor": r"(XOR|NOT)", "shl": r"(SHL|ADD|LEA)", "srl": r"SHR", "sra": r"SAR", "sdiv": r"IDIV", "udiv": r"DIV",
    "srem": r"IDIV", "urem": r"DIV", "fadd": r"V?ADDS[SD]", "fsub": r"V?SUBS[SD]", "fmul": r"V?MULS[SD]",
    "fdiv": r"V?DIVS[SD]", "setcc": r"(CMP|SUB|TEST)", "select": r"CMOV", "sign_extend": r"MOVSX",
    "zero_extend": r"(MOVZX|MOV32rr|SUBREG_TO_REG)", "load": r"MOV\w*rm", "store": r"MOV\w*m[ri]",
    "brcond": r"JCC", "br": r"JMP", "X86ISD::RET_GLUE": r"RET",
}  # fmt: skip
ARITHMETIC = ("add", "sub", "mul", "and", "or", "xor", "shl", "srl", "sra", "sdiv", "udiv", "srem", "urem",
              "fadd", "fsub", "fmul", "fdiv", "setcc", "select", "sign_extend", "zero_extend")  # fmt: skip


def mir_block(mir: str, block: str) -> list[str]:
    """The instructions of block ``block`` in a ``-stop-after=finalize-isel`` dump (``bb.2.body``)."""
    out, inside = [], False
    for line in mir.splitlines():
        s = line.strip()
        if re.match(r"bb\.\d+(\.[-\w.]+)?:", s):
            inside = s.split(":")[0].split(".", 2)[-1] == block
        elif inside and s and not s.startswith(("successors:", "liveins:", "...", "#", ";")):
            out.append(s)
    return out


def mir_opcode(instr: str) -> str:
    """``%2:gr64 = ADD64rm %1, ...`` -> ``ADD64rm``; ``JCC_1 %bb.3, 13`` -> ``JCC_1``."""
    rhs = instr.split(" = ", 1)[1] if " = " in instr.split(",")[0] else instr
    return rhs.split()[0]


@dataclasses.dataclass(frozen=True)
class Selected:
    """One DAG node and what instruction selection made of it."""

    node: str
    how: str  # "selected", "folded" (into an address or memory operand), "combined" (into a condition code)
    instruction: str  # the MachineInstr it became or was folded into; "" for none


def match_selection(dag: SelectionDAG, mir: list[str]) -> list[Selected]:
    """Pair each DAG node with the finalize-isel MachineInstr it became (see :data:`X86_SELECTED`).

    Nodes are taken in order and each takes the first unused instruction whose opcode fits. Two
    kinds of node get no instruction of their own: address arithmetic used only by loads and
    stores (folded into the x86 addressing mode ``base + index*scale + disp``) and loads used
    by an instruction with a memory operand (``ADD64rm``: folded into it). ``xor c, -1`` in
    front of a ``brcond`` is combined into the branch's condition code.
    """
    users = {n.id: dag.users(n.id) for n in dag.nodes}
    address = _address_nodes(dag, users)
    used: dict[int, str] = {}
    taken: set[int] = set()

    def take(node: SDNode) -> str | None:
        for k, instr in enumerate(mir):
            if k not in taken and re.match(X86_SELECTED[node.op], mir_opcode(instr)):
                taken.add(k)
                return instr
        return None

    for n in dag.nodes:  # everything but loads and addresses first: they may fold into these
        if n.op in X86_SELECTED and n.op != "load" and n.id not in address and not _inverted_branch(n, users):
            instr = take(n)
            if instr:
                used[n.id] = instr
    rows: dict[int, Selected] = {}
    for n in dag.nodes:
        if n.id in used:
            rows[n.id] = Selected(str(n), "selected", used[n.id])
        elif n.op in ("load", "store"):
            # a memory operand of an instruction selected above: ADD64rm (load), ADD32mr (load+op+store)
            near = [*users[n.id], *(dag.nodes[i] for i, _ in n.operands)]
            into = next(
                (used[u.id] for u in near if u.id in used and re.search(r"\d+(rm|mr|mi)", mir_opcode(used[u.id]))), None
            )
            instr = None if into else take(n)
            used[n.id] = into or instr or ""
            rows[n.id] = Selected(str(n), "folded" if into else "selected" if instr else "no instruction", used[n.id])
        elif _inverted_branch(n, users):
            rows[n.id] = Selected(str(n), "combined", used.get(users[n.id][0].id, ""))  # into JCC's condition code
        elif n.op in X86_SELECTED and n.id not in address:
            rows[n.id] = Selected(str(n), "no instruction", "")
    for a in sorted(address, reverse=True):  # an address takes the instruction of its load or store
        memory = next(u for u in users[a] if u.id in used or u.id in address)
        rows[a] = Selected(str(dag.nodes[a]), "folded", used.setdefault(a, used.get(memory.id, "")))
    return [rows[k] for k in sorted(rows)]


def unmatched_arithmetic(dag: SelectionDAG, rows: list[Selected]) -> list[str]:
    """Arithmetic nodes that neither became an instruction nor were folded: should be none."""
    arith = {str(n) for n in dag.nodes if n.op in ARITHMETIC}
    return [r.node for r in rows if r.node in arith and r.how == "no instruction"]


def _inverted_branch(n: SDNode, users) -> bool:
    return n.op == "xor" and all(u.op == "brcond" for u in users[n.id]) and n.detail == "" and bool(users[n.id])


def _address_nodes(dag: SelectionDAG, users) -> set[int]:
    """add/shl/mul nodes whose every use is the pointer of a load or store, or another such node."""
    found: set[int] = set()
    for n in reversed(dag.nodes):  # users come after their operands
        if n.op not in ("add", "shl", "mul") or not users[n.id]:
            continue
        if all(_is_pointer_use(u, n.id) or u.id in found for u in users[n.id]):
            found.add(n.id)
    return found


def _is_pointer_use(user: SDNode, node_id: int) -> bool:
    pointer = {"load": 1, "store": 2}.get(user.op)
    return pointer is not None and user.operands[pointer][0] == node_id


def isel_view(llvm_text: str, function: str, block: str, **kw):
    """The DAG of one block next to llc's MachineIR for it and the matching table.

    Returns ``(dag, rows, mir)``: the course's :class:`SelectionDAG` of the block as llc's
    instruction selector receives it, the :class:`Selected` rows, and the block's MachineIR
    after ``finalize-isel``. Without llc the DAG is built from ``llvm_text`` and the rest is empty.
    """
    src = isel_input(llvm_text, **kw)
    dag = selection_dag(src.text if src.ok else llvm_text, function, block)
    if not src.ok:
        return dag, [], []
    mir = mir_block(stop_after(llvm_text, "finalize-isel", **kw).text, block)
    return dag, match_selection(dag, mir), mir


def mcinst_block(llvm_text: str, block: str, **kw) -> str:
    """The ``-asm-show-inst`` lines of the final assembly block that came from IR block ``block``."""
    out = mcinst(llvm_text, **kw)
    if not out.ok:
        return out.text
    lines, inside = [], False
    for line in out.text.splitlines():
        if re.match(r"^(\.LBB\S+:|# %bb\.\d+:)", line):
            inside = line.rstrip().endswith(f"# %{block}")
        elif re.match(r"^\S", line) or line.strip().startswith((".cfi", ".p2align")):
            continue
        if inside:
            lines.append(line)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- register allocators
#: llc's allocators (``-regalloc=``), in ``llvm/lib/CodeGen``: RegAllocFast.cpp (block-local, spills
#: every value live across a block boundary: -O0's choice), RegAllocBasic.cpp (priority queue of
#: live ranges, spills the cheaper one on a conflict), RegAllocGreedy.cpp (the -O1+ default: also
#: splits a live range around its busy region instead of spilling it whole).
REGALLOCS = ("fast", "basic", "greedy")


@dataclasses.dataclass
class RegAllocRow:
    allocator: str
    spills: int  # stores to stack slots llc inserted (its "Spill" comments)
    reloads: int  # loads back from them ("Reload" comments)
    instructions: int  # machine instructions of the module


def regalloc_table(llvm_text: str, triple: str = "x86_64-unknown-linux-gnu") -> list[RegAllocRow]:
    """Compile ``llvm_text`` with each of llc's register allocators; count spills, reloads, instructions.

    Raises ``RuntimeError`` with the install sentence when ``llc`` is missing.
    """
    rows = []
    for ra in REGALLOCS:
        out = run_llc(llvm_text, f"-regalloc={ra}", triple=triple)
        if not out.ok:
            raise RuntimeError(out.text)
        body = [line for line in out.text.splitlines() if line.startswith("\t") and not line.startswith("\t.")]
        rows.append(RegAllocRow(ra, sum("Spill" in x for x in body), sum("Reload" in x for x in body), len(body)))
    return rows
