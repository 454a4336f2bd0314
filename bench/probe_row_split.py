"""Probe (a CUDA machine): why course_lib's generated row-split kernel is slow where the prototype is
not. Times, on 1024 rows of 65536 float32 softmax: the prototype (bench/proto_row_coop.py, S = 8,
16 warps, prefetch), course_lib's generated kernel launched by hand with num_stages 1 and 3 and two
grid sizes, and the looped kernel. Writes $OUT/probe_row_split.json."""

import json
import os
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(__file__))
import proto_row_coop  # noqa: E402

import course_lib.inductor as ind  # noqa: E402
from course_lib import compat, decomp  # noqa: E402
from course_lib.inductor.codegen import triton as tcg  # noqa: E402


def main():
    rows, n, parts = 1024, 65536, 8
    x = torch.randn(rows, n, device="cuda")
    ref = torch.softmax(x, -1)
    out = {"device": torch.cuda.get_device_name()}
    y = torch.empty_like(x)
    ws = torch.empty(rows * parts * 2, device="cuda")

    def proto():
        c = torch.zeros(rows, dtype=torch.int32, device="cuda")
        proto_row_coop.sm_pcoop[(264,)](x, y, ws, c, rows, n, S=8, BLOCK=8192, PREFETCH=True, num_warps=16,
                                       launch_cooperative_grid=True)  # fmt: skip

    proto()
    out["proto_ms"] = do_bench(proto, rep=100, return_mode="median")
    out["proto_err"] = float((y - ref).abs().max())
    tcg.ROW_SPLIT = True
    gm = compat.make_fx(lambda x: (torch.softmax(x, -1),), x, decompositions=decomp.DECOMPOSITIONS)
    c = ind.compile_graph(gm, [x], codegen="triton")
    out["source"] = c.kernel_code
    mod = c.call.__globals__["kernel0"].__globals__
    kern = mod["kernel0"]
    for stages in (1, 3):
        for grid in (128, 264):
            key = f"course_s{stages}_g{grid}"
            try:

                def f(stages=stages, grid=grid):
                    cnt = torch.zeros(rows, dtype=torch.int32, device="cuda")
                    kern[(grid,)](x, y, ws, cnt, rows, n, XBLOCK=1, RBLOCK=8192, NPARTS=8, NPARTS_P2=8, num_warps=16,
                                  num_stages=stages, launch_cooperative_grid=True)  # fmt: skip

                f()
                torch.cuda.synchronize()
                out[key] = {"ms": do_bench(f, rep=100, return_mode="median"), "err": float((y - ref).abs().max())}
            except Exception as exc:
                out[key] = f"{type(exc).__name__}: {exc}"[:300]
            print(key, out[key], flush=True)
    compiled = kern.warmup(x, y, ws, ws, rows, n, XBLOCK=1, RBLOCK=8192, NPARTS=8, NPARTS_P2=8, num_warps=16,
                           launch_cooperative_grid=True, grid=(1,))  # fmt: skip
    compiled._init_handles()  # n_regs is read when the binary loads
    out["course_ptx_loop"] = [ln for ln in compiled.asm["ptx"].splitlines() if "acquire" in ln or "release" in ln]
    out["course_shared"], out["course_regs"] = compiled.metadata.shared, compiled.n_regs
    out["course_ttgir"] = compiled.asm["ttgir"]
    p = proto_row_coop.sm_pcoop.warmup(x, y, ws, ws, rows, n, S=8, BLOCK=8192, PREFETCH=True, num_warps=16,
                                        launch_cooperative_grid=True, grid=(1,))  # fmt: skip
    out["proto_ttgir"] = p.asm["ttgir"]
    print({k: v for k, v in out.items() if "ttgir" not in k and k != "source"}, flush=True)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe_row_split.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
