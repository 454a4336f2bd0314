"""course_lib.doctor(): versions, tools, mode, and advice for what is missing."""

import course_lib
from course_lib import doctor_report, env


def test_report_lists_versions_tools_and_mode():
    report = course_lib.doctor(show=False)
    items = [r.item for r in report.rows]
    for name in (
        "python",
        "torch",
        "triton",
        "llvmlite",
        "jupyterlab",
        "ipywidgets",
        "widgets",
        "dot",
        "gcc",
        "CUDA GPU",
    ):
        assert name in items
    assert report.mode in ("cpu", "gpu")
    assert f"{report.mode.upper()} mode" in str(report)
    assert "<table>" in report._repr_html_()


def test_missing_tools_and_packages_give_advice(monkeypatch):
    monkeypatch.setattr(doctor_report.shutil, "which", lambda name: None)
    monkeypatch.setattr(doctor_report, "_version", lambda dist: None if dist == "triton" else "8.1.9")
    report = doctor_report.run()
    rows = {r.item: r for r in report.rows}
    assert "apt-get install graphviz" in rows["dot"].advice and rows["dot"].ok  # optional: falls back to text
    assert not rows["gcc"].ok and "apt-get install gcc" in rows["gcc"].advice
    assert not rows["triton"].ok and "make lab" in rows["triton"].advice
    assert not report.ok


def test_widget_version_mismatch_is_flagged(monkeypatch):
    versions = {"ipywidgets": "8.1.9", "jupyterlab_widgets": "1.1.0"}
    monkeypatch.setattr(doctor_report, "_version", versions.get)
    row = doctor_report._widgets_row()
    assert not row.ok and "jupyterlab_widgets 3" in row.advice


def test_force_cpu_switches_mode(monkeypatch):
    env.has_cuda.cache_clear()
    monkeypatch.setenv("COURSE_FORCE_CPU", "1")
    try:
        assert env.mode() == "cpu" and doctor_report.run().mode == "cpu"
    finally:
        env.has_cuda.cache_clear()


def test_import_is_cheap_and_sets_triton_mode():
    import subprocess
    import sys

    code = (
        "import sys, os, course_lib; "
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'import course_lib imported torch'; "
        "print(os.environ.get('TRITON_INTERPRET'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "COURSE_FORCE_CPU": "1"},
    ).stdout.strip()
    assert out == "1"


def test_html_report_is_plain_text_without_emoji():
    """Status words, not emoji: a browser without an emoji font shows empty boxes."""
    html_ = doctor_report.run()._repr_html_()
    assert html_.isascii() or all(ord(ch) < 0x2000 for ch in html_)
    assert "<b>ok</b>" in html_ or "<b>FIX</b>" in html_
