"""course_lib.debugtools: the real torch.compile debugging tools, captured so a notebook can read them.

Teaches the tools a practitioner runs every day, not a reimplementation of them:

* ``TORCH_LOGS`` / ``torch._logging.set_logs`` (``torch/_logging/_internal.py``, the artifact
  registry in ``torch/_logging/_registrations.py``): :func:`capture_logs`, :func:`parse_logs`;
* ``TORCH_COMPILE_DEBUG=1`` (``torch/_inductor/debug.py``, ``DebugContext``): :func:`run_python` runs
  a script with the environment variables set, :func:`debug_dir` walks the folder it writes;
* Dynamo's transformed bytecode and resume functions (``torch/_dynamo/convert_frame.py``,
  ``resume_execution.py``) decompiled by depyf: :func:`depyf_dump`;
* ``TORCH_TRACE`` and tlparse: :func:`run_tlparse`;
* a debugger inside a backend: :func:`scripted_pdb`;
* AOTInductor packages (``torch/_inductor/package/``): :func:`package_contents`.

Position: beside the pipeline. Nothing here changes what torch compiles; it only collects the
text torch already writes and gives it structure (artifact, frame id, file name, kernel name),
because that structure is stable across torch versions while the exact text is not.

Private torch APIs go through ``course_lib.compat``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

# ----------------------------------------------------------------------------- TORCH_LOGS

# One line of torch's log format: level letter + date, time, pid, file:line, [frame id], and for an
# artifact log its name in [__name]. Example (spaces shortened):
#   V1203 13:35:33.295 10394 torch/_dynamo/symbolic_convert.py:5124] [0/0] [__graph_breaks] Graph break ...
LOG_LINE = re.compile(
    r"^(?P<level>[DIVWEC])\d{4} [\d:.]+ +\d+ (?P<source>\S+?):\d+\] "
    r"(?:\[(?P<frame>[^\]]*)\] )?(?:\[__(?P<artifact>\w+)\] ?)?(?P<text>.*)$"
)

ARTIFACTS = {  # the artifacts the notebooks switch on, and what each shows
    "graph_breaks": "where Dynamo stopped the graph and why",
    "recompiles": "which guard failed when a frame is compiled again",
    "guards": "every check a cached graph makes before it runs",
    "bytecode": "the frame's bytecode before and after Dynamo rewrote it",
    "output_code": "the Python wrapper and kernels Inductor wrote",
}


@dataclasses.dataclass(frozen=True)
class LogRecord:
    """One line of a torch log: its artifact (``""`` for a component log), frame id and text."""

    artifact: str
    frame: str
    source: str
    text: str


@dataclasses.dataclass
class TorchLogs:
    """Parsed torch log lines; ``of(artifact)`` gives one artifact's text line by line."""

    records: list[LogRecord] = dataclasses.field(default_factory=list)
    raw: str = ""

    def of(self, artifact: str, frame: str | None = None) -> list[str]:
        """Lines of one artifact; ``frame="0/1"`` keeps frame 0's first recompile only (``0/1``, ``0/1_1``)."""
        return [r.text for r in self.records
                if r.artifact == artifact and (frame is None or r.frame.split("_")[0] == frame)]  # fmt: skip

    def text(self, artifact: str) -> str:
        return "\n".join(self.of(artifact))

    def artifacts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.records:
            counts[r.artifact or "(component)"] = counts.get(r.artifact or "(component)", 0) + 1
        return counts

    def frames(self, artifact: str | None = None) -> list[str]:
        seen: list[str] = []
        for r in self.records:
            if (artifact is None or r.artifact == artifact) and r.frame and r.frame not in seen:
                seen.append(r.frame)
        return seen

    def __str__(self) -> str:
        rows = [f"{name:<14} {n:>5} lines" for name, n in sorted(self.artifacts().items())]
        return "torch logs by artifact:\n  " + "\n  ".join(rows or ["(nothing logged)"])

    __repr__ = __str__


def parse_logs(text: str) -> TorchLogs:
    """Split torch's log text into records; lines without torch's prefix are kept as raw text only.

    Dynamo's run-varying names (``__compiled_fn_<n>_<uuid>``, ``__resume_at_<offset>_<n>``...) are
    renumbered over the whole log (course_lib.explore.stable); ``raw`` keeps torch's own text."""
    from course_lib.explore.stable import Renamer

    found = [m for m in map(LOG_LINE.match, text.splitlines()) if m]
    rename = Renamer.of(m["text"] for m in found)
    records = [LogRecord(m["artifact"] or "", m["frame"] or "", m["source"], rename(m["text"])) for m in found]
    return TorchLogs(records, text)


