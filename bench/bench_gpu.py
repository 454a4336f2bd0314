"""Speed of the SIMT simulator (instructions issued per second) on Triton's PTX. Run: python bench/bench_gpu.py"""

import time

import torch

from course_lib import gpu
from course_lib.gpu import reference


def main() -> None:
    cases = {
        "vector_add": (16, 64, lambda: [torch.randn(4096), torch.randn(4096), torch.zeros(4096), 4096]),
        "row_softmax": (16, 64, lambda: [torch.randn(16, 256), torch.zeros(16, 256), 256, 256]),
        "layer_norm": (
            8,
            128,
            lambda: [torch.randn(8, 128), torch.randn(128), torch.randn(128), torch.zeros(8, 128), 128, 128, 1e-5],
        ),
    }
    for name, (grid, block, args) in cases.items():
        t = time.perf_counter()
        r = gpu.run_ptx(reference.ptx(name), None, grid, block, args())
        dt = time.perf_counter() - t
        issued = r.totals()["issued"]
        print(f"{name:12s} {issued:6d} warp instructions in {dt:6.3f} s = {issued / dt:8.0f} /s")


if __name__ == "__main__":
    main()
