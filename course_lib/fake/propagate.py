"""Shape rules for the primitive set, and propagation over a Graph (teaches the meta functions
in torch/_meta_registrations.py and torch/_refs/, and torch/fx/passes/fake_tensor_prop.py).

Each rule takes the ShapeEnv and the (fake) arguments and returns the output FakeTensor. Rules
never compute data; they may add guards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import sympy
import torch

from course_lib.fake.tensor import FakeTensor, ShapeEnv, Size, _simp, fake
from course_lib.fx import Graph, Node, map_arg

aten = torch.ops.aten
RULES: dict = {}
COMPARE = {aten.gt.Scalar, aten.gt.Tensor, aten.lt.Scalar, aten.lt.Tensor, aten.ge.Scalar, aten.le.Scalar,
           aten.eq.Scalar, aten.eq.Tensor, aten.ne.Scalar}  # fmt: skip
POINTWISE = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.neg.default, aten.exp.default,
             aten.log.default, aten.tanh.default, aten.sqrt.default, aten.rsqrt.default, aten.sin.default,
             aten.cos.default, aten.erf.default, aten.pow.Tensor_Scalar, aten.maximum.default,
             aten.minimum.default, aten.where.self} | COMPARE  # fmt: skip


def rule(*ops) -> Callable:
    def wrap(fn):
        for op in ops:
            RULES[op] = fn
        return fn

    return wrap


def broadcast_shapes(env: ShapeEnv, a: tuple[Size, ...], b: tuple[Size, ...]) -> tuple[Size, ...]:
    """NumPy broadcasting, symbolically: a size-1 side takes the other; else they must be equal."""
    out = []
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            env.guard_eq(x, y, "in broadcasting")
            out.append(x)
    return tuple(out)


@rule(*POINTWISE)
def pointwise(env: ShapeEnv, op, *args, **kwargs) -> FakeTensor:
    tensors = [a for a in args if isinstance(a, FakeTensor)]
    shape: tuple[Size, ...] = ()
    for t in tensors:
        shape = broadcast_shapes(env, shape, t.shape)
    dtype = torch.bool if op in COMPARE else [t.dtype for t in tensors if t.dtype != torch.bool][-1]
    out = fake(shape, dtype, tensors[0].device)
    full = [t for t in tensors if t.shape == shape and 0 not in t.stride]
    if full and all(isinstance(x, int) for x in full[0].stride):  # keep a permuted input's layout, as torch
        order = sorted(range(len(shape)), key=lambda d: -full[0].stride[d])
        strides, acc = [0] * len(shape), 1
        for d in reversed(order):
            strides[d], acc = acc, acc * shape[d]
        out = dataclasses.replace(out, stride=tuple(strides))
    return out


@rule(aten.scalar_tensor.default)
def scalar_tensor(env: ShapeEnv, op, value, dtype=torch.float32, **kwargs) -> FakeTensor:
    return fake((), dtype or torch.float32)


@rule(aten._to_copy.default)
def to_copy(env: ShapeEnv, op, x: FakeTensor, dtype=None, **kwargs) -> FakeTensor:
    return fake(x.shape, dtype or x.dtype, x.device)


def _reduce(x: FakeTensor, dims, keepdim: bool) -> tuple[Size, ...]:
    dims = {d % max(x.dim(), 1) for d in (dims or range(x.dim()))}
    return tuple(1 if i in dims else s for i, s in enumerate(x.shape) if keepdim or i not in dims)


@rule(aten.sum.dim_IntList, aten.amax.default)
def reduction(env: ShapeEnv, op, x: FakeTensor, dims=None, keepdim=False, **kwargs) -> FakeTensor:
    return fake(_reduce(x, dims, keepdim), x.dtype, x.device)


@rule(aten.view.default)
def view(env: ShapeEnv, op, x: FakeTensor, shape) -> FakeTensor:
    shape = list(shape)
    if -1 in shape:
        known = _simp(sympy.Mul(*[s for s in shape if s != -1]))
        shape[shape.index(-1)] = _simp(sympy.sympify(x.numel()) / known)
    env.guard_eq(x.numel(), _simp(sympy.Mul(*shape)), "in view (numel must not change)")
    return fake(shape, x.dtype, x.device)


@rule(aten.permute.default)
def permute(env: ShapeEnv, op, x: FakeTensor, perm) -> FakeTensor:
    # a view: sizes and strides are permuted, the data is not moved
    return FakeTensor(tuple(x.shape[p] for p in perm), x.dtype, tuple(x.stride[p] for p in perm), x.device)


@rule(aten.expand.default)
def expand(env: ShapeEnv, op, x: FakeTensor, shape, **kwargs) -> FakeTensor:
    lead = len(shape) - x.dim()
    sizes, strides = [], []
    for i, s in enumerate(shape):
        old = x.shape[i - lead] if i >= lead else 1
        if old != 1:
            env.guard_eq(old, s, "in expand")
        sizes.append(_simp(s))
        strides.append(x.stride[i - lead] if i >= lead and old != 1 else 0)  # broadcast dims: stride 0
    return FakeTensor(tuple(sizes), x.dtype, tuple(strides), x.device)


@rule(aten.mm.default, aten.bmm.default)
def matmul(env: ShapeEnv, op, a: FakeTensor, b: FakeTensor) -> FakeTensor:
    env.guard_eq(a.shape[-1], b.shape[-2], f"in {op} (inner sizes)")
    batch = a.shape[:-2]
    for x, y in zip(a.shape[:-2], b.shape[:-2]):
        env.guard_eq(x, y, f"in {op} (batch sizes)")
    return fake((*batch, a.shape[-2], b.shape[-1]), a.dtype, a.device)


def propagate(graph: Graph, *inputs: FakeTensor, env: ShapeEnv | None = None) -> tuple[list, ShapeEnv]:
    """Run the shape rules over ``graph``; sets ``node.meta["fake"]``; returns (outputs, env)."""
    env = env or ShapeEnv()
    vals: dict[Node, object] = {}
    pending = list(inputs)
    for node in graph.nodes:
        if node.op == "placeholder":
            vals[node] = pending.pop(0)
        elif node.op == "call_function":
            if node.target not in RULES:
                raise KeyError(f"no shape rule for {node.target} (node {node.name}); decompose the graph first")
            args, kwargs = map_arg(node.args, vals.get), map_arg(node.kwargs, vals.get)
            try:
                vals[node] = RULES[node.target](env, node.target, *args, **kwargs)
            except ValueError as exc:
                raise ValueError(f"{exc} at node {node.name}: {node.format_node()}") from exc
        elif node.op == "output":
            out = map_arg(node.args[0], vals.get)
            for n in graph.nodes:
                if n in vals:
                    n.meta["fake"] = vals[n]
            return (list(out) if isinstance(out, (tuple, list)) else [out]), env
    raise ValueError("graph has no output node")


def trace_dynamic(fn, *args: torch.Tensor, dynamic: dict[int, tuple[int, ...]] | None = None, duck: bool = True):
    """Trace ``fn`` to primitives, then propagate fake inputs whose ``dynamic`` dims are symbolic.

    ``dynamic`` maps argument index -> dims (default: dim 0 of argument 0, a dynamic batch).
    Returns (graph, output FakeTensors, ShapeEnv with guards).
    """
    from course_lib import decomp

    dynamic = {0: (0,)} if dynamic is None else dynamic
    graph = decomp.trace(fn, *args)
    env = ShapeEnv(duck=duck)
    fakes = [env.from_tensor(a, dynamic.get(i, ()), name=f"arg{i}") for i, a in enumerate(args)]
    outs, env = propagate(graph, *fakes, env=env)
    return graph, outs, env
