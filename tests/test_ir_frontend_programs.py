"""ir.from_python on programs written without the front end in mind (loops, nested ifs, early
returns, int/float mixes, lists): each either compiles and interprets to what CPython computes on
random arguments, or is refused with an UnsupportedError that names the construct and its line."""

import math
import random

import pytest

from course_lib import ir
from course_lib.ir.frontend import UnsupportedError


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def first_negative(xs):
    for i in range(len(xs)):
        if xs[i] < 0:
            return i
    return -1


def clamp_sum(xs, lo, hi):
    total = 0.0
    for i in range(len(xs)):
        v = xs[i]
        if v < lo:
            v = lo
        elif v > hi:
            v = hi
        total += v
    return total


def mean_int_list(xs):
    s = 0
    for i in range(len(xs)):
        s += xs[i]
    return s / len(xs) if len(xs) > 0 else 0.0


def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a


def gcd_plain(a, b):
    while b != 0:
        t = a % b
        a = b
        b = t
    return a


def nested_branches(a, b, c):
    if a > b:
        if b > c:
            r = 1
        elif a > c:
            r = 2
        else:
            r = 3
    else:
        if a > c:
            r = 4
        else:
            r = 5 if b > c else 6
    return r


def count_in_range(xs, lo, hi):
    n = 0
    for i in range(len(xs)):
        if lo <= xs[i] and xs[i] < hi and not xs[i] == 0:
            n += 1
    return n


def prefix_max(xs):
    out = [0] * len(xs)
    best = xs[0]
    for i in range(len(xs)):
        best = max(best, xs[i])
        out[i] = best
    return out[len(xs) - 1] + out[0]


def float_int_mix(n, x):
    acc = 0
    for i in range(1, n + 1):
        if i % 3 == 0:
            acc = acc + x / i
        else:
            acc = acc + i
    return acc


def reverse_in_place(xs):
    i = 0
    j = len(xs) - 1
    while i < j:
        t = xs[i]
        xs[i] = xs[j]
        xs[j] = t
        i += 1
        j -= 1
    return xs[0] - xs[len(xs) - 1]


def early_exit_loop(n):
    k = 0
    while True:
        k += 1
        if k * k > n:
            break
        if k > 1000:
            return -1
    return k


def skip_odds_countdown(n):
    total = 0
    for i in range(n, 0, -1):
        if i % 2 == 1:
            continue
        total += i * i
    return total


def abs_diff_sum(xs, ys):
    s = 0.0
    for i in range(min(len(xs), len(ys))):
        s += abs(xs[i] - ys[i])
    return s


def int_division_signs(a, b):
    if b == 0:
        return 0
    return a // b + a % b * 10 + int(a / b)


def bubble_sort_checksum(xs):
    n = len(xs)
    for i in range(n):
        for j in range(n - 1 - i):
            if xs[j] > xs[j + 1]:
                t = xs[j]
                xs[j] = xs[j + 1]
                xs[j + 1] = t
    c = 0
    for i in range(n):
        c = c * 31 + xs[i]
    return c


def list_literal_lookup(k):
    table = [2, 3, 5, 7, 11]
    if k < 0 or k >= len(table):
        return 0
    return table[k] * k


def bool_and_or_values(a, b):
    x = a > 0 and b > 0
    y = a < 0 or b < 0
    return x + 2 * y


def append_to_list(n):
    ys = [0] * n
    ys.append(n)
    return len(ys)


def walrus_threshold(n):
    if (m := n * 2) > 3:
        return m
    return 0


def while_else_flag(n):
    while n > 0:
        n -= 1
    else:
        n = 5
    return n


def sum_over_list_items(xs):
    s = 0
    for v in xs:
        s += v
    return s


def power_of(a, b):
    return a**b


def with_helper_inside(n):
    def inc(x):
        return x + 1

    return inc(n)


def _ints(rng, lo=-20, hi=20):
    return rng.randint(lo, hi)


def _int_list(rng, n=(1, 8)):
    return [rng.randint(-9, 9) for _ in range(rng.randint(*n))]


