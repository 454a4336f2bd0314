"""The course IR: three-address code in basic blocks with an explicit control-flow graph.

Teaches the shape every real compiler IR shares (LLVM's ``llvm/IR/Instructions.h``,
``BasicBlock.h``; torch.fx's ``Graph``): a function is a list of basic blocks, each block a
list of instructions ending in exactly one terminator, and the CFG edges are the terminators'
targets. Every value has a static type, so the IR lowers straight to LLVM IR (Module 2).

Simplifications: variables are plain strings (no Value objects, no use lists); the CFG is
recomputed from terminators on demand instead of being kept as pointers.
"""

from __future__ import annotations

import copy as _copy
from dataclasses import dataclass, field

INT, FLOAT, LIST_INT, LIST_FLOAT, VOID = "int", "float", "list[int]", "list[float]", "void"
SCALAR_TYPES = (INT, FLOAT)
LIST_TYPES = (LIST_INT, LIST_FLOAT)
TYPES = (INT, FLOAT, LIST_INT, LIST_FLOAT)

#: Binary operators and their Python meaning (the interpreter's semantics, Python's rounding).
BINARY_OPS = ("add sub mul div floordiv mod min max lt le gt ge eq ne").split()
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
#: Unary operators: ``copy`` (move), ``neg``, ``not`` (0/1), ``abs``, ``float`` / ``int``
#: (conversions; ``int`` truncates toward zero), ``len`` (length of a list).
UNARY_OPS = ("copy", "neg", "not", "abs", "float", "int", "len")


@dataclass(frozen=True)
class Const:
    """A literal operand: an int or a float (bools are ints 0/1)."""

    value: int | float

    @property
    def type(self) -> str:
        return FLOAT if isinstance(self.value, float) else INT

    def __str__(self) -> str:
        return repr(self.value)


#: An operand is a variable name (str) or a Const.
Operand = "str | Const"


def fmt(x) -> str:
    return x if isinstance(x, str) else str(x)


def elem_type(list_type: str) -> str:
    return INT if list_type == LIST_INT else FLOAT


class Instr:
    """Base class. Subclasses list their operand fields in ``_uses``."""

    _uses: tuple[str, ...] = ()
    is_terminator = False

    def uses(self) -> list[str]:
        """Variables read, in operand order (constants left out)."""
        out = []
        for f in self._uses:
            v = getattr(self, f)
            vals = v if isinstance(v, list) else [v]
            out.extend(x for x in vals if isinstance(x, str))
        return out

    def operands(self) -> list:
        out = []
        for f in self._uses:
            v = getattr(self, f)
            out.extend(v if isinstance(v, list) else [v])
        return [x for x in out if x is not None]

    def defs(self) -> list[str]:
        return [self.dest] if self.dest is not None else []

    def replace_uses(self, mapping) -> None:
        """Rewrite operands in place: ``mapping(operand) -> operand``."""
        for f in self._uses:
            v = getattr(self, f)
            if isinstance(v, list):
                setattr(self, f, [mapping(x) for x in v])
            elif v is not None:
                setattr(self, f, mapping(v))

    def has_side_effects(self) -> bool:
        return False


@dataclass
class Op(Instr):
    """``dest: type = op a[, b]``: a pure unary or binary operation."""

    dest: str
    type: str
    op: str
    args: list
    _uses = ("args",)

    def __str__(self):
        return f"{self.dest}: {self.type} = {self.op} {', '.join(map(fmt, self.args))}"


@dataclass
class Phi(Instr):
    """``dest: type = phi [v1, pred1], [v2, pred2]``: the value from the edge taken."""

    dest: str
    type: str
    incoming: dict  # predecessor label -> operand

    def uses(self):
        return [v for v in self.incoming.values() if isinstance(v, str)]

    def operands(self):
        return list(self.incoming.values())

    def replace_uses(self, mapping):
        self.incoming = {k: mapping(v) for k, v in self.incoming.items()}

    def __str__(self):
        inc = ", ".join(f"[{fmt(v)}, {b}]" for b, v in self.incoming.items())
        return f"{self.dest}: {self.type} = phi {inc}"


@dataclass
class Load(Instr):
    """``dest: type = load array, index``."""

    dest: str
    type: str
    array: str
    index: object
    _uses = ("array", "index")

    def __str__(self):
        return f"{self.dest}: {self.type} = load {self.array}, {fmt(self.index)}"


@dataclass
class Store(Instr):
    """``store array, index, value``: writes one element (a side effect)."""

    array: str
    index: object
    value: object
    _uses = ("array", "index", "value")
    dest = None

    def has_side_effects(self):
        return True

    def __str__(self):
        return f"store {self.array}, {fmt(self.index)}, {fmt(self.value)}"


@dataclass
class Alloc(Instr):
    """``dest: list[T] = alloc size, init``: a fresh list of ``size`` copies of ``init``."""

    dest: str
    type: str
    size: object
    init: object
    _uses = ("size", "init")

    def __str__(self):
        return f"{self.dest}: {self.type} = alloc {fmt(self.size)}, {fmt(self.init)}"


