"""Teaching kernels: CUDA-style kernels written in Python, run warp by warp on the SIMT machine.

Teaches: the CUDA programming model (thread / block / grid, ``threadIdx``, ``blockIdx``,
``__syncthreads``, ``__shared__``) without a compiler in the way. A kernel is a Python function
``kernel(t, *args)`` that runs once per *warp*; ``t.tid``, ``t.bid`` ... are vectors of 32 lane
values, and every operation on them issues one warp instruction under the current active mask.

    def scale(t, x, out, n):
        i = t.bid.x * t.bdim.x + t.tid.x           # global thread index, 32 lanes at once
        with t.if_(i < n):                          # lanes with i >= n are masked off
            out[i] = x[i] * 2.0                     # a load, a multiply, a store

``with t.if_(c): ... ``, ``with t.else_(): ...`` narrow the mask (both sides issue when lanes
disagree: divergence); ``yield`` in the body is ``__syncthreads()`` (the kernel becomes a
generator and the scheduler holds each warp there until the whole block arrives);
``t.shared(name, n)`` is a ``__shared__`` array of the block. Real counterpart: CUDA C++
(Programming Guide, chapter "Programming Model"); nvcc would produce PTX like
:mod:`.ptx_exec` runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import types

import numpy as np

from course_lib.gpu import memory as mem
from course_lib.gpu.simt import WARP, Issue, MemEvent, RunResult, WarpStats, dim3, schedule_block, thread_coords


@dataclasses.dataclass
class Dim:
    x: object
    y: object
    z: object


class Lanes:
    """32 lane values; arithmetic on them issues one instruction for the active lanes."""

    __array_priority__ = 100

    def __init__(self, ctx, values):
        self.ctx, self.v = ctx, np.asarray(values)

    def _op(self, other, fn, kind="alu"):
        self.ctx.issue(kind)
        o = other.v if isinstance(other, Lanes) else other
        return Lanes(self.ctx, fn(self.v, o))

    def _rop(self, other, fn):
        self.ctx.issue("alu")
        return Lanes(self.ctx, fn(other, self.v))

    __add__ = lambda s, o: s._op(o, np.add)
    __radd__ = lambda s, o: s._rop(o, np.add)
    __sub__ = lambda s, o: s._op(o, np.subtract)
    __rsub__ = lambda s, o: s._rop(o, np.subtract)
    __mul__ = lambda s, o: s._op(o, np.multiply)
    __rmul__ = lambda s, o: s._rop(o, np.multiply)
    __truediv__ = lambda s, o: s._op(o, np.divide, "sfu")
    __floordiv__ = lambda s, o: s._op(o, np.floor_divide)
    __mod__ = lambda s, o: s._op(o, np.mod)
    __and__ = lambda s, o: s._op(o, np.bitwise_and)
    __or__ = lambda s, o: s._op(o, np.bitwise_or)
    __xor__ = lambda s, o: s._op(o, np.bitwise_xor)
    __lshift__ = lambda s, o: s._op(o, np.left_shift)
    __rshift__ = lambda s, o: s._op(o, np.right_shift)
    __lt__ = lambda s, o: s._op(o, np.less)
    __le__ = lambda s, o: s._op(o, np.less_equal)
    __gt__ = lambda s, o: s._op(o, np.greater)
    __ge__ = lambda s, o: s._op(o, np.greater_equal)
    __eq__ = lambda s, o: s._op(o, np.equal)
    __ne__ = lambda s, o: s._op(o, np.not_equal)
    __hash__ = None

    def __neg__(self):
        return self._op(0, lambda a, _: -a)

    def __repr__(self) -> str:
        return f"Lanes({self.v.tolist()})"


class Array:
    """A global (or shared) array seen from a warp: ``a[i]`` loads, ``a[i] = v`` stores."""

    def __init__(self, ctx, name, data: np.ndarray, base: int, space: str):
        self.ctx, self.name, self.data, self.base, self.space = ctx, name, data, base, space

    def _index(self, i):
        idx = i.v if isinstance(i, Lanes) else np.full(WARP, i)
        return np.broadcast_to(idx, (WARP,)).astype(np.int64)

    def __getitem__(self, i):
        idx = self._index(i)
        m = self.ctx.mask
        self.ctx.access(self, "load", idx, m)
        safe = np.where(m, np.clip(idx, 0, self.data.size - 1), 0)
        return Lanes(self.ctx, np.where(m, self.data.reshape(-1)[safe], 0))

    def __setitem__(self, i, value):
        idx = self._index(i)
        m = self.ctx.mask
        self.ctx.access(self, "store", idx, m)
        v = np.broadcast_to(value.v if isinstance(value, Lanes) else value, (WARP,))
        flat = self.data.reshape(-1)
        lanes = np.flatnonzero(m)
        if lanes.size and (idx[lanes].min() < 0 or idx[lanes].max() >= flat.size):
            raise IndexError(f"store to {self.name}: index out of range")
        flat[idx[lanes]] = v[lanes]


class WarpContext:
    """What a teaching kernel sees as ``t``: indices, mask control, shared memory, counters."""

    def __init__(self, run, block_idx, warp, shared_arrays):
        self.run, self.block_idx, self.warp = run, block_idx, warp
        c = thread_coords(run.block, warp)
        self.mask = c["exists"].copy()
        self.stats = WarpStats(block_idx, warp)
        L = lambda v: Lanes(self, v)  # noqa: E731
        self.tid = Dim(L(c["x"]), L(c["y"]), L(c["z"]))
        self.bid = Dim(*(L(np.full(WARP, b)) for b in block_idx))
        self.bdim = Dim(*(L(np.full(WARP, b)) for b in run.block))
        self.gdim = Dim(*(L(np.full(WARP, g)) for g in run.grid))
        self.lane = L(c["lane"])
        self._shared = shared_arrays
        self._else: list = []

    def issue(self, kind="alu"):
        n = int(self.mask.sum())
        if n == 0:
            return
        self.stats.issued += 1
        self.stats.active_lanes += n
        self.run.timeline.append(Issue(self.run.cycle, self.block_idx, self.warp, -1, kind, n))
        self.run.cycle += 1

    def access(self, arr: Array, kind, idx, m):
        self.issue(arr.space)
        if not m.any():
            return
        nbytes = arr.data.itemsize
        addr = arr.base + idx * nbytes
        ev = MemEvent(
            self.run.cycle - 1,
            self.block_idx,
            self.warp,
            -1,
            arr.space,
            kind,
            nbytes,
            addr,
            m.copy(),
            text=f"{kind} {arr.name}",
        )
        if arr.space == "shared":
            ev.wavefronts = mem.bank_wavefronts(addr, nbytes, m)
            self.stats.shared_requests += 1
            self.stats.shared_wavefronts += ev.wavefronts
        else:
            ev.sectors, ev.lines = mem.sectors_touched(addr, nbytes, m), mem.lines_touched(addr, nbytes, m)
            self.stats.global_requests += 1
            self.stats.global_sectors += ev.sectors
            self.stats.global_lines += ev.lines
        self.run.events.append(ev)

    @contextlib.contextmanager
    def if_(self, cond):
        """Run the body for lanes where ``cond`` holds (a predicated branch: one issue)."""
        c = np.broadcast_to(cond.v if isinstance(cond, Lanes) else cond, (WARP,)).astype(bool)
        self.issue("control")
        saved = self.mask
        self.mask = saved & c
        try:
            yield
        finally:
            self._else.append(saved & ~c)
            self.mask = saved

    @contextlib.contextmanager
    def else_(self):
        """The other lanes of the ``if_`` just closed."""
        saved, self.mask = self.mask, self._else.pop()
        self.issue("control")
        try:
            yield
        finally:
            self.mask = saved

    def shared(self, name: str, n: int, dtype=np.float32) -> Array:
        """The block's ``__shared__`` array ``name`` (created by the first warp that asks)."""
        if name not in self._shared:
            base = sum(a.nbytes for a in self._shared.values())
            self._shared[name] = np.zeros(n, dtype)
            self._shared[name + "@base"] = np.zeros(0) if base is None else np.array([base])
        base = int(self._shared[name + "@base"][0])
        return Array(self, name, self._shared[name], base, "shared")

    def where(self, cond, a, b) -> Lanes:
        """Select per lane without branching (PTX ``selp``)."""
        self.issue("alu")
        val = lambda x: x.v if isinstance(x, Lanes) else x  # noqa: E731
        return Lanes(self, np.where(val(cond), val(a), val(b)))


