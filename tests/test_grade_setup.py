"""nbgrader for instructors: `make grade-setup` builds a course directory, and a submitted lab gets a known score."""

import importlib.util
import json
import subprocess
import sys

import pytest

from course_lib import env

ROOT = env.repo_root()
NOTEBOOK = "05b_memory_occupancy_collectives"  # one check per exercise; runs in seconds
SOLUTION = ROOT / "solutions" / "05_gpu" / f"{NOTEBOOK}.ipynb"


def _counts() -> tuple[int, int]:
    """(answer cells, checks) of the notebook, counted from its text, not by the code under test."""
    cells = json.loads(SOLUTION.read_text())["cells"]
    texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return sum("### BEGIN SOLUTION" in t for t in texts), sum(t.count("lab.run(") for t in texts)


def _load_grade_setup():
    spec = importlib.util.spec_from_file_location("grade_setup", ROOT / "tools" / "grade_setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nbgrader_cells(nb: dict, kind: str) -> list[dict]:
    return [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get(kind)]


def test_tagging_marks_answers_and_checks():
    gs = _load_grade_setup()
    nb = json.loads(SOLUTION.read_text())
    answers, checks = _counts()
    assert answers >= 2 and gs.tag_notebook(nb) == (answers, checks)
    grades = _nbgrader_cells(nb, "grade")
    assert all(c["metadata"]["nbgrader"]["locked"] for c in grades)
    assert all("lab.results.get(" in "".join(c["source"]) for c in grades)
    bad = {"cells": [{"cell_type": "code", "id": "x", "metadata": {},
                      "source": "def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION\nlab.run('f', f)"}]}  # fmt: skip
    with pytest.raises(ValueError, match="both an answer and a check"):
        gs.tag_notebook(bad)


def test_autograde_one_solved_exercise_scores_one_point(tmp_path):
    from nbgrader.api import Gradebook

    gs = _load_grade_setup()
    n_answers, n_checks = _counts()
    assert gs.build(tmp_path, only=[NOTEBOOK]) == {NOTEBOOK: (n_answers, n_checks)}
    source = json.loads((tmp_path / "source" / NOTEBOOK / f"{NOTEBOOK}.ipynb").read_text())
    release = json.loads((tmp_path / "release" / NOTEBOOK / f"{NOTEBOOK}.ipynb").read_text())
    answers = _nbgrader_cells(source, "solution")
    stubs = _nbgrader_cells(release, "solution")
    assert len(stubs) == n_answers and all(gs.STUB in "".join(c["source"]) for c in stubs), (
        "the student version keeps the answers"
    )
    assert all("### BEGIN SOLUTION" not in "".join(c["source"]) for c in release["cells"])

    # A learner solves the first exercise (the roofline point) and leaves the others alone.
    stubs[0]["source"] = answers[0]["source"]
    submitted = tmp_path / "submitted" / "learner1" / NOTEBOOK / f"{NOTEBOOK}.ipynb"
    submitted.parent.mkdir(parents=True)
    submitted.write_text(json.dumps(release, indent=1))
    # The notebook runs in seconds; a cell that hangs is stopped by nbgrader after 300 s (the course
    # config allows 900 for a room of slow machines), so the failure names the cell, not just a timeout.
    cmd = [sys.executable, "-m", "nbgrader", "autograde", NOTEBOOK, "--student", "learner1", "--force", "--create",
           "--Execute.timeout=300", "--ExecutePreprocessor.timeout=300"]  # fmt: skip
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=gs.venv_env(), timeout=600)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr or ""
        pytest.fail(f"nbgrader autograde did not finish in 600 s; its log so far:\n{err[-4000:]}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        sub = gb.find_submission(NOTEBOOK, "learner1")
        assert (sub.score, sub.max_score) == (1.0, float(n_checks))
        nb = gb.find_submission_notebook(NOTEBOOK, NOTEBOOK, "learner1")
        scored = sorted(g.name for g in nb.grades if g.score)
        assert scored == [next(c["metadata"]["nbgrader"]["grade_id"] for c in _nbgrader_cells(source, "grade"))]
