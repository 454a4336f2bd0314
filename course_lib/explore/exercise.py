"""The tracing exercise: from a PTX instruction back to the Python line that made it.

The learner writes ``ptx_to_python(ex, line_id) -> int``: follow ``ex.line(i).sources`` upward
until a ``py:<file line>`` id, and return that line numbered from the ``def`` (``def`` = 1).
:func:`verify` checks it on PTX lines of several functions against the explorer's own walk
(:meth:`Exploration.python_lines`), and never shows the expected line: a miss names the PTX
instruction and the function, so the learner can look again.
"""

from __future__ import annotations

import functools

import torch

from course_lib.check import Verdict


def bias_gelu(x, b):
    """The tour's pointwise part: a bias add, then GELU."""
    h = x + b
    g = torch.nn.functional.gelu(h)
    return g


def softmax_rows(x):
    """A numerically stable softmax, written out: a max, an exp, a sum and a divide."""
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    s = e.sum(dim=-1, keepdim=True)
    return e / s


def scaled_tanh(x):
    y = x * 0.5
    t = torch.tanh(y)
    z = t * 2.0 + 1.0
    return z


FUNCTIONS = {"bias_gelu": (bias_gelu, ((8, 32), (32,))), "softmax_rows": (softmax_rows, ((8, 64),)),
             "scaled_tanh": (scaled_tanh, ((16, 32),))}  # fmt: skip


@functools.cache
def exploration(name: str):
    """The course side (to PTX) of one exercise function, built once per process."""
    from course_lib.explore import explore

    fn, shapes = FUNCTIONS[name]
    g = torch.Generator().manual_seed(0)
    return explore(fn, *[torch.randn(s, generator=g) for s in shapes], backend="course")


def cases(per_function: int = 4) -> list[tuple[str, str]]:
    """``(function name, PTX line id)`` pairs: instructions spread over each kernel."""
    from course_lib.explore import ptx_exercise_lines

    out = []
    for name in FUNCTIONS:
        ids = ptx_exercise_lines(exploration(name))
        step = max(1, len(ids) // per_function)
        out += [(name, i) for i in ids[::step][:per_function]]
    return out


def verify(ptx_to_python) -> Verdict:
    """Pass when the learner's function gives the explorer's Python line for every case."""
    checked = 0
    for name, line_id in cases():
        ex = exploration(name)
        want = ex.python_lines(line_id)
        got = ptx_to_python(ex, line_id)
        if not isinstance(got, int):
            return Verdict(
                False, f"ptx_to_python must return an int (a line number from the def), got {type(got).__name__}"
            )
        if [got] != want:
            text = ex.line(line_id).text.strip()
            return Verdict(False, f"{name}: the PTX instruction `{text}` does not come from line {got} "
                                  f"(of `{name}`, the def is line 1)")  # fmt: skip
        checked += 1
    return Verdict(True, f"{checked} PTX instructions in {len(FUNCTIONS)} functions traced to their Python lines")
