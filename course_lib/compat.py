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

    compiled = aot_function(fn, fw_compiler=recorder("forward"), bw_compiler=recorder("backward"),
                            decompositions=decompositions)
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


def make_fx(fn, *args, decompositions=None):
    """Trace ``fn`` to an ATen-level FX graph (``torch.fx.experimental.proxy_tensor.make_fx``)."""
    tracer = require("torch.fx.experimental.proxy_tensor", "make_fx")
    return tracer(fn, decomposition_table=decompositions or {})(*args)


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
    registry.register_backend(compiler_fn=compiler_fn, name=name)


def inductor_output_code_with_config(fn, *args, **config):
    """Like :func:`inductor_output_code`, with ``torch._inductor.config`` patched (e.g. fusion off)."""
    patch = require("torch._inductor.config", "patch")
    with patch(**config):
        return inductor_output_code(fn, *args)


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
    jit_function = require("triton.runtime.jit", "JITFunction")
    if isinstance(kernel, jit_function):
        return kernel
    fn = getattr(kernel, "fn", None)
    if fn is None:
        raise CompatError("triton's interpreted kernel has no .fn any more: see compat.triton_jit_function")
    return jit_function(fn)
