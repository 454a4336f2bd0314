"""Benchmark (a CUDA machine): attention kept whole against attention decomposed, by sequence length.

One training step of ``softmax(q k^T / sqrt(d)) v`` (``F.scaled_dot_product_attention``, float32,
8 x 12 heads x L tokens x 64) through ``compile_fx``: with the fused kernel kept whole (the default on
CUDA, ``course_lib.decomp.FUSED_ATTENTION``) and decomposed into bmm, softmax, bmm; eager beside
them. Time: ``triton.testing.do_bench`` (CUDA events, median, L2 flushed) of forward + backward.
Also the bytes the decomposed step moves for its ``[L, L]`` scores (written and read back in the
forward, and again for their gradient). Writes ``$OUT/bench_attention.json``.

    python bench/bench_attention.py [L ...]       (default 256 1024 2048)
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn.functional as F


def _step(fn, q, k, v, grad):
    def run():
        for t in (q, k, v):
            t.grad = None
        fn(q, k, v).backward(grad)

    return run


def _compiled(fused: bool):
    from course_lib import decomp
    from course_lib.inductor import compile_fx

    devices = set(decomp.FUSED_ATTENTION) if fused else ()

    def backend(gm, example_inputs):
        with decomp.fused_attention(devices):
            return compile_fx(gm, example_inputs)

    return torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), backend=backend)


def main(lengths: list[int]) -> list[dict]:
    from triton.testing import do_bench

    rows = []
    for n in lengths:
        torch._dynamo.reset()
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(8, 12, n, 64, device="cuda", generator=g).requires_grad_() for _ in range(3))
        grad = torch.randn(8, 12, n, 64, device="cuda", generator=g)
        row = {"L": n, "scores_MB": 8 * 12 * n * n * 4 / 1e6}
        for name, fn in (("eager", lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
                         ("course_fused", _compiled(True)), ("course_decomposed", _compiled(False))):  # fmt: skip
            step = _step(fn, q, k, v, grad)
            step()
            torch.cuda.synchronize()
            want = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v), (q, k, v), grad)
            row[f"{name}_correct"] = bool(all(torch.allclose(t.grad, w, rtol=1e-3, atol=1e-3)
                                             for t, w in zip((q, k, v), want)))  # fmt: skip
            row[f"{name}_ms"] = do_bench(step, rep=200, return_mode="median")
        row["fused_vs_decomposed"] = row["course_fused_ms"] / row["course_decomposed_ms"]
        row["fused_vs_eager"] = row["course_fused_ms"] / row["eager_ms"]
        print(row, flush=True)
        rows.append(row)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows,
           "what": "forward + backward of sdpa, float32, 8 x 12 heads x L x 64; do_bench median"}  # fmt: skip
    with open(os.path.join(os.environ.get("OUT", "."), "bench_attention.json"), "w") as f:
        json.dump(out, f, indent=1)
    return rows


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [256, 1024, 2048])
