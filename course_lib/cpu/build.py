"""Compile C with gcc, keep its vectorisation report and the assembly, load it with ctypes.

Teaches what ``torch/_inductor/codecs/cpp_builder.py`` and ``torch/_inductor/codecache.py``
(``CppCodeCache``) do with the C++ Inductor writes: hash the source and flags, compile once into
a cached shared object, load it. We add what a learner needs to *see* the compiler's choices:

* gcc's optimisation remarks, ``-fopt-info-vec-optimized`` (a loop was vectorised, with which
  vector size) and ``-fopt-info-vec-missed`` (why not), parsed into :class:`Remark` records
  and summarised per loop as :class:`LoopReport`;
* ``objdump -d`` of the object, split per function, each instruction classified by the rule
  table :data:`VECTOR_REGISTERS` as packed SIMD (``vaddps ymm``: 8 lanes at once), scalar SIMD
  (``vaddss xmm``: one float in a vector register, *not* vectorised) or not SIMD at all.

Pipeline: C source -> gcc (remarks file) -> ``kernel.so`` -> objdump text -> :class:`CompiledC`.
Everything lands in ``.cache/course_lib/cpu/<hash>/``; the report names the file ``kernel.c``
(gcc runs inside that folder), so no absolute path reaches printed output.

Debug switch: ``COURSE_DEBUG=cpu`` prints the gcc command and the raw remarks of each compile.

Simplified: one translation unit, C (or C++ with ``lang="c++"``) (Inductor compiles C++ against ATen headers).
Reference: GCC manual, "Developer Options" (``-fopt-info``), and the x86 SDM for mnemonics.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import pathlib
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence

from course_lib import env

SOURCE_NAME = "kernel.c"
DEFAULT_FLAGS = "-O3 -march=native"

# Rule table: register-name prefix -> vector bits (x86), and the AArch64 forms.
VECTOR_REGISTERS = {"zmm": 512, "ymm": 256, "xmm": 128}
_X86_REG = re.compile(r"\b([xyz]mm)\d+\b")
_ARM_VEC = re.compile(r"\bv\d+\.\d*[bhsd]\b|\bq\d+\b")
_ARM_SVE = re.compile(r"\bz\d+\.[bhsd]\b")
# Scalar-in-vector-register mnemonics end in ss/sd (scalar single/double) - except broadcasts.
_SCALAR_SUFFIX = re.compile(r"(ss|sd|si2ss|si2sd)$")
_NOT_SCALAR = ("vbroadcastss", "vbroadcastsd", "vpbroadcastd", "vpbroadcastq")
_REMARK = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>optimized|missed|note): ?(?P<msg>.*)$")
_BOILERPLATE = {"_init", "_fini", "deregister_tm_clones", "register_tm_clones", "__do_global_dtors_aux",
                "frame_dummy", "_start"}  # fmt: skip


class CompileError(RuntimeError):
    """gcc rejected the source; the message holds gcc's own diagnostics (file named kernel.c)."""


# ----------------------------------------------------------------------------- report


@dataclasses.dataclass(frozen=True)
class Remark:
    """One gcc remark: ``kernel.c:12:23: missed: couldn't vectorize loop``."""

    line: int
    column: int
    kind: str  # "optimized" | "missed"
    message: str

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.kind}: {self.message}"


@dataclasses.dataclass(frozen=True)
class LoopReport:
    """What happened to the loop starting on ``line``: vectorised (with vector bytes) or why not."""

    line: int
    loop: str  # the source text of that line
    vectorised: bool
    vector_bytes: int  # widest vector used, 0 when not vectorised
    reason: str  # why not, or notes such as "versioned for possible aliasing"

    def __str__(self) -> str:
        verdict = f"vectorised ({self.vector_bytes}-byte vectors)" if self.vectorised else "NOT vectorised"
        tail = f": {self.reason}" if self.reason else ""
        return f"line {self.line:>3}  {self.loop:<44.44}  {verdict}{tail}"


