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
    from probe_moe_routing import routers_scaled

    from course_lib.aot import real_models

    with routers_scaled(args.router_scale), real_models.checking_graphs(args.tol, "triton", args.against) as problems:
        print(real_models.precision(args.model, getattr(torch, args.dtype), device=args.device))
    print("\n".join(problems) or f"no output differs by more than {args.tol} of its largest value")


if __name__ == "__main__":
    main()
