"""The one place that touches private torch and triton APIs.

Courses that reach into compiler internals break when those internals move (Triton's
interpreter, llvmlite's pass manager and torch's private modules have all moved between
releases). Every such use in course_lib goes through a function here, and each function has a
test in ``tests/test_compat*.py`` that fails with a message naming the API when an upgrade
breaks it. The course runs on two stacks: torch 2.13 / triton 3.9 (Python 3.11, CPU) and
torch 2.11 / triton 3.6 (Python 3.12, the H200 machine); differences are absorbed here.

Rules: import lazily inside each function (``import course_lib`` must stay cheap), and raise
:class:`CompatError` with the API's name when something is missing.
"""

from __future__ import annotations

import importlib
import re


class CompatError(RuntimeError):
    """A private torch/triton API the course relies on is missing or changed."""


def require(module: str, attr: str | None = None):
    """Import ``module`` (and fetch ``attr``), or raise CompatError naming what is missing."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised only on a broken install
        raise CompatError(f"course_lib needs the module {module!r}, which failed to import: {exc}") from exc
    if attr is None:
        return mod
    try:
        return getattr(mod, attr)
    except AttributeError as exc:
        raise CompatError(
            f"course_lib needs {module}.{attr}, which this version does not have "
            f"(it may have moved in an upgrade); see course_lib/compat.py"
        ) from exc


# ---------------------------------------------------------------------------
# platform (tour notebook, doctor)
# ---------------------------------------------------------------------------


def dynamo_reset() -> None:
    """Forget every frame Dynamo compiled (``torch._dynamo.reset``), so a demo starts cold."""
    require("torch._dynamo", "reset")()


def dynamo_explain(fn, *args, **kwargs):
    """``torch._dynamo.explain(fn)(*args)``: graphs, graph breaks and guards of the real Dynamo.

    The result has ``graphs``, ``graph_count``, ``graph_break_count``, ``break_reasons`` and
    ``out_guards``. Dynamo is reset first so earlier cells do not change the answer.
    """
    dynamo_reset()
    return require("torch._dynamo", "explain")(fn)(*args, **kwargs)


_OBJ_ID = __import__("re").compile(r"___check_obj_id\((.*?), \d+\)")


def guard_summary(guard) -> tuple[str, str, tuple[str, ...]]:
    """``(source, what is guarded, checks)`` for one Dynamo guard, without object ids.

    ``torch._guards.Guard`` carries the guarded name, its source (LOCAL, GLOBAL, SHAPE_ENV...),
    the guard builder's name (TENSOR_MATCH, ID_MATCH, ...) and the Python check code.
    """
    source = require("torch._guards", "GuardSource")
    if not isinstance(guard.source, source):
        raise CompatError("torch._guards.Guard.source is no longer a GuardSource; update compat.guard_summary")
    kind = guard.create_fn_name() if callable(getattr(guard, "create_fn_name", None)) else str(guard.create_fn)
    code = tuple(_OBJ_ID.sub(r"___check_obj_id(\1, <id>)", c) for c in (guard.code_list or ()))
    name = guard.name or "(global state)"
    return f"{guard.source.name} {name}", kind, code


def aot_graphs(fn, args, decompositions=None):
    """Run ``fn`` through AOT Autograd once (forward and backward) and return the two FX graphs.

    Uses ``torch._functorch.aot_autograd.aot_function`` with compilers that only record the
    graph module they are given. ``decompositions`` is a decomposition table (or None).
    """
    aot_function = require("torch._functorch.aot_autograd", "aot_function")
    make_boxed = require("torch._functorch.aot_autograd", "make_boxed_func")
    captured = {}

    def recorder(name):
        def compiler(gm, example_inputs):
            captured[name] = gm
            return make_boxed(gm.forward)

        return compiler

    compiled = aot_function(
        fn, fw_compiler=recorder("forward"), bw_compiler=recorder("backward"), decompositions=decompositions
    )
    out = compiled(*args)
    (out if out.dim() == 0 else out.sum()).backward()
    return captured["forward"], captured.get("backward")


def core_aten_decompositions():
    """The decomposition table Inductor starts from (``torch._decomp.core_aten_decompositions``)."""
    return require("torch._decomp", "core_aten_decompositions")()


def inductor_decompositions():
    """The table Inductor decomposes with (``torch._inductor.decomposition.select_decomp_table``).

    It is core ATen's table plus Inductor's own entries (GELU into erf, for example).
    """
    return require("torch._inductor.decomposition", "select_decomp_table")()


def make_fx(fn, *args, decompositions=None, tracing_mode: str = "real"):
    """Trace ``fn`` to an ATen-level FX graph (``torch.fx.experimental.proxy_tensor.make_fx``);
    ``tracing_mode="fake"`` runs no kernel (the inputs' sizes and dtypes are all it reads). A real
    tensor ``fn`` holds itself (not an argument) is a constant of the fake trace, whose values it may
    read (make_fx's ``_allow_non_fake_inputs``)."""
    import torch

    tracer = require("torch.fx.experimental.proxy_tensor", "make_fx")
    if tracing_mode != "fake":
        return tracer(fn, decomposition_table=decompositions or {}, tracing_mode=tracing_mode)(*args)
    # a FakeTensorMode of its own: make_fx's "fake" would join the one of a Dynamo compile under way,
    # and a size symbol made here (a value read, s86) would then reach Dynamo's guards, which fail
    mode = require("torch._subclasses.fake_tensor", "FakeTensorMode")(
        allow_non_fake_inputs=True, shape_env=require("torch.fx.experimental.symbolic_shapes", "ShapeEnv")(),
        static_shapes=True)  # fmt: skip
    fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
    with mode:
        return tracer(fn, decomposition_table=decompositions or {}, tracing_mode="real")(*fakes)


def inductor_output_code(fn, *args):
    """Compile ``fn`` with Inductor, run it, and return ``(result, [output code, ...])``.

    ``torch._inductor.utils.run_and_get_code`` captures the Python wrapper module Inductor
    writes, with the generated C++ (CPU) or Triton (GPU) kernels inside it.
    """
    import torch

    run_and_get_code = require("torch._inductor.utils", "run_and_get_code")
    dynamo_reset()
    return run_and_get_code(torch.compile(fn, backend="inductor"), *args)


# ---------------------------------------------------------------------------
# triton (Module 3)
# ---------------------------------------------------------------------------


def triton_ast_source(kernel, signature: dict, constexprs: dict | None = None, divisible_by_16=()):
    """``triton.compiler.ASTSource`` for ``kernel`` with constexprs given by argument name.

    Triton 3.3+ keys constants by ``(argument index,)`` tuples internally; 3.9 also accepts
    names, 3.6 needs the tuples. We always pass tuples so both stacks agree. ``kernel`` may be
    the interpreter's wrapper (see :func:`triton_jit_function`).
    """
    ast_source = require("triton.compiler", "ASTSource")
    fn = triton_jit_function(kernel)
    names = list(fn.arg_names)
    consts = {}
    for key, value in (constexprs or {}).items():
        if isinstance(key, str):
            if key not in names:
                raise CompatError(f"constexpr {key!r} is not an argument of {fn.__name__}{tuple(names)}")
            key = (names.index(key),)
        consts[key] = value
    # attrs: what the JIT's specialisation would attach for 16-byte aligned pointers and
    # integers divisible by 16 (``tt.divisibility``), keyed by (argument index,).
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in divisible_by_16}
    return ast_source(fn=fn, signature=dict(signature), constexprs=consts, attrs=attrs)


def triton_metadata_dict(compiled) -> dict:
    """``CompiledKernel.metadata`` as a plain dict (a dict in 3.9, a namedtuple in older releases)."""
    md = compiled.metadata
    if isinstance(md, dict):
        return dict(md)
    if hasattr(md, "_asdict"):
        return dict(md._asdict())
    return {k: getattr(md, k) for k in dir(md) if not k.startswith("_")}


def triton_nvidia_tool(name: str) -> str:
    """Path of ``cuobjdump`` / ``nvdisasm`` / ``ptxas`` shipped in ``triton/backends/nvidia/bin``."""
    import pathlib

    triton = require("triton")
    path = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if not path.exists():
        raise CompatError(f"triton no longer ships {name} in triton/backends/nvidia/bin")
    return str(path)


def triton_libdevice():
    """The libdevice math module kernels call (``libdevice.tanh(x)``, ``libdevice.erf(x)``).

    Triton 3.x exposes a backend-neutral ``triton.language.extra.libdevice`` that resolves to
    ``triton.language.extra.cuda.libdevice`` (or the HIP one) when the kernel compiles, and to numpy
    in the interpreter; older releases only had ``tl.math`` for some of these.
    """
    try:
        from triton.language.extra import libdevice
    except ImportError as exc:
        raise CompatError(f"triton.language.extra.libdevice is gone ({exc}); see compat.triton_libdevice") from None
    return libdevice


def triton_interpreter_scoped_device_calls() -> bool:
    """Make the interpreter undo its ``triton.language`` patches after a device-function call.

    In ``triton/runtime/interpreter.py`` (3.9) ``InterpretedFunction.__call__`` (a call of one
    jit function from another, e.g. ``tl.cdiv`` or ``tl.max`` from ``triton/language/standard.py``)
    runs ``_patch_lang(self.fn)`` and never restores it, so after the first interpreted launch
    ``tl.core`` stays patched and the real compiler (``triton.compile``) fails in the same
    process. We wrap the call so the returned ``_LangPatchScope`` is restored. Returns True when
    installed (idempotent); False when this Triton has no such scope (nothing to fix).
    """
    interp = require("triton.runtime.interpreter")
    cls = require("triton.runtime.interpreter", "InterpretedFunction")
    if getattr(cls.__call__, "_course_scoped", False):
        return True
    if not hasattr(interp, "_LangPatchScope") or not hasattr(interp, "_patch_lang"):
        return False
    error = getattr(interp, "InterpreterError", RuntimeError)

    def __call__(self, *args, **kwargs):
        scope = interp._patch_lang(self.fn)
        try:
            return self.rewrite()(*args, **kwargs)
        except Exception as e:
            raise error(repr(e)) from e
        finally:
            if hasattr(scope, "restore"):
                scope.restore()

    __call__._course_scoped = True
    cls.__call__ = __call__
    return True


def triton_language_namespaces() -> list[dict]:
    """The globals of ``triton.language`` and its submodules that are imported (``tl.sum`` lives in
    ``triton/language/standard.py``)."""
    import sys

    return [vars(m) for name, m in list(sys.modules.items())
            if m is not None and (name == "triton.language" or name.startswith("triton.language."))]  # fmt: skip


def swap_triton_functions(spaces: list[dict], old: type, new: type) -> list[tuple]:
    """Replace every value of exactly type ``old`` in the namespaces ``spaces`` (a ``JITFunction``, an
    interpreter's ``InterpretedFunction``) by ``new(value.fn)``, the other wrapper of the same Python
    function; one new object per old one, so a helper exported under two names stays one object.
    Returns ``(space, name, old value)`` for each change, to put back."""
    made: dict[int, object] = {}
    changes = []
    for space in spaces:
        for name, val in list(space.items()):
            if type(val) is old:
                if id(val) not in made:
                    made[id(val)] = new(val.fn)
                changes.append((space, name, val))
                space[name] = made[id(val)]
    return changes


def triton_compile_scope(kernel):
    """Context manager: let ``triton.compile`` see real JITFunctions while the interpreter is on.

    Under ``TRITON_INTERPRET=1`` every ``@triton.jit`` in ``triton/language/standard.py``
    (``tl.max``, ``tl.sum``, ``tl.cdiv``...) and in the kernel's module is an
    ``InterpretedFunction``, which the code generator (``triton/compiler/code_generator.py``,
    ``visit_Call``) would call as plain Python. For the duration of a compile we replace each
    such attribute of the ``triton.language`` modules and of the kernel's globals with a
    ``JITFunction`` of the same Python function, and put them back afterwards
    (:func:`course_lib.env.interpret_triton_language` is the same swap, the other way, for good).
    """
    import contextlib

    jit_function = require("triton.runtime.jit", "JITFunction")
    try:
        interpreted = require("triton.runtime.interpreter", "InterpretedFunction")
    except CompatError:
        interpreted = None

    @contextlib.contextmanager
    def scope():
        if interpreted is None:
            yield
            return
        fn = getattr(kernel, "fn", kernel)
        spaces = [*triton_language_namespaces(), getattr(fn, "__globals__", {})]
        changes = swap_triton_functions(spaces, interpreted, jit_function)
        try:
            yield
        finally:
            for space, name, val in reversed(changes):
                space[name] = val

    return scope()


def triton_language_patched() -> bool:
    """True when the interpreter's ``triton.language`` patches leaked into this process.

    ``_patch_attr`` in ``triton/runtime/interpreter.py`` replaces builtins with lambdas keeping
    the original as the keyword default ``member``; seeing one outside a launch means an
    interpreted device-function call ran before :func:`triton_interpreter_scoped_device_calls`
    was installed, and ``triton.compile`` cannot run in this process any more.
    """
    tl = require("triton.language")
    probes = (tl.core.program_id, tl.core.arange, getattr(tl.core.tensor, "__add__", None), tl.program_id)
    return any("member" in (getattr(p, "__kwdefaults__", None) or {}) for p in probes)


def triton_memory_hook(on_access):
    """Context manager: call ``on_access(kind, ptrs, mask, grid_idx)`` on every interpreted load/store/atomic.

    Patches ``InterpreterBuilder.create_masked_load`` / ``create_masked_store`` of the global
    ``triton.runtime.interpreter.interpreter_builder`` (unmasked ``create_load``/``create_store``
    go through them). ``ptrs`` are int64 addresses, ``mask`` a bool array (same shape).
    ``on_access`` returns the mask to use (it may switch lanes off, e.g. out-of-bounds ones).
    """
    import contextlib

    interp = require("triton.runtime.interpreter")
    builder_cls = require("triton.runtime.interpreter", "InterpreterBuilder")
    for name in ("create_masked_load", "create_masked_store"):
        if not hasattr(builder_cls, name):
            raise CompatError(f"triton.runtime.interpreter.InterpreterBuilder.{name} is gone")
    tensor_handle = require("triton.runtime.interpreter", "TensorHandle")

    @contextlib.contextmanager
    def hooked():
        orig_load, orig_store = builder_cls.create_masked_load, builder_cls.create_masked_store

        def load(self, ptrs, mask, other, *args):
            m = on_access("load", ptrs.data, mask.data, tuple(self.grid_idx))
            return orig_load(self, ptrs, tensor_handle(m, mask.dtype), other, *args)

        def store(self, ptrs, value, mask, *args):
            m = on_access("store", ptrs.data, mask.data, tuple(self.grid_idx))
            return orig_store(self, ptrs, value, tensor_handle(m, mask.dtype), *args)

        # atomics (tl.atomic_add/max/xchg..., tl.atomic_cas) are recorded as kind "atomic" where
        # this Triton has them; cas takes no mask, so its out-of-bounds lanes cannot be switched off
        orig_rmw = getattr(builder_cls, "create_atomic_rmw", None)
        orig_cas = getattr(builder_cls, "create_atomic_cas", None)

        def rmw(self, op, ptrs, val, mask, *args):
            m = on_access("atomic", ptrs.data, mask.data, tuple(self.grid_idx))
            return orig_rmw(self, op, ptrs, val, tensor_handle(m, mask.dtype), *args)

        def cas(self, ptrs, cmp, val, *args):
            on_access("atomic", ptrs.data, True, tuple(self.grid_idx))
            return orig_cas(self, ptrs, cmp, val, *args)

        builder_cls.create_masked_load, builder_cls.create_masked_store = load, store
        if orig_rmw is not None and orig_cas is not None:
            builder_cls.create_atomic_rmw, builder_cls.create_atomic_cas = rmw, cas
        try:
            yield interp
        finally:
            builder_cls.create_masked_load, builder_cls.create_masked_store = orig_load, orig_store
            if orig_rmw is not None and orig_cas is not None:
                builder_cls.create_atomic_rmw, builder_cls.create_atomic_cas = orig_rmw, orig_cas

    return hooked()


def triton_tensor_descriptor():
    """``triton.tools.tensor_descriptor.TensorDescriptor``: a host-side TMA descriptor argument.

    Triton 3.4+ (3.6 on the H200, 3.9 here). On sm_90 the launcher encodes it as a 128-byte
    ``CUtensorMap`` kernel parameter; the interpreter reads it as a strided view. Older Triton had
    ``triton.tools.experimental_descriptor`` with another interface, which the course does not use.
    """
    return require("triton.tools.tensor_descriptor", "TensorDescriptor")


def triton_kernel_resources(compiled) -> dict:
    """Shared memory (bytes), registers per thread and spill bytes of a launched kernel.

    ``JITFunction.__getitem__(grid)(...)`` returns the ``CompiledKernel``; ``n_regs`` and
    ``n_spills`` are filled when its module is loaded on the GPU (``_init_handles``), ``shared``
    sits in its metadata (a dict in 3.9, a namedtuple in 3.6).
    """
    md = triton_metadata_dict(compiled)
    init = getattr(compiled, "_init_handles", None)
    if callable(init):
        init()
    return {"shared": md.get("shared"), "registers": getattr(compiled, "n_regs", None),
            "spills": getattr(compiled, "n_spills", None)}  # fmt: skip


# ---------------------------------------------------------------------------
# dynamo / fx (Module 4, part 1)
# ---------------------------------------------------------------------------


def dynamo_set_eval_frame(callback):
    """Install ``callback`` as the PEP 523 frame-evaluation hook; returns the previous one.

    ``torch._C._dynamo.eval_frame.set_eval_frame`` (used by torch/_dynamo/eval_frame.py). Pass
    None to uninstall. The callback is called as ``callback(frame, cache_entry, frame_state)``
    and must return :func:`dynamo_run_frame_normally`'s value.
    """
    return require("torch._C._dynamo.eval_frame", "set_eval_frame")(callback)


def dynamo_run_frame_normally():
    """What a hook callback returns to let CPython run the frame unchanged (and keep calling the
    hook for this code object and for the frames it calls).

    torch >= 2.6: ``ConvertFrameReturn(FrameExecStrategy(SKIP, DEFAULT), apply_to_code=False)``
    from torch/_dynamo/types.py; older torch accepted None.
    """
    types = require("torch._dynamo.types")
    if not hasattr(types, "ConvertFrameReturn"):
        return None
    strategy = types.FrameExecStrategy(types.FrameAction.SKIP, types.FrameAction.DEFAULT)
    return types.ConvertFrameReturn(frame_exec_strategy=strategy, apply_to_code=False)


# ---------------------------------------------------------------------------
# aot / decomp / fake (Module 4, part 2)
# ---------------------------------------------------------------------------


def torch_decomposition(op):
    """torch's own decomposition of ``op`` (``torch._decomp.decomposition_table``), or None."""
    return require("torch._decomp", "decomposition_table").get(op)


def torch_partition(gm, joint_inputs, num_fwd_outputs: int, method: str = "min_cut"):
    """Partition a joint GraphModule with torch's partitioner; returns (forward gm, backward gm).

    ``method``: "min_cut" (``min_cut_rematerialization_partition``, what Inductor uses) or
    "default" (``default_partition``), both from ``torch._functorch.partitioners``.
    """
    name = {"min_cut": "min_cut_rematerialization_partition", "default": "default_partition"}[method]
    fn = require("torch._functorch.partitioners", name)
    return fn(gm, joint_inputs, num_fwd_outputs=num_fwd_outputs)


def torch_symbolic_trace(fn, *args):
    """``make_fx(fn, tracing_mode="symbolic")``: every input size becomes a SymInt (duck-sized).

    Returns ``(graph module, shape env)``; the env's ``guards`` and ``var_to_val`` are what
    torch/fx/experimental/symbolic_shapes.py recorded while tracing.
    """
    tracer = require("torch.fx.experimental.proxy_tensor", "make_fx")
    gm = tracer(fn, tracing_mode="symbolic")(*args)
    env = None
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for size in getattr(val, "shape", ()):
            if hasattr(size, "node"):
                env = size.node.shape_env
                break
        if env is not None:
            break
    if env is not None and not hasattr(env, "guards"):
        raise CompatError("torch ShapeEnv has no .guards list any more; update compat.torch_symbolic_trace")
    return gm, env


# ---------------------------------------------------------------------------
# inductor (Module 4, part 3)
# ---------------------------------------------------------------------------


def inductor_decomposition_table():
    """Inductor's decomposition table, with ``torch._inductor.lowering`` imported first.

    Some entries (max-pool with indices) consult ``torch._inductor.lowering`` while tracing and
    fail with an AttributeError unless that module has been imported.
    """
    require("torch._inductor.lowering")
    return inductor_decompositions()


def inductor_aot_module(gm, example_inputs, fw_compiler, bw_compiler, decompositions):
    """``torch._functorch.aot_autograd.aot_module_simplified``: what Inductor's compile_fx runs.

    The compilers receive the forward and the backward ATen graph; they return boxed callables.
    """
    aot = require("torch._functorch.aot_autograd", "aot_module_simplified")
    return aot(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler, decompositions=decompositions)


def register_dynamo_backend(name, compiler_fn) -> None:
    """Make ``torch.compile(backend=name)`` find ``compiler_fn`` (Dynamo's backend registry).

    Installed packages can also declare the backend in the ``torch_dynamo_backends``
    entry-point group, which ``torch._dynamo.backends.registry`` reads lazily.
    """
    registry = require("torch._dynamo.backends.registry")
    if name in getattr(registry, "_COMPILER_FNS", {}):
        return
    # torch.compile(backend=name) in a fresh process finds the name through the entry point first,
    # imports the package (which calls us), then registers what it loaded itself: registering here
    # as well would make torch raise "duplicate name". Leave that path to the registry.
    pending = getattr(registry, "_BACKENDS", {}).get(name)
    if pending is not None and hasattr(pending, "load"):
        return
    registry.register_backend(compiler_fn=compiler_fn, name=name)


# Inductor's output code, parsed in one place: its layout (``name = async_compile.cpp_pybinding(
# [...], r'''<C++>''')``, ``def call(args)`` or ``Runner.call(self, args)``) changes between torch
# releases, so every reader (tour, debugtools, cpu.inductor_view) goes through these functions.
_INDUCTOR_KERNEL = re.compile(
    r"^(?P<name>\w+) = async_compile\.(?P<kind>cpp_pybinding|cpp|triton)\((?P<args>.*?)r?'''(?P<src>.*?)'''",
    re.M | re.S,
)
_INDUCTOR_EXTERN = re.compile(r"extern_kernels\.(\w+)\(")


def inductor_code_kernels(code: str) -> list[tuple[str, str, str]]:
    """``(name, kind, source)`` of every kernel defined in an Inductor output-code module, in
    order; ``kind`` is ``cpp_pybinding`` / ``cpp`` (C++) or ``triton``, ``source`` the kernel's code."""
    return [(m["name"], m["kind"], m["src"].strip("\n")) for m in _INDUCTOR_KERNEL.finditer(code)]


def inductor_code_externs(code: str) -> list[str]:
    """Library calls the wrapper makes instead of generated code (``extern_kernels.addmm`` -> ``addmm``)."""
    return _INDUCTOR_EXTERN.findall(code)


def inductor_code_wrapper_call(code: str) -> str:
    """The body of the wrapper's ``call``: allocations, extern calls, kernel launches (``""`` if none)."""
    m = re.search(r"\n    def call\(self, args\):\n(.*?)(?=\n\S|\nrunner = )", code, re.S)
    if m is None:
        m = re.search(r"\ndef call\(args\):\n(.*?)(?=\n\S)", code, re.S)
    return m.group(1).rstrip() if m else ""


def inductor_output_code_with_config(fn, *args, **config):
    """Like :func:`inductor_output_code`, with ``torch._inductor.config`` patched (e.g. fusion off)."""
    patch = require("torch._inductor.config", "patch")
    with patch(**config):
        return inductor_output_code(fn, *args)


# symbolic sizes for course_lib.inductor (dynamic shapes): SymInt internals and a symbolic trace


def symint_expr(value):
    """The sympy expression behind a ``torch.SymInt`` (``SymNode.expr``, replacements applied),
    or the int itself."""
    if isinstance(value, int):
        return value
    return value.node.expr


def symint_hint(value) -> int:
    """The example value of a ``torch.SymInt`` (``symbolic_shapes.hint_int``)."""
    if isinstance(value, int):
        return value
    return int(require("torch.fx.experimental.symbolic_shapes", "hint_int")(value))


def symbol_hints(values) -> dict:
    """``{sympy symbol: example value}`` for every size symbol in ``values`` (SymInts), read
    from their ShapeEnv (``ShapeEnv.var_to_val``)."""
    out = {}
    for v in values:
        if isinstance(v, int):
            continue
        env = v.node.shape_env
        values = getattr(env, "backed_var_to_val", None)  # torch 2.13's name; var_to_val before
        values = env.var_to_val if values is None else values
        for s in v.node.expr.free_symbols:
            if s in values:
                out[s] = int(values[s])
    return out


def traced_as_variable(t) -> bool:
    """Whether the active ``make_fx`` trace holds tensor ``t`` as a value of the graph (an input or
    computed from one), not as a constant (``torch.tensor([1, 2])`` made inside the traced function,
    whose values do not change from call to call). False outside a trace."""
    proxy_tensor = require("torch.fx.experimental.proxy_tensor")
    mode = proxy_tensor.get_proxy_mode()
    if mode is None:
        return False
    slot = proxy_tensor.get_proxy_slot(t, mode.tracer, None)
    if slot is None:
        return False
    seen, stack = set(), [slot.proxy.node]  # computed from a placeholder, or from constants only
    while stack:
        node = stack.pop()
        if node.op == "placeholder":
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return False


def is_fake(t) -> bool:
    """Whether ``t`` is a FakeTensor (sizes and dtype, no values: ``torch._subclasses.fake_tensor``)."""
    return require("torch._subclasses.fake_tensor", "is_fake")(t)


def outside_trace():
    """A context in which the active ``make_fx`` trace records nothing (tensors are their plain
    values): for a trace of its own inside it (``proxy_tensor.disable_proxy_modes_tracing``)."""
    return require("torch.fx.experimental.proxy_tensor", "disable_proxy_modes_tracing")()


def make_fx_dynamic(gm, args, dynamic_dims: dict, decompositions=None):
    """Trace ``gm`` to ATen with the dims in ``dynamic_dims`` (``{arg position: dims}``) as size
    symbols and every other dim static, as Dynamo does after ``mark_dynamic``.

    Builds fake inputs in a ``FakeTensorMode`` with its own ``ShapeEnv`` (no duck sizing: two
    marked dims of equal size still get two symbols), then runs ``make_fx`` on them, as AOT
    Autograd traces Dynamo's fake inputs. Returns ``(traced GraphModule, fake args, ShapeEnv)``.
    """
    import torch

    fake_tensor = require("torch._subclasses.fake_tensor")
    shapes = require("torch.fx.experimental.symbolic_shapes")
    make_fx = require("torch.fx.experimental.proxy_tensor", "make_fx")
    shape_env = shapes.ShapeEnv(duck_shape=False)
    mode = fake_tensor.FakeTensorMode(shape_env=shape_env)
    fakes = []
    for pos, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            fakes.append(a)
            continue
        dims = {d % max(a.dim(), 1) for d in dynamic_dims.get(pos, ())}
        kinds = [shapes.DimDynamic.DYNAMIC if d in dims else shapes.DimDynamic.STATIC for d in range(a.dim())]
        context = shapes.StatelessSymbolicContext(dynamic_sizes=kinds)
        fakes.append(mode.from_tensor(a, symbolic_context=context))
    with mode:
        traced = make_fx(gm, decomposition_table=decompositions or {})(*fakes)
    return traced, fakes, shape_env


def shape_env_guards(shape_env) -> list:
    """The size guards a trace recorded (``ShapeEnv.guards``), as sympy booleans."""
    return [g.expr for g in getattr(shape_env, "guards", ())]


# ---------------------------------------------------------------------------
# debugging, dynamic shapes, export (Module 4, part 4: notebooks 04d, 04e; course_lib.debugtools)
# ---------------------------------------------------------------------------


def torch_set_logs(**settings) -> None:
    """``torch._logging.set_logs(**settings)``: the in-process spelling of ``TORCH_LOGS``.

    Each keyword is an artifact (``graph_breaks=True``, ``recompiles=True``, ``guards=True``,
    ``bytecode=True``, ``output_code=True``) or a component with a level. Called with no
    arguments it restores the default (warnings only). Handlers write to ``sys.stderr`` as it
    is when this is called, which is how course_lib.debugtools captures them.
    """
    require("torch._logging", "set_logs")(**settings)


def dynamo_mark_dynamic(tensor, dim: int, **kwargs) -> None:
    """``torch._dynamo.mark_dynamic(tensor, dim)``: compile ``dim`` as a size symbol from the start."""
    require("torch._dynamo", "mark_dynamic")(tensor, dim, **kwargs)


def dynamo_config_patch(**settings):
    """``torch._dynamo.config.patch(**settings)`` (``capture_scalar_outputs``,
    ``capture_dynamic_output_shape_ops``, ``automatic_dynamic_shapes``...), a context manager."""
    config = require("torch._dynamo", "config")
    unknown = [k for k in settings if not hasattr(config, k)]
    if unknown:
        raise CompatError(f"torch._dynamo.config has no {unknown}; see compat.dynamo_config_patch")
    return config.patch(**settings)


def aoti_compile_and_package(exported_program, package_path: str) -> str:
    """``torch._inductor.aoti_compile_and_package``: AOTInductor, an ExportedProgram to a ``.pt2``."""
    return require("torch._inductor", "aoti_compile_and_package")(exported_program, package_path=package_path)


def aoti_load_package(package_path: str):
    """``torch._inductor.aoti_load_package``: load a ``.pt2`` and return a callable runner."""
    return require("torch._inductor", "aoti_load_package")(package_path)


# ---------------------------------------------------------------------------
# gpu (Module 5)
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# cpu (Module 6)
# ---------------------------------------------------------------------------


def inductor_run_and_get_code(fn, *args, **kwargs):
    """Run ``fn(*args)`` under ``torch.compile`` (Inductor) and return ``(result, [source, ...])``.

    Wraps ``torch._inductor.utils.run_and_get_code``, which records every output-code module
    Inductor writes (on CPU: a Python wrapper holding the C++ kernels as strings).
    ``torch._dynamo.reset()`` first, so the code is generated now rather than reused from an
    earlier compile of the same function in this process.
    """
    import torch

    run_and_get_code = require("torch._inductor.utils", "run_and_get_code")
    require("torch._dynamo", "reset")()
    return run_and_get_code(torch.compile(fn, **kwargs), *args)


# ---------------------------------------------------------------------------
# llvm (Module 2)
# ---------------------------------------------------------------------------


def triton_jit_function(kernel):
    """The ``triton.runtime.jit.JITFunction`` behind ``kernel``, for ``triton.compile``.

    Under ``TRITON_INTERPRET=1`` (no GPU) ``@triton.jit`` returns the interpreter's wrapper,
    which ``ASTSource`` cannot hash; its ``.fn`` (an interpreter internal) is the Python
    function, which we wrap in a real JITFunction.
    """
    import inspect

    jit_function = require("triton.runtime.jit", "JITFunction")
    for _ in range(8):  # @triton.autotune / @triton.heuristics wrap the jit function in their own .fn
        if isinstance(kernel, jit_function):
            return kernel
        fn = getattr(kernel, "fn", None)
        if fn is None:
            raise CompatError("triton's interpreted kernel has no .fn any more: see compat.triton_jit_function")
        if inspect.isfunction(fn):
            return jit_function(fn)
        kernel = fn
    raise CompatError(f"{kernel!r} is not a @triton.jit kernel (nor autotune/heuristics around one)")


# ---------------------------------------------------------------------------
# explore (issue 22): provenance from the real stack
# ---------------------------------------------------------------------------


def fx_node_origins(node, roots: bool = True) -> list[tuple[str, int]]:
    """``(name, graph id)`` of the nodes ``node`` came from (``node.meta["from_node"]``).

    torch records a chain of ``torch.fx.traceback.NodeSource`` (a post-grad node came from an
    AOT node, which came from a Dynamo node); the roots of the chain are the Dynamo graph's nodes.
    ``roots=False`` gives the nearest links of the chain instead (the graph traced just before).
    """
    found, todo = [], list(node.meta.get("from_node") or ())
    if not roots:
        for src in todo:
            if not hasattr(src, "name"):
                raise CompatError(
                    "node.meta['from_node'] no longer holds NodeSource objects; see compat.fx_node_origins"
                )
        return list(dict.fromkeys((src.name, src.graph_id) for src in todo))
    roots_ = found
    while todo:
        src = todo.pop(0)
        if not hasattr(src, "name"):
            raise CompatError(
                "node.meta['from_node'] no longer holds NodeSource objects; update compat.fx_node_origins"
            )
        parents = getattr(src, "from_node", None) or []
        if parents:
            todo.extend(parents)
        elif (src.name, src.graph_id) not in roots_:
            roots_.append((src.name, src.graph_id))
    return roots_


def fx_trace_keeping_meta(gm, args, decompositions=None):
    """``make_fx`` of ``gm`` node by node, each new ATen node keeping the meta of the node it came
    from (``stack_trace``, ``from_node``): ``torch.fx.traceback.preserve_node_meta`` around an
    ``fx.Interpreter``, as AOT Autograd traces Dynamo's graph."""
    import torch.fx

    preserve = require("torch.fx.traceback", "preserve_node_meta")
    tracer = require("torch.fx.experimental.proxy_tensor", "make_fx")
    with preserve():
        return tracer(torch.fx.Interpreter(gm).run, decomposition_table=decompositions or {})(*args)


def dynamo_bytecode_hook(record: list):
    """Context manager: append ``(original code, Dynamo's transformed code)`` for every frame Dynamo
    compiles (``torch._dynamo.convert_frame.register_bytecode_hook``)."""
    import contextlib

    register = require("torch._dynamo.convert_frame", "register_bytecode_hook")

    @contextlib.contextmanager
    def scope():
        handle = register(lambda code, new_code: record.append((code, new_code)))
        try:
            yield record
        finally:
            handle.remove()

    return scope()


def inductor_run_with_provenance(run, *args):
    """Run ``run(*args)`` (which calls torch.compile'd code) with Inductor recording provenance.

    Returns ``(result, codes, graphs, kernels)``: the output-code module of each compile (what
    ``run_and_get_code`` collects, through ``GraphLowering.save_output_code``), the post-grad ATen
    graph of each compile (``config.post_grad_custom_post_pass``, a ``CustomGraphPass`` that only
    records), and for each compile ``{kernel name: [post-grad node names]}``: Inductor's kernel
    origins (``config.trace.provenance_tracking_level``), read while that compile's tables are live.
    The FX graph cache is off so every pass runs; compiled C++ is still reused from its cache.
    """
    from unittest import mock

    import torch

    patch = require("torch._inductor.config", "patch")
    base = require("torch._inductor.custom_graph_pass", "CustomGraphPass")
    lowering = require("torch._inductor.graph", "GraphLowering")
    debug = require("torch._inductor.debug")
    name = "_inductor_triton_kernel_to_post_grad_node_info"
    if not hasattr(debug, name):
        raise CompatError(f"torch._inductor.debug.{name} is gone; update compat.inductor_run_with_provenance")
    graphs, codes, kernels, seen = [], [], [], set()

    class Recorder(base):
        def __call__(self, graph):
            graphs.append(graph)

        def uuid(self):
            return None

    def save_output_code(code):
        table = dict(getattr(debug, name))
        codes.append(code)
        kernels.append({k.rsplit(":", 1)[0]: list(v) for k, v in table.items() if k not in seen})
        seen.update(table)

    config = {"post_grad_custom_post_pass": Recorder(), "trace.provenance_tracking_level": 1, "fx_graph_cache": False}
    with patch(config), mock.patch.object(lowering, "save_output_code", save_output_code):
        torch._dynamo.reset()
        result = run(*args)
    return result, codes, graphs, kernels


def inductor_compile_fx():
    """``torch._inductor.compile_fx.compile_fx``: the function ``backend="inductor"`` names."""
    return require("torch._inductor.compile_fx", "compile_fx")


def inductor_fast_math_flags() -> list[str]:
    """The ``-f...`` list Inductor's C++ builder passes for "fast math" on Linux/macOS, in order
    (``torch/_inductor/cpp_builder.py``, ``_get_ffast_math_flags``; it reads ``config.cpp``)."""
    return ["-" + flag for flag in require("torch._inductor.cpp_builder", "_get_ffast_math_flags")()]


# ---------------------------------------------------------------------------
# triton's MLIR bindings and pass list (03c: running the passes one at a time)
# ---------------------------------------------------------------------------


def triton_ir():
    """``triton._C.libtriton.ir``: Triton's nanobind bindings of MLIR (context, module, operation,
    block, region, value, pass_manager), the objects ``triton/compiler/compiler.py`` passes around."""
    return require("triton._C.libtriton", "ir")


def triton_backend_and_context(target):
    """``(backend, context)`` for a ``GPUTarget``: ``make_backend`` and an MLIR context with Triton's
    and the backend's dialects loaded, as ``triton.compile`` sets them up."""
    make_backend = require("triton.compiler.compiler", "make_backend")
    ir = triton_ir()
    backend = make_backend(target)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    return backend, context


def triton_codegen(kernel, source, target, backend, options, context):
    """The module ``code_generator.ast_to_ttir`` builds from the kernel's Python AST (before any pass).

    ``ASTSource.make_ir(target, options, codegen_fns, module_map, context)`` in 3.6 and 3.9; older
    releases had no ``target`` argument. Runs inside :func:`triton_compile_scope` so the
    interpreter's wrappers do not reach the code generator.
    """
    import inspect

    params = list(inspect.signature(source.make_ir).parameters)
    codegen_fns = backend.get_codegen_implementation(options)
    module_map = backend.get_module_map() if hasattr(backend, "get_module_map") else {}
    with triton_compile_scope(kernel):
        if params and params[0] == "target":
            return source.make_ir(target, options, codegen_fns, module_map, context)
        return source.make_ir(options, codegen_fns, module_map, context)


class _StopRecording(Exception):
    """Raised by the recording pass manager's ``run``: the stage's pass list is complete."""


def triton_stage_pass_calls(backend, method: str, module, options, capability: int):
    """The passes a backend stage (``make_ttir``, ``make_ttgir``, ``make_llir``) adds, without running them.

    The stage is a Python method that builds an ``ir.pass_manager``, calls
    ``passes.<group>.add_<name>(pm, *args)`` once per pass (some under ``if capability ...``) and runs
    it. We call a copy of that method whose globals ``ir``, ``passes`` and ``nvidia`` are recorders:
    every ``add_`` call is written down with its evaluated arguments, and the first ``pm.run`` stops
    the method (what follows it, e.g. LLVM translation in ``make_llir``, is not a pass). Nothing of
    triton is patched. Returns ``(calls, run_args)``: ``calls`` are ``(group, name, args)`` with
    ``group`` like ``"passes.ttgpuir"`` or ``"nvidia.passes.ttnvgpuir"``; ``run_args`` what
    ``pm.run`` received after the module (``("make_ttgir",)`` in 3.9).
    """
    import types

    cls = type(backend)
    if not hasattr(cls, method):
        raise CompatError(f"{cls.__name__} has no stage method {method!r} in this Triton (see compat.py)")
    fn = _plain_function(getattr(cls, method))
    calls: list[tuple[str, str, tuple]] = []
    run_args: list[tuple] = []
    real_ir = triton_ir()

    class _PassManager:
        def enable_debug(self):
            return False

        def run(self, mod, *args):
            run_args.append(args)
            raise _StopRecording

        def __getattr__(self, name):
            return lambda *a, **k: None

    class _Group:
        def __init__(self, path):
            self._path = path

        def __getattr__(self, name):
            if name.startswith("add_"):
                return lambda pm, *args: calls.append((self._path, name[4:], tuple(args)))
            return _Group(f"{self._path}.{name}")

    class _IR:
        def __getattr__(self, name):
            if name == "pass_manager":
                return lambda *a: _PassManager()
            return getattr(real_ir, name)

    scope = dict(fn.__globals__)
    scope.update(ir=_IR(), passes=_Group("passes"), nvidia=types.SimpleNamespace(passes=_Group("nvidia.passes")))
    if "amd" in scope:
        scope["amd"] = types.SimpleNamespace(passes=_Group("amd.passes"))
    copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    args = (module, {}, options, capability)
    try:
        copy(*args) if isinstance(_class_attribute(cls, method), staticmethod) else copy(backend, *args)
    except _StopRecording:
        pass
    return calls, (run_args[0] if run_args else (method,))


def _plain_function(fn):
    """The plain function behind a staticmethod / bound method."""
    return getattr(fn, "__func__", fn)


def _class_attribute(cls, name: str):
    """The raw class attribute (``staticmethod`` object or function), looked up along the MRO."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def triton_pass_adder(group: str, name: str):
    """The binding ``triton._C.libtriton.<group>.add_<name>``, or CompatError listing what this Triton has."""
    obj = require("triton._C", "libtriton")
    for part in group.split("."):
        if not hasattr(obj, part):
            raise CompatError(f"this Triton has no pass group {group!r} (triton._C.libtriton.{group})")
        obj = getattr(obj, part)
    adder = getattr(obj, f"add_{name}", None)
    if adder is None:
        have = sorted(a[4:] for a in dir(obj) if a.startswith("add_"))
        raise CompatError(f"this Triton has no pass {group}.add_{name}; {group} has: {', '.join(have)}")
    return adder


def triton_run_pass(context, module, group: str, name: str, args: tuple, run_args: tuple = ()) -> None:
    """Run one pass on ``module`` in place: a fresh ``ir.pass_manager`` holding only that pass."""
    pm = triton_ir().pass_manager(context)
    triton_pass_adder(group, name)(pm, *args)
    pm.run(module, *run_args)


# ----------------------------------------------------------------------------- Triton: compile a launch's specialisation elsewhere


def triton_capture_specialization(kernel, args: tuple, kwargs: dict) -> str | None:
    """What ``kernel[grid](*args, **kwargs)`` would compile, as Triton's own JSON (signature,
    constexprs, ``tt.divisibility`` attrs, options, target), without compiling it.

    ``args`` may hold ``torch.dtype`` for tensors (``JITFunction.warmup`` turns them into
    ``MockTensor``s, 16-byte aligned as real allocations are). Uses ``knobs.runtime.jit_cache_hook``
    (called before every compile with ``specialization_data``) and returns True from it, so nothing is
    compiled. Needs the GPU driver (the target is the current device). None when this Triton has no hook.
    """
    try:
        knobs = importlib.import_module("triton.knobs")
    except ImportError:
        return None
    if not hasattr(knobs.runtime, "jit_cache_hook"):
        return None
    seen: list = []

    def hook(*_, compile=None, **__):
        seen.append((compile or {}).get("specialization_data"))
        return True  # skip the compile: the pool does it

    old = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = hook
    try:
        triton_jit_function(kernel).warmup(*args, grid=(1,), **kwargs)
    finally:
        knobs.runtime.jit_cache_hook = old
    return _with_target(seen[0]) if seen else None


def _with_target(spec: str) -> str:
    """Triton 3.9's ``serialize_specialization_data`` writes the ``target`` the JIT compiles for;
    3.6's (``name, signature, constants, attrs, options, key``) has no target argument and writes
    none. The JIT compiles for the current device's target, so add that one where it is missing."""
    import dataclasses
    import json

    d = json.loads(spec)
    if "target" not in d:
        target = require("triton.runtime", "driver").active.get_current_target()
        d["target"] = dataclasses.asdict(target) if dataclasses.is_dataclass(target) else dict(vars(target))
        spec = json.dumps(d)
    return spec


