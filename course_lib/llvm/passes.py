"""LLVM's pass pipelines through llvmlite's *new* pass manager, with a snapshot after each pass.

Teaches: ``llvm/lib/Passes/PassBuilderPipelines.cpp`` (what ``-O1``..``-O3`` run, in order) and
``llvm/include/llvm/IR/PassManager.h`` (the new pass manager). Position: LLVM IR -> LLVM IR.

Two ways in:

* :func:`optimize` / :func:`run_pipeline` build LLVM's default ``O<n>`` pipeline with
  ``PassBuilder(target_machine, PipelineTuningOptions)`` and run it. With ``snapshots=True`` the
  pipeline runs with LLVM's own ``-print-after-all`` switched on and the dumps LLVM writes to
  stderr are captured and split into one :class:`Snapshot` per pass (what ``opt -O3
  -print-after-all`` shows). Passes that changed nothing are marked, so the learner sees which
  few of the ~120 passes did the work.
* :func:`run_passes` runs single passes by name (``mem2reg``, ``instcombine``...), one after
  the other, snapshotting between them.

Where llvmlite 0.50 differs from ``opt``: it exposes no stand-alone ``mem2reg`` (LLVM's
``PromotePass``), GVN, LICM, loop-vectorize or SLP-vectorize. :func:`run_passes` therefore runs
``licm``, ``loop-vectorize`` and ``slp-vectorize`` through the real ``opt`` tool when one is
installed (see :mod:`course_lib.llvm.tools`): the module text goes to ``opt -passes=...`` and
its output is parsed back by llvmlite, so the snapshot, diff and counts are the same as for the
other passes. ``tool="opt"`` sends *every* pass to ``opt``, which gives the true ``mem2reg`` and
``gvn``; with llvmlite alone, ``mem2reg`` runs SROA (which promotes scalar allocas with the same
``PromoteMemToReg`` utility, ``Utils/PromoteMemoryToRegister.cpp``) and ``gvn`` runs NewGVN.
:func:`pass_in_pipeline` shows any pass *in context*, picked out of the O3 snapshots.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm

from course_lib import viz
from course_lib.llvm import tools

_READY = False


def init() -> None:
    """Initialise LLVM's targets once (all of them: x86, NVPTX, AMDGPU...)."""
    global _READY
    if not _READY:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _READY = True


def host_target_machine(opt: int = 3, cpu: str | None = None, features: str | None = None, jit: bool = False):
    """A TargetMachine for this CPU (the pass builder asks it for costs: vector width, etc.)."""
    init()
    target = llvm.Target.from_default_triple()
    cpu = llvm.get_host_cpu_name() if cpu is None else cpu
    features = llvm.get_host_cpu_features().flatten() if features is None else features
    return target.create_target_machine(cpu=cpu, features=features, opt=opt, codemodel="jitdefault" if jit else "small")


class LLVMParseError(ValueError):
    """LLVM IR that LLVM's parser (``LLParser.cpp``) or verifier rejects; says line and column."""


def parse(module) -> llvm.ModuleRef:
    """A fresh, verified ``ModuleRef`` from IR text, an ``llvmlite.ir.Module`` or a ModuleRef.

    Malformed text raises :class:`LLVMParseError` ``line L, column C: <LLVM's message>``."""
    init()
    try:
        mod = llvm.parse_assembly(str(module))
    except RuntimeError as exc:  # llvmlite: "LLVM IR parsing error\n<string>:L:C: error: msg\n<line>\n^"
        m = re.search(r"<string>:(\d+):(\d+): error: (.*)", str(exc))
        where = f"line {m.group(1)}, column {m.group(2)}: {m.group(3)}" if m else str(exc).strip()
        raise LLVMParseError(f"LLVM IR does not parse: {where}") from None
    try:
        mod.verify()
    except RuntimeError as exc:
        raise LLVMParseError(f"LLVM IR parses but does not verify: {str(exc).strip()}") from None
    return mod


