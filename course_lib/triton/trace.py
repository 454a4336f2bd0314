"""Memory-access tracing in Triton's interpreter: which program touched which element.

Teaches: ``python/triton/runtime/interpreter.py``. With ``TRITON_INTERPRET=1`` every
``tl.load`` / ``tl.store`` becomes ``InterpreterBuilder.create_masked_load/store`` on numpy
arrays of *addresses* (one per lane) and a mask; atomics become ``create_atomic_rmw`` /
``create_atomic_cas`` (recorded as kind ``"atomic"``). We hook those methods (through
``course_lib.compat.triton_memory_hook``), turn each address back into (tensor, element index)
using the tensors' ``data_ptr()`` and size, and record the program id and kernel line.

Out-of-bounds lanes (mask on, address outside every tensor) are recorded with the kernel line
and their element offsets from the nearest tensor, then switched off so the interpreter does not
read wild memory. On a GPU the same bug silently reads garbage or faults.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from course_lib import compat


@dataclasses.dataclass
class Access:
    kind: str  # "load" | "store" | "atomic" (tl.atomic_add, tl.atomic_cas, ...)
    program: tuple  # (pid0, pid1, pid2)
    line: int  # line in the kernel's file
    tensor: str  # name of the tensor ("?" when out of bounds)
    indices: np.ndarray  # flat element indices of active, in-bounds lanes
    lanes: int  # lanes in the block
    masked: int  # lanes switched off by the mask
    oob: list  # [(tensor, element offset)] for out-of-bounds lanes


@dataclasses.dataclass
class OutOfBounds:
    kind: str
    program: tuple
    line: int
    tensor: str  # nearest tensor
    offsets: list  # element offsets relative to that tensor's start

    def __str__(self) -> str:
        shown = ", ".join(map(str, self.offsets[:8])) + (" ..." if len(self.offsets) > 8 else "")
        return (f"out-of-bounds {self.kind} at kernel line {self.line} by program {self.program}: "
                f"{len(self.offsets)} lane(s) of {self.tensor!r} at element offsets [{shown}]")  # fmt: skip


@dataclasses.dataclass
class Trace:
    tensors: dict  # name -> (shape, numel)
    accesses: list

    def for_tensor(self, name: str, kind: str | None = None) -> list[Access]:
        return [a for a in self.accesses if a.tensor == name and (kind is None or a.kind == kind)]

    def heatmap(self, name: str, kind: str | None = None) -> np.ndarray:
        """How many times each element of ``name`` was touched (tensor's shape)."""
        shape, numel = self.tensors[name]
        counts = np.zeros(numel, dtype=np.int64)
        for a in self.for_tensor(name, kind):
            np.add.at(counts, a.indices, 1)
        return counts.reshape(shape)

    def footprint(self, name: str, kind: str | None = None) -> np.ndarray:
        """Linear program id that (last) touched each element of ``name``; -1 where none did."""
        shape, numel = self.tensors[name]
        owner = np.full(numel, -1, dtype=np.int64)
        grid = self.grid()
        for a in self.for_tensor(name, kind):
            owner[a.indices] = a.program[0] + grid[0] * (a.program[1] + grid[1] * a.program[2])
        return owner.reshape(shape)

    def grid(self) -> tuple:
        return tuple(max((a.program[d] for a in self.accesses), default=0) + 1 for d in range(3))

    def out_of_bounds(self) -> list[OutOfBounds]:
        out = []
        for a in self.accesses:
            by_tensor: dict[str, list] = {}
            for t, off in a.oob:
                by_tensor.setdefault(t, []).append(off)
            out += [OutOfBounds(a.kind, a.program, a.line, t, offs) for t, offs in by_tensor.items()]
        return out

    def masked_lanes(self) -> int:
        return sum(a.masked for a in self.accesses)

    def summary_rows(self) -> list[tuple]:
        """(kind, tensor, program, line, active lanes, masked lanes, out of bounds) per access."""
        return [(a.kind, a.tensor, a.program, a.line, len(a.indices), a.masked, len(a.oob)) for a in self.accesses]


def _kernel_line(kernel_file: str) -> int:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == kernel_file:
            return frame.f_lineno
        frame = frame.f_back
    return -1


def trace(launch, tensors: dict, kernel) -> Trace:
    """Run ``launch()`` (a zero-argument call that launches ``kernel``) and record every access.

    ``tensors`` names the tensors the kernel may touch (``{"x": x, "y": y, "out": out}``); an
    address inside none of them is out of bounds.
    """
    kernel_file = compat.triton_jit_function(kernel).fn.__code__.co_filename
    spans = [(name, t.data_ptr(), t.element_size(), t.numel()) for name, t in tensors.items()]
    accesses: list[Access] = []

    def on_access(kind, ptrs, mask, grid_idx):
        shape = np.shape(ptrs)
        ptrs = np.asarray(ptrs, dtype=np.uint64).astype(np.int64).ravel()
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), shape).ravel().copy()
        active = ptrs[mask]
        owner = np.full(active.shape, -1)
        index = np.zeros(active.shape, dtype=np.int64)
        for i, (_, base, size, numel) in enumerate(spans):
            inside = (active >= base) & (active < base + size * numel)
            owner[inside] = i
            index[inside] = (active[inside] - base) // size
        line = _kernel_line(kernel_file)
        oob = []
        for addr in active[owner < 0]:
            name, base, size, _ = min(spans, key=lambda s: abs(int(addr) - s[1]))
            oob.append((name, int((int(addr) - base) // size)))
        names = {spans[i][0] for i in set(owner[owner >= 0].tolist())}
        tensor = names.pop() if len(names) == 1 else ("?" if not names else "+".join(sorted(names)))
        accesses.append(Access(kind, tuple(int(g) for g in grid_idx), line, tensor, index[owner >= 0],
                               int(mask.size), int((~mask).sum()), oob))  # fmt: skip
        keep = mask.copy()
        keep[np.flatnonzero(mask)[owner < 0]] = False  # switch out-of-bounds lanes off
        return keep.reshape(shape)

    def hook(kind, ptrs, mask, grid_idx):
        shape = np.shape(ptrs)
        return on_access(kind, ptrs, mask, grid_idx).reshape(shape)

    with compat.triton_memory_hook(hook):
        launch()
    return Trace({n: (tuple(t.shape), t.numel()) for n, t in tensors.items()}, accesses)


def plot_heatmap(tr: Trace, name: str, kind: str | None = None, ax=None, width: int | None = None):
    """Heat map of access counts for tensor ``name`` (1-D tensors wrapped to rows of ``width``)."""
    import matplotlib.pyplot as plt

    data = tr.heatmap(name, kind)
    data = _as_2d(data, width)
    ax = ax or plt.subplots(figsize=(6, 2.5))[1]
    im = ax.imshow(data, cmap="viridis", aspect="auto", interpolation="nearest")
    ax.set_title(f"{name}: {kind or 'load+store'} count per element")
    ax.figure.colorbar(im, ax=ax)
    return ax


def plot_footprint(tr: Trace, name: str, kind: str | None = None, ax=None, width: int | None = None):
    """Which program touched each element of ``name`` (one colour per program; white = none)."""
    import matplotlib.pyplot as plt

    data = _as_2d(tr.footprint(name, kind), width).astype(float)
    data[data < 0] = np.nan
    ax = ax or plt.subplots(figsize=(6, 2.5))[1]
    im = ax.imshow(data, cmap="tab20", aspect="auto", interpolation="nearest")
    ax.set_title(f"{name}: program id per element")
    ax.figure.colorbar(im, ax=ax)
    return ax


def _as_2d(data: np.ndarray, width: int | None) -> np.ndarray:
    if data.ndim == 2:
        return data
    width = width or int(np.ceil(np.sqrt(data.size)))
    pad = (-data.size) % width
    return np.concatenate([data.ravel(), np.full(pad, -1 if data.dtype.kind == "i" else 0)]).reshape(-1, width)
