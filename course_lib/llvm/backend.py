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

Every function returns a :class:`ToolOutput`; when ``llc`` is missing it says so instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess

from course_lib import env
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


def llc_path() -> str | None:
    """The newest installed ``llc`` (LLVM 14 or later), or None."""
    tool = tools.find("llc")
    return tool.path if tool else None


def llc_version() -> str | None:
    """``"19.1.7"`` style version of the ``llc`` :func:`llc_path` finds, or None."""
    tool = tools.find("llc")
    return tool.version if tool and llc_path() else None


def _input_file(llvm_text: str) -> str:
    key = hashlib.sha256(llvm_text.encode()).hexdigest()[:16]
    path = env.cache_dir() / f"llc_{key}.ll"
    if not path.exists():
        path.write_text(llvm_text)
    return str(path)


def run_llc(llvm_text: str, *flags: str, triple: str = "x86_64-unknown-linux-gnu", stderr: bool = False) -> ToolOutput:
    """Run ``llc -O2 -mtriple=<triple> <flags> input.ll -o -``; stdout (or stderr) as text."""
    path = llc_path()
    if path is None:
        return ToolOutput(False, MISSING_LLC)
    tool = tools.find("llc")
    extra = tool.flags if tool and tool.path == path else []
    args = [
        path,
        *extra,
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
