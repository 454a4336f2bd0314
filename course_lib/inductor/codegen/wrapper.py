"""The Python wrapper: allocate buffers, call kernels and externs, return outputs.

Teaches ``torch/_inductor/codegen/wrapper.py`` (``PythonWrapperCodegen``): Inductor's
"output code" is a Python module whose ``call(args)`` does exactly this, with
``empty_strided`` allocations, ``# reuse`` lines from memory planning, ``del`` when a buffer
dies, and ``extern_kernels.mm(...)`` for library calls.

Position: :class:`Schedule` + compiled kernels -> Python source -> a callable.

Dynamic shapes: the wrapper first reads each size symbol off an input (``s0 = arg0_1.size(0)``,
as Inductor's wrapper does), checks every input's size against the sizes compiled in
(:func:`check_size`: a static size that changed, or two dims that share ``s0`` but differ,
raise a :class:`SizeGuardError` that says which), then allocates with sizes such as ``(s0, 8)``
and passes ``s0`` to each kernel that loops over it.
"""

from __future__ import annotations

from course_lib.inductor.codegen.common import plan_size_symbols
from course_lib.inductor.lowering import TensorArg
from course_lib.inductor.scheduler import Schedule


class SizeGuardError(ValueError):
    """An input's size differs from the sizes a compiled graph was built for."""


def check_size(t, expected: tuple, name: str) -> None:
    """The size guard of a compiled graph: ``t``'s size must equal ``expected`` (sizes evaluated)."""
    if tuple(t.shape) != tuple(expected):
        raise SizeGuardError(
            f"input {name} has size {list(t.shape)}, but this graph was compiled for {list(expected)} "
            "(static sizes must match; recompile for the new size)"
        )


def _py(a, graph, view: str = "reinterpret") -> str:
    """Python text of an argument. ``view`` names the function that re-views a buffer: ``reinterpret``
    (a real ``as_strided`` view) or ``reinterpret_tensor`` (Inductor's C++ alias, what the wrapper
    uses for an extern's argument and for what the graph returns)."""
    import torch

    if isinstance(a, TensorArg):
        b = graph.buffer(a.buf)
        if tuple(a.size) == tuple(b.shape) and tuple(a.stride) == tuple(b.stride) and a.offset == 0:
            return a.buf
        return f"{view}({a.buf}, {tuple(a.size)}, {tuple(a.stride)}, {a.offset})"
    if isinstance(a, list):
        return "[" + ", ".join(_py(x, graph, view) for x in a) + "]"
    if isinstance(a, tuple):
        return "(" + ", ".join(_py(x, graph, view) for x in a) + ("," if len(a) == 1 else "") + ")"
    if isinstance(a, torch.device):
        return "device"
    if isinstance(a, float):
        return repr(a) if a == a and abs(a) != float("inf") else f"float('{a}')"
    if isinstance(a, complex):
        return f"complex({_py(a.real, graph)}, {_py(a.imag, graph)})"
    return repr(a)


def _target(name: str) -> str:
    """``aten.mm.default`` stays readable; anything else goes through the externs table."""
    if name.startswith(("aten.", "prims.")):
        return name
    return f"externs[{name!r}]"


