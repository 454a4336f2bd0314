"""Entry points: capture a frame, cache it by its guards, recompile when a guard fails, and the
PEP 523 hook (teaches torch/_dynamo/eval_frame.py, convert_frame.py, and ExplainOutput in
torch/_dynamo/backends/debugging.py).

Position: ``optimize(backend)(fn)(*args)`` --> per call: check cached guards --> on a miss,
translate the frame (symbolic_convert) --> graphs handed to ``backend`` --> result.

PEP 523 lets a C extension replace CPython's frame evaluator; torch installs one and calls a
Python callback for every new frame (``torch._C._dynamo.eval_frame.set_eval_frame``, wrapped in
course_lib.compat). While an optimized function runs we install our callback and uninstall it
in a ``finally`` (so also on error). The callback records each user frame CPython starts (those
are the frames Dynamo would convert) and lets it run normally: handing a *transformed code
object* back to CPython needs the C++ guard managers of real Dynamo, which we do not rebuild.
Our translator handles ``fn`` and inlines or re-enters the functions it calls itself.

Cache: one list of entries per code object, each with the guards its capture installed. A call
whose inputs fail every entry's guards recompiles, and the failed guard is recorded
(``recompile_reasons``), as ``TORCH_LOGS=recompiles`` prints for the real thing. A hit
re-walks the bytecode with the entry's compiled graphs (no backend call); real Dynamo instead
runs the bytecode it generated. A recompile caused by a size change makes that dim dynamic
(automatic_dynamic.py), so the second size compiles once with a symbol and later sizes hit.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch

from course_lib import compat
from course_lib.dynamo.automatic_dynamic import FrameState
from course_lib.dynamo.guards import Guard
from course_lib.dynamo.output_graph import BreakRecord, CapturedGraph, OutputGraph, graph_dynamic_dims
from course_lib.dynamo.source import Source
from course_lib.dynamo.symbolic_convert import InstructionTranslator, frame_names, frame_unsupported
from course_lib.dynamo.variables import CellVar, wrap

# ----------------------------------------------------------------------------- backends


def eager_backend(graph, example_inputs):
    """Run the captured graph with course_lib.fx's Interpreter."""
    return graph


def python_backend(graph, example_inputs):
    """Generate Python from the graph and exec it (course_lib.fx.compile_graph)."""
    from course_lib import fx

    return fx.compile_graph(graph)


def to_graph_module(graph):
    """A real ``torch.fx.GraphModule`` of a captured graph, with
    ``gm.meta["course_dynamic_dims"] = {placeholder position: dynamic dims}`` (empty when static):
    the contract between course_lib.dynamo and a torch-style backend such as
    ``course_lib.inductor.compile_fx``."""
    from course_lib import fx

    gm = fx.to_torch_fx(graph)
    gm.meta["course_dynamic_dims"] = graph_dynamic_dims(graph)
    return gm


def graph_module_backend(compiler: Callable) -> Callable:
    """Wrap a torch-style backend ``compiler(gm, example_inputs)`` (a torch.compile backend such
    as ``course_lib.inductor.compile_fx``) so course_lib.dynamo can call it with its graphs."""

    def backend(graph, example_inputs):
        return compiler(to_graph_module(graph), example_inputs)

    backend.__name__ = getattr(compiler, "__name__", "graph_module_backend")
    return backend


def torch_fx_backend(graph, example_inputs):
    """Convert to a real ``torch.fx.GraphModule`` (with ``meta["course_dynamic_dims"]``) and run that."""
    return to_graph_module(graph)


BACKENDS = {"eager": eager_backend, "python": python_backend, "torch_fx": torch_fx_backend}


def lookup_backend(backend: str | Callable) -> Callable:
    if callable(backend):
        return backend
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {sorted(BACKENDS)} or pass a callable")
    return BACKENDS[backend]


# ----------------------------------------------------------------------------- frames


def split_callable(fn: Any, args: list) -> tuple[types.FunctionType, list]:
    """A function object and its positional arguments (``self`` first for methods and modules)."""
    if isinstance(fn, torch.nn.Module):
        return type(fn).forward, [fn] + list(args)
    if isinstance(fn, types.MethodType):
        return fn.__func__, [fn.__self__] + list(args)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"course_lib.dynamo can capture Python functions and nn.Modules, not {type(fn).__name__}")
    return fn, list(args)


def frame_locals(fn: Any, args: list, kwargs: dict) -> tuple[types.FunctionType, dict[str, Any]]:
    """The frame's ``f_locals`` at entry: bound arguments, plus the closure's free variables."""
    func, args = split_callable(fn, args)
    sig = inspect.signature(func, follow_wrapped=False)  # the frame is the wrapper's, not __wrapped__'s
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    # inspect calls a comprehension's ".0" argument "implicit0"; the frame uses co_varnames
    real = frame_names(sig, func.__code__)
    f_locals = {real.get(k, k): v for k, v in bound.arguments.items()}
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        f_locals[name] = cell.cell_contents
    return func, f_locals


