"""Pictures for Module 5: warp timelines, per-warp access patterns, roofline, latency hiding.

All figures are matplotlib, deterministic (no timing data), and returned so a notebook shows them.
"""

from __future__ import annotations

import numpy as np

KIND_COLOURS = {"alu": "#4c72b0", "sfu": "#8172b2", "global": "#dd8452", "shared": "#55a868",
                "sync": "#c44e52", "control": "#937860"}  # fmt: skip


def warp_timeline(result, max_cycles: int = 400):
    """One row per warp, one mark per issued instruction, coloured by kind; alpha = active lanes."""
    import matplotlib.pyplot as plt

    issues = [i for i in result.timeline if i.cycle < max_cycles]
    rows = sorted({(i.block, i.warp) for i in issues})
    y = {r: k for k, r in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.2))
    for kind, colour in KIND_COLOURS.items():
        sel = [i for i in issues if i.kind == kind]
        if sel:
            ax.scatter([i.cycle for i in sel], [y[(i.block, i.warp)] for i in sel], marker="|", s=120,
                       c=colour, alpha=[0.25 + 0.75 * i.active / 32 for i in sel], label=kind)  # fmt: skip
    ax.set_yticks(range(len(rows)), [f"block {b[0]} warp {w}" for b, w in rows])
    ax.set_xlabel("issue slot (one instruction per slot)")
    ax.set_title(f"{result.kernel}: warp timeline (faded = fewer active lanes)")
    ax.legend(loc="upper right", fontsize=7, ncol=6)
    fig.tight_layout()
    return fig


def access_pattern(result, space: str = "global", limit: int = 6):
    """For the first memory instructions: which 32-byte sector (global) or bank (shared) each lane hits."""
    import matplotlib.pyplot as plt

    evs = [e for e in result.events if e.space == space][:limit]
    fig, axes = plt.subplots(len(evs), 1, figsize=(9, 1.1 * len(evs) + 0.6), squeeze=False)
    for ax, e in zip(axes[:, 0], evs):
        lanes = np.flatnonzero(e.mask)
        if space == "shared":
            v = (e.addresses[lanes] // 4) % 32
            label = f"bank; {e.wavefronts} wavefront(s)"
        else:
            v = (e.addresses[lanes] - e.addresses[lanes].min()) // 32
            label = f"sector; {e.sectors} sectors, {e.lines} lines"
        ax.scatter(lanes, v, s=14, c="#4c72b0")
        ax.set_xlim(-1, 32)
        ax.set_ylabel(label.split(";")[0], fontsize=7)
        ax.set_title(f"warp {e.warp} pc {e.pc} {e.kind} {e.nbytes}B/lane: {label}", fontsize=8)
    axes[-1, 0].set_xlabel("lane")
    fig.tight_layout()
    return fig


def roofline(peak_tflops: float, bandwidth_gbs: float, kernels: list, title: str = ""):
    """Log-log roofline with each kernel placed at its arithmetic intensity."""
    import matplotlib.pyplot as plt

    from course_lib.gpu.hierarchy import attainable_tflops

    xs = np.logspace(-2, 4, 200)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.loglog(xs, [attainable_tflops(x, peak_tflops, bandwidth_gbs) for x in xs], "k-")
    for k in kernels:
        ax.scatter([k.intensity], [attainable_tflops(k.intensity, peak_tflops, bandwidth_gbs)], zorder=3)
        ax.annotate(k.name, (k.intensity, attainable_tflops(k.intensity, peak_tflops, bandwidth_gbs)), fontsize=7)
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(title or "roofline")
    fig.tight_layout()
    return fig


def latency_hiding_plot(latency: float | None = None, works=(10, 20, 40), max_warps: int = 64):
    """Utilisation vs resident warps for a few amounts of work per memory access (default latency:
    the H200's recorded HBM latency)."""
    import matplotlib.pyplot as plt

    from course_lib.gpu.occupancy_calculator import latency_hiding, recorded_hbm_latency

    latency = recorded_hbm_latency() if latency is None else latency
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = np.arange(1, max_warps + 1)
    for work in works:
        ax.plot(w, [latency_hiding(int(x), latency, work) for x in w], label=f"{work} instr / load")
    ax.set_xlabel("resident warps per scheduler")
    ax.set_ylabel("issue-slot utilisation")
    ax.set_title(f"hiding a {latency:.0f}-cycle memory latency")
    ax.legend()
    fig.tight_layout()
    return fig


def mma_fragments_plot(lane_maps: dict, title: str = "mma.sync.m16n8k16: which lane holds which element"):
    """One panel per operand: each element coloured and labelled by the lane that holds it."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(lane_maps), figsize=(4.2 * len(lane_maps), 4.6),
                             gridspec_kw={"width_ratios": [m.shape[1] for m in lane_maps.values()]})  # fmt: skip
    for ax, (name, lanes) in zip(np.atleast_1d(axes), lane_maps.items()):
        ax.imshow(lanes // 4, cmap="tab10", vmin=0, vmax=9)  # colour: the lane's group (lane // 4)
        for (r, c), ln in np.ndenumerate(lanes):
            ax.text(c, r, str(ln), ha="center", va="center", fontsize=6)
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(lanes.shape[1]))
        ax.set_yticks(range(lanes.shape[0]))
        ax.tick_params(labelsize=6)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
