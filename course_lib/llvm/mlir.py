"""Where Triton's LLVM IR comes from: MLIR dialects, lowered step by step to the LLVM dialect.

Teaches: Triton's ``python/triton/compiler/compiler.py`` and
``third_party/nvidia/backend/compiler.py`` (stages ``make_ttir``, ``make_ttgir``,
``make_llir``, ``make_ptx``), MLIR's dialect idea (``tt.*`` Triton ops, ``arith.*``,
``scf.*``, ``ttg.*`` with layouts, then ``llvm.*``), and ``mlir/lib/Target/LLVMIR`` (the
*translation* from the ``llvm`` dialect, still MLIR, to real LLVM IR, after which the NVPTX
back end of :mod:`course_lib.llvm.targets` takes over). Position: Python kernel -> TTIR ->
TTGIR -> LLVM dialect -> LLVM IR -> PTX.

All of it runs without a GPU. There is one Triton pipeline in the course,
:func:`course_lib.triton.compile_stages` (Module 3); this module is Module 2's view of it:
the same compile, read as a walk through MLIR dialects (:meth:`TritonStages.dialects`).
"""

from __future__ import annotations

import dataclasses
import re

import triton
import triton.language as tl

from course_lib import compat
from course_lib.triton.compile import compile_stages as _triton_compile_stages

# Module 3's vector add: one program handles BLOCK elements.
from course_lib.triton.kernels import SIGNATURES, add_kernel

ADD_SIGNATURE = SIGNATURES["add"][1]

#: the stages Module 2 reads, in pipeline order
MLIR_STAGES = ("ttir", "ttgir", "llvm_dialect", "llir", "ptx")


@dataclasses.dataclass
class TritonStages:
    """Every IR of one compile: ``ttir``, ``ttgir``, ``llvm_dialect``, ``llir``, ``ptx``; ``passes`` run."""

    stages: dict[str, str]
    mlir_passes: list[str]

    def __getitem__(self, key: str) -> str:
        return self.stages[key]

    def dialects(self, key: str) -> list[str]:
        """The MLIR dialects whose operations appear in stage ``key`` (``tt``, ``arith``, ``llvm``...)."""
        return sorted(
            set(re.findall(r"= ([a-z_]+)\.[a-z_]+", self.stages[key]))
            | set(re.findall(r"^\s+([a-z_]+)\.[a-z_]+ ", self.stages[key], re.M))
        )


def compile_stages(kernel=add_kernel, signature=None, constexprs=None, arch: int = 90) -> TritonStages:
    """Compile ``kernel`` for ``sm_<arch>`` through :func:`course_lib.triton.compile_stages` and
    keep the MLIR-side stages and the names of the MLIR passes that ran (no GPU needed)."""
    signature = signature or ADD_SIGNATURE
    constexprs = constexprs if constexprs is not None else {"BLOCK": 256}
    result = _triton_compile_stages(kernel, signature, constexprs, target=f"sm_{arch}", passes=True)
    return TritonStages({k: result[k] for k in MLIR_STAGES}, result.pass_names())