def run_frame(fn: Any, args: list, kwargs: dict, output: OutputGraph) -> Any:
    """Translate one frame into ``output`` and return its (concrete) result."""
    func, f_locals = frame_locals(fn, args, kwargs)
    code = func.__code__
    problem = frame_unsupported(code)
    if problem is not None:  # Dynamo skips such a frame too (it runs without a graph)
        output.breaks.append(BreakRecord(problem, code.co_name, None, "frame"))
        return fn(*args, **kwargs)
    output.frames.append(code.co_name)
    sig = inspect.signature(func, follow_wrapped=False)
    local_vars = {}
    for pname, name in frame_names(sig, code).items():
        value = f_locals[name]
        if sig.parameters[pname].kind is inspect.Parameter.VAR_POSITIONAL:
            value = tuple(value)
        local_vars[name] = wrap(value, Source("L", name))
    cells = {name: CellVar(wrap(f_locals[name], Source("L", name)), real=cell)  # real: writes reach the caller
             for name, cell in zip(code.co_freevars, func.__closure__ or ())}  # fmt: skip
    translator_cls = getattr(output, "translator_cls", None) or InstructionTranslator
    translator = translator_cls(code, local_vars, func.__globals__, output, cells)
    nested = len(output.frames) > 1
    if nested:  # a frame entered at a graph break has its own guards (Dynamo: its own cache entry)
        outer_guards, output.guards = output.guards, {}
    try:
        result = translator.run()
    finally:
        if nested:
            output.nested_guards.extend(output.guards.values())
            output.guards = outer_guards
    output.traces = getattr(output, "traces", []) + [translator.trace]
    output.steps = getattr(output, "steps", []) + [translator.steps]
    return result.as_python()


# ----------------------------------------------------------------------------- results


@dataclasses.dataclass
class BreakReason:
    """Why a graph ended early (``GraphCompileReason`` in torch: ``reason``, ``user_stack``)."""

    reason: str
    frame: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.reason} (in {self.frame}, line +{self.line})"


@dataclasses.dataclass
class ExplainOutput:
    """The shape of ``torch._dynamo.explain(fn)(*args)``'s result.

    ``graph_break_count`` is defined as torch defines it: ``graph_count - 1`` (so -1 when nothing
    was captured). ``break_reasons`` lists the graphs that ended in a break, as torch does;
    ``breaks`` lists every break, including those with no graph before them.
    """

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list[BreakReason]
    guards: list[Guard]
    ops_per_graph: list[int]
    breaks: list[BreakRecord]
    captured: list[CapturedGraph]
    out: Any = None

    @property
    def op_count(self) -> int:
        return sum(self.ops_per_graph)

    @property
    def out_guards(self) -> list[Guard]:
        return self.guards

    def __str__(self) -> str:
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {self.op_count}",
        ]
        lines.append("Break Reasons:")
        for i, r in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}: {r}")
        lines.append("Ops per Graph:")
        for i, g in enumerate(self.captured, 1):
            ops = [n.name for n in g.graph.nodes if n.op.startswith("call_")]
            lines.append(f"  Graph {i} ({g.frame}): {', '.join(ops)}")
        lines.append("Guards:")
        lines.extend(f"  {g}" for g in self.guards)
        return "\n".join(lines)


def capture(fn: Any, args: tuple, kwargs: dict | None = None, backend: str | Callable = "eager",
            compiled_cache: dict | None = None, translator_cls: type | None = None,
            dynamic: dict[str, dict[int, str]] | None = None) -> tuple[Any, OutputGraph]:  # fmt: skip
    """Translate ``fn(*args)`` once: (result, OutputGraph with graphs, guards, breaks).

    ``translator_cls`` (a subclass of InstructionTranslator) is the hook a lab uses to plug in
    opcode handlers written by the learner. ``dynamic`` maps input sources (``"L['x']"``) to
    ``{dim: size symbol}`` (what automatic dynamic decided).
    """
    output = OutputGraph(lookup_backend(backend), compiled_cache, dynamic)
    output.translator_cls = translator_cls
    prior = compat.dynamo_set_eval_frame(_frame_logger(output))
    try:
        result = run_frame(fn, list(args), dict(kwargs or {}), output)
    finally:  # always uninstall the hook, also when the translated code raises
        compat.dynamo_set_eval_frame(prior)
    return result, output


def step_table(fn: Any, *args, limit: int = 40):
    """The first ``limit`` steps of capturing ``fn(*args)``: instruction, stack after it, and the
    graph's node count (a course_lib.viz table). Inlined calls show as one CALL step."""
    from course_lib import viz

    _, output = capture(fn, args)
    rows = [(ins, " | ".join(stack), nodes) for ins, stack, nodes in output.steps[0][:limit]]
    return viz.table(rows, headers=("instruction", "stack after (top right)", "graph nodes"))


