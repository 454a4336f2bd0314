"""The torch.compile backend: Dynamo graph -> AOT Autograd -> lower -> fuse -> codegen -> call.

Teaches ``torch/_inductor/compile_fx.py`` (``compile_fx``: decompose and AOT-trace the Dynamo
graph, then ``compile_fx_inner`` on the forward and the backward graph separately) and
``torch/_inductor/graph.py`` (``GraphLowering.compile_to_module``).

``compile_fx(gm, example_inputs)`` is what ``torch.compile(model, backend=compile_fx)`` (or
``backend="course_lib"``) calls. A graph course_lib cannot compile runs in eager with the
reason logged on the ``course_lib.inductor`` logger; compilation never raises into the model.
Set ``COURSE_DEBUG=inductor`` to print every stage (pre-fusion IR, schedule, C++, wrapper).

Dynamic shapes, two ways in, one compile for many sizes (C++ backend; Triton refuses):

* real Dynamo (``torch.compile(f, backend="course_lib", dynamic=True)``, ``mark_dynamic``, or
  automatic dynamic on the second size) hands over a graph whose inputs have ``SymInt``
  sizes; torch's AOT Autograd traces it and :func:`compile_graph` lowers the fake inputs'
  symbolic sizes.
* course_lib.dynamo sets ``gm.meta["course_dynamic_dims"] = {input position: (dims...)}`` on a
  graph with real example inputs; :func:`compile_fx` traces it with those dims as size symbols
  (:func:`course_lib.compat.make_fx_dynamic`) and every other dim static.

The compiled ``call`` reads the symbols off its inputs, checks the static sizes and torch's
size guards (:attr:`CompiledGraph.guards`), and passes the sizes to the kernels (``ks0``).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from course_lib import env
from course_lib.inductor import fallbacks, interpret
from course_lib.inductor.async_compile import KernelCompileError
from course_lib.inductor.codegen import cpp, triton, wrapper
from course_lib.inductor.ir import GraphIR
from course_lib.inductor.lowering import Unsupported, lower
from course_lib.inductor.scheduler import Schedule, fuse, unfused

log = logging.getLogger("course_lib.inductor")


@dataclass
class CompiledGraph:
    """Every stage of one compiled graph, kept for display (Triton's ``kernel.asm`` idea)."""

    graph: GraphIR
    schedule: Schedule
    kernel_code: str  # C++ translation unit or Triton module source
    wrapper_code: str
    call: object
    codegen: str
    timings: dict = field(default_factory=dict)

    def __call__(self, *args):
        return self.call(list(args))

    @property
    def kernel_count(self) -> int:
        return sum(k.kind == "kernel" for k in self.schedule.kernels)

    def output_code(self) -> str:
        """Kernels then wrapper, the shape of Inductor's output code file."""
        return self.kernel_code + "\n\n# ---- wrapper ----\n" + self.wrapper_code

    @property
    def dynamic(self) -> bool:
        """True when compiled once for many sizes (some size is a symbol)."""
        return self.graph.dynamic

    @property
    def guards(self) -> list[str]:
        """What the call checks before running: each input's size, then torch's size guards."""
        g = self.graph
        out = [f"{name}.size() == {list(g.buffer(name).shape)}" for name in g.inputs if name not in g.scalar_inputs]
        return out + [str(e) for e in g.sizevars.guards]


#: From most to least fusion (``fusion=`` of :func:`compile_graph`).
FUSION_LADDER = ("greedy", "vertical", "unfused")

#: How many times a graph is scheduled again after Triton's compiler rejects a fused kernel. Each time
#: the rejected kernels' nodes are kept apart (one kernel each) and the rest is fused as before. Triton
#: 3.6 on the H100 stopped in ``TritonGPURemoveLayoutConversions`` on one 22-output fused kernel of Jamba
#: in bf16, and on its vertical-only version too; unfused, its nodes compiled.
REFUSION_ATTEMPTS = 4


def schedule_graph(graph: GraphIR, fusion: str = "greedy", apart=frozenset()) -> Schedule:
    if fusion == "unfused":
        return unfused(graph)
    return fuse(graph, vertical_only=(fusion == "vertical"), apart=apart)


def _device_of(gm, example_inputs):
    """The device the graph's kernels run on: the accelerator that an input or a value of the graph
    lives on, else the CPU. (Inputs alone are not enough: a graph with no tensor input, an attention
    mask built from ``ones`` and ``arange`` on ``device="cuda"``, ran on the CPU and handed the next
    graph a CPU mask.) Two accelerators in one graph are refused (:class:`Unsupported`)."""
    import torch

    values = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    values += [v for n in gm.graph.nodes if isinstance(v := n.meta.get("val"), torch.Tensor)]
    accelerators = {torch.device(t.device.type, t.device.index or 0) for t in values if t.device.type != "cpu"}
    if len(accelerators) > 1:
        raise Unsupported(f"a graph on several devices: {', '.join(sorted(map(str, accelerators)))}")
    return next(iter(accelerators), torch.device("cpu"))


#: codegen name -> ``build(kernels, graph) -> (source, {kernel name: callable}, pointer_args)``
#: (Inductor picks its backend per device in ``codegen/common.py``'s ``device_codegens``).
BACKENDS = {
    "cpp": cpp.build,  # one C++/OpenMP translation unit, gcc, ctypes
    "triton": triton.build,  # a Triton module (interpreted on CPU, compiled on a GPU)
    "python": interpret.backend,  # numpy reference executor, no compiler
}


def compile_graph(gm, example_inputs, fusion: str = "greedy", codegen: str | None = None,
                  size_guards=(), hints=None, keep_output_strides: bool = False) -> CompiledGraph:  # fmt: skip
    """Compile one ATen-level graph (what AOT Autograd hands ``fw_compiler``/``bw_compiler``).

    ``fusion``: ``unfused`` | ``vertical`` | ``greedy``; ``codegen``: a key of :data:`BACKENDS`
    (default C++ on CPU, Triton on CUDA). Raises :class:`Unsupported` when it cannot.
    ``example_inputs`` may be fake tensors with symbolic sizes (then ``size_guards``, torch's
    guards on those sizes, are checked on every call). ``keep_output_strides``: every output laid
    out with the strides of the graph's trace (``meta["val"]``), for a consumer traced with them
    (torch's AOT Autograd's backward graph reads the forward's saved tensors so; Inductor's
    ``keep_output_stride``).
    """
    t0 = time.perf_counter()
    device = _device_of(gm, example_inputs)
    codegen = codegen or ("triton" if device.type == "cuda" else "cpp")
    if codegen not in BACKENDS:
        raise ValueError(f"codegen must be one of {sorted(BACKENDS)}, got {codegen!r}")
    if fusion not in FUSION_LADDER:
        raise ValueError(f"fusion must be one of {', '.join(FUSION_LADDER)}, got {fusion!r}")
    if device.type not in ("cpu", "cuda"):
        raise Unsupported(f"device {device.type}")
    if codegen == "cpp" and device.type != "cpu":
        raise Unsupported("C++ kernels need CPU tensors")
    graph = lower(gm, example_inputs, size_guards, hints, keep_output_strides)
    t1 = time.perf_counter()
    if codegen == "triton" and graph.dynamic and any(b.kind in ("pointwise", "reduction") for b in graph.buffers):
        # the Triton generator needs numbers where a symbol stands: compile each size when it comes
        # (a graph of extern calls alone has no kernel to generate and takes symbolic sizes as it is)
        return SpecializingGraph(gm, graph, fusion, keep_output_strides)
    apart: frozenset = frozenset()
    for attempt in range(REFUSION_ATTEMPTS + 1):
        sched = schedule_graph(graph, fusion, apart)
        t2 = time.perf_counter()
        kernels = [k for k in sched.kernels if k.kind == "kernel"]
        try:
            source, fns, pointer_args = BACKENDS[codegen](kernels, graph)
            break
        except KernelCompileError as exc:  # a compiler bug met by a fused kernel: unfuse its nodes, or give up
            fused = {n for k in kernels if k.name in exc.kernels and len(k.nodes) > 1 for n in k.nodes}
            if not fused or attempt == REFUSION_ATTEMPTS:
                raise
            apart |= fused
            fallbacks.REPORT.note("less fusion", f"{len(fused)} nodes of a rejected kernel compiled unfused",
                                  str(exc).splitlines()[0])  # fmt: skip
    wsrc = wrapper.wrapper_source(sched, {k.name: k.name for k in kernels}, pointer_args=pointer_args)
    t3 = time.perf_counter()
    call = wrapper.make_call(wsrc, fns, device, graph.sizevars)
    out = CompiledGraph(
        graph, sched, source, wsrc, call, codegen, {"lower": t1 - t0, "schedule": t2 - t1, "codegen+build": t3 - t2}
    )
    if env.debug("inductor"):
        print(
            f"# ---- ir_pre_fusion ----\n{graph}\n# ---- schedule ----\n{sched}\n# ---- output code ----\n{out.output_code()}"
        )
    return out


class SpecializingGraph:
    """A graph with size symbols for a code generator that compiles static sizes only (the course's
    Triton path): at each call, the graph compiled for these inputs' sizes, from a cache keyed by the
    sizes, or retraced by ``make_fx`` with them (no kernel runs while tracing) and compiled. Dynamo
    keeps one graph for all sizes (no recompilation there); the kernels are compiled per size, as if
    ``dynamic=False``. (Inductor's Triton kernels take the sizes as arguments instead: ``ks0``, masks.)

    Attributes of a :class:`CompiledGraph` come from the latest size compiled (after a first call).
    A size that fails to compile runs in eager, with the reason in the fallback report."""

    def __init__(self, gm, graph: GraphIR, fusion: str, keep_output_strides: bool = False):
        self.gm, self.symbolic, self.fusion, self.keep_output_strides = gm, graph, fusion, keep_output_strides
        self.compiled: dict = {}  # input sizes -> CompiledGraph, or None (that size runs in eager)
        self.latest: CompiledGraph | None = None

    @property
    def dynamic(self) -> bool:
        return True

    def __call__(self, *args):
        import torch

        from course_lib import compat

        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if key not in self.compiled:
            where = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

            def with_sizes(*ts):  # the size arguments (SymInt inputs) become constants of this size's graph
                full = list(args)
                for i, t in zip(where, ts, strict=True):
                    full[i] = t
                return self.gm(*full)

            try:
                static = compat.make_fx(with_sizes, *tensors, tracing_mode="fake")
                self.compiled[key] = compile_graph(static, tensors, fusion=self.fusion, codegen="triton",
                                                   keep_output_strides=self.keep_output_strides)  # fmt: skip
            except Exception as exc:  # never crash the user's model: this size runs in eager
                _give_up(exc, "fallback", "one size of a dynamic graph runs in eager", None)
                self.compiled[key] = None
        compiled = self.compiled[key]
        if compiled is None:
            with torch.no_grad():
                return self.gm(*args)
        self.latest = compiled
        return compiled(*tensors)

    def call(self, args: list):
        """The boxed call (a list of arguments), as :attr:`CompiledGraph.call`."""
        return self(*args)

    def __getattr__(self, name):
        if name in ("gm", "symbolic", "fusion", "compiled", "latest") or self.latest is None:
            raise AttributeError(f"{name} (a SpecializingGraph has compiled no size yet)")
        return getattr(self.latest, name)


def _boxed(fn):
    fn._boxed_call = True
    return fn


def _give_up(exc: Exception, kind: str, what: str, record: list | None) -> None:
    """Log and record why a graph leaves the course pipeline (re-raise under COURSE_INDUCTOR_STRICT=1)."""
    if os.environ.get("COURSE_INDUCTOR_STRICT") == "1":
        raise exc
    reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
    fallbacks.REPORT.note(kind, what, reason)  # logged once per reason, listed by fallback_report()
    if record is not None:
        record.append((kind, reason))


def _compile_or_eager(gm, example_inputs, fusion, codegen, record, keep_output_strides: bool = False):
    """Compile one graph, or return ``None`` after logging why it runs in eager instead."""
    try:
        if codegen == "triton" and not env.triton_interpreted() and _device_of(gm, example_inputs).type == "cpu":
            # compiled Triton kernels take GPU pointers; they would be refused at the first launch
            raise Unsupported("compiled Triton kernels need CUDA tensors (TRITON_INTERPRET=1 runs them on the CPU)")
        compiled = compile_graph(gm, example_inputs, fusion=fusion, codegen=codegen,
                                 keep_output_strides=keep_output_strides)  # fmt: skip
    except Exception as exc:  # never crash the user's model: run this graph in eager
        _give_up(exc, "fallback", "graph runs in eager", record)
        return None
    if record is not None:
        record.append(("compiled", compiled))
    return compiled


def inner_compiler(fusion: str = "greedy", codegen: str | None = None, record: list | None = None):
    """``compile_fx_inner`` for torch's AOT Autograd: compile one graph, or run it in eager.

    A tensor the model makes from Python numbers (``torch.tensor(3.0)``) reaches the graph as a
    ``get_attr`` of a constant (``_tensor_constant0``, read by ``lift_fresh_copy``). Lowering
    knows only inputs, so the constants become extra inputs first and every call appends them,
    as Inductor does when it turns constants into graph inputs (``GraphLowering.constants``).
    """

    def compiler(gm, example_inputs):
        from course_lib import aot

        gm, consts = aot.lift_constants(gm)  # get_attr constants -> placeholders at the end
        # torch's AOT traced the graph that reads these outputs (its backward) with the trace's strides
        compiled = _compile_or_eager(gm, [*example_inputs, *consts], fusion, codegen, record, keep_output_strides=True)
        if compiled is None:  # LongT5's backward, traced for sizes its eager run does not see: reshape, not view
            _views_as_reshapes(gm)

            def eager(args):
                return gm(*args, *consts)

            return _boxed(eager)
        call = compiled.call
        if compiled.dynamic:  # its size-guard check runs first, before any side effect
            return _boxed(_eager_past_guards(call, gm, consts))
        if not consts:

            def run(args):
                return call(args)

            return _boxed(run)

        def run_with_constants(args):
            return call([*args, *consts])

        return _boxed(run_with_constants)

    return compiler


def _eager_past_guards(call, gm, consts):
    """``call`` of a graph compiled for symbolic sizes, and the graph in eager for a call whose sizes
    break a guard the compiled code relies on (a size of 1 where it assumed at least 2). Dynamo's own
    guards do not see every such size: Longformer hands one over as an int that reaches 1, where a
    tensor's dimension would have made Dynamo compile again."""
    from course_lib.inductor.codegen.wrapper import SizeGuardError

    def run(args):
        try:
            return call([*args, *consts])
        except SizeGuardError as exc:
            fallbacks.REPORT.note("fallback", "a call past the size guards runs in eager", str(exc))
            return gm(*args, *consts)

    return run


def _views_as_reshapes(gm) -> None:
    """``aten.view`` -> ``aten.reshape`` in ``gm``: a graph traced for torch's layouts, run on
    tensors a course-compiled graph produced (its own strides; a saved activation of the forward)."""
    import torch

    for node in gm.graph.nodes:
        if node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
    gm.recompile()


def course_aot_compiler(fusion: str = "greedy", codegen: str | None = None, record: list | None = None):
    """A compiler for ``course_lib.aot``: the whole course pipeline end to end.

    course_lib.aot hands over a course_lib.fx Graph of primitives (the backward one without
    example inputs), so the graph is converted to torch.fx, re-traced on the first call's real
    arguments to get shapes (``node.meta["val"]``), then compiled here.
    """

    def compiler(graph, example_inputs):
        from course_lib import aot, compat, fx

        gm = fx.to_torch_fx(graph)
        _views_as_reshapes(gm)  # the real inputs may be laid out unlike the trace's
        cache = {}

        def run(*args):
            if "fn" not in cache:
                traced = compat.make_fx(gm, *args)
                traced.graph.eliminate_dead_code()  # make_fx adds getitem for unused (None) outputs
                traced.recompile()
                traced, consts = aot.lift_constants(traced)  # tensor constants become inputs
                compiled = _compile_or_eager(traced, [*args, *consts], fusion, codegen, record) or traced
                cache["fn"] = lambda *a: compiled(*a, *consts)
            return cache["fn"](*args)

        return run

    return compiler


def _mutates(graph) -> list[str]:
    """In-place ATen ops in a traced graph (``add_``, ``copy_``...): state course_lib.aot would drop."""
    return [
        n.name
        for n in graph.nodes
        if n.op == "call_function" and getattr(getattr(n.target, "_schema", None), "is_mutable", False)
    ]


def _course_aot(gm, example_inputs, fusion, codegen, record):
    """Dynamo graph -> course_lib.aot (joint graph, partition) -> course_lib.inductor, both graphs.

    In inference (no input needs a gradient, or grad mode off) only the forward graph is traced
    and compiled, as AOT Autograd's inference path does.
    """
    import torch

    from course_lib import aot, compat, decomp

    args = list(example_inputs)
    if not all(isinstance(a, torch.Tensor) for a in args):
        raise Unsupported("non-tensor graph inputs (symbolic sizes)")
    dynamic_dims = getattr(gm, "meta", {}).get("course_dynamic_dims")
    if dynamic_dims:
        return _compile_dynamic(gm, args, dynamic_dims, fusion, codegen, record)
    if not (torch.is_grad_enabled() and any(a.requires_grad for a in args)):
        # in-place updates (running statistics) become extra outputs, copied back after the call
        func = aot.functionalize(gm, *args)
        # one trace with the course's table: ATen primitives, shapes in node.meta["val"]
        forward = compat.make_fx(func.fn, *args, decompositions=decomp.DECOMPOSITIONS)
        forward, consts = aot.lift_constants(forward)  # tensor constants (masks, tables) become inputs
        compiled = _compile_or_eager(forward, [*args, *consts], fusion, codegen, record) or forward
        n, mutated = func.num_outputs, func.mutated
        if not mutated and not consts:
            return compiled

        def run_and_copy_back(*a):
            outs = compiled(*a, *consts)
            aot.copy_back(a, outs[n:], mutated)
            return tuple(outs[:n])

        return run_and_copy_back
    comp = course_aot_compiler(fusion, codegen, record)
    compiled = aot.aot_compile(gm, args, comp, comp)
    lent = [("borrowed", op, "decomposed with torch._decomp's entry") for op in compiled.joint.borrowed]
    lent += [("formula", op, "differentiated by torch's autograd formula") for op in compiled.joint.formulas]
    for kind, op, how in lent:  # what torch lent where the course has no rule or entry of its own
        log.info("course_lib.aot: %s %s (no course rule)", op, how)
        if record is not None:
            record.append((kind, str(op)))
    return compiled.run


def _compile_dynamic(gm, args, dynamic_dims: dict, fusion, codegen, record):
    """course_lib.dynamo's contract: trace with the marked dims as size symbols, compile once.

    Inference only (no input needs a gradient): the forward graph is traced on fake inputs whose
    marked dims are symbols, and its C++ is compiled for every size of those dims. With
    gradients, torch's AOT Autograd traces the same fake inputs and both graphs are compiled.
    """
    import torch

    from course_lib import compat, decomp

    bad = {p: d for p, d in dynamic_dims.items() if not (0 <= p < len(args) and isinstance(args[p], torch.Tensor))}
    if bad:
        raise ValueError(f"course_dynamic_dims names inputs that are not tensors: {bad} ({len(args)} inputs)")
    if torch.is_grad_enabled() and any(a.requires_grad for a in args):
        raise Unsupported("dynamic dims with gradients: course_lib.aot traces static sizes only")
    traced, fakes, shape_env = compat.make_fx_dynamic(gm, args, dynamic_dims, decomp.DECOMPOSITIONS)
    mutated = _mutates(traced.graph)
    if mutated:
        raise Unsupported(f"the graph mutates tensors in place ({', '.join(mutated[:3])})")
    try:
        compiled = compile_graph(traced, fakes, fusion=fusion, codegen=codegen,
                                 size_guards=compat.shape_env_guards(shape_env))  # fmt: skip
    except Exception as exc:
        _give_up(exc, "fallback", "graph runs in eager", record)
        return gm.forward
    if record is not None:
        record.append(("compiled", compiled))
    return compiled


def compile_dynamic(fn, *args, dynamic: dict | None = None, fusion: str = "greedy") -> CompiledGraph:
    """The all-course path with symbolic sizes: course_lib.decomp traces ``fn`` to primitives,
    course_lib.fake propagates fake inputs whose ``dynamic`` dims (``{arg index: dims}``, default
    dim 0 of argument 0) are size symbols, and this package compiles the graph once, for every
    size of those dims, with course_lib.fake's guards checked on each call.
    """
    from course_lib import fake, fx

    dynamic = {0: (0,)} if dynamic is None else dynamic
    graph, _, shape_env = fake.trace_dynamic(fn, *args, dynamic=dynamic, duck=False)
    fakes = [n.meta["fake"] for n in graph.nodes if n.op == "placeholder"]
    for node in graph.nodes:  # lowering reads each node's value description from meta["val"]
        if "fake" in node.meta:
            node.meta["val"] = node.meta["fake"]
    baked = _baked_sizes(graph, shape_env.hints)
    if baked:
        raise Unsupported(
            f"course_lib.decomp traced real sizes, and {baked} holds the example size of a dynamic dim as a "
            "constant (e.g. mean's divisor): it would be wrong for other sizes. Use compile_fx (torch's trace "
            "keeps sizes symbolic) or example sizes that appear nowhere else"
        )
    gm = fx.to_torch_fx(graph)
    return compile_graph(gm, fakes, fusion=fusion, codegen="cpp", size_guards=shape_env.guards,
                         hints=shape_env.hints)  # fmt: skip


def _baked_sizes(graph, hints: dict) -> str | None:
    """The first node whose number arguments include a dynamic dim's example size (or a product
    of them): course_lib.decomp traces with real tensors, so such a number is a size baked in."""
    import itertools
    import math

    values = {math.prod(c) for r in range(1, len(hints) + 1) for c in itertools.combinations(hints.values(), r)}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        flat = [x for a in node.args for x in (a if isinstance(a, (list, tuple)) else [a])]
        if any(isinstance(a, (int, float)) and not isinstance(a, bool) and a in values for a in flat):
            return f"node {node.name} ({node.target})"
    return None


def _symbolic_inputs(example_inputs) -> bool:
    """Did Dynamo hand over symbolic sizes (``dynamic=True``, ``mark_dynamic``, automatic dynamic)?"""
    import torch

    for a in example_inputs:
        if isinstance(a, torch.SymInt):
            return True
        if isinstance(a, torch.Tensor) and not all(isinstance(s, int) for s in a.shape):
            return True
    return False


def compile_fx(gm, example_inputs, fusion: str = "greedy", codegen: str | None = None, record: list | None = None,
               aot: str = "course"):  # fmt: skip
    """A torch.compile backend: ``torch.compile(model, backend=compile_fx)``.

    ``aot="course"`` (default) traces the forward and backward graphs with course_lib.aot (its
    derivative rules and partitioner) and compiles both with :func:`compile_graph`. A graph it
    cannot trace (an op without a derivative rule, an in-place update of a buffer) goes through
    torch's AOT Autograd with Inductor's decompositions instead, the reason logged and recorded
    as ``("aot-fallback", reason)``; ``aot="torch"`` always takes that path. ``record``, when
    given, collects one entry per graph: ``("compiled", CompiledGraph)`` or ``("fallback", reason)``.
    """
    from course_lib import compat

    if aot not in ("course", "torch"):
        raise ValueError(f"aot must be 'course' or 'torch', got {aot!r}")
    if aot == "course" and _symbolic_inputs(example_inputs):
        log.info("course_lib.inductor: symbolic sizes from Dynamo, traced by torch's AOT Autograd")
        aot = "torch"  # course_lib.aot traces real tensors; torch's keeps the SymInts
    if aot == "course":
        try:
            return _course_aot(gm, example_inputs, fusion, codegen, record)
        except Exception as exc:
            _give_up(exc, "aot-fallback", "course_lib.aot cannot take this graph, using torch's", record)
    inner = inner_compiler(fusion, codegen, record)
    try:
        return compat.inductor_aot_module(gm, example_inputs, inner, inner, compat.inductor_decomposition_table())
    except Exception as exc:  # AOT tracing (or a graph's compilation inside it) failed: the Dynamo graph runs in eager
        if os.environ.get("COURSE_INDUCTOR_STRICT") == "1":
            raise
        fallbacks.REPORT.note("fallback", "AOT tracing failed, graph runs in eager", str(exc).splitlines()[0])
        if record is not None:
            record.append(("fallback", f"aot: {exc}".splitlines()[0]))
        return gm.forward


def compile_with_course_aot(fn, fusion: str = "greedy", codegen: str | None = None, record: list | None = None):
    """``course_lib.aot.aot_function(fn)`` with course_lib.inductor compiling both graphs."""
    from course_lib import aot

    comp = course_aot_compiler(fusion, codegen, record)
    return aot.aot_function(fn, fw_compiler=comp, bw_compiler=comp)
