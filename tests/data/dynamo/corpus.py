"""A corpus of small functions for course_lib.dynamo (imported by tests/test_dynamo_corpus.py), each with the graph / break counts the
real torch._dynamo.explain gives (checked live by tests/test_dynamo_corpus.py).

Each case: (name, fn, make_args, expected (graph_count, graph_break_count, len(break_reasons))).
Tensors are tiny and seeded; no function mutates its inputs or uses randomness.
"""

import math
import sys

import torch
import torch.nn.functional as F

SCALE = 3.0
OFFSET = torch.ones(3)


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


# --- straight-line code ---------------------------------------------------------------
def add_mul(x):
    return x * 2 + 1


def functional(x):
    return F.gelu(x) + F.softmax(x, dim=-1)


def kwargs_call(x):
    return torch.sum(x, dim=1, keepdim=True) * x


def two_outputs(x, y):
    return x + y, x * y


def chunk_unpack(x):
    a, b = x.chunk(2, dim=0)
    return a * b


def no_ops(x):
    return 3


def globals_read(x):
    return x * SCALE + OFFSET


# --- specialisation on Python values ----------------------------------------------------
def shape_view(x):
    return x.view(x.shape[0], -1) * x.size(1)


def dim_numel(x):
    return x * x.dim() + x.numel()


def math_on_shape(x):
    return x / math.sqrt(x.shape[-1])


def const_flag(x, flag):
    if flag:
        return x + 1
    return x - 1


def none_default(x, y=None):
    if y is None:
        return x.relu()
    return x + y


def isinstance_check(x, k):
    if isinstance(k, int):
        return x * k
    return x


def fstring_const(x):
    name = f"layer{2}"
    return x * len(name)


# --- loops over Python containers --------------------------------------------------------
def loop_list(x):
    for s in [1.0, 2.0, 3.0]:
        x = x * s
    return x


def loop_range(x):
    for i in range(3):
        x = x + i
    return x


def loop_tensor_list(xs):
    total = xs[0]
    for item in xs[1:]:
        total = total + item
    return total


def enumerate_zip(x, ws):
    out = x
    for i, (w, b) in enumerate(zip(ws, [1.0, 2.0])):
        out = out * w + b * i
    return out


def list_comprehension(x):
    return sum([x * i for i in range(3)])


def dict_input(d):
    return d["a"] + d["b"]


# --- closures and nested functions ------------------------------------------------------
def make_closure(k):
    def scaled(x):
        return x * k + k

    return scaled


closure = make_closure(2.0)


def inner_def(x):
    def g(y):
        return y.relu()

    return g(x) + 1


def lambda_inside(x):
    sq = lambda v: v * v  # noqa: E731
    return sq(x) + sq(x + 1)


def helper_a(x):
    return torch.sin(x) * 2


def helper_b(x, bias=1.0):
    return helper_a(x) + bias


def nested_calls(x):
    return helper_b(x, bias=0.5).cos()


# --- nn.Module ----------------------------------------------------------------------------
class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))

    def forward(self, x):
        return self.net(x)


class WithHelper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 3)
        self.scale = torch.nn.Parameter(torch.full((3,), 0.5))
        self.k = 2

    def helper(self, x):
        return x * self.scale

    def forward(self, x):
        return self.helper(self.lin(x)) * self.k


class PrintingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        print("forward called")
        return y.relu()


# --- graph breaks ----------------------------------------------------------------------------
def print_mid(x):
    y = torch.sin(x)
    print("hello")
    return y * 2


def print_start(x):
    print("start")
    return x.relu()


def print_end(x):
    y = x.sin()
    print("end")
    return y


def two_prints(x):
    y = torch.sin(x)
    print("a")
    y = y * 2
    print("b")
    return y.cos()


def item_break(x):
    v = x.sum().item()
    return x * (v + 1)


