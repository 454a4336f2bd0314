"""Front end: a Python function (a small subset) -> the course IR (three-address CFG).

Teaches what a front end does (CPython's ``Python/compile.c`` builds a CFG of bytecode
blocks the same way; clang's ``CodeGenFunction::EmitIfStmt`` / ``EmitWhileStmt`` emit the
same block shapes): walk the syntax tree, give each sub-expression a temporary, and turn
structured control flow into labelled blocks and jumps.

Two passes over the AST: (1) type inference to a fixpoint (a variable assigned both int and
float becomes float; int values are converted where they flow into it), (2) lowering.

A parameter's type, in order of authority (the table ``PARAM_TYPE_SOURCES``): its annotation;
the caller's ``arg_types`` (the JIT passes the types of the actual arguments, as Numba does);
its use in the body (indexed or ``len()``-ed: a list, of floats if a float is stored into it;
reassigned a float: a float); else ``int``. An annotated parameter that the body reassigns with a
value of another type is an error, never a silent conversion.

The subset: int/float scalars (bools are ints), ``+ - * / // %``, comparisons, ``and or not``,
``x if c else y``, ``if/elif/else``, ``while``, ``for i in range(...)`` (constant step),
``break``, ``continue``, ``return``, ``x += ...``, calls of ``int float abs min max len``
and of other subset functions, and 1-D lists: ``a[i]``, ``a[i] = v``, ``[v] * n``, ``[1, 2]``.
Anything else raises :class:`UnsupportedError` naming the construct and the source line.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import textwrap
import types as pytypes

from course_lib.ir.core import (
    FLOAT,
    INT,
    LIST_FLOAT,
    LIST_INT,
    LIST_TYPES,
    VOID,
    Alloc,
    BasicBlock,
    Branch,
    Call,
    Const,
    Function,
    Jump,
    Load,
    Op,
    Return,
    Store,
    elem_type,
    remove_unreachable,
)


class UnsupportedError(Exception):
    """A construct outside the course subset; ``construct`` and ``lineno`` say which and where."""

    def __init__(self, construct: str, lineno: int, detail: str = ""):
        self.construct, self.lineno = construct, lineno
        msg = f"line {lineno}: {construct} is not supported by the course subset"
        super().__init__(msg + (f" ({detail})" if detail else ""))


BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
BUILTIN_UNARY = {"int": "int", "float": "float", "abs": "abs", "len": "len"}
BUILTIN_BINARY = {"min": "min", "max": "max"}


def _construct(node: ast.AST) -> str:
    """A learner-facing name for an AST node ('for loop over a list', 'ast.Lambda' -> 'lambda')."""
    names = {
        ast.Lambda: "lambda",
        ast.ListComp: "list comprehension",
        ast.Dict: "dict",
        ast.Set: "set",
        ast.Tuple: "tuple",
        ast.With: "with statement",
        ast.Try: "try statement",
        ast.Pow: "operator **",
        ast.Attribute: "attribute access",
        ast.Global: "global statement",
        ast.Nonlocal: "nonlocal statement",
        ast.FunctionDef: "nested function",
        ast.ClassDef: "class",
        ast.Raise: "raise",
        ast.Yield: "yield",
        ast.Str if hasattr(ast, "Str") else ast.JoinedStr: "string",
        ast.JoinedStr: "f-string",
        ast.BitAnd: "operator &",
        ast.BitOr: "operator |",
        ast.BitXor: "operator ^",
        ast.LShift: "operator <<",
        ast.RShift: "operator >>",
        ast.Invert: "operator ~",
        ast.Is: "operator is",
        ast.In: "operator in",
        ast.IsNot: "operator is not",
        ast.NotIn: "operator not in",
        ast.Import: "import",
        ast.Assert: "assert",
        ast.Delete: "del",
        ast.Slice: "slice",
        ast.NamedExpr: "assignment expression (:=)",
        ast.GeneratorExp: "generator expression",
        ast.DictComp: "dict comprehension",
        ast.SetComp: "set comprehension",
        ast.Starred: "starred expression (*x)",
        ast.Match: "match statement",
        ast.AsyncFunctionDef: "async function",
        ast.Await: "await",
        ast.MatMult: "operator @",
    }
    return names.get(type(node), type(node).__name__)


def _join(a: str | None, b: str, line: int) -> str:
    if a is None or a == b:
        return b
    if {a, b} == {INT, FLOAT}:
        return FLOAT
    if {a, b} == {LIST_INT, LIST_FLOAT}:
        return LIST_FLOAT
    raise UnsupportedError("a variable holding both a list and a scalar", line)


def _ann_type(ann, line: int) -> str | None:
    if ann is None:
        return None
    src = ast.unparse(ann)
    table = {
        "int": INT,
        "bool": INT,
        "float": FLOAT,
        "list[int]": LIST_INT,
        "list[float]": LIST_FLOAT,
        "list": LIST_FLOAT,
        "None": VOID,
    }
    if src not in table:
        raise UnsupportedError(f"type annotation {src}", line)
    return table[src]


#: where a parameter's type can come from, most authoritative first (see the module docstring)
PARAM_TYPE_SOURCES = ("annotation", "call", "use", "default")


def _uses_as_list(tree: ast.FunctionDef, name: str) -> bool:
    """Is ``name`` indexed (``name[i]``, ``name[i] = v``) or measured (``len(name)``) in the body?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "len"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == name
        ):
            return True
    return False


