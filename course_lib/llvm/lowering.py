"""Course IR -> LLVM IR, two ways: the clang ``-O0`` way (a stack slot per variable) and
straight from SSA (course phis become LLVM phis).

Teaches: clang's ``lib/CodeGen/CGStmt.cpp`` / ``CGExpr.cpp`` (every local is an ``alloca``; each
use a ``load``, each assignment a ``store``: simple to emit, and ``mem2reg`` cleans it up), and
what a front end must decide when it targets LLVM: types (``int`` -> ``i64``, ``float`` ->
``double``), the source language's semantics (Python's ``//`` and ``%`` round toward minus
infinity, LLVM's ``sdiv``/``srem`` toward zero), and memory layout of aggregates.
Position: ``course_lib.ir.Function`` -> ``llvmlite.ir.Module`` (``str()`` is LLVM IR).

Choices and simplifications:

* a list is an ``i64*`` to ``[length, e0, e1, ...]`` (float elements stored in the same 8-byte
  slots); ``[v] * n`` calls ``malloc`` and never frees (no garbage collector here);
* Python semantics live in small helper functions (``@py.floordiv.i64``...), internal and
  inlined at ``-O1`` and up, so the lowered IR stays readable; division by zero returns 0
  instead of raising, negative indices count from the end, ints wrap at 64 bits.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llvmlite.ir as ir

from course_lib import env
from course_lib.ir import cfg, core

I1, I64, F64 = ir.IntType(1), ir.IntType(64), ir.DoubleType()
LIST = ir.PointerType(I64)
LLVM_TYPE = {core.INT: I64, core.FLOAT: F64, core.LIST_INT: LIST, core.LIST_FLOAT: LIST, core.VOID: ir.VoidType()}

# course compare op -> (icmp predicate, fcmp predicate)
COMPARES = {"lt": ("<", "<"), "le": ("<=", "<="), "gt": (">", ">"), "ge": (">=", ">="), "eq": ("==", "=="), "ne": ("!=", "!=")}  # fmt: skip
# course binary op -> builder method, for the ops that are one LLVM instruction
INT_BINOPS = {"add": "add", "sub": "sub", "mul": "mul"}
FLOAT_BINOPS = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}


# ----------------------------------------------------------------------------- helpers (Python semantics)


def _helper(module: ir.Module, name: str, ret, args, body: Callable) -> ir.Function:
    """Get or define ``@name`` (internal linkage, so O1+ inlines and deletes it)."""
    if name in module.globals:
        return module.globals[name]
    fn = ir.Function(module, ir.FunctionType(ret, args), name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    body(b, *fn.args)
    return fn


def _floordiv_mod_i64(b: ir.IRBuilder, x, y, want_mod: bool):
    # Python: q = floor(x / y), r = x - q*y (the sign of y). LLVM's sdiv/srem truncate, so a
    # remainder whose sign differs from y's is fixed up. Both rare paths (y == 0, the fix-up)
    # are branches marked unlikely (branch weights), so LLVM keeps them as well-predicted
    # branches instead of selects on the loop's critical path: what gcc does with the C.
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    fn = b.function
    by_zero, divide, fix, done = (fn.append_basic_block(n) for n in ("by_zero", "divide", "fix", "done"))
    b.cbranch(b.icmp_signed("==", y, zero), by_zero, divide).set_weights([1, 1000])
    b.position_at_end(by_zero)
    b.ret(zero)  # Python raises ZeroDivisionError; compiled code returns 0
    b.position_at_end(divide)
    q, r = b.sdiv(x, y), b.srem(x, y)
    needs_fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, y), zero))
    b.cbranch(needs_fix, fix, done).set_weights([1, 1000])
    b.position_at_end(fix)
    b.ret(b.add(r, y) if want_mod else b.sub(q, one))
    b.position_at_end(done)
    b.ret(r if want_mod else q)


def _float_divmod(b: ir.IRBuilder, x, y, want_mod: bool):
    # CPython's float_divmod (Objects/floatobject.c), without the copysign details of zeros
    zero, one = ir.Constant(F64, 0.0), ir.Constant(F64, 1.0)
    mod = b.frem(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    fix = b.and_(b.fcmp_ordered("!=", mod, zero), b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
    mod = b.select(fix, b.fadd(mod, y), mod)
    div = b.select(fix, b.fsub(div, one), div)
    if want_mod:
        b.ret(mod)
        return
    floor = b.module.declare_intrinsic("llvm.floor", [F64])
    fl = b.call(floor, [div])
    fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), ir.Constant(F64, 0.5)), b.fadd(fl, one), fl)
    b.ret(fl)


def _alloc_list(b: ir.IRBuilder, size, init):
    # [init] * size: malloc (size + 1) * 8 bytes, slot 0 holds the length
    module = b.module
    malloc = module.globals.get("malloc") or ir.Function(
        module, ir.FunctionType(ir.PointerType(ir.IntType(8)), [I64]), "malloc"
    )
    n = b.select(b.icmp_signed("<", size, ir.Constant(I64, 0)), ir.Constant(I64, 0), size)
    raw = b.call(malloc, [b.mul(b.add(n, ir.Constant(I64, 1)), ir.Constant(I64, 8))])
    base = b.bitcast(raw, LIST)
    b.store(n, base)
    fn = b.function
    head, body, done = fn.append_basic_block("fill"), fn.append_basic_block("fill.body"), fn.append_basic_block("done")
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, "i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    b.store(init, b.gep(base, [b.add(i, ir.Constant(I64, 1))]))
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), body)
    b.branch(head)
    b.position_at_end(done)
    b.ret(base)


HELPERS = {
    "floordiv.i64": (I64, [I64, I64], lambda b, x, y: _floordiv_mod_i64(b, x, y, False)),
    "mod.i64": (I64, [I64, I64], lambda b, x, y: _floordiv_mod_i64(b, x, y, True)),
    "floordiv.f64": (F64, [F64, F64], lambda b, x, y: _float_divmod(b, x, y, False)),
    "mod.f64": (F64, [F64, F64], lambda b, x, y: _float_divmod(b, x, y, True)),
    "alloc": (LIST, [I64, I64], _alloc_list),
}


def helper(module: ir.Module, key: str) -> ir.Function:
    ret, args, body = HELPERS[key]
    return _helper(module, "py." + key, ret, args, body)


# ----------------------------------------------------------------------------- one instruction


class _Emitter:
    """Emits the LLVM instructions for course instructions; ``value(operand)`` is the only
    thing that differs between the two lowerings (a load from a slot, or an SSA value)."""

    def __init__(self, module: ir.Module, fn: core.Function, builder: ir.IRBuilder, value: Callable):
        self.module, self.fn, self.b, self._value = module, fn, builder, value
        self.types = fn.var_types()

    def type_of(self, x) -> str:
        return x.type if isinstance(x, core.Const) else self.types[x]

    def value(self, x, want: str | None = None):
        """The LLVM value of operand ``x``, converted to course type ``want`` if given."""
        if isinstance(x, core.Const):
            t = want or x.type
            return ir.Constant(LLVM_TYPE[t], float(x.value) if t == core.FLOAT else int(x.value))
        v = self._value(x)
        return self.convert(v, self.types[x], want) if want else v

    def convert(self, v, have: str, want: str):
        if have == want or want is None:
            return v
        if (have, want) == (core.INT, core.FLOAT):
            return self.b.sitofp(v, F64)
        if (have, want) == (core.FLOAT, core.INT):
            return self.b.fptosi(v, I64)
        return v  # lists are all i64*

    def truth(self, x):
        """i1: is ``x`` non-zero (Python truthiness of a number)."""
        v = self.value(x)
        if self.type_of(x) == core.FLOAT:
            return self.b.fcmp_unordered("!=", v, ir.Constant(F64, 0.0))
        return self.b.icmp_signed("!=", v, ir.Constant(I64, 0))

    def element_ptr(self, array, index, elem: str):
        b = self.b
        base = self.value(array)
        idx = self.value(index, core.INT)
        length = b.load(base)
        idx = b.select(b.icmp_signed("<", idx, ir.Constant(I64, 0)), b.add(idx, length), idx)  # a[-1]
        p = b.gep(base, [b.add(idx, ir.Constant(I64, 1))])
        return b.bitcast(p, ir.PointerType(F64)) if elem == core.FLOAT else p

    def op(self, ins: core.Op, name: str = ""):
        """The LLVM value computed by a course ``Op`` (``name`` names the result)."""
        b, op, t = self.b, ins.op, ins.type
        args = ins.args
        if op in core.COMPARE_OPS:
            common = core.FLOAT if core.FLOAT in (self.type_of(a) for a in args) else core.INT
            x, y = (self.value(a, common) for a in args)
            ipred, fpred = COMPARES[op]
            c = b.fcmp_ordered(fpred, x, y) if common == core.FLOAT else b.icmp_signed(ipred, x, y)
            return b.zext(c, I64, name=name)
        if op in ("min", "max"):
            x, y = (self.value(a, t) for a in args)
            # Python: min(x, y) is y if y < x else x (the first one wins ties)
            if t == core.FLOAT:
                c = b.fcmp_ordered("<" if op == "min" else ">", y, x)
            else:
                c = b.icmp_signed("<" if op == "min" else ">", y, x)
            return b.select(c, y, x, name=name)
        if op in ("floordiv", "mod"):
            x, y = (self.value(a, t) for a in args)
            key = f"{op}.{'f64' if t == core.FLOAT else 'i64'}"
            return b.call(helper(self.module, key), [x, y], name=name)
        if op in INT_BINOPS or op == "div":
            x, y = (self.value(a, t) for a in args)
            method = FLOAT_BINOPS[op] if t == core.FLOAT else INT_BINOPS[op]
            return getattr(b, method)(x, y, name=name)
        return self.unary(ins, name)

    def unary(self, ins: core.Op, name: str):
        b, op, t, (a,) = self.b, ins.op, ins.type, ins.args
        at = self.type_of(a)
        if op == "copy":
            return self.value(a, t)
        if op in ("float", "int"):
            return self.value(a, t)
        if op == "len":
            return b.load(self.value(a), name=name)
        if op == "not":
            return b.zext(b.not_(self.truth(a)), I64, name=name)
        x = self.value(a, t)
        if op == "neg":
            return b.fneg(x, name=name) if t == core.FLOAT else b.neg(x, name=name)
        if op == "abs":
            if t == core.FLOAT:
                return b.call(self.module.declare_intrinsic("llvm.fabs", [F64]), [x], name=name)
            return b.select(b.icmp_signed("<", x, ir.Constant(I64, 0)), b.neg(x), x, name=name)
        raise NotImplementedError(f"lowering of course op {op!r} (types {at} -> {t})")

    def load(self, ins: core.Load, name: str = ""):
        return self.b.load(self.element_ptr(ins.array, ins.index, ins.type), name=name)

    def store(self, ins: core.Store):
        elem = core.elem_type(self.type_of(ins.array))
        self.b.store(self.value(ins.value, elem), self.element_ptr(ins.array, ins.index, elem))

    def alloc(self, ins: core.Alloc, name: str = ""):
        elem = core.elem_type(ins.type)
        init = self.value(ins.init, elem)
        bits = self.b.bitcast(init, I64) if elem == core.FLOAT else init
        return self.b.call(helper(self.module, "alloc"), [self.value(ins.size, core.INT), bits], name=name)

    def call(self, ins: core.Call, functions: dict, name: str = ""):
        callee = functions[ins.func]
        params = self.fn.callees[ins.func].params if ins.func in self.fn.callees else []
        args = [self.value(a, params[k][1] if k < len(params) else None) for k, a in enumerate(ins.args)]
        return self.b.call(callee, args, name=name if ins.dest is not None else "")

    def ret(self, ins: core.Return):
        if self.fn.ret_type == core.VOID:
            self.b.ret_void()
        elif ins.value is None:
            self.b.ret(ir.Constant(LLVM_TYPE[self.fn.ret_type], 0.0 if self.fn.ret_type == core.FLOAT else 0))
        else:
            self.b.ret(self.value(ins.value, self.fn.ret_type))

    def compute(self, ins, functions: dict, name: str = ""):
        """The value a non-phi, non-terminator instruction defines (or None for a store)."""
        if isinstance(ins, core.Op):
            return self.op(ins, name)
        if isinstance(ins, core.Load):
            return self.load(ins, name)
        if isinstance(ins, core.Alloc):
            return self.alloc(ins, name)
        if isinstance(ins, core.Call):
            return self.call(ins, functions, name)
        if isinstance(ins, core.Store):
            self.store(ins)
            return None
        raise NotImplementedError(f"lowering of {type(ins).__name__}: {ins}")


# ----------------------------------------------------------------------------- functions and modules


def _signature(fn: core.Function) -> ir.FunctionType:
    return ir.FunctionType(LLVM_TYPE[fn.ret_type], [LLVM_TYPE[t] for _, t in fn.params])


def _declare_all(module: ir.Module, fn: core.Function) -> dict[str, ir.Function]:
    out = {}
    for f in fn.program():
        out[f.name] = ir.Function(module, _signature(f), f.name)
        for arg, (pname, _) in zip(out[f.name].args, f.params):
            arg.name = pname
    return out


def _needs_new_entry(fn: core.Function) -> bool:
    return bool(fn.preds()[fn.entry])


def _branch(em: _Emitter, term, blocks: dict[str, ir.Block]):
    if isinstance(term, core.Jump):
        em.b.branch(blocks[term.target])
    elif isinstance(term, core.Branch):
        if term.true == term.false:
            em.b.branch(blocks[term.true])
        else:
            em.b.cbranch(em.truth(term.cond), blocks[term.true], blocks[term.false])
    else:
        em.ret(term)


def _lower_alloca(module: ir.Module, fn: core.Function, lf: ir.Function, functions: dict) -> None:
    """clang -O0: one ``alloca`` per variable in the entry block, a load per use, a store per def.

    Phis (when the input is already SSA) become stores in each predecessor: all incoming values
    are loaded first, then stored, so a swap of two variables stays a swap (parallel copy).
    """
    types = fn.var_types()
    first = lf.append_basic_block("alloca.entry" if _needs_new_entry(fn) else fn.entry)
    blocks = {fn.entry: first} if not _needs_new_entry(fn) else {}
    for blk in fn.blocks:
        if blk.label not in blocks:
            blocks[blk.label] = lf.append_basic_block(blk.label)
    b = ir.IRBuilder(first)
    slots = {}
    params = {p for p, _ in fn.params}
    for var in sorted(types):  # clang's names: a parameter's slot is "<name>.addr"
        slots[var] = b.alloca(LLVM_TYPE[types[var]], name=var + ".addr" if var in params else var)
    for arg, (pname, _) in zip(lf.args, fn.params):
        b.store(arg, slots[pname])
    if _needs_new_entry(fn):
        b.branch(blocks[fn.entry])
    em = _Emitter(module, fn, b, lambda v: b.load(slots[v]))
    for blk in fn.blocks:
        b.position_at_end(blocks[blk.label])
        for ins in blk.instrs:
            if isinstance(ins, core.Phi):
                continue  # written by the predecessors
            value = em.compute(ins, functions)
            if ins.dest is not None and value is not None:
                b.store(value, slots[ins.dest])
        _emit_phi_copies(em, fn, blk, slots)
        _branch(em, blk.term, blocks)


def _emit_phi_copies(em: _Emitter, fn: core.Function, blk: core.BasicBlock, slots: dict) -> None:
    copies = [
        (p.dest, p.incoming[blk.label], p.type)
        for s in blk.succs()
        for p in fn.block(s).phis()
        if blk.label in p.incoming
    ]
    if not copies:
        return
    term = blk.term
    cond = term.cond if isinstance(term, core.Branch) and isinstance(term.cond, str) else None
    if cond is not None and cond in {d for d, _, _ in copies}:
        # the branch reads a variable a successor's phi overwrites: read it first
        tmp = em.b.alloca(I64 if em.types[cond] == core.INT else F64)
        em.b.store(em.value(cond), tmp)
        slots = dict(slots)
        original = em._value
        em._value = lambda v: em.b.load(tmp) if v == cond else original(v)
    values = [em.value(src, t) for _, src, t in copies]
    for (dest, _, _), v in zip(copies, values):
        em.b.store(v, slots[dest])


def _lower_ssa(module: ir.Module, fn: core.Function, lf: ir.Function, functions: dict) -> None:
    """SSA in, SSA out: course values become LLVM values of the same name, phis become phis.

    Blocks are emitted in reverse post-order (every definition before its non-phi uses); phi
    operands are filled in at the end, when every value exists. A ``copy`` makes no
    instruction: its destination simply names the source's value.
    """
    values: dict[str, ir.Value] = {arg.name: arg for arg in lf.args}
    blocks = {}
    if _needs_new_entry(fn):
        pre = lf.append_basic_block("ssa.entry")
    for blk in fn.blocks:
        blocks[blk.label] = lf.append_basic_block(blk.label)
    b = ir.IRBuilder()
    if _needs_new_entry(fn):
        b.position_at_end(pre)
        b.branch(blocks[fn.entry])
    em = _Emitter(module, fn, b, lambda v: values[v])
    phis = []
    for label in _reverse_postorder(fn):
        blk = fn.block(label)
        b.position_at_end(blocks[label])
        for ins in blk.instrs:
            if isinstance(ins, core.Phi):
                phi = b.phi(LLVM_TYPE[ins.type], name=ins.dest)
                values[ins.dest] = phi
                phis.append((ins, phi))
            elif isinstance(ins, core.Op) and ins.op == "copy" and em.type_of(ins.args[0]) == ins.type:
                values[ins.dest] = em.value(ins.args[0])
            else:
                v = em.compute(ins, functions, name=ins.dest or "")
                if ins.dest is not None:
                    values[ins.dest] = v
        _branch(em, blk.term, blocks)
    for ins, phi in phis:
        for pred, src in ins.incoming.items():
            b.position_before(blocks[pred].terminator)  # a conversion, if any, goes in the predecessor
            phi.add_incoming(em.value(src, ins.type), blocks[pred])


def _reverse_postorder(fn: core.Function) -> list[str]:
    """Every block, definitions before uses: reverse postorder, then the blocks the entry never reaches."""
    order = cfg.reverse_postorder(fn)
    reached = set(order)
    return order + [b.label for b in fn.blocks if b.label not in reached]


def _module(fn: core.Function, style: str) -> ir.Module:
    module = ir.Module(name=fn.name)
    functions = _declare_all(module, fn)
    for f in fn.program():
        if style == "ssa":
            _lower_ssa(module, f, functions[f.name], functions)
        else:
            _lower_alloca(module, f, functions[f.name], functions)
    return module


def lower_alloca(fn_ir: core.Function) -> ir.Module:
    """The clang ``-O0`` lowering: every variable in a stack slot (works on any course IR)."""
    return _module(fn_ir, "alloca")


def lower_ssa(fn_ir: core.Function) -> ir.Module:
    """Lowering from SSA: ``fn_ir`` (converted with ``course_lib.ir.to_ssa`` first if it is not
    SSA yet, callees too) with its phis kept as LLVM phis."""
    course_ir = _ssa_api()
    if not course_ir.is_ssa(fn_ir):
        fn_ir = _program_to_ssa(fn_ir, course_ir)
    return _module(fn_ir, "ssa")


def _ssa_api():
    """Module 1's ``to_ssa`` / ``is_ssa`` (from ``course_lib.ir``, or its ``ssa`` module)."""
    from course_lib import ir as course_ir

    if hasattr(course_ir, "to_ssa"):
        return course_ir
    try:
        from course_lib.ir import ssa
    except ImportError as exc:
        raise RuntimeError("lower_ssa needs course_lib.ir.to_ssa (Module 1), which this checkout lacks") from exc
    return ssa