def branch_on_tensor(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def branch_then_more(x):
    y = x * 2
    if y.mean() > 100:
        y = y - 1
    return y.exp()


def unsupported_builtin(x):
    y = x + 1
    sys.getsizeof(y)
    return y * 3


def break_in_helper(y):
    z = y * 2
    print("inside")
    return z + 1


def nested_break(x):
    a = x + 1
    b = break_in_helper(a)
    return b * 2


def int_of_tensor(x):
    n = int(x.sum())
    return x + n


def print_in_comprehension(x):
    ys = [print("step", i) or x * i for i in range(2)]
    return ys[1] + 1


def print_in_loop(x):
    for i in range(2):
        print("iteration", i)
        x = x * 2
    return x + 1


def loop_after_break(x):
    y = x.cos()
    print("before the loop")
    for i in range(2):
        y = y * 2
        print("iteration", i)
    return y


CASES = [
    ("add_mul", add_mul, lambda: (t(3),), (1, 0, 0)),
    ("functional", functional, lambda: (t(2, 3),), (1, 0, 0)),
    ("kwargs_call", kwargs_call, lambda: (t(2, 3),), (1, 0, 0)),
    ("two_outputs", two_outputs, lambda: (t(3), t(3, seed=1)), (1, 0, 0)),
    ("chunk_unpack", chunk_unpack, lambda: (t(4, 2),), (1, 0, 0)),
    ("no_ops", no_ops, lambda: (t(3),), (0, -1, 0)),
    ("globals_read", globals_read, lambda: (t(3),), (1, 0, 0)),
    ("shape_view", shape_view, lambda: (t(2, 3, 2),), (1, 0, 0)),
    ("dim_numel", dim_numel, lambda: (t(2, 3),), (1, 0, 0)),
    ("math_on_shape", math_on_shape, lambda: (t(2, 4),), (1, 0, 0)),
    ("const_flag", const_flag, lambda: (t(3), True), (1, 0, 0)),
    ("none_default", none_default, lambda: (t(3),), (1, 0, 0)),
    ("isinstance_check", isinstance_check, lambda: (t(3), 3), (1, 0, 0)),
    ("fstring_const", fstring_const, lambda: (t(3),), (1, 0, 0)),
    ("loop_list", loop_list, lambda: (t(3),), (1, 0, 0)),
    ("loop_range", loop_range, lambda: (t(3),), (1, 0, 0)),
    ("loop_tensor_list", loop_tensor_list, lambda: ([t(3), t(3, seed=1), t(3, seed=2)],), (1, 0, 0)),
    ("enumerate_zip", enumerate_zip, lambda: (t(3), [t(3, seed=1), t(3, seed=2)]), (1, 0, 0)),
    ("list_comprehension", list_comprehension, lambda: (t(3),), (1, 0, 0)),
    ("dict_input", dict_input, lambda: ({"a": t(3), "b": t(3, seed=1)},), (1, 0, 0)),
    ("closure", closure, lambda: (t(3),), (1, 0, 0)),
    ("inner_def", inner_def, lambda: (t(3),), (1, 0, 0)),
    ("lambda_inside", lambda_inside, lambda: (t(3),), (1, 0, 0)),
    ("nested_calls", nested_calls, lambda: (t(3),), (1, 0, 0)),
    ("mlp_module", MLP(), lambda: (t(2, 3),), (1, 0, 0)),
    ("module_helper", WithHelper(), lambda: (t(2, 3),), (1, 0, 0)),
    ("module_print", PrintingModule(), lambda: (t(2, 3),), (2, 1, 1)),
    ("print_mid", print_mid, lambda: (t(3),), (2, 1, 1)),
    ("print_start", print_start, lambda: (t(3),), (1, 0, 0)),
    ("print_end", print_end, lambda: (t(3),), (1, 0, 1)),
    ("two_prints", two_prints, lambda: (t(3),), (3, 2, 2)),
    ("item_break", item_break, lambda: (t(3),), (2, 1, 1)),
    ("branch_on_tensor", branch_on_tensor, lambda: (t(3),), (2, 1, 1)),
    ("branch_then_more", branch_then_more, lambda: (t(3),), (2, 1, 1)),
    ("unsupported_builtin", unsupported_builtin, lambda: (t(3),), (2, 1, 1)),
    ("nested_break", nested_break, lambda: (t(3),), (4, 3, 2)),
    ("int_of_tensor", int_of_tensor, lambda: (t(3),), (2, 1, 1)),
    ("print_in_comprehension", print_in_comprehension, lambda: (t(3),), (1, 0, 0)),
    ("print_in_loop", print_in_loop, lambda: (t(3),), (0, -1, 0)),
    ("loop_after_break", loop_after_break, lambda: (t(3),), (1, 0, 1)),
]