def triton_compile_specialization(kernel, spec: str):
    """``triton.compile`` of ``kernel`` for a specialisation from :func:`triton_capture_specialization`
    (the body of ``JITFunction.preload``, minus the device): no GPU needed, and the result lands in
    Triton's cache under the key the launch will look up. Returns the ``CompiledKernel``."""
    import json

    triton = require("triton")
    gpu_target = require("triton.backends.compiler", "GPUTarget")
    d = json.loads(spec)
    if d.get("constant_vals") and any(isinstance(v, dict) for v in d["constant_vals"]):
        raise CompatError("a constexpr that is a dtype, constexpr object or jit function: not handled here")
    consts = {tuple(k): v for k, v in zip(d["constant_keys"], d["constant_vals"])}
    attrs = {tuple(k): v for k, v in zip(d["attrs_keys"], d["attrs_vals"])}
    signature = {k: tuple(v) if isinstance(v, list) else v for k, v in d["signature"].items()}
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in d["options"].items()}
    if "target" not in d:
        raise CompatError(
            "this specialisation has no 'target' (Triton 3.6 writes none); "
            "make it with triton_capture_specialization, which adds the current device's"
        )
    src = require("triton.compiler", "ASTSource")(triton_jit_function(kernel), signature, consts, attrs)
    with triton_compile_scope(kernel):
        return triton.compile(src, target=gpu_target(**d["target"]), options=options)