def _program_to_ssa(fn_ir: core.Function, course_ir) -> core.Function:
    callees = {name: course_ir.to_ssa(f) if not course_ir.is_ssa(f) else f for name, f in fn_ir.callees.items()}
    out = course_ir.to_ssa(fn_ir)
    for f in [out, *callees.values()]:
        f.callees = {**callees, out.name: out}
    return out


def lower(fn_ir: core.Function, style: str = "alloca") -> ir.Module:
    """Course IR -> LLVM IR (``str()`` of the result is valid LLVM IR).

    ``style="alloca"`` (default): clang's ``-O0`` shape, any input; ``style="ssa"``: from SSA
    with phis. The module holds ``fn_ir`` and every function it calls.
    """
    if style not in ("alloca", "ssa"):
        raise ValueError(f"style must be 'alloca' or 'ssa', got {style!r}")
    return lower_ssa(fn_ir) if style == "ssa" else lower_alloca(fn_ir)


# ----------------------------------------------------------------------------- the JIT


CTYPE = {core.INT: ctypes.c_int64, core.FLOAT: ctypes.c_double, core.VOID: None}


def value_type(value) -> str | None:
    """The course type of one Python argument (``None`` for an empty list: any list type fits)."""
    if isinstance(value, bool | int):
        return core.INT
    if isinstance(value, float):
        return core.FLOAT
    if isinstance(value, list):
        kinds = {value_type(x) for x in value}
        if not kinds <= {core.INT, core.FLOAT}:
            raise TypeError("a list argument may hold only ints and floats")
        return None if not kinds else core.LIST_FLOAT if core.FLOAT in kinds else core.LIST_INT
    raise TypeError(f"a {type(value).__name__} argument: the course subset takes int, float and list")


