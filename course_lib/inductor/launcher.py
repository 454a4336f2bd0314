"""Launch a compiled Triton kernel without Triton's JIT dispatch on every call.

Teaches ``torch/_inductor/runtime/triton_heuristics.py`` (``CachingAutotuner._make_launchers`` and
``TritonCompileResult.make_launcher``: once a kernel is compiled, Inductor writes a tiny Python
``launcher(*args, stream)`` that calls the binary's C launcher directly) and
``torch/_inductor/runtime/static_cuda_launcher.py`` (the same idea with Inductor's own C launcher).

Why: ``kernel[grid](*args)`` runs Triton's ``JITFunction.run`` every time. Before the GPU sees
anything it binds the arguments to the signature, specialises each one (dtype, 16-byte alignment
of every pointer, ``== 1`` and ``% 16`` of every int), builds a cache key string from all of that
and the options, looks the key up, and builds launch metadata for profiler hooks: tens of
microseconds of Python a launch. A training step of a small model launches hundreds of kernels,
each doing microseconds of GPU work, so that dispatch is most of the step.

What the course does (:class:`DirectLaunch`): a launch site knows everything the JIT keys on
except the tensors' addresses (dtypes are fixed by the graph, the ints and constexprs are literals
in the generated code, the grid is computed at code-generation time). So the first launch goes
through ``kernel[grid](...)`` (compiling, or loading what the async-compile pool compiled) and
returns the ``CompiledKernel``; that binary, its C launcher, function handle and packed metadata
are kept, and every later launch calls the C launcher directly with the same argument list the JIT
would pass. The one guard left per call is what can change: every pointer must still be 16-byte
aligned (the binary may assume it) and the current device must be the one the binary was loaded on;
otherwise the call goes through ``kernel[grid]`` again, which picks the right binary.

Simplified against Inductor: no autotuning (one config a kernel), grids are literals (no size
symbols on the Triton path), and launch hooks (profilers) disable direct launches when present at
binding time (Inductor burns the hooks in at ``make_launcher`` time in the same way). On CPU the
kernels run in Triton's interpreter, whose launch returns no binary: the site stays on the JIT.

Position: generated launcher code (:func:`course_lib.inductor.codegen.triton.TritonKernel.launcher`)
-> this object -> Triton's C launcher (``CompiledKernel.run``).
"""

from __future__ import annotations

import dataclasses
import os
import weakref

from course_lib import env

#: ``COURSE_DIRECT_LAUNCH=0`` keeps every launch on ``kernel[grid]`` (for measuring the difference).
DIRECT_ENV = "COURSE_DIRECT_LAUNCH"


def direct_enabled() -> bool:
    return os.environ.get(DIRECT_ENV, "1") != "0"


#: ``COURSE_STATIC_LAUNCH=0`` keeps direct launches on Triton's own launcher (not torch's C++ one).
STATIC_ENV = "COURSE_STATIC_LAUNCH"
_static_on = True  # set_static


def static_enabled() -> bool:
    return _static_on and os.environ.get(STATIC_ENV, "1") != "0"


#: Every live launch site, so a benchmark can report on them and time the JIT path in the same process
#: (weak: a site goes when its compiled graph does).
_SITES: weakref.WeakSet = weakref.WeakSet()


def sites() -> list:
    return list(_SITES)


def set_direct(on: bool, sites_=None) -> None:
    """Turn direct launches off (every site unbound and kept on ``kernel[grid]``) or back on (each
    site binds again at its next launch): for measuring what the JIT's dispatch costs."""
    for site in sites() if sites_ is None else sites_:
        site.unbind(None if on else "set_direct(False)")


def set_static(on: bool, sites_=None) -> None:
    """Bind direct launches to torch's C++ launcher where it can (the default) or to Triton's own
    Python launcher: each site binds again at its next launch (for measuring the difference)."""
    global _static_on
    _static_on = on
    for site in sites() if sites_ is None else sites_:
        if site.refused is None:
            site.unbind(None)