# ----------------------------------------------------------------------------- counting


def count_instructions(module) -> int:
    """Number of instructions in all function bodies of ``module`` (text or ModuleRef)."""
    mod = module if isinstance(module, llvm.ModuleRef) else parse(module)
    return sum(len(list(b.instructions)) for f in mod.functions for b in f.blocks)


def opcode_counts(module) -> dict[str, int]:
    """``{opcode: count}`` over the whole module, sorted by opcode."""
    mod = module if isinstance(module, llvm.ModuleRef) else parse(module)
    counts: dict[str, int] = {}
    for f in mod.functions:
        for b in f.blocks:
            for ins in b.instructions:
                counts[ins.opcode] = counts.get(ins.opcode, 0) + 1
    return dict(sorted(counts.items()))


_INSTR = re.compile(r"^\s+(%[\w.\"-]+ = )?[a-z]")


def count_text_instructions(text: str) -> int:
    """Instructions in a printed function or module (indented lines that start an instruction)."""
    return sum(1 for line in text.splitlines() if _INSTR.match(line) and not line.strip().startswith(";"))


# ----------------------------------------------------------------------------- O-level pipelines


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The IR of one function right after one pass ran (``-print-after-all``)."""

    index: int
    pass_name: str
    scope: str  # what the pass ran on: a function, a loop, a module
    text: str
    changed: bool
    instructions: int


@dataclasses.dataclass
class PipelineResult:
    """The optimised module text, plus a snapshot after every pass (when asked for)."""

    level: int
    before: str
    after: str
    snapshots: list[Snapshot]

    def changed(self) -> list[Snapshot]:
        """Only the passes that changed the IR."""
        return [s for s in self.snapshots if s.changed]

    def table(self, only_changed: bool = True) -> viz.TableView:
        """Per-pass instruction counts, as a table."""
        rows = [
            (s.index, s.pass_name, s.scope, s.instructions, "yes" if s.changed else "")
            for s in (self.changed() if only_changed else self.snapshots)
        ]
        return viz.table(rows, ["#", "pass", "on", "instructions after", "changed"], title=f"O{self.level} pipeline")

    def diff(self, index: int) -> viz.DiffView:
        """What pass number ``index`` did: the diff from the snapshot before it to its own."""
        snap = self.snapshots[index]
        prev = _previous_text(self.snapshots, index, self.before)
        return viz.diff(prev, snap.text, lang="llvm", titles=("before " + snap.pass_name, "after " + snap.pass_name))

    def __str__(self) -> str:
        return str(self.table())


def _pipeline(level: int, tm, vectorize: bool):
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = vectorize and level >= 2
    pto.slp_vectorization = vectorize and level >= 2
    pto.loop_unrolling = level >= 2
    pb = llvm.create_pass_builder(tm, pto)
    return pb, pb.getModulePassManager()


def optimize(module, level: int = 3, tm=None, vectorize: bool = True) -> llvm.ModuleRef:
    """Run LLVM's default ``O<level>`` pipeline on a copy of ``module``; return the new ModuleRef.

    ``module``: IR text, an ``llvmlite.ir.Module`` (e.g. from :func:`course_lib.llvm.lower`) or
    a ModuleRef (not modified). The result prints as LLVM IR with ``str()``.
    """
    mod = parse(module)
    tm = tm or host_target_machine(opt=level)
    pb, mpm = _pipeline(level, tm, vectorize)
    mpm.run(mod, pb)
    return mod


def capture_stderr(fn: Callable[[], object]) -> tuple[object, str]:
    """Run ``fn`` with file descriptor 2 redirected to a temporary file; return (result, text).

    LLVM prints ``-print-after-all`` dumps with C++ ``errs()``, below Python, so only a file
    descriptor redirect catches them.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            result = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return result, tmp.read().decode(errors="replace")


_DUMP = re.compile(r"^; \*\*\* IR Dump After (.+?) on (.+?) \*\*\*(?: \(function: (.+)\))?$", re.M)