def explain(fn: Any, *args, translator_cls: type | None = None, **kwargs) -> ExplainOutput:
    """Graphs, graph breaks and guards for ``fn(*args)`` (like ``torch._dynamo.explain(fn)(*args)``)."""
    result, output = capture(fn, args, kwargs, translator_cls=translator_cls)
    graphs = [g.graph for g in output.graphs]
    reasons = [BreakReason(g.reason, g.frame, g.line) for g in output.graphs if g.graph_break]
    return ExplainOutput(
        graphs=graphs, graph_count=len(graphs), graph_break_count=len(graphs) - 1, break_reasons=reasons,
        guards=list(output.guards.values()) + output.nested_guards, ops_per_graph=[g.op_count for g in output.graphs],
        breaks=list(output.breaks), captured=list(output.graphs), out=result,
    )  # fmt: skip


# ----------------------------------------------------------------------------- PEP 523 hook

_SKIP_FILES = ("torch", "course_lib", "python3.", "site-packages", "<frozen")


def _frame_logger(output: OutputGraph):
    """The PEP 523 callback: note user frames CPython starts, let them run normally."""
    run_normally = compat.dynamo_run_frame_normally()
    seen = output.__dict__.setdefault("frames_seen", [])

    def callback(frame, cache_entry, frame_state):
        filename = frame.f_code.co_filename
        if not any(part in filename for part in _SKIP_FILES):
            seen.append(frame.f_code.co_name)
        return run_normally

    return callback


@dataclasses.dataclass
class CacheEntry:
    guards: list[Guard]
    compiled_cache: dict
    graphs: list[CapturedGraph]
    dynamic: dict[str, dict[int, str]] = dataclasses.field(default_factory=dict)  # source -> {dim: symbol}

    def first_failure(self, f_locals: dict[str, Any]) -> str | None:
        for guard in self.guards:
            failure = guard.check(f_locals)
            if failure is not None:
                return failure
        return None


class OptimizedFunction:
    """``optimize(backend)(fn)``: a callable with a guard-keyed cache of captures."""

    def __init__(self, fn: Any, backend: str | Callable = "eager", dynamic: bool | None = None):
        if dynamic not in (None, True, False):
            raise ValueError(f"dynamic must be None (automatic), True or False, got {dynamic!r}")
        self.fn = fn
        self.backend = lookup_backend(backend)
        self.dynamic = dynamic  # None: automatic dynamic (torch's default); False: always static
        self.frame_state = FrameState(all_dynamic=dynamic is True)
        self.cache: list[CacheEntry] = []
        self.recompile_reasons: list[str] = []
        self.recompile_details: list[list[str]] = []
        self.calls: list[str] = []  # "compile" | "hit" per call
        self.frames_seen: list[str] = []

    def __call__(self, *args, **kwargs):
        _, f_locals = frame_locals(self.fn, list(args), kwargs)
        failures = []
        for entry in self.cache:
            failure = entry.first_failure(f_locals)
            if failure is None:
                result, output = capture(
                    self.fn, args, kwargs, self.backend, entry.compiled_cache, dynamic=entry.dynamic
                )
                self.calls.append("hit")
                self.frames_seen.extend(output.__dict__.get("frames_seen", []))
                return result
            failures.append(failure)
        if failures:  # one failure per cache entry; the first entry's is the one shown
            self.recompile_reasons.append(failures[0])
            self.recompile_details.append(failures)
        compiled_cache: dict = {}
        dynamic = self.frame_state.dynamic_dims(f_locals) if self.dynamic is not False else {}
        result, output = capture(self.fn, args, kwargs, self.backend, compiled_cache, dynamic=dynamic)
        guards = list(output.guards.values())
        self.cache.append(CacheEntry(guards, compiled_cache, list(output.graphs), output.dynamic))
        if self.dynamic is not False:
            self.frame_state.record(guards, f_locals)
        self.calls.append("compile")
        self.frames_seen.extend(output.__dict__.get("frames_seen", []))
        return result

    def __repr__(self) -> str:
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        return f"<optimized {name}: {len(self.cache)} cache entries>"


def optimize(backend: str | Callable = "eager", dynamic: bool | None = None) -> Callable[[Any], OptimizedFunction]:
    """``optimize(backend)(fn)`` like ``torch._dynamo.optimize`` / ``torch.compile(backend=...)``.

    ``backend(graph, example_inputs) -> callable`` gets a course_lib.fx Graph; the names
    "eager", "python" and "torch_fx" pick the backends defined here; wrap a torch-style backend
    (``gm, example_inputs``) with :func:`graph_module_backend`. ``dynamic`` as torch.compile's:
    None (default) is automatic dynamic, True makes every input dim a symbol from the first
    compile, False never does.
    """

    def decorate(fn):
        return OptimizedFunction(fn, backend, dynamic)

    return decorate