@dataclasses.dataclass(frozen=True)
class Binding:
    """What a direct launch needs from a ``CompiledKernel`` (:func:`course_lib.compat.triton_launch_binding`)."""

    run: object  # the C launcher: run(gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit, *args)
    function: int  # the loaded CUfunction handle
    metadata: object  # the backend's packed metadata (num_warps, shared memory, ...)
    # torch's C++ launcher, where it can launch this binary (compat.triton_static_launcher):
    # (launch, arg_types, constant parameter indices, trailing null pointers, num_warps, shared bytes)
    static: tuple | None = None


class CompatRuntime:
    """The real runtime, through :mod:`course_lib.compat`; tests pass a fake with the same methods."""

    def binding(self, compiled) -> Binding | None:
        from course_lib import compat

        return compat.triton_launch_binding(compiled)

    def device_and_stream(self):
        """``(current_device(), stream(device))``: the two callables Triton's JIT itself uses."""
        from course_lib import compat

        return compat.triton_device_and_stream()

    def compile(self, kernel, args: tuple, kwargs: dict):
        """The ``CompiledKernel`` a launch with these arguments runs (compiled or loaded, not
        launched); None in Triton's interpreter, which compiles nothing."""
        warmup = getattr(kernel, "warmup", None)
        if warmup is None or env.triton_interpreted():
            return None
        return warmup(*args, grid=(1,), **kwargs)

    def resident_programs(self, compiled, num_warps: int) -> int:
        from course_lib import compat

        return compat.triton_resident_programs(compiled, num_warps)