def wrapper_source(sched: Schedule, call_names: dict[str, str], pointer_args: bool = True) -> str:
    """Python source of ``call(args)``; ``call_names`` maps kernel name -> callable name.

    ``pointer_args``: pass ``tensor.data_ptr()`` (C++ kernels through ctypes) or the tensors
    themselves (Triton launchers)."""
    g = sched.graph
    lines = ["def call(args):"]
    ins = ", ".join(g.inputs)
    if g.inputs:
        lines.append(f"    {ins}{',' if len(g.inputs) == 1 else ''} = args")
        lines += _size_lines(g)
        for name in g.inputs:
            if name in g.scalar_inputs:  # a size symbol or Python scalar: no buffer, no layout
                continue
            b = g.buffer(name)
            if _at_most_one_element(b.shape):  # any layout of one element is it; a CPU scalar tensor
                lines.append(f"    {name} = on_device({name})")  # beside GPU tensors (eager allows it) moves
                continue
            lines.append(f"    {name} = restride({name}, {tuple(b.shape)}, {tuple(b.stride)})")
    reuse_sources = {v[1] for v in sched.plan.values() if v[0] == "reuse"}
    for step, k in enumerate(sched.kernels):
        if k.kind == "extern":
            b = g.buffer(k.nodes[0])
            spec = b.extern
            args = ", ".join(
                [_py(a, g, "reinterpret_tensor") for a in spec["args"]]
                + [f"{kk}={_py(v, g, 'reinterpret_tensor')}" for kk, v in spec["kwargs"].items()]
            )
            lines.append(f"    {b.name} = {_target(spec['target'])}({args})")
            if not spec.get("multi") and not spec.get("effect"):  # effect: returns None (an assertion)
                lines.append(f"    {b.name} = restride({b.name}, {tuple(b.shape)}, {tuple(b.stride)})")
        elif k.kind == "alias":
            b = g.buffer(k.nodes[0])
            lines.append(
                f"    {b.name} = restride({b.extern['base']}[{b.extern['item']}], {tuple(b.shape)}, {tuple(b.stride)})"
            )
        else:
            for w in k.plan.writes:
                how, other = sched.plan.get(w, ("alloc", None))
                b = g.buffer(w)
                if how == "alloc":
                    lines.append(f"    {w} = empty_strided({tuple(b.shape)}, {tuple(b.stride)}, torch.{b.dtype})")
                elif how == "reuse":
                    lines.append(f"    {w} = {other}; del {other}  # reuse")
                else:
                    lines.append(f"    {w} = {other}  # in-place")
            call_args = [f"{n}.data_ptr()" if pointer_args else n for n in k.plan.reads + k.plan.writes]
            call_args += [s.name for s in plan_size_symbols(k.plan)]  # the kernel's ks0, ks1, ...
            lines.append(f"    {call_names[k.name]}({', '.join(call_args)})")
        dead = [f for f in sched.frees.get(step, []) if f not in reuse_sources]
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    outs = []
    for o in g.outputs:
        if o[0] == "none":
            outs.append("None")
        elif o[0] == "size":  # a SymInt output: its expression in the size symbols bound at entry
            outs.append(str(o[1]))
        else:
            outs.append(_py(TensorArg(o[1], o[2], o[3], o[4]), g, "reinterpret_tensor"))
    lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    return "\n".join(lines)


def _size_lines(g) -> list[str]:
    """Bind each size symbol from the input that carries it, then guard every input's size."""
    if not g.sizevars:
        return []
    lines = []
    for s in g.sizevars.symbols:
        pos, dim = g.sizevars.sources[s]
        where = g.inputs[pos]
        lines.append(f"    {s.name} = {where}" if dim is None else f"    {s.name} = {where}.size({dim})")
    for name in g.inputs:
        if name not in g.scalar_inputs:
            lines.append(f"    check_size({name}, {tuple(g.buffer(name).shape)}, {name!r})")
    values = ", ".join(f"{s.name}={s.name}" for s in g.sizevars.symbols)
    shown = [f"{s.name} >= 2" for s in g.sizevars.symbols] + [str(e) for e in g.sizevars.guards[:2]]
    more = ", ..." if len(g.sizevars.guards) > 2 else ""
    lines.append(f"    check_guards(dict({values}))  # {', '.join(shown)}{more}")
    return lines


def _at_most_one_element(shape) -> bool:
    """A static shape of 0 or 1 elements (``restride`` would return such a tensor unchanged)."""
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return False
        n *= d
    return n <= 1


def restride(t, size, stride):
    """Make ``t`` have the layout the kernels were generated for (copy only when it differs)."""
    import torch

    if t.stride() == stride or t.numel() <= 1:  # stride: a tuple literal in the generated code
        return t
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def reinterpret(t, size, stride, offset):
    import torch

    return torch.as_strided(t, size, stride, t.storage_offset() + offset)


