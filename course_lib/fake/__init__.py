"""course_lib.fake: fake tensors, shape rules and symbolic sizes with guards (teaches
torch/_subclasses/fake_tensor.py and torch/fx/experimental/symbolic_shapes.py).

API::

    FakeTensor(shape, dtype, stride, device)   fake(shape, dtype) -> contiguous FakeTensor
    ShapeEnv(duck=True)   .size(hint) .from_tensor(t, dynamic=dims) .guard_eq(a, b) .guards .specialised
    RULES / rule(op)      one shape rule per primitive
    propagate(graph, *fakes, env=None) -> (outputs, env)      sets node.meta["fake"]
    trace_dynamic(fn, *args, dynamic={0: (0,)}, duck=True) -> (graph, outputs, env)
    broadcast_shapes(env, a, b)
"""

from course_lib.fake.propagate import RULES, broadcast_shapes, propagate, rule, trace_dynamic
from course_lib.fake.tensor import FakeTensor, ShapeEnv, contiguous_strides, fake

__all__ = ["RULES", "FakeTensor", "ShapeEnv", "broadcast_shapes", "contiguous_strides", "fake", "propagate", "rule",
           "trace_dynamic"]  # fmt: skip
