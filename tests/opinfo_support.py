"""PyTorch's OpInfo inputs through the course backend (what torch's test/inductor/test_torchinductor_opinfo.py does).

Every float32 CPU entry of ``torch.testing._internal.common_methods_invocations.op_db`` (or of
another dtype: :func:`ops_of`, ``forward(name, dtype)``) is run on its first sample input twice: eagerly and through ``torch.compile(..., backend=course_lib)``; where
autograd applies, the gradients of the inputs are compared too. Each run ends in one of:

    compiled   every graph Dynamo handed over was compiled by course_lib, and the result matches
    fallback   some graph ran in eager, or went through torch's AOT Autograd (reason kept), and it matches
    skipped    nothing to compare: eager itself fails, or the op draws random numbers
    wrong      the compiled result differs from eager (or raised where eager did not)

Only ``wrong`` is a failure. ``python tests/opinfo_support.py`` prints the whole table.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree

ATOL, RTOL = 1e-4, 1e-4  # float32; the course's decompositions (expm1 as exp - 1...) round a little differently


@dataclass
class Outcome:
    """How one op fared in one direction (``forward`` or ``backward``)."""

    status: str  # compiled | fallback | skipped | wrong
    reason: str = ""
    record: list = field(default_factory=list)  # the backend's ("compiled" | "fallback" | "aot-fallback", ...) entries

    def __str__(self) -> str:
        return f"{self.status}: {self.reason}" if self.reason else self.status


@functools.cache
def ops_of(dtype: torch.dtype) -> dict:
    """{name: OpInfo} for every op_db entry that supports ``dtype`` on CPU (name.variant when there is one)."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = {}
    for op in op_db:
        if dtype in op.supported_dtypes("cpu"):
            ops[op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")] = op
    return ops


def float32_ops() -> dict:
    return ops_of(torch.float32)


def first_sample(op, requires_grad: bool, dtype: torch.dtype = torch.float32):
    torch.manual_seed(0)
    return next(iter(op.sample_inputs("cpu", dtype, requires_grad=requires_grad)))


def _clone(x):
    if isinstance(x, torch.Tensor):
        c = x.detach().clone()
        return c.requires_grad_(x.requires_grad)
    return x


def _args(sample):
    """Fresh copies of the sample's (args, kwargs), so neither run sees the other's mutations."""
    args = pytree.tree_map(_clone, [sample.input, *sample.args])
    kwargs = pytree.tree_map(_clone, dict(sample.kwargs))
    return args, kwargs


def _detached(args, kwargs) -> list:
    return [t.detach() if isinstance(t, torch.Tensor) else t for t in _leaves([args, kwargs])]


def _leaves(x) -> list:
    return pytree.tree_leaves(x)


def _differentiable(t) -> bool:
    return isinstance(t, torch.Tensor) and (t.dtype.is_floating_point or t.dtype.is_complex) and t.requires_grad


def _same(expected, got) -> str:
    """'' when equal within tolerance, else what differs."""
    e, g = _leaves(expected), _leaves(got)
    if len(e) != len(g):
        return f"{len(g)} outputs, eager has {len(e)}"
    for i, (a, b) in enumerate(zip(e, g)):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return f"output {i}: {type(b).__name__}, eager gives {type(a).__name__}"
        if not isinstance(a, (torch.Tensor, int, float, complex)):  # a dtype, a string, None...
            if a != b:
                return f"output {i}: {b!r}, eager gives {a!r}"
            continue
        try:
            torch.testing.assert_close(b, a, atol=ATOL, rtol=RTOL, equal_nan=True, check_device=True)
        except AssertionError as exc:
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            return f"output {i}: " + "; ".join(lines[:4])
    return ""


def _uninitialised(name: str) -> bool:
    """empty, new_empty, empty_strided...: the values are whatever was in memory (torch's test skips them too)."""
    return "empty" in name.split(".")[0]


def _random(op, sample) -> bool:
    """The op draws random numbers: two eager runs from different seeds disagree."""
    outs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        args, kwargs = _args(sample)
        outs.append(op(*args, **kwargs))
    return bool(_same(outs[0], outs[1]))


def _compiled(op, record: list):
    from course_lib.inductor import compile_fx

    def backend(gm, example_inputs):  # backend="course_lib" with its record kept
        record.append(("graph", None))
        return compile_fx(gm, example_inputs, record=record)

    def fn(*args, **kwargs):
        return op(*args, **kwargs)

    return torch.compile(fn, backend=backend)


def _route(record: list) -> tuple[str, str]:
    """compiled / fallback and the first reason, from the backend's record."""
    graphs = sum(kind == "graph" for kind, _ in record)
    reasons = [f"{kind}: {what}" for kind, what in record if kind in ("fallback", "aot-fallback")]
    if graphs == 0:
        return "fallback", "Dynamo handed no graph to the backend (graph break or no tensor op)"
    if reasons:
        return "fallback", reasons[0]
    return "compiled", ""


def _has_grad(o) -> bool:
    return isinstance(o, torch.Tensor) and o.grad_fn is not None


def _grads(out, inputs: list, mask: list[bool], seed: int = 0):
    """d(sum(out * cotangent))/d inputs, the cotangent a fixed random tensor per output in ``mask``.

    ``mask`` is eager's: the outputs autograd differentiates there (``native_layer_norm``'s mean and
    rstd are not differentiable in torch; course_lib.aot's outputs all carry a gradient, see the report).
    """
    outs = [o for o, m in zip(_leaves(out), mask) if m]
    gen = torch.Generator().manual_seed(seed)
    cots = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
    return torch.autograd.grad(outs, inputs, cots, allow_unused=True)


class _Skip(Exception):
    """Eager gives nothing to compare (the message says why)."""


class _Wrong(Exception):
    """The compiled run's outputs cannot even be lined up with eager's."""


def _observe(fn, sample, grad: bool, mask: list[bool] | None = None) -> tuple[tuple, list[bool] | None]:
    """Run ``fn`` on fresh copies of the sample: what is compared, and the gradient mask.

    What is compared: the outputs, the inputs after the call (an op may update one: running stats),
    and with ``grad`` the inputs' gradients. ``mask`` is None for the eager run, which decides which
    outputs autograd differentiates (see :func:`_grads`); the compiled run is given eager's mask.
    """
    args, kwargs = _args(sample)
    inputs = [t for t in _leaves([args, kwargs]) if _differentiable(t)]
    if grad and mask is None and not inputs:
        raise _Skip("no input needs a gradient")
    out = fn(*args, **kwargs)
    if not grad:
        return (out, _detached(args, kwargs)), None
    if mask is None:
        mask = [_has_grad(o) for o in _leaves(out)]
        if not any(mask):
            raise _Skip("no output has a gradient")
    elif len(_leaves(out)) != len(mask):
        raise _Wrong(f"{len(_leaves(out))} outputs, eager has {len(mask)}")
    return (out, _grads(out, inputs, mask), _detached(args, kwargs)), mask


def _skip_reason(name: str, op, grad: bool) -> str:
    if _uninitialised(name):
        return "uninitialised values"
    return "no autograd" if grad and not op.supports_autograd else ""


def _outcome(name: str, grad: bool, dtype: torch.dtype = torch.float32) -> Outcome:
    """The op's first sample in ``dtype`` through the course backend against eager; ``grad``: gradients too."""
    op = ops_of(dtype)[name]
    if reason := _skip_reason(name, op, grad):
        return Outcome("skipped", reason)
    try:
        sample = first_sample(op, requires_grad=grad, dtype=dtype)
        expected, mask = _observe(op, sample, grad)
    except _Skip as exc:
        return Outcome("skipped", str(exc))
    except Exception as exc:
        return Outcome("skipped", f"eager raises {type(exc).__name__}")
    if _random(op, sample):
        return Outcome("skipped", "random op")
    torch._dynamo.reset()
    record: list = []
    try:
        got, _ = _observe(_compiled(op, record), sample, grad, mask)
    except _Wrong as exc:
        return Outcome("wrong", str(exc), record)
    except Exception as exc:
        return Outcome("wrong", f"compiled raises {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", record)
    diff = _same(expected, got)
    if diff:
        return Outcome("wrong", diff, record)
    status, reason = _route(record)
    return Outcome(status, reason, record)


def forward(name: str, dtype: torch.dtype = torch.float32) -> Outcome:
    """The op's first sample forward through the course backend, compared with eager. For an integer
    or bool ``dtype`` integer outputs must be equal (the tolerances are below 1)."""
    return _outcome(name, grad=False, dtype=dtype)


def backward(name: str, dtype: torch.dtype = torch.float32) -> Outcome:
    """Forward and the inputs' gradients through the course backend, compared with eager autograd."""
    return _outcome(name, grad=True, dtype=dtype)


def check(name: str) -> Outcome:
    """One compile per op, as torch's Inductor OpInfo test does: outputs and gradients where autograd
    applies (course_lib.aot's training path), else the outputs alone (the inference path)."""
    outcome = backward(name)
    return forward(name) if outcome.status == "skipped" else outcome


def missing_rule(outcome: Outcome) -> str | None:
    """The ATen op course_lib.aot has no derivative rule for, when that sent the graph to torch's AOT."""
    for kind, what in outcome.record:
        if kind == "aot-fallback" and "no derivative rule for " in what:
            return what.split("no derivative rule for ", 1)[1].split(" (node")[0]
    return None


def _main(argv: list[str]) -> None:
    """One line per op and direction, the counts, and the ops whose missing derivative rule sent a
    backward case to torch's AOT Autograd (``python tests/opinfo_support.py [name ...]``)."""
    import collections
    import logging

    logging.getLogger("course_lib.inductor").setLevel(logging.ERROR)
    names = argv or sorted(float32_ops())
    if names[0].startswith("--shard="):  # --shard=i/n: every n-th name from the i-th
        i, n = map(int, names[0].split("=")[1].split("/"))
        names = (names[1:] or sorted(float32_ops()))[i::n]
    counts = {"forward": collections.Counter(), "backward": collections.Counter()}
    missing: dict[str, list[str]] = collections.defaultdict(list)
    t0 = time.perf_counter()
    for name in names:
        for direction, run in (("forward", forward), ("backward", backward)):
            t = time.perf_counter()
            out = run(name)
            counts[direction][out.status] += 1
            print(f"{direction:8} {name:40} {time.perf_counter() - t:6.2f}s {out}", flush=True)
            if direction == "backward" and missing_rule(out):
                missing[missing_rule(out)].append(name)
    for direction, c in counts.items():
        print(direction, dict(c))
    print(f"backward cases sent to torch's AOT by a missing derivative rule: {sum(map(len, missing.values()))}")
    for op, cases in sorted(missing.items()):
        print(f"  {op}: {', '.join(cases)}")
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(os.getcwd(), ".cache", "inductor"))
    _main(sys.argv[1:])
