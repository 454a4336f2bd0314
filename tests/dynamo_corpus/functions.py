"""Several hundred small functions run through course_lib.dynamo by tests/test_dynamo_functions.py.

Written for this course in the spirit of PyTorch's test/dynamo/test_functions.py: each function
takes a few small tensors (or containers of them), mixes tensor ops with ordinary Python
(containers and their methods, builtins, closures, control flow on constants, mutation,
generators, ``with``, ``try``...), and returns something compared with eager Python.
Some constructs are deliberately outside what course_lib.dynamo captures: for those the test
wants a graph break with a reason and still the eager result, never a crash or a wrong value.

``CASES`` is a list of ``(name, fn, make_args)``; ``make_args()`` builds fresh inputs each call
(several functions mutate their inputs, and the test compares the inputs afterwards too).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import math
import operator
import typing

import torch
import torch.nn.functional as F

CASES: list[tuple[str, typing.Callable, typing.Callable[[], tuple]]] = []


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def two():
    return (t(3, 4), t(3, 4, seed=1))


def case(make_args=two, name=None):
    """Register ``fn`` with the factory of its arguments."""

    def register(fn):
        CASES.append((name or fn.__name__, fn, make_args))
        return fn

    return register


def add_case(name, fn, make_args=two):
    CASES.append((name, fn, make_args))


GLOBAL_SCALE = 2.5
GLOBAL_LIST = [1.0, 2.0, 3.0]
GLOBAL_DICT = {"w": 0.5, "b": -1.0}
Point = collections.namedtuple("Point", ["x", "y"])


# ============================================================ 1. tensor arithmetic and torch calls
for _sym, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
                  ("pow", lambda a, b: a.abs() ** b), ("max", torch.maximum), ("min", torch.minimum),
                  ("atan2", torch.atan2), ("hypot", torch.hypot), ("lt", operator.lt), ("ge", operator.ge),
                  ("eq", operator.eq)]:  # fmt: skip

    def _binary(a, b, _op=_op):
        return _op(a, b)

    def _with_const(a, b, _op=_op):
        return _op(a, 2.0), _op(3, b)

    add_case(f"binary_{_sym}", _binary)
    add_case(f"binary_const_{_sym}", _with_const)

for _name in ["sin", "cos", "tanh", "sigmoid", "relu", "exp", "abs", "neg", "floor", "ceil", "round", "sign", "square",
              "erf", "log1p", "expm1", "trunc", "frac", "reciprocal", "rsqrt"]:  # fmt: skip

    def _unary(a, b, _name=_name):
        return getattr(torch, _name)(a) + b

    def _method(a, b, _name=_name):
        return getattr(a.abs() + 1, _name)()

    add_case(f"unary_{_name}", _unary)
    add_case(f"method_{_name}", _method)

for _red in ["sum", "mean", "amax", "amin", "prod", "std", "var", "logsumexp", "norm", "argmax"]:

    def _reduce(a, b, _red=_red):
        kw = {} if _red == "norm" else {"dim": 1}
        return getattr(torch, _red)(a * b, **kw)

    add_case(f"reduce_{_red}", _reduce)

for _fn in [F.gelu, F.silu, F.softplus, F.elu, F.leaky_relu, F.hardtanh, F.logsigmoid, F.softsign, F.mish, F.relu6]:

    def _act(a, b, _fn=_fn):
        return _fn(a) * b

    add_case(f"functional_{_fn.__name__}", _act)


@case()
def softmax_dim(a, b):
    return F.softmax(a, dim=-1) + F.log_softmax(b, dim=0)


@case()
def matmul_t(a, b):
    return a @ b.t()


@case()
def cat_stack(a, b):
    return torch.cat([a, b], dim=0).sum(0) + torch.stack((a, b)).mean(0).sum(0)


@case()
def where_clamp(a, b):
    return torch.where(a > 0, a, b).clamp(-0.5, 0.5)


@case()
def view_reshape(a, b):
    return a.view(-1).reshape(4, 3) + b.flatten().view(4, 3)


@case()
def transpose_permute(a, b):
    return a.transpose(0, 1) * b.permute(1, 0)


@case()
def slicing(a, b):
    return a[1:, ::2] + b[:-1, 1::2]


@case()
def index_none_ellipsis(a, b):
    return a[None, ..., 0] * b[:, None, 1:2].sum()


@case()
def chunk_split(a, b):
    x, y = a.chunk(2, dim=1)
    p, q = torch.split(b, [1, 3], dim=1)
    return x * y + p * q.sum(1, keepdim=True)


@case()
def unbind_loop(a, b):
    out = 0
    for row in a.unbind(0):
        out = out + row
    return out * b[0]


@case()
def new_tensors(a, b):
    return torch.zeros_like(a) + torch.ones(3, 4) * b + torch.full((3, 4), 2.0) + a.new_ones(4)


@case()
def arange_linspace(a, b):
    return a + torch.arange(4.0) + torch.linspace(0, 1, 4)


@case()
def dtype_casts(a, b):
    return (a.to(torch.float64) + b.double()).float() + a.int().float()


@case()
def type_as_ops(a, b):
    return a.type_as(b) * (a > b).type_as(a)


@case()
def expand_repeat(a, b):
    return a[:, :1].expand(3, 4) + b[:1].repeat(3, 1)


@case()
def einsum_bmm(a, b):
    return torch.einsum("ij,kj->ik", a, b) + torch.bmm(a[None], b.t()[None])[0]


@case()
def cumsum_sort(a, b):
    values, idx = torch.sort(a, dim=1)
    return values.cumsum(1) + idx.float() + torch.topk(b, 2, dim=1).values.sum()


@case()
def masked_fill(a, b):
    return a.masked_fill(b > 0, 0.0)


@case()
def gather_scatter(a, b):
    idx = torch.tensor([[0, 1], [1, 2], [2, 3]])
    return torch.gather(a, 1, idx) + b[:, :2]


@case()
def tensor_attributes(a, b):
    return a * a.ndim + b * a.shape[1] + a.numel() + len(b) + a.dim() + a.size(0) + a.size()[1]


@case()
def dtype_device_checks(a, b):
    if a.dtype == torch.float32 and a.device.type == "cpu" and not a.requires_grad:
        return a + b
    return a - b


@case()
def is_floating(a, b):
    return a * 2 if a.is_floating_point() else b


@case()
def tensor_kwargs(a, b):
    return torch.sum(a, dim=1, keepdim=True) + torch.mean(b, 0, keepdim=True)


@case()
def inplace_add(a, b):
    a.add_(b)
    return a * 2


@case()
def inplace_on_intermediate(a, b):
    x = a * 2
    x.mul_(3)
    return x + b


@case()
def setitem_tensor(a, b):
    a[0] = b[1]
    return a.sum()


@case()
def augmented_tensor(a, b):
    a += b
    a *= 2
    return a


@case()
def item_break(a, b):
    s = a.sum().item()
    return b * s


@case()
def tolist_break(a, b):
    return sum(a[0].tolist()) + b


@case()
def branch_on_tensor(a, b):
    if a.sum() > b.sum():
        return a
    return b


@case()
def bool_of_tensor(a, b):
    return a + 1 if bool((a > 100).any()) else b - 1


@case()
def int_float_of_tensor(a, b):
    return b * float(a.max()) + int(a.argmax())


# ============================================================ 2. Python values and constants
@case()
def const_arith(a, b):
    k = (3 + 4) * 2 // 3 % 5 - 2**3
    return a * k + b / (k or 1)


@case()
def math_module(a, b):
    return a * math.sqrt(2) + b * math.pi + math.floor(2.7) + math.log(8, 2)


@case()
def global_scalars(a, b):
    return a * GLOBAL_SCALE + b * GLOBAL_DICT["w"] + GLOBAL_DICT["b"]


@case()
def global_list_loop(a, b):
    for w in GLOBAL_LIST:
        a = a * w
    return a + b


@case()
def string_ops(a, b):
    name = "layer" + str(2)
    if name.startswith("layer") and name.upper() == "LAYER2":
        return a * len(name)
    return b


@case()
def fstrings(a, b):
    key = f"{'x'}_{3:02d}_{1.5:.1f}"
    return a * len(key) + b


@case()
def string_format_method(a, b):
    return a * len(f"{1}-{22}") + b


@case()
def tuple_ops(a, b):
    t1 = (1, 2, 3)
    t2 = t1 + (4,)
    return a * len(t2) + b * t2[-1] + t2.index(3) + t1.count(2)


@case()
def compare_chain(a, b):
    x = 3
    if 1 < x < 5 and not (x == 4) or x is None:
        return a + b
    return a - b


@case()
def none_checks(a, b, c=None):
    if c is None:
        c = b
    return a + c


@case()
def walrus(a, b):
    if (n := a.shape[0]) > 2:
        return a * n
    return b


@case()
def ternary_const(a, b):
    return a if a.shape[0] == 3 else b


@case()
def builtins_fold(a, b):
    return a * abs(-2) + b * max(1, 3) + min(4, 2) + round(2.6) + pow(2, 3) + divmod(7, 2)[0]


@case()
def sorted_reversed_consts(a, b):
    ks = sorted([3, 1, 2], reverse=True)
    rs = list(reversed(ks))
    return a * ks[0] + b * rs[0]


@case()
def any_all_consts(a, b):
    if any([0, 0, 1]) and all(x > 0 for x in [1, 2]):
        return a
    return b


@case()
def isinstance_builtins(a, b):
    out = a
    for v in [1, 2.0, "s", None, (1,), [2]]:
        if isinstance(v, (int, float)):
            out = out + v
        elif isinstance(v, str):
            out = out * 2
    return out + b


@case()
def isinstance_tensor(a, b):
    return a + 1 if isinstance(a, torch.Tensor) and not isinstance(b, list) else b


@case()
def type_checks(a, b):
    return a * 2 if int is int and type(a) is torch.Tensor else b


@case()
def callable_check(a, b):
    return a + b if callable(torch.sin) and not callable(3) else a - b


@case()
def hasattr_getattr(a, b):
    if hasattr(a, "shape") and a.ndim == 2:
        return torch.relu(a) + b.sum()
    return b


@case()
def getattr_default(a, b):
    return a * getattr(b, "missing_attr", 3)


@case()
def slice_objects(a, b):
    s = slice(1, 3)
    return a[:, s] + b[s, :2].t()[:, :2].sum()


@case()
def range_ops(a, b):
    r = range(1, 10, 3)
    return a * len(r) + b * r[1] + sum(r) + (4 in r)


@case()
def bool_ops(a, b):
    flag = True and not False
    return a * int(flag) + b * (flag or 0)


@case()
def chained_methods_const(a, b):
    return a * "a,b,c".split(",").index("c") + b


@case()
def hash_and_id(a, b):
    return a * (hash(3) == 3) + b


@case()
def ord_chr(a, b):
    return a * (ord(chr(65)) - 64) + b


@case()
def dunder_calls(a, b):
    return a.__add__(b).__mul__(2)


@case()
def operator_module(a, b):
    return operator.add(a, b) * operator.getitem([1, 2, 3], 2)


@case()
def int_float_consts(a, b):
    return a * int("3") + b * float("1.5") + bool(0)


# ============================================================ 3. lists
@case()
def list_build_index(a, b):
    xs = [a, b, a * b]
    return xs[0] + xs[-1] + xs[1:][0]


@case()
def list_append_extend(a, b):
    xs = []
    xs.append(a)
    xs.extend([b, a + b])
    xs += [b * 2]
    return sum(xs[1:], xs[0])


@case()
def list_insert_pop(a, b):
    xs = [a, b]
    xs.insert(1, a * 2)
    last = xs.pop()
    first = xs.pop(0)
    return last + first + xs[0]


@case()
def list_remove_consts(a, b):
    ks = [1, 2, 3, 2]
    ks.remove(2)
    return a * ks[1] + b * len(ks)


@case()
def list_clear(a, b):
    xs = [a, b]
    xs.clear()
    xs.append(a - b)
    return xs


@case()
def list_reverse_sort(a, b):
    ks = [3, 1, 2]
    ks.sort()
    ks.reverse()
    return a * ks[0] + b * ks[-1]


@case()
def list_copy_independent(a, b):
    xs = [a]
    ys = xs.copy()
    ys.append(b)
    return len(xs), len(ys), ys[-1] * 2


@case()
def list_alias(a, b):
    xs = [a]
    ys = xs
    ys.append(b)
    return len(xs), xs[-1] + 1


@case()
def list_slice_assign(a, b):
    xs = [a, a, a, a]
    xs[1:3] = [b, b * 2]
    return xs[0] + xs[1] + xs[2] + xs[3]


@case()
def list_slice_assign_grow(a, b):
    xs = [a, b]
    xs[1:] = [b, b + 1, b + 2]
    return len(xs), xs[-1]


@case()
def list_slice_delete(a, b):
    xs = [a, b, a + b, a - b]
    del xs[1:3]
    del xs[0]
    return xs


@case()
def list_setitem(a, b):
    xs = [a, b]
    xs[0] = xs[1] * 3
    xs[-1] = a
    return xs[0] + xs[1]


@case()
def list_mul_concat(a, b):
    xs = [a] * 3 + [b]
    return sum(xs)


@case()
def list_comprehension(a, b):
    return sum([a * i for i in range(3)]) + b


@case()
def nested_comprehension(a, b):
    return sum([a * i + b * j for i in range(2) for j in range(2) if i != j])


@case()
def list_of_lists(a, b):
    grid = [[a, b], [b, a]]
    return grid[0][1] + grid[1][0]


@case()
def list_in_consts(a, b):
    return a * (2 in [1, 2, 3]) + b * (5 not in [1, 2])


@case()
def list_len_and_bool(a, b):
    xs = []
    if not xs:
        xs.append(a)
    return xs[0] * len(xs) + b


@case()
def list_index_count_consts(a, b):
    ks = [5, 6, 5]
    return a * ks.index(6) + b * ks.count(5)


@case()
def list_unpack_star(a, b):
    first, *middle, last = [a, b, a * 2, b * 2]
    return first + last + len(middle)


@case()
def list_unpack_star_head(a, b):
    *head, tail = (a, b, a + b)
    return sum(head) * tail


@case()
def list_extend_generator_expr(a, b):
    xs = [a]
    xs.extend(b * i for i in range(2))
    return xs


@case(lambda: ([t(3), t(3, seed=1), t(3, seed=2)],))
def input_list_sum(xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total


@case(lambda: ([t(3), t(3, seed=1)],))
def input_list_append(xs):
    xs.append(xs[0] * 2)
    return len(xs)


@case(lambda: ([t(3), t(3, seed=1)],))
def input_list_pop(xs):
    y = xs.pop()
    return y * 2, len(xs)


@case(lambda: ([t(3), t(3, seed=1)],))
def input_list_setitem(xs):
    xs[0] = xs[1] + 1
    return xs[0] * 2


@case(lambda: ([t(3), t(3, seed=1), t(3, seed=2)],))
def input_list_slice_assign(xs):
    xs[:2] = [xs[2]]
    return len(xs)


@case(lambda: ([t(3), t(3, seed=1)],))
def input_list_clear(xs):
    out = xs[0] + xs[1]
    xs.clear()
    return out


@case(lambda: ([t(3), t(3, seed=1)],))
def input_list_insert_then_read(xs):
    xs.insert(0, xs[1] * 3)
    return xs[0] + xs[2]


@case(lambda: ([t(3), t(3, seed=1)], t(3, seed=2)))
def input_list_extend(xs, y):
    xs.extend([y, y * 2])
    return xs[-1]


@case(lambda: ([1, 2, 3], t(3)))
def input_int_list(ks, x):
    return x * sum(ks) + x * max(ks)


@case(lambda: ((t(3), t(3, seed=1)),))
def input_tuple(pair):
    a, b = pair
    return a * b


@case(lambda: ([t(3), t(3, seed=1)],))
def input_list_returned(xs):
    xs.append(xs[0] + xs[1])
    return xs


@case()
def list_builtin_from_tuple(a, b):
    xs = list((a, b))
    xs.append(a)
    return tuple(xs)


@case()
def iter_next(a, b):
    it = iter([a, b, a * b])
    first = next(it)
    second = next(it)
    return first + second + next(it)


@case()
def next_default(a, b):
    it = iter([a])
    next(it)
    return next(it, b)


@case()
def enumerate_start(a, b):
    out = a
    for i, x in enumerate([a, b], start=1):
        out = out + x * i
    return out


@case()
def zip_lists(a, b):
    return sum(x * y for x, y in zip([a, b], [b, a]))


@case()
def map_lambda(a, b):
    return list(map(lambda x: x * 2, [a, b]))


@case()
def map_builtin(a, b):
    return sum(map(abs, [-1, 2, -3])) * a + b


@case()
def filter_consts(a, b):
    ks = list(filter(lambda k: k % 2, range(6)))
    return a * len(ks) + b * ks[-1]


@case()
def filter_none(a, b):
    return a * len(list(filter(None, [0, 1, 2, 0]))) + b


@case()
def reversed_list(a, b):
    out = []
    for x in reversed([a, b]):
        out.append(x + 1)
    return out


@case()
def sorted_keys(a, b):
    d = {"b": b, "a": a}
    return [d[k] for k in sorted(d)]


@case()
def min_max_consts(a, b):
    return a * min([3, 1, 2]) + b * max(3, 9, 4)


@case()
def min_max_tensors(a, b):
    return max(a.sum(), b.sum())


@case()
def sum_start_int(a, b):
    return sum([1, 2, 3], start=10) * a + b


@case()
def sum_start_tensor(a, b):
    return sum([a, b], start=b)


@case()
def sum_start_positional(a, b):
    return sum([a, a], b)


@case()
def sum_of_generator(a, b):
    return sum(a * i for i in range(4)) + b


@case()
def list_equality_consts(a, b):
    return a * ([1, 2] == [1, 2]) + b * ((1, 2) < (1, 3))


@case()
def list_identity(a, b):
    xs = [a]
    ys = xs
    return a * (xs is ys) + b * (xs != [a])


# ============================================================ 4. dicts
@case()
def dict_build_get(a, b):
    d = {"a": a, "b": b}
    return d["a"] + d.get("b") + d.get("c", a)


@case()
def dict_setitem_len(a, b):
    d = {}
    d["x"] = a
    d["y"] = b
    d["x"] = d["x"] * 2
    return d["x"] + d["y"] * len(d)


@case()
def dict_setdefault(a, b):
    d = {"a": a}
    d.setdefault("a", b)
    v = d.setdefault("b", b * 2)
    return d["a"] + v + d["b"]


@case()
def dict_setdefault_list(a, b):
    groups = {}
    for k, x in [("p", a), ("q", b), ("p", b)]:
        groups.setdefault(k, []).append(x)
    return len(groups["p"]), groups["p"][1] + groups["q"][0]


@case()
def dict_update(a, b):
    d = {"a": a}
    d.update({"b": b})
    d.update(c=a + b)
    d.update([("d", a * 2)])
    return d


@case()
def dict_clear(a, b):
    d = {"a": a, "b": b}
    d.clear()
    d["c"] = a - b
    return d


@case()
def dict_pop(a, b):
    d = {"a": a, "b": b}
    x = d.pop("a")
    y = d.pop("zz", b * 3)
    return x + y, list(d)


@case()
def dict_popitem(a, b):
    d = {"a": a, "b": b}
    k, v = d.popitem()
    return v * 2, k, len(d)


@case()
def dict_del(a, b):
    d = {"a": a, "b": b}
    del d["a"]
    return d


@case()
def dict_keys_view_live(a, b):
    d = {"a": a}
    keys = d.keys()
    d["b"] = b
    return len(keys), list(keys)


@case()
def dict_values_view_live(a, b):
    d = {"a": a}
    vals = d.values()
    d["b"] = b
    return sum(vals)


@case()
def dict_items_loop(a, b):
    d = {"a": a, "b": b}
    out = 0
    for k, v in d.items():
        out = out + v * len(k)
    return out


@case()
def dict_iterate_keys(a, b):
    d = {"x": a, "yy": b}
    return [d[k] * len(k) for k in d]


@case()
def dict_contains(a, b):
    d = {"a": a}
    if "a" in d and "b" not in d:
        return d["a"] + b
    return b


@case()
def dict_comprehension(a, b):
    d = {f"k{i}": a * i for i in range(3)}
    return d["k2"] + b


@case()
def dict_copy_independent(a, b):
    d = {"a": a}
    e = d.copy()
    e["b"] = b
    return len(d), len(e)


@case()
def dict_alias(a, b):
    d = {"a": a}
    e = d
    e["b"] = b
    return len(d), d["b"] * 2


@case()
def dict_builtin(a, b):
    d = dict(a=a, b=b)
    e = dict([("c", a)])
    f = dict(d, z=b)
    return d["a"] + e["c"] + f["z"]


@case()
def dict_merge_operator(a, b):
    d = {"a": a} | {"b": b}
    return d["a"] * d["b"]


@case()
def dict_unpack_literal(a, b):
    base = {"a": a}
    d = {**base, "b": b, **{"c": a + b}}
    return d


@case()
def kwargs_unpack_call(a, b):
    opts = {"dim": 1, "keepdim": True}
    return torch.sum(a, **opts) + b


def _kw_helper(x, *, scale=1.0, shift=0.0):
    return x * scale + shift


@case()
def double_star_merge(a, b):
    return _kw_helper(a, **{"scale": 2.0}, **{"shift": 1.0}) + b


@case()
def ordered_dict_basic(a, b):
    d = collections.OrderedDict()
    d["b"] = b
    d["a"] = a
    return list(d.keys()), d["a"] + d["b"]


@case()
def ordered_dict_move_to_end(a, b):
    d = collections.OrderedDict([("a", a), ("b", b)])
    d.move_to_end("a")
    return list(d), type(d).__name__


@case()
def ordered_dict_returned(a, b):
    d = collections.OrderedDict(a=a)
    d["b"] = b * 2
    return d


@case()
def defaultdict_list(a, b):
    d = collections.defaultdict(list)
    d["x"].append(a)
    d["x"].append(b)
    d["y"].append(a * b)
    return len(d["x"]), d["y"][0], sorted(d)


@case()
def defaultdict_int_counter(a, b):
    counts = collections.defaultdict(int)
    for k in "abca":
        counts[k] += 1
    return a * counts["a"] + b * counts["c"]


class PlainDictSub(dict):
    pass


@case()
def dict_subclass_plain(a, b):
    d = PlainDictSub(a=a)
    d["b"] = b
    return type(d).__name__, d["a"] + d["b"]


@case(lambda: ({"a": t(3), "b": t(3, seed=1)},))
def input_dict_read(d):
    return d["a"] + d["b"]


@case(lambda: ({"a": t(3), "b": t(3, seed=1)},))
def input_dict_setitem(d):
    d["c"] = d["a"] * 2
    return len(d)


@case(lambda: ({"a": t(3)},))
def input_dict_setdefault(d):
    v = d.setdefault("b", d["a"] + 1)
    return v * 2


@case(lambda: ({"a": t(3)},))
def input_dict_update(d):
    d.update(b=d["a"] * 3)
    return d["b"]


@case(lambda: ({"a": t(3), "b": t(3, seed=1)},))
def input_dict_clear(d):
    s = d["a"] + d["b"]
    d.clear()
    return s


@case(lambda: ({"a": t(3), "b": t(3, seed=1)},))
def input_dict_pop(d):
    return d.pop("a") * 2


@case(lambda: ({"a": t(3), "b": t(3, seed=1)},))
def input_dict_keys_values(d):
    return list(d.keys()), sum(d.values())


@case(lambda: (collections.OrderedDict([("b", t(3)), ("a", t(3, seed=1))]),))
def input_ordered_dict(d):
    d["c"] = d["a"] + d["b"]
    d.move_to_end("b")
    return list(d)


@case(lambda: ({"x": t(3)}, t(3, seed=1)))
def input_dict_returned(d, y):
    d["y"] = y
    return d


@case(lambda: ({"w": [t(3)]},))
def input_nested_mutation(d):
    d["w"].append(d["w"][0] * 2)
    return len(d["w"])


# ============================================================ 5. sets
@case()
def set_literal(a, b):
    s = {1, 2, 3}
    return a * len(s) + b * (2 in s)


@case()
def set_add_discard(a, b):
    s = set()
    s.add(1)
    s.add(4)
    s.discard(1)
    return a * len(s) + b * max(s)


@case()
def set_ops(a, b):
    s1, s2 = {1, 2, 3}, {2, 3, 4}
    return a * len(s1 | s2) + b * len(s1 & s2) + len(s1 - s2)


@case()
def set_comprehension(a, b):
    s = {i % 3 for i in range(10)}
    return a * len(s) + b


@case()
def set_from_list(a, b):
    return a * len(set([1, 1, 2])) + b * len(frozenset("abca"))


@case()
def set_update_method(a, b):
    s = {1}
    s.update([2, 3])
    s.union({9})
    return a * len(s) + b


@case()
def set_unpack_literal(a, b):
    s = {*[1, 2], *(2, 3)}
    return a * len(s) + b


# ============================================================ 6. functions, closures, calls
def _helper_add(x, y):
    return x + y


def _helper_default(x, k=3):
    return x * k


def _helper_varargs(*xs):
    return sum(xs[1:], xs[0])


def _helper_kwargs(x, **kw):
    return x * len(kw) + sum(kw.values())


def _helper_kwonly(x, *, k):
    return x - k


@case()
def call_helper(a, b):
    return _helper_add(a, b) * 2


@case()
def call_default(a, b):
    return _helper_default(a) + _helper_default(b, 2) + _helper_default(a, k=4)


@case()
def call_varargs(a, b):
    return _helper_varargs(a, b, a * b)


@case()
def call_star_args(a, b):
    args = (a, b)
    return _helper_add(*args)


@case()
def call_star_kwargs(a, b):
    return _helper_add(**{"x": a, "y": b})


@case()
def call_kwargs_helper(a, b):
    return _helper_kwargs(a, p=1, q=2) + b


@case()
def call_kwonly(a, b):
    return _helper_kwonly(a, k=2) + b


@case()
def closure_read(a, b):
    scale = 3

    def inner(x):
        return x * scale

    return inner(a) + inner(b)


@case()
def closure_nonlocal(a, b):
    count = 0

    def bump():
        nonlocal count
        count += 1

    bump()
    bump()
    return a * count + b


@case()
def closure_over_tensor(a, b):
    def inner(x):
        return x + b

    return inner(a) * 2


@case()
def lambda_default_arg(a, b):
    f = lambda x, k=2: x * k  # noqa: E731
    return f(a) + f(b, 3)


@case()
def nested_closures(a, b):
    def outer(x):
        def inner(y):
            return x * y

        return inner

    return outer(a)(b)


@case()
def recursion_const(a, b):
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    return a * fact(4) + b


def _make_adder(k):
    def add(x):
        return x + k

    return add


_add5 = _make_adder(5)


@case()
def global_closure(a, b):
    return _add5(a) + _make_adder(1)(b)


@case()
def partial_call(a, b):
    f = functools.partial(_helper_add, y=b)
    return f(a) * 2


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return wrapper


@_logged
def _decorated(x, y):
    return x * y


@case()
def wraps_decorated_global(a, b):
    return _decorated(a, b)


@case()
def wraps_inside(a, b):
    def inner(x):
        return x * 2

    wrapped = _logged(inner)
    return wrapped(a) + b, wrapped.__name__


@case()
def wraps_attribute(a, b):
    return a * len(_decorated.__name__) + b, _decorated.__wrapped__(a, b)


@case()
def reduce_call(a, b):
    return functools.reduce(operator.add, [a, b, a * b])


@case()
def itertools_product(a, b):
    out = a
    for i, j in itertools.product(range(2), range(2)):
        out = out + b * (i + j)
    return out


@case()
def itertools_chain(a, b):
    return sum(itertools.chain([a], [b, a]))


class Counter:
    def __init__(self, k):
        self.k = k

    def scale(self, x):
        return x * self.k


_counter = Counter(4)


@case()
def method_on_global_object(a, b):
    return _counter.scale(a) + b


@case()
def object_attribute(a, b):
    return a * _counter.k + b


@case()
def construct_object(a, b):
    c = Counter(2)
    return c.scale(a) + b


@case()
def setattr_object(a, b):
    c = Counter(2)
    c.k = 5
    return c.scale(a) + b


@case()
def namedtuple_build(a, b):
    p = Point(a, b)
    return p.x + p.y * 2


@case(lambda: (Point(t(3), t(3, seed=1)),))
def namedtuple_input(p):
    return p.x * p.y


@case()
def isinstance_namedtuple(a, b):
    p = Point(1, 2)
    return a * isinstance(p, tuple) + b * p[1]


# ============================================================ 7. control flow
@case()
def for_range_accumulate(a, b):
    out = a
    for i in range(3):
        out = out + b * i
    return out


@case()
def while_const(a, b):
    i = 0
    while i < 3:
        a = a + b
        i += 1
    return a


@case()
def break_continue(a, b):
    out = a
    for i in range(10):
        if i == 1:
            continue
        if i > 3:
            break
        out = out * 1.5 + i
    return out + b


@case()
def for_else(a, b):
    for i in range(3):
        if i == 5:
            break
    else:
        return a + b
    return a - b


@case()
def nested_loops(a, b):
    out = a
    for i in range(2):
        for j in range(2):
            out = out + b * (i * 2 + j)
    return out


@case()
def loop_over_dict_sorted(a, b):
    d = {"z": a, "a": b}
    out = 0
    for k in sorted(d):
        out = out * 2 + d[k]
    return out


@case()
def loop_over_tensor_rows(a, b):
    out = b[0]
    for row in a:
        out = out + row
    return out


@case()
def loop_over_string(a, b):
    out = a
    for ch in "abc":
        out = out + ord(ch)
    return out + b


@case()
def early_return(a, b):
    for i in range(5):
        if i == 2:
            return a * i
    return b


@case()
def print_break(a, b):
    x = a + b
    print("the sum")
    return x * 2


@case()
def print_in_loop(a, b):
    for i in range(2):
        print("step", i)
        a = a + b
    return a


@case()
def two_breaks(a, b):
    x = a.sin()
    print("one")
    y = x * b
    print("two")
    return y.cos()


@case()
def assert_const(a, b):
    assert a.shape == b.shape, "shapes differ"
    return a + b


@case()
def raise_caught_outside(a, b):
    if a.shape[0] > 100:
        raise ValueError("too big")
    return a * b


@case()
def raise_always(a, b):
    raise ValueError("always")


@case()
def assert_fails(a, b):
    assert a.shape[0] == 7, "wrong size"
    return a


@case()
def keyerror_raised(a, b):
    return {"a": a}["b"]


# ============================================================ 8. constructs outside the capture
@case()
def generator_function(a, b):
    def gen():
        yield a
        yield b

    return sum(gen())


def _gen_global(x, n):
    for i in range(n):
        yield x * i


@case()
def generator_global(a, b):
    return list(_gen_global(a, 3))[2] + b


@case()
def generator_expression_list(a, b):
    return list(x * 2 for x in (a, b))


@case()
def with_no_grad(a, b):
    with torch.no_grad():
        c = a * b
    return c + 1


@case()
def with_nullcontext(a, b):
    with contextlib.nullcontext():
        c = a + b
    return c


@case()
def try_except(a, b):
    try:
        return a + b
    except RuntimeError:
        return a - b


@case()
def try_except_taken(a, b):
    try:
        x = {"a": a}["missing"]
    except KeyError:
        x = b
    return x * 2


@case()
def try_finally(a, b):
    out = [a]
    try:
        out.append(b)
    finally:
        out.append(a * b)
    return out


@case()
def import_inside(a, b):
    import math as m

    return a * m.e + b


@case()
def from_import_inside(a, b):
    from math import tau

    return a * tau + b


@case()
def global_statement(a, b):
    global _GLOBAL_COUNTER
    _GLOBAL_COUNTER = 3
    return a * _GLOBAL_COUNTER + b


_GLOBAL_COUNTER = 0


@case()
def grad_enabled(a, b):
    return a * torch.is_grad_enabled() + b


@case()
def manual_seed_break(a, b):
    torch.manual_seed(0)
    return a + torch.rand(3, 4) * 0 + b


@case()
def unsupported_c_builtin(a, b):
    import sys

    return a * (sys.getsizeof(1) > 0) + b


@case()
def random_module(a, b):
    import random

    r = random.Random(0)
    return a * r.randint(1, 1) + b


@case()
def str_of_tensor_break(a, b):
    s = str(a.shape)
    return b * len(s)


@case()
def format_tensor_break(a, b):
    s = f"{a.sum():.3f}"
    return b * len(s)


@case()
def tensor_in_list_break(a, b):
    return b * 2 if a in [b] else b + 1


@case()
def match_statement(a, b):
    match a.dim():
        case 2:
            return a + b
        case _:
            return a - b


@case()
def class_defined_inside(a, b):
    class Box:
        def __init__(self, v):
            self.v = v

    return Box(a).v + b


@case()
def nested_generator_in_helper(a, b):
    return max(range(4)) * a + b


@case()
def zip_strict(a, b):
    return [x + y for x, y in zip([a, b], [b, a], strict=True)]


@case()
def dict_with_tuple_keys(a, b):
    d = {(0, 1): a, (1, 0): b}
    return d[(0, 1)] + d[1, 0]


@case()
def dict_int_keys(a, b):
    d = {i: a * i for i in range(3)}
    d[10] = b
    return sum(d.values()), sorted(d.keys())


@case()
def list_of_dicts(a, b):
    rows = [{"v": a}, {"v": b}]
    for r in rows:
        r["w"] = r["v"] * 2
    return [r["w"] for r in rows]


@case()
def dict_of_lists_mutation(a, b):
    d = {"xs": [a]}
    xs = d["xs"]
    xs.append(b)
    return len(d["xs"]), d["xs"][1] + 1


@case()
def append_after_break(a, b):
    xs = [a]
    print("break here")
    xs.append(b)
    return xs


@case()
def mutation_across_break(a, b):
    d = {"a": a}
    d["b"] = b * 2
    print("break here")
    d["c"] = d["b"] + 1
    return d


def _append_in_helper(xs, v):
    xs.append(v)
    print("helper breaks")
    xs.append(v * 2)


@case()
def mutation_in_breaking_helper(a, b):
    xs = [a]
    _append_in_helper(xs, b)
    return xs


@case(lambda: ([t(3)], t(3, seed=1)))
def input_mutation_in_breaking_helper(xs, y):
    _append_in_helper(xs, y)
    return len(xs)


@case()
def iterate_while_appending(a, b):
    xs = [1, 2]
    out = a
    for k in xs:
        if k < 4:
            xs.append(k + 2)
        out = out + k
    return out + b, xs


@case()
def sorted_with_key(a, b):
    ks = sorted(["bb", "a", "ccc"], key=len)
    return a * len(ks[-1]) + b


@case()
def list_sort_key_break(a, b):
    ks = ["bb", "a", "ccc"]
    ks.sort(key=len)
    return a * len(ks[0]) + b


@case()
def nested_function_returned(a, b):
    def f(x):
        return x * 2

    return f(a) + b, f.__name__


@case()
def star_unpack_call(a, b):
    return torch.stack([*[a, b], a])


@case()
def tuple_unpack_swap(a, b):
    a, b = b, a
    return a - b


@case()
def chained_comparison_tensor_shapes(a, b):
    return a + b if 0 < a.shape[0] <= b.shape[0] else a


@case()
def bitwise_consts(a, b):
    return a * (5 & 3) + b * (5 | 3) + (5 ^ 3) + (1 << 2) + (8 >> 1)


@case()
def complex_consts(a, b):
    z = complex(1, 2)
    return a * z.imag + b * abs(3 + 4j)


@case()
def bytes_consts(a, b):
    return a * len(b"abc") + b


@case()
def ellipsis_const(a, b):
    return a[...] + b[..., 0:4]


@case()
def torch_size_ops(a, b):
    s = a.shape
    return b.reshape(s[::-1]).t() + a * len(s) + torch.Size([3, 4]).numel()


@case()
def torch_function_attr(a, b):
    f = torch.nn.functional.relu
    return f(a) + b


@case()
def module_call(a, b):
    lin = torch.nn.Linear(4, 2)
    torch.nn.init.constant_(lin.weight, 0.5)
    torch.nn.init.zeros_(lin.bias)
    return lin(a) + b[:, :2]


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)
        with torch.no_grad():
            self.lin.weight.copy_(torch.randn(4, 4, generator=g))
            self.lin.bias.zero_()
        self.scales = [1.0, 2.0]
        self.cfg = {"act": "relu"}

    def forward(self, a, b):
        x = self.lin(a)
        for s in self.scales:
            x = x * s
        if self.cfg["act"] == "relu":
            x = x.relu()
        return x + b


_tiny = TinyNet()
add_case("module_with_containers", _tiny)


class SeqNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])

    def forward(self, a, b):
        for layer in self.layers:
            a = layer(a).tanh()
        return a + b


add_case("module_list_loop", SeqNet())


@case()
def getitem_from_module_dict(a, b):
    return {"relu": torch.relu, "tanh": torch.tanh}["tanh"](a) + b


@case()
def dispatch_table(a, b):
    table = {"add": operator.add, "mul": operator.mul}
    return [table[k](a, b) for k in ("add", "mul")]


@case()
def return_nested_structure(a, b):
    return {"out": [a + b, (a * b, {"k": a - b})], "n": 3}


@case()
def return_none(a, b):
    a.sum()
    return None


@case()
def return_python_only(a, b):
    return [1, 2, {"k": (3, "s")}]


@case()
def return_input_identity(a, b):
    return a


@case(lambda: ([t(3)],))
def return_same_list_object(xs):
    ys = xs
    ys.append(1)
    return ys


@case()
def unused_args(a, b):
    return 1.5


# ============================================================ 10. bytecode that 3.11 and 3.12 compile differently
# Each runs a path of the translator that only one of the two versions takes: 3.12's inlined
# comprehensions (PEP 709: LOAD_FAST_AND_CLEAR, a break inside one), CALL_INTRINSIC_1 (unary +,
# tuple(*a, *b), a generator's StopIteration guard), LOAD_SUPER_ATTR, BINARY_SLICE/STORE_SLICE,
# LOAD_FAST_CHECK, RETURN_CONST; on 3.11 the <listcomp> functions, PRECALL, LIST_TO_TUPLE and the
# CALL forms of super().
@case()
def unary_intrinsics(a, b):
    flag = a.dim() == 2
    return -a + (+b), ~(a > 0), not flag


@case()
def star_tuple_intrinsic(a, b):
    xs, ys = [a, b], (b,)
    return torch.cat((*xs, *ys)), torch.stack([*xs, *ys]), torch.add(*xs[:1], *[b])


@case()
def setcomp_with_break(a, b):
    s = {print(i) or i for i in range(2)}
    return a * len(s) + b


@case()
def dictcomp_with_break(a, b):
    d = {i: print(i) for i in range(2)}
    return a * len(d) + b


@case()
def nested_comprehension_break(a, b):
    m = [[print(j) or j for j in range(2)] for i in range(2)]
    return a * len(m) + b


def _comprehension_helper(x):
    ys = [print(i) or x * i for i in range(2)]
    return ys[0] + ys[1]


@case()
def comprehension_break_in_callee(a, b):
    return _comprehension_helper(a) + b


@case()
def comprehension_restores_shadowed_local(a, b):
    i = 5
    ys = [a * i for i in range(3)]
    return ys[2] + b * i


@case()
def comprehension_break_restores_shadowed_local(a, b):
    i = 5
    ys = [print(i) or a * i for i in range(3)]
    return ys[2] + b * i


@case()
def comprehension_of_lambdas(a, b):
    fs = [lambda z, i=i: z * i for i in range(3)]
    gs = [lambda z: z * k for k in range(3)]  # noqa: B023 (late binding on purpose: every one sees k == 2)
    return fs[2](a) + gs[0](b)


@case()
def comprehension_break_inside_loop(a, b):
    for _ in range(2):
        ys = [print(i) or a * i for i in range(2)]
        b = b + ys[1]
    return b


@case()
def comprehension_break_inside_try(a, b):
    try:
        ys = [print(i) or a * i for i in range(2)]
    except KeyError:
        ys = [b, b]
    return ys[1] + b


@case()
def comprehension_break_inside_no_grad(a, b):
    with torch.no_grad():
        ys = [print(i) or a * i for i in range(2)]
    return ys[1] + b


@case()
def comprehension_break_then_loop(a, b):
    ys = [print(i) or a * i for i in range(2)]
    for k in range(2):
        b = b + ys[k]
    return b


@case()
def comprehension_filter_break(a, b):
    ys = [a * i for i in range(4) if print(i) is None and i % 2]
    return sum(ys) + b


def _gen_raises(x):
    yield x
    raise ValueError("stop")


def _gen_raises_stopiteration(x):
    yield x
    raise StopIteration


@case()
def generator_raise_caught_by_caller(a, b):
    try:
        out = list(_gen_raises(a))
    except ValueError:
        out = [b]
    return out[0] * 2


@case()
def generator_stopiteration_becomes_runtimeerror(a, b):
    try:
        out = list(_gen_raises_stopiteration(a))
    except RuntimeError:
        out = [b]
    return out[0] + 1


@case()
def return_inside_for(a, b):
    for w in [a, b]:
        return w * 3
    return b


@case()
def deleted_local_reassigned(a, b):
    c = a + b
    del c
    c = a * b
    return c


@case()
def slices_load_and_store(a, b):
    xs = [a, b, a, b]
    xs[1:3] = [b * 2]
    return a[1:3] + b[:2], xs[-2:], len(xs[1:])


class _Base(torch.nn.Module):
    def forward(self, x):
        return x + 1


class _Child(_Base):
    def forward(self, x):
        return super().forward(x) * 2 + super(_Child, self).forward(x)  # noqa: UP008 (both forms on purpose)


_child = _Child()


@case()
def super_zero_and_two_args(a, b):
    return _child(a) + b


# Closure cells written by Python code that runs at a graph break (the callee's frame, or a 3.11
# <listcomp> with a walrus): the traced frame must read the cell back.
@case()
def nonlocal_written_after_break(a, b):
    n = 0

    def bump():
        nonlocal n
        print("bump")
        n += 1

    bump()
    return a * n + b


@case()
def nonlocal_written_twice_around_a_store(a, b):
    n = 1

    def bump():
        nonlocal n
        print("bump")
        n += 1

    bump()
    n = n * 10
    bump()
    return a * n + b


@case()
def walrus_in_comprehension_with_break(a, b):
    ys = [(y := a * i) for i in range(3) if print(i) is None]
    return ys[0] + y + b


@case()
def two_closures_share_a_cell(a, b):
    n = 0

    def inc():
        nonlocal n
        print("inc")
        n += 1

    def get():
        return n

    inc()
    return a * get() + b


# A graph break inside a generator that traced code consumes: Dynamo runs the generator inside its
# consumer (sum, list, a for loop) and cannot resume there, so it gives up on the frame.
@case()
def generator_expression_with_break(a, b):
    return sum(print(i) or i for i in range(3)) * a + b


def _printing_generator(x):
    for i in range(2):
        print(i)
        yield x * i


@case()
def generator_function_with_break_into_list(a, b):
    c = a + 1
    return sum(list(_printing_generator(c))) + b


@case()
def generator_with_break_after_a_graph(a, b):
    c = torch.relu(a) * 2
    print("first")
    d = c + b
    return max(print(i) or i for i in range(2)) * d
