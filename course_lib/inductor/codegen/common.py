"""What the C++ and Triton kernel generators share: scopes with CSE, invariance, argument names.

Teaches ``torch/_inductor/codegen/common.py`` (``Kernel``, ``CSE``, ``KernelArgs``: one
``tmpN`` per distinct expression, ``in_ptrN`` / ``out_ptrN`` / ``ksN`` argument names).

Position: :class:`KernelPlan` (scheduler.py) -> a backend's ``Kernel`` subclass
(codegen/cpp.py, codegen/triton.py) -> source text.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from course_lib.inductor.ir import IndexValue, Load, Op
from course_lib.inductor.sizevars import free_sizes, kernel_vars


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
    """Does the value change with any of ``symbols`` (the inner loop variables)?"""
    if isinstance(expr, Load):
        return bool(sympy.sympify(expr.index).free_symbols & symbols) or any(
            depends_on(e, symbols) for _, e in expr.indirect
        )
    if isinstance(expr, IndexValue):
        return bool(sympy.sympify(expr.index).free_symbols & symbols)
    if isinstance(expr, Op):
        return any(depends_on(a, symbols) for a in expr.args)
    return False


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
