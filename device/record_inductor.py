"""Record course_lib.inductor's Triton path on a GPU: correctness, runtimes, generated source.

Usage (on the H200 machine, from the repo root; < 2 minutes):

    python device/record_inductor.py data/inductor

Writes ``inductor_gpu.json`` (per workload: eager / Inductor / course_lib median ms, correct,
kernel count; and per training case: forward and backward through course_lib.aot on the GPU
against eager) and ``softmax_triton.py`` (course_lib's generated Triton for softmax, the text
the notebook shows). ``--smoke`` runs tiny shapes on CPU (Triton interpreter) to test the
script without a GPU. Works with torch 2.11 / triton 3.6 and torch 2.13 / triton 3.9.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))


def _time(fn, args, sync, reps=20):
    fn(*args)
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(out_dir: str, smoke: bool = False) -> None:
    import torch
    import torch.nn.functional as F

    import course_lib  # noqa: F401  (sets Triton's mode before torch/triton load)
    import course_lib.inductor as ind
    from course_lib import compat, recorded

    device = "cpu" if smoke else "cuda"
    rows, cols = (8, 32) if smoke else (4096, 1024)
    g = torch.Generator(device="cpu").manual_seed(0)
    x, y = (torch.randn(rows, cols, generator=g).to(device) for _ in range(2))
    w, b = (torch.randn(cols, generator=g).to(device) for _ in range(2))
    t = torch.randint(0, cols, (rows,), generator=g).to(device)
    work = {
        "softmax": (lambda x: torch.softmax(x, -1), (x,)),
        "layernorm": (lambda x, w, b: F.layer_norm(x, (cols,), w, b), (x, w, b)),
        "rmsnorm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, (x, w)),
        "gelu_bias": (lambda x, b: F.gelu(x + b), (x, b)),
        "silu_gate": (lambda x, y: F.silu(x) * y, (x, y)),
        "cross_entropy": (lambda x, t: F.cross_entropy(x, t), (x, t)),
        "add_norm": (lambda x, y, w, b: F.layer_norm(x + y, (cols,), w, b), (x, y, w, b)),
    }
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    results, sources = [], {}
    torch.set_grad_enabled(False)
    for name, (fn, args) in work.items():
        row = {"workload": name}
        try:
            row["eager_ms"] = _time(fn, args, sync) * 1e3
            if not smoke:
                compat.dynamo_reset()
                row["inductor_ms"] = _time(torch.compile(fn, backend="inductor"), args, sync) * 1e3
            compat.dynamo_reset()
            rec = []
            cfn = torch.compile(
                fn, backend=lambda gm, ex, rec=rec: ind.compile_fx(gm, ex, codegen="triton", record=rec)
            )
            row["correct"] = bool(torch.allclose(cfn(*args), fn(*args), rtol=1e-3, atol=1e-4))
            row["course_ms"] = _time(cfn, args, sync, reps=3 if smoke else 20) * 1e3
            compiled = [c for k, c in rec if k == "compiled"]
            row["kernels"] = sum(c.kernel_count for c in compiled)
            row["fallbacks"] = [c for k, c in rec if k == "fallback"]
            if compiled:
                sources[name] = compiled[0].kernel_code
        except Exception as exc:  # record the failure, keep going
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        results.append(row)
        print(row, flush=True)
    with torch.enable_grad():
        training = [_train_case(name, make, shape, device) for name, make, shape in _training_cases(torch)]
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recorded.save(
        out / "inductor_gpu.json",
        {"shape": [rows, cols], "rows": results, "training": training},
        meta={"command": "python device/record_inductor.py " + out_dir},
    )
    if "softmax" in sources:
        (out / "softmax_triton.py").write_text(sources["softmax"])


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