def _float_list(rng, n=(1, 8)):
    return [rng.uniform(-5, 5) for _ in range(rng.randint(*n))]


# name -> (function, random arguments); None where the front end must refuse it
PROGRAMS = {
    "collatz_steps": (collatz_steps, lambda r: (r.randint(1, 200),)),
    "first_negative": (first_negative, lambda r: (_int_list(r),)),
    "clamp_sum": (clamp_sum, lambda r: (_float_list(r), -1.5, 2.5)),
    "mean_int_list": (mean_int_list, lambda r: (_int_list(r, (0, 6)),)),
    "gcd_plain": (gcd_plain, lambda r: (r.randint(0, 500), r.randint(0, 500))),
    "nested_branches": (nested_branches, lambda r: (_ints(r), _ints(r), _ints(r))),
    "count_in_range": (count_in_range, lambda r: (_int_list(r), -3, 4)),
    "prefix_max": (prefix_max, lambda r: (_int_list(r),)),
    "float_int_mix": (float_int_mix, lambda r: (r.randint(0, 12), r.uniform(-3, 3))),  # see _same
    "reverse_in_place": (reverse_in_place, lambda r: (_int_list(r),)),
    "early_exit_loop": (early_exit_loop, lambda r: (r.randint(0, 400),)),
    "skip_odds_countdown": (skip_odds_countdown, lambda r: (r.randint(0, 30),)),
    "abs_diff_sum": (abs_diff_sum, lambda r: (_float_list(r), _float_list(r))),
    "int_division_signs": (int_division_signs, lambda r: (_ints(r), _ints(r, -6, 6))),
    "bubble_sort_checksum": (bubble_sort_checksum, lambda r: (_int_list(r),)),
    "list_literal_lookup": (list_literal_lookup, lambda r: (r.randint(-2, 7),)),
    "bool_and_or_values": (bool_and_or_values, lambda r: (_ints(r), _ints(r))),
}
# constructs outside the subset: (function, the construct the message must name, line in the function)
REFUSED = {
    "gcd": (gcd, "tuple", 2),
    "append_to_list": (append_to_list, "method call ys.append()", 2),
    "walrus_threshold": (walrus_threshold, "assignment expression (:=)", 1),
    "while_else_flag": (while_else_flag, "while ... else", 1),
    "sum_over_list_items": (sum_over_list_items, "for loop over something other than range", 2),
    "power_of": (power_of, "operator **", 1),
    "with_helper_inside": (with_helper_inside, "nested function", 1),
}


def _same(want, got) -> bool:
    """Equal values. One documented difference: the front end types each variable once, so a
    variable that holds an int on some paths and a float on others is a float everywhere
    (float_int_mix returns 3.0 where CPython returns 3); the number must still be the same."""
    if isinstance(want, float) or isinstance(got, float):
        return isinstance(got, float) and math.isclose(want, got, rel_tol=1e-12, abs_tol=1e-12)
    return type(want) is type(got) and want == got


def test_int_float_variable_is_float():
    f = ir.from_python(float_int_mix)
    assert ir.interpret(f, 2, 1.5) == 3.0 and isinstance(ir.interpret(f, 2, 1.5), float)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_interpreted_result_equals_cpython(name):
    fn, make = PROGRAMS[name]
    f = ir.from_python(fn)
    rng = random.Random(name)
    for _ in range(25):
        args = make(rng)
        want = fn(*[list(a) if isinstance(a, list) else a for a in args])
        got = ir.interpret(f, *[list(a) if isinstance(a, list) else a for a in args])
        assert _same(want, got), f"{name}{args}: CPython {want!r}, course IR {got!r}"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_outside_the_subset_is_refused_with_construct_and_line(name):
    fn, construct, line = REFUSED[name]
    with pytest.raises(UnsupportedError) as info:
        ir.from_python(fn)
    first = fn.__code__.co_firstlineno
    assert construct in info.value.construct and info.value.lineno == first + line, str(info.value)