def parse_remarks(text: str) -> list[Remark]:
    """Parse a ``-fopt-info`` file; continuation lines (``scalar_type: float``) join the previous."""
    remarks: list[Remark] = []
    for raw in text.splitlines():
        m = _REMARK.match(raw)
        if m:
            if m["kind"] != "note":
                remarks.append(Remark(int(m["line"]), int(m["col"]), m["kind"], m["msg"].strip()))
        elif raw.strip() and remarks and raw.startswith(" "):
            last = remarks[-1]
            remarks[-1] = dataclasses.replace(last, message=f"{last.message} ({raw.strip()})")
    return remarks


def summarise_loops(remarks: Sequence[Remark], source: str) -> list[LoopReport]:
    """One :class:`LoopReport` per loop line, in source order.

    gcc reports a failure as ``couldn't vectorize loop`` on the loop's line followed by the
    reason (``not vectorized: ...``) on the offending statement's line; a later successful
    attempt (outer loop failed, inner loop vectorised; epilogue vectorised with smaller
    vectors) gets its own ``loop vectorized using N byte vectors`` remark.
    """
    lines = source.splitlines()
    loops: dict[int, dict] = {}
    current = None
    for r in remarks:
        if "couldn't vectorize loop" in r.message:
            current = loops.setdefault(r.line, {"vec": 0, "reasons": [], "notes": []})
            continue
        m = re.search(r"loop vectorized using (\d+) byte vectors", r.message)
        if m:
            entry = loops.setdefault(r.line, {"vec": 0, "reasons": [], "notes": []})
            entry["vec"] = max(entry["vec"], int(m[1]))
            current = entry
        elif r.kind == "optimized" and r.line in loops:
            loops[r.line]["notes"].append(r.message.replace("loop ", "", 1))
        elif r.kind == "missed" and current is not None and not current["reasons"]:
            current["reasons"].append(_clean_reason(r.message))
    out = []
    looks_like_loop = sorted(ln for ln in loops if _is_loop_line(lines, ln))
    for line in looks_like_loop or sorted(loops):
        e = loops[line]
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        reason = "; ".join(e["notes"]) if e["vec"] else (e["reasons"][0] if e["reasons"] else "no reason given")
        out.append(LoopReport(line, text, bool(e["vec"]), e["vec"], reason))
    return out


def _is_loop_line(lines: list[str], line: int) -> bool:
    """gcc sometimes files a remark under the function's first line; keep real loop lines."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return bool(re.search(r"\b(for|while|do)\b|#pragma", text))


def _clean_reason(message: str) -> str:
    """Drop gcc's SSA temporaries (``_12 = *_3;``) but keep the reason and the callee's name."""
    message = message.replace("not vectorized: ", "")
    call = re.search(r"= (\w+) \(", message)
    if "clobbers memory" in message and call:
        return f"statement clobbers memory: call to {call[1]}()"
    return re.sub(r"\s*_\d+ = .*$", "", message).rstrip(":; ") or message


# ----------------------------------------------------------------------------- assembly


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One disassembled instruction (no address), classified."""

    mnemonic: str
    operands: str
    simd: str  # "packed" | "scalar" | "" (not a SIMD instruction)
    bits: int  # vector register width used, 0 when none

    def __str__(self) -> str:
        text = f"{self.mnemonic:<12} {self.operands}".rstrip()
        if self.simd == "packed":
            return f"{text:<48} # <<< packed SIMD, {self.bits}-bit"
        if self.simd == "scalar":
            return f"{text:<48} # scalar in a vector register"
        return text


def classify(mnemonic: str, operands: str) -> tuple[str, int]:
    """``("packed" | "scalar" | "", bits)`` for one instruction, by the register-name table.

    ``vaddps ymm0,ymm1,ymm2`` -> packed 256; ``vaddss xmm0,xmm0,[rax]`` -> scalar 128 (one float
    in an SSE register: how scalar float code looks on x86-64); ``add rax,0x20`` -> not SIMD.
    """
    regs = _X86_REG.findall(operands)
    if regs:
        bits = max(VECTOR_REGISTERS[r] for r in regs)
        scalar = bits == 128 and _SCALAR_SUFFIX.search(mnemonic) and mnemonic not in _NOT_SCALAR
        scalar = scalar or mnemonic in ("vmovd", "movd", "vmovq", "movq") and bits == 128
        return ("scalar" if scalar else "packed"), bits
    if _ARM_SVE.search(operands):
        return "packed", 128  # at least 128; the real width is known only at run time
    if _ARM_VEC.search(operands):
        return "packed", 128
    return "", 0


