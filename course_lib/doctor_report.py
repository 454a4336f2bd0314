"""``course_lib.doctor()``: is this machine ready for the labs, and in which mode will they run?

Everything is found without importing torch or triton (package metadata and PATH look-ups),
so the doctor cell at the top of every notebook is fast and cannot itself fail on a broken
install: a missing piece becomes a row with what to do about it.
"""

from __future__ import annotations

import dataclasses
import html
import importlib.metadata
import platform
import shutil
import sys

from course_lib import env

# package -> (version the course pins, what to do when it is missing or different)
PINNED = {
    "torch": "2.13.0",
    "triton": "3.9.0",
    "llvmlite": "0.50.0",
    "jupyterlab": "4.6.6",
    "ipywidgets": "8.1.9",
    "jupyterlab_widgets": "3.0.17",
}
FIX_PACKAGES = "run `make lab` (or `make install`) from the course folder to install the pinned set"


@dataclasses.dataclass(frozen=True)
class Row:
    item: str
    found: str
    ok: bool
    advice: str = ""


@dataclasses.dataclass(frozen=True)
class DoctorReport:
    rows: tuple[Row, ...]
    mode: str

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    def __str__(self) -> str:
        width = max(len(r.item) for r in self.rows)
        lines = [f"course_lib doctor: labs run in {self.mode.upper()} mode ({_mode_sentence(self.mode)})"]
        for r in self.rows:
            mark = "ok " if r.ok else "!! "
            line = f"  {mark}{r.item:<{width}}  {r.found}"
            if r.advice:
                line += f"  -> {r.advice}"
            lines.append(line)
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><td>{'<b>ok</b>' if r.ok else '<b>FIX</b>'}</td><td style='text-align:left'><code>{html.escape(r.item)}</code></td>"
            f"<td style='text-align:left'>{html.escape(r.found)}</td><td style='text-align:left'>{html.escape(r.advice)}</td></tr>"
            for r in self.rows
        )
        return (
            f"<div><b>course_lib doctor</b>: labs run in <b>{self.mode.upper()}</b> mode "
            f"({html.escape(_mode_sentence(self.mode))}).<table>{cells}</table></div>"
        )


def _mode_sentence(mode: str) -> str:
    if mode == "gpu":
        return "an NVIDIA GPU is present: Triton and Inductor run natively"
    return (
        "no GPU: Triton kernels run in Triton's interpreter, its compiler still emits PTX/SASS, "
        "GPU-only cells show artefacts recorded on an H200"
    )


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _package_row(dist: str, pin: str) -> Row:
    found = _version(dist)
    if found is None:
        return Row(dist, "missing", False, FIX_PACKAGES)
    base = found.split("+")[0]
    if base != pin:
        return Row(dist, found, True, f"the course is tested with {pin}; other versions may differ")
    return Row(dist, found, True)


def _widgets_row() -> Row:
    ipyw, labw = _version("ipywidgets"), _version("jupyterlab_widgets")
    if ipyw is None or labw is None:
        return Row("widgets", "ipywidgets or jupyterlab_widgets missing", False, FIX_PACKAGES)
    # ipywidgets 8.x talks to the jupyterlab_widgets 3.x front end; 7.x needed 1.x.
    ok = ipyw.split(".")[0] == "8" and labw.split(".")[0] == "3"
    advice = "" if ok else "ipywidgets 8 needs jupyterlab_widgets 3; reinstall with `make install`"
    return Row("widgets", f"ipywidgets {ipyw} / jupyterlab_widgets {labw}", ok, advice)


def _tool_row(name: str, purpose: str, fix: str, required: bool = True) -> Row:
    path = shutil.which(name)
    if path:
        return Row(name, "found", True)
    return Row(name, f"missing ({purpose})", not required, fix)


def _cuda_row() -> Row:
    if env.has_cuda():
        torch = sys.modules.get("torch")
        if torch is not None and not torch.cuda.is_available():
            return Row(
                "CUDA GPU",
                "driver present, but this torch build has no CUDA",
                True,
                "GPU cells will show recorded artefacts; install a CUDA build of torch to run them",
            )
        return Row("CUDA GPU", "present", True)
    return Row("CUDA GPU", "none (CPU mode)", True, "GPU cells show artefacts recorded on an NVIDIA H200")


def run() -> DoctorReport:
    rows = [
        Row(
            "python",
            platform.python_version(),
            sys.version_info[:2] >= (3, 11),
            "" if sys.version_info[:2] >= (3, 11) else "the course needs Python 3.11 or newer",
        )
    ]
    rows += [_package_row(d, pin) for d, pin in PINNED.items() if d not in ("jupyterlab_widgets",)]
    rows.append(_widgets_row())
    rows.append(
        _tool_row(
            "dot",
            "graphs are shown as DOT text instead of pictures",
            "install Graphviz: `sudo apt-get install graphviz` (or `conda install graphviz`)",
            required=False,
        )
    )
    rows.append(
        _tool_row(
            "gcc", "needed for Inductor's C++ backend and Module 6", "install a C compiler: `sudo apt-get install gcc`"
        )
    )
    rows.append(
        _tool_row(
            "llc",
            "Module 2's back-end walkthrough is skipped",
            "install LLVM's tools: `sudo apt-get install llvm-19` (or `make install` as root)",
            required=False,
        )
    )
    rows.append(_cuda_row())
    return DoctorReport(tuple(rows), env.mode())
