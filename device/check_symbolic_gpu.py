"""Graphs with size symbols through the course's Triton path on a GPU, against eager.

Usage (device machine, repo root): ``python device/check_symbolic_gpu.py``. The Triton path compiles
one version of a symbolic graph per size it meets (``SpecializingGraph``); this runs those versions,
padded blocks and an undecided ``Max`` among them, through the real compiler at six lengths.
One JSON line per function and length.
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main() -> None:
    import torch
    from test_inductor_dynamic import FUNCTIONS, padded_blocks

    import course_lib.inductor as ind

    for fn in [padded_blocks, *FUNCTIONS]:
        torch._dynamo.reset()
        record = []
        compiled = torch.compile(fn, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen="triton", record=record))
        for n in (8, 13, 5, 30, 7, 1000):
            shape = (2, n, 3) if fn is padded_blocks else (n, 4)
            args = (torch.randn(shape, device="cuda"),) + (
                () if fn is padded_blocks else (torch.randn(4, device="cuda"),)
            )
            got, want = compiled(*args), fn(*args)
            err = max((g - w).abs().max().item() if g.shape == w.shape else float("inf") for g, w in zip(got, want))
            kinds = [k for k, _ in record]
            print(json.dumps({"fn": fn.__name__, "n": n, "max_error": err, "graphs": kinds,
                              "dynamic": any(getattr(g, "dynamic", False) for _, g in record)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
