"""Artefacts recorded on a GPU machine, for learners without one.

GPU-only cells run natively when CUDA is present; otherwise they show what the same code
produced on an NVIDIA H200, stored under ``data/``. Each recording is a JSON file::

    {"meta": {"device": "NVIDIA H200", "date": "2026-12-02", "torch": "2.11.0",
              "triton": "3.6.0", "command": "python device/record_triton.py OUT"},
     "value": ...}

:func:`load` returns a :class:`Recorded` whose display carries a banner saying where and when
it was recorded, or a :class:`Missing` that says, in one sentence, that the file is not there
(it never raises for a missing recording, so a notebook keeps running).
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import json
import pathlib
import platform
from typing import Any

from course_lib import env


@dataclasses.dataclass(frozen=True)
class Recorded:
    path: str  # relative to data/
    value: Any
    meta: dict

    @property
    def banner(self) -> str:
        m = self.meta
        where = m.get("device", "an unknown device")
        if m.get("live"):
            return f"Measured just now on {where} (the same code recorded data/{self.path})."
        versions = ", ".join(f"{k} {m[k]}" for k in ("torch", "triton") if m.get(k))
        why = "" if env.has_cuda() else " because this machine has no GPU"
        return f"Recorded on {where} on {m.get('date', 'an unknown date')}" + (f" ({versions})" if versions else "") + \
            f"; shown from data/{self.path}{why}."  # fmt: skip

    def __bool__(self) -> bool:
        return True

    def __str__(self) -> str:
        return self.banner

    def _repr_html_(self) -> str:
        return f"<div style='background:#fff8e1;padding:4px 8px;border-left:4px solid #f9a825'>📼 {html.escape(self.banner)}</div>"


@dataclasses.dataclass(frozen=True)
class Missing:
    path: str

    value = None
    meta: dict = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return (
            f"No recording at data/{self.path}: it is made on a GPU machine by the scripts in device/ "
            "and has not been recorded yet, so this cell has nothing to show without a GPU."
        )

    def _repr_html_(self) -> str:
        return f"<div style='background:#f1f3f4;padding:4px 8px'>{html.escape(str(self))}</div>"


def load(path: str) -> Recorded | Missing:
    """Load ``data/<path>`` (a JSON recording). ``Missing`` (falsy) when the file is absent."""
    full = env.data_dir() / path
    if not full.is_file():
        return Missing(path)
    doc = json.loads(full.read_text())
    if not isinstance(doc, dict) or "value" not in doc:
        raise ValueError(f"data/{path} is not a recording: expected a JSON object with 'meta' and 'value'")
    return Recorded(path, doc["value"], dict(doc.get("meta", {})))


def live(value: Any, path: str) -> Recorded:
    """A measurement made in this session on this machine's GPU, shown like a recording of ``path``."""
    return Recorded(path, value, {**default_meta(), "live": True})


def device_script(name: str):
    """Import ``device/<name>.py`` (the scripts that make the recordings) to measure live on a GPU."""
    import importlib.util

    path = env.repo_root() / "device" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"course_device_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def default_meta(command: str = "") -> dict:
    """Meta for a recording made on this machine: device name, date, versions, command."""
    meta = {"date": datetime.date.today().isoformat(), "python": platform.python_version(), "command": command}
    try:
        import torch

        meta["torch"] = torch.__version__.split("+")[0]
        meta["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    except ImportError:  # pragma: no cover
        meta["device"] = "unknown"
    try:
        import triton

        meta["triton"] = triton.__version__
    except ImportError:  # pragma: no cover
        pass
    return meta


def save(path: str | pathlib.Path, value: Any, meta: dict | None = None) -> pathlib.Path:
    """Write a recording (``value`` must be JSON-serialisable) to ``path``; returns the path."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"meta": {**default_meta(), **(meta or {})}, "value": value}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path
