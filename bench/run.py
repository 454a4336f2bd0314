"""`make bench`: run every benchmark in bench/ and write its results to bench/results/.

Each ``bench/bench_<name>.py`` defines ``main(results_dir: pathlib.Path) -> None``, which
measures, prints a table and writes ``results_dir/<name>.json`` (and plots). Each runs in its
own process so one benchmark's compiled state cannot affect another. Pass names to run a subset:
``make bench BENCH="llvm cpu"``.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"


def main(argv: list[str]) -> int:
    RESULTS.mkdir(exist_ok=True)
    available = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    chosen = argv or available
    unknown = sorted(set(chosen) - set(available))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available}")
        return 2
    failed = []
    for name in chosen:
        print(f"=== bench {name} ===", flush=True)
        start = time.perf_counter()
        code = f"import pathlib, bench_{name} as b; b.main(pathlib.Path({str(RESULTS)!r}))"
        proc = subprocess.run([sys.executable, "-c", code], cwd=HERE)
        print(
            f"=== bench {name}: {'ok' if proc.returncode == 0 else 'FAILED'} in {time.perf_counter() - start:.0f} s ==="
        )
        if proc.returncode != 0:
            failed.append(name)
    print(f"results in {RESULTS.relative_to(HERE.parent)}/" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
