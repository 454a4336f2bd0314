"""Probe: is a mixture-of-experts model's half-precision gradient error a routing flip?

A router picks each token's experts with ``topk`` on probabilities computed in bf16 or fp16. Where the
k-th and (k+1)-th probabilities of a token are closer than one rounding of the logits, any backend
that rounds in another order (fusing, another matmul) may pick the other expert. The token's whole
contribution then moves from one expert's gradient to another's: an O(1) gradient error that says
nothing about the backend's arithmetic.

For each router scale (the router weights multiplied by it, which spreads the probabilities apart),
this prints the smallest relative top-k margin of eager's half-precision forward and the
:func:`course_lib.aot.real_models.precision` result. A backend whose error falls to eager's level once
the margins are wide rounds differently, it does not compute wrongly.

``python bench/probe_moe_routing.py [--model qwen3_moe] [--device cuda] [--codegen triton] [--scales 1 20]``
(``--codegen triton`` on a CPU runs Triton's interpreter, which narrows by truncation.)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import warnings

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3_moe")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--codegen", default=None, help="force the course's code generator (cpp or triton)")
    ap.add_argument("--backend", default="course_lib", help="course_lib or inductor")
    ap.add_argument("--scales", type=float, nargs="+", default=[1.0, 20.0])
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import course_lib.inductor  # noqa: F401  (registers backend="course_lib")
    from course_lib.aot import real_models

    if args.codegen:
        compile_fx = importlib.import_module("course_lib.inductor.compile_fx")  # the module, not the function
        original = compile_fx.compile_graph
        compile_fx.compile_graph = lambda gm, inputs, **kw: original(gm, inputs, **{**kw, "codegen": args.codegen})
    dtype = getattr(torch, args.dtype)
    for scale in args.scales:
        with routers_scaled(scale):
            model, inputs = real_models.build(args.model)
            model = model.to(device=args.device, dtype=dtype)
            inputs = {k: v.to(device=args.device, dtype=dtype if v.is_floating_point() else None)
                      for k, v in inputs.items()}  # fmt: skip
            with torch.no_grad():
                margins = real_models.topk_margins(lambda: model(**inputs))
            p = real_models.precision(args.model, dtype, backend=args.backend, device=args.device)
        print(f"router x{scale:g}: smallest top-k margin {min(margins, default=float('nan')):.2e}; eager {p.eager:.4g}, "
              f"{args.backend} {p.backend:.4g}, ok={p.ok()}, worst {p.worst_param}", flush=True)  # fmt: skip


@contextlib.contextmanager
def routers_scaled(scale: float):
    """While inside, ``real_models.build`` multiplies every router's weights by ``scale``."""
    from course_lib.aot import real_models

    build = real_models.build

    def scaled(name, seed=0):
        model, inputs = build(name, seed)
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if _is_router(pname):
                    p.mul_(scale)
        return model, inputs

    real_models.build = scaled
    try:
        yield
    finally:
        real_models.build = build


def _is_router(name: str) -> bool:
    return name.endswith(("mlp.gate.weight", "router.weight", "router.classifier.weight", "gate.wg.weight"))


if __name__ == "__main__":
    main()