def triton_specialization(kernel, signature: dict, constexprs: dict, ints: dict, target, num_warps: int) -> str:
    """The JSON :func:`triton_capture_specialization` gives, built by hand where no GPU is present:
    pointers 16-byte aligned, an int equal to 1 made a constexpr, one divisible by 16 marked so
    (the JIT's ``specialize_impl`` rules), ``target`` a ``GPUTarget``."""
    import json

    jit = triton_jit_function(kernel)
    names = list(jit.arg_names)
    sig, keys, vals, akeys = dict(signature), [], [], []
    for name, value in {**constexprs, **{k: v for k, v in ints.items() if v == 1}}.items():
        sig[name] = "constexpr"
        keys.append([names.index(name)])
        vals.append(value)
    for name, ty in sig.items():
        if ty.startswith("*") or (name in ints and ints[name] % 16 == 0 and ints[name] != 1):
            akeys.append([names.index(name)])
    return json.dumps({"name": jit.fn.__name__, "signature": sig,
                       "constant_keys": keys, "constant_vals": vals, "attrs_keys": akeys,
                       "attrs_vals": [[["tt.divisibility", 16]]] * len(akeys), "options": {"num_warps": num_warps},
                       "target": {"backend": target.backend, "arch": target.arch, "warp_size": target.warp_size}})  # fmt: skip


