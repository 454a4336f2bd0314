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

import random
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


def hits_by_stack_distance(trace, size_bytes: int, line_bytes: int = 64, ways: int = 8) -> list[bool]:
    """An oracle for :class:`Cache` that keeps no cache state: LRU's *inclusion property*
    (Mattson et al., 1970). An access hits exactly when its line was used before and fewer than
    ``ways`` other lines of the same set were used since (its stack distance within the set is
    below the associativity). O(n^2); for checking, not for simulating."""
    n_sets = max(1, size_bytes // (line_bytes * ways))
    lines = [a // line_bytes for a in trace]
    out = []
    for k, tag in enumerate(lines):
        prev = max((j for j in range(k) if lines[j] == tag), default=None)
        if prev is None:
            out.append(False)
            continue
        others = {t for t in lines[prev + 1 : k] if t % n_sets == tag % n_sets and t != tag}
        out.append(len(others) < ways)
    return out


def random_traces(count: int, seed: int = 5, length: int = 80) -> list[tuple[list[int], int, int, int]]:
    """``count`` (trace, size, line, ways) cases: 1, 2 or 4 ways, 1 to 16 sets, lines of 16-64
    bytes; half the accesses revisit six hot addresses, so hits, conflicts and evictions all occur."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        line, ways = rng.choice([16, 32, 64]), rng.choice([1, 2, 4])
        size = line * ways * rng.choice([1, 2, 4, 16])
        hot = [rng.randrange(0, 6 * size) for _ in range(6)]
        trace = [rng.choice(hot) if rng.random() < 0.5 else rng.randrange(0, 6 * size) for _ in range(length)]
        out.append((trace, size, line, ways))
    return out
