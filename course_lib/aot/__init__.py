"""course_lib.aot: AOT Autograd in miniature (teaches torch/_functorch/aot_autograd.py and
torch/_functorch/partitioners.py).

Position: Python function --> joint forward+backward graph of primitives --> partition into a
forward graph and a backward graph --> compilers --> a torch.autograd.Function.

API::

    joint_graph(fn, *args, wrt=None) -> Joint        .graph .primals .tangents .outputs .forward
        .mutated (inputs written in place)  .grad_mutated (those whose new value takes a tangent)
    partition(joint, method="default" | "min_cut") -> Partition
        .forward .backward (Graphs)  .saved (names)  .saved_bytes  .recomputed (names)  .summary()
    aot_function(fn, fw_compiler=None, bw_compiler=None, partition_method="default") -> callable
    aot_compile(fn, args, fw_compiler=None, bw_compiler=None) -> torch.autograd.Function (no cache)
        a compiler is ``compiler(graph, example_inputs) -> callable``; None runs the graph's Python code
        a torch.autograd.Function that ``fn`` calls keeps its author's backward, with Dynamo or without
        (course_lib.aot.autograd_function: one custom op per call)
    functionalize(fn, *args) -> Functionalized  .fn (pure: outputs, then updated inputs) .mutated
        .before (ATen graph with its in-place ops) .graph(*args) (the functional one) .rewrites
    functionalize_graph(aten_graph, *args) -> Functionalized   the same rewrite of a graph traced already
    copy_back(args, updated, mutated)   the runtime epilogue: updated values into the real inputs
    DERIVATIVES / derivative(op) / vjp(op, grad, *args)   the derivative rules
    draw_joint(joint, part) -> picture with saved tensors and the cut highlighted
"""

from course_lib.aot.function import aot_compile, aot_function
from course_lib.aot.functionalize import (
    FUNCTIONAL_VARIANT,
    INVERSE_VIEW,
    Functionalized,
    copy_back,
    functionalize,
    functionalize_graph,
    lift_constants,
)
from course_lib.aot.joint import Joint, backward_pass, joint_graph
from course_lib.aot.partitioners import Partition, draw_joint, flow_network, partition, torch_saved
from course_lib.aot.rules import DERIVATIVES, derivative, sum_to, vjp

__all__ = ["DERIVATIVES", "FUNCTIONAL_VARIANT", "INVERSE_VIEW", "Functionalized", "Joint", "Partition", "aot_compile",
           "aot_function", "backward_pass", "copy_back", "derivative", "draw_joint", "flow_network", "functionalize",
           "functionalize_graph", "joint_graph", "lift_constants", "partition", "sum_to", "torch_saved", "vjp"]  # fmt: skip