# ----------------------------------------------------------------------------- Triton: launch a CompiledKernel directly


def _hook_active(hook) -> bool:
    """A launch hook that would do something: a callable, or a ``knobs.HookChain`` with calls (3.5+)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True


def triton_launch_binding(compiled):
    """``course_lib.inductor.launcher.Binding`` for a ``CompiledKernel`` (Triton 3.2 to 3.9: the JIT
    launches with ``compiled.run(gx, gy, gz, stream, compiled.function, compiled.packed_metadata,
    launch_metadata, enter_hook, exit_hook, *every_argument)``), or None when ``compiled`` is not one
    (the interpreter) or a launch hook is installed (then the JIT's path calls it)."""
    from course_lib.inductor.launcher import Binding

    if not all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata", "_init_handles")):
        return None
    try:
        knobs = importlib.import_module("triton.knobs")
        hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    except (ImportError, AttributeError):
        return None
    if any(_hook_active(h) for h in hooks):
        return None
    compiled._init_handles()  # loads the binary on the current device (a no-op after the first launch)
    return Binding(compiled.run, compiled.function, compiled.packed_metadata, triton_static_launcher(compiled))


def triton_cooperative_launch() -> bool:
    """Can this Triton launch a kernel cooperatively (``kernel[grid](..., launch_cooperative_grid=True)``,
    an option of the NVIDIA backend since Triton 3.2: ``cuLaunchKernelEx`` with the cooperative
    attribute, which fails rather than start a grid larger than the GPU holds at once)?"""
    import dataclasses

    try:
        options = importlib.import_module("triton.backends.nvidia.compiler").CUDAOptions
    except (ImportError, AttributeError):
        return False
    return "launch_cooperative_grid" in {f.name for f in dataclasses.fields(options)}


def triton_resident_programs(compiled, num_warps: int) -> int:
    """How many programs of ``compiled`` (a loaded ``CompiledKernel``) the current GPU runs at once:
    blocks an SM (:func:`course_lib.gpu.occupancy_calculator.occupancy` from ptxas's register count and
    the shared memory, with the device's own budgets on an architecture it does not list) times the
    SMs. Triton does not expose ``cuOccupancyMaxActiveBlocksPerMultiprocessor``."""
    import torch

    from course_lib.gpu.occupancy_calculator import ARCHS, occupancy

    compiled._init_handles()
    device = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(device)
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability(device))
    limits = None
    if arch not in ARCHS:  # the device's own budgets, with sm_90's allocation rules
        threads = getattr(props, "max_threads_per_multi_processor", 2048)
        smem = getattr(props, "shared_memory_per_multiprocessor", 0)
        limits = {**ARCHS["sm_90"], "max_warps": threads // 32, "max_threads": threads, "smem": smem,
                  "regs": getattr(props, "regs_per_multiprocessor", 65536)}  # fmt: skip
    shared = getattr(compiled.metadata, "shared", 0)
    occ = occupancy(arch, 32 * num_warps, max(compiled.n_regs, 1), shared, limits=limits)
    return occ.blocks_per_sm * props.multi_processor_count