class DirectLaunch:
    """One launch site: ``kernel[grid](*tensors, *ints, **constexprs, num_warps=num_warps)``.

    Calling it with the tensors launches the kernel; after the first launch on a GPU it bypasses
    the JIT (see the module docstring). ``jit_launches`` counts the launches that went through
    ``kernel[grid]`` (1 on a GPU once bound; every launch in the interpreter).
    """

    def __init__(self, kernel, grid: tuple, ints: tuple = (), constexprs: dict | None = None, num_warps: int = 4,
                 runtime=None, row_split: int = 0, maxnreg: int = 0, choices: tuple = ()):  # fmt: skip
        self.kernel = kernel
        self.grid = tuple(grid) + (1,) * (3 - len(grid))  # (gx, gy, gz), as the C launcher takes it
        # A row split (codegen.triton.ROW_SPLIT): ``row_split`` programs a row wait for each other, so
        # the grid (at most ``grid``) is sized at the first launch to what the GPU holds at once, and
        # launched cooperatively, which CUDA refuses rather than start more than that.
        self.row_split = row_split
        self.options = {"launch_cooperative_grid": True} if row_split else {}
        if maxnreg:  # registers a thread, at most (codegen.triton.ROW_SPLIT_MAXNREG)
            self.options["maxnreg"] = maxnreg
        self._sized = not row_split
        # A row split's alternatives (constexpr settings, the preferred first): at the first launch on a
        # GPU each is compiled, and the first that fits the most programs at once is kept (ROW_SPLIT_CHOICE)
        self.choices = tuple(dict(c) for c in choices)
        self.ints = tuple(ints)
        self.constexprs = dict(constexprs or {})
        self.num_warps = num_warps
        self.runtime = runtime or CompatRuntime()
        self.jit_launches = 0
        self.refused: str | None = None if direct_enabled() else f"{DIRECT_ENV}=0"
        # set by _bind: the per-call fast path reads only these
        self._run = None
        self._function = None
        self._metadata = None
        self._device = None
        self._stream = None
        self._bound_device = None
        self._tail = ()  # the non-tensor arguments in the kernel's parameter order
        self._static = None  # torch's C++ launcher and what it takes besides the tensors (see _bind)
        self._static_args = ()
        _SITES.add(self)

    def __repr__(self) -> str:
        state = "direct" if self._run is not None else f"jit ({self.refused})" if self.refused else "jit"
        return f"DirectLaunch({_kernel_name(self.kernel)}, grid={self.grid}, {state})"

    @property
    def bound(self) -> bool:
        return self._run is not None

    @property
    def static(self) -> bool:
        """Bound to torch's C++ launcher (``torch._C._StaticCudaLauncher``), not Triton's."""
        return self._static is not None

    def unbind(self, reason: str | None) -> None:
        """Forget the bound binary; ``reason`` None lets the next aligned launch bind again."""
        self._run = self._static = None
        self.refused = reason

    def __call__(self, *tensors):
        run = self._run
        if run is not None:
            ptrs = 0
            for t in tensors:
                ptrs |= t.data_ptr()
            device = self._device()
            if not ptrs & 15 and device == self._bound_device:
                gx, gy, gz = self.grid
                static = self._static
                if static is not None:  # torch's C++ launcher: the arguments parsed in C++
                    launch, types, warps, shared = static
                    try:
                        launch(self._function, gx, gy, gz, warps, shared, types, (*tensors, *self._static_args),
                               self._stream(device))  # fmt: skip
                        return None
                    except (TypeError, ValueError, RuntimeError) as exc:
                        self.unbind(f"static launch refused: {type(exc).__name__}: {exc}".splitlines()[0])
                        return self.jit_launch(tensors)
                # the JIT's own call, minus the dispatch: (grid, stream, function, metadata,
                # launch_metadata=None and no hooks, then every argument in parameter order)
                try:
                    run(gx, gy, gz, self._stream(device), self._function, self._metadata, None, None, None,
                        *tensors, *self._tail)  # fmt: skip
                    return None
                except (TypeError, ValueError) as exc:  # the C launcher refused the arguments (before launching)
                    self.unbind(f"direct launch refused: {type(exc).__name__}: {exc}".splitlines()[0])
        return self.jit_launch(tensors)

    def jit_launch(self, tensors: tuple):
        """``kernel[grid](...)``, Triton's full dispatch; binds the returned binary when it may."""
        first = not self._sized
        if first:
            self.grid = self.cooperative_grid(tensors)
            self._sized = True
        while True:
            try:
                compiled = self.kernel[self.grid](*tensors, *self.ints, **self.constexprs, num_warps=self.num_warps,
                                                  **self.options)  # fmt: skip
                break
            except RuntimeError as exc:  # CUDA refused a grid larger than it holds: the estimate was high
                if not (first and self.row_split and "cooperative" in str(exc) and self.grid[0] > self.row_split):
                    raise
                self.grid = (max(1, self.grid[0] // self.row_split // 2) * self.row_split, 1, 1)
        self.jit_launches += 1
        if self._run is None and self.refused is None and aligned(tensors):
            self.refused = self._bind(compiled, len(tensors))
        return compiled

    def cooperative_grid(self, tensors: tuple) -> tuple:
        """A row split's grid: whole row groups (``row_split`` programs each), as many as the GPU
        holds at once and no more than there are rows; they walk the rows. With ``choices``, the
        constexprs become the first choice whose binary fits the most programs."""

        def compile_with(choice):
            kwargs = {**self.constexprs, **choice, **self.options, "num_warps": self.num_warps}
            return self.runtime.compile(self.kernel, (*tensors, *self.ints), kwargs)

        if self.choices:
            choice, compiled = self.pick(compile_with)
            self.constexprs.update(choice)
        else:
            compiled = compile_with({})
        rows = self.grid[0] // self.row_split
        if compiled is None:  # Triton's interpreter: one program at a time
            if self.row_split > 1:
                raise RuntimeError(
                    f"{_kernel_name(self.kernel)} splits each row over {self.row_split} programs that wait for "
                    "each other; Triton's interpreter runs programs one at a time, so it would never finish "
                    "(a row split is generated only for a GPU)"
                )
            return (min(rows, INTERPRETER_ROW_GROUPS), 1, 1)
        groups = self.runtime.resident_programs(compiled, self.num_warps) // self.row_split
        if groups < 1:
            raise RuntimeError(
                f"{_kernel_name(self.kernel)}: the {self.row_split} programs of a row do not fit the GPU at once"
            )
        groups = min(rows, groups)
        if BALANCED_ROUNDS:  # as many rounds, fewer groups: every group walks the same number of rows
            groups = -(-rows // -(-rows // groups))
        return (groups * self.row_split, 1, 1)

    def pick(self, compile_with) -> tuple:
        """The choice to keep and its binary: ROW_SPLIT_CHOICE's when set, else the first whose binary
        the GPU holds the most programs of at once (the flagged row split where its poll costs no
        occupancy). Triton's interpreter gives no binary to measure: the first, with None."""
        if ROW_SPLIT_CHOICE is not None:
            choice = self.choices[ROW_SPLIT_CHOICE]
            return choice, compile_with(choice)
        first = compile_with(self.choices[0])
        if first is None:
            return self.choices[0], None
        best, most = (self.choices[0], first), self.runtime.resident_programs(first, self.num_warps)
        for choice in self.choices[1:]:
            compiled = compile_with(choice)
            held = self.runtime.resident_programs(compiled, self.num_warps)
            if held > most:
                best, most = (choice, compiled), held
        return best

    def _bind(self, compiled, n_tensors: int) -> str | None:
        """Keep ``compiled``'s launcher; return why not (None when bound)."""
        if compiled is None:
            return "the launch returned no binary (Triton's interpreter)"
        try:
            binding = self.runtime.binding(compiled)
        except Exception as exc:  # an unknown Triton: stay on the JIT, say why
            return f"no binding: {type(exc).__name__}: {exc}"
        if binding is None:
            return "this Triton's CompiledKernel has no direct launcher (or a launch hook is installed)"
        fn = getattr(getattr(compiled, "src", None), "fn", None)  # the JITFunction the binary came from
        names = list(fn.arg_names) if hasattr(fn, "arg_names") else None
        if names is not None and names[n_tensors + len(self.ints) :] != list(self.constexprs):
            return f"constexprs {list(self.constexprs)} are not the kernel's last parameters {names}"
        self._device, self._stream = self.runtime.device_and_stream()
        self._bound_device = self._device()
        self._tail = (*self.ints, *self.constexprs.values())
        self._run, self._function, self._metadata = binding.run, binding.function, binding.metadata
        self._static = None
        if binding.static is not None and not self.row_split and static_enabled():  # cooperative: Triton's
            launch, types, constants, extra, warps, shared = binding.static
            if not any(i in constants for i in range(n_tensors)):
                first = n_tensors  # parameter index of the first non-tensor argument
                passed = tuple(v for i, v in enumerate(self._tail, start=first) if i not in constants)
                if len(types) == n_tensors + len(passed) + len(extra):
                    self._static, self._static_args = (launch, types, warps, shared), (*passed, *extra)
        return None


#: Row groups of a row split in Triton's interpreter (only a split of one part a row can run there):
#: fewer than the rows, so that each program walks several.
INTERPRETER_ROW_GROUPS = 3
# A row split's row groups walk the rows in rounds. 1024 rows over the 33 groups an H100 or H200 holds (264
# programs of 16 warps) take 32 rounds, the last with one group busy; 32 groups (BALANCED_ROUNDS) take the same
# 32 rounds, all full. Measured on an H100 (2026-12-07), the 33 groups were still a little faster (layer norm
# 0.865 of copy bandwidth against 0.858, softmax 0.878 against 0.870): more programs in flight outweigh the
# one-group round. Off.
BALANCED_ROUNDS = False
# Which of a row split's ``choices`` to take, whatever its occupancy (None: the rule of DirectLaunch.pick).
# The bench sweep sets it to time each protocol alone: 0 the flagged partials, 1 the counter.
ROW_SPLIT_CHOICE: int | None = None


def aligned(tensors) -> bool:
    """Every pointer 16-byte aligned: what the JIT specialises pointers on (``tt.divisibility = 16``)."""
    return all(hasattr(t, "data_ptr") and t.data_ptr() % 16 == 0 for t in tensors)


def _kernel_name(kernel) -> str:
    fn = getattr(kernel, "fn", kernel)
    return getattr(fn, "__name__", type(kernel).__name__)


def report(launchers) -> dict:
    """How many of a module's launch sites launch directly, and why the others do not."""
    out: dict = {"direct": 0, "jit": 0, "reasons": {}}
    for site in launchers:
        if site.bound:
            out["direct"] += 1
        else:
            out["jit"] += 1
            reason = site.refused or "not launched yet"
            out["reasons"][reason] = out["reasons"].get(reason, 0) + 1
    return out
