"""Build an nbgrader course directory from solutions/ (`make grade-setup`).

One nbgrader assignment per notebook, named after it (``04b_aot_autograd``). In ``source/`` the
solution notebooks get nbgrader's cell metadata:

* a cell with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` is a *solution* cell: nbgrader's
  ``generate_assignment`` cuts the answer out and leaves a stub, as ``make labs`` does;
* a cell that calls ``lab.run("name", ...)`` is a locked *autograded test* cell worth one point per
  check. The course's checks print a verdict and never raise, so the test cell gets one line per
  check that fails when the check did not pass (a check an ``if`` skipped counts as passed);
* every other cell is left as it is.

Then ``nbgrader generate_assignment`` writes the student versions to ``release/``. Collected
notebooks go to ``submitted/<student>/<assignment>/``; ``nbgrader autograde <assignment>`` scores
them (see docs/instructors.md).

    python tools/grade_setup.py --course-dir .cache/nbgrader [--only 05b_memory_occupancy_collectives]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COURSE_ID = "python-to-ptx"
CHECK_NAME = re.compile(r"""\blab\.run\(\s*(?:"([^"]+)"|'([^']+)')""")
STUB = 'raise NotImplementedError("replace this line with your code")'

CONFIG = f"""# nbgrader configuration for the course (written by tools/grade_setup.py)
c = get_config()  # noqa: F821
c.CourseDirectory.root = ROOT
c.CourseDirectory.course_id = {COURSE_ID!r}
c.ClearSolutions.code_stub = {{"python": {STUB!r}}}
# A lab compiles kernels and starts processes; a cell may take minutes on a shared CPU.
c.ExecutePreprocessor.timeout = 900
c.Execute.timeout = 900
"""


def _source(cell: dict) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def check_names(src: str) -> list[str]:
    """The exercise names a cell checks, in order."""
    return [a or b for a, b in CHECK_NAME.findall(src)]


def _grade_lines(names: list[str]) -> str:
    lines = ["", "# nbgrader: this cell scores one point per check that passed"]
    for name in names:
        lines.append(
            f"assert lab.results.get({name!r}) is None or lab.results[{name!r}].passed, {name + ' did not pass'!r}"
        )
    return "\n".join(lines)


def tag_notebook(nb: dict) -> tuple[int, int]:
    """Give solution and check cells nbgrader's metadata; return (solution cells, points)."""
    solutions = points = 0
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = _source(cell)
        grade_id = cell.get("id") or f"cell-{index}"
        names = check_names(src)
        if "### BEGIN SOLUTION" in src:
            if names:
                raise ValueError(f"cell {grade_id} holds both an answer and a check; nbgrader needs them apart")
            cell["metadata"]["nbgrader"] = {
                "grade": False, "solution": True, "locked": False, "grade_id": grade_id, "schema_version": 3,
            }  # fmt: skip
            solutions += 1
        elif names:
            cell["source"] = src + _grade_lines(names)
            cell["metadata"]["nbgrader"] = {
                "grade": True, "solution": False, "locked": True, "points": len(names),
                "grade_id": grade_id, "schema_version": 3,
            }  # fmt: skip
            points += len(names)
    return solutions, points


def venv_env() -> dict[str, str]:
    """The environment with this Python's bin/ first on PATH: nbgrader runs `alembic` from there."""
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}


def build(course_dir: Path, only: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """Write the course directory and run generate_assignment; return {assignment: (solutions, points)}."""
    course_dir = course_dir.resolve()
    course_dir.mkdir(parents=True, exist_ok=True)
    (course_dir / "nbgrader_config.py").write_text(CONFIG.replace("ROOT", repr(str(course_dir)), 1))
    made = {}
    for path in sorted((ROOT / "solutions").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts or (only and path.stem not in only):
            continue
        nb = json.loads(path.read_text())
        solutions, points = tag_notebook(nb)
        if not points:
            continue
        target = course_dir / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        made[path.stem] = (solutions, points)
    for assignment in made:
        proc = subprocess.run(
            [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force", "--create"],
            cwd=course_dir, capture_output=True, text=True, env=venv_env(),
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"nbgrader generate_assignment {assignment} failed:\n{proc.stdout}{proc.stderr}")
    return made


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--course-dir", type=Path, default=ROOT / ".cache" / "nbgrader")
    parser.add_argument("--only", nargs="*", help="notebook names (stems) to include")
    args = parser.parse_args(argv)
    made = build(args.course_dir, args.only)
    for name, (solutions, points) in made.items():
        print(f"{name:40s} {solutions:2d} exercises, {points:2d} points")
    print(f"nbgrader course in {args.course_dir}: source/ (instructor), release/ (student versions)")


if __name__ == "__main__":
    main()