def triton_static_launcher(compiled):
    """torch's C++ launcher for a loaded Triton binary: ``torch._C._StaticCudaLauncher._launch_kernel``,
    what Inductor's ``StaticallyLaunchedCudaKernel.run`` (``torch/_inductor/runtime/static_triton_launcher.py``)
    calls. It reads the tensors' pointers in C++ and calls ``cuLaunchKernel`` with the binary's own
    CUfunction: no Python between the call and the driver. Returns ``(launch, *triton_static_signature)``
    with ``launch(function, gx, gy, gz, num_warps, shared, arg_types, args, stream)``, or None where this
    torch has no such launcher (CPU builds) or the binary needs what it does not do."""
    try:
        import torch

        launch = torch._C._StaticCudaLauncher._launch_kernel
    except (ImportError, AttributeError):
        return None
    signature = triton_static_signature(compiled)
    return None if signature is None else (launch, *signature)


def triton_static_signature(compiled):
    """What torch's static launcher needs to launch ``compiled`` besides the tensors:
    ``(arg_types, constants, extra, num_warps, shared)``. ``arg_types``: one letter a passed argument,
    Inductor's encoding read from the binary's signature (``O`` a pointer, ``i`` an int32...);
    ``constants``: the parameter indices Triton compiled in (constexprs, ints specialised to 1), not
    passed; ``extra``: the trailing null scratch pointers newer Tritons add to every kernel. None where
    the binary needs scratch memory, several CTAs, or a cooperative or programmatic-dependent launch, or
    this torch reads signatures differently."""
    cls = None
    for name in ("static_triton_launcher", "static_cuda_launcher"):  # torch 2.13, earlier
        try:
            module = importlib.import_module(f"torch._inductor.runtime.{name}")
        except ImportError:
            continue
        cls = getattr(module, "StaticallyLaunchedCudaKernel", None)
        break
    md = getattr(compiled, "metadata", None)
    if cls is None or md is None or getattr(md, "num_ctas", 1) != 1:
        return None
    if getattr(md, "launch_cooperative_grid", False) or getattr(md, "launch_pdl", False):
        return None
    extra = []
    for size in ("global_scratch_size", "profile_scratch_size"):
        if hasattr(md, size):
            if getattr(md, size) > 0:
                return None
            extra.append(None)  # the kernel still takes the pointer: pass null, as Inductor does
    try:
        reader = cls.__new__(cls)  # only its signature reader: no cubin loaded, no launch hooks checked
        types = reader.arg_ty_from_signature(compiled.src)
        constants = frozenset(reader.full_constexprs)
    except Exception:  # another torch spells it differently: stay on Triton's launcher
        return None
    return types + "O" * len(extra), constants, tuple(extra), md.num_warps, md.shared


