"""Random programs of the course subset, for differential (property-based) testing.

Teaches how compilers are fuzzed (Csmith for C, YARPGen for LLVM; PyTorch's own tests compare
compiled with eager): generate a valid program, run it as Python and through the compiler,
compare. Every generated program terminates, never divides by zero, indexes lists only in
range and keeps ints small (well inside 64 bits), so any difference is a compiler bug.

API (Module 2's differential tests use it too)::

    prog = generate(seed)          # RandomProgram, deterministic in the seed
    prog.source                    # Python source text: helper functions, then the main one
    prog.name                      # the main function's name ("f")
    prog.args                      # a tuple of arguments: (a: list[int], b: list[float], x: int, y: float)
    prog.arg_types                 # ["list[int]", "list[float]", "int", "float"]
    prog.fresh_args()              # a deep copy of args (lists are mutated by the program)
    prog.function()                # the Python function object (exec of source)
    prog.expected()                # (return value, lists after the call) from running Python
    programs()                     # hypothesis strategy of RandomProgram (seeds 0..2**32-1)
    value_numbering_program(seed)  # straight-line ints with repeated, commuted subexpressions (01a)

Knobs: ``generate(seed, max_depth=2, n_stmts=6)``.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass


@dataclass
class RandomProgram:
    seed: int
    source: str
    name: str
    args: tuple
    arg_types: list

    def fresh_args(self) -> tuple:
        return copy.deepcopy(self.args)

    def function(self):
        ns: dict = {}
        exec(compile(self.source, f"<randprog {self.seed}>", "exec"), ns)
        return ns[self.name]

    def expected(self):
        args = self.fresh_args()
        value = self.function()(*args)
        return value, [a for a in args if isinstance(a, list)]


HELPERS = {
    "g": "def g(p: int, q: int) -> int:\n    if p > q:\n        return (p - q) % 1009\n    return (p * 3 + q) % 1009\n",
    "h": "def h(u: float) -> float:\n    return max(-1000.0, min(1000.0, u * 0.5 + 1.0))\n",
}


class _Gen:
    def __init__(self, rng: random.Random, max_depth: int):
        self.r = rng
        self.max_depth = max_depth
        self.ints = ["x", "i0", "i1", "i2"]
        self.floats = ["y", "f0", "f1"]
        self.loop_vars: list[str] = []
        self.in_loop = 0
        self.used_helpers: set[str] = set()
        self.lines: list[str] = []
        self.nloop = 0

    # --- expressions (depth-bounded)
    def iexpr(self, d=0) -> str:
        r = self.r
        leaf = d >= 2 or r.random() < 0.35
        if leaf:
            c = r.random()
            if c < 0.45:
                return r.choice(self.ints + self.loop_vars)
            if c < 0.7:
                return str(r.randint(-5, 9))
            if c < 0.85:
                return f"a[{self.index()}]"
            return "len(a)"
        k = r.randrange(10)
        a, b = self.iexpr(d + 1), self.iexpr(d + 1)
        if k < 3:
            return f"({a} {r.choice(['+', '-', '*'])} {b})"
        if k == 3:
            return f"({a} {r.choice(['//', '%'])} (abs({b}) + 1))"
        if k == 4:
            return f"{r.choice(['min', 'max'])}({a}, {b})"
        if k == 5:
            return f"({self.cond(d + 1)})"
        if k == 6:
            return f"({a} if {self.cond(d + 1)} else {b})"
        if k == 7:
            return f"int({self.fexpr(d + 1)})"
        if k == 8:
            self.used_helpers.add("g")
            return f"g({a}, {b})"
        return f"(-{a})"

    def fexpr(self, d=0) -> str:
        r = self.r
        if d >= 2 or r.random() < 0.35:
            c = r.random()
            if c < 0.45:
                return r.choice(self.floats)
            if c < 0.7:
                return repr(r.choice([0.5, 1.25, -2.0, 3.0, 0.0, 10.0]))
            if c < 0.85:
                return f"b[{self.index()}]"
            return f"float({self.iexpr(d + 1)})"
        k = r.randrange(7)
        a, b = self.fexpr(d + 1), self.fexpr(d + 1)
        if k < 3:
            return f"({a} {r.choice(['+', '-', '*'])} {b})"
        if k == 3:
            return f"({a} / (abs({b}) + 1.0))"
        if k == 4:
            return f"({a} + {self.iexpr(d + 1)})"
        if k == 5:
            self.used_helpers.add("h")
            return f"h({a})"
        return f"{r.choice(['min', 'max'])}({a}, {b})"

    def cond(self, d=0) -> str:
        r = self.r
        k = r.randrange(6)
        op = r.choice(["<", "<=", ">", ">=", "==", "!="])
        if k < 3 or d >= 2:
            return f"{self.iexpr(d + 1)} {op} {self.iexpr(d + 1)}"
        if k == 3:
            return f"{self.fexpr(d + 1)} {op} {self.fexpr(d + 1)}"
        if k == 4:
            return f"{self.cond(d + 1)} {r.choice(['and', 'or'])} {self.cond(d + 1)}"
        return f"not ({self.cond(d + 1)})"

    def index(self) -> str:
        return f"({self.iexpr(2)}) % len(a)" if self.r.random() < 0.5 else f"({self.iexpr(2)}) % 4"

    # --- statements
    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def stmt(self, depth: int, nest: int):
        r = self.r
        k = r.randrange(12)
        if k < 3:
            v = r.choice(self.ints[1:])
            self.emit(depth, f"{v} = ({self.iexpr()}) % 1009")
        elif k < 5:
            v = r.choice(self.floats[1:])
            self.emit(depth, f"{v} = max(-1000.0, min(1000.0, {self.fexpr()}))")
        elif k == 5:
            self.emit(depth, f"a[{self.index()}] = ({self.iexpr()}) % 1009")
        elif k == 6:
            self.emit(depth, f"b[{self.index()}] = max(-1000.0, min(1000.0, {self.fexpr()}))")
        elif k == 7 and nest < self.max_depth:
            self.emit(depth, f"if {self.cond()}:")
            self.block(depth + 1, nest + 1, r.randint(1, 3))
            if r.random() < 0.5:
                self.emit(depth, "else:")
                self.block(depth + 1, nest + 1, r.randint(1, 2))
        elif k == 8 and nest < self.max_depth:
            lv = f"k{self.nloop}"
            self.nloop += 1
            lo, hi = r.randint(-1, 2), r.randint(0, 5)
            step = r.choice(["", "", ", 2"])
            self.emit(depth, f"for {lv} in range({lo}, {hi}{step}):")
            self.loop_vars.append(lv)
            self.in_loop += 1
            self.block(depth + 1, nest + 1, r.randint(1, 3))
            self.in_loop -= 1
            self.loop_vars.pop()
        elif k == 9 and nest < self.max_depth:
            w = f"w{self.nloop}"
            self.nloop += 1
            self.emit(depth, f"{w} = 0")
            self.emit(depth, f"while {w} < {r.randint(1, 4)}:")
            self.emit(depth + 1, f"{w} += 1")
            self.in_loop += 1
            self.block(depth + 1, nest + 1, r.randint(1, 3))
            self.in_loop -= 1
        elif k == 10 and self.in_loop:
            self.emit(depth, f"if {self.cond()}:")
            self.emit(depth + 1, r.choice(["break", "continue"]))
        else:
            v = r.choice(self.ints[1:])
            self.emit(depth, f"{v} += {r.randint(1, 3)}")

    def block(self, depth: int, nest: int, n: int):
        for _ in range(n):
            self.stmt(depth, nest)


def generate(seed: int, max_depth: int = 2, n_stmts: int = 6) -> RandomProgram:
    """A random terminating program of the subset and its arguments, determined by ``seed``."""
    r = random.Random(seed)
    g = _Gen(r, max_depth)
    ret_float = r.random() < 0.4
    g.emit(1, "i0 = x % 7")
    g.emit(1, "i1 = 1")
    g.emit(1, "i2 = len(a)")
    g.emit(1, "f0 = y")
    g.emit(1, "f1 = 0.5")
    g.block(1, 0, n_stmts)
    g.emit(1, f"return {g.fexpr() if ret_float else g.iexpr()}")
    ret = "float" if ret_float else "int"
    head = f"def f(a: list[int], b: list[float], x: int, y: float) -> {ret}:"
    helpers = "".join(HELPERS[k] + "\n\n" for k in sorted(g.used_helpers))
    source = helpers + head + "\n" + "\n".join(g.lines) + "\n"
    n = r.randint(4, 6)
    a = [r.randint(-20, 20) for _ in range(n)]
    b = [round(r.uniform(-10, 10), 2) for _ in range(n)]
    args = (a, b, r.randint(-30, 30), round(r.uniform(-5, 5), 2))
    return RandomProgram(seed, source, "f", args, ["list[int]", "list[float]", "int", "float"])


def programs():
    """A hypothesis strategy of :class:`RandomProgram` (imports hypothesis lazily)."""
    from hypothesis import strategies as st

    return st.integers(min_value=0, max_value=2**32 - 1).map(generate)


# Hand-written programs whose loops run many times and use break/continue: random programs'
# loops are short, so a lowering that forgets the back edge could pass on them alone.
FIXED_LOOPS = [
    ("collatz_steps", "def collatz_steps(n: int) -> int:\n    steps = 0\n    while n != 1:\n"
     "        if n % 2 == 0:\n            n = n // 2\n        else:\n            n = 3 * n + 1\n"
     "        steps += 1\n    return steps\n", (27,), ["int"]),
    ("skip_and_stop", "def skip_and_stop(a: list[int], limit: int) -> int:\n    i = 0\n    s = 0\n"
     "    while i < len(a):\n        i += 1\n        if a[i - 1] < 0:\n            continue\n"
     "        if s > limit:\n            break\n        s += a[i - 1]\n        a[i - 1] = s\n    return s * 100 + i\n",
     ([3, -1, 4, 1, -5, 9, 2, 6, -5, 3, 5], 15), ["list[int]", "int"]),
    ("nested", "def nested(n: int, y: float) -> float:\n    i = 0\n    t = 0.0\n    while i < n:\n"
     "        j = i\n        while j > 0:\n            t = t + y * j\n            j -= 2\n        i += 1\n    return t\n",
     (9, 0.25), ["int", "float"]),
]  # fmt: skip


def while_programs(n_random: int = 30, first_seed: int = 0) -> list[RandomProgram]:
    """Programs with ``while`` loops for a front-end check: :data:`FIXED_LOOPS`, then random ones."""
    out = [RandomProgram(-1 - k, src, name, args, types) for k, (name, src, args, types) in enumerate(FIXED_LOOPS)]
    seed = first_seed
    while len(out) < len(FIXED_LOOPS) + n_random:
        prog = generate(seed)
        if "while" in prog.source:
            out.append(prog)
        seed += 1
    return out


def value_numbering_program(seed: int, n_stmts: int = 10) -> RandomProgram:
    """A program full of repeated subexpressions, for value-numbering checks: each statement
    either computes a fresh expression or repeats an earlier one, often with the operands of a
    commutative op swapped (``y * x`` after ``x * y``); now and then a parameter is reassigned, so
    the same text after it is a *different* value (SSA gives it a new name). One ``if`` splits it
    into blocks. Ints only; every value stays small."""
    rng = random.Random(seed)
    names = ["x", "y", "z"]
    seen: list[tuple[str, str, str]] = []
    lines = []
    commutative = {"+": True, "*": True, "-": False, "min": True, "max": True}

    def text(op, a, b):
        return f"{op}({a}, {b})" if op in ("min", "max") else f"({a} {op} {b}) % 1009"

    for k in range(n_stmts):
        if seen and rng.random() < 0.55:
            op, a, b = rng.choice(seen)
            if commutative[op] and rng.random() < 0.5:
                a, b = b, a
        else:
            op = rng.choice(list(commutative))
            a, b = rng.choice(names), rng.choice(names + [str(rng.randint(1, 9))])
            seen.append((op, a, b))
        indent = "    "
        if k == n_stmts // 2:
            lines.append(f"    if {rng.choice(names)} > {rng.randint(-5, 5)}:")
        if n_stmts // 2 <= k < n_stmts // 2 + 2:
            indent = "        "
        lines.append(f"{indent}t{k} = {text(op, a, b)}")
        names.append(f"t{k}") if indent == "    " else None
        if rng.random() < 0.15:
            p = rng.choice(["x", "y", "z"])
            lines.append(f"{indent}{p} = ({p} + {rng.randint(1, 5)}) % 1009")
    outside = [n for n in names if n.startswith("t")]
    total = " + ".join(outside) or "0"
    source = "def f(x: int, y: int, z: int) -> int:\n" + "\n".join(lines) + f"\n    return ({total}) % 100003\n"
    args = (rng.randint(-30, 30), rng.randint(-30, 30), rng.randint(-30, 30))
    return RandomProgram(seed, source, "f", args, ["int", "int", "int"])
