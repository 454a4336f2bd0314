"""course_lib.dynamo: a small TorchDynamo you can read and step through (teaches
torch/_dynamo/symbolic_convert.py, output_graph.py, variables/, guards.py, eval_frame.py).

Position in the pipeline: Python function --> **dynamo** --> course_lib.fx Graphs (+ guards,
graph breaks) --> a backend (course_lib.aot / inductor, or a plain runner).

API::

    explain(fn, *args, **kwargs) -> ExplainOutput
        .graph_count .graph_break_count (= graph_count - 1, as torch defines it) .break_reasons
        .graphs (course_lib.fx.Graph) .guards (Guard: source, kind, expected; str() readable)
        .ops_per_graph .breaks (every break, BreakRecord) .captured (CapturedGraph) .out
    optimize(backend="eager", dynamic=None)(fn) -> OptimizedFunction   # backend(graph, example_inputs) -> callable
        .cache (CacheEntry with .guards, .dynamic) .recompile_reasons .calls ("compile"/"hit") .frames_seen
        .frame_state (FrameState: automatic dynamic, automatic_dynamic.py)
    graph_module_backend(compiler) -> backend   # compiler(gm, example_inputs), a torch-style backend;
        gm = to_graph_module(graph) carries gm.meta["course_dynamic_dims"] = {placeholder position: dims}
    capture(fn, args, kwargs=None, backend="eager") -> (result, OutputGraph)   (.traces, .steps per frame)
    step_table(fn, *args, limit=40) -> table: instruction | stack after it | graph size
    InstructionTranslator, HANDLED, opcode_coverage()                   symbolic_convert.py (opcode handlers)
    Unsupported                                                         exc.py
    OutputGraph, CapturedGraph, BreakRecord, graph_dynamic_dims()       output_graph.py
    Var kinds with their rules (TensorVar, ListVar, DictVar, ...), wrap()   variables/ (one module per family)
    Source                                                              source.py
    Guard (TENSOR_MATCH, SHAPE_ENV, ...)                                guards.py
    bytecode views: instructions(fn), dis_table(fn), show_dis(fn), code_fields(fn),
                    line_table(fn), frame_view(frame)                   bytecode.py
    compare_with_torch(fn, *args) -> dict of our / torch's counts       (uses compat.dynamo_explain)
    translator_with(OPNAME=handler, ...) -> InstructionTranslator subclass; pass it as
        explain(fn, *args, translator_cls=...) to run learner-written handlers

How graph breaks work here: the translator ends the graph before the breaking instruction,
runs the graph and then that instruction eagerly, and continues symbolically after it within
the same interpreter (no resume-function bytecode is generated; see symbolic_convert's
docstring). How PEP 523 is used: see eval_frame's docstring.
"""

from course_lib.dynamo.automatic_dynamic import FrameState
from course_lib.dynamo.bytecode import code_fields, dis_table, frame_view, instructions, line_table, show_dis
from course_lib.dynamo.eval_frame import (
    BACKENDS,
    BreakReason,
    CacheEntry,
    ExplainOutput,
    OptimizedFunction,
    capture,
    explain,
    graph_module_backend,
    optimize,
    run_frame,
    step_table,
    to_graph_module,
)  # fmt: skip
from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.guards import Guard
from course_lib.dynamo.output_graph import BreakRecord, CapturedGraph, OutputGraph, graph_dynamic_dims
from course_lib.dynamo.source import Source
from course_lib.dynamo.symbolic_convert import HANDLED, InstructionTranslator, opcode_coverage
from course_lib.dynamo.variables import wrap


def translator_with(**handlers) -> type:
    """A subclass of InstructionTranslator whose opcode handlers are replaced by ``handlers``
    (each ``handler(translator, inst)``): the hook a lab uses to run a learner's handler."""
    return type("LabTranslator", (InstructionTranslator,), {name: _as_method(h) for name, h in handlers.items()})


def _as_method(handler):
    def method(self, inst):
        return handler(self, inst)

    method.__name__ = getattr(handler, "__name__", "handler")
    return method


def compare_with_torch(fn, *args) -> dict:
    """Our graph/break counts next to ``torch._dynamo.explain``'s for the same call."""
    from course_lib import compat

    ours = explain(fn, *args)
    theirs = compat.dynamo_explain(fn, *args)
    compat.dynamo_reset()
    return {
        "ours": (ours.graph_count, ours.graph_break_count, len(ours.break_reasons)),
        "torch": (theirs.graph_count, theirs.graph_break_count, len(theirs.break_reasons)),
    }


__all__ = [
    "BACKENDS", "HANDLED", "BreakReason", "BreakRecord", "CacheEntry", "CapturedGraph", "ExplainOutput", "FrameState",
    "Guard", "InstructionTranslator", "OptimizedFunction", "OutputGraph", "Source", "Unsupported", "capture",
    "code_fields", "compare_with_torch", "dis_table", "explain", "frame_view", "graph_dynamic_dims",
    "graph_module_backend", "instructions", "line_table", "opcode_coverage", "optimize", "run_frame", "show_dis",
    "step_table", "to_graph_module", "translator_with", "wrap",
]  # fmt: skip
