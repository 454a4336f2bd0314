"""A set-associative LRU cache simulator that counts misses (Module 6 reuses it).

Teaches why tiling and fusion pay: a cache holds ``size_bytes / line_bytes`` lines in sets of
``ways`` lines; an address maps to set ``(addr // line_bytes) % n_sets``; on a miss the least
recently used line of the set is evicted. Real caches (see the Intel optimisation manual)
use pseudo-LRU and prefetch; this one is exact LRU without prefetch.

API::

    simulate_cache(trace, size_bytes, line_bytes=64, ways=8) -> CacheStats(accesses, hits, misses)
    Cache(size_bytes, line_bytes, ways).access(addr) -> bool (True on a hit)
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class CacheStats:
    accesses: int
    hits: int
    misses: int

    @property
    def miss_rate(self) -> float:
        return self.misses / self.accesses if self.accesses else 0.0

    def __str__(self):
        return f"{self.accesses} accesses, {self.misses} misses ({100 * self.miss_rate:.1f}%)"


class Cache:
    """One cache level. ``n_sets = size_bytes // (line_bytes * ways)`` (at least 1)."""

    def __init__(self, size_bytes: int, line_bytes: int = 64, ways: int = 8):
        self.line, self.ways = line_bytes, ways
        self.n_sets = max(1, size_bytes // (line_bytes * ways))
        self.sets = [OrderedDict() for _ in range(self.n_sets)]
        self.stats = CacheStats(0, 0, 0)

    def access(self, addr: int) -> bool:
        tag = addr // self.line
        s = self.sets[tag % self.n_sets]
        self.stats.accesses += 1
        if tag in s:
            s.move_to_end(tag)  # most recently used at the end
            self.stats.hits += 1
            return True
        self.stats.misses += 1
        if len(s) >= self.ways:
            s.popitem(last=False)  # evict the least recently used
        s[tag] = True
        return False


def simulate_cache(trace, size_bytes: int, line_bytes: int = 64, ways: int = 8) -> CacheStats:
    """Run an address trace (iterable of byte addresses) through one LRU cache level."""
    c = Cache(size_bytes, line_bytes, ways)
    for a in trace:
        c.access(a)
    return c.stats
