"""Run a notebook's code cells as a plain Python script, cell by cell, and report each one.

For machines without Jupyter (the H200 recording machine has no jupyter/nbval): it executes
every code cell of each notebook in one namespace, in order, and prints ``ok`` / ``FAILED``
per cell with the error's last line. IPython-only syntax (``%magic``, ``!cmd``) is skipped.

    python tools/run_cells.py solutions/00_tour.ipynb [more.ipynb ...] [--json out.json]
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
import traceback


def _display(*objs, **kwargs):  # stands in for IPython.display.display
    for obj in objs:
        print(str(obj)[:400])


def _stub_ipython() -> None:
    """Where IPython is not installed (the H200 machine), ``from IPython.display import display, HTML``
    in a notebook gets these stand-ins instead of failing the cell and every cell after it."""
    import importlib.util
    import types

    if importlib.util.find_spec("IPython") is not None:
        return
    ipython, shown = types.ModuleType("IPython"), types.ModuleType("IPython.display")
    shown.display = _display
    for name in ("HTML", "Markdown", "SVG", "Image", "Code"):
        setattr(shown, name, type(name, (str,), {}))
    ipython.display = shown
    sys.modules.update({"IPython": ipython, "IPython.display": shown})


def run_notebook(path: pathlib.Path) -> list[dict]:
    cells = json.loads(path.read_text())["cells"]
    namespace = {"__name__": "__main__", "display": _display}
    results = []
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        start = time.perf_counter()
        try:
            exec(compile(source, f"{path.name}[cell {cell.get('id', index)}]", "exec"), namespace)
            status, error = "ok", ""
        except Exception as exc:  # noqa: BLE001 - the point is to report every failure
            status = "FAILED"
            error = traceback.format_exception_only(type(exc), exc)[-1].strip()
        seconds = time.perf_counter() - start
        results.append(
            {
                "notebook": path.as_posix(),
                "cell": cell.get("id", index),
                "status": status,
                "error": error,
                "seconds": round(seconds, 2),
            }
        )
        print(f"{status:6} {path.name} {cell.get('id', index)} ({seconds:.1f} s) {error}", flush=True)
    return results


def main(argv: list[str]) -> int:
    out = None
    if "--json" in argv:
        i = argv.index("--json")
        out, argv = pathlib.Path(argv[i + 1]), argv[:i] + argv[i + 2 :]
    _stub_ipython()
    results = []
    for name in argv:
        results += run_notebook(pathlib.Path(name))
    if out:
        out.write_text(json.dumps(results, indent=1))
    failed = sum(r["status"] != "ok" for r in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
