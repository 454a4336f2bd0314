"""PyTorch's ModuleInfo database (``torch.testing._internal.common_modules.module_db``: every
``torch.nn`` layer and loss with the inputs torch's own module tests use) through the course
backend, in training mode (and in eval where the two differ): the outputs, the gradients of the inputs and parameters, and the
buffers after the call (running statistics) against eager.

Each module's first sample input is compiled by ``torch.compile(backend=course_lib.inductor's
compile_fx)`` with course_lib.aot tracing forward and backward and the generated Python
executor running the kernels (the C++ and Triton code generators have their own tests). Every
graph must be compiled by the course: no fallback to eager, none to torch's AOT Autograd.
"""

from __future__ import annotations

import copy
import functools
import sys
from importlib import import_module
from pathlib import Path

import pytest
import torch
import torch.utils._pytree as pytree

sys.path.insert(0, str(Path(__file__).parent))
from opinfo_support import _same  # noqa: E402  (op_db's comparison: tolerances, NaN, output structure)

#: modules that give the backend nothing to compile, with why; checked to stay that way
NO_GRAPH = {
    "nn.RNN": "Dynamo runs the recurrent layers in eager (a graph break on their flattened weights)",
    "nn.GRU": "as nn.RNN",
    "nn.LSTM": "as nn.RNN",
    "nn.CTCLoss": "Dynamo hands over no graph",
    "nn.GaussianNLLLoss": "Dynamo hands over no graph (the variance check reads values)",
}
#: modules eager itself cannot compare: they draw random numbers per call
RANDOM = {"nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d"}


@functools.cache
def _infos() -> dict:
    from torch.testing._internal.common_modules import module_db

    return {info.name: info for info in module_db}


def _clone(x):
    return x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x


def _observe(module, inputs, fn) -> tuple:
    """Outputs, input and parameter gradients, and buffers after one call of ``fn`` (module or compiled)."""
    args = pytree.tree_map(_clone, list(inputs.args))
    kwargs = pytree.tree_map(_clone, dict(inputs.kwargs))
    out = fn(*args, **kwargs)
    outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    diff = [o for o in outs if o.grad_fn is not None]
    wrt = [t for t in pytree.tree_leaves([args, kwargs]) if isinstance(t, torch.Tensor) and t.requires_grad]
    wrt += [p for p in module.parameters() if p.requires_grad]
    grads = ()
    if diff and wrt:
        gen = torch.Generator().manual_seed(7)
        cotangents = [torch.randn(o.shape, generator=gen, dtype=o.dtype).to(o.device) for o in diff]
        grads = torch.autograd.grad(diff, wrt, cotangents, allow_unused=True)
    return [o.detach() for o in outs], list(grads), [b.detach().clone() for b in module.buffers()]


def _sample(name: str, device: str = "cpu", training: bool = True):
    info = _infos()[name]
    inputs = info.module_inputs_func(info, device=device, dtype=torch.float32, requires_grad=True, training=training)
    first = inputs[0]
    torch.manual_seed(0)
    module = info.module_cls(*first.constructor_input.args, **first.constructor_input.kwargs).to(device)
    module.train(training)
    if info.is_lazy:  # materialise the parameters once, so every copy starts from the same ones
        _observe(module, first.forward_input, module)
    return module, first.forward_input


def _names() -> list[str]:
    try:
        return sorted(set(_infos()) - RANDOM)
    except ImportError:  # a torch without its testing package
        return []


def compare(name: str, codegen: str = "python", device: str = "cpu", training: bool = True) -> tuple[str, list, int]:
    """The module's first sample compiled against eager: (what differs or '', fallbacks, graphs).
    ``device/module_db_gpu.py`` runs the same on a GPU with the Triton code generator."""
    compile_fx = import_module("course_lib.inductor.compile_fx").compile_fx
    module, inputs = _sample(name, device, training)
    eager_copy, compiled_copy = copy.deepcopy(module), copy.deepcopy(module)
    expected = _observe(eager_copy, inputs, eager_copy)
    record: list = []

    def backend(gm, example_inputs):
        record.append(("graph", None))
        return compile_fx(gm, example_inputs, codegen=codegen, record=record)

    torch._dynamo.reset()
    got = _observe(compiled_copy, inputs, torch.compile(compiled_copy, backend=backend))
    fallbacks = [f"{kind}: {what}" for kind, what in record if kind in ("fallback", "aot-fallback")]
    return _same(expected, got), fallbacks, sum(kind == "graph" for kind, _ in record)


def _cases() -> list:
    """Every module in training; in eval too where the two differ (batch norm's running statistics,
    attention's fast path, instance norm with tracked statistics)."""
    names = _names()
    evals = [n for n in names if _infos()[n].train_and_eval_differ]
    return [pytest.param(n, True, id=n) for n in names] + [pytest.param(n, False, id=f"{n}-eval") for n in evals]


@pytest.mark.parametrize("name, training", _cases())
def test_module_matches_eager(name, training):
    diff, fallbacks, graphs = compare(name, training=training)
    assert not diff, diff
    assert not fallbacks, fallbacks
    assert (graphs == 0) == (name in NO_GRAPH), f"{graphs} graphs; NO_GRAPH says {NO_GRAPH.get(name)!r}"
