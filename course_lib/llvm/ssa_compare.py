"""Our SSA construction against LLVM's: do Module 1's ``to_ssa`` and mem2reg place the same phis?

Teaches: ``llvm/lib/Transforms/Utils/PromoteMemoryToRegister.cpp`` (mem2reg: phis at the
iterated dominance frontier of the stores, *pruned* by liveness, then renaming, then removal of
phis that simplify away) next to Module 1's ``to_ssa`` (Cytron et al. 1991). Position: course IR
-> (course SSA, LLVM IR after mem2reg) -> two sets of ``(block, variable)`` phis.

Both build *pruned* SSA (a phi only where the variable is live-in), but they still make different
choices about which phis are *worth keeping*: mem2reg drops a phi that simplifies to one value
right after renaming, ``to_ssa`` keeps it, and a variable live-in only through another phi gets a
phi nothing else uses. Once both sides are cleaned up the same way (see :func:`prune`), the
placements must agree exactly.

Pruning, to a fixed point:

* **trivially redundant**: every incoming value is the same value ``v`` or the phi itself, so
  the phi *is* ``v``: replace it by ``v`` everywhere and drop it (Braun et al. 2013, §3.1);
* **dead**: no non-phi instruction uses the phi, directly or through other phis.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable


@dataclasses.dataclass
class Phi:
    """One phi: where it is, which source variable it merges, and its incoming values."""

    name: str
    block: str
    var: str
    incoming: list[str]  # value names (constants as their text)


def prune(phis: Iterable[Phi], used: set[str]) -> set[tuple[str, str]]:
    """``{(block, var)}`` of the phis that survive pruning.

    ``used`` is the set of value names that non-phi instructions (including terminators and
    returns) read.
    """
    live = {p.name: dataclasses.replace(p, incoming=list(p.incoming)) for p in phis}
    used = set(used)
    changed = True
    while changed:
        changed = False
        for p in list(live.values()):
            others = {v for v in p.incoming if v != p.name}
            if len(others) <= 1:  # trivially redundant: it is the one other value
                repl = next(iter(others), None)
                del live[p.name]
                for q in live.values():
                    q.incoming = [repl if v == p.name else v for v in q.incoming]
                if p.name in used:
                    used.discard(p.name)
                    if repl is not None:
                        used.add(repl)
                changed = True
        reached, work = set(), [v for v in used if v in live]
        while work:
            v = work.pop()
            if v in reached:
                continue
            reached.add(v)
            work.extend(w for w in live[v].incoming if w in live)
        for name in list(live):
            if name not in reached:
                del live[name]
                changed = True
    return {(p.block, p.var) for p in live.values()}


_PHI = re.compile(r"^\s*%(\"[^\"]+\"|[\w.$-]+) = phi \S+ (.*)$")
_INCOMING = re.compile(r"\[\s*([^,\]]+?)\s*,\s*%(\"[^\"]+\"|[\w.$-]+)\s*\]")
_VALUE = re.compile(r"%(\"[^\"]+\"|[\w.$-]+)")


def llvm_phis(function_text: str, var_of=None) -> tuple[list[Phi], set[str]]:
    """Phis of a printed LLVM function, and the value names its non-phi instructions use.

    ``var_of(phi_name)`` maps mem2reg's phi name back to the source variable; by default
    mem2reg's convention ``<alloca name>.<n>`` is undone (``"v.x.addr.2"`` -> ``"v.x.addr"``).
    """
    var_of = var_of or (lambda name: name.rsplit(".", 1)[0])
    phis, used, block = [], set(), None
    for line in function_text.splitlines():
        if re.match(r"^[\w.$\"-]+:", line):
            block = line.split(":")[0].strip('"')
            continue
        m = _PHI.match(line)
        if m:
            name = m.group(1).strip('"')
            incoming = [v.strip().lstrip("%").strip('"') for v, _ in _INCOMING.findall(m.group(2))]
            phis.append(Phi(name, block, var_of(name), incoming))
        elif line.startswith("  ") and not line.strip().startswith(";"):
            rhs = line.split(" = ", 1)[1] if " = " in line else line
            used.update(v.strip('"') for v in _VALUE.findall(rhs))
    return phis, used


# ----------------------------------------------------------------------------- the two sides


def _source_var(name: str) -> str:
    """``x.3`` (course to_ssa) / ``x.0``, ``n.addr.1`` (mem2reg) -> the variable ``x`` / ``n``."""
    return re.sub(r"\.addr$", "", re.sub(r"\.\d+$", "", name))


def course_phis(fn_ir) -> set[tuple[str, str]]:
    """Module 1's ``to_ssa`` of ``fn_ir``, pruned: ``{(block, variable)}``."""
    from course_lib.ir import core
    from course_lib.llvm.lowering import _ssa_api

    ssa = _ssa_api().to_ssa(fn_ir)
    phis, used = [], set()
    for block in ssa.blocks:
        for ins in block.all():
            if isinstance(ins, core.Phi):
                incoming = [v if isinstance(v, str) else f"const {v}" for v in ins.incoming.values()]
                phis.append(Phi(ins.dest, block.label, _source_var(ins.dest), incoming))
            else:
                used.update(ins.uses())
    return prune(phis, used)


def llvm_mem2reg_phis(fn_ir) -> set[tuple[str, str]]:
    """The clang-style lowering of ``fn_ir`` after LLVM's mem2reg, pruned: ``{(block, variable)}``."""
    from course_lib.llvm import lowering, passes

    text = passes.run_passes(lowering.lower_alloca(fn_ir), ["mem2reg"]).final
    own = next(
        part for part in text.split("\ndefine ")[1:] if part.split("(")[0].split("@")[-1].strip('"') == fn_ir.name
    )
    phis, used = llvm_phis(own.split("\n}")[0], var_of=_source_var)
    return prune(phis, used)


@dataclasses.dataclass
class Comparison:
    """Both placements and where they differ."""

    ours: set[tuple[str, str]]
    llvm: set[tuple[str, str]]

    @property
    def same(self) -> bool:
        return self.ours == self.llvm

    def __str__(self) -> str:
        if self.same:
            return f"same {len(self.ours)} phis: " + ", ".join(f"{v} in {b}" for b, v in sorted(self.ours))
        return f"only ours: {sorted(self.ours - self.llvm)}; only LLVM's: {sorted(self.llvm - self.ours)}"


def compare(fn_ir) -> Comparison:
    """Our SSA vs LLVM's mem2reg on ``fn_ir`` (both pruned)."""
    return Comparison(course_phis(fn_ir), llvm_mem2reg_phis(fn_ir))
