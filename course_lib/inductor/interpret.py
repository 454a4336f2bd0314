"""A reference executor for kernel plans: run the loop IR with numpy, no compiler involved.

Plays the role of Inductor's ``V.ops`` being swapped for a real handler: the same kernel plan
the C++ and Triton generators print is evaluated here over whole index grids, so tests can
check lowering and every fusion rung against eager on hundreds of random graphs quickly.
``compile_graph(..., codegen="python")`` uses it in place of compiled kernels.
"""

from __future__ import annotations

import functools

import numpy as np
import sympy

from course_lib.inductor.ir import Const, IndexValue, Load
from course_lib.inductor.lowering import Unsupported
from course_lib.inductor.scheduler import Acc, KernelPlan
from course_lib.inductor.sizevars import FloorDiv, Max, Min, ModIdx, kernel_vars

NP = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "int16": np.int16,
      "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}  # fmt: skip


def _erf(x):
    from scipy.special import erf

    return erf(x).astype(x.dtype)


NUMPY_RULES = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide, "neg": np.negative,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a), "tanh": np.tanh, "erf": _erf,
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "relu": lambda a: np.maximum(a, 0), "abs": np.abs,
    "reciprocal": lambda a: 1 / a, "sin": np.sin, "cos": np.cos, "log1p": np.log1p, "expm1": np.expm1,
    "floor": np.floor, "ceil": np.ceil, "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "logical_not": np.logical_not, "logical_and": np.logical_and, "logical_or": np.logical_or, "bitwise_not": np.invert,
    "where": np.where, "fma": lambda a, b, c: a * b + c,
}  # fmt: skip
NUMPY_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


def eval_index(expr, env: dict):
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return np.int64(int(expr))
    if expr.is_Symbol:
        return env[expr]
    a = [eval_index(x, env) for x in expr.args]
    if isinstance(expr, FloorDiv):
        return np.floor_divide(a[0], a[1])
    if isinstance(expr, ModIdx):
        return np.mod(a[0], a[1])
    if isinstance(expr, (Max, Min)):
        return functools.reduce(np.maximum if isinstance(expr, Max) else np.minimum, a)
    if expr.is_Add:
        return sum(a[1:], a[0])
    if expr.is_Mul:
        out = a[0]
        for x in a[1:]:
            out = out * x
        return out
    raise ValueError(f"cannot evaluate index {expr}")


class PlanInterpreter:
    def __init__(self, plan: KernelPlan, names: list[str]):
        self.plan, self.names = plan, names

    def value(self, expr, env, mem, accs):
        if isinstance(expr, Acc):
            return accs[expr.buf]
        if isinstance(expr, Const):
            return np.array(expr.value, dtype=NP[expr.dtype])
        if isinstance(expr, IndexValue):
            return np.asarray(eval_index(expr.index, env)).astype(NP[expr.dtype])
        if isinstance(expr, Load):
            env2 = dict(env)
            for s, e in expr.indirect:
                env2[s] = self.value(e, env, mem, accs).astype(np.int64)
            return mem[expr.buf][eval_index(expr.index, env2)]
        args = [self.value(a, env, mem, accs) for a in expr.args]
        if expr.op == "to_dtype":
            return np.asarray(args[0]).astype(NP[expr.dtype])
        with np.errstate(all="ignore"):
            out = NUMPY_RULES[expr.op](*args)
        return np.asarray(out).astype(NP[expr.dtype], copy=False)

    def __call__(self, *tensors):
        import torch

        mem = {}
        for name, t in zip(self.names, tensors):
            extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0)
            mem[name] = torch.as_strided(t, (extent,), (1,), t.storage_offset()).numpy()
        outer, inner = self.plan.group
        xs, rs = kernel_vars(self.plan.group)
        shape = outer + inner
        grids = np.indices(shape, dtype=np.int64) if shape else []
        env = {v: grids[d] for d, v in enumerate(xs + rs)}
        outer_env = {v: grids[d][(...,) + (0,) * len(inner)][(...,) + (None,) * len(inner)] for d, v in enumerate(xs)}
        full = shape or ()
        accs = {}
        red_axes = tuple(range(len(outer), len(shape)))
        for phase in self.plan.phases:
            for buf, rtype, expr, dtype in phase.reductions:
                v = np.broadcast_to(self.value(expr, env, mem, accs), full)
                accs[buf] = NUMPY_REDUCE[rtype](v, axis=red_axes, keepdims=True).astype(NP[dtype]) if red_axes else v
            for buf, index, expr, _dtype in phase.stores:
                v = np.broadcast_to(self.value(expr, env, mem, accs), full)
                idx = np.broadcast_to(eval_index(index, env), full)
                mem[buf][idx] = v
        oshape = outer + (1,) * len(inner)
        for buf, index, expr, _dtype in self.plan.outer_stores:
            v = np.broadcast_to(self.value(expr, outer_env, mem, accs), oshape)
            idx = np.broadcast_to(eval_index(index, outer_env), oshape)
            mem[buf][idx] = v


def build(kernels):
    return {k.name: PlanInterpreter(k.plan, k.plan.reads + k.plan.writes) for k in kernels}


def backend(kernels, graph):
    """The ``python`` backend of :data:`course_lib.inductor.compile_fx.BACKENDS` (static sizes only)."""
    if graph.dynamic:
        raise Unsupported("the numpy reference executor runs static sizes only (dynamic shapes: use codegen='cpp')")
    return "# kernels run by course_lib.inductor.interpret (numpy)", build(kernels), False