@contextlib.contextmanager
def capture_logs(**artifacts: bool) -> Iterator[TorchLogs]:
    """Switch torch's log artifacts on (``set_logs``), and collect what they print.

    ``with capture_logs(graph_breaks=True, recompiles=True) as logs: ...``; after the block
    ``logs`` holds the parsed lines and logging is back to torch's default. Unknown names raise
    a ValueError listing the known ones, before anything runs.
    """
    from course_lib import compat

    unknown = sorted(set(artifacts) - set(ARTIFACTS) - {"dynamo", "inductor", "dynamic", "aot", "export"})
    if unknown:
        raise ValueError(f"unknown log artifact(s) {unknown}; the notebooks use {sorted(ARTIFACTS)}")
    buf = io.StringIO()
    logs = TorchLogs()
    with contextlib.redirect_stderr(buf):  # torch's handlers bind sys.stderr when they are created
        compat.torch_set_logs(**artifacts)
    try:
        yield logs
    finally:
        compat.torch_set_logs()  # back to the default handlers, on the real stderr
        parsed = parse_logs(buf.getvalue())
        logs.records, logs.raw = parsed.records, parsed.raw


_GUARD_FAILURE = re.compile(r"^\s*- (?P<frame>\d+/\d+): (?P<reason>.*)$")


def recompile_reasons(logs: TorchLogs) -> list[str]:
    """The guard failures named by the ``recompiles`` artifact, in order (frame ids removed)."""
    return [m["reason"] for line in logs.of("recompiles") if (m := _GUARD_FAILURE.match(line))]


# ----------------------------------------------------------------------------- scripts with env vars


