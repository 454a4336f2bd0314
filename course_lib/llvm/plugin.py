"""A real LLVM pass in C++, built against the installed LLVM and loaded into ``opt``.

Teaches: the new pass manager's plugin interface (``llvm/include/llvm/Passes/PassPlugin.h``,
``PassInfoMixin`` and ``PreservedAnalyses`` in ``llvm/include/llvm/IR/PassManager.h``), the
C++ twin of :func:`course_lib.llvm.analysis.strength_reduce`. The source is
``data/llvm/pass_plugin/MulToShl.cpp`` (``mul x, 2^k -> shl x, k`` with ``replaceAllUsesWith``).
Position: LLVM IR -> ``opt -load-pass-plugin=MulToShl.so -passes=mul-to-shl`` -> LLVM IR.
The 02b exercise's ``UDivToLShr`` plugin is the same file with the inside of ``run`` left to the
learner (:func:`udiv_template`).

Needs ``opt`` and, of the same LLVM version, ``llvm-config`` and headers (Debian: ``llvm-19-dev``)
plus a C++ compiler (``clang++-19`` or ``g++``). :func:`missing` says in one sentence what is
absent; the shared object is cached under ``.cache/course_lib/llvm_plugin/``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
import subprocess
from pathlib import Path

from course_lib import env
from course_lib.llvm import tools

PASS_NAME = "mul-to-shl"


def source_path() -> Path:
    return env.data_dir() / "llvm" / "pass_plugin" / "MulToShl.cpp"


def _llvm_config(major: int) -> str | None:
    return shutil.which(f"llvm-config-{major}") or (
        shutil.which("llvm-config") if _config_major(shutil.which("llvm-config")) == major else None
    )


def _config_major(path: str | None) -> int | None:
    if not path:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    return int(out.split(".")[0]) if out[:1].isdigit() else None


def _compiler(major: int) -> str | None:
    return shutil.which(f"clang++-{major}") or shutil.which("clang++") or shutil.which("g++")


def missing() -> str | None:
    """None when the plugin can be built and run, else the sentence saying what is missing."""
    opt = tools.find("opt")
    if opt is None:
        return tools.missing("opt", "the C++ pass plugin cannot run")
    config = _llvm_config(opt.major)
    if (
        config is None
        or not Path(
            subprocess.run([config, "--includedir"], capture_output=True, text=True).stdout.strip(),
            "llvm",
            "Passes",
            "PassPlugin.h",
        ).exists()
    ):
        return (
            f"LLVM {opt.major}'s development files (llvm-config-{opt.major} and its headers) are not installed, "
            f"so the C++ pass plugin cannot be built: `sudo apt-get install llvm-{opt.major}-dev`."
        )
    if _compiler(opt.major) is None:
        return "no C++ compiler (clang++ or g++) is installed, so the C++ pass plugin cannot be built."
    return None


def build(source: str | None = None) -> Path:
    """Compile a plugin's C++ (MulToShl.cpp by default) into a shared object for the installed
    ``opt`` (cached by source and flags). A compile error raises ValueError with the compiler's
    first error line, so a learner's plugin fails with a message, not a traceback."""
    why = missing()
    if why:
        raise RuntimeError(why)
    opt = tools.find("opt")
    config, cxx = _llvm_config(opt.major), _compiler(opt.major)
    cxxflags = subprocess.run([config, "--cxxflags"], capture_output=True, text=True, check=True).stdout.split()
    text = source_path().read_text() if source is None else source
    key = env.artefact_key(text, cxxflags, cxx, opt.version)

    def compile_to(out: Path) -> None:
        src = out.with_suffix(".cpp")
        src.write_text(text)
        cmd = [cxx, "-shared", "-fPIC", "-O1", *cxxflags, str(src), "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            errors = [ln for ln in done.stderr.splitlines() if "error" in ln]
            first = errors[0].split(".cpp:", 1)[-1] if errors else done.stderr.strip()[-500:]
            raise ValueError(f"the plugin does not compile: {first}")

    name = "MulToShl" if source is None else "Plugin"
    return env.artefact("llvm_plugin", f"{name}-{key}.so", compile_to)


@dataclasses.dataclass
class PluginRun:
    text: str  # the module after the pass
    rewritten: dict[str, int]  # function -> how many muls the pass replaced (from its stderr report)
    command: str


def run(ir_text: str, source: str | None = None, pass_name: str = PASS_NAME) -> PluginRun:
    """``opt -load-pass-plugin=<built .so> -passes=<pass_name> -S`` on ``ir_text``.

    ``source``: another plugin's C++ (default MulToShl.cpp); its pass reports on stderr, one line per
    function, ``<pass_name>: <function>: <n> rewritten``."""
    lib = build(source)
    opt = tools.find("opt")
    cmd = [opt.path, *opt.flags, f"-load-pass-plugin={lib}", f"-passes={pass_name}", "-S", "-o", "-", "-"]
    done = subprocess.run(cmd, input=tools.downgrade_ir(ir_text), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ValueError(f"opt rejected the module: {tools.first_error(done.stderr)}")
    report = re.compile(re.escape(pass_name) + r": (\S+): (\d+) rewritten")
    counts = {m[1]: int(m[2]) for m in report.finditer(done.stderr)}
    shown = f"opt -load-pass-plugin={lib.name} -passes={pass_name} -S"
    return PluginRun(done.stdout, counts, shown)


# ----------------------------------------------------------------------------- the exercise's plugin
UDIV_PASS = "udiv-to-lshr"

# The exercise's plugin is MulToShl.cpp with its rewrite taken out: the same includes, pass class,
# PreservedAnalyses and registration, so the file the notebook shows is the one the learner edits.
_BODY_START = "PreservedAnalyses run(Function &F"  # the learner's code starts after this line ...
_BODY_END = "errs() <<"  # ... and replaces everything up to this report line (included)
_SKELETON_BODY = r"""    unsigned Rewritten = 0;  // count every udiv you replace
    // ---- begin learner code
@BODY@
    // ---- end learner code
    errs() << "udiv-to-lshr: " << F.getName() << ": " << Rewritten << " rewritten\n";"""
_RENAMES = (  # MulToShl.cpp's text -> the exercise's
    ("Todo.empty()", "Rewritten == 0"),
    ("MulToShl", "UDivToLShr"),
    ('"mul-to-shl"', '"udiv-to-lshr"'),
)


@functools.cache
def udiv_template() -> str:
    """The UDivToLShr plugin with ``@BODY@`` where the learner's statements go, made from
    MulToShl.cpp: its opening comment and the inside of ``run`` are replaced, names renamed."""
    lines = source_path().read_text().splitlines()
    head = next(i for i, ln in enumerate(lines) if not ln.startswith("//"))
    body = _find(lines, _BODY_START) + 1
    report = _find(lines, _BODY_END, body)
    text = "\n".join(
        ["// UDivToLShr: `udiv x, 2^k` -> `lshr x, k`. The body of run() is the learner's (02b)."]
        + lines[head:body] + [_SKELETON_BODY] + lines[report + 1 :]
    )  # fmt: skip
    for old, new in _RENAMES:
        if old not in text:
            raise RuntimeError(f"{source_path().name} no longer contains {old!r}: update plugin._RENAMES")
        text = text.replace(old, new)
    return text + "\n"


def _find(lines: list[str], needle: str, start: int = 0) -> int:
    for i in range(start, len(lines)):
        if lines[i].strip().startswith(needle):
            return i
    raise RuntimeError(f"MulToShl.cpp has no line starting with {needle!r}: update plugin._BODY_START/_BODY_END")


def udiv_plugin_source(body: str) -> str:
    """The UDivToLShr plugin with ``body`` (C++ statements) as the inside of its ``run``."""
    if not isinstance(body, str) or not body.strip():
        raise ValueError("the body of run() must be a non-empty string of C++ statements")
    return udiv_template().replace("@BODY@", body)


def udiv_power_of_two_count(ir_text: str) -> dict[str, int]:
    """Oracle (no LLVM): per function, the ``udiv``s whose divisor is a constant power of two,
    read as an unsigned number of the operation's width."""
    out: dict[str, int] = {}
    fn = None
    for line in ir_text.splitlines():
        head = re.match(r"define .*@([\w.]+)\(", line)
        if head:
            fn = head[1]
            out[fn] = 0
            continue
        m = re.search(r"= udiv (?:exact )?i(\d+) [^,]+, (-?\d+)\s*$", line)
        if m and fn is not None:
            value = int(m[2]) % (1 << int(m[1]))
            out[fn] += value > 0 and value & (value - 1) == 0
    return out


def check_udiv_body(body: str, seed: int = 7):
    """Verdict on a learner's ``run`` body for UDivToLShr (02b, exercise 2b): it compiles, ``opt``
    loads it, each function's reported count equals :func:`udiv_power_of_two_count`, no
    power-of-two ``udiv`` is left, and every function of ``examples.UDIV_FUNCTIONS`` returns the
    same before and after the pass on 40 argument pairs (JIT)."""
    import random

    from course_lib.check import Verdict
    from course_lib.llvm import examples, mcjit

    module = examples.UDIV_FUNCTIONS
    try:
        done = run(module, udiv_plugin_source(body), UDIV_PASS)
    except ValueError as exc:
        return Verdict(False, _learner_line(str(exc)))
    want = udiv_power_of_two_count(module)
    left = {f: n for f, n in udiv_power_of_two_count(done.text).items() if n}
    if left:
        return Verdict(False, f"power-of-two udivs are still there after your pass: {left}")
    for name in want:
        if done.rewritten.get(name) != want[name]:
            return Verdict(False, f"@{name}: your pass reports {done.rewritten.get(name)} rewritten; "
                                  "count every udiv you replace, and only those")  # fmt: skip
    gen = random.Random(seed)
    pairs = [(gen.randint(-(2**62), 2**62), gen.randint(-(2**40), 2**40)) for _ in range(38)] + [
        (-1, 7),
        (2**63 - 1, 0),
    ]
    for name in want:
        before = mcjit.compile_function(module, name, "i64", ["i64", "i64"], level=0)
        after = mcjit.compile_function(done.text, name, "i64", ["i64", "i64"], level=0)
        for x, y in pairs:
            if before(x, y) != after(x, y):
                return Verdict(
                    False, f"@{name}({x}, {y}) returns {before(x, y)} before your pass and {after(x, y)} after it"
                )
    return Verdict(True, f"{sum(want.values())} udivs rewritten in {len(want)} functions; "
                         f"results equal on {len(pairs)} argument pairs each")  # fmt: skip


def _learner_line(message: str) -> str:
    """'L:C: error: ...' of the generated file, renumbered as a line of the learner's body."""
    first = udiv_template().splitlines().index("@BODY@") + 1
    m = re.match(r"(\d+):(\d+): (.*)", message.split("compile: ", 1)[-1])
    return f"the plugin does not compile: line {int(m[1]) - first + 1} of your code: {m[3]}" if m else message
