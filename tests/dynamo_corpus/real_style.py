"""Programs written the way real PyTorch model code is written (not in the style of the other
corpora): nn.Modules that call submodules and loop over ModuleLists, config flags read from
attributes, keyword arguments with defaults, ``*args``, closures, comprehensions, starred
unpacking, f-string asserts, isinstance / hasattr checks, shape arithmetic, ``math.*``,
data-dependent branches, ``.item()``, ``print``, ``try``, ``while`` over Python ints,
``torch.no_grad()``, dataclass outputs and dict inputs, ``super().forward``, ``functools.partial``,
``self.parameters()`` / ``self.modules()`` walks.

Checked against torch._dynamo on Python 3.11 only (this machine); no Python 3.12 torch is
installed here, so data/dynamo's 3.12 recording does not cover these programs.

tests/test_dynamo_real_style.py runs each through course_lib.dynamo and torch._dynamo.explain
and compares: result equal to eager, graph count, break count, break-reason count and (for
plain functions) ops per graph.

``CASES``: ``(name, fn, make_args)``; ``make_args()`` builds fresh, seeded inputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import typing

import torch
import torch.nn.functional as F
from torch import nn

CASES: list[tuple[str, typing.Callable, typing.Callable[[], tuple]]] = []


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def case(*make):
    """Register a function called with fresh arguments built by the lambdas ``make``."""

    def register(fn):
        CASES.append((fn.__name__, fn, lambda: tuple(m() for m in make)))
        return fn

    return register


def module_case(name, build, *make):
    """Register an nn.Module instance (built once, seeded) called with ``make``'s arguments."""
    torch.manual_seed(0)
    CASES.append((name, build(), lambda: tuple(m() for m in make)))


def x34():
    return t(3, 4)


def y34():
    return t(3, 4, seed=1)


def x248():
    return t(2, 4, 8)


# ============================================================ plain functions
@case(x34)
def rms_norm_eps_default(x, eps: float = 1e-6):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps)


@case(x34, y34)
def kwargs_only_scale(x, y, *, alpha=0.5, beta=None):
    out = x * alpha
    if beta is not None:
        out = out + beta * y
    return out + y


def _apply_all(x, *fns):
    for f in fns:
        x = f(x)
    return x


@case(x34)
def star_args_pipeline(x):
    return _apply_all(x, torch.relu, lambda v: v * 2, torch.tanh)


@case(x34)
def closure_factory(x):
    def make_scaler(s):
        def scale(v):
            return v * s

        return scale

    double, halve = make_scaler(2.0), make_scaler(0.5)
    return double(x) + halve(x)


@case(x34)
def nested_fn_reads_outer_tensor(x):
    bias = x.mean()

    def shift(v):
        return v - bias

    return shift(x).abs()


@case(x34)
def lambda_in_sorted_keys(x):
    parts = {"b": x * 2, "a": x + 1, "c": x - 3}
    return [parts[k] for k in sorted(parts, key=lambda k: k)]


@case(x248)
def dict_comprehension_of_chunks(x):
    pieces = x.chunk(4, dim=-1)
    named = {f"p{i}": p.sum(-1) for i, p in enumerate(pieces)}
    return named["p0"] + named["p3"]


@case(x34)
def generator_sum_of_powers(x):
    return sum(x**k / math.factorial(k) for k in range(1, 4))


@case(x248)
def starred_shape_unpack(x):
    *batch, d = x.shape
    return x.reshape(-1, d).sum(0) * len(batch)


@case(x248)
def starred_middle(x):
    first, *rest, last = x.unbind(-1)
    return first + last + torch.stack(rest).mean(0)


