"""Record course_lib.inductor's Triton path on a GPU: correctness, runtimes, generated source.

Usage (on the H200 machine, from the repo root; < 2 minutes):

    python device/record_inductor.py data/inductor

Writes ``inductor_gpu.json``: per workload at 16384 x 4096 float32, kernel time of eager, Inductor
and course_lib by ``triton.testing.do_bench`` with bytes moved and the fraction of measured copy
bandwidth, the tiling sweep (with registers and spills), cold-compile seconds, Inductor's output code
and course_lib's Triton (see ``bench/bench_gpu_inductor.py``); per training case, forward and backward through course_lib.aot
on the GPU against eager. Also ``softmax_triton.py`` (course_lib's Triton for softmax).
``--smoke`` runs tiny shapes on CPU (Triton interpreter) to test the script without a GPU. Works with torch 2.11 / triton 3.6 and torch 2.13 / triton 3.9.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_gpu_inductor  # noqa: E402  (the measurement itself lives in bench/, shared with make bench)


def main(out_dir: str, smoke: bool = False) -> None:
    import torch

    from course_lib import recorded

    result = bench_gpu_inductor.run(smoke=smoke)
    device = "cpu" if smoke else "cuda"
    with torch.enable_grad():
        result["training"] = [_train_case(name, make, shape, device) for name, make, shape in _training_cases(torch)]
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recorded.save(
        out / "inductor_gpu.json",
        result,
        meta={
            "command": "python device/record_inductor.py " + out_dir,
            "timing": "triton.testing.do_bench, median (call time: *_ms); triton.testing.do_bench_cudagraph, "
            "median (kernel time: *_graph_ms)",
        },
    )
    if result["sources"].get("softmax", {}).get("course"):
        (out / "softmax_triton.py").write_text(result["sources"]["softmax"]["course"])
    print(bench_gpu_inductor.table(result))


def _training_cases(torch):
    nn = torch.nn
    return [
        ("mlp", lambda: nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 16)), (32, 64)),
        ("layernorm", lambda: nn.LayerNorm(256), (64, 256)),
        ("softmax", lambda: nn.Softmax(dim=-1), (64, 256)),
        (
            "transformer_layer",
            lambda: nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True),
            (4, 16, 64),
        ),
    ]


def _train_case(name, make, shape, device) -> dict:
    """Forward and backward of one module through compile_fx (course_lib.aot, Triton) vs eager."""
    import torch

    import course_lib.inductor as ind
    from course_lib import compat

    row = {"case": name}
    try:
        torch.manual_seed(0)
        model = make().to(device)
        x = torch.randn(*shape, device=device, requires_grad=True)
        ref = model(x)
        ref.float().sum().backward()
        ref_grads = [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]
        x.grad = None
        model.zero_grad()
        compat.dynamo_reset()
        rec = []
        codegen = "triton" if device == "cuda" else None
        cm = torch.compile(model, backend=lambda gm, ex: ind.compile_fx(gm, ex, codegen=codegen, record=rec))
        out = cm(x)
        out.float().sum().backward()
        grads = [x.grad] + [p.grad for p in model.parameters()]
        row["forward_correct"] = bool(torch.allclose(out, ref, rtol=1e-3, atol=1e-4))
        row["backward_correct"] = all(torch.allclose(a, b, rtol=1e-3, atol=1e-3) for a, b in zip(grads, ref_grads))
        row["graphs"] = [f"compiled ({c.kernel_count} kernels)" if k == "compiled" else f"{k}: {c}" for k, c in rec]
        row["aot"] = "torch" if any(k == "aot-fallback" for k, _ in rec) else "course_lib.aot"
    except Exception as exc:  # record the failure, keep going
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    print(row, flush=True)
    return row


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else "data/inductor", smoke="--smoke" in sys.argv)
