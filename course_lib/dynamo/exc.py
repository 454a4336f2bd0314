"""Why a capture stops: the exception a rule raises for a graph break (teaches torch/_dynamo/exc.py,
where ``Unsupported`` plays the same part).

Position: raised by a value rule (variables/) or an opcode handler (symbolic_convert.py), caught by
the top-level translator, which turns it into a graph break with ``reason`` as the explanation.
"""

from __future__ import annotations


class Unsupported(Exception):
    """Raised by a handler for something the translator cannot capture: causes a graph break.
    ``skip_frame``: no graph break can be placed there, the frame is given up (Dynamo's flag of
    the same name), as for a break inside a generator that traced code consumes."""

    def __init__(self, reason: str, skip_frame: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.skip_frame = skip_frame


__all__ = ["Unsupported"]
