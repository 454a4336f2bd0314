"""A custom analysis pass and a custom transform, written in Python over llvmlite's view of IR.

Teaches what a pass in ``llvm/lib/Analysis`` or ``llvm/lib/Transforms`` does, without C++: walk
functions -> blocks -> instructions, build the CFG from terminators, find loops from back edges
(``llvm/lib/Analysis/LoopInfo.cpp`` does the same with a dominator tree), and rewrite
instructions (``InstCombine``'s ``mul x, 2^k -> shl x, k`` lives in
``llvm/lib/Transforms/InstCombine/InstCombineMulDivRem.cpp``). Position: LLVM IR -> facts, and
LLVM IR -> LLVM IR.

llvmlite's binding layer is read-only, so the transform matches on the parsed module
(opcodes, operand kinds, constant values) and rewrites the instruction's printed line, then the
result is parsed and verified again. A real pass would call ``replaceAllUsesWith``.
"""

from __future__ import annotations

import dataclasses
import re

from course_lib import viz
from course_lib.llvm import passes

_LABEL = re.compile(r'label %("[^"]+"|[\w.$-]+)')


def _name(block) -> str:
    return block.name


def cfg(fn) -> dict[str, list[str]]:
    """``{block: [successor blocks in the terminator's order]}`` for one function."""
    out = {}
    for b in fn.blocks:
        term = list(b.instructions)[-1]
        out[_name(b)] = [s.strip('"') for s in _LABEL.findall(str(term))]
    return out


def dominators(succ: dict[str, list[str]], entry: str) -> dict[str, set[str]]:
    """Dominator sets by the iterative data-flow algorithm: Dom(b) = {b} ∪ ⋂ Dom(preds)."""
    blocks = list(succ)
    preds = {b: [p for p in blocks if b in succ[p]] for b in blocks}
    dom = {b: set(blocks) for b in blocks}
    dom[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for b in blocks:
            if b == entry:
                continue
            ps = [dom[p] for p in preds[b]]
            new = {b} | (set.intersection(*ps) if ps else set())
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


@dataclasses.dataclass(frozen=True)
class Loop:
    """A natural loop: the target of a back edge (header) and the blocks that reach the latch."""

    header: str
    latch: str
    blocks: frozenset[str]


def find_loops(fn) -> list[Loop]:
    """Natural loops of ``fn``: an edge ``latch -> header`` where ``header`` dominates ``latch``."""
    succ = cfg(fn)
    entry = next(iter(succ))
    dom = dominators(succ, entry)
    preds = {b: [p for p in succ if b in succ[p]] for b in succ}
    loops = []
    for latch, targets in succ.items():
        for header in targets:
            if header in dom[latch]:
                body, work = {header, latch}, [latch]
                while work:
                    for p in preds[work.pop()]:
                        if p not in body:
                            body.add(p)
                            work.append(p)
                loops.append(Loop(header, latch, frozenset(body)))
    return sorted(loops, key=lambda lp: (lp.header, lp.latch))


CATEGORIES = {
    "memory": {"load", "store", "alloca", "getelementptr"},
    "arith": {"add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "shl", "lshr", "ashr", "and", "or", "xor",
              "fadd", "fsub", "fmul", "fdiv", "fneg"},
    "compare": {"icmp", "fcmp", "select"},
    "control": {"br", "ret", "switch", "phi", "call"},
}  # fmt: skip


def category(opcode: str) -> str:
    return next((c for c, ops in CATEGORIES.items() if opcode in ops), "other")


def instruction_mix(module) -> dict[str, dict[str, int]]:
    """``{"fn/block": {category: count}}``: the analysis pass (one entry per block, in order)."""
    mod = passes.parse(module)
    out = {}
    for fn in mod.functions:
        for b in fn.blocks:
            mix: dict[str, int] = {}
            for ins in b.instructions:
                c = category(ins.opcode)
                mix[c] = mix.get(c, 0) + 1
            out[f"{fn.name}/{_name(b)}"] = dict(sorted(mix.items()))
    return out


def report(module) -> viz.TableView:
    """The instruction mix per block, with each block's loop depth."""
    mod = passes.parse(module)
    rows = []
    for fn in mod.functions:
        if fn.is_declaration:
            continue
        loops = find_loops(fn)
        for b in fn.blocks:
            mix: dict[str, int] = {}
            for ins in b.instructions:
                mix[category(ins.opcode)] = mix.get(category(ins.opcode), 0) + 1
            depth = sum(1 for lp in loops if _name(b) in lp.blocks)
            rows.append((fn.name, _name(b), depth, *(mix.get(c, 0) for c in [*CATEGORIES, "other"])))
    return viz.table(rows, ["function", "block", "loop depth", *CATEGORIES, "other"])


# ----------------------------------------------------------------------------- the transform

# opcode -> (new opcode, how the constant 2^k becomes the new operand). Valid for unsigned
# division and remainder only: sdiv rounds toward zero, an arithmetic shift rounds down.
STRENGTH_RULES = {
    "mul": ("shl", lambda k: k),
    "udiv": ("lshr", lambda k: k),
    "urem": ("and", lambda k: (1 << k) - 1),
}


def _power_of_two(value: int) -> int | None:
    return value.bit_length() - 1 if value > 0 and value & (value - 1) == 0 else None


@dataclasses.dataclass
class Rewrite:
    function: str
    before: str
    after: str


def reference_rule(opcode: str, constant: int) -> tuple[str, int] | None:
    """``(new opcode, new constant)`` for ``<opcode> x, constant``, or None: :data:`STRENGTH_RULES`."""
    rule = STRENGTH_RULES.get(opcode)
    k = _power_of_two(constant)
    return None if rule is None or k is None else (rule[0], rule[1](k))


def strength_reduce(module, rule=reference_rule) -> tuple[str, list[Rewrite]]:
    """Replace ``mul/udiv/urem x, 2^k`` by ``shl/lshr x, k`` / ``and x, 2^k-1``.

    Returns the new module text (parsed and verified) and the list of rewrites. Only the
    second operand is matched (InstCombine canonicalises constants to the right first).
    ``rule(opcode, constant)`` decides each rewrite (a lab hands its own in).
    """
    mod = passes.parse(module)
    text = str(mod)
    rewrites = []
    for fn in mod.functions:
        for b in fn.blocks:
            for ins in b.instructions:
                ops = list(ins.operands)
                if len(ops) != 2 or not ops[1].is_constant or "x" in str(ops[1].type):
                    continue
                if ops[1].value_kind.name != "constant_int":
                    continue
                decision = rule(ins.opcode, ops[1].get_constant_value(signed_int=False))
                if decision is None:
                    continue
                old = str(ins).strip()
                new = _rewrite_line(old, ins.opcode, decision[0], decision[1])
                if new != old:
                    rewrites.append(Rewrite(fn.name, old, new))
                    text = text.replace(old, new, 1)
    out = passes.parse(text)  # verifies
    return str(out), rewrites


def _rewrite_line(line: str, opcode: str, new_opcode: str, constant: int) -> str:
    # '%r = mul nuw i64 %x, 8'  ->  '%r = shl i64 %x, 3'   (flags dropped: always correct)
    m = re.match(r"^(%\S+ = )" + opcode + r"( (?:nuw |nsw |exact )*)(\w+) (.+), (-?\d+)$", line)
    if not m:
        return line
    return f"{m.group(1)}{new_opcode} {m.group(3)} {m.group(4)}, {constant}"
