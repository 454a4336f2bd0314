"""Probe: where do the course's two code generators disagree on a real model?

Every graph of one training step of ``model`` is compiled with ``codegen="triton"`` (Triton's
interpreter on a CPU) and checked against ``--against``: ``cpp`` (the course's C++ kernels) or
``eager`` (the same FX graph run op by op by ``torch.fx.Interpreter``: aten's kernels, on any device).
Each call runs both on the same inputs, prints every floating-point output whose two versions differ
by more than ``--tol`` of its largest value (with the rows that differ) and every integer output that
differs at all, and hands the reference's outputs on, so one disagreement does not cascade into the next.

Made for Qwen3-MoE in bf16, whose gradients are wrong through the course on CUDA but right with the C++
kernels on the CPU (data/real_models/README.md). Triton's interpreter narrows float32 to bf16 by
truncation, so small differences are expected in bf16; look for large ones.

``python bench/probe_codegen_diff.py [--model qwen3_moe] [--dtype bfloat16] [--tol 0.05] [--against eager --device cuda]``
"""

from __future__ import annotations

import argparse
import importlib
import logging
import warnings

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3_moe")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--against", choices=["cpp", "eager"], default="cpp")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--router-scale", type=float, default=1.0, help="multiply MoE routers' weights (see probe_moe_routing)"
    )
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    compile_fx = importlib.import_module("course_lib.inductor.compile_fx")  # the module, not the function
    from course_lib.aot import real_models

    original = compile_fx.compile_graph
    count = [0]

    def both(gm, example_inputs, fusion="greedy", codegen=None, **kw):
        triton = original(gm, example_inputs, fusion=fusion, codegen="triton", **kw)
        if args.against == "cpp":
            reference = original(gm, example_inputs, fusion=fusion, codegen="cpp", **kw)
        else:
            reference = _eager(gm)
        number = count[0]
        count[0] += 1
        names = _output_names(gm)

        def call(*inputs):
            outs_t, outs_r = triton(*inputs), reference(*inputs)
            for i, (a, b) in enumerate(zip(outs_t, outs_r, strict=True)):
                if not (isinstance(a, torch.Tensor) and a.numel()):
                    continue
                where = f"graph {number}, output {i} ({names[i]}) {tuple(a.shape)} {a.dtype}"
                if not a.is_floating_point():
                    if not torch.equal(a, b):
                        print(f"{where}: {int((a != b).sum())} elements differ", flush=True)
                    continue
                diff = (a.float() - b.float()).abs()
                scale = float(b.float().abs().max()) + 1e-12
                if float(diff.max()) / scale > args.tol:
                    rows = (diff > args.tol * scale).reshape(a.shape[0], -1).any(1).nonzero().flatten().tolist()
                    print(f"{where}: differs by {float(diff.max()) / scale:.3g} of its largest value, rows {rows[:16]}",
                          flush=True)  # fmt: skip
            return outs_r

        return real_models.CheckedGraph(triton, call)

    compile_fx.compile_graph = both
    from probe_moe_routing import routers_scaled

    with routers_scaled(args.router_scale):
        print(real_models.precision(args.model, getattr(torch, args.dtype), device=args.device))


def _eager(gm):
    """The graph run node by node with aten's kernels."""

    def run(*inputs):
        with torch.no_grad():
            return tuple(torch.fx.Interpreter(gm).run(*inputs))

    return run


def _output_names(gm) -> list[str]:
    (out,) = [n for n in gm.graph.nodes if n.op == "output"]
    return [getattr(a, "name", str(a)) for a in out.args[0]]


if __name__ == "__main__":
    main()
