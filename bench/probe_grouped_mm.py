"""Device probe: the course's grouped_mm derivative rule against eager autograd on CUDA, with an
empty expert and rows past the last offset (transformers' sentinel rows), in bf16.
``python bench/probe_grouped_mm.py``."""

import torch

from course_lib.aot.rules import grouped_mm_grads

aten = torch.ops.aten
torch.manual_seed(0)
for offs_list, rows, transposed in [
    ([8, 8, 16], 16, False),
    ([4, 4, 12], 16, False),
    ([4, 4, 12], 16, True),
    ([16, 16, 16], 16, True),
]:
    offs = torch.tensor(offs_list, dtype=torch.int32, device="cuda")
    a = torch.randn(rows, 32, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w0 = (
        torch.randn(3, 64, 32, device="cuda", dtype=torch.bfloat16)
        if transposed
        else torch.randn(3, 32, 64, device="cuda", dtype=torch.bfloat16)
    )
    w0.requires_grad_(True)
    w = w0.transpose(-2, -1) if transposed else w0
    out = torch._grouped_mm(a, w, offs=offs)
    g = torch.randn_like(out)
    ga, gw = torch.autograd.grad(out, [a, w], g)
    ra, rw = grouped_mm_grads(g, a.detach(), w.detach(), offs)
    used = int(offs[-1])
    print(
        f"offs {offs_list} rows {rows} transposed {transposed}: |ga - rule| used rows {float((ga[:used] - ra[:used]).abs().max()):.3g}, "
        f"tail rows {float((ga[used:] - ra[used:]).abs().max()) if used < rows else 0:.3g} (eager tail max {float(ga[used:].abs().max()) if used < rows else 0:.3g}); "
        f"|gw - rule| {float((gw - rw).abs().max()):.3g} per expert {[round(float((gw[e] - rw[e]).abs().max()), 3) for e in range(3)]}, "
        f"rule's empty-expert max {float(rw[1].abs().max()):.3g}",
        flush=True,
    )