@dataclasses.dataclass(frozen=True)
class ScriptRun:
    """A Python script run in a fresh interpreter with torch's debug environment variables set."""

    returncode: int
    stdout: str
    stderr: str
    workdir: Path
    env: dict[str, str]

    @property
    def logs(self) -> TorchLogs:
        return parse_logs(self.stderr)

    def __str__(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        return f"{env} python script.py -> exit {self.returncode}, {len(self.stderr.splitlines())} lines of log"


def run_python(source: str, env: dict[str, str], workdir: str | Path | None = None, timeout: int = 300) -> ScriptRun:
    """Run ``source`` as ``script.py`` in ``workdir`` (a new temporary folder by default).

    ``env`` is added to this process's environment: ``TORCH_LOGS``, ``TORCH_COMPILE_DEBUG``,
    ``TORCH_TRACE`` only act at import time, so a fresh interpreter is the honest way to show them.
    A script that fails raises a RuntimeError carrying the end of its stderr.
    """
    work = Path(workdir or tempfile.mkdtemp(prefix="course_debug_"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "script.py").write_text(source)
    full_env = {**os.environ, **{k: str(v) for k, v in env.items()}}
    proc = subprocess.run([sys.executable, "script.py"], cwd=work, env=full_env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the script exited with {proc.returncode}:\n" + "\n".join(proc.stderr.splitlines()[-15:]))
    return ScriptRun(proc.returncode, proc.stdout, proc.stderr, work, dict(env))


# ----------------------------------------------------------------------------- TORCH_COMPILE_DEBUG folder

STAGE_FILES = {  # the files Inductor writes per graph, in pipeline order, and the course_lib stage beside each
    "fx_graph_readable.py": ("the ATen graph Inductor received", "course_lib.aot / make_fx graph"),
    "fx_graph_transformed.py": ("the same graph after Inductor's FX passes", "(course_lib has no FX passes)"),
    "ir_pre_fusion.txt": ("scheduler nodes before fusion: loop bodies in ops.*", "course_lib.inductor.lower"),
    "ir_post_fusion.txt": ("the same nodes after fusion", "course_lib.inductor.fuse (the schedule)"),
    "output_code.py": ("the Python wrapper with the C++ / Triton kernels", "compile_graph: kernel + wrapper"),
}


@dataclasses.dataclass(frozen=True)
class DebugGraph:
    """One graph's folder under ``torchinductor/``: its name and the files in it."""

    name: str
    folder: Path

    @property
    def files(self) -> list[str]:
        return sorted(p.name for p in self.folder.iterdir() if p.is_file())

    def read(self, name: str) -> str:
        path = self.folder / name
        if not path.exists():
            raise FileNotFoundError(f"{self.name} has no {name}; it has {self.files}")
        return path.read_text()


@dataclasses.dataclass(frozen=True)
class DebugDir:
    """A ``torch_compile_debug/run_*`` folder: Dynamo's log and one :class:`DebugGraph` per graph."""

    root: Path
    graphs: tuple[DebugGraph, ...]

    def graph(self, index: int) -> DebugGraph:
        return self.graphs[index]

    def __str__(self) -> str:
        lines = ["torch_compile_debug/run_<time>-pid_<pid>/"]
        for sub in sorted(p for p in self.root.iterdir() if p.is_dir()):
            lines.append(f"  {sub.name}/")
            for entry in sorted(sub.iterdir()):
                lines.append(f"    {entry.name}{'/' if entry.is_dir() else ''}")
                if entry.is_dir():
                    lines += [f"      {f.name}" for f in sorted(entry.iterdir())]
        return "\n".join(lines)

    __repr__ = __str__


def debug_dir(workdir: str | Path) -> DebugDir:
    """The newest ``torch_compile_debug/run_*`` folder under ``workdir``, walked."""
    runs = sorted((Path(workdir) / "torch_compile_debug").glob("run_*"))
    if not runs:
        raise FileNotFoundError(f"no torch_compile_debug/run_* folder under {Path(workdir).name}: "
                                "was the script run with TORCH_COMPILE_DEBUG=1?")  # fmt: skip
    root = runs[-1]
    inductor = root / "torchinductor"
    graphs = [DebugGraph(p.name, p) for p in sorted(inductor.iterdir(), key=_graph_order) if p.is_dir()] \
        if inductor.exists() else []  # fmt: skip
    return DebugDir(root, tuple(graphs))


def _graph_order(path: Path) -> tuple:
    nums = [int(n) for n in re.findall(r"\d+", path.name)]
    return tuple(nums) or (0,)


# ----------------------------------------------------------------------------- reading the artefacts

_ATEN_CALL = re.compile(r"torch\.ops\.aten\.(?P<op>\w+)\.\w+\(")
_OPS_CALL = re.compile(r"\bops\.(?P<op>\w+)\(")


def kernel_names(output_code: str) -> list[str]:
    """Names of the kernels defined in an Inductor ``output_code.py`` (``cpp_fused_*``, ``triton_*``)."""
    from course_lib import compat

    return [name for name, _, _ in compat.inductor_code_kernels(output_code)]


def aten_ops(fx_graph_readable: str) -> list[str]:
    """ATen op names called in ``fx_graph_readable.py``, in order (``torch.ops.aten.sin.default`` -> ``sin``)."""
    return [m["op"] for m in _ATEN_CALL.finditer(fx_graph_readable)]


def loop_body_ops(ir_text: str) -> list[str]:
    """``ops.*`` calls in the loop bodies of ``ir_pre_fusion.txt`` / ``ir_post_fusion.txt``."""
    return [m["op"] for m in _OPS_CALL.finditer(ir_text)]


def scheduler_nodes(ir_text: str) -> list[str]:
    """Headers of the scheduler nodes in an IR file: ``op0: SchedulerNode(ComputedBuffer)``..."""
    return [ln for ln in ir_text.splitlines() if re.match(r"^op[\w_]+: \w+\(", ln)]


def python_wrapper(output_code: str) -> str:
    """The ``def call(args)`` function of an Inductor output code (the Python wrapper)."""
    start = output_code.find("def call(")
    if start < 0:
        raise ValueError("no `def call(` in this output code")
    end = output_code.find("\ndef ", start + 1)
    return output_code[start : end if end > 0 else None].rstrip()


def cpp_function(source: str, signature_start: str) -> str:
    """The C++ function whose signature starts with ``signature_start`` (braces counted)."""
    start = source.find(signature_start)
    if start < 0:
        raise ValueError(f"no {signature_start!r} in this source")
    depth, i = 0, source.find("{", start)
    while i < len(source):
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            return source[start : i + 1]
        i += 1
    return source[start:]


_ADDRESS = re.compile(r" at 0x[0-9a-f]+|, \d{9,}\)")


# ----------------------------------------------------------------------------- depyf


def depyf_dump(fn, *args, backend: str = "eager") -> dict[str, str]:
    """Compile ``fn`` with ``backend``, call it on ``args`` under depyf, return the functions depyf decompiled.

    Keys: ``transformed <frame>`` for Dynamo's rewritten bytecode of each frame, ``resume <name>``
    for the ``__resume_at_*`` functions a graph break creates. Object addresses are removed.
    Raises a RuntimeError saying so if depyf is not installed or cannot read this torch.
    """
    import torch

    try:
        import depyf
    except ImportError as exc:
        raise RuntimeError("depyf is not installed (pip install depyf); read the bytecode with dis instead") from exc
    from course_lib import compat

    out = tempfile.mkdtemp(prefix="course_depyf_")
    compat.dynamo_reset()
    compiled = torch.compile(fn, backend=backend)
    with _quiet_warnings(), depyf.prepare_debug(out), contextlib.redirect_stdout(io.StringIO()):
        compiled(*args)
    compat.dynamo_reset()
    full = "\n".join(p.read_text() for p in sorted(Path(out).glob("full_code_for_*.py")))
    shutil.rmtree(out, ignore_errors=True)
    from course_lib.explore.stable import stable_text  # Dynamo's counters and uuids -> stable names

    return _depyf_functions(stable_text(full))


@contextlib.contextmanager
def _quiet_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _depyf_functions(full_code: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=def )", full_code):
        m = re.match(r"def (__transformed_code_\w+|__resume_at_\w+)\(", block)
        if not m:
            continue
        body = _ADDRESS.sub("", block.split("\n\n")[0].rstrip())
        name = m[1]
        key = f"resume {name}" if name.startswith("__resume") else f"transformed {name.split('_for_', 1)[-1]}"
        found.setdefault(key, body)
    return found


# ----------------------------------------------------------------------------- tlparse


@dataclasses.dataclass(frozen=True)
class TlparseReport:
    """What ``tlparse`` wrote: ``index.html`` and one folder per compile id (``-_0_0_0``...)."""

    out_dir: Path
    files: tuple[str, ...]

    @property
    def index_html(self) -> str:
        return (self.out_dir / "index.html").read_text()

    def compile_ids(self) -> list[str]:
        return sorted({f.split("/")[0] for f in self.files if "/" in f})

    def __str__(self) -> str:
        ids = self.compile_ids()
        return f"tlparse: index.html and {len(ids)} compile folders: {', '.join(ids)}"


def run_tlparse(trace_dir: str | Path, out_dir: str | Path | None = None) -> TlparseReport:
    """Run ``tlparse`` on the newest structured trace in ``trace_dir`` (written by ``TORCH_TRACE=dir``)."""
    exe = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
    if not Path(exe).exists():
        raise RuntimeError("tlparse is not installed (pip install tlparse); read the raw trace as JSON lines instead")
    traces = sorted(Path(trace_dir).glob("*.log"), key=lambda p: p.stat().st_mtime)
    if not traces:
        raise FileNotFoundError("no trace file: was the script run with TORCH_TRACE set?")
    out = Path(out_dir or tempfile.mkdtemp(prefix="course_tlparse_")) / "tl_out"
    subprocess.run([exe, str(traces[-1]), "-o", str(out), "--overwrite", "--no-browser"], check=True,
                   capture_output=True, text=True, timeout=120)  # fmt: skip
    files = tuple(sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()))
    return TlparseReport(out, files)


# ----------------------------------------------------------------------------- pdb inside a backend


def scripted_pdb(commands: list[str]):
    """A real ``pdb.Pdb`` that reads ``commands`` instead of the keyboard, and its output buffer.

    In a notebook run by CI nobody types at the ``(Pdb)`` prompt; giving the commands up front
    shows the same session. Interactively, call ``breakpoint()`` in the backend instead.
    """
    import pdb

    # Jupyter's kernel replaces pdb.Pdb by IPython's subclass (colours, no source for generated
    # code); the plain class is still first in its MRO under the name pdb.Pdb.
    plain = next(c for c in pdb.Pdb.__mro__ if c.__module__ == "pdb" and c.__name__ == "Pdb")
    out = io.StringIO()
    debugger = plain(stdin=io.StringIO("\n".join(commands) + "\ncontinue\n"), stdout=out, nosigint=True)
    debugger.use_rawinput = False
    return debugger, out


# ----------------------------------------------------------------------------- AOTInductor packages

PACKAGE_KINDS = (  # (pattern, what it is), first match wins
    (r"\.wrapper\.cpp$", "C++ wrapper (AOTInductor's run_impl)"),
    (r"\.kernel\.cpp$", "C++ kernels"),
    (r"\.so$", "shared object (wrapper + kernels, compiled)"),
    (r"(\.bin|weights?|constants?)", "weights"),
    (r"\.json$", "metadata"),
)


def package_contents(path: str | Path) -> list[tuple[str, str, int]]:
    """``(name inside the .pt2, kind, bytes)`` for every file in an AOTInductor package (a zip)."""
    rows = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            kind = next((k for pat, k in PACKAGE_KINDS if re.search(pat, info.filename)), "archive bookkeeping")
            name = re.sub(r"/[a-z0-9]{40,}\.", "/<hash>.", info.filename)
            rows.append((name, kind, info.file_size))
    return rows


def package_file(path: str | Path, suffix: str) -> str:
    """The text of the first file in the package whose name ends with ``suffix``."""
    with zipfile.ZipFile(path) as zf:
        name = next((n for n in zf.namelist() if n.endswith(suffix)), None)
        if name is None:
            raise FileNotFoundError(f"no *{suffix} in the package")
        return zf.read(name).decode()


SIZE_SYMBOL = re.compile(r"\b[su]\d+\b")


def size_symbols(text: str) -> list[str]:
    """Size symbols (``s0``, ``s77``; unbacked ``u0``) mentioned in a guard, graph or log text."""
    return sorted(set(SIZE_SYMBOL.findall(text)), key=lambda s: (s[0], int(s[1:])))


def clean_paths(text: str) -> str:
    """Absolute file paths in a transcript cut to their file name (notebook output stays portable)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colour codes, if a debugger added them
    return re.sub(r"(?<![\w.:/<])/(?:[^\s/():'\"<>]+/)+([^\s/():'\"]+)", r"\1", text)


# ----------------------------------------------------------------------------- exercise checks (04d)
# Each check runs the real tool live, hands its output to the learner's function, and compares the
# answer with what the check itself caused (which size it changed) or with a second artefact of the
# same compile. They return course_lib.check.Verdict and never print the expected answer.

GUARD_CASES = (  # (shapes of p and q on the first call, which argument changes, which dim, new size)
    (((3, 5), (2, 4)), "p", 0, 7),
    (((3, 5), (2, 4)), "q", 1, 9),
    (((6, 2), (5, 3)), "p", 1, 4),
    (((2, 2, 2), (4,)), "q", 0, 6),
)


def _two_inputs(p, q):
    return p.sin().sum() + q.cos().sum()


def recompile_log_for(shapes, arg: str, dim: int, size: int) -> list[str]:
    """The ``recompiles`` log lines of a real Dynamo recompile caused by changing ``arg``'s ``dim``."""
    import torch

    from course_lib import compat

    compat.dynamo_reset()
    compiled = torch.compile(_two_inputs, backend="eager")
    first = [torch.randn(*s) for s in shapes]
    second = [t.clone() for t in first]
    idx = "pq".index(arg)
    new_shape = list(shapes[idx])
    new_shape[dim] = size
    second[idx] = torch.randn(*new_shape)
    compiled(*first)
    with capture_logs(recompiles=True) as logs:
        compiled(*second)
    compat.dynamo_reset()
    return logs.of("recompiles")


def check_failing_guard(failing_guard):
    """Verdict for 04d's exercise: ``failing_guard(lines) -> (argument name, dim)`` on live recompile logs."""
    from course_lib.check import Verdict

    for shapes, arg, dim, size in GUARD_CASES:
        lines = recompile_log_for(shapes, arg, dim, size)
        if not lines:
            return Verdict(False, "this torch logged no recompile for a changed size; see course_lib/debugtools.py")
        got = failing_guard(lines)
        if tuple(got) != (arg, dim):
            return Verdict(False, f"on a log where one size changed, your answer was {got!r}, which is not the "
                                  "tensor and dimension whose size changed")  # fmt: skip
    return Verdict(True, f"{len(GUARD_CASES)} live recompile logs read correctly")


def check_fused_ops(fused_ops, graphs) -> object:
    """Verdict for 04d: ``fused_ops(output_code) -> {kernel: set of ATen ops}`` on each debug graph.

    The expected ops come from the same compile's ``fx_graph_readable.py`` (each graph here
    becomes one kernel), so the answer is checked against a second artefact, not against a parser.
    """
    from course_lib.check import Verdict

    for g in graphs:
        code = g.read("output_code.py")
        names = kernel_names(code)
        if len(names) != 1:
            return Verdict(False, f"{g.name} has {len(names)} kernels; the exercise expects graphs of one kernel")
        want = {names[0]: set(aten_ops(g.read("fx_graph_readable.py")))}
        got = fused_ops(code)
        got = {k: set(v) for k, v in dict(got).items()}
        if set(got) != set(want):
            return Verdict(False, f"{g.name}: your kernel names {sorted(got)} are not the kernels of this output code")
        if got != want:
            return Verdict(False, f"{g.name}: the op set you gave for {names[0]} differs from the ATen ops of "
                                  "the graph this kernel was compiled from")  # fmt: skip
    return Verdict(True, f"kernels of {len(graphs)} graphs named with the ops they fuse")


def check_fullgraph_fix(original, fixed, shapes=((4, 8), (3,), (2, 3, 5))):
    """Verdict for 04d: ``fixed`` compiles with ``fullgraph=True`` and agrees with ``original`` eagerly."""
    import torch

    from course_lib import compat
    from course_lib.check import Verdict

    fixed(torch.ones(2))  # eagerly first: an unattempted stub raises NotImplementedError here, not inside Dynamo
    compat.dynamo_reset()
    compiled = torch.compile(fixed, fullgraph=True, backend="eager")
    for shape in shapes:
        for sign in (1.0, -1.0):
            x = torch.rand(*shape) * sign + 0.01 * sign
            try:
                got = compiled(x)
            except Exception as exc:  # Dynamo refused: report its first line, like the fullgraph error
                compat.dynamo_reset()
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                return Verdict(False, f"torch.compile(fullgraph=True) still fails: {type(exc).__name__}: {first}")
            if not torch.allclose(got, original(x)):
                compat.dynamo_reset()
                return Verdict(False, f"compiles as one graph, but differs from the original on a {shape} input "
                                      f"whose sum is {'positive' if sign > 0 else 'negative'}")  # fmt: skip
    compat.dynamo_reset()
    return Verdict(True, f"one graph, same results on {2 * len(shapes)} inputs of both signs")


# ----------------------------------------------------------------------------- dynamic shapes (04e)


@dataclasses.dataclass
class CompileRecorder:
    """A Dynamo backend that records each graph it is given and runs it as is (no kernels).

    ``compiles`` counts graphs; ``graphs`` keeps ``(GraphModule, example_inputs)``, where a
    dynamic size arrives as a ``SymInt`` example input named after its symbol (``s0``, ``s77``).
    """

    graphs: list = dataclasses.field(default_factory=list)

    def __call__(self, gm, example_inputs):
        self.graphs.append((gm, list(example_inputs)))
        return gm.forward

    @property
    def compiles(self) -> int:
        return len(self.graphs)

    def readable(self, index: int = -1) -> str:
        """The graph printed with sizes, as ``f32[s77, 3]`` (``GraphModule.print_readable``)."""
        return clean_paths(self.graphs[index][0].print_readable(print_output=False)).strip()


def compiles_per_call(fn, inputs: list, **compile_kwargs) -> list[bool]:
    """Run the compiled ``fn`` on each input in turn; True where that call made Dynamo compile a graph."""
    import torch

    from course_lib import compat

    compat.dynamo_reset()
    rec = CompileRecorder()
    compiled = torch.compile(fn, backend=rec, **compile_kwargs)
    out = []
    for x in inputs:
        before = rec.compiles
        compiled(x)
        out.append(rec.compiles > before)
    compat.dynamo_reset()
    return out


def pick(x):
    """04e's function with guards on its size: a branch on the size, and a view that needs it even."""
    if x.shape[0] > 8:
        return x.view(-1, 2).sum(1)
    return x * 2


def reused_sizes(fn, first: int, sizes) -> dict[int, bool]:
    """Compile ``fn`` with ``dynamic=True`` on ``first`` rows; for each of ``sizes``, is that one graph reused?

    ``torch.compiler.set_stance("fail_on_recompile")`` makes a guard failure raise instead of
    compiling again, so one graph is tested against every size and the cache never grows.
    """
    import torch

    from course_lib import compat

    compat.dynamo_reset()
    rec = CompileRecorder()
    compiled = torch.compile(fn, backend=rec, dynamic=True)
    compiled(torch.randn(first))
    reused = {}
    with torch.compiler.set_stance("fail_on_recompile"):
        for n in sizes:
            try:
                compiled(torch.randn(n))
                reused[n] = rec.compiles == 1
            except Exception:  # the guards refused this size
                reused[n] = False
    compat.dynamo_reset()
    return reused


GUARD_SIZES = (0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 15, 16, 33, 64)


def check_size_guard(accepts, fn=pick, first: int = 10):
    """Verdict for 04e: ``accepts(n)`` says whether the real graph compiled at ``first`` rows serves ``n`` rows."""
    from course_lib.check import Verdict

    mine = {n: bool(accepts(n)) for n in GUARD_SIZES}  # the learner's answers first (a stub stops here)
    real = reused_sizes(fn, first, GUARD_SIZES)
    wrong = [n for n in GUARD_SIZES if mine[n] != real[n]]
    if wrong:
        return Verdict(False, f"your guard disagrees with Dynamo's on {len(wrong)} of {len(GUARD_SIZES)} sizes, "
                              f"the first at n = {wrong[0]}")  # fmt: skip
    return Verdict(True, f"your guard matches Dynamo's on {len(GUARD_SIZES)} sizes")


class TwoInputs:
    """04e's export exercise model: ``relu(linear(x + y)).sum(-1)``, built on demand (torch imported lazily)."""

    @staticmethod
    def make():
        import torch

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 4)

            def forward(self, x, y):
                return torch.relu(self.lin(x + y)).sum(-1)

        torch.manual_seed(0)
        return Model().eval()


def check_export_spec(spec, batches=(2, 5, 17, 300)):
    """Verdict for 04e: ``spec`` exports ``TwoInputs`` with a dynamic batch, and the program serves ``batches``."""
    import torch

    from course_lib.check import Verdict

    model = TwoInputs.make()
    example = (torch.randn(3, 8), torch.randn(3, 8))
    try:
        ep = torch.export.export(model, example, dynamic_shapes=spec)
    except Exception as exc:  # a constraint violation is the usual failure; show its first lines
        text = " ".join(str(exc).strip().splitlines()[:2])
        return Verdict(False, f"torch.export refused the spec: {type(exc).__name__}: {text}")
    if not size_symbols(" ".join(str(k) for k in ep.range_constraints)):
        return Verdict(False, "the program exported, but with no dynamic size: every batch is fixed to 3")
    runner = ep.module()
    for b in batches:
        x, y = torch.randn(b, 8), torch.randn(b, 8)
        try:
            got = runner(x, y)
        except Exception as exc:
            return Verdict(False, f"the exported program refuses batch {b}: {type(exc).__name__}")
        if not torch.allclose(got, model(x, y), atol=1e-6):
            return Verdict(False, f"the exported program differs from eager at batch {b}")
    return Verdict(True, f"exported once, ran batches {list(batches)} like eager")


RECOMPILE_SIZES = (4, 4, 6, 8, 1, 8, 3)


def _rows_times_two(x):
    return (x * 2).sum(0)


def check_recompile_prediction(prediction):
    """Verdict for 04e: a list of booleans (does call i compile?) against Dynamo run live on RECOMPILE_SIZES."""
    import torch

    from course_lib.check import Verdict

    got = [bool(p) for p in prediction]
    if len(got) != len(RECOMPILE_SIZES):
        return Verdict(False, f"give one True/False per call ({len(RECOMPILE_SIZES)} calls), not {len(got)}")
    real = compiles_per_call(_rows_times_two, [torch.randn(n, 3) for n in RECOMPILE_SIZES])
    wrong = [i for i, (a, b) in enumerate(zip(got, real)) if a != b]
    if wrong:
        return Verdict(False, f"{len(wrong)} of {len(real)} calls predicted wrongly")
    return Verdict(True, f"all {len(real)} calls predicted; Dynamo compiled {sum(real)} graphs")