@case(x248)
def assert_fstring_shapes(x):
    assert x.dim() == 3, f"expected a 3-D input, got {x.dim()}-D"
    b, s, d = x.shape
    assert d % 2 == 0, f"last dim {d} must be even"
    return x.view(b, s, 2, d // 2).transpose(1, 2).contiguous()


@case(x34, lambda: 3)
def isinstance_int_or_tensor(x, scale):
    if isinstance(scale, torch.Tensor):
        return x * scale
    if isinstance(scale, (int, float)):
        return x * float(scale)
    raise TypeError("scale")


@case(x34)
def hasattr_on_tensor(x):
    if hasattr(x, "shape") and not hasattr(x, "not_an_attribute"):
        return x.transpose(0, 1)
    return x


@case(x248)
def split_sizes_and_cat(x):
    a, b = x.split([3, 5], dim=-1)
    return torch.cat([b, a], dim=-1)


@case(x248)
def size_and_shape_indexing(x):
    n = x.size(0) * x.shape[-1]
    return x.flatten(1) / math.sqrt(n) + x.size()[1]


@case(x34)
def dtype_checks(x):
    if x.dtype == torch.float32 and x.is_floating_point():
        x = x.to(torch.float64)
    return x.sum(dim=0).float()


@case(x34)
def python_numbers_mixed(x):
    k = 3
    scale = 1.0 / (k + 1)
    return (x + k) * scale - 2**-1 + math.pi


@case(x34)
def math_functions_on_shapes(x):
    d = x.shape[-1]
    return x * math.log(d) + math.cos(0.0) * math.sqrt(d) + math.floor(2.7)


@case(x34)
def torch_functions_mix(x):
    y = torch.where(x > 0, x, torch.zeros_like(x))
    z = torch.clamp(y, min=0.1, max=1.0)
    return torch.einsum("ij,kj->ik", z, x) + torch.full((3, 3), 0.5)


@case(x34)
def data_dependent_branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


@case(x34)
def item_then_python_math(x):
    m = x.abs().max().item()
    return x / (m + 1.0)


@case(x34)
def print_debugging(x):
    y = x.relu()
    print("y has shape", tuple(y.shape))
    return y + 1


@case(x34)
def while_loop_halving(x):
    n = x.shape[1]
    while n > 1:
        x = x[:, : n // 2] + x[:, n // 2 :]
        n //= 2
    return x


@case(x34)
def try_except_keyerror(x):
    cfg = {"scale": 2.0}
    try:
        shift = cfg["shift"]
    except KeyError:
        shift = 0.0
    return x * cfg["scale"] + shift


@case(x34)
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


@dataclasses.dataclass
class Stats:
    mean: torch.Tensor
    std: torch.Tensor


@case(x34)
def dataclass_output(x):
    return Stats(mean=x.mean(0), std=x.std(0))


@case(lambda: {"input_ids": t(2, 3), "mask": (t(2, 3, seed=1) > 0).float()})
def dict_input_batch(batch):
    h = batch["input_ids"] * batch["mask"]
    if "labels" in batch:
        h = h + batch["labels"]
    return {"hidden": h, "n": batch["mask"].sum()}


@case(x34, y34)
def tuple_swap_and_return(x, y):
    x, y = y, x
    return (x - y, x * y)


@case(x248)
def list_of_ops_table(x):
    ops = [torch.sin, torch.cos, F.silu]
    return [op(x).sum(-1) for op in ops]


@case(x34)
def chained_methods(x):
    return x.t().contiguous().view(-1).unsqueeze(0).expand(2, -1).mean(0)


@case(x34)
def softmax_temperature_default(x, temperature=0.7, dim=-1):
    return F.softmax(x / temperature, dim=dim)


@case(x34)
def string_mode_switch(x, mode="gelu"):
    act = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}[mode]
    return act(x)


@case(x34)
def int_of_tensor_shape_math(x):
    steps = int(x.shape[0] * 1.5)
    return x.repeat(steps, 1)


@case(x34)
def try_finally_cleanup(x):
    out = x + 1
    try:
        out = out * 2
    finally:
        out = out - 3
    return out


@case(x34)
def except_as_message(x):
    try:
        n = int("seven")
    except ValueError as err:
        n = len(str(err)) % 5
    return x * n


def _check_2d(v):
    if v.dim() != 2:
        raise ValueError(f"needs 2-D, got {v.dim()}-D")
    return v


@case(x34)
def raise_caught_by_caller(x):
    try:
        return _check_2d(x.view(-1)) * 2
    except ValueError:
        return x + 1


@case(x34)
def print_inside_try(x):  # a break inside a try block: Dynamo gives up on the frame
    y = x * 2
    try:
        print("in try")
        y = y + 1
    except RuntimeError:
        y = y - 1
    return y.sin()


@case(x34)
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
    return a + b


@case(x34)
def print_inside_no_grad(x):  # a break inside the block: the graphs leave and re-enter it
    with torch.no_grad():
        y = x * 2
        print("inside")
        y = y + 1
    return y.cos()


@case(x34)
def keyerror_through_no_grad(x):
    try:
        with torch.no_grad():
            y = {"a": x}["b"]
    except KeyError:
        y = x * 5
    return y + int(torch.is_grad_enabled())


@contextlib.contextmanager
def _tagged():
    yield "tag"


@case(x34)
def generator_context_manager(x):  # not modelled here: graph breaks (Dynamo inlines it)
    with _tagged() as name:
        y = x * 2
    return y + len(name)


@case(x34)
def dataclass_field_update(x):
    s = Stats(mean=x.mean(0), std=x.std(0))
    s.std = s.std + 1
    return s.mean / s.std, s


def x34_grad():
    return t(3, 4).requires_grad_()


@case(x34_grad)
def set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y + x


@case(x34_grad)
def set_grad_enabled_statements(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y + x


@case(x34_grad)
def no_grad_then_grad_output(x):
    with torch.no_grad():
        scale = x.abs().max()
    return x / scale


@torch.no_grad()
def _no_grad_helper(v):
    return v * 2


@case(x34_grad)
def calls_no_grad_decorated(x):  # not modelled here: the decorator's wrapper breaks (Dynamo traces it)
    return _no_grad_helper(x) + x


@case(x34)
def try_else_branch(x):
    try:
        n = int("3")
    except ValueError:
        n = 0
    else:
        n = n + 1
    return x * n


@case(x34)
def nested_try_outer_handler(x):
    try:
        try:
            n = {"a": 1}["b"]
        except IndexError:
            n = 2
    except KeyError:
        n = 3
    return x * n


@case(x34_grad)
def inference_mode_block(x):  # not modelled here: graph breaks at the with and its exit
    with torch.inference_mode():
        y = x * 2
    return y + 1


@case(x34)
def autocast_disabled_block(x):  # not modelled here: graph breaks at the with and its exit
    with torch.autocast("cpu", enabled=False):
        y = x * 2
    return y + 1


# ------------------------------------------------------------ more library idioms
@case(x248)
def arange_positions(x):
    pos = torch.arange(x.size(1), device=x.device, dtype=x.dtype)
    return x + pos[None, :, None] / x.shape[-1] ** 0.5


@case(x248)
def new_zeros_and_pad(x):
    z = x.new_zeros(x.shape[0], 1, x.shape[2])
    return F.pad(torch.cat([z, x], dim=1), (1, 1))


@case(x248)
def torch_tensor_const(x):
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    return x * w


@case(x248)
def kwargs_forwarding(x):
    def inner(v, *, scale=1.0, shift=0.0, **extra):
        return v * scale + shift + len(extra)

    opts = {"scale": 2.0, "shift": 1.0, "unused": True}
    return inner(x, **opts)


@case(x248)
def getattr_by_name(x):
    names = ["relu", "tanh"]
    for n in names:
        x = getattr(torch, n)(x)
    return x


@case(x248)
def masked_fill_triu(x):
    s = x.shape[1]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    att = x @ x.transpose(-1, -2)
    return att.masked_fill(mask, float("-inf")).softmax(-1)


@case(x248)
def str_join_keys(x):
    parts = {f"k{i}": x[:, i] for i in range(2)}
    key = "-".join(sorted(parts))
    return parts["k0"] * len(key)


@case(x248)
def functools_partial(x):
    act = functools.partial(F.leaky_relu, negative_slope=0.2)
    return act(x)


@case(x248)
def isinstance_tuple_input(x):
    xs = (x, x * 2) if isinstance(x, torch.Tensor) else x
    return torch.stack(xs).sum(0)


@case(x248)
def nested_list_comp(x):
    rows = [[x[i, j].sum() for j in range(2)] for i in range(2)]
    return torch.stack([torch.stack(r) for r in rows])


@case(x248)
def reversed_enumerate(x):
    out = x
    for i, s in reversed(list(enumerate([1.0, 2.0, 3.0]))):
        out = out * s + i
    return out


@case(x248)
def any_all_python(x):
    dims = [d for d in x.shape]
    if all(d > 0 for d in dims) and any(d == 8 for d in dims):
        return x.sum(-1)
    return x


@case(x248)
def tensor_bool_item_branch(x):
    if bool((x > 100).any()):
        return x * 0
    return x + 1


@case(x248)
def einops_like_reshape(x):
    b, s, d = x.shape
    h = 2
    return x.reshape(b, s, h, d // h).permute(0, 2, 1, 3).reshape(b * h, s, d // h)


@case(x248)
def min_max_python_on_shapes(x):
    k = min(x.shape[1], 3)
    return x[:, :k].amax(dim=1) + max(1, x.dim())


@case(x248)
def tensor_iteration(x):
    total = 0
    for row in x:
        total = total + row.sum()
    return total


@case(x248)
def global_counter_mutation(x):  # STORE_GLOBAL
    global COUNTER
    COUNTER += 1
    return x * 2


COUNTER = 0


# ============================================================ nn.Modules
class Config:
    hidden = 8
    n_layers = 2
    use_bias = True
    dropout = 0.0
    pre_norm = True


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.pre_norm = cfg.pre_norm
        self.norm = nn.LayerNorm(cfg.hidden)
        self.fc1 = nn.Linear(cfg.hidden, 2 * cfg.hidden, bias=cfg.use_bias)
        self.fc2 = nn.Linear(2 * cfg.hidden, cfg.hidden, bias=cfg.use_bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        h = self.norm(x) if self.pre_norm else x
        h = self.fc2(F.gelu(self.fc1(h)))
        return x + self.drop(h)


class Stack(nn.Module):
    def __init__(self, cfg=Config):
        super().__init__()
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.head = nn.Linear(cfg.hidden, 3)

    def forward(self, x, return_hidden=False):
        for _, block in enumerate(self.blocks):
            x = block(x)
        logits = self.head(x)
        return (logits, x) if return_hidden else logits


class SelfAttention(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (u.view(b, s, self.heads, d // self.heads).transpose(1, 2) for u in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        if mask is not None:
            att = att.masked_fill(mask == 0, float("-inf"))
        out = att.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, s, d))


class Residuals(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.scales = nn.Parameter(torch.ones(8))

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x = layer(x)
            outs.append(x)
        return torch.stack(outs).sum(0) * self.scales


class ModuleDictRouter(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleDict({"a": nn.Linear(8, 8), "b": nn.Linear(8, 8)})

    def forward(self, x, route="b"):
        return self.experts[route](x) + sum(e(x) for e in self.experts.values())


class BufferAndFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running", torch.zeros(8))
        self.training_flag = False

    def forward(self, x):
        if self.training_flag:
            return x
        return x - self.running + x.mean(dim=tuple(range(x.dim() - 1)))


class DataDependentModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:  # a data-dependent branch in a forward: a graph break
            h = h * 2
        return h.relu()


class PrintShapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc(x)
        print(f"fc out {tuple(y.shape)}")
        return y.sum(-1)


class NoGradModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            target = self.fc(x).detach()
        return F.mse_loss(self.fc(x), target)


class GatedBlock(Block):
    """A subclass that calls its parent's forward through super() (LOAD_SUPER_ATTR on 3.12)."""

    def __init__(self, cfg=Config):
        super().__init__(cfg)
        self.gate = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x):
        return super().forward(x) * torch.sigmoid(self.gate(x))


class LoggedBlock(GatedBlock):
    def forward(self, x):
        print("block input", tuple(x.shape))  # a break before super(): the call runs after it
        return super().forward(x)


class WithKwargsModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x, *args, scale=1.0, **kwargs):
        h = self.act(self.fc(x)) * scale
        for a in args:
            h = h + a
        if kwargs.get("residual", False):
            h = h + x
        return h


class ParamLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        reg = sum(p.pow(2).sum() for p in self.parameters())
        n = sum(1 for m in self.modules() if isinstance(m, nn.Linear))
        return self.b(self.a(x)).mean() + reg * n


class TrainingFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = F.dropout(self.fc(x), p=0.5, training=self.training)
        return h


module_case("module_stack_modulelist", Stack, x248)
module_case("module_self_attention", SelfAttention, x248)
module_case("module_sequential_iteration", Residuals, x248)
module_case("module_moduledict_router", ModuleDictRouter, x248)
module_case("module_buffer_and_flag", BufferAndFlag, x248)
module_case("module_data_dependent_branch", DataDependentModule, x248)
module_case("module_print_fstring", PrintShapes, x248)
module_case("module_no_grad_block", NoGradModule, x248)
module_case("module_super_forward", GatedBlock, x248)
module_case("module_print_then_super", LoggedBlock, x248)
module_case("module_args_kwargs_forward", WithKwargsModule, x248)
module_case("module_parameters_and_modules_walk", ParamLoop, x248)
module_case("module_eval_dropout_flag", lambda: TrainingFlag().eval(), x248)