def split_dumps(text: str) -> list[tuple[str, str, str]]:
    """``-print-after-all`` output -> ``[(pass name, scope, IR text), ...]`` in order."""
    heads = list(_DUMP.finditer(text))
    out = []
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        body = text[m.end() : end].strip("\n")
        name = m.group(1).split("<")[0].strip()
        out.append((name, m.group(2).strip(), _tidy(body)))
    return out


def _tidy(body: str) -> str:
    # drop the attribute groups and metadata at the end of module dumps: noise for a learner
    keep = [ln for ln in body.splitlines() if not ln.startswith(("attributes #", "!"))]
    return "\n".join(keep).strip()


def _function_text(text: str) -> str:
    """Only the ``define ... { ... }`` parts of a dump (module dumps also carry declarations)."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("define "):
            inside = True
        if inside:
            out.append(line)
        if inside and line.startswith("}"):
            inside = False
    return "\n".join(out).strip()


def _previous_text(snaps: Sequence[Snapshot], index: int, before: str) -> str:
    return snaps[index - 1].text if index > 0 else _function_text(before)


def run_pipeline(module, level: int = 3, tm=None, vectorize: bool = True, snapshots: bool = True) -> PipelineResult:
    """Run ``O<level>`` and keep the IR after every pass that ran on a function or the module.

    LLVM is asked for module-scope dumps (``-print-module-scope``), so a loop pass's snapshot
    shows the whole function too. ``changed`` compares with the text after the previous pass.
    """
    before = str(parse(module))
    if not snapshots:
        return PipelineResult(level, before, str(optimize(module, level, tm, vectorize)), [])
    llvm.set_option("", "-print-after-all")
    llvm.set_option("", "-print-module-scope")  # loop passes too print the whole module
    try:
        mod, text = capture_stderr(lambda: optimize(module, level, tm, vectorize))
    finally:
        llvm.set_option("", "-print-after-all=false")
        llvm.set_option("", "-print-module-scope=false")
    snaps: list[Snapshot] = []
    current = _function_text(before)
    for name, scope, body in split_dumps(text):
        scope = scope.split(" in function")[0]  # "loop %cond in function f" -> "loop %cond"
        fn = _function_text(body) or current
        if not fn:
            continue
        snaps.append(Snapshot(len(snaps), name, scope, fn, fn != current, count_text_instructions(fn)))
        current = fn
    return PipelineResult(level, before, str(mod), snaps)


def first_pass_without(result: PipelineResult, word: str) -> str | None:
    """02a, exercise 3's reference: the first snapshot (pipeline order) whose text lacks ``word``."""
    return next((s.pass_name for s in result.snapshots if word not in s.text), None)


def block_of(text: str, instruction: str) -> str | None:
    """02a, exercise 5's oracle, read through LLVM's parser rather than the text: the name of the
    block whose instruction's printed form contains ``instruction`` (first match), or None."""
    mod = parse(text)
    for fn in mod.functions:
        for block in fn.blocks:
            for ins in block.instructions:
                if instruction in str(ins):
                    return block.name
    return None


def pass_in_pipeline(result: PipelineResult, pass_name: str, occurrence: int = 0) -> tuple[str, str] | None:
    """``(before, after)`` of the ``occurrence``-th run of ``pass_name`` that changed the IR, or None.

    ``pass_name`` is LLVM's class name (``"LICMPass"``, ``"LoopVectorizePass"``,
    ``"SLPVectorizerPass"``, ``"GVNPass"``) or one of the short names in :data:`SHORT_NAMES`.
    """
    cls = SHORT_NAMES.get(pass_name, pass_name)
    hits = [s for s in result.snapshots if s.pass_name == cls and s.changed]
    if len(hits) <= occurrence:
        return None
    snap = hits[occurrence]
    return _previous_text(result.snapshots, snap.index, result.before), snap.text