@dataclass
class Call(Instr):
    """``dest: type = call f(args)`` or ``call f(args)`` for a void function."""

    dest: str | None
    type: str
    func: str
    args: list
    _uses = ("args",)

    def has_side_effects(self):
        return True  # callees may store into lists

    def __str__(self):
        call = f"call {self.func}({', '.join(map(fmt, self.args))})"
        return call if self.dest is None else f"{self.dest}: {self.type} = {call}"


@dataclass
class Jump(Instr):
    """``jump label``."""

    target: str
    dest = None
    is_terminator = True

    def targets(self):
        return [self.target]

    def __str__(self):
        return f"jump {self.target}"


@dataclass
class Branch(Instr):
    """``br cond, iftrue, iffalse``: goes to ``iftrue`` when ``cond != 0``."""

    cond: object
    true: str
    false: str
    _uses = ("cond",)
    dest = None
    is_terminator = True

    def targets(self):
        return [self.true, self.false] if self.true != self.false else [self.true]

    def __str__(self):
        return f"br {fmt(self.cond)}, {self.true}, {self.false}"


@dataclass
class Return(Instr):
    """``ret value`` or ``ret``."""

    value: object = None
    _uses = ("value",)
    dest = None
    is_terminator = True

    def targets(self):
        return []

    def __str__(self):
        return "ret" if self.value is None else f"ret {fmt(self.value)}"


@dataclass
class BasicBlock:
    """A label, straight-line instructions (phis first) and one terminator."""

    label: str
    instrs: list = field(default_factory=list)
    term: Instr | None = None

    def all(self) -> list:
        return self.instrs + ([self.term] if self.term is not None else [])

    def phis(self) -> list[Phi]:
        return [i for i in self.instrs if isinstance(i, Phi)]

    def succs(self) -> list[str]:
        return self.term.targets() if self.term is not None else []

    def __str__(self):
        lines = [f"{self.label}:"] + [f"  {i}" for i in self.all()]
        return "\n".join(lines)


@dataclass
class Function:
    """A function: typed parameters, a return type, blocks (``blocks[0]`` is the entry).

    ``callees`` maps the names of the other functions it may call to their IR (shared by all
    functions of one program; left out of equality and repr).
    """

    name: str
    params: list  # [(name, type)]
    ret_type: str
    blocks: list
    callees: dict = field(default_factory=dict, compare=False, repr=False)
    # Where each parameter's type came from: "annotation", "call" (arg_types), "use" (inferred
    # from the body) or "default" (nothing said: int). The JIT re-specialises the last two.
    param_origins: list = field(default_factory=list, compare=False, repr=False)
    # arg_types -> a fresh Function from the same Python source (set by the front end), or None
    recompile: object = field(default=None, compare=False, repr=False)

    # --- the explicit CFG ---------------------------------------------------------------
    @property
    def entry(self) -> str:
        return self.blocks[0].label

    def block(self, label: str) -> BasicBlock:
        for b in self.blocks:
            if b.label == label:
                return b
        raise KeyError(f"no block {label!r} in function {self.name}")

    def labels(self) -> list[str]:
        return [b.label for b in self.blocks]

    def succs(self) -> dict[str, list[str]]:
        """label -> successor labels, in terminator order."""
        return {b.label: b.succs() for b in self.blocks}

    def preds(self) -> dict[str, list[str]]:
        """label -> predecessor labels, in block order (deterministic)."""
        out = {b.label: [] for b in self.blocks}
        for b in self.blocks:
            for s in b.succs():
                if b.label not in out[s]:
                    out[s].append(b.label)
        return out

    def instructions(self):
        """(block label, instruction) for every instruction, terminators included."""
        for b in self.blocks:
            for i in b.all():
                yield b.label, i

    def var_types(self) -> dict[str, str]:
        """Every variable's type (parameters and definitions)."""
        types = dict(self.params)
        for _, i in self.instructions():
            if i.dest is not None:
                types[i.dest] = i.type
        return types

    def copy(self) -> Function:
        """A deep copy of the blocks (callees shared)."""
        new = Function(self.name, list(self.params), self.ret_type, _copy.deepcopy(self.blocks))
        new.callees = self.callees
        new.param_origins, new.recompile = list(self.param_origins), self.recompile
        return new

    def program(self) -> list[Function]:
        """The callees (sorted by name, self excluded) then this function."""
        others = [self.callees[k] for k in sorted(self.callees) if k != self.name]
        return others + [self]

    def header(self) -> str:
        ps = ", ".join(f"{n}: {t}" for n, t in self.params)
        return f"func {self.name}({ps}) -> {self.ret_type}"

    def text(self) -> str:
        """This function alone (without its callees)."""
        body = "\n".join(str(b) for b in self.blocks)
        return f"{self.header()} {{\n{body}\n}}"

    def __str__(self) -> str:
        return "\n\n".join(f.text() for f in self.program()) + "\n"

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": str(self)}


def remove_unreachable(fn: Function) -> Function:
    """Drop blocks the entry cannot reach (in place) and the phi inputs from them."""
    succs = fn.succs()
    seen, stack = {fn.entry}, [fn.entry]
    while stack:
        for s in succs[stack.pop()]:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    fn.blocks = [b for b in fn.blocks if b.label in seen]
    for b in fn.blocks:
        for p in b.phis():
            p.incoming = {k: v for k, v in p.incoming.items() if k in seen}
    return fn
