"""Generate the learner notebooks in ``labs/`` from the complete ones in ``solutions/``.

In a solution notebook, each exercise's answer sits inside a function body between the
nbgrader markers::

    def liveness_transfer(block, live_out):
        \"\"\"Return the set of variables live on entry to ``block``.\"\"\"
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

The generator replaces each marked region with a stub,
``raise NotImplementedError("exercise 'liveness_transfer': ...")``, at the marker's indentation,
keeps cell ids and metadata, and clears outputs and execution counts.

A learner's work is never overwritten: ``labs/.manifest.json`` records the SHA-256 of every
lab as generated, and a lab whose bytes no longer match it (the learner edited or ran it) is
left alone unless ``force=True``. :func:`check_in_sync` is the CI check that ``labs/`` is what
``solutions/`` generates.

Notebooks are read and written with ``nbformat`` (Jupyter's own library): reading upgrades and
validates them, writing uses Jupyter's layout (sources as lists of lines, indent 1, sorted keys),
so a lab opened and saved in JupyterLab without edits keeps its bytes.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import pathlib
import re

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MANIFEST = ".manifest.json"
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")


class LabGenError(ValueError):
    """A solution notebook whose markers cannot be turned into a lab (with file and cell)."""


def strip_solutions(source: str, where: str = "cell") -> str:
    """Replace every BEGIN/END SOLUTION region of one code cell's source with a stub."""
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() != BEGIN:
            if line.strip() == END:
                raise LabGenError(f"{where}, line {i + 1}: '{END}' without a '{BEGIN}' before it")
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        name = _enclosing_function(lines, i, indent)
        if name is None:
            raise LabGenError(
                f"{where}, line {i + 1}: '{BEGIN}' must be inside a function body "
                "(the stub raises NotImplementedError, which would stop the lab at top level)"
            )
        j = i + 1
        while j < len(lines) and lines[j].strip() != END:
            if lines[j].strip() == BEGIN:
                raise LabGenError(f"{where}, line {j + 1}: nested '{BEGIN}'")
            j += 1
        if j == len(lines):
            raise LabGenError(f"{where}, line {i + 1}: '{BEGIN}' has no '{END}'")
        out.append(f'{indent}raise NotImplementedError("exercise {name!r}: replace this line with your code")')
        i = j + 1
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def _enclosing_function(lines: list[str], marker: int, indent: str) -> str | None:
    if not indent:
        return None
    for k in range(marker - 1, -1, -1):
        m = _DEF.match(lines[k])
        if m and len(m.group(1)) < len(indent):
            return m.group(2)
    return None


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def lab_from_solution(nb: dict, where: str = "notebook") -> dict:
    """The lab notebook (a dict in nbformat's JSON shape) for one solution notebook."""
    lab = copy.deepcopy(nb)
    for index, cell in enumerate(lab.get("cells", [])):
        if cell.get("cell_type") == "code":
            cell["source"] = strip_solutions(_source(cell), f"{where}, cell {cell.get('id', index)}")
            cell["outputs"] = []
            cell["execution_count"] = None
        elif BEGIN in _source(cell):
            raise LabGenError(f"{where}, cell {cell.get('id', index)}: solution markers in a {cell['cell_type']} cell")
    return lab


def reads(text: str, where: str = "notebook") -> nbformat.NotebookNode:
    """Parse a notebook (upgraded to format 4); a file that is not one is a :class:`LabGenError`."""
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several kinds (NotJSONError, ValidationError, KeyError)
        raise LabGenError(f"{where} is not a Jupyter notebook: {str(exc).splitlines()[0][:200]}") from None


def dumps(nb: dict) -> str:
    """Deterministic notebook text, as ``nbformat`` (and so JupyterLab) writes it."""
    return nbformat.writes(nbformat.from_dict(nb), version=4) + "\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass
class Report:
    written: list[str] = dataclasses.field(default_factory=list)
    unchanged: list[str] = dataclasses.field(default_factory=list)
    kept: list[str] = dataclasses.field(default_factory=list)  # learner-edited, not overwritten

    def __str__(self) -> str:
        lines = [f"labs: {len(self.written)} written, {len(self.unchanged)} unchanged, {len(self.kept)} kept"]
        lines += [
            f"  kept {p}: it changed since it was generated (your edits?). "
            "Move it aside or pass --force to overwrite it." for p in self.kept
        ]  # fmt: skip
        return "\n".join(lines)


def _pairs(solutions: pathlib.Path, labs: pathlib.Path):
    for sol in sorted(solutions.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in sol.parts:
            continue
        rel = sol.relative_to(solutions)
        yield rel, sol, labs / rel


def _generate(sol: pathlib.Path, rel: pathlib.Path) -> str:
    return dumps(lab_from_solution(reads(sol.read_text(), f"solutions/{rel}"), f"solutions/{rel}"))


def _load_manifest(labs: pathlib.Path) -> dict[str, str]:
    path = labs / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {}


def generate(solutions: pathlib.Path, labs: pathlib.Path, force: bool = False) -> Report:
    """Write ``labs/`` from ``solutions/``; never overwrite a learner-edited lab unless ``force``."""
    report, manifest = Report(), _load_manifest(labs)
    new_manifest = dict(manifest)
    for rel, sol, lab in _pairs(solutions, labs):
        key, text = rel.as_posix(), _generate(sol, rel)
        if lab.is_file():
            current = lab.read_text()
            if current == text:
                report.unchanged.append(key)
                new_manifest[key] = sha256(text)
                continue
            if not force and manifest.get(key) != sha256(current):
                report.kept.append(key)
                continue
        lab.parent.mkdir(parents=True, exist_ok=True)
        lab.write_text(text)
        new_manifest[key] = sha256(text)
        report.written.append(key)
    labs.mkdir(parents=True, exist_ok=True)
    (labs / MANIFEST).write_text(json.dumps(new_manifest, indent=1, sort_keys=True) + "\n")
    return report


def check_in_sync(solutions: pathlib.Path, labs: pathlib.Path) -> list[str]:
    """Problems that make ``labs/`` differ from what ``solutions/`` generates (empty: in sync)."""
    problems, expected = [], set()
    for rel, sol, lab in _pairs(solutions, labs):
        expected.add(rel.as_posix())
        if not lab.is_file():
            problems.append(f"labs/{rel} is missing")
        elif lab.read_text() != _generate(sol, rel):
            problems.append(f"labs/{rel} differs from what solutions/{rel} generates")
    for lab in sorted(labs.rglob("*.ipynb")):
        rel = lab.relative_to(labs).as_posix()
        if ".ipynb_checkpoints" not in lab.parts and rel not in expected:
            problems.append(f"labs/{rel} has no solution notebook")
    return problems


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Generate labs/ from solutions/.")
    parser.add_argument("--solutions", default="solutions", type=pathlib.Path)
    parser.add_argument("--labs", default="labs", type=pathlib.Path)
    parser.add_argument("--force", action="store_true", help="overwrite labs edited since generation")
    parser.add_argument("--check", action="store_true", help="only check that labs/ is in sync")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = check_in_sync(args.solutions, args.labs)
            for p in problems:
                print(p)
            print("labs/ is in sync with solutions/" if not problems else "run `make labs` to regenerate labs/")
            return 1 if problems else 0
        report = generate(args.solutions, args.labs, force=args.force)
    except LabGenError as exc:
        print(f"error: {exc}")
        return 2
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
