"""How much one learner's kernel needs: run a notebook and sample its kernel's memory and CPU.

The kernel and every process it starts (gcc, Triton's compiler, gloo workers, OpenMP threads are
inside it) are sampled every 0.2 s: peak resident memory (summed over the process tree) and CPU
seconds (user + system). Used for the numbers in docs/instructors.md.

    .venv/bin/python tools/measure_notebook.py solutions/04_pytorch_stack/04c_inductor.ipynb
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


class Sampler(threading.Thread):
    """Peak RSS of a process tree; CPU seconds of the kernel, the children it waited for (gcc,
    workers it joined) and the descendants still alive at the end (Inductor's compile workers)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak_rss, self.root_cpu, self.alive_cpu = pid, 0, 0.0, {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            rss, alive = 0, {}
            for proc in _tree(self.pid):
                try:
                    rss += proc.memory_info().rss
                    t = proc.cpu_times()
                    if proc.pid == self.pid:
                        self.root_cpu = t.user + t.system + t.children_user + t.children_system
                    else:
                        alive[proc.pid] = t.user + t.system
                except psutil.NoSuchProcess:
                    pass
            self.peak_rss, self.alive_cpu = max(self.peak_rss, rss), alive
            time.sleep(0.2)


def measure(path: Path) -> dict[str, float]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.time()
    with client.setup_kernel():
        sampler = Sampler(client.km.provisioner.process.pid)
        sampler.start()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        sampler.done.set()
        sampler.join()
    return {
        "wall_s": time.time() - start,
        "cpu_s": sampler.root_cpu + sum(sampler.alive_cpu.values()),
        "peak_rss_gib": sampler.peak_rss / 2**30,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    for path in parser.parse_args().notebooks:
        m = measure(path)
        print(f"{path}: {m['wall_s']:.0f} s wall, {m['cpu_s']:.0f} CPU-s, peak {m['peak_rss_gib']:.2f} GiB")


if __name__ == "__main__":
    main()