def guard_checker(sizevars):
    """``check_guards(values)`` for the wrapper: raise when a size guard torch recorded fails."""

    def check_guards(values: dict) -> None:
        failed = sizevars.check(values)
        if failed:
            raise SizeGuardError(f"sizes {values} break the guard(s) {', '.join(map(str, failed))}; recompile")

    return check_guards


def make_call(source: str, kernels: dict, device, sizevars=None) -> callable:
    """``exec`` the wrapper source with its globals (kernels, ATen, helpers) and return ``call``.

    Per-call cost matters (a small model's step is hundreds of these lines): allocation and extern
    arguments' views use the C++ fast paths Inductor's output code imports (``empty_strided_cpu`` /
    ``empty_strided_cuda``, ``reinterpret_tensor``: about 1.3 us each instead of 3.7 us for
    ``torch.empty_strided`` / ``torch.as_strided`` through the dispatcher, measured on this course's CPU);
    what the graph returns is re-viewed the same way, as in Inductor's output code."""
    import torch

    from course_lib import compat

    glb = {
        "torch": torch,
        "aten": torch.ops.aten,
        "prims": torch.ops.prims,
        "empty_strided": compat.inductor_empty_strided(device),  # (size, stride, dtype) on ``device``
        "restride": restride,
        # a one-element input on another device (Whisper's 0-dim CPU tensor in a CUDA graph): the kernels
        # read it on theirs. Eager's ops take a 0-dim CPU tensor as a scalar; a kernel cannot read CPU memory
        "on_device": lambda t: t if t.device == device else t.to(device),
        "reinterpret": reinterpret,
        "reinterpret_tensor": compat.inductor_reinterpret_tensor(),
        "device": device,
        "externs": _EXTERNS,
        "check_size": check_size,
        "check_guards": guard_checker(sizevars),
        "FloorDiv": lambda a, b: a // b,  # how a size expression with // prints
        "ModIdx": lambda a, b: a % b,
        "Max": max,  # a size the bounds could not decide (Max(0, 2048 - s0)) prints as sympy writes it
        "Min": min,
        **kernels,
    }
    exec(compile(source, "<course_lib.inductor output code>", "exec"), glb)
    from course_lib.inductor import cudagraphs

    cudagraphs.install(glb, device, sizevars)  # COURSE_CUDAGRAPHS=1 on a GPU: replay the call as one CUDA graph
    return glb["call"]


class _Externs(dict):
    def __missing__(self, name):
        import operator

        import torch

        if name == "<built-in function getitem>":
            return operator.getitem
        ns, op, overload = name.split(".")
        return getattr(getattr(getattr(torch.ops, ns), op), overload)


_EXTERNS = _Externs()


def extern_aliased_inputs(spec: dict) -> list[str]:
    """The buffers an extern's result may be a view of: the arguments its schema gives an alias set
    that a return shares (``split.Tensor(Tensor(a -> *) self, ...) -> Tensor(a)[]``: ``self``), as
    Inductor's ``FallbackKernel`` collects its ``alias_names``. A call with no schema (``getitem``)
    may view any of its inputs."""
    schema = getattr(_EXTERNS[spec["target"]], "_schema", None)
    if schema is None:
        return list(spec["inputs"])
    if all(r.alias_info is None for r in schema.returns):
        return []
    named = {a.name: a for a in schema.arguments}
    pairs = list(zip(schema.arguments, spec["args"])) + [(named[k], v) for k, v in spec["kwargs"].items() if k in named]
    return list(dict.fromkeys(buf for arg, value in pairs if arg.alias_info is not None for buf in _buffers_in(value)))


def _buffers_in(value) -> list[str]:
    if isinstance(value, TensorArg):
        return [value.buf]
    if isinstance(value, (list, tuple)):
        return [b for v in value for b in _buffers_in(v)]
    return []
