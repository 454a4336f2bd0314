"""LLVM's command-line tools (``opt``, ``llc``): find the newest installed one, and feed it IR.

Teaches: nothing of LLVM itself; this is plumbing shared by :mod:`course_lib.llvm.passes` (single
passes llvmlite lacks, through ``opt``) and :mod:`course_lib.llvm.backend` (the code generator,
through ``llc``).

The tools come from the system's LLVM package (Debian/Ubuntu: ``llvm-19``, whose binaries live
in ``/usr/lib/llvm-19/bin`` and as ``opt-19`` / ``llc-19``; conda-forge: ``llvm-tools``). That
LLVM is usually older than llvmlite's (LLVM 22), and textual IR is only read *backwards*: LLVM
19 does not know syntax added later, such as ``captures(none)`` (LLVM 21) or ``icmp samesign``
(LLVM 20). :func:`downgrade_ir` rewrites the few such spellings the course's IR meets into what
older LLVMs read, with the same meaning or a weaker one (dropping a fact is always safe).
LLVM 14 reads opaque pointers (``ptr``) only with ``-opaque-pointers``; older ones not at all.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re
import shutil
import subprocess

OLDEST = 14  # the first LLVM whose tools read opaque pointers (with -opaque-pointers)


@dataclasses.dataclass(frozen=True)
class Tool:
    """One installed LLVM tool: where it is and which LLVM it belongs to."""

    name: str  # "opt" or "llc"
    path: str
    major: int
    version: str

    @property
    def flags(self) -> list[str]:
        """Flags every call needs: LLVM 14 must be told that ``ptr`` is a type."""
        return ["-opaque-pointers"] if self.major < 15 else []

    def __str__(self) -> str:
        return f"{self.name} (LLVM {self.version})"


def _candidates(name: str) -> list[str]:
    found = [shutil.which(name)]
    found += sorted(glob.glob(f"/usr/lib/llvm-*/bin/{name}"))  # Debian/Ubuntu versioned packages
    found += [shutil.which(f"{name}-{v}") for v in range(30, OLDEST - 1, -1)]
    found += sorted(glob.glob(f"/opt/homebrew/opt/llvm*/bin/{name}") + glob.glob(f"/usr/local/opt/llvm*/bin/{name}"))
    seen, out = set(), []
    for path in found:
        if path and os.access(path, os.X_OK) and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            out.append(path)
    return out


def _version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"LLVM version (\d+)\.(\d+)\.(\d+)", out)
    return ".".join(m.groups()) if m else None


@functools.cache
def find(name: str) -> Tool | None:
    """The newest installed ``name`` (``"opt"``, ``"llc"``) of LLVM 14 or later, or None.

    Looks on ``PATH`` (``opt``, ``opt-19``...) and in ``/usr/lib/llvm-*/bin``. Set
    ``COURSE_LLVM_BIN`` to a directory to use the tools there and nothing else.
    """
    only = os.environ.get("COURSE_LLVM_BIN")
    paths = [os.path.join(only, name)] if only else _candidates(name)
    tools = []
    for path in paths:
        version = _version(path) if os.access(path, os.X_OK) else None
        if version and int(version.split(".")[0]) >= OLDEST:
            tools.append(Tool(name, path, int(version.split(".")[0]), version))
    return max(tools, key=lambda t: tuple(int(x) for x in t.version.split(".")), default=None)


def missing(name: str, why: str) -> str:
    """The sentence shown when a tool is absent: what is missing, what for, how to install it."""
    return (
        f"LLVM's `{name}` (version {OLDEST} or later) is not installed, so {why}. "
        "Install it with `make install` (as root it runs `apt-get install llvm-19`), "
        "or `sudo apt-get install llvm-19`, or `conda install -c conda-forge llvm-tools`."
    )


# Newer spelling -> what LLVM 14-19 read. Each rule keeps the meaning or forgets a fact.
DOWNGRADES = [
    (re.compile(r"\bcaptures\(none\)"), "nocapture"),  # LLVM 21 renamed nocapture
    (re.compile(r"\bcaptures\([^)]*\)\s?"), ""),  # partial capture facts: no older spelling
    (re.compile(r"\b(icmp) samesign\b"), r"\1"),  # LLVM 20: a hint, safe to drop
    (re.compile(r",?\s*errnomem: \w+"), ""),  # LLVM 21: errno in memory(...) effects
    (re.compile(r"\bdead_on_return\s?"), ""),  # LLVM 21 parameter attribute
    (re.compile(r'\s*"target-features"="[^"]*"'), ""),  # feature names change between versions
]


def downgrade_ir(text: str) -> str:
    """``text`` with newer-than-LLVM-19 syntax rewritten (see :data:`DOWNGRADES`)."""
    for pattern, new in DOWNGRADES:
        text = pattern.sub(new, text)
    return text.replace("memory(, ", "memory(").replace("memory()", "")


def first_error(stderr: str) -> str:
    """The first ``line:col: error: ...`` LLVM printed and the source line after it, without paths."""
    lines = stderr.strip().splitlines()
    for k, line in enumerate(lines):
        m = re.search(r"(\d+:\d+: )?error: (.*)", line)
        if m:
            after = lines[k + 1] if k + 1 < len(lines) and m.group(1) else ""
            return (
                (f"line {m.group(1).rstrip(': ')}: " if m.group(1) else "")
                + m.group(2)
                + ("\n" + after if after else "")
            )
    return lines[-1] if lines else "(no message)"
