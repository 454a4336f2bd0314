"""What this machine has, found cheaply (no torch import), and the run mode of the labs.

The course runs in one of two modes:

* ``"cpu"`` (the default): Triton kernels execute in Triton's interpreter, Triton's real
  compiler still produces TTIR/TTGIR/LLVM IR/PTX/SASS (it needs no GPU), Inductor uses its C++
  backend and gcc.
* ``"gpu"``: an NVIDIA GPU is present, Triton and Inductor run natively.

Triton reads ``TRITON_INTERPRET`` when it is imported, so :func:`configure_triton` must run
before anything imports triton; ``import course_lib`` calls it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import shutil
import uuid
from collections.abc import Callable

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


def repo_root() -> pathlib.Path:
    """The course checkout (the folder holding ``course_lib/``)."""
    return _PACKAGE_DIR.parent


def data_dir() -> pathlib.Path:
    """``data/``: small inputs and recorded artefacts."""
    return repo_root() / "data"


def cache_dir() -> pathlib.Path:
    """``.cache/course_lib/`` in the checkout (git-ignored): compiled objects keyed by hash."""
    path = pathlib.Path(os.environ.get("COURSE_CACHE_DIR", repo_root() / ".cache" / "course_lib"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def artefact_key(*parts) -> str:
    """sha256 of the parts that decide an artefact (source, flags, tool version...), 20 hex digits."""
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\1")
    return h.hexdigest()[:20]


def artefact(kind: str, name: str, build: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """The one compiled-artefact cache (Inductor's ``codecache.py`` idea): gcc objects, Inductor
    C++, Triton modules and compile results all go through here.

    ``.cache/course_lib/<kind>/<name>`` is returned when it exists. Otherwise ``build(tmp)``
    writes a file or a folder at a private temporary path beside it, which is then renamed into
    place: a rename is atomic, so a parallel process (pytest -n, two notebooks) sees the whole
    artefact or none of it. If another process renamed its copy first, ours is dropped.
    """
    path = cache_dir() / kind / name
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        build(tmp)
        try:
            os.replace(tmp, path)
        except OSError:  # a folder another process put there first: keep theirs
            if not path.exists():
                raise
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
    return path


@functools.cache
def has_cuda() -> bool:
    """True when an NVIDIA GPU with a driver is visible.

    Checked without importing torch (the driver's /proc entry or ``nvidia-smi``), so it can run
    before triton is imported. ``COURSE_FORCE_CPU=1`` pretends there is none.
    """
    if os.environ.get("COURSE_FORCE_CPU") == "1":
        return False
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if pathlib.Path("/proc/driver/nvidia/gpus").is_dir():
        return any(pathlib.Path("/proc/driver/nvidia/gpus").iterdir())
    return pathlib.Path("/dev/nvidia0").exists() or shutil.which("nvidia-smi") is not None


#: ``COURSE_DEBUG`` stage names (tinygrad's ``DEBUG=n`` idea, by stage) -> the per-stage variable
#: each one replaces, still honoured so old notebooks keep working.
DEBUG_STAGES = {
    "ir": "COURSE_IR_DEBUG",  # course_lib.ir: every pass's output
    "llvm": "COURSE_LLVM_DEBUG",  # course_lib.llvm: course IR, LLVM IR, after -O<n>
    "aot": "COURSE_AOT_DEBUG",  # course_lib.aot: joint graph, partition, both graphs
    "inductor": "COURSE_INDUCTOR_DEBUG",  # course_lib.inductor: pre-fusion IR, schedule, output code
    "cpu": "COURSE_CPU_DEBUG",  # course_lib.cpu: gcc command, remarks
}


def debug_stages() -> set[str]:
    """The stages ``COURSE_DEBUG`` turns on (``COURSE_DEBUG=inductor,cpu``; ``all`` or ``1``: every one).

    An unknown name is a mistake worth hearing about: it raises with the list of known stages.
    """
    names = {s.strip().lower() for s in os.environ.get("COURSE_DEBUG", "").split(",") if s.strip()}
    if names & {"1", "all"}:
        return set(DEBUG_STAGES)
    unknown = names - set(DEBUG_STAGES) - {"0"}
    if unknown:
        raise ValueError(f"COURSE_DEBUG names unknown stage(s) {sorted(unknown)}; known: {sorted(DEBUG_STAGES)}, all")
    return names & set(DEBUG_STAGES)


def debug(stage: str) -> bool:
    """Should ``stage`` print its intermediate IRs? The one switch is ``COURSE_DEBUG=stage,...``."""
    if stage not in DEBUG_STAGES:
        raise ValueError(f"unknown debug stage {stage!r}; known: {sorted(DEBUG_STAGES)}")
    return stage in debug_stages() or os.environ.get(DEBUG_STAGES[stage], "") not in ("", "0")


def has_dot() -> bool:
    """True when Graphviz's ``dot`` binary is on PATH."""
    return shutil.which("dot") is not None


def has_gcc() -> bool:
    """True when a C compiler (``gcc``) is on PATH."""
    return shutil.which("gcc") is not None


def mode() -> str:
    """``"gpu"`` when CUDA is present, else ``"cpu"``."""
    return "gpu" if has_cuda() else "cpu"


def triton_interpreted() -> bool:
    """Do ``@triton.jit`` kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set by
    :func:`configure_triton` where there is no GPU) rather than compiled?"""
    return os.environ.get("TRITON_INTERPRET") == "1"


def configure_triton() -> None:
    """Choose Triton's execution mode before triton is imported.

    With no GPU, kernels run in Triton's interpreter (``TRITON_INTERPRET=1``). A value the user
    set already wins. Triton 3.9 also warns on every process unless the FP-fusion default is
    stated; the course keeps Triton's current default (fusion on).
    """
    if not has_cuda():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    if triton_interpreted():
        interpret_triton_language()


def interpret_triton_language() -> int:
    """Make triton.language's own ``@triton.jit`` helpers runnable in the interpreter, when triton
    was imported before course_lib (and so before ``TRITON_INTERPRET=1`` was set).

    ``@triton.jit`` reads the mode when it decorates: imported first, ``tl.sum``, ``tl.max`` and
    their combine functions (``triton/language/standard.py``) are compiled-mode ``JITFunction``
    objects, and the interpreter refuses to call one ("Cannot call @triton.jit'd outside of the
    scope of a kernel"). ``torch.testing._internal`` imports triton, for one. Each such module
    attribute is replaced by the interpreter's wrapper of the same Python function, what the
    import would have made in interpreter mode. Returns how many were replaced (0 when triton
    was not imported yet, the usual case). Member calls (``x.sum(1)``) keep the old function.
    """
    import sys

    if "triton.language" not in sys.modules:
        return 0
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from course_lib import compat

    changes = compat.swap_triton_functions(compat.triton_language_namespaces(), JITFunction, InterpretedFunction)
    return len({id(old) for _, _, old in changes})
