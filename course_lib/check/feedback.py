"""What a failed prediction may say: how far off and in which direction, never the answer.

A prediction exercise ("how many phis?", "which pass?") is answered by one value. Printing the
expected value after a miss turns the second try into a copy, so a failed prediction only says
*where* it is wrong, in words that name nothing the learner did not write themselves:

=================  =====================================================================
answer is a        a miss says
=================  =====================================================================
number             too high / too low, and a coarse band (within 10%, up to 2x, more)
set                whether some of your items do not belong and whether some are missing
list / tuple       too many or too few entries; else how many entries are wrong, and for
                   numeric entries which one and in which direction
dict               which of *your* keys were not asked for, that some asked for are
                   missing (never which), then as a list for the values
bool, str, other   "not the answer"
=================  =====================================================================

Rules that keep the answer off the screen (each one closed a leak):

* a key or an item of the answer is never printed, only the learner's own;
* a wrong entry is named only when its value is a number (the direction teaches); a wrong
  two-valued entry (True / False) named by position is the answer, so only a count is given;
* no length of the answer is printed (a list of 3 entries against 2 says "too few");
* the type of the answer is not printed (``NoneType`` or ``bool`` would narrow it to a guess).
"""

from __future__ import annotations

import numbers
from typing import Any

_MAX_NAMED = 6  # wrong entries named in one message


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
    if ratio < 0:
        return f"{word}: even the sign is wrong"
    if rel < 0.1:
        return f"{word}, but within 10%"
    if ratio >= 2 or ratio <= 0.5:
        return f"{word}, by a factor of 2 or more"
    return f"{word}, by 10% to a factor of 2"


def _entries(pairs: list[tuple[str, Any, Any]], noun: str) -> str:
    """Entries (label, expected, got) of equal key sets: a count, and numeric misses by name."""
    bad = [(label, e, g) for label, e, g in pairs if e != g]
    numeric = [f"{label} {number(e, g)}" for label, e, g in bad if _is_number(e) and _is_number(g)]
    text = f"{len(bad)} of your {len(pairs)} {noun} {'is' if len(bad) == 1 else 'are'} wrong"
    if numeric:
        text += " (" + "; ".join(numeric[:_MAX_NAMED]) + ("; ..." if len(numeric) > _MAX_NAMED else "") + ")"
    return text


def _set(expected: set, got: set) -> str:
    strays, missing = bool(got - expected), bool(expected - got)
    if strays and missing:
        return "some of your items do not belong, and some that belong are missing"
    if strays:
        return "everything that belongs is there, but some of your items do not belong"
    return "every item you named belongs, but some are missing"


def _dict(expected: dict, got: dict) -> str:
    if set(expected) != set(got):
        strays = sorted((k for k in got if k not in expected), key=repr)
        parts = []
        if strays:
            shown = ", ".join(repr(k) for k in strays[:_MAX_NAMED])
            parts.append(f"your key{'s' if len(strays) > 1 else ''} {shown} {'are' if len(strays) > 1 else 'is'} "
                         "not asked for")  # fmt: skip
        if set(expected) - set(got):
            parts.append("some keys asked for are missing (see the exercise for the names)")
        return "; ".join(parts)
    return _entries([(repr(k), expected[k], got[k]) for k in got], "entries")


def _sequence(expected: list | tuple, got: list | tuple) -> str:
    if len(expected) != len(got):
        return f"too {'many' if len(got) > len(expected) else 'few'} entries"
    return _entries([(f"entry {k}", e, g) for k, (e, g) in enumerate(zip(expected, got))], "entries")


def describe(expected: Any, got: Any) -> str:
    """One sentence on how ``got`` misses ``expected``, naming no part of ``expected``."""
    try:
        return _describe(expected, got)
    except Exception:  # values that do not compare plainly (tensors, arrays): say no more than this
        return "not right: this is not the answer"


def _describe(expected: Any, got: Any) -> str:
    if _is_number(expected) and _is_number(got):
        return f"not right: {number(expected, got)}"
    if isinstance(expected, (set, frozenset)) and isinstance(got, (set, frozenset)):
        return f"not right: {_set(set(expected), set(got))}"
    if isinstance(expected, dict) and isinstance(got, dict):
        return f"not right: {_dict(expected, got)}"
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        return f"not right: {_sequence(expected, got)}"
    if type(expected) is not type(got) and not (_is_number(expected) and _is_number(got)):
        return f"not right: your answer's type ({type(got).__name__}) is not the one asked for (see the signature)"
    return "not right: this is not the answer"
