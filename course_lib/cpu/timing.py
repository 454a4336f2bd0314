"""Timing helpers: the median of repeated runs, and numpy arrays as C pointers.

Timing on a shared 2-core machine is noisy, so every number is the median of ``repeat``
measurements, each long enough (``min_time``) that the clock's resolution does not matter.
The notebooks show these numbers but never check them: checks compare structure.
"""

from __future__ import annotations

import ctypes
import dataclasses
import statistics
import time
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Timing:
    """Median seconds per call, and the spread of the repeats."""

    median: float
    low: float
    high: float
    calls: int

    def __str__(self) -> str:
        return f"{self.median * 1e6:.1f} us (min {self.low * 1e6:.1f}, max {self.high * 1e6:.1f})"


def median_time(fn: Callable[[], object], repeat: int = 5, min_time: float = 0.01) -> Timing:
    """Median seconds per call of ``fn()`` over ``repeat`` batches of at least ``min_time`` s."""
    fn()  # warm up: page faults, lazy binding, caches
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time or number >= 1 << 20:
            break
        number *= 2 if elapsed <= 0 else max(2, min(10, int(min_time / elapsed * 1.2) + 1))
    samples = [elapsed / number]
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return Timing(statistics.median(samples), min(samples), max(samples), number)


def ptr(array) -> ctypes.c_void_p:
    """A numpy array's data pointer, for a C ``float *`` argument (declared ``c_void_p``)."""
    return ctypes.c_void_p(array.ctypes.data)