# ----------------------------------------------------------------------------- MLIR's structure (03c)


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[0] = x[0] + ... + x[n-1]: a loop over blocks that carries a running sum (``scf.for`` iter_args)."""
    acc = 0.0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    tl.store(out_ptr, acc)


SUM_SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}


@dataclasses.dataclass
class Op:
    """An MLIR operation: its name, result types and the regions it owns."""

    name: str
    results: list[str]
    operands: int
    regions: list[Region]


@dataclasses.dataclass
class Block:
    """A basic block: a label, typed arguments (MLIR's replacement for phis) and a list of ops."""

    label: str
    args: list[str]  # argument types
    ops: list[Op]


@dataclasses.dataclass
class Region:
    """A list of blocks owned by an op (a function body, a loop body, a reduction's combiner)."""

    blocks: list[Block]


def structure(module) -> Op:
    """The op / region / block tree of a live module, read with Triton's own bindings through
    :func:`course_lib.compat.triton_module_ops` (``module.walk``, ``operation.get_block``,
    ``block.get_parent``, ``operation.get_region``, ``block.arg``). Labels come from a counter.

    ``walk`` visits every op once (nested ops before the op holding them); an op names its regions,
    an op knows its block and a block its region, which is enough to rebuild the nesting.
    """
    records = compat.triton_module_ops(module)
    block_ops: dict = {}  # block key -> records of its ops, in order
    region_blocks: dict = {}  # region key -> block keys, in order
    block_args: dict = {}
    for rec in records:
        if rec["block"] is None:
            continue
        if rec["block"] not in block_ops:
            region_blocks.setdefault(rec["region"], []).append(rec["block"])
            block_args[rec["block"]] = rec["block_args"]
        block_ops.setdefault(rec["block"], []).append(rec)
    counter = iter(range(1_000_000))

    def make_op(rec) -> Op:
        return Op(rec["name"], rec["results"], rec["operands"], [make_region(r) for r in rec["regions"]])

    def make_region(key) -> Region:
        out = []
        for b in region_blocks.get(key, []):
            label = f"^bb{next(counter)}"
            out.append(Block(label, block_args[b], [make_op(r) for r in block_ops[b]]))
        return Region(out)

    top = next(rec for rec in records if rec["block"] is None)
    return make_op(top)


def outline(op: Op, depth: int = 0, keep: int = 40) -> str:
    """Indented text of the tree: ops, their regions, blocks with argument types. In each block the
    first ``keep`` ops without regions are listed, the rest counted; ops with regions always show."""
    pad = "  " * depth
    res = f" -> {', '.join(op.results)}" if op.results else ""
    lines = [f"{pad}{op.name}{res}"]
    for k, region in enumerate(op.regions):
        lines.append(f"{pad}  region #{k}")
        for block in region.blocks:
            lines.append(f"{pad}    block {block.label}({', '.join(block.args)})")
            plain = [x for x in block.ops if not x.regions]
            first = {id(x) for x in plain[:keep]}  # by identity: two equal ops are still two ops
            for inner in block.ops:
                if inner.regions or id(inner) in first:
                    lines.append(outline(inner, depth + 3, keep))
            if len(plain) > keep:
                lines.append(f"{pad}      ... and {len(plain) - keep} more ops without regions")
    return "\n".join(lines)


def int_attributes(module, names: tuple[str, ...] = ("start", "end", "axis", "predicate", "value")) -> list:
    """``(op name, {attribute: value})`` for every op of a live module carrying one of the integer
    attributes ``names`` (read with the bindings' ``operation.get_int_attr``, through compat).
    ``arith.cmpi``'s ``predicate`` is an enum: 2 is ``slt``."""
    try:
        return [(rec["name"], rec["attrs"]) for rec in compat.triton_module_ops(module, names) if rec["attrs"]]
    except compat.CompatError:  # Triton 3.6's bindings have no get_int_attr: read the printed module
        return int_attributes_from_text(compat.triton_module_text(module), names)


CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")  # MLIR's arith enum order
_OP = re.compile(r'^\s*(?:%[\w#:, %]+ = )?"?([a-z_]+\.[\w.]+)"?')


def int_attributes_from_text(text: str, names: tuple[str, ...]) -> list:
    """The same records as :func:`int_attributes`, read from MLIR's printed form instead of the
    bindings: ``{name = 32 : i32}`` / ``<{axis = 0 : i32}>`` dictionaries, ``arith.constant 7 : i32``
    (the ``value``) and ``arith.cmpi slt`` (the ``predicate`` enum, printed by name)."""
    out = []
    for line in text.splitlines():
        m = _OP.match(line)
        if not m:
            continue
        op, rest, attrs = m.group(1), line[m.end() :], {}
        for name, value in re.findall(r"\b(\w+) = (-?\d+) : i\d+", rest):
            if name in names:
                attrs[name] = int(value)
        const = re.match(r"\s+(-?\d+) : i\d+", rest) if op == "arith.constant" else None
        if const and "value" in names:
            attrs["value"] = int(const.group(1))
        pred = re.match(r"\s+(\w+),", rest) if op == "arith.cmpi" else None
        if pred and pred.group(1) in CMPI_PREDICATES and "predicate" in names:
            attrs["predicate"] = CMPI_PREDICATES.index(pred.group(1))
        if attrs:
            out.append((op, attrs))
    return out


def count(op: Op) -> dict[str, int]:
    """How many ops, regions, blocks and block arguments the tree holds (the op itself included)."""
    c = {"ops": 1, "regions": len(op.regions), "blocks": 0, "block arguments": 0}
    for region in op.regions:
        for block in region.blocks:
            c["blocks"] += 1
            c["block arguments"] += len(block.args)
            for inner in block.ops:
                for key, value in count(inner).items():
                    c[key] += value
    return c


def nesting_dot(op: Op, keep: int = 3) -> str:
    """Graphviz DOT of the nesting: op (box) -> region (ellipse) -> block (note, with its arguments)
    -> ops. Ops without regions are folded into one "n more ops" node after the first ``keep``."""
    from course_lib.viz import dot_escape

    lines = ["digraph mlir {", "  rankdir=TB; node [fontname=monospace, fontsize=10];"]
    ids = iter(range(1_000_000))

    def add_op(o: Op) -> str:
        me = f"n{next(ids)}"
        res = f"\\n-> {dot_escape(', '.join(o.results), record=False)}" if o.results else ""
        lines.append(f'  {me} [shape=box, style=filled, fillcolor="#dbe9f6", label="{o.name}{res}"];')
        for k, region in enumerate(o.regions):
            rid = f"n{next(ids)}"
            lines.append(f'  {rid} [shape=ellipse, label="region #{k}"];')
            lines.append(f"  {me} -> {rid};")
            for block in region.blocks:
                bid = f"n{next(ids)}"
                args = dot_escape(", ".join(block.args), record=False)
                lines.append(
                    f'  {bid} [shape=note, style=filled, fillcolor="#fdf2d0", label="block {block.label}({args})"];'
                )
                lines.append(f"  {rid} -> {bid};")
                plain = [x for x in block.ops if not x.regions]
                first = {id(x) for x in plain[:keep]}
                shown = [x for x in block.ops if x.regions or id(x) in first]
                for x in shown:
                    lines.append(f"  {bid} -> {add_op(x)};")
                if len(plain) > keep:
                    more = f"n{next(ids)}"
                    lines.append(f'  {more} [shape=plaintext, label="... {len(plain) - keep} more ops"];')
                    lines.append(f"  {bid} -> {more};")
        return me

    add_op(op)
    lines.append("}")
    return "\n".join(lines)


def ops_with_block_arguments(text: str) -> list[str]:
    """The lines of an MLIR / LLVM text that carry values across edges: ``scf.for ... iter_args``,
    block headers with arguments (``^bb1(%0: i32, ...)``), branches passing them, and ``phi``."""
    keep = re.compile(r"scf\.for|scf\.yield|^\s*\^bb\d+\(|cf\.br|cf\.cond_br|llvm\.br|llvm\.cond_br|= phi ")
    return [ln.rstrip() for ln in text.splitlines() if keep.search(ln)]
