"""``aot_function``: a joint graph, partitioned and compiled, behind a torch.autograd.Function
(teaches torch/_functorch/aot_autograd.py ``aot_function`` and
torch/_functorch/_aot_autograd/runtime_wrappers.py, ``CompiledFunction``).

Position: Python function --> joint graph --> partition --> fw_compiler(forward graph),
bw_compiler(backward graph) --> a callable that torch.autograd can differentiate.

On the first call with new input shapes/dtypes it traces and compiles (a cache keyed by those,
torch keys by the inputs' metadata too). Forward runs the compiled forward graph and keeps the
saved tensors in ``ctx``; backward feeds them and the incoming gradients to the compiled
backward graph. ``COURSE_DEBUG=aot`` prints the joint graph, the partition and both graphs
on each compile. A compiler is ``compiler(graph, example_inputs) -> callable``; ``None`` uses
course_lib.fx's generated Python code (torch's default is also "run the graph as it is").
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import torch

from course_lib import compat, env
from course_lib.aot.functionalize import copy_back
from course_lib.aot.joint import joint_graph
from course_lib.aot.partitioners import partition


def _default_compiler(graph, example_inputs):
    from course_lib.fx import compile_graph

    return compile_graph(graph)


def _key(args) -> tuple:
    return tuple((tuple(a.shape), a.dtype, a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args)


def aot_compile(fn, args, fw_compiler=None, bw_compiler=None, method: str = "default"):
    """Trace, partition and compile ``fn`` for these ``args`` now; a torch.autograd.Function.

    ``.run(*args)`` returns the tuple of outputs and writes updated inputs (running statistics)
    back into the argument tensors; ``.apply`` returns those updated values as extra outputs
    instead. This is the uncached step behind
    :func:`aot_function`; a torch.compile backend calls it directly because Dynamo already
    caches one compiled graph per set of guards.
    """
    joint = joint_graph(fn, *args)
    part = partition(joint, method)
    if env.debug("aot"):  # COURSE_DEBUG=aot (or the older COURSE_AOT_DEBUG=1) shows every stage
        for title, text in [("joint graph", joint.graph), ("partition", part.summary()),
                            ("forward graph", part.forward), ("backward graph", part.backward)]:  # fmt: skip
            print(f"--- course_lib.aot: {title}\n{text}")
    fw = (fw_compiler or _default_compiler)(part.forward, [a for a in args])
    bw = (bw_compiler or _default_compiler)(part.backward, None)
    n_out, wrt, n_args = joint.num_outputs, joint.wrt, len(args)
    n_user = joint.num_user_outputs
    constant = [i for i, d in enumerate(joint.differentiable_outputs) if not d]  # no input in wrt reaches them
    tangent_like = [n.meta.get("val") for n in joint.tangents]
    # updated inputs: a running mean's value is never differentiated; an activation's (grad_mutated) is
    written = [n_user + k for k, i in enumerate(joint.mutated) if i in joint.grad_mutated]
    untracked = [n_user + k for k, i in enumerate(joint.mutated) if i not in joint.grad_mutated]
    stale = _saved_before_write(part, n_out, joint.mutated)

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            results = fw(*inputs)
            outs, saved = results[:n_out], results[n_out:]
            ctx.save_for_backward(*(s.clone() if k in stale else s for k, s in enumerate(saved)))
            # An output nobody differentiated (the updated running statistics, an unused pooler output)
            # reaches backward as None, not as a tensor of zeros the engine would allocate and fill
            # for it (one fill kernel each on a GPU); backward makes zeros only where the graph reads them.
            ctx.set_materialize_grads(False)
            ctx.mark_non_differentiable(*(outs[j] for j in untracked))  # copied back outside autograd
            ctx.mark_non_differentiable(*(outs[i] for i in constant))
            if not wrt:  # no input reaches an output through floats (an argmax): nothing is, as in torch
                ctx.mark_non_differentiable(*outs)
            return tuple(outs)

        @staticmethod
        def backward(ctx, *grad_outputs):
            # contiguous, as traced: the backward graph was traced with ones_like tangents, and an op
            # that reads memory as it lies (view_as_complex in view_as_real's backward) needs the same
            # layout; ``out.sum()`` hands back an expanded, stride-0 gradient. torch's AOT Autograd
            # makes its tangents contiguous too.
            tangents = [g.contiguous() if g is not None else torch.zeros(tuple(like.shape), dtype=like.dtype,
                                                                         device=getattr(like, "device", None) or g_device(ctx))
                        for g, like in zip([*grad_outputs[:n_user], *(grad_outputs[j] for j in written)],
                                           tangent_like)]  # fmt: skip
            grads = bw(*ctx.saved_tensors, *tangents)
            full: list[Any] = [None] * n_args
            for i, g in zip(wrt, grads):
                full[i] = g
            return tuple(full)

    CompiledFunction.joint, CompiledFunction.partition = joint, part
    apply = compat.autograd_function_apply(CompiledFunction)  # CompiledFunction.apply, less per-call Python
    CompiledFunction.run = staticmethod(runtime_wrapper(apply, n_user, joint.mutated, joint.grad_mutated))
    return CompiledFunction


def _saved_before_write(part, n_out: int, mutated: list[int]) -> set[int]:
    """Positions among the saved tensors of inputs the epilogue writes: backward needs their old
    values (``y.sin_()``: cos of the old y), and the copy back would overwrite them, so the forward
    saves a copy. (torch's AOT Autograd saves the input itself; its backward then fails autograd's
    version check, "modified by an inplace operation".)"""
    placeholders = [n for n in part.forward.nodes if n.op == "placeholder"]
    written = {placeholders[i] for i in mutated}
    saved = list(part.forward.output_node().args[0])[n_out:]
    return {k for k, n in enumerate(saved) if n in written}


def g_device(ctx):
    saved = ctx.saved_tensors
    return saved[0].device if saved else None


def runtime_wrapper(apply, n_user: int, mutated: list[int], tracked: Collection[int] = ()):
    """``run(*args)``: ``apply(*args)``, then the mutation epilogue: copy updated inputs back (torch's
    ``runtime_wrappers.py`` does the same after the compiled forward). Returns the function's own outputs.

    The copies run outside autograd, except into an input of ``tracked`` that requires grad and is
    no leaf (an activation that ``y[:, 0] = 5`` wrote): autograd records that ``copy_``, as it records
    torch's epilogue, so a later use of the input sends its gradient through the compiled function's
    updated value (zero at column 0), not straight to the input's old history. A leaf that requires
    grad (a weight clamped under ``no_grad``) is written outside autograd, as torch writes it.

    Everything that does not depend on the values is decided once: without mutated inputs ``run`` is
    ``apply`` and a slice; with them, the first call groups the (input, updated value) pairs by dtype,
    device and size, and every call then copies each group with one :func:`course_lib.compat.foreach_copy`
    (ResNet's 18 batch-norm statistics: 2 multi-tensor kernels on a GPU, not 18 copies).
    """
    if not mutated:

        def run(*args):
            return apply(*args)[:n_user]

        return run
    plan: list = []  # [(input positions, output positions, batched?)], made on the first call
    recorded = [(i, n_user + k) for k, i in enumerate(mutated) if i in tracked]  # decided per call
    quiet = [(i, n_user + k) for k, i in enumerate(mutated) if i not in tracked]

    def run(*args):
        outs = apply(*args)
        for i, j in recorded:
            if torch.is_grad_enabled() and args[i].requires_grad and not args[i].is_leaf:
                args[i].copy_(outs[j])
            else:
                copy_back([args[i]], [outs[j]], [0])
        if not plan and quiet:
            plan.extend((ins, [quiet[k][1] for k in upd], batched) for ins, upd, batched
                        in copy_back_plan(args, [outs[j] for _, j in quiet], [i for i, _ in quiet], 0))  # fmt: skip
        with torch.no_grad():
            for ins, upd, batched in plan:
                dsts, srcs = [args[i] for i in ins], [outs[j] for j in upd]
                if batched:
                    compat.foreach_copy(dsts, srcs)
                else:
                    copy_back(dsts, srcs, list(range(len(dsts))))
        return outs[:n_user]

    return run


def copy_back_plan(args, updated, mutated: list[int], first: int) -> list[tuple[list[int], list[int], bool]]:
    """Group the copies ``args[mutated[k]] <- updated[k]``: pairs with the same dtype, device and size
    (and a dense layout) go into one batched copy; any other pair is copied on its own. Positions in
    the result index ``args`` and the full output tuple (``updated[k]`` is output ``first + k``)."""
    groups: dict = {}
    single = []
    for k, i in enumerate(mutated):
        dst, src = args[i], updated[k]
        if dst.shape == src.shape and dst.is_contiguous() and src.is_contiguous():
            groups.setdefault((dst.dtype, src.dtype, dst.device, src.device), []).append((i, first + k))
        else:
            single.append(([i], [first + k], False))
    batched = [([i for i, _ in pairs], [j for _, j in pairs], True) for pairs in groups.values()]
    return batched + single


def aot_function(fn: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
                 partition_method: str = "default") -> Callable:  # fmt: skip
    """Wrap ``fn`` (tensors in, a tensor or tuple of tensors out) so it runs through our AOT stack.

    The returned callable has ``.cache`` ({input key: CompiledFunction}); each CompiledFunction
    carries ``.joint`` and ``.partition`` for inspection.
    """
    cache: dict[tuple, Any] = {}

    def compiled(*args):
        key = _key(args)
        if key not in cache:
            cache[key] = aot_compile(fn, args, fw_compiler, bw_compiler, partition_method)
        outs = cache[key].run(*args)
        example = outs if len(outs) != 1 else outs[0]
        return example

    compiled.cache = cache
    compiled.__wrapped__ = fn
    return compiled