def triton_device_and_stream():
    """``(current_device, stream_of)``: the callables Triton's JIT launch reads the device and stream
    with (``driver.active.get_current_device`` / ``get_current_stream``; torch's with torch loaded).
    Where the device getter is ``torch.cuda.current_device`` (Python: a lazy-init check, then the C
    call), the C call ``torch._C._cuda_getDevice`` itself is returned: the same answer once CUDA is
    initialised, which it is after the first launch (about 1 us less per launch)."""
    driver = require("triton.runtime", "driver").active
    get_device = driver.get_current_device
    try:
        import torch

        if get_device is torch.cuda.current_device and torch.cuda.is_initialized():
            get_device = getattr(torch._C, "_cuda_getDevice", get_device)
    except (ImportError, AttributeError):
        pass
    return get_device, driver.get_current_stream


def autograd_function_apply(cls):
    """``cls.apply`` for a ``torch.autograd.Function`` subclass without ``setup_context``, minus the
    Python layer of ``Function.apply`` (torch/autograd/function.py: it unwraps functorch's dead
    wrappers argument by argument, then calls the C ``_FunctionBase.apply``). Outside functorch
    transforms there are none to unwrap, so this calls the C apply directly (about 9 us less for 60
    arguments on the course's CPU); inside them it takes the full path."""
    import torch

    full = cls.apply
    try:
        base = super(torch.autograd.Function, cls).apply  # the C ``_FunctionBase.apply``, bound to ``cls``
        active = torch._C._are_functorch_transforms_active
    except AttributeError:
        return full

    def apply(*args):
        return full(*args) if active() else base(*args)

    return apply


