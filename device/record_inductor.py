"""Record course_lib.inductor's Triton path on a GPU: correctness, runtimes, generated source.

Usage (on the H200 machine, from the repo root; < 2 minutes):

    python device/record_inductor.py data/inductor

Writes ``inductor_gpu.json`` (per workload: eager / Inductor / course_lib median ms, correct,
kernel count) and ``softmax_triton.py`` (course_lib's generated Triton for softmax, the text
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
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recorded.save(
        out / "inductor_gpu.json",
        {"shape": [rows, cols], "rows": results},
        meta={"command": "python device/record_inductor.py " + out_dir},
    )
    if "softmax" in sources:
        (out / "softmax_triton.py").write_text(sources["softmax"])


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else "data/inductor", smoke="--smoke" in sys.argv)