_OBJDUMP_FUNC = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_OBJDUMP_INSN = re.compile(r"^\s*[0-9a-f]+:\s+(?P<mnemonic>[a-z][\w.]*)\s*(?P<ops>.*)$")


def parse_objdump(text: str) -> dict[str, list[Instruction]]:
    """Split ``objdump -d --no-show-raw-insn`` output into functions of classified instructions.

    Addresses are dropped (jump targets keep their symbolic ``<fn+0x30>`` form) so the listing
    is the same wherever the object was loaded or built.
    """
    funcs: dict[str, list[Instruction]] = {}
    current = None
    for line in text.splitlines():
        m = _OBJDUMP_FUNC.match(line)
        if m:
            name = m["name"]
            current = None if ("@plt" in name or name in _BOILERPLATE or name.startswith(".")) else name
            if current:
                funcs[current] = []
            continue
        m = _OBJDUMP_INSN.match(line)
        if m and current:
            ops = re.sub(r"\b[0-9a-f]+ (<[^>]+>)", r"\1", m["ops"].split("#")[0].strip())
            simd, bits = classify(m["mnemonic"], ops)
            funcs[current].append(Instruction(m["mnemonic"], ops, simd, bits))
    return funcs


@dataclasses.dataclass(frozen=True)
class Assembly:
    """Per-function disassembly; ``text(fn)`` marks every packed SIMD instruction."""

    functions: dict[str, list[Instruction]]

    def text(self, function: str) -> str:
        return "\n".join(str(i) for i in self.functions[function])

    def counts(self, function: str) -> dict[str, int]:
        """{"packed": n, "scalar": n, "other": n, "packed256": n...} for one function."""
        out = {"packed": 0, "scalar": 0, "other": 0}
        for insn in self.functions[function]:
            out[insn.simd or "other"] += 1
            if insn.simd == "packed":
                out[f"packed{insn.bits}"] = out.get(f"packed{insn.bits}", 0) + 1
        return out

    def view(self, function: str):
        """A highlighted ``course_lib.viz.code`` view of one function."""
        from course_lib import viz

        return viz.code(self.text(function), "asm", title=f"{function} (objdump)")


# ----------------------------------------------------------------------------- compile


@dataclasses.dataclass
class CompiledC:
    """A compiled C source: ``lib`` (ctypes), ``report`` (per loop), ``remarks`` and ``asm``."""

    source: str
    flags: tuple[str, ...]
    key: str
    lib: ctypes.CDLL = dataclasses.field(repr=False)
    remarks: list[Remark] = dataclasses.field(repr=False)
    report: list[LoopReport] = dataclasses.field(repr=False)
    asm: Assembly = dataclasses.field(repr=False)
    remarks_text: str = dataclasses.field(repr=False, default="")

    def fn(self, name: str, argtypes: Sequence = (), restype=None):
        """The C function ``name`` with ctypes argument and result types set."""
        f = getattr(self.lib, name)
        f.argtypes, f.restype = list(argtypes), restype
        return f

    def loop(self, line: int) -> LoopReport | None:
        return next((r for r in self.report if r.line == line), None)

    @property
    def vectorised_lines(self) -> set[int]:
        return {r.line for r in self.report if r.vectorised}

    def report_text(self) -> str:
        return "\n".join(str(r) for r in self.report) or "(gcc reported no loops)"

    def __repr__(self) -> str:
        n_vec = len(self.vectorised_lines)
        return (
            f"CompiledC(key={self.key[:12]}, flags={' '.join(self.flags)!r}, "
            f"functions={sorted(self.asm.functions)}, loops: {n_vec} vectorised, "
            f"{len(self.report) - n_vec} not)"
        )

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(repr(self))}\n\n{html.escape(self.report_text())}</pre>"


def _split_flags(flags: str | Sequence[str]) -> tuple[str, ...]:
    return tuple(shlex.split(flags)) if isinstance(flags, str) else tuple(flags)