SHORT_NAMES = {
    "mem2reg": "PromotePass",
    "sroa": "SROAPass",
    "instcombine": "InstCombinePass",
    "simplifycfg": "SimplifyCFGPass",
    "gvn": "GVNPass",
    "licm": "LICMPass",
    "loop-rotate": "LoopRotatePass",
    "loop-unroll": "LoopUnrollPass",
    "loop-vectorize": "LoopVectorizePass",
    "slp-vectorize": "SLPVectorizerPass",
    "indvars": "IndVarSimplifyPass",
}


# ----------------------------------------------------------------------------- single passes

# opt's name -> how llvmlite adds it to a ModulePassManager. The lambdas are the "rule table".
SINGLE_PASSES: dict[str, Callable] = {
    "mem2reg": lambda pm: pm.add_sroa_pass(),  # SROA promotes through PromoteMemToReg (see module doc)
    "sroa": lambda pm: pm.add_sroa_pass(),
    "instcombine": lambda pm: pm.add_instruction_combine_pass(),
    "simplifycfg": lambda pm: pm.add_simplify_cfg_pass(),
    "gvn": lambda pm: pm.add_new_gvn_pass(),  # NewGVN: llvmlite exposes no classic GVN
    "newgvn": lambda pm: pm.add_new_gvn_pass(),
    "sccp": lambda pm: pm.add_sccp_pass(),
    "dce": lambda pm: pm.add_dead_code_elimination_pass(),
    "adce": lambda pm: pm.add_aggressive_dce_pass(),
    "dse": lambda pm: pm.add_dead_store_elimination_pass(),
    "reassociate": lambda pm: pm.add_reassociate_pass(),
    "loop-simplify": lambda pm: pm.add_loop_simplify_pass(),
    "lcssa": lambda pm: pm.add_lcssa_pass(),
    "loop-rotate": lambda pm: pm.add_loop_rotate_pass(),
    "loop-unroll": lambda pm: pm.add_loop_unroll_pass(),
    "loop-deletion": lambda pm: pm.add_loop_deletion_pass(),
    "lsr": lambda pm: pm.add_loop_strength_reduce_pass(),
    "jump-threading": lambda pm: pm.add_jump_threading_pass(),
    "tailcallelim": lambda pm: pm.add_tail_call_elimination_pass(),
    "reg2mem": lambda pm: pm.add_register_to_memory_pass(),
}
# Passes llvmlite 0.50 cannot build, run through the real `opt`: course name -> `opt -passes=` text.
# LICM needs MemorySSA, so it sits in a loop pass manager that keeps it (opt's own spelling).
OPT_ONLY = {
    "licm": "loop-mssa(licm)",
    "loop-vectorize": "loop-vectorize",
    "slp-vectorize": "slp-vectorizer",
}
IN_PIPELINE_ONLY = tuple(OPT_ONLY)  # the older name of the same list, kept for the labs
# With tool="opt" every pass goes to `opt`; these are the names opt spells differently.
OPT_NAMES = {**OPT_ONLY, "lsr": "loop-reduce"}

MISSING_OPT = tools.missing("opt", "licm, loop-vectorize and slp-vectorize cannot run as single passes")


class MissingTool(RuntimeError):
    """A command-line LLVM tool is needed and absent; the message says how to install it."""


@dataclasses.dataclass
class PassRun:
    """The IR before and after each single pass: ``stages[0]`` is the input."""

    stages: list[tuple[str, str]]  # (pass name or "input", module text)
    ran_by: list[str] = dataclasses.field(default_factory=list)  # per pass: "llvmlite" or "opt 19"

    @property
    def final(self) -> str:
        return self.stages[-1][1]

    def counts(self) -> list[tuple[str, int]]:
        """``[(stage, instruction count), ...]``."""
        return [(name, count_instructions(text)) for name, text in self.stages]

    def diff(self, k: int) -> viz.DiffView:
        """The change made by the ``k``-th pass (1-based; stage 0 is the input)."""
        (a_name, a), (b_name, b) = self.stages[k - 1], self.stages[k]
        return viz.diff(_function_text(a), _function_text(b), lang="llvm", titles=(a_name, b_name))

    def table(self) -> viz.TableView:
        by = ["", *self.ran_by]
        return viz.table([(n, c, b) for (n, c), b in zip(self.counts(), by)], ["after", "instructions", "run by"])


