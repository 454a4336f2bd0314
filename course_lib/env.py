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
import os
import pathlib
import shutil

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


@functools.lru_cache(maxsize=None)
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


def has_dot() -> bool:
    """True when Graphviz's ``dot`` binary is on PATH."""
    return shutil.which("dot") is not None


def has_gcc() -> bool:
    """True when a C compiler (``gcc``) is on PATH."""
    return shutil.which("gcc") is not None


def mode() -> str:
    """``"gpu"`` when CUDA is present, else ``"cpu"``."""
    return "gpu" if has_cuda() else "cpu"


def configure_triton() -> None:
    """Choose Triton's execution mode before triton is imported.

    With no GPU, kernels run in Triton's interpreter (``TRITON_INTERPRET=1``). A value the user
    set already wins. Triton 3.9 also warns on every process unless the FP-fusion default is
    stated; the course keeps Triton's current default (fusion on).
    """
    if not has_cuda():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