@functools.cache
def gcc_version() -> str:
    out = subprocess.run(["gcc", "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else "unknown gcc"


def cache_key(source: str, flags: Sequence[str]) -> str:
    """sha256 of source, flags and compiler: the same inputs never compile twice."""
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), gcc_version(), sys.platform):
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


def compile_c(
    source: str, flags: str | Sequence[str] = DEFAULT_FLAGS, *, libs: Sequence[str] = ("-lm",), lang: str = "c"
) -> CompiledC:
    """Compile ``source`` into a cached shared object and load it.

    ``flags`` are gcc's (``"-O3 -march=native"``, ``"-O2"``, ``"-O3 -fopenmp"``...); the course
    adds ``-shared -fPIC`` and the vectorisation-remark options itself. Returns a
    :class:`CompiledC` with ``lib``, ``report``, ``remarks`` and ``asm``. Raises
    :class:`CompileError` with gcc's diagnostics when the source does not compile.
    ``lang="c++"`` compiles with g++ instead (file ``kernel.cpp``), for generated C++ kernels.
    """
    if not env.has_gcc():
        raise CompileError("gcc is not on PATH; install gcc (Debian: apt-get install gcc) to run Module 6")
    flags = _split_flags(flags)
    key = cache_key(source, (*flags, f"lang={lang}"))
    # one folder per artefact (kernel.c, kernel.so, vec.txt, asm.txt), built aside and renamed in
    folder = env.artefact("cpu", key[:20], lambda tmp: _build(tmp, source, flags, libs, lang))
    so = folder / "kernel.so"
    remarks_text = (folder / "vec.txt").read_text()
    if env.debug("cpu"):  # COURSE_DEBUG=cpu: the one switch shows every stage
        print(f"# ---- compile_c {key[:12]}: {'g++' if lang != 'c' else 'gcc'} {' '.join(flags)} ----")
        print(f"# ---- remarks ----\n{remarks_text.strip()}")
        print(f"# ---- objdump: {len((folder / 'asm.txt').read_text().splitlines())} lines in asm.txt ----")
    return CompiledC(
        source,
        flags,
        key,
        ctypes.CDLL(str(so)),
        parse_remarks(remarks_text),
        summarise_loops(parse_remarks(remarks_text), source),
        Assembly(parse_objdump((folder / "asm.txt").read_text())),
        remarks_text,
    )


def _build(tmp: pathlib.Path, source: str, flags: Sequence[str], libs: Sequence[str], lang: str = "c") -> None:
    """gcc + objdump into the private folder ``tmp`` (:func:`course_lib.env.artefact` renames it into place)."""
    tmp.mkdir()
    name, compiler = (SOURCE_NAME, "gcc") if lang == "c" else ("kernel.cpp", "g++")
    (tmp / name).write_text(source)
    # Compile and link separately: linking with -ffast-math adds crtfastmath.o, whose constructor
    # turns on flush-to-zero for the whole Python process the moment the library is loaded.
    compile_cmd = [compiler, *flags, "-c", "-fPIC", "-fopt-info-vec-optimized-missed=vec.txt", name, "-o", "kernel.o"]
    link_flags = [f for f in flags if "fast-math" not in f]
    link_cmd = [compiler, *link_flags, "-shared", "kernel.o", "-o", "kernel.so", *libs]
    (tmp / "vec.txt").unlink(missing_ok=True)  # gcc appends to an existing remarks file
    for cmd in (compile_cmd, link_cmd):
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise CompileError(f"{compiler} {' '.join(flags)} failed:\n{done.stderr.strip()}")
    if not (tmp / "vec.txt").exists():
        (tmp / "vec.txt").write_text("")
    dis = ["objdump", "-d", "--no-show-raw-insn", "kernel.so"]
    if env_is_x86():
        dis.insert(1, "-Mintel")
    asm = subprocess.run(dis, cwd=tmp, capture_output=True, text=True, check=False).stdout
    (tmp / "asm.txt").write_text(asm)


def env_is_x86() -> bool:
    import platform

    return platform.machine() in ("x86_64", "AMD64", "i686")
