"""Triton's passes run one at a time through its own Python bindings, with the IR kept after each.

Teaches: ``third_party/nvidia/backend/compiler.py`` (installed as ``triton/backends/nvidia/
compiler.py``): ``make_ttir``, ``make_ttgir`` and the MLIR half of ``make_llir`` each build an
``ir.pass_manager`` and add passes with one Python call apiece
(``passes.ttgpuir.add_coalesce(pm)``), then run them all at once. Here the same list, read from
the installed method (:func:`course_lib.compat.triton_stage_pass_calls`), is replayed one pass per
pass manager on the module that ``python/triton/compiler/code_generator.py`` built, so every
intermediate module is kept (:class:`PassRun`). Replaying the whole list gives exactly the TTGIR
``triton.compile`` produces (``tests/test_triton_passes.py`` checks that). A list with a pass
left out (``drop=["coalesce"]``) is an experiment the real pipeline cannot do;
:func:`compile_ttgir` finishes it to PTX and SASS through ``triton.compile`` on the IR file.

Position: Python kernel -> (code_generator) TTIR as built -> make_ttir passes -> TTIR ->
make_ttgir passes -> TTGIR [-> make_llir's MLIR passes -> LLVM dialect]. No GPU needed.
Simplifies: the pass managers run without Triton's debug hooks (``MLIR_ENABLE_DUMP`` and
friends); :func:`course_lib.triton.compile_stages` is the one-call pipeline that keeps them.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import difflib
import os
import re
import tempfile
import textwrap
from collections.abc import Sequence

from course_lib import compat
from course_lib.triton.compile import (
    TARGETS,
    disassemble,
    gpu_target,
    kernel_source,
    readable_text,
    strip_locations,
)

#: course stage name -> the backend method that adds its passes
STAGE_METHODS = {"ttir": "make_ttir", "ttgir": "make_ttgir", "llvm_dialect": "make_llir"}


@dataclasses.dataclass(frozen=True)
class PassCall:
    """One ``<group>.add_<name>(pm, *args)`` call of a backend stage, with its arguments evaluated."""

    stage: str  # ttir, ttgir or llvm_dialect
    group: str  # passes.ttgpuir, nvidia.passes.ttnvgpuir, passes.common...
    name: str  # coalesce, remove_layout_conversions...
    args: tuple

    def __str__(self) -> str:
        args = "".join(f", {a!r}" for a in self.args)
        return f"{self.group}.add_{self.name}(pm{args})"


@dataclasses.dataclass
class PassStep:
    """The module before and after one pass (text without locations)."""

    index: int
    call: PassCall
    before: str
    after: str
    after_raw: str = dataclasses.field(default="", repr=False)  # with locations (absolute paths: never shown)

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def __iter__(self):  # unpacks as (pass, ir_before, ir_after)
        return iter((self.call, self.before, self.after))

    def diff(self, context: int = 1) -> str:
        """Unified diff of the module across this pass."""
        lines = difflib.unified_diff(self.before.splitlines(), self.after.splitlines(), "before", "after",
                                     n=context, lineterm="")  # fmt: skip
        return "\n".join(lines)

    def summary(self) -> str:
        """One line: ops added / removed (by name) and layout definitions changed."""
        return change_summary(self.before, self.after)


@dataclasses.dataclass
class PassRun:
    """Every module of one replay: ``codegen`` (as the code generator built it), then one step per pass.

    ``final_raw`` is the last module with its locations, what :func:`compile_ttgir` compiles on.
    """

    kernel: str
    target: str
    codegen: str
    steps: list[PassStep]
    final_raw: str
    source: str = ""  # the kernel's Python source (decorator on line 1)
    first_line: int = 1  # its first line in its file
    live: tuple = dataclasses.field(default=(), repr=False, compare=False)  # (context, module): Triton's objects

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i):
        return self.steps[i]

    def __iter__(self):
        return iter(self.steps)

    @property
    def final(self) -> str:
        return self.steps[-1].after if self.steps else self.codegen

    def step(self, name: str, occurrence: int = 0) -> PassStep:
        """The ``occurrence``-th step of pass ``name`` (``remove_layout_conversions`` runs several times)."""
        found = [s for s in self.steps if s.name == name]
        if len(found) <= occurrence:
            raise KeyError(f"pass {name!r} ran {len(found)} time(s) here; passes: {', '.join(self.names())}")
        return found[occurrence]

    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def after_stage(self, stage: str) -> str:
        """The module after the last pass of ``stage`` (``"ttir"``, ``"ttgir"``, ``"llvm_dialect"``)."""
        done = [s for s in self.steps if s.call.stage == stage]
        if not done:
            raise KeyError(f"no pass of stage {stage!r} ran; stages here: {sorted({s.call.stage for s in self.steps})}")
        return done[-1].after

    def table(self) -> list[tuple]:
        """Rows ``(#, stage, call, changed, summary)`` for ``viz.table``."""
        return [(s.index, s.call.stage, str(s.call), "yes" if s.changed else "", s.summary()) for s in self.steps]


# ----------------------------------------------------------------------------- the pass list


@dataclasses.dataclass
class _Setup:
    """What a replay needs: the backend, a context, the options object, the compute capability."""

    target: object
    backend: object
    context: object
    options: object
    capability: int


def _setup(target: str, num_warps: int, num_stages: int | None) -> _Setup:
    if target not in TARGETS or TARGETS[target][0] != "cuda":
        raise ValueError(f"run_passes replays the NVIDIA backend; choose one of "
                         f"{sorted(t for t, v in TARGETS.items() if v[0] == 'cuda')}, not {target!r}")  # fmt: skip
    gt = gpu_target(target)
    backend, context = compat.triton_backend_and_context(gt)
    opts = {"num_warps": num_warps} | ({"num_stages": num_stages} if num_stages is not None else {})
    return _Setup(gt, backend, context, backend.parse_options(opts), TARGETS[target][1])


def _calls(setup: _Setup, module, stages: Sequence[str]) -> list[tuple[PassCall, tuple]]:
    out = []
    for stage in stages:
        if stage not in STAGE_METHODS:
            raise ValueError(f"unknown stage {stage!r}; choose from {list(STAGE_METHODS)}")
        calls, run_args = compat.triton_stage_pass_calls(
            setup.backend, STAGE_METHODS[stage], module, setup.options, setup.capability
        )
        out += [(PassCall(stage, g, n, a), run_args) for g, n, a in calls]
    return out


def _codegen(kernel, signature, constexprs, setup: _Setup, aligned: bool):
    if compat.triton_language_patched():
        raise RuntimeError(
            "Triton's interpreter left triton.language patched in this process, so the code generator "
            "cannot run here: import course_lib.triton before launching kernels (restart the kernel)."
        )
    divisible = [a for a, t in signature.items() if t.startswith("*") or t in ("i32", "i64")] if aligned else []
    source = compat.triton_ast_source(kernel, signature, constexprs, divisible_by_16=divisible)
    return compat.triton_codegen(kernel, source, setup.target, setup.backend, setup.options, setup.context)


def pipeline(kernel, signature: dict, constexprs: dict | None = None, *, target: str = "sm_90",
             stages: Sequence[str] = ("ttir", "ttgir"), num_warps: int = 4, num_stages: int | None = None,
             aligned: bool = True) -> list[PassCall]:  # fmt: skip
    """The passes the installed backend adds for ``stages`` on ``target``, in order (nothing runs)."""
    setup = _setup(target, num_warps, num_stages)
    module = _codegen(kernel, signature, constexprs, setup, aligned)
    return [c for c, _ in _calls(setup, module, stages)]


def _select(calls: list[tuple[PassCall, tuple]], passes: Sequence[str] | None, drop: Sequence[str]):
    """The calls to run: all of them, or the named ones in the order given; minus ``drop``."""
    known = [c.name for c, _ in calls]
    for name in [*(passes or ()), *drop]:
        if name not in known:
            raise ValueError(
                f"no pass {name!r} in this Triton's pipeline for these stages (a name is the add_ call "
                f"without 'add_', e.g. 'coalesce'); the pipeline has: {', '.join(dict.fromkeys(known))}"
            )
    if passes is not None:
        first = {}
        for c in calls:
            first.setdefault(c[0].name, c)
        calls = [first[name] for name in passes]
    return [c for c in calls if c[0].name not in set(drop)]


def run_passes(kernel, signature: dict, constexprs: dict | None = None, passes: Sequence[str] | None = None, *,
               drop: Sequence[str] = (), target: str = "sm_90", stages: Sequence[str] = ("ttir", "ttgir"),
               num_warps: int = 4, num_stages: int | None = None, aligned: bool = True) -> PassRun:  # fmt: skip
    """Build the kernel's module with Triton's code generator, then run the passes one at a time.

    ``passes=None`` runs the backend's own list for ``stages`` (``make_ttir`` then ``make_ttgir``);
    a list of names runs those, in that order, with the arguments the backend gives them.
    ``drop`` leaves passes out. ``aligned=True`` marks pointers 16-byte aligned, as ``@triton.jit``
    does for real tensors (so loads can be vectorised). Returns a :class:`PassRun`.
    """
    setup = _setup(target, num_warps, num_stages)
    module = _codegen(kernel, signature, constexprs, setup, aligned)
    chosen = _select(_calls(setup, module, stages), passes, drop)
    codegen = strip_locations(compat.triton_module_text(module))
    steps, before = [], codegen
    for i, (call, run_args) in enumerate(chosen):
        try:
            compat.triton_run_pass(setup.context, module, call.group, call.name, call.args, run_args)
        except compat.CompatError:
            raise
        except Exception as exc:  # MLIR reports a failed pass as RuntimeError("PassManager::run failed")
            raise RuntimeError(f"pass {call} failed on the module after step {i - 1}: {exc}") from None
        raw = compat.triton_module_text(module)
        after = strip_locations(raw)  # raw keeps the locations for ops_by_location
        steps.append(PassStep(i, call, before, after, raw))
        before = after
    name = compat.triton_jit_function(kernel).fn.__name__
    source, first = kernel_source(kernel)
    final_raw = steps[-1].after_raw if steps else compat.triton_module_text(module)
    return PassRun(name, target, codegen, steps, final_raw, source, first, (setup.context, module))


# ----------------------------------------------------------------------------- finishing a replay

_COMPILED: dict[str, dict] = {}


def compile_ttgir(run: PassRun) -> dict[str, str]:
    """Finish a replay that ended in TTGIR: ``triton.compile`` on the IR file (make_llir, make_ptx,
    make_cubin), as ``triton.compile("kernel.ttgir")`` does. Returns readable ``llir``, ``ptx``, ``sass``."""
    if "ttg.num-warps" not in run.final_raw:
        raise ValueError("compile_ttgir needs a replay that reached TTGIR (run the ttgir stage's passes)")
    if "llvm.func" in run.final_raw:
        raise ValueError("this replay already reached the LLVM dialect; compile_ttgir starts from TTGIR")
    key = run.target + run.final_raw
    if key in _COMPILED:
        return _COMPILED[key]
    import triton

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{run.kernel}.ttgir")
        with open(path, "w") as f:
            f.write(run.final_raw)
        compiled = triton.compile(path, target=gpu_target(run.target))
    out = {
        "llir": readable_text("llir", compiled.asm["llir"]),
        "ptx": readable_text("ptx", compiled.asm["ptx"]),
        "sass": readable_text("sass", disassemble(compiled.asm["cubin"])),
    }
    _COMPILED[key] = out
    return out


# ----------------------------------------------------------------------------- reading the modules

_LAYOUT_DEF = re.compile(r"^(#[\w]+) = (#[\w.]+<.*>)\s*$", re.M)
_OP = re.compile(r"^\s*(?:%[^=]+= )?\"?([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_.]*)\"?[\s({<]")


def layouts(module: str) -> dict[str, str]:
    """Encoding aliases defined at the top of a TTGIR module: ``{"#blocked": "#ttg.blocked<{...}>"}``."""
    return {m[1]: m[2] for m in _LAYOUT_DEF.finditer(module)}


def blocked_field(definition: str, field: str) -> list[int]:
    """One list of a ``#ttg.blocked`` definition (``sizePerThread``, ``order``...)."""
    m = re.search(field + r" = \[([\d, ]*)\]", definition)
    if m is None:
        raise ValueError(f"no {field} in {definition!r}")
    return [int(v) for v in m[1].split(",") if v.strip()]


def op_counts(module: str) -> collections.Counter:
    """How many operations of each name (``tt.load``, ``ttg.convert_layout``...) a module holds."""
    return collections.Counter(m[1] for line in module.splitlines() if (m := _OP.match(line)))


def change_summary(before: str, after: str) -> str:
    """What one pass did, in a line: ``+2 ttg.convert_layout, -1 tt.load; #blocked1 changed``."""
    b, a = op_counts(before), op_counts(after)
    parts = [f"+{a[k] - b[k]} {k}" for k in sorted(a) if a[k] > b[k]]
    parts += [f"-{b[k] - a[k]} {k}" for k in sorted(b) if b[k] > a[k]]
    lb, la = layouts(before), layouts(after)
    lay = [f"{k} new" for k in la if k not in lb] + [f"{k} gone" for k in lb if k not in la]
    lay += [f"{k} changed" for k in la if k in lb and la[k] != lb[k]]
    text = ", ".join(parts)
    if lay:
        text += ("; " if text else "") + ", ".join(lay)
    if not text and before != after:
        text = "attributes or operands changed"
    return text


def vector_loads(sass: str) -> dict[str, int]:
    """Global loads in SASS by width: ``{"LDG.E": n, "LDG.E.64": n, "LDG.E.128": n}``."""
    return dict(collections.Counter(re.findall(r"\b(LDG\.E(?:\.\w+)*)\b", sass)))


# ----------------------------------------------------------------------------- code generator provenance

_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$", re.M)
_FILE_LOC = re.compile(r'^"[^"]*":(\d+):(\d+)$')
_NAME_LOC = re.compile(r'^"([^"]*)"\((#loc\d*)\)$')
_USE = re.compile(r" loc\((#loc\d*)\)\s*$")


def _resolve_locs(raw: str) -> dict[str, tuple[int, int, str]]:
    """``#locN`` -> (line, column, variable name or "") for file and name locations."""
    defs = {m[1]: m[2] for m in _LOC_DEF.finditer(raw)}
    out: dict[str, tuple[int, int, str]] = {}

    def resolve(alias: str, depth: int = 0):
        if alias in out or depth > 8:
            return out.get(alias)
        body = defs.get(alias, "")
        if m := _FILE_LOC.match(body):
            out[alias] = (int(m[1]), int(m[2]), "")
        elif (m := _NAME_LOC.match(body)) and (inner := resolve(m[2], depth + 1)):
            out[alias] = (inner[0], inner[1], m[1])
        return out.get(alias)

    for alias in defs:
        resolve(alias)
    return out


@dataclasses.dataclass
class CodegenRow:
    """The ops the code generator emitted while visiting one Python AST node."""

    line: int  # in the kernel's source, the decorator is line 1
    col: int  # 1-based, as MLIR prints it
    node: str  # ast class name: BinOp, Call, Compare, For...
    python: str  # the source text of that node
    ops: list[str]


def codegen_map(kernel, signature: dict, constexprs: dict | None = None, *, aligned: bool = True) -> list[CodegenRow]:
    """Which Python node became which ``tt``/``arith``/``scf`` ops in the code generator's output.

    ``CodeGenerator.visit`` (``triton/compiler/code_generator.py``) sets the builder's location to
    each AST node it visits, so every op carries ``loc("file":line:col)`` of the node that made it.
    We read those locations back and name the node with Python's ``ast`` module (the outermost
    expression starting there; a statement where no expression does).
    """
    setup = _setup("sm_90", 4, None)
    module = _codegen(kernel, signature, constexprs, setup, aligned)
    raw = compat.triton_module_text(module)
    locs = _resolve_locs(raw)
    source, first = kernel_source(kernel)
    source = textwrap.dedent(source)
    nodes = _nodes_by_position(source)
    rows: dict[tuple[int, int], CodegenRow] = {}
    for line in raw.splitlines():
        use, op = _USE.search(line), _OP.match(line)
        if not (use and op) or use[1] not in locs or op[1] in ("tt.func", "builtin.module"):
            continue
        ln, col, _ = locs[use[1]]
        rel = ln - first + 1
        node = nodes.get((rel, col - 1))
        if node is None:
            continue
        key = (rel, col)
        if key not in rows:
            text = (ast.get_source_segment(source, node) or "").splitlines()[0]
            rows[key] = CodegenRow(rel, col, type(node).__name__, text, [])
        rows[key].ops.append(op[1])
    return [rows[k] for k in sorted(rows)]


def _nodes_by_position(source: str) -> dict[tuple[int, int], ast.AST]:
    """(line, 0-based column) -> the outermost expression starting there, else the statement."""
    tree = ast.parse(source)
    out: dict[tuple[int, int], ast.AST] = {}
    for node in ast.walk(tree):  # breadth first: outer nodes come before inner ones
        if not hasattr(node, "col_offset"):
            continue
        key = (node.lineno, node.col_offset)
        old = out.get(key)
        if old is None or (isinstance(node, ast.expr) and not isinstance(old, ast.expr)):
            out[key] = node
    return out


def ops_by_location(raw: str) -> dict[tuple[int, int], list[str]]:
    """``(line, column) -> op names`` of a module printed with locations (``PassStep.after_raw``).

    Lines and columns are those of the kernel's Python file; a conversion pattern gives the ops it
    creates the location of the op it replaces, so one key collects an op and what it became.
    """
    locs = _resolve_locs(raw)
    out: dict[tuple[int, int], list[str]] = {}
    for line in raw.splitlines():
        use, op = _USE.search(line), _OP.match(line)
        if use and op and use[1] in locs and op[1] not in ("tt.func", "llvm.func", "builtin.module"):
            ln, col, _ = locs[use[1]]
            out.setdefault((ln, col), []).append(op[1])
    return out


def load_size_per_thread(ttgir: str) -> list[int]:
    """``sizePerThread`` of the layout of the first ``tt.load``'s result in a TTGIR module."""
    m = re.search(r"= tt\.load .*: tensor<.*, (#\w+)>\s*$", ttgir, re.M)
    if m is None:
        raise ValueError("no tt.load on a blocked tensor in this module")
    return blocked_field(layouts(ttgir)[m[1]], "sizePerThread")


#: ops that only move values in and out of the per-thread struct / vector a tensor became
PLUMBING = frozenset({"llvm.extractvalue", "llvm.insertvalue", "llvm.extractelement", "llvm.insertelement",
                      "llvm.bitcast", "llvm.mlir.undef", "llvm.mlir.constant", "llvm.mlir.poison",
                      "builtin.unrealized_conversion_cast"})  # fmt: skip


@dataclasses.dataclass
class ConversionRow:
    """One Python expression: its ops before ``ConvertTritonGPUToLLVM`` and the LLVM-dialect ops after."""

    python: str
    line: int  # in the kernel's source, decorator = 1
    col: int
    before: dict[str, int]
    after: dict[str, int]  # every op, plumbing included

    def work(self) -> dict[str, int]:
        """``after`` without :data:`PLUMBING`: the ops that compute, load, store or read registers."""
        return {k: v for k, v in self.after.items() if k not in PLUMBING}


def conversion_rows(run: PassRun, conversion: str = "to_llvmir") -> list[ConversionRow]:
    """The dialect conversion followed op by op: for each Python expression, the TTGIR ops just before
    the ``conversion`` pass and the LLVM-dialect ops at the end of the run (after the clean-up passes).

    Needs a run with the ``llvm_dialect`` stage (``stages=("ttir", "ttgir", "llvm_dialect")``).
    """
    k = run.names().index(conversion) if conversion in run.names() else -1
    if k < 1:
        raise ValueError(f"pass {conversion!r} is not in this run; run_passes(..., stages=('ttir', 'ttgir', "
                         f"'llvm_dialect')) includes it")  # fmt: skip
    before = ops_by_location(run.steps[k - 1].after_raw)
    after = ops_by_location(run.steps[-1].after_raw)
    source = textwrap.dedent(run.source)
    nodes = _nodes_by_position(source)
    rows = []
    for ln, col in sorted(set(before) | set(after)):
        rel = ln - run.first_line + 1
        node = nodes.get((rel, col - 1))
        if node is None or isinstance(node, ast.FunctionDef):
            continue
        text = (ast.get_source_segment(source, node) or "").splitlines()[0]
        rows.append(ConversionRow(text, rel, col, dict(collections.Counter(before.get((ln, col), []))),
                                  dict(collections.Counter(after.get((ln, col), [])))))  # fmt: skip
    return rows


def codegen_source(method: str, around: str | None = None, context: int = 6) -> str:
    """Source of ``CodeGenerator.<method>`` in the installed ``triton/compiler/code_generator.py``
    (``visit_BinOp``, ``visit_For``, ``visit``...); with ``around``, only the lines within
    ``context`` of the first line containing that text (a short excerpt of a long method)."""
    import inspect

    cls = compat.require("triton.compiler.code_generator", "CodeGenerator")
    if not hasattr(cls, method):
        raise ValueError(f"CodeGenerator has no {method!r} in this Triton (try visit_BinOp, visit_For, visit_Call)")
    lines = textwrap.dedent(inspect.getsource(getattr(cls, method))).splitlines()
    if around is not None:
        hit = next((i for i, ln in enumerate(lines) if around in ln), None)
        if hit is None:
            raise ValueError(f"{around!r} does not occur in CodeGenerator.{method} of this Triton")
        lo, hi = max(0, hit - context), min(len(lines), hit + context + 1)
        lines = [lines[0], "    ..."] + lines[lo:hi] + ["    ..."] if lo > 0 else lines[lo:hi]
    return "\n".join(lines)


_MEM_OP = re.compile(r"\b(tt\.load|tt\.store)\b.*: tensor<([\dx]+)x!tt\.ptr<(\w+)>, (#\w+)>")


def memory_layouts(ttgir: str) -> list[tuple[str, str, str, str]]:
    """``(op, shape, element type, layout definition)`` for every ``tt.load`` / ``tt.store`` on a tensor
    of pointers in a TTGIR module: the layouts ``coalesce`` chose for global memory accesses."""
    defs = layouts(ttgir)
    rows = []
    for line in ttgir.splitlines():
        if m := _MEM_OP.search(line):
            rows.append((m[1], m[2], m[3], defs.get(m[4], m[4])))
    return rows