class _TeachWarp:
    def __init__(self, ctx, gen):
        self.ctx, self.gen = ctx, gen
        self.finished, self.at_barrier = gen is None, False

    def step(self):
        try:
            next(self.gen)
            self.at_barrier = True
            self.ctx.stats.barriers += 1
            self.ctx.issue("sync")
        except StopIteration:
            self.finished = True


class _TeachRun:
    def __init__(self, grid, block):
        self.grid, self.block, self.cycle = grid, block, 0
        self.events, self.timeline = [], []


def launch(kernel, grid, block, *args) -> RunResult:
    """Run a teaching kernel over ``grid`` x ``block``; numpy array arguments are updated in place.

    Returns a :class:`course_lib.gpu.simt.RunResult` (outputs are the array arguments).
    """
    grid, block = dim3(grid), dim3(block)
    run = _TeachRun(grid, block)
    nwarps = -(-block[0] * block[1] * block[2] // WARP)
    arrays, base = [], mem.GLOBAL_BASE
    for a in args:
        if isinstance(a, np.ndarray):
            arrays.append(base)
            base += (a.nbytes + 255) // 256 * 256 + 256
        else:
            arrays.append(None)
    stats = []
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                shared: dict = {}
                warps = []
                for wi in range(nwarps):
                    ctx = WarpContext(run, (bx, by, bz), wi, shared)
                    wargs = [
                        Array(ctx, f"arg{i}", a, arrays[i], "global") if arrays[i] is not None else a
                        for i, a in enumerate(args)
                    ]
                    if inspect.isgeneratorfunction(kernel):
                        warps.append(_TeachWarp(ctx, kernel(ctx, *wargs)))
                    else:
                        kernel(ctx, *wargs)
                        warps.append(_TeachWarp(ctx, None))
                schedule_block(warps)
                stats += [w.ctx.stats for w in warps]
    name = kernel.__name__ if isinstance(kernel, types.FunctionType) else str(kernel)
    outs = [a if isinstance(a, np.ndarray) else None for a in args]
    return RunResult(name, grid, block, outs, stats, run.events, run.timeline)
