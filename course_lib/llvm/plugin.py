"""A real LLVM pass in C++, built against the installed LLVM and loaded into ``opt``.

Teaches: the new pass manager's plugin interface (``llvm/include/llvm/Passes/PassPlugin.h``,
``PassInfoMixin`` and ``PreservedAnalyses`` in ``llvm/include/llvm/IR/PassManager.h``), the
C++ twin of :func:`course_lib.llvm.analysis.strength_reduce`. The source is
``data/llvm/pass_plugin/MulToShl.cpp`` (``mul x, 2^k -> shl x, k`` with ``replaceAllUsesWith``).
Position: LLVM IR -> ``opt -load-pass-plugin=MulToShl.so -passes=mul-to-shl`` -> LLVM IR.

Needs ``opt`` and, of the same LLVM version, ``llvm-config`` and headers (Debian: ``llvm-19-dev``)
plus a C++ compiler (``clang++-19`` or ``g++``). :func:`missing` says in one sentence what is
absent; the shared object is cached under ``.cache/course_lib/llvm_plugin/``.
"""

from __future__ import annotations

import dataclasses
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


def build() -> Path:
    """Compile MulToShl.cpp into a shared object for the installed ``opt`` (cached by source and flags)."""
    why = missing()
    if why:
        raise RuntimeError(why)
    opt = tools.find("opt")
    config, cxx = _llvm_config(opt.major), _compiler(opt.major)
    cxxflags = subprocess.run([config, "--cxxflags"], capture_output=True, text=True, check=True).stdout.split()
    src = source_path()
    key = env.artefact_key(src.read_text(), cxxflags, cxx, opt.version)

    def compile_to(out: Path) -> None:
        cmd = [cxx, "-shared", "-fPIC", "-O1", *cxxflags, str(src), "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"building the pass plugin failed:\n{' '.join(cmd)}\n{done.stderr[-2000:]}")

    return env.artefact("llvm_plugin", f"MulToShl-{key}.so", compile_to)


@dataclasses.dataclass
class PluginRun:
    text: str  # the module after the pass
    rewritten: dict[str, int]  # function -> how many muls the pass replaced (from its stderr report)
    command: str


def run(ir_text: str) -> PluginRun:
    """``opt -load-pass-plugin=<built .so> -passes=mul-to-shl -S`` on ``ir_text``."""
    lib = build()
    opt = tools.find("opt")
    cmd = [opt.path, *opt.flags, f"-load-pass-plugin={lib}", f"-passes={PASS_NAME}", "-S", "-o", "-", "-"]
    done = subprocess.run(cmd, input=tools.downgrade_ir(ir_text), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ValueError(f"opt rejected the module: {tools.first_error(done.stderr)}")
    counts = {m[1]: int(m[2]) for m in re.finditer(r"mul-to-shl: (\S+): (\d+) rewritten", done.stderr)}
    shown = f"opt -load-pass-plugin={lib.name} -passes={PASS_NAME} -S"
    return PluginRun(done.stdout, counts, shown)