def foreach_copy(dsts: list, srcs: list) -> None:
    """``dst.copy_(src)`` for every pair, as one ``torch._foreach_copy_`` (on a GPU one multi-tensor
    kernel a dtype instead of one copy each; torch's optimizers batch their updates the same way).
    Pairs must have equal sizes, devices and dtypes; falls back to one ``copy_`` each."""
    import torch

    fn = getattr(torch, "_foreach_copy_", None)
    if fn is None:
        for d, s in zip(dsts, srcs, strict=True):
            d.copy_(s)
        return
    fn(dsts, srcs)


def triton_module_ops(module, int_attrs: tuple[str, ...] = ()) -> list[dict]:
    """Every op of a live ``ir.module`` as plain data, in ``module.walk`` order (nested ops first).

    Read with Triton's bindings: ``operation.get_name / get_block / get_region / get_result /
    get_num_operands / get_int_attr``, ``block.get_parent / arg / id``, ``region.id``. Each record:
    ``name``, ``block`` and ``region`` (opaque keys of the op's block and of that block's region;
    None for the module), ``block_args`` (types of that block's arguments), ``regions`` (keys of the
    regions the op owns), ``results`` (types), ``operands`` (a count) and ``attrs`` (the integer
    attributes among ``int_attrs`` the op carries). Keys are only for rebuilding the nesting; never
    print them (they are addresses).
    """
    ops: list = []
    try:
        module.walk(ops.append)
    except AttributeError as exc:
        raise CompatError(f"triton's ir.module has no walk() here ({exc}); see compat.triton_module_ops") from exc
    out = []
    for op in ops:
        block = op.get_block()
        record = {
            "name": op.get_name(),
            "block": block.id() if block is not None else None,
            "region": block.get_parent().id() if block is not None else None,
            "block_args": [str(block.arg(i).get_type()) for i in range(block.get_num_arguments())] if block else [],
            "regions": [op.get_region(i).id() for i in range(op.get_num_regions())],
            "results": [str(op.get_result(i).get_type()) for i in range(op.get_num_results())],
            "operands": op.get_num_operands(),
            "attrs": {},
        }
        if int_attrs and not hasattr(op, "get_int_attr"):
            raise CompatError("triton's ir.operation has no get_int_attr in this version (compat.triton_module_ops)")
        for attr in int_attrs:
            value = op.get_int_attr(attr)
            if value is not None:
                record["attrs"][attr] = value
        out.append(record)
    return out