#: statement kinds whose lowering a learner may replace with :func:`override` (01a's exercise)
OVERRIDABLE = ("While", "If")


@contextlib.contextmanager
def override(kind: str, rule):
    """Lower every ``ast.<kind>`` statement with ``rule(builder, stmt)`` inside the ``with`` body.

    ``builder`` is the front end's lowering object; a rule uses its small public API:
    ``labels``, ``new_block``, ``place``, ``terminate``, ``cond``, ``lower`` and the ``loops`` stack.
    """
    if kind not in OVERRIDABLE:
        raise ValueError(f"override: {kind!r} is not one of {', '.join(OVERRIDABLE)}")
    if not callable(rule):
        raise TypeError(f"override: the rule for {kind} must be a function (builder, stmt) -> None")
    attr = f"stmt_{kind}"
    original = getattr(_Lowering, attr)
    setattr(_Lowering, attr, lambda self, stmt: rule(self, stmt))
    try:
        yield
    finally:
        setattr(_Lowering, attr, original)


class _Ctx:
    """Shared across the functions of one program: name -> Function (for calls)."""

    def __init__(self):
        self.functions: dict[str, Function] = {}
        self.by_object: dict[int, str] = {}
        self.source_tree: ast.Module | None = None  # set by from_source


def from_python(fn, arg_types: list[str] | None = None) -> Function:
    """Compile a Python function of the subset (and every subset function it calls).

    Parameter types come from annotations (``int``, ``float``, ``list[int]``, ``list[float]``),
    then ``arg_types``, then their use in the body, else ``int`` (``.param_origins`` says which).
    Returns the IR of ``fn``; its callees are in ``.callees``.
    """
    _check_arg_types(arg_types)
    ctx = _Ctx()
    out = _compile(fn, ctx, arg_types)
    out.recompile = lambda types: from_python(fn, types)
    return out


def _check_arg_types(arg_types) -> None:
    allowed = (INT, FLOAT, LIST_INT, LIST_FLOAT)
    for t in arg_types or []:
        if t is not None and t not in allowed:
            raise ValueError(f"arg_types: {t!r} is not a course type; use one of {', '.join(allowed)} (or None)")


def from_source(source: str, name: str | None = None, arg_types=None) -> Function:
    """Compile Python source text (the last function defined, or ``name``)."""
    namespace: dict = {}
    exec(compile(source, "<subset>", "exec"), namespace)
    tree = ast.parse(source)
    defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    target = namespace[name or defs[-1]]
    _check_arg_types(arg_types)
    ctx = _Ctx()
    ctx.source_tree = tree
    out = _compile(target, ctx, arg_types)
    out.recompile = lambda types: from_source(source, name, types)
    return out


def _compile(fn, ctx: _Ctx, arg_types=None) -> Function:
    if id(fn) in ctx.by_object:
        return ctx.functions[ctx.by_object[id(fn)]]
    defs = [n for n in ctx.source_tree.body if isinstance(n, ast.FunctionDef)] if ctx.source_tree else []
    mine = [n for n in defs if n.name == fn.__name__ and fn.__code__.co_filename == "<subset>"]
    if mine:
        tree = mine[-1]
        offset = 0
    else:
        try:
            src = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError) as e:
            raise ValueError(f"the source of {fn.__name__} is not available; pass the text to from_source") from e
        tree = ast.parse(src).body[0]
        offset = fn.__code__.co_firstlineno - 1
        ast.increment_lineno(tree, offset)
    if not isinstance(tree, ast.FunctionDef):
        raise UnsupportedError(_construct(tree), getattr(tree, "lineno", 0) + offset)
    lower = _Lowering(fn, tree, ctx, arg_types)
    ctx.by_object[id(fn)] = fn.__name__
    return lower.run()


