"""What a failed prediction may say: how far off and in which direction, never the answer.

A prediction exercise ("how many phis?", "which pass?") is answered by one value. Printing the
expected value after a miss turns the second try into a copy, so a failed prediction only says
*where* it is wrong: too high or too low (and roughly by how much) for numbers, which entries are
wrong for lists and dicts, too many or too few items for sets, "not this one" for the rest.
"""

from __future__ import annotations

import numbers
from typing import Any


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def number(expected: float, got: float) -> str:
    """``too high`` / ``too low`` and a coarse size of the miss (a band, not the distance)."""
    if got == expected:
        return "right"
    word = "too high" if got > expected else "too low"
    if expected == 0:
        return word
    ratio = got / expected
    rel = abs(got - expected) / abs(expected)
    if ratio <= 0:
        return f"{word}: even the sign is wrong"
    if rel < 0.1:
        return f"{word}, but within 10%"
    if ratio >= 2 or ratio <= 0.5:
        return f"{word}, by a factor of 2 or more"
    return f"{word}, by 10% to a factor of 2"


def _entry(expected: Any, got: Any) -> str:
    if _is_number(expected) and _is_number(got):
        return number(expected, got)
    return "wrong"


def describe(expected: Any, got: Any) -> str:
    """One sentence on how ``got`` misses ``expected``, naming no expected value."""
    if _is_number(expected) and _is_number(got):
        return f"not right: {number(expected, got)}"
    if isinstance(expected, (set, frozenset)) and isinstance(got, (set, frozenset)):
        right = len(set(expected) & set(got))
        size = (
            "too many items"
            if len(got) > len(expected)
            else "too few items"
            if len(got) < len(expected)
            else ("the right number of items")
        )
        return f"not right: {right} of your {len(got)} items are in the answer; you have {size}"
    if isinstance(expected, dict) and isinstance(got, dict):
        if set(expected) != set(got):
            return f"not right: the answer has {len(expected)} keys and yours has {len(got)}, or they are named differently"
        bad = [f"{k!r} {_entry(expected[k], got[k])}" for k in expected if expected[k] != got[k]]
        return "not right: " + "; ".join(bad[:6])
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        if len(expected) != len(got):
            return f"not right: the answer has {len(expected)} entries, yours has {len(got)}"
        bad = [f"entry {k} {_entry(e, g)}" for k, (e, g) in enumerate(zip(expected, got)) if e != g]
        return f"not right: {len(bad)} of {len(expected)} entries differ ({'; '.join(bad[:6])})"
    if type(expected) is not type(got) and not (_is_number(expected) and _is_number(got)):
        return f"not right: the answer is a {type(expected).__name__}, yours is a {type(got).__name__}"
    return "not right: this is not the answer"
