"""Pictures of Module 1's IRs, all through course_lib.viz (DOT source) or matplotlib.

CFG with code in blocks, dominator tree, SSA before/after side by side, liveness per block,
interference graph coloured by register, schedule timeline, cache misses before/after tiling.
Each function returns a viz object (or a matplotlib Figure) and prints nothing.
"""

from __future__ import annotations

from course_lib import viz
from course_lib.ir import backend as be
from course_lib.ir.cfg import cfg_dot, dom_tree_dot
from course_lib.ir.core import Function
from course_lib.ir.dataflow import liveness
from course_lib.ir.ssa import to_ssa

PALETTE = [
    "#8dd3c7",
    "#ffffb3",
    "#bebada",
    "#fb8072",
    "#80b1d3",
    "#fdb462",
    "#b3de69",
    "#fccde5",
    "#d9d9d9",
    "#bc80bd",
    "#ccebc5",
    "#ffed6f",
]


def show_cfg(fn: Function):
    return viz.graph(cfg_dot(fn))


def show_dom_tree(fn: Function):
    return viz.graph(dom_tree_dot(fn))


def show_ssa(fn: Function):
    """The function before and after to_ssa, side by side."""
    return viz.panes([("before", fn.text(), "llvm"), ("SSA", to_ssa(fn).text(), "llvm")])


def liveness_annotations(fn: Function) -> dict[str, str]:
    live = liveness(fn)
    return {
        b: f"in: {{{', '.join(sorted(live.into[b]))}}}  out: {{{', '.join(sorted(live.out[b]))}}}" for b in fn.labels()
    }


def show_liveness(fn: Function):
    """The CFG with each block's live-in and live-out sets under its code."""
    return viz.graph(cfg_dot(fn, liveness_annotations(fn)))


def interference_dot(fn: Function, alloc: be.Allocation | None = None) -> str:
    graph = be.interference(fn)
    # overlap=false + sep: neato moves nodes apart so no two circles (or "spilled" labels) overprint;
    # splines route edges around nodes (dot, for small graphs, ignores both); edges are drawn first
    # and every node is filled, so no edge runs across a label.
    lines = [
        "graph interference {",
        '  graph [overlap=false, splines=true, sep="+12", outputorder=edgesfirst, fontname="monospace", fontsize=10,'
        '         labelloc=b, label="colour = register (r0, r1, ...); dashed box = spilled to memory"];',
        '  node [style=filled, fontname="monospace", fontsize=10, margin="0.04"];',
    ]
    for v in sorted(graph):
        a = alloc.assignment.get(v) if alloc else None
        if a is None:
            style = 'fillcolor="white"'
            label = v
        elif isinstance(a, tuple):
            style = 'fillcolor="white", shape=box, style="dashed,filled"'
            label = f"{v}\\nspilled"
        else:
            style = f'fillcolor="{PALETTE[a % len(PALETTE)]}"'
            label = f"{v}\\nr{a}"
        lines.append(f'  "{v}" [label="{label}", {style}];')
    for v in sorted(graph):
        for n in sorted(graph[v]):
            if v < n:
                lines.append(f'  "{v}" -- "{n}";')
    lines.append("}")
    return "\n".join(lines)


def show_interference(fn: Function, alloc: be.Allocation | None = None):
    """The interference graph, each node coloured by its register (dashed box = spilled)."""
    return viz.graph(interference_dot(fn, alloc), engine="neato" if len(be.interference(fn)) > 12 else "dot")


def schedule_figure(dag: be.DAG, sched: be.Schedule, title: str = ""):
    """A timeline: one bar per instruction from its issue cycle for its latency."""
    import matplotlib.pyplot as plt

    n = len(dag.instrs)
    fig, ax = plt.subplots(figsize=(8, 0.35 * n + 1))
    for k, m in enumerate(dag.instrs):
        ax.barh(k, be.latency(m), left=sched.cycle[k], color=PALETTE[k % len(PALETTE)], edgecolor="black")
    ax.set_yticks(range(n), [str(m) for m in dag.instrs], fontfamily="monospace", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("cycle")
    ax.set_title(title or f"{sched.cycles} cycles (issue width {sched.width})")
    fig.tight_layout()
    plt.close(fig)
    return fig


def tiling_misses_figure(n: int = 32, tiles=(2, 4, 8, 16), size_bytes: int = 4096, ways: int = 4):
    """Cache misses of an n x n matmul, naive vs tiled with each tile size."""
    import matplotlib.pyplot as plt

    from course_lib.ir import loopnest as ln

    shapes = {"A": (n, n), "B": (n, n), "C": (n, n)}
    m = ln.matmul(n)
    labels = ["naive ijk", "ikj"] + [f"tile {t}" for t in tiles]
    nests = [m, ln.interchange(m, [0, 2, 1])] + [ln.tile(m, {"i": t, "j": t, "k": t}) for t in tiles]
    misses = [ln.cache_misses(x, shapes, size_bytes, 64, ways) for x in nests]
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.bar(labels, misses, color=["#fb8072", "#fdb462"] + ["#80b1d3"] * len(tiles))
    ax.set_ylabel("misses")
    ax.set_title(f"{n}x{n} matmul, {size_bytes} B {ways}-way LRU cache, 64 B lines")
    fig.tight_layout()
    plt.close(fig)
    return fig, dict(zip(labels, misses))


def schedule_order_figure(panels: list, n: int = 16):
    """Iteration space of C[i, j] (i down, j across), one panel per ``(title, scheduled nest)``:
    each cell coloured by when it is first updated (dark = early), the path joining the cells in
    that order. Tiles show up as blocks of one shade; a vector's lanes as a bar of one colour."""
    import matplotlib.pyplot as plt
    import numpy as np

    from course_lib.ir import schedule as sc

    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.6), squeeze=False)
    for ax, (title, nest) in zip(axes[0], panels):
        order = sc.visit_order(nest)
        grid = np.full((n, n), np.nan)
        for (i, j), t in order.items():
            if i < n and j < n:
                grid[i, j] = t
        ax.imshow(grid, cmap="viridis", interpolation="nearest")
        path = sorted(((t, i, j) for (i, j), t in order.items() if i < n and j < n))
        ax.plot([p[2] for p in path], [p[1] for p in path], color="white", lw=0.6, alpha=0.8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("j")
        ax.set_ylabel("i")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    plt.close(fig)
    return fig