def opt_tool() -> tools.Tool | None:
    """The newest installed ``opt`` (LLVM 14 or later), or None."""
    return tools.find("opt")


def run_opt(module_text: str, pipeline: str, cpu: str | None = None) -> str:
    """``opt -S -passes=<pipeline>`` on ``module_text``; the output module text.

    The text is first rewritten for older LLVMs (:func:`tools.downgrade_ir`). A module without a
    target triple gets this machine's, so the vectorisers see real vector registers (without a
    target, opt's cost model has none and vectorises nothing). ``cpu`` (``-mcpu``) defaults to
    the triple's generic CPU: SSE2 on x86-64, the same on every x86 machine.
    """
    tool = opt_tool()
    if tool is None:
        raise MissingTool(MISSING_OPT)
    args = [tool.path, *tool.flags, "-S", f"-passes={pipeline}", "-o", "-"]
    if "target triple" not in module_text:
        args.append(f"-mtriple={llvm.get_process_triple()}")
    if cpu:
        args.append(f"-mcpu={cpu}")
    proc = subprocess.run(args, input=tools.downgrade_ir(module_text), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ValueError(
            f"{tool} could not run -passes={pipeline}: {tools.first_error(proc.stderr)}\n"
            "If it is the IR's syntax, this IR is newer than that LLVM: feed it unoptimised IR, "
            "or install a newer LLVM (`apt-get install llvm-19`)."
        )
    return proc.stdout


def run_passes(module, names: Sequence[str], tm=None, tool: str = "auto", cpu: str | None = None) -> PassRun:
    """Run the named passes one at a time, snapshotting the module after each.

    ``tool="auto"``: passes in :data:`SINGLE_PASSES` run through llvmlite (each in its own pass
    manager), those in :data:`OPT_ONLY` through the installed ``opt``. ``tool="opt"``: every
    pass through ``opt``, by opt's own name, so ``mem2reg`` is LLVM's PromotePass and ``gvn``
    its classic GVN. ``cpu`` is only used by ``opt`` (see :func:`run_opt`). Without ``opt``,
    an opt pass raises :class:`MissingTool`, whose message says how to install it.
    """
    mod = parse(module)
    tm = tm or host_target_machine()
    stages, ran_by = [("input", _clean(str(mod)))], []
    for name in names:
        if name not in SINGLE_PASSES and name not in OPT_ONLY:
            raise ValueError(f"unknown pass {name!r}; known: {sorted({*SINGLE_PASSES, *OPT_ONLY})}")
        if tool == "opt" or name in OPT_ONLY:
            mod = parse(run_opt(str(mod), OPT_NAMES.get(name, name), cpu))
            ran_by.append(str(opt_tool()))
        else:
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
            mpm = llvm.create_new_module_pass_manager()
            SINGLE_PASSES[name](mpm)
            mpm.run(mod, pb)
            mod.verify()
            ran_by.append("llvmlite")
        stages.append((name, _clean(str(mod))))
    return PassRun(stages, ran_by)


def _clean(text: str) -> str:
    """Module text without ModuleID/source_filename lines, attribute groups and references to them.

    (opt's ``-mcpu`` puts ``"target-cpu"`` in an attribute group: noise here, and the text must
    still parse after the group lines are gone.)
    """
    skip = ("; ModuleID", "source_filename", "attributes #")
    keep = [re.sub(r"\) #\d+ \{$", ") {", ln) for ln in text.splitlines() if not ln.startswith(skip)]
    return "\n".join(keep).strip() + "\n"
