"""What the C++ and Triton kernel generators share: scopes with CSE, invariance, argument names.

Teaches ``torch/_inductor/codegen/common.py`` (``Kernel``, ``CSE``, ``KernelArgs``: one
``tmpN`` per distinct expression, ``in_ptrN`` / ``out_ptrN`` / ``ksN`` argument names).

Position: :class:`KernelPlan` (scheduler.py) -> a backend's ``Kernel`` subclass
(codegen/cpp.py, codegen/triton.py) -> source text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy

from course_lib.inductor.ir import Const, IndexValue, Load, Op, nodes
from course_lib.inductor.scheduler import Acc
from course_lib.inductor.sizevars import _linear_terms, free_sizes, kernel_vars, prod


class Scope:
    """Lines at one loop level, with a CSE table (expression -> tmp name)."""

    def __init__(self, parent=None):
        self.lines: list[str] = []
        self.cse: dict = {}
        self.parent = parent

    def lookup(self, key):
        s = self
        while s is not None:
            if key in s.cse:
                return s.cse[key]
            s = s.parent
        return None


def depends_on(expr, symbols: set) -> bool:
    """Does the value change with any of ``symbols`` (the inner loop variables)? It does when an
    index it reads does (one pass over the expression DAG)."""
    return any(isinstance(e, (Load, IndexValue)) and bool(sympy.sympify(e.index).free_symbols & symbols)
               for e in nodes(expr))  # fmt: skip


def pointer_names(plan) -> dict[str, str]:
    """Buffer -> argument name: ``in_ptrN`` for buffers read, ``out_ptrN`` for buffers written."""
    ptrs = {b: f"in_ptr{i}" for i, b in enumerate(plan.reads)}
    ptrs.update({b: f"out_ptr{i}" for i, b in enumerate(plan.writes)})
    return ptrs


def plan_size_symbols(plan) -> list:
    """Size symbols a kernel needs as arguments (loop bounds, indices), in name order."""
    found: set = set()
    for size in plan.group[0] + plan.group[1]:
        found |= free_sizes(size)
    for phase in plan.phases:
        for item in phase.reductions + phase.stores:
            found |= _expr_sizes(item[2])
        for item in phase.stores:
            found |= free_sizes(item[1])
    for _name, index, expr, _ in plan.outer_stores:
        found |= free_sizes(index) | _expr_sizes(expr)
    return sorted(found, key=lambda s: (len(s.name), s.name))


def _expr_sizes(expr) -> set:
    if isinstance(expr, (Load, IndexValue)):
        out = free_sizes(expr.index)
        if isinstance(expr, Load):
            for _, e in expr.indirect:
                out |= _expr_sizes(e)
        return out
    if isinstance(expr, Op):
        return set().union(*[_expr_sizes(a) for a in expr.args]) if expr.args else set()
    return set()


@dataclass
class KernelArgs:
    """The argument list of one kernel: pointers, then one ``ksN`` per size symbol."""

    ptrs: dict  # buffer -> in_ptrN / out_ptrN
    sizes: list  # size symbols, in argument order

    @property
    def size_names(self) -> dict[str, str]:
        """Size symbol name -> its argument name (``s0`` -> ``ks0``, as Inductor's kernels)."""
        return {s.name: f"ks{i}" for i, s in enumerate(self.sizes)}


class Kernel:
    """State every generated kernel keeps: its plan, argument names, tmp counter, accumulators."""

    def __init__(self, name: str, plan):
        self.name, self.plan = name, plan
        self.args = KernelArgs(pointer_names(plan), plan_size_symbols(plan))
        self.ptrs = self.args.ptrs
        self.counter = 0
        self.accs: dict[str, str] = {}
        self.inner_syms = set(kernel_vars(plan.group)[1])

    def tmp(self) -> str:
        self.counter += 1
        return f"tmp{self.counter - 1}"

    def reuse(self, expr, scope: Scope, spell_const) -> str | None:
        """What a backend's ``emit`` returns without writing a line, else None: the name ``expr``
        already has in ``scope`` or an enclosing one (CSE), a reduction's accumulator, or a
        constant in the backend's spelling (``spell_const(value, dtype)``)."""
        hit = scope.lookup(expr)
        if hit:
            return hit
        if isinstance(expr, Acc):
            return self.accs[expr.buf]
        if isinstance(expr, Const):
            return spell_const(expr.value, expr.dtype)
        return None


# ---------------------------------------------------------------------------
# loop merging (SizeVarAllocator._simplify_loops)
# ---------------------------------------------------------------------------


def _plan_indices(plan) -> list:
    """Every index expression a kernel evaluates: loads, index values, stores."""
    found: list = []

    def walk(expr):
        if isinstance(expr, Load):
            found.append(sympy.sympify(expr.index))
            for _, e in expr.indirect:
                walk(e)
        elif isinstance(expr, IndexValue):
            found.append(sympy.sympify(expr.index))
        elif isinstance(expr, Op):
            for a in expr.args:
                walk(a)

    for phase in plan.phases:
        for item in phase.reductions:
            walk(item[2])
        for _buf, index, expr, _dtype in phase.stores:
            found.append(sympy.sympify(index))
            walk(expr)
    for _buf, index, expr, _dtype in plan.outer_stores:
        found.append(sympy.sympify(index))
        walk(expr)
    return found


def _mergeable(indices: list, outer_var, inner_var, inner_size) -> bool:
    """May loops ``outer_var`` (outside) and ``inner_var`` (trip count ``inner_size``) become one?

    Yes when every index uses them only as ``c * (inner_size * outer_var + inner_var)``: then
    the pair walks memory exactly as one loop of ``outer * inner`` steps would.
    """
    for index in indices:
        if not index.free_symbols & {outer_var, inner_var}:
            continue
        terms = _linear_terms(index)
        if terms is None:
            return False  # a // or % of the loop variables: the merged loop would need them back
        coeffs = terms[0]
        c_out, c_in = coeffs.get(outer_var, 0), coeffs.get(inner_var, 0)
        if sympy.expand(c_out - c_in * inner_size) != 0:
            return False
    return True


def _merge_dims(sizes: list, syms: list, indices: list) -> tuple[list, dict]:
    """Merge adjacent loops from the innermost out; returns (runs of original positions, {var: 0}).

    Each run becomes one loop over the product of its sizes, indexed by its innermost variable;
    the outer variables of a run are set to 0 in every index (their stride is folded in).
    """
    runs: list[list[int]] = []
    zero: dict = {}
    indices = list(indices)
    for d in reversed(range(len(sizes))):
        if runs:
            run = runs[-1]
            inner_var, run_size = syms[run[-1]], prod([sizes[k] for k in run])
            if _mergeable(indices, syms[d], inner_var, run_size):
                run.insert(0, d)
                zero[syms[d]] = sympy.Integer(0)
                indices = [i.xreplace({syms[d]: 0}) for i in indices]
                continue
        runs.append([d])
    return list(reversed(runs)), zero


def simplify_loops(plan):
    """The same kernel over fewer, longer loops (Inductor: ``SizeVarAllocator._simplify_loops``
    in torch/_inductor/sizevars.py, called when ``LoopBody`` is built in torch/_inductor/ir.py).

    Two neighbouring loops merge when every index strides over them as over one contiguous
    range. A CNN feature map ``[N, C, H, W]`` of 4x4 pixels then has an inner loop of 16 instead
    of 4, which gcc can vectorise. Reduction loops merge only with reduction loops and outer
    loops only with outer loops; in a kernel without reductions the last outer loops may merge
    into the inner one. Returns ``plan`` itself when nothing merges.
    """
    from course_lib.inductor.sizevars import subs_index

    outer, inner = list(plan.group[0]), list(plan.group[1])
    xs, rs = kernel_vars(plan.group)
    indices = _plan_indices(plan)
    pointwise = not plan.outer_stores and all(not p.reductions for p in plan.phases) and len(plan.phases) == 1
    if pointwise and outer:
        runs, zero = _merge_dims(outer + inner, xs + rs, indices)
        keep = runs[:-1] if inner else runs
        last = runs[-1:] if inner else []
        groups = ((keep, xs + rs, outer + inner), (last, xs + rs, outer + inner))
    else:
        ro, zo = _merge_dims(outer, xs, indices)
        ri, zi = _merge_dims(inner, rs, indices)
        zero = {**zo, **zi}
        groups = ((ro, xs, outer), (ri, rs, inner))
    new_sizes = [[prod([sizes[k] for k in run]) for run in runs] for runs, _, sizes in groups]
    if [len(s) for s in new_sizes] == [len(outer), len(inner)]:
        return plan
    new_group = (tuple(new_sizes[0]), tuple(new_sizes[1]))
    nx, nr = kernel_vars(new_group)
    mapping = dict(zero)
    for (runs, syms, _), new_vars in zip(groups, (nx, nr)):
        for run, v in zip(runs, new_vars):
            mapping[syms[run[-1]]] = v  # xreplace is simultaneous: x1 -> x0 and x0 -> 0 do not clash

    def index(e):
        return sympy.expand(sympy.sympify(e).xreplace(mapping))

    def body(e):
        return subs_index(e, mapping)

    phases = [
        dataclasses.replace(
            p,
            reductions=[(b, t, body(e), d) for b, t, e, d in p.reductions],
            stores=[(b, index(i), body(e), d) for b, i, e, d in p.stores],
        )
        for p in plan.phases
    ]
    outer_stores = [(b, index(i), body(e), d) for b, i, e, d in plan.outer_stores]
    return dataclasses.replace(plan, group=new_group, phases=phases, outer_stores=outer_stores)
