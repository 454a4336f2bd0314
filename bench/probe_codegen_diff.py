"""Probe: where do the course's two code generators disagree on a real model?

Every graph of one training step of ``model`` is compiled twice, with ``codegen="triton"`` (Triton's
interpreter on a CPU) and ``codegen="cpp"``. Each call runs both on the same inputs, prints every
floating-point output whose two versions differ by more than ``--tol`` of its largest value (with the
rows that differ), and hands the C++ outputs on, so one disagreement does not cascade into the next.

Made for Qwen3-MoE in bf16, whose gradients are wrong through the course on CUDA but right with the C++
kernels on the CPU (data/real_models/README.md). Triton's interpreter narrows float32 to bf16 by
truncation, so small differences are expected in bf16; look for large ones.

``python bench/probe_codegen_diff.py [--model qwen3_moe] [--dtype bfloat16] [--tol 0.05]``
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
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    compile_fx = importlib.import_module("course_lib.inductor.compile_fx")  # the module, not the function
    from course_lib.aot import real_models

    original = compile_fx.compile_graph
    count = [0]

    def both(gm, example_inputs, fusion="greedy", codegen=None, **kw):
        triton = original(gm, example_inputs, fusion=fusion, codegen="triton", **kw)
        cpp = original(gm, example_inputs, fusion=fusion, codegen="cpp", **kw)
        number = count[0]
        count[0] += 1

        def call(*inputs):
            outs_t, outs_c = triton(*inputs), cpp(*inputs)
            for i, (a, b) in enumerate(zip(outs_t, outs_c, strict=True)):
                if not (isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel()):
                    continue
                diff = (a.float() - b.float()).abs()
                scale = float(b.float().abs().max()) + 1e-12
                if float(diff.max()) / scale > args.tol:
                    rows = (diff > args.tol * scale).reshape(a.shape[0], -1).any(1).nonzero().flatten().tolist()
                    print(f"graph {number}, output {i} {tuple(a.shape)} {a.dtype}: differs by "
                          f"{float(diff.max()) / scale:.3g} of its largest value, rows {rows[:16]}", flush=True)  # fmt: skip
            return outs_c

        return _Wrapped(cpp, call)

    compile_fx.compile_graph = both
    print(real_models.precision(args.model, getattr(torch, args.dtype)))


class _Wrapped:
    """A CompiledGraph whose call runs both versions (attributes come from the C++ one)."""

    def __init__(self, compiled, call):
        self._compiled, self._call = compiled, call

    def __getattr__(self, name):
        return getattr(self._compiled, name)

    def __call__(self, *inputs):
        return self._call(*inputs)


if __name__ == "__main__":
    main()
