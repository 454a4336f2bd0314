"""Regressions found by running transformers architectures the course had not seen through
``backend="course_lib"``, each reproduced here with plain torch ops.

* A tensor built from Python numbers inside the compiled code (``torch.tensor(3.0)``; BEiT's
  relative position bias does this) reaches torch's AOT Autograd graph as a ``get_attr`` of a
  constant (``_tensor_constant0``, read by ``lift_fresh_copy``). course_lib.inductor's lowering
  knows only placeholders, so the graph ran in eager ("FX op get_attr ... is not handled").
  ``inner_compiler`` now lifts the constants into extra inputs, as course_lib.aot's path does.
"""

import functools

import torch

import course_lib.inductor as ind
from course_lib import compat


def _with_constants(x):
    return (x * torch.tensor(3.0) + torch.tensor([1, 2, 3, 4]).float()).sin()


def test_tensor_constants_compile_through_torch_aot(monkeypatch):
    monkeypatch.setenv("COURSE_INDUCTOR_STRICT", "1")  # a fallback raises instead of running eager
    record: list = []
    compat.dynamo_reset()
    compiled = torch.compile(_with_constants, backend=functools.partial(ind.compile_fx, aot="torch", record=record))
    x = torch.randn(4, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_(True)
    out = compiled(x)
    out.sum().backward()
    ref = _with_constants(x_eager)
    ref.sum().backward()
    assert [kind for kind, _ in record] == ["compiled", "compiled"]  # forward and backward graphs
    assert torch.allclose(out, ref, atol=1e-6)
    assert torch.allclose(x.grad, x_eager.grad, atol=1e-6)
    # the forward graph really read the constants: they are inputs of the compiled graph
    forward = record[0][1]
    assert any(name.startswith("const_") for name in forward.graph.inputs)
