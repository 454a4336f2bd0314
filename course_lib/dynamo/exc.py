"""Why a capture stops: the exception a rule raises for a graph break (teaches torch/_dynamo/exc.py,
where ``Unsupported`` plays the same part).

Position: raised by a value rule (variables/) or an opcode handler (symbolic_convert.py), caught by
the top-level translator, which turns it into a graph break with ``reason`` as the explanation.
"""

from __future__ import annotations


class Unsupported(Exception):
    """Raised by a handler for something the translator cannot capture: causes a graph break."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


__all__ = ["Unsupported"]