def triton_module_text(module) -> str:
    """A live ``ir.module`` printed by MLIR with its locations (``module.str()``; ``str_nodebug``
    drops them and loses the variable names the code generator attached as name locations)."""
    if not hasattr(module, "str"):
        raise CompatError("triton's ir.module has no str() in this version (compat.triton_module_text)")
    return module.str()


# ----------------------------------------------------------------------------- Inductor's output code: C++ fast paths


def _dynamo_guards():
    import torch

    return getattr(getattr(torch._C, "_dynamo", None), "guards", None)


def inductor_empty_strided(device):
    """``empty_strided(size, stride, dtype)`` on ``device``: Inductor's output code allocates with
    ``empty_strided_cpu`` / ``empty_strided_cuda`` (``torch._C._dynamo.guards``), which skip the
    dispatcher. The CUDA one allocates on the current device, so it is used only when the process
    sees one GPU; otherwise, or when torch lacks them, ``torch.empty_strided`` on ``device``."""
    import torch

    dev = torch.device(device)
    guards = _dynamo_guards()
    if dev.type == "cpu" and hasattr(guards, "_empty_strided_cpu"):
        return guards._empty_strided_cpu
    if dev.type == "cuda" and hasattr(guards, "_empty_strided_cuda") and torch.cuda.device_count() == 1:
        return guards._empty_strided_cuda

    def empty_strided(size, stride, dtype):
        return torch.empty_strided(size, stride, dtype=dtype, device=dev)

    return empty_strided


def inductor_reinterpret_tensor():
    """``reinterpret_tensor(t, size, stride, offset)``: ``t``'s storage seen with another size and
    stride, ``offset`` elements past ``t``'s own offset (Inductor's ``reinterpret_tensor``, a C++ alias
    without autograd view tracking; ``torch.as_strided`` where torch lacks it)."""
    import torch

    guards = _dynamo_guards()
    if hasattr(guards, "_reinterpret_tensor"):
        return guards._reinterpret_tensor

    def reinterpret_tensor(t, size, stride, offset):
        return torch.as_strided(t, size, stride, t.storage_offset() + offset)

    return reinterpret_tensor


# ---------------------------------------------------------------------------
# torch.backends flags (torch/backends/__init__.py)
# ---------------------------------------------------------------------------


def torch_backend_flags_mutable():
    """A context in which ``torch.backends.cudnn.*`` flags may be assigned. Importing
    ``torch.testing._internal.common_utils`` (the OpInfo tests do) freezes them for the process
    (``disable_global_flags``); torch's own ``cudnn.flags()`` context managers unfreeze them with
    the private ``__allow_nonbracketed_mutation``, which is what this returns where it exists."""
    import contextlib

    import torch.backends

    unfreeze = getattr(torch.backends, "__allow_nonbracketed_mutation", None)
    return unfreeze() if unfreeze is not None else contextlib.nullcontext()