#: (parameter type, argument type) pairs that pass without a new specialisation: an int
#: widens exactly to a float, as in Python arithmetic. A float never narrows to an int.
ACCEPTS = {(core.FLOAT, core.INT)}


def _fits(want: str, have: str | None) -> bool:
    if have is None:  # an empty list
        return want in core.LIST_TYPES
    return want == have or (want, have) in ACCEPTS


class CourseFunction:
    """A course-IR function compiled by LLVM; call it with Python ints, floats and lists.

    Lists are copied into ``[length, elements...]`` buffers and copied back after the call,
    so stores into a list argument are visible to the caller, as in Python.

    Like Numba's dispatcher, a call whose arguments do not fit the compiled parameter types
    compiles a *specialisation* for the arguments' types, if every misfit parameter's type was
    only inferred (``param_origins`` "use" or "default") and the IR came from Python source. A
    float for an annotated ``int`` parameter is a ``TypeError``, never a truncation.
    """

    def __init__(self, fn_ir: core.Function, level: int = 3, style: str = "alloca"):
        from course_lib.llvm import mcjit

        self.level, self.style = level, style
        self.specialisations: dict[tuple, CourseFunction] = {}
        self.fn_ir = fn_ir
        self.module = lower(fn_ir, style)
        self.llvm_ir = str(self.module)
        params = [t for _, t in fn_ir.params]
        argtypes = ["ptr" if t in core.LIST_TYPES else str(LLVM_TYPE[t]) for t in params]
        restype = "void" if fn_ir.ret_type == core.VOID else str(LLVM_TYPE[fn_ir.ret_type])
        if restype == "i64*":
            raise NotImplementedError("functions returning lists cannot be called from Python yet")
        self.compiled = mcjit.compile_function(self.llvm_ir, fn_ir.name, restype, argtypes, level=level)
        self.optimized_ir = self.compiled.ir
        self.param_types = params
        if env.debug("llvm"):  # COURSE_DEBUG=llvm: one switch shows every stage
            print(f"# ---- course IR ----\n{fn_ir}\n# ---- LLVM IR ({style}) ----\n{self.llvm_ir}")
            print(f"# ---- after O{level} ----\n{self.optimized_ir}")

    def _dispatch(self, args) -> CourseFunction:
        """self, or the specialisation for the arguments' types (compiled on first use)."""
        name, params = self.fn_ir.name, self.fn_ir.params
        if len(args) != len(params):
            raise TypeError(
                f"{name}() takes {len(params)} arguments ({', '.join(p for p, _ in params)}), got {len(args)}"
            )
        have = []
        for k, ((pname, _), value) in enumerate(zip(params, args)):
            try:
                have.append(value_type(value))
            except TypeError as exc:
                raise TypeError(f"{name}() parameter {pname!r} (argument {k + 1}): {exc}") from None
        misfits = [k for k, ((_, want), h) in enumerate(zip(params, have)) if not _fits(want, h)]
        if not misfits:
            return self
        origins = self.fn_ir.param_origins or ["annotation"] * len(params)
        fixed = [k for k in misfits if origins[k] not in ("use", "default")]
        if fixed or self.fn_ir.recompile is None:
            k = (fixed or misfits)[0]
            pname, want = params[k]
            why = "annotated" if origins[k] == "annotation" else "fixed when the IR was built"
            hint = "; convert it yourself (int(...)) or declare the parameter float" if want == core.INT else ""
            raise TypeError(
                f"{name}() parameter {pname!r} is {want} ({why}), but argument {k + 1} is a {have[k]}: "
                f"{args[k]!r} is not converted silently{hint}"
            )
        key = tuple(h if h is not None else want for h, (_, want) in zip(have, params))
        if key not in self.specialisations:
            self.specialisations[key] = CourseFunction(self.fn_ir.recompile(list(key)), self.level, self.style)
        return self.specialisations[key]

    def __call__(self, *args):
        target = self._dispatch(args)
        if target is not self:
            return target(*args)
        buffers, call_args = [], []
        for value, t in zip(args, self.param_types):
            if t in core.LIST_TYPES:
                buf = (ctypes.c_int64 * (len(value) + 1))(len(value))
                data = ctypes.cast(ctypes.byref(buf, 8), ctypes.POINTER(CTYPE[core.elem_type(t)]))
                for k, x in enumerate(value):
                    data[k] = x
                buffers.append((value, data, t))
                call_args.append(ctypes.cast(buf, ctypes.c_void_p))
            else:
                call_args.append(float(value) if t == core.FLOAT else int(value))
        result = self.compiled(*call_args)
        for value, data, t in buffers:
            conv = float if core.elem_type(t) == core.FLOAT else int
            value[:] = [conv(data[k]) for k in range(len(value))]
        return result

    def __repr__(self) -> str:
        return f"CourseFunction({self.fn_ir.name}, LLVM)"


def jit(fn_ir: core.Function, level: int = 3, style: str = "alloca") -> CourseFunction:
    """Lower ``fn_ir``, optimise at ``O<level>``, JIT-compile, and return a Python callable."""
    return CourseFunction(fn_ir, level, style)