class _Lowering:
    def __init__(self, pyfn, tree: ast.FunctionDef, ctx: _Ctx, arg_types):
        self.pyfn, self.tree, self.ctx = pyfn, tree, ctx
        a = tree.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise UnsupportedError("default, keyword or variadic parameters", tree.lineno)
        for d in tree.decorator_list:
            raise UnsupportedError("decorator", d.lineno)
        if arg_types is not None and len(arg_types) != len(a.args):
            raise ValueError(f"{tree.name} has {len(a.args)} parameters but arg_types names {len(arg_types)} types")
        self.params, origins = [], []
        for k, arg in enumerate(a.args):
            t, origin = self._param_type(tree, arg, arg_types[k] if arg_types else None)
            self.params.append((arg.arg, t))
            origins.append(origin)
        self.declared_ret = _ann_type(tree.returns, tree.lineno)
        self.fn = Function(tree.name, self.params, self.declared_ret or INT, [], ctx.functions)
        self.fn.param_origins = origins
        ctx.functions[tree.name] = self.fn  # visible to recursive calls
        self.counter = 0
        self.loops: list[tuple[str, str]] = []  # (continue target, break target)

    @staticmethod
    def _param_type(tree: ast.FunctionDef, arg: ast.arg, given: str | None) -> tuple[str, str]:
        """(type, origin) of one parameter before the body's fixpoint (PARAM_TYPE_SOURCES order)."""
        t = _ann_type(arg.annotation, tree.lineno)
        if t is not None:
            return t, "annotation"
        if given is not None:
            return given, "call"
        if _uses_as_list(tree, arg.arg):
            return LIST_INT, "use"  # widened to list[float] if a float is stored into it
        return INT, "default"  # widened to float if the body assigns it a float

    # ---------------------------------------------------------------- type inference
    def run(self) -> Function:
        self.env = dict(self.params)
        self.ret = self.declared_ret
        for _ in range(20):
            before = (dict(self.env), self.ret)
            self._infer_body(self.tree.body)
            if (self.env, self.ret) == before:
                break
        self._settle_params()
        self.fn.ret_type = self.ret or VOID
        self.user_vars = set(self.env)
        self.cur = self._new_block("entry")
        self._stmts(self.tree.body)
        if self.cur.term is None:
            self.cur.term = Return(None)
        remove_unreachable(self.fn)
        return self.fn

    def _settle_params(self):
        """A parameter the body widened (int -> float, list[int] -> list[float]) takes the wider type,
        unless it was annotated: then the reassignment is an error rather than a hidden conversion."""
        for k, ((name, t), origin) in enumerate(zip(self.params, self.fn.param_origins)):
            wide = self.env[name]
            if wide == t:
                continue
            if origin == "annotation":
                raise UnsupportedError(
                    f"parameter {name!r} annotated {t} but assigned a {wide} in the body",
                    self.tree.lineno,
                    f"annotate it {wide}, or assign the {wide} to a new variable",
                )
            self.params[k] = (name, wide)
            if origin == "default":
                self.fn.param_origins[k] = "use"

    def _infer_body(self, body):
        for s in body:
            self._infer_stmt(s)

    def _assign_type(self, name: str, t: str, line: int):
        self.env[name] = _join(self.env.get(name), t, line)

    def _infer_stmt(self, s):
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise UnsupportedError("chained assignment", s.lineno)
            t = self.texpr(s.value)
            tgt = s.targets[0]
            if isinstance(tgt, ast.Name):
                self._assign_type(tgt.id, t, s.lineno)
            elif isinstance(tgt, ast.Subscript):
                self._element_stored(tgt, t, s.lineno)
        elif isinstance(s, ast.AugAssign):
            t = self._tbin(s.op, self.texpr(s.target), self.texpr(s.value), s.lineno)
            if isinstance(s.target, ast.Name):
                self._assign_type(s.target.id, t, s.lineno)
            elif isinstance(s.target, ast.Subscript):
                self._element_stored(s.target, t, s.lineno)
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
            self._assign_type(s.target.id, self.texpr(s.value), s.lineno)
        elif isinstance(s, (ast.If, ast.While)):
            self._infer_body(s.body)
            self._infer_body(s.orelse)
        elif isinstance(s, ast.For):
            if isinstance(s.target, ast.Name):
                self._assign_type(s.target.id, INT, s.lineno)
            self._infer_body(s.body)
        elif isinstance(s, ast.Return) and s.value is not None:
            t = self.texpr(s.value)
            self.ret = t if self.declared_ret else _join(self.ret, t, s.lineno)

    def _element_stored(self, tgt: ast.Subscript, t: str, line: int):
        """``p[i] = <float>`` makes a list parameter whose type was inferred a list[float]."""
        if not (isinstance(tgt.value, ast.Name) and t == FLOAT):
            return
        name = tgt.value.id
        k = next((k for k, (p, _) in enumerate(self.params) if p == name), None)
        if k is not None and self.fn.param_origins[k] == "use" and self.env.get(name) == LIST_INT:
            self.env[name] = LIST_FLOAT

    def texpr(self, e) -> str:
        """The static type of an expression (unknown variables are int until assigned)."""
        if isinstance(e, ast.Constant):
            if isinstance(e.value, bool) or isinstance(e.value, int):
                return INT
            if isinstance(e.value, float):
                return FLOAT
            raise UnsupportedError(f"constant {e.value!r}", e.lineno)
        if isinstance(e, ast.Name):
            if e.id in self.env:
                return self.env[e.id]
            g = self._global(e)
            return Const(g).type if isinstance(g, (int, float)) else INT
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Mult) and (isinstance(e.left, ast.List) or isinstance(e.right, ast.List)):
                lst = e.left if isinstance(e.left, ast.List) else e.right
                return LIST_FLOAT if self._list_elem(lst) == FLOAT else LIST_INT
            return self._tbin(e.op, self.texpr(e.left), self.texpr(e.right), e.lineno)
        if isinstance(e, ast.UnaryOp):
            return INT if isinstance(e.op, ast.Not) else self.texpr(e.operand)
        if isinstance(e, (ast.Compare,)):
            return INT
        if isinstance(e, ast.BoolOp):
            t = None
            for v in e.values:
                t = _join(t, self.texpr(v), e.lineno)
            return t
        if isinstance(e, ast.IfExp):
            return _join(self.texpr(e.body), self.texpr(e.orelse), e.lineno)
        if isinstance(e, ast.Subscript):
            t = self.texpr(e.value)
            return elem_type(t) if t in LIST_TYPES else INT
        if isinstance(e, ast.List):
            return LIST_FLOAT if self._list_elem(e) == FLOAT else LIST_INT
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            f = e.func.id
            if f in ("int", "len"):
                return INT
            if f == "float":
                return FLOAT
            if f == "abs":
                return self.texpr(e.args[0]) if e.args else INT
            if f in BUILTIN_BINARY:
                return _join(self.texpr(e.args[0]), self.texpr(e.args[1]), e.lineno) if len(e.args) == 2 else INT
            callee = self._callee(e)
            return callee.ret_type if callee is not None else INT
        return INT

    def _list_elem(self, lst: ast.List) -> str:
        t = INT
        for v in lst.elts:
            t = _join(t, self.texpr(v), lst.lineno)
        return t

    def _tbin(self, op, a, b, line) -> str:
        if a in LIST_TYPES or b in LIST_TYPES:
            raise UnsupportedError("arithmetic on lists", line)
        if isinstance(op, ast.Div):
            return FLOAT
        return FLOAT if FLOAT in (a, b) else INT

    def _global(self, e: ast.Name):
        g = self.pyfn.__globals__
        if e.id in g:
            return g[e.id]
        closure = inspect.getclosurevars(self.pyfn).nonlocals
        return closure.get(e.id)

    def _callee(self, e: ast.Call) -> Function | None:
        f = self._global(e.func)
        if f is self.pyfn:
            return self.fn
        if isinstance(f, pytypes.FunctionType):
            return _compile(f, self.ctx)
        return None

    # ---------------------------------------------------------------- helpers
    def _new_block(self, label: str) -> BasicBlock:
        b = BasicBlock(label)
        self.fn.blocks.append(b)
        return b

    def _labels(self, *names: str) -> list[str]:
        self.counter += 1
        return [f"{n}{self.counter}" for n in names]

    def _temp(self) -> str:
        while True:
            self.counter += 1
            name = f"t{self.counter}"
            if name not in self.user_vars:
                return name

    def _emit(self, instr):
        self.cur.instrs.append(instr)

    def _terminate(self, term, next_block: BasicBlock | None = None):
        if self.cur.term is None:
            self.cur.term = term
        self.cur = next_block if next_block is not None else self._new_block(self._labels("dead")[0])

    def _convert(self, x, have: str, want: str, line: int):
        """Insert an int -> float conversion when needed."""
        if have == want:
            return x
        if (have, want) == (INT, FLOAT):
            if isinstance(x, Const):
                return Const(float(x.value))
            t = self._temp()
            self._emit(Op(t, FLOAT, "float", [x]))
            return t
        if (have, want) == (LIST_INT, LIST_FLOAT):
            raise UnsupportedError("passing a list[int] where a list[float] is expected", line)
        raise UnsupportedError(f"using a {have} value where a {want} is expected", line)

    # ---------------------------------------------------------------- the builder API of a rule
    def labels(self, *names: str) -> list[str]:
        """Fresh block labels sharing one number: ``labels("while.cond", "while.end")``."""
        return self._labels(*names)

    def new_block(self, label: str, place: bool = True) -> BasicBlock:
        """A new empty block; ``place=False`` leaves it out of the function until :meth:`place`."""
        return self._new_block(label) if place else BasicBlock(label)

    def place(self, block: BasicBlock) -> None:
        """Append a block made with ``place=False`` (blocks print in the order they are placed)."""
        self.fn.blocks.append(block)

    def terminate(self, term, next_block: BasicBlock | None = None) -> None:
        """End the current block with ``term`` (a Jump or Branch); continue in ``next_block``."""
        self._terminate(term, next_block)

    def cond(self, e: ast.expr):
        """Lower a condition expression into the current block; returns the operand to branch on."""
        return self._cond(e)

    def lower(self, stmts: list) -> None:
        """Lower a statement list into the current block (and the blocks it creates)."""
        self._stmts(stmts)

    # ---------------------------------------------------------------- statements
    def _stmts(self, body):
        for s in body:
            self._stmt(s)

    def _stmt(self, s):
        meth = getattr(self, f"stmt_{type(s).__name__}", None)
        if meth is None:
            raise UnsupportedError(_construct(s), s.lineno)
        meth(s)

    def _store_var(self, name: str, value, vtype: str, line: int):
        want = self.env[name]
        value = self._convert(value, vtype, want, line)
        # Retarget the temporary that computed the value instead of adding a copy.
        last = self.cur.instrs[-1] if self.cur.instrs else None
        if (
            isinstance(value, str)
            and last is not None
            and getattr(last, "dest", None) == value
            and value not in self.user_vars
        ):
            last.dest = name
        else:
            self._emit(Op(name, want, "copy", [value]))

    def stmt_Assign(self, s):
        if len(s.targets) != 1:
            raise UnsupportedError("chained assignment", s.lineno)
        self._assign(s.targets[0], s.value, s.lineno)

    def stmt_AnnAssign(self, s):
        if s.value is None:
            return
        self._assign(s.target, s.value, s.lineno)

    def _assign(self, tgt, value_node, line):
        if isinstance(tgt, ast.Name):
            v, t = self.expr(value_node)
            self._store_var(tgt.id, v, t, line)
        elif isinstance(tgt, ast.Subscript):
            arr, idx = self._subscript_parts(tgt)
            v, t = self.expr(value_node)
            v = self._convert(v, t, elem_type(self.env[arr]), line)
            self._emit(Store(arr, idx, v))
        else:
            raise UnsupportedError(f"assignment to {_construct(tgt)}", line)

    def stmt_AugAssign(self, s):
        binop = ast.BinOp(left=_load(s.target), op=s.op, right=s.value, lineno=s.lineno, col_offset=0)
        if isinstance(s.target, ast.Subscript):
            arr, idx = self._subscript_parts(s.target)
            cur = self._temp()
            et = elem_type(self.env[arr])
            self._emit(Load(cur, et, arr, idx))
            rv, rt = self.expr(s.value)
            v, t = self._binop(s.op, cur, et, rv, rt, s.lineno)
            self._emit(Store(arr, idx, self._convert(v, t, et, s.lineno)))
            return
        self._assign(s.target, binop, s.lineno)

    def stmt_Expr(self, s):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring
        if not isinstance(s.value, ast.Call):
            raise UnsupportedError("expression statement that is not a call", s.lineno)
        self.expr(s.value, want_value=False)

    def stmt_Pass(self, s):
        pass

    def stmt_Return(self, s):
        if s.value is None:
            self._terminate(Return(None))
            return
        v, t = self.expr(s.value)
        self._terminate(Return(self._convert(v, t, self.fn.ret_type, s.lineno)))

    def stmt_If(self, s):
        then_l, else_l, end_l = self._labels("if.then", "if.else", "if.end")
        cond = self._cond(s.test)
        then_b = self._new_block(then_l)
        else_b = self._new_block(else_l) if s.orelse else None
        end_b = BasicBlock(end_l)
        self._terminate(Branch(cond, then_l, else_l if s.orelse else end_l), then_b)
        self._stmts(s.body)
        self._terminate(Jump(end_l), else_b or end_b)
        if s.orelse:
            self._stmts(s.orelse)
            self._terminate(Jump(end_l), end_b)
        self.fn.blocks.append(end_b)

    def stmt_While(self, s):
        if s.orelse:
            raise UnsupportedError("while ... else", s.lineno)
        cond_l, body_l, end_l = self._labels("while.cond", "while.body", "while.end")
        cond_b = self._new_block(cond_l)
        self._terminate(Jump(cond_l), cond_b)
        c = self._cond(s.test)
        body_b = self._new_block(body_l)
        end_b = BasicBlock(end_l)
        self._terminate(Branch(c, body_l, end_l), body_b)
        self.loops.append((cond_l, end_l))
        self._stmts(s.body)
        self.loops.pop()
        self._terminate(Jump(cond_l), end_b)
        self.fn.blocks.append(end_b)

    def stmt_For(self, s):
        if s.orelse:
            raise UnsupportedError("for ... else", s.lineno)
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
            raise UnsupportedError("for loop over something other than range(...)", s.lineno)
        if not isinstance(s.target, ast.Name):
            raise UnsupportedError("for loop with a tuple target", s.lineno)
        args = it.args
        if not 1 <= len(args) <= 3 or it.keywords:
            raise UnsupportedError("range with this many arguments", s.lineno)
        step = 1
        if len(args) == 3:
            sv = _const_int(args[2])
            if sv is None or sv == 0:
                raise UnsupportedError("range with a non-constant or zero step", s.lineno)
            step = sv
        start, end = (Const(0), args[0]) if len(args) == 1 else (args[0], args[1])
        if not isinstance(start, Const):
            sv, st = self.expr(start)
            start = self._convert(sv, st, INT, s.lineno)
        ev, et = self.expr(end)
        if et != INT:
            raise UnsupportedError("range over a float", s.lineno)
        cond_l, body_l, latch_l, end_l = self._labels("for.cond", "for.body", "for.latch", "for.end")
        ctr, bound = self._temp(), self._temp()
        self.user_vars |= {ctr, bound}  # live across blocks: never retargeted
        self._emit(Op(bound, INT, "copy", [ev]))  # range() evaluates its bound once
        self._emit(Op(ctr, INT, "copy", [start]))
        cond_b = self._new_block(cond_l)
        self._terminate(Jump(cond_l), cond_b)
        c = self._temp()
        self._emit(Op(c, INT, "lt" if step > 0 else "gt", [ctr, bound]))
        body_b = self._new_block(body_l)
        end_b = BasicBlock(end_l)
        self._terminate(Branch(c, body_l, end_l), body_b)
        self._store_var(s.target.id, ctr, INT, s.lineno)
        self.loops.append((latch_l, end_l))
        self._stmts(s.body)
        self.loops.pop()
        latch_b = BasicBlock(latch_l)
        self._terminate(Jump(latch_l), latch_b)
        self.fn.blocks.append(latch_b)
        self._emit(Op(ctr, INT, "add", [ctr, Const(step)]))
        self._terminate(Jump(cond_l), end_b)
        self.fn.blocks.append(end_b)

    def stmt_Break(self, s):
        if not self.loops:
            raise UnsupportedError("break outside a loop", s.lineno)
        self._terminate(Jump(self.loops[-1][1]))

    def stmt_Continue(self, s):
        if not self.loops:
            raise UnsupportedError("continue outside a loop", s.lineno)
        self._terminate(Jump(self.loops[-1][0]))

    # ---------------------------------------------------------------- expressions
    def _cond(self, e):
        v, t = self.expr(e)
        if t not in (INT, FLOAT):
            raise UnsupportedError("a list used as a condition", e.lineno)
        return v

    def _subscript_parts(self, e: ast.Subscript):
        if not isinstance(e.value, ast.Name) or self.env.get(e.value.id) not in LIST_TYPES:
            raise UnsupportedError("indexing something that is not a list variable", e.lineno)
        if isinstance(e.slice, ast.Slice):
            raise UnsupportedError("slice", e.lineno)
        iv, it = self.expr(e.slice)
        if it != INT:
            raise UnsupportedError("a non-int list index", e.lineno)
        return e.value.id, iv

    def expr(self, e, want_value=True):
        """Lower an expression; returns (operand, type)."""
        meth = getattr(self, f"expr_{type(e).__name__}", None)
        if meth is None:
            raise UnsupportedError(_construct(e), e.lineno)
        return meth(e)

    def expr_Constant(self, e):
        v = e.value
        if isinstance(v, bool):
            return Const(int(v)), INT
        if isinstance(v, (int, float)):
            return Const(v), Const(v).type
        raise UnsupportedError(f"constant {v!r}", e.lineno)

    def expr_Name(self, e):
        if e.id in self.env:
            return e.id, self.env[e.id]
        g = self._global(e)
        if isinstance(g, bool):
            return Const(int(g)), INT
        if isinstance(g, (int, float)):
            return Const(g), Const(g).type
        raise UnsupportedError(f"name {e.id!r} (not a parameter, local or numeric global)", e.lineno)

    def _binop(self, op, a, at, b, bt, line):
        if type(op) not in BINOPS:
            raise UnsupportedError(_construct(op), line)
        rt = self._tbin(op, at, bt, line)
        ot = FLOAT if rt == FLOAT else INT
        a, b = self._convert(a, at, ot, line), self._convert(b, bt, ot, line)
        t = self._temp()
        self._emit(Op(t, rt, BINOPS[type(op)], [a, b]))
        return t, rt

    def expr_BinOp(self, e):
        if isinstance(e.op, ast.Mult) and (isinstance(e.left, ast.List) or isinstance(e.right, ast.List)):
            lst, n = (e.left, e.right) if isinstance(e.left, ast.List) else (e.right, e.left)
            if len(lst.elts) != 1:
                raise UnsupportedError("repeating a list of more than one element", e.lineno)
            lt = LIST_FLOAT if self._list_elem(lst) == FLOAT else LIST_INT
            iv, it = self.expr(lst.elts[0])
            iv = self._convert(iv, it, elem_type(lt), e.lineno)
            nv, nt = self.expr(n)
            if nt != INT:
                raise UnsupportedError("list repeated a float number of times", e.lineno)
            t = self._temp()
            self._emit(Alloc(t, lt, nv, iv))
            return t, lt
        a, at = self.expr(e.left)
        b, bt = self.expr(e.right)
        return self._binop(e.op, a, at, b, bt, e.lineno)

    def expr_UnaryOp(self, e):
        v, t = self.expr(e.operand)
        if isinstance(e.op, ast.UAdd):
            return v, t
        if isinstance(e.op, ast.USub) and isinstance(v, Const):
            return Const(-v.value), t  # a negative literal, not an instruction
        op = {ast.USub: "neg", ast.Not: "not"}.get(type(e.op))
        if op is None:
            raise UnsupportedError(_construct(e.op), e.lineno)
        d = self._temp()
        rt = INT if op == "not" else t
        self._emit(Op(d, rt, op, [v]))
        return d, rt

    def expr_Compare(self, e):
        if len(e.ops) != 1:
            raise UnsupportedError("chained comparison", e.lineno)
        if type(e.ops[0]) not in CMPOPS:
            raise UnsupportedError(_construct(e.ops[0]), e.lineno)
        a, at = self.expr(e.left)
        b, bt = self.expr(e.comparators[0])
        ot = FLOAT if FLOAT in (at, bt) else INT
        if at in LIST_TYPES or bt in LIST_TYPES:
            raise UnsupportedError("comparing lists", e.lineno)
        a, b = self._convert(a, at, ot, e.lineno), self._convert(b, bt, ot, e.lineno)
        d = self._temp()
        self._emit(Op(d, INT, CMPOPS[type(e.ops[0])], [a, b]))
        return d, INT

    def expr_BoolOp(self, e):
        rt = self.texpr(e)
        res = self._temp()
        self.user_vars.add(res)
        (end_l,) = self._labels("bool.end")
        end_b = BasicBlock(end_l)
        is_and = isinstance(e.op, ast.And)
        for k, sub in enumerate(e.values):
            v, t = self.expr(sub)
            self._emit(Op(res, rt, "copy", [self._convert(v, t, rt, e.lineno)]))
            if k == len(e.values) - 1:
                self._terminate(Jump(end_l), end_b)
            else:
                (next_l,) = self._labels("bool.rhs")
                nb = self._new_block(next_l)
                br = Branch(res, next_l, end_l) if is_and else Branch(res, end_l, next_l)
                self._terminate(br, nb)
        self.fn.blocks.append(end_b)
        return res, rt

    def expr_IfExp(self, e):
        rt = self.texpr(e)
        res = self._temp()
        self.user_vars.add(res)
        then_l, else_l, end_l = self._labels("sel.then", "sel.else", "sel.end")
        c = self._cond(e.test)
        tb, eb, end_b = self._new_block(then_l), BasicBlock(else_l), BasicBlock(end_l)
        self._terminate(Branch(c, then_l, else_l), tb)
        v, t = self.expr(e.body)
        self._emit(Op(res, rt, "copy", [self._convert(v, t, rt, e.lineno)]))
        self.fn.blocks.append(eb)
        self._terminate(Jump(end_l), eb)
        v, t = self.expr(e.orelse)
        self._emit(Op(res, rt, "copy", [self._convert(v, t, rt, e.lineno)]))
        self.fn.blocks.append(end_b)
        self._terminate(Jump(end_l), end_b)
        return res, rt

    def expr_Subscript(self, e):
        arr, idx = self._subscript_parts(e)
        t = self._temp()
        et = elem_type(self.env[arr])
        self._emit(Load(t, et, arr, idx))
        return t, et

    def expr_List(self, e):
        lt = LIST_FLOAT if self._list_elem(e) == FLOAT else LIST_INT
        et = elem_type(lt)
        t = self._temp()
        self.user_vars.add(t)
        self._emit(Alloc(t, lt, Const(len(e.elts)), Const(0.0) if et == FLOAT else Const(0)))
        for k, sub in enumerate(e.elts):
            v, vt = self.expr(sub)
            self._emit(Store(t, Const(k), self._convert(v, vt, et, e.lineno)))
        return t, lt

    def expr_Call(self, e, want_value=True):
        if not isinstance(e.func, ast.Name):
            if isinstance(e.func, ast.Attribute):
                what = f"method call {ast.unparse(e.func)}()"
            else:  # (lambda v: v)(x), f(x)(y)
                what = f"call of a {_construct(e.func)}"
            raise UnsupportedError(what, e.lineno, "only plain function names can be called")
        if e.keywords:
            raise UnsupportedError("keyword arguments", e.lineno)
        name = e.func.id
        if name in BUILTIN_UNARY and name not in self.env:
            if len(e.args) != 1:
                raise UnsupportedError(f"{name}() with {len(e.args)} arguments", e.lineno)
            v, t = self.expr(e.args[0])
            if name == "len" and t not in LIST_TYPES:
                raise UnsupportedError("len() of a scalar", e.lineno)
            if name != "len" and t in LIST_TYPES:
                raise UnsupportedError(f"{name}() of a list", e.lineno)
            rt = {"int": INT, "float": FLOAT, "len": INT, "abs": t}[name]
            d = self._temp()
            self._emit(Op(d, rt, BUILTIN_UNARY[name], [v]))
            return d, rt
        if name in BUILTIN_BINARY:
            if len(e.args) != 2:
                raise UnsupportedError(f"{name}() with {len(e.args)} arguments", e.lineno)
            a, at = self.expr(e.args[0])
            b, bt = self.expr(e.args[1])
            rt = FLOAT if FLOAT in (at, bt) else INT
            a, b = self._convert(a, at, rt, e.lineno), self._convert(b, bt, rt, e.lineno)
            d = self._temp()
            self._emit(Op(d, rt, name, [a, b]))
            return d, rt
        callee = self._callee(e)
        if callee is None:
            raise UnsupportedError(f"call of {name}() (not a subset function)", e.lineno)
        if len(e.args) != len(callee.params):
            raise UnsupportedError(f"call of {name}() with the wrong number of arguments", e.lineno)
        args = []
        for sub, (_, pt) in zip(e.args, callee.params):
            v, t = self.expr(sub)
            args.append(self._convert(v, t, pt, e.lineno))
        rt = callee.ret_type
        d = self._temp() if rt != VOID else None
        self._emit(Call(d, rt, callee.name, args))
        return d, rt


def _load(target):
    if isinstance(target, ast.Name):
        return ast.Name(id=target.id, ctx=ast.Load(), lineno=target.lineno, col_offset=0)
    return target


def _const_int(e) -> int | None:
    if isinstance(e, ast.Constant) and isinstance(e.value, int):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = _const_int(e.operand)
        return -v if v is not None else None
    return None
