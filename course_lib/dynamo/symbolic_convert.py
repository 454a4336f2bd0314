"""A symbolic bytecode interpreter (teaches torch/_dynamo/symbolic_convert.py: InstructionTranslator,
InliningInstructionTranslator; and torch/_dynamo/variables/ for the call rules).

Position: a frame (code object + argument values) --> FX graphs (course_lib.fx) + guards + graph
breaks, held by :class:`~course_lib.dynamo.output_graph.OutputGraph`.

The translator walks the frame's instructions with a stack of ``Var``\\ s instead of values.
There is one method per opcode, named exactly as ``dis`` names it (``LOAD_FAST``,
``BINARY_OP``, ``CALL``...), for the opcodes of Python 3.11 and 3.12 that ordinary tensor code
uses (:data:`HANDLED` lists them). Tensor operations become graph nodes; Python values are
*specialised*: a loop over a Python list is unrolled, ``x.shape[0]`` becomes the number it is
today, ``if flag:`` follows the branch the constant takes. Each input that was used gets a guard.

Calls to user functions are inlined by a child translator that shares the graph. When an
instruction cannot be captured (``print``, ``Tensor.item()``, ``if`` on a tensor, an unknown
callable), the handler raises :class:`Unsupported` and the top-level translator:

1. undoes what the instruction started (stack, locals and graph nodes are snapshotted per
   instruction; a break inside an inlined call therefore breaks at the outer ``CALL``, as
   Dynamo does when it restarts analysis),
2. ends the graph: compiles and runs it (see OutputGraph.compile_and_run),
3. runs that one instruction eagerly: a user function called there is translated as a new
   frame, the way Dynamo's PEP 523 hook catches the callee's frame,
4. continues symbolically after it, with a new graph.

Simplification against Dynamo: Dynamo does not continue; it generates bytecode that calls the
compiled graph, runs the breaking instruction, and calls a *resume function* (a new code
object starting after the break) which is captured as a new frame. We split execution inside
our interpreter instead, which produces the same graphs and breaks. A break inside a loop body
cannot be resumed by Dynamo either: it gives up on the rest of the frame, and so do we
(:meth:`InstructionTranslator.skip_rest_of_frame`). One exception, as in Dynamo: on 3.12 a list
or dict comprehension is inlined into the frame (PEP 709), and a break inside it goes back to the
comprehension's ``BUILD_LIST``, runs the whole comprehension eagerly and continues after it
(:meth:`InstructionTranslator.break_at_comprehension`); on 3.11 the comprehension is its own
function, so the break is at its ``CALL`` and the ``<listcomp>`` frame is skipped as a loop.
Usually both give the same counts; where they do not, Dynamo differs the same way (checked with
torch 2.11 on 3.11 and 3.12, and 2.13 on 3.11):

==========================================  ==================================  ===============================
break inside a comprehension that is ...    3.11 (``<listcomp>`` CALL)          3.12 (inlined)
==========================================  ==================================  ===============================
in a loop                                   the frame is given up               the frame is given up
in a ``try`` block                          the frame is given up               back to ``BUILD_LIST``, resumed
a set comprehension (``BUILD_SET``)         break at the CALL, resumed          the frame is given up (a loop)
==========================================  ==================================  ===============================

Tensor mutation (``x.add_(1)``, ``x[0] = 1``, ``x += y``) is reported as a break and runs eagerly;
Dynamo captures tensor mutation in the graph. Mutation of lists, dicts and sets is captured
(variables/lists.py).

What this file holds: the opcode handlers and the loop that runs them. What a value does when
an opcode meets it (``a + b``, ``obj.method(...)``, ``obj[i]``, ``iter(obj)``, a builtin call) is
a rule on the value's Var class in variables/, as in torch/_dynamo/variables/.

Frames we cannot translate at all (:func:`frame_unsupported`: an opcode without a handler, a
generator called as the top frame) are not started: the frame runs as plain Python, with the
reason recorded as a break; an inlined call to such a function is a graph break at its ``CALL``.
A generator called from traced code is inlined: run to its end at once, its yields collected
into an iterator (:meth:`InstructionTranslator.inline_generator`), unless it has side effects.
A graph break inside such a generator gives up on the frame: Dynamo runs the generator lazily,
inside its consumer (``sum``, ``list``), where no graph can end.

``try``/``except`` and ``with``: an exception the user's code raises while we trace (a missing
dict key) goes to the handler the code object's exception table names
(:meth:`InstructionTranslator.jump_to_handler`), as CPython would. ``with torch.no_grad()`` /
``torch.enable_grad()`` are captured as ``set_grad_enabled`` nodes and ``nullcontext()`` as nothing
(variables/ctx_manager.py);
any other context manager is a graph break at ``BEFORE_WITH``. A break inside a ``try`` block
gives up on the rest of the frame, as a break inside a loop does.
"""

from __future__ import annotations

import builtins
import dis
import inspect
import operator
import sys
import types
from typing import Any

import torch

from course_lib.dynamo.bytecode import Instr, exception_entries, instructions
from course_lib.dynamo.exc import Unsupported
from course_lib.dynamo.output_graph import BreakRecord, OutputGraph
from course_lib.dynamo.source import Source
from course_lib.dynamo.variables import (
    BuiltinVar,
    CellVar,
    ConstVar,
    DictVar,
    DictViewVar,
    FunctionVar,
    IteratorVar,
    ListVar,
    MethodVar,
    ModuleVar,
    NestedFunctionVar,
    NullVar,
    PyObjVar,
    SetVar,
    TensorVar,
    TorchFnVar,
    Var,
    any_tensor,
    call_builtin,
    is_torch_callable,
    is_user_function,
    wrap,
)  # fmt: skip
from course_lib.dynamo.variables.ctx_manager import MODELLED_CONTEXTS, ExitVar
from course_lib.dynamo.variables.user_defined import DataclassVar, SuperVar, zero_arg_super

# ----------------------------------------------------------------------------- opcode tables

BINARY_OPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "@": operator.matmul, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}  # fmt: skip
# In-place forms (``x += y``): on immutable values the out-of-place op (Python rebinds x); on
# lists, dicts and sets a mutation; on a tensor a graph break (tensor mutation is not modelled).
BINARY_OPS.update({k + "=": v for k, v in list(BINARY_OPS.items())})
INPLACE_OPS = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv, "//=": operator.ifloordiv,
    "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul, "&=": operator.iand, "|=": operator.ior,
    "^=": operator.ixor, "<<=": operator.ilshift, ">>=": operator.irshift,
}  # fmt: skip
COMPARE_OPS = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
UNARY_OPS = {"UNARY_NEGATIVE": operator.neg, "UNARY_INVERT": operator.invert, "UNARY_POSITIVE": operator.pos}

MAX_INLINE_DEPTH = 12
MAX_GENERATOR_YIELDS = 1000

# co_flags of frames we do not translate (generators and coroutines)
_GENERATOR_FLAGS = (
    inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
)


# Exceptions that, raised by the tracer's own code, mean "course_lib cannot model this" rather than
# "the user's code raised": they become a graph break (eager is always right), never a jump into the
# user's ``except`` block. Dynamo likewise routes only ObservedException into user handlers.
INTERNAL_ERRORS = (AttributeError, TypeError, NameError, AssertionError, NotImplementedError, RecursionError)
USER_RAISES = ("RAISE_VARARGS", "RERAISE")  # the user's own raise statements always reach their handlers
_HERE = __file__.rsplit("/", 2)[0]  # course_lib/dynamo's parent: course_lib/


def run_handler(handler, inst: Instr) -> None:
    """Run one opcode handler; an internal-looking error raised in course_lib becomes Unsupported."""
    try:
        handler(inst)
    except Unsupported:
        raise
    except INTERNAL_ERRORS as exc:
        if inst.opname in USER_RAISES or not _raised_in_course_lib(exc):
            raise
        raise Unsupported(f"course_lib.dynamo could not model {inst.opname} ({type(exc).__name__}: {exc})") from exc


def _raised_in_course_lib(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(_HERE)


class InstructionTranslator:
    """Symbolically executes one frame. ``parent`` is set for an inlined call (InliningInstructionTranslator)."""

    def __init__(
        self, code: types.CodeType, f_locals: dict[str, Var], f_globals: dict[str, Any], output: OutputGraph,
        cells: dict[str, CellVar] | None = None, parent: InstructionTranslator | None = None,
    ):  # fmt: skip
        self.code = code
        self.instructions: list[Instr] = instructions(code)
        self.index_of = {ins.offset: ins.index for ins in self.instructions}
        self.locals: dict[str, Var] = dict(f_locals)
        self.globals = f_globals
        self.cells: dict[str, CellVar] = dict(cells or {})
        self.output = output
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.stack: list[Var] = []
        self.ip = 0
        self.kw_names: tuple = ()
        self.eager = False
        self.return_value: Var | None = None
        self.current: Instr | None = None
        self.trace: list[str] = []  # the instructions run, for step-through views
        self.steps: list[tuple[str, list[str], int]] = []  # (instruction, stack after it, graph size)
        self.skipped = False  # set when a break inside a loop made us give up capturing this frame
        self.yielded: list[Var] | None = None  # an inlined generator: the values it yielded
        # 3.12 inlined comprehensions: BUILD_LIST/BUILD_MAP index -> index of its outermost END_FOR
        self.comprehensions = comprehension_regions(self.instructions)
        self.checkpoint: tuple | None = None  # state at the comprehension's BUILD_LIST (Dynamo: speculate())
        # loop bodies: from a backward jump's target to the jump (3.11+: no block stack for loops)
        # 3.11+: which handler covers which instructions (dis: "ExceptionTable")
        self.exception_table = exception_entries(code)
        self.loops = [(ins.argval, ins.offset) for ins in self.instructions
                      if ins.opname.startswith(("JUMP_BACKWARD", "POP_JUMP_BACKWARD")) and ins.argval < ins.offset]  # fmt: skip

    # -- the main loop ------------------------------------------------------------------
    def run(self) -> Var:
        while self.return_value is None:
            if self.ip >= len(self.instructions):
                raise RuntimeError(f"ran off the end of {self.code.co_name}")
            self.step()
        return self.return_value

    def step(self) -> None:
        inst = self.instructions[self.ip]
        stack_before = list(self.stack)
        try:
            self.step_instruction(inst)
        except Unsupported:
            raise
        except Exception as exc:  # what the user's code raised (a missing dict key, a failed int())
            if not self.jump_to_handler(inst, exc, stack_before):
                if self.parent is None:  # it leaves the traced code: container mutations stay visible
                    self.output.apply_side_effects()
                raise

    def jump_to_handler(self, inst: Instr, exc: Exception, stack_before: list[Var]) -> bool:
        """Python semantics for an exception raised at ``inst`` (3.11+ zero-cost exceptions): the
        code object's exception table says which handler covers the instruction and how deep the
        stack is there; cut the stack to that depth, push the offset (``lasti``) if the entry asks
        for it, push the exception, and continue at the handler. False when no entry covers it
        (the exception leaves the frame). Dynamo does the same in ``exception_handler()``."""
        entry = next((e for e in self.exception_table if e.start <= inst.offset < e.end), None)
        if entry is None:
            return False
        self.stack = stack_before[: entry.depth]
        if entry.lasti:
            self.push(ConstVar(inst.offset))
        self.push(PyObjVar(exc))
        self.ip = self.index_of[entry.target]
        self.trace.append(f"{self.code.co_name}: {type(exc).__name__} raised, handler at {entry.target}")
        return True

    def step_instruction(self, inst: Instr) -> None:
        self.current = inst
        self.ip += 1
        self.trace.append(f"{self.code.co_name}:{inst.offset} {inst.opname} {inst.argrepr}".rstrip())
        handler = getattr(self, inst.opname, None)
        if self.parent is not None:  # an inlined frame: a break is handled by the outermost frame
            if handler is None:
                raise Unsupported(f"opcode {inst.opname} is not handled")
            run_handler(handler, inst)
            return
        saved = (list(self.stack), dict(self.locals), self.kw_names, self.output.snapshot())
        self.track_comprehension(inst, saved)
        try:
            if handler is None:
                raise Unsupported(f"opcode {inst.opname} is not handled")
            if self.eager:
                self.write_cells()
            run_handler(handler, inst)
            if self.eager:
                self.refresh_containers()
        except Unsupported as exc:
            if self.skipped:
                raise
            self.stack, self.locals, self.kw_names, nodes = saved
            self.output.restore(nodes)
            if self.checkpoint is not None and not self.in_loop(self.checkpoint[2]):
                self.break_at_comprehension(exc.reason)
            elif self.in_loop(inst):
                self.skip_rest_of_frame(inst, handler, exc.reason)
            elif exc.skip_frame:
                self.skip_rest_of_frame(inst, handler, exc.reason, where="inside a generator")
            elif self.in_try_block(inst):
                self.skip_rest_of_frame(inst, handler, exc.reason, where="inside a try block")
            else:
                self.break_graph(inst, handler, exc.reason)
        self.steps.append((self.trace[-1], [stack_label(v) for v in self.stack], len(self.output.graph)))

    def in_loop(self, inst: Instr) -> bool:
        """Whether ``inst`` lies in a loop body (between a backward jump's target and the jump).
        For the ``BUILD_LIST`` of a 3.12 inlined comprehension this asks about loops *around* the
        comprehension: its own loop starts after it. A break inside a comprehension inside a loop
        gives up on the frame (Dynamo 2.11 on 3.12 finds the loop's backedge and skips the frame;
        on 3.11 the ``<listcomp>`` CALL is inside the loop, so the answer is the same)."""
        return any(start <= inst.offset <= end for start, end in self.loops)

    def track_comprehension(self, inst: Instr, saved: tuple) -> None:
        """Keep a checkpoint while inside an inlined comprehension (3.12, PEP 709) of this frame.

        Dynamo (torch/_dynamo/comprehension_graph_break.py) calls ``speculate()`` at the
        comprehension's ``BUILD_LIST``/``BUILD_MAP``. A break inside the comprehension cannot be
        resumed where it happens (the instruction is covered by the comprehension's exception-table
        entry, so ``should_compile_partial_graph()`` is False, which also means the for-loop check
        is never reached); analysis restarts and breaks at the ``BUILD_LIST`` instead."""
        if self.checkpoint is not None and not (self.checkpoint[0] <= inst.index <= self.checkpoint[1]):
            self.checkpoint = None  # left the comprehension
        if self.checkpoint is None and not self.eager and inst.index in self.comprehensions:
            self.checkpoint = (inst.index, self.comprehensions[inst.index], inst, saved)

    def break_at_comprehension(self, reason: str) -> None:
        """A break inside an inlined comprehension: go back to its ``BUILD_LIST``, end the graph
        there, run the whole comprehension eagerly, and continue symbolically after it. The same
        graphs as on 3.11, where the comprehension is a function (``<listcomp>``) whose inlining
        fails, so the break is at its ``CALL`` and the callee runs as a frame of its own."""
        start, end, inst, (stack, locals_, kw_names, nodes) = self.checkpoint
        self.checkpoint = None
        self.stack, self.locals, self.kw_names = list(stack), dict(locals_), kw_names
        self.output.restore(nodes)
        where, line = self.code.co_name, _rel_line(self.code, inst.line)
        reason = f"{reason} (inside a comprehension: the whole comprehension runs without a graph)"
        self.output.breaks.append(BreakRecord(reason, where, line, f"{inst.opname} {inst.argrepr}".strip()))
        self.output.compile_and_run(self.live_values(), reason, True, where, line)
        self.ip, self.eager = start, True
        try:
            while start <= self.ip <= end:  # FOR_ITER's exit jumps past the END_FOR
                ins = self.instructions[self.ip]
                self.current, self.ip = ins, self.ip + 1
                self.trace.append(f"{self.code.co_name}:{ins.offset} {ins.opname} {ins.argrepr}".rstrip())
                self.write_cells()
                getattr(self, ins.opname)(ins)
                self.refresh_containers()
        finally:
            self.eager = self.skipped
            self.output.after_eager_instruction()

    def skip_rest_of_frame(self, inst: Instr, handler, reason: str, where: str = "inside a loop") -> None:
        """A break inside a loop body or a try block: Dynamo cannot resume in the middle of a
        loop, nor inside a ``try`` (its resume function could not re-create the handler), so it
        gives up on the frame (the part since the last break runs without a graph). We drop the
        current graph and run the rest of the frame eagerly; callees are still translated."""
        line = _rel_line(self.code, inst.line)
        reason = f"{reason} ({where}: the rest of {self.code.co_name} runs without a graph)"
        self.output.breaks.append(BreakRecord(reason, self.code.co_name, line, f"{inst.opname} {inst.argrepr}".strip()))
        self.output.discard_graph()
        self.skipped = self.eager = True
        self.run_eagerly(inst, handler)

    def break_graph(self, inst: Instr, handler, reason: str) -> None:
        """End the graph before ``inst``, run ``inst`` eagerly, continue with a fresh graph."""
        where = self.code.co_name
        line = _rel_line(self.code, inst.line)
        self.output.breaks.append(BreakRecord(reason, where, line, f"{inst.opname} {inst.argrepr}".strip()))
        self.output.compile_and_run(self.live_values(), reason, True, where, line)
        self.eager = True
        try:
            self.run_eagerly(inst, handler)
        finally:
            self.eager = self.skipped
            self.output.after_eager_instruction()

    def run_eagerly(self, inst: Instr, handler) -> None:
        if handler is None:  # frame_unsupported() keeps such frames out; a guard for learner translators
            raise NotImplementedError(f"course_lib.dynamo has no handler for {inst.opname}, not even to run it eagerly")
        self.write_cells()
        handler(inst)
        self.refresh_containers()

    def live_values(self) -> list[Var]:
        return self.stack + list(self.locals.values()) + list(self.cells.values())

    def refresh_containers(self) -> None:
        """After an instruction ran eagerly: read back what Python code did to our containers
        (first writing out what our own rules changed in that instruction, so neither is lost)."""
        self.output.apply_side_effects()
        for var in self.reachable_containers():
            var.refresh(self.wrap)
        for cell in self.cells.values():  # `nonlocal` writes of the Python code that just ran
            cell.read_back(self.wrap)

    def write_cells(self) -> None:
        """Before Python code runs (an instruction after a break): the closure cells it can reach
        hold what the traced code stored in them."""
        for cell in self.cells.values():
            cell.write_out()

    def reachable_containers(self) -> list[Var]:
        found: dict[int, Var] = {}
        todo = self.live_values() + list(self.output.mutated.values())
        while todo:
            v = todo.pop()
            if id(v) in found:
                continue
            if isinstance(v, (ListVar, DictVar, SetVar)):
                found[id(v)] = v
                todo.extend(v.items.values() if isinstance(v, DictVar) else v.items if isinstance(v, ListVar) else [])
            elif isinstance(v, CellVar) and v.contents is not None:
                todo.append(v.contents)
            elif isinstance(v, (MethodVar, DictViewVar)):
                todo.append(v.obj if isinstance(v, MethodVar) else v.dict_var)
        return list(found.values())

    def wrap(self, value: Any, source: Source | None = None) -> Var:
        """The Var for a value Python code handed back: the existing Var when the object is one
        we already track (a list we passed in, a function we made), so aliases stay aliases."""
        if isinstance(value, (list, dict, set, types.FunctionType)):
            for var in self.reachable_containers() + [
                v for v in self.live_values() if isinstance(v, NestedFunctionVar)
            ]:
                if getattr(var, "real", None) is value:
                    return var
        return wrap(value, source)

    # -- small helpers ------------------------------------------------------------------------
    def push(self, var: Var) -> None:
        self.stack.append(var)

    def pop(self) -> Var:
        return self.stack.pop()

    def popn(self, n: int) -> list[Var]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump(self, inst: Instr) -> None:
        self.ip = self.index_of[inst.argval]

    def use(self, var: Var) -> Var:
        return self.output.use(var)

    # ====================================================================== opcode handlers
    # --- no-ops --------------------------------------------------------------------------
    def RESUME(self, inst):
        pass

    NOP = CACHE = EXTENDED_ARG = PRECALL = COPY_FREE_VARS = RESUME

    def MAKE_CELL(self, inst):
        name = inst.argval
        if name not in self.cells:
            self.cells[name] = CellVar(self.locals.pop(name, None))

    # --- loads and stores ------------------------------------------------------------------
    def LOAD_FAST(self, inst):
        name = inst.argval
        if name in self.cells and name not in self.locals:
            return self.LOAD_DEREF(inst)
        if name not in self.locals:
            raise UnboundLocalError(f"local variable {name!r} referenced before assignment")
        self.push(self.use(self.locals[name]))

    LOAD_FAST_CHECK = LOAD_FAST

    def LOAD_FAST_AND_CLEAR(self, inst):  # 3.12: inlined comprehensions save the outer variable
        self.push(self.locals.pop(inst.argval, NullVar()))

    def LOAD_FAST_LOAD_FAST(self, inst):  # 3.13
        for name in inst.argval:
            self.push(self.use(self.locals[name]))

    def STORE_FAST(self, inst):
        value = self.pop()
        if isinstance(value, NullVar):
            self.locals.pop(inst.argval, None)
        else:
            self.locals[inst.argval] = value

    def DELETE_FAST(self, inst):
        self.locals.pop(inst.argval, None)

    def LOAD_CONST(self, inst):
        value = inst.argval
        self.push(PyObjVar(value) if isinstance(value, types.CodeType) else ConstVar(value))

    def RETURN_CONST(self, inst):  # 3.12
        self.return_value = ConstVar(inst.argval)
        self.on_return()

    def LOAD_GLOBAL(self, inst):
        if inst.arg is not None and inst.arg & 1:
            self.push(NullVar())
        name = inst.argval
        if name in self.globals:
            self.push(self.use(self.wrap(self.globals[name], Source("G", name, globals=self.globals))))
        elif hasattr(builtins, name):
            self.push(wrap(getattr(builtins, name)))
        else:
            raise NameError(f"name {name!r} is not defined")

    def STORE_GLOBAL(self, inst):
        if not self.eager:
            raise Unsupported(f"STORE_GLOBAL {inst.argval}: assigning a global is not modelled")
        self.globals[inst.argval] = self.pop().as_python()

    def LOAD_DEREF(self, inst):
        cell = self.cells[inst.argval]
        if cell.contents is None:
            raise NameError(f"free variable {inst.argval!r} referenced before assignment")
        self.push(self.use(cell.contents))

    def STORE_DEREF(self, inst):
        cell = self.cells.setdefault(inst.argval, CellVar())
        self.output.remember(cell, "contents")
        cell.contents = self.pop()

    def LOAD_CLOSURE(self, inst):
        self.push(self.cells.setdefault(inst.argval, CellVar()))

    def LOAD_ATTR(self, inst):
        obj = self.pop()
        if inst.arg is not None and inst.arg & 1 and _PY312:  # 3.12 method form: NULL, then the method
            self.push(NullVar())
        self.push(self.load_attr(obj, inst.argval))

    def LOAD_SUPER_ATTR(self, inst):  # 3.12: super().name, with super, __class__ and self on the stack
        obj, cls, _super = self.pop(), self.pop(), self.pop()
        if inst.arg & 1:  # method form, as LOAD_ATTR's
            self.push(NullVar())
        self.push(self.load_attr(SuperVar(cls.as_python(), obj), inst.argval))

    def LOAD_METHOD(self, inst):  # 3.11
        obj = self.pop()
        self.push(NullVar())
        self.push(self.load_attr(obj, inst.argval))

    def STORE_ATTR(self, inst):
        obj, value = self.pop(), self.pop()
        if isinstance(obj, DataclassVar):
            obj.set_field(self, inst.argval, value)
            return
        if not self.eager:
            raise Unsupported(f"STORE_ATTR {inst.argval}: attribute mutation is not modelled")
        setattr(obj.as_python(), inst.argval, value.as_python())

    def DELETE_ATTR(self, inst):
        obj = self.pop()
        if not self.eager:
            raise Unsupported(f"DELETE_ATTR {inst.argval}: attribute mutation is not modelled")
        delattr(obj.as_python(), inst.argval)

    def IMPORT_NAME(self, inst):
        fromlist, level = self.pop().as_python(), self.pop().as_python()
        module = __import__(inst.argval, self.globals, None, fromlist, level)
        self.push(PyObjVar(module))

    def IMPORT_FROM(self, inst):
        self.push(self.load_attr(self.stack[-1], inst.argval))

    def PUSH_NULL(self, inst):
        self.push(NullVar())

    # --- stack shuffling -------------------------------------------------------------------
    def POP_TOP(self, inst):
        self.pop()

    def COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # --- operators -------------------------------------------------------------------------
    def BINARY_OP(self, inst):
        b, a = self.pop(), self.pop()
        symbol = inst.argrepr
        if symbol not in BINARY_OPS:
            raise Unsupported(f"binary operator {symbol}")
        if symbol in INPLACE_OPS:
            self.push(self.inplace(symbol, a, b))
            return
        self.push(self.binary(BINARY_OPS[symbol], a, b))

    def inplace(self, symbol: str, a: Var, b: Var) -> Var:
        """``a += b``: a mutable ``a`` is changed in place (and stays the same object)."""
        if isinstance(a, TensorVar) and not self.eager:
            raise Unsupported(f"in-place {symbol} on a tensor: course_lib.dynamo does not model tensor mutation")
        if isinstance(a, ListVar) and a.kind == "list" and symbol in ("+=", "*="):
            self.output.mutate(a)
            a.items[:] = a.items + self.unpack(b) if symbol == "+=" else a.items * b.as_python()
            return a
        if isinstance(a, DictVar) and symbol == "|=":
            a.call_method(self, "update", [b], {})
            return a
        if isinstance(a, SetVar) and not b.has_tensor():
            self.output.mutate(a)
            a.items = INPLACE_OPS[symbol](a.items, b.as_python())
            return a
        if self.eager:
            return self.wrap(INPLACE_OPS[symbol](a.as_python(), b.as_python()))
        return self.binary(BINARY_OPS[symbol], a, b)  # immutable values: a new value, as Python does

    def COMPARE_OP(self, inst):
        b, a = self.pop(), self.pop()
        symbol = inst.argrepr.replace("bool(", "").rstrip(")")
        self.push(self.binary(COMPARE_OPS[symbol], a, b))

    def IS_OP(self, inst):
        b, a = self.pop(), self.pop()
        same = _identity(a) is _identity(b) if a is not b else True
        self.push(ConstVar(same != bool(inst.arg)))

    def CONTAINS_OP(self, inst):
        container, item = self.pop(), self.pop()
        if not self.eager and (
            isinstance(item, TensorVar) or container.has_tensor() and not isinstance(container, DictVar)
        ):
            raise Unsupported("`in` on a tensor needs the data")
        if isinstance(container, DictVar):
            found = container.key_of(item) in container.items
        else:
            found = item.as_python() in container.as_python()
        self.push(ConstVar(found != bool(inst.arg)))

    def _unary(self, inst):
        self.push(self.call_operator(UNARY_OPS[inst.opname], [self.pop()]))

    UNARY_NEGATIVE = UNARY_INVERT = UNARY_POSITIVE = _unary

    def UNARY_NOT(self, inst):
        self.push(ConstVar(not self.truth(self.pop())))

    def CALL_INTRINSIC_1(self, inst):  # 3.12
        value = self.pop()
        if inst.argrepr == "INTRINSIC_UNARY_POSITIVE":
            self.push(self.call_operator(operator.pos, [value]))
        elif inst.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            self.push(ListVar(list(value.items), "tuple"))
        elif inst.argrepr == "INTRINSIC_STOPITERATION_ERROR":  # a generator's catch-all handler
            self.push(PyObjVar(stop_iteration_error(value.as_python())))
        else:
            raise Unsupported(f"CALL_INTRINSIC_1 {inst.argrepr}")

    def BINARY_SUBSCR(self, inst):
        index, obj = self.pop(), self.pop()
        self.push(self.getitem(obj, index))

    def BINARY_SLICE(self, inst):  # 3.12
        end, start, obj = self.pop(), self.pop(), self.pop()
        self.push(self.getitem(obj, ConstVar(slice(start.as_python(), end.as_python()))))

    def STORE_SUBSCR(self, inst):
        key, obj, value = self.pop(), self.pop(), self.pop()
        self.setitem(obj, key, value)

    def STORE_SLICE(self, inst):  # 3.12: obj[start:end] = value
        end, start, obj, value = self.pop(), self.pop(), self.pop(), self.pop()
        self.setitem(obj, ConstVar(slice(start.as_python(), end.as_python())), value)

    def DELETE_SUBSCR(self, inst):
        key, obj = self.pop(), self.pop()
        if isinstance(obj, (ListVar, DictVar)) and not key.has_tensor():
            obj.delitem(self, key)
        elif self.eager:
            del obj.as_python()[key.as_python()]
        else:
            raise Unsupported(f"del on {obj.describe()}")

    def BUILD_SLICE(self, inst):
        parts = [v.as_python() for v in self.popn(inst.arg)]
        self.push(ConstVar(slice(*parts)))

    # --- containers ------------------------------------------------------------------------
    def BUILD_TUPLE(self, inst):
        self.push(ListVar(self.popn(inst.arg), "tuple"))

    def BUILD_LIST(self, inst):
        self.push(ListVar(self.popn(inst.arg), "list"))

    def BUILD_SET(self, inst):
        out = SetVar(set())
        for item in self.popn(inst.arg):
            out.add(self, item)
        self.push(out)

    def BUILD_MAP(self, inst):
        flat = self.popn(2 * inst.arg)
        out = DictVar({})
        for i in range(0, len(flat), 2):
            out.items[out.key_of(flat[i])] = flat[i + 1]
        self.push(out)

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_python()
        values = self.popn(inst.arg)
        self.push(DictVar(dict(zip(keys, values))))

    def LIST_APPEND(self, inst):
        value = self.pop()
        self.output.remember(self.stack[-inst.arg], "items")
        self.stack[-inst.arg].items.append(value)

    def SET_ADD(self, inst):
        value = self.pop()
        self.stack[-inst.arg].add(self, value)

    def MAP_ADD(self, inst):  # dict comprehensions
        value, key = self.pop(), self.pop()
        target = self.stack[-inst.arg]
        self.output.remember(target, "items")
        target.items[target.key_of(key)] = value

    def LIST_EXTEND(self, inst):
        value = self.pop()
        self.output.remember(self.stack[-inst.arg], "items")
        self.stack[-inst.arg].items.extend(self.unpack(value))

    def SET_UPDATE(self, inst):
        for item in self.unpack(self.pop()):
            self.stack[-inst.arg].add(self, item)

    def DICT_UPDATE(self, inst):  # {**a, 'k': v}
        other = self.pop()
        self.stack[-inst.arg].call_method(self, "update", [other], {})

    def DICT_MERGE(self, inst):  # f(**a, **b): a repeated keyword is an error, as in Python
        other, target = self.pop(), self.stack[-inst.arg]
        if not isinstance(other, DictVar):
            raise Unsupported(f"** of {other.describe()}")
        repeated = set(other.items) & set(target.items)
        if repeated:
            raise TypeError(f"got multiple values for keyword argument {sorted(repeated)[0]!r}")
        target.items.update(other.items)

    def LIST_TO_TUPLE(self, inst):
        self.push(ListVar(list(self.pop().items), "tuple"))

    def UNPACK_SEQUENCE(self, inst):
        items = self.unpack(self.pop())
        if len(items) != inst.arg:
            raise ValueError(f"expected {inst.arg} values to unpack, got {len(items)}")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst):  # a, *rest, b = seq
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.unpack(self.pop())
        if len(items) < before + after:
            raise ValueError(f"not enough values to unpack (expected at least {before + after}, got {len(items)})")
        middle = ListVar(items[before : len(items) - after], "list")
        for item in reversed(items[:before] + [middle] + items[len(items) - after :]):
            self.push(item)

    def FORMAT_VALUE(self, inst):
        spec = self.pop().as_python() if (inst.arg or 0) & 0x04 else ""
        value = self.pop()
        if isinstance(value, TensorVar) and not self.eager:
            raise Unsupported("formatting a tensor as text needs its data")
        conv = {1: str, 2: repr, 3: ascii}.get((inst.arg or 0) & 0x03, lambda v: v)
        self.push(ConstVar(format(conv(value.as_python()), spec)))

    def BUILD_STRING(self, inst):
        self.push(ConstVar("".join(v.as_python() for v in self.popn(inst.arg))))

    # --- control flow ------------------------------------------------------------------------
    def JUMP_FORWARD(self, inst):
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_ABSOLUTE = JUMP = JUMP_FORWARD

    def _pop_jump(self, inst):
        value = self.pop()
        name = inst.opname
        if name.endswith("IF_NONE") or name.endswith("IF_NOT_NONE"):
            is_none = isinstance(value, ConstVar) and value.value is None
            take = is_none if name.endswith("IF_NONE") else not is_none
        else:
            truth = self.truth(value, inst)
            take = truth if name.endswith("IF_TRUE") else not truth
        if take:
            self.jump(inst)

    POP_JUMP_IF_FALSE = POP_JUMP_IF_TRUE = POP_JUMP_IF_NONE = POP_JUMP_IF_NOT_NONE = _pop_jump
    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_FALSE = _pop_jump
    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_NONE = POP_JUMP_FORWARD_IF_NOT_NONE = _pop_jump
    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = _pop_jump

    def _jump_or_pop(self, inst):  # 3.11 `a and b` / `a or b`
        value = self.stack[-1]
        truth = self.truth(value, inst)
        if truth == inst.opname.startswith("JUMP_IF_TRUE"):
            self.jump(inst)
        else:
            self.pop()

    JUMP_IF_TRUE_OR_POP = JUMP_IF_FALSE_OR_POP = _jump_or_pop

    def GET_ITER(self, inst):
        obj = self.pop()
        if isinstance(obj, IteratorVar):
            self.push(obj)
        elif isinstance(obj, ListVar) and obj.kind == "list":  # a live iterator: sees appends
            self.push(IteratorVar(obj.items))
        else:
            self.push(IteratorVar(self.unpack(obj)))

    def FOR_ITER(self, inst):
        it = self.stack[-1]
        if not isinstance(it, IteratorVar):
            raise Unsupported(f"iteration over {it.describe()}")
        if it.pos < len(it.items):
            self.output.remember(it, "pos")
            it.pos += 1
            self.push(self.use(it.items[it.pos - 1]))
            return
        self.pop()  # exhausted: 3.11 pops the iterator and jumps; 3.12 also skips END_FOR
        self.jump(inst)
        if self.ip < len(self.instructions) and self.instructions[self.ip].opname == "END_FOR":
            self.ip += 1

    def END_FOR(self, inst):  # 3.12
        self.popn(2)

    def RETURN_VALUE(self, inst):
        self.return_value = self.pop()
        self.on_return()

    def on_return(self) -> None:
        if self.parent is None:
            line = _rel_line(self.code, self.current.line if self.current else None)
            shared = [c for c in self.cells.values() if c.real is not None]  # cells Python code can see
            self.output.compile_and_run([self.return_value, *shared], "return", False, self.code.co_name, line)
            self.write_cells()

    def RAISE_VARARGS(self, inst):
        parts = self.popn(inst.arg)
        if not self.eager and not self.handler_waits():
            raise Unsupported("raise: exceptions are not modelled (the frame has no handler, so it propagates)")
        exc = parts[0].as_python() if parts else RuntimeError("No active exception to reraise")
        if len(parts) == 2:
            raise exc from parts[1].as_python()
        raise exc

    # --- generators, inlined as a whole (see inline_generator) ------------------------------------
    def RETURN_GENERATOR(self, inst):
        if self.yielded is None:
            raise Unsupported("a generator frame is only translated when inlined")
        self.push(ConstVar(None))  # what the first next() sends in, popped by the POP_TOP after it

    def YIELD_VALUE(self, inst):
        if self.yielded is None:
            raise Unsupported("yield outside an inlined generator")
        if len(self.yielded) >= MAX_GENERATOR_YIELDS:
            raise Unsupported(f"generator yields more than {MAX_GENERATOR_YIELDS} values (endless?)")
        self.yielded.append(self.pop())
        self.push(ConstVar(None))  # the value next() sends back

    def LOAD_ASSERTION_ERROR(self, inst):
        self.push(BuiltinVar(AssertionError))

    # --- try/except and with: handlers reached through the exception table (jump_to_handler) ----
    def PUSH_EXC_INFO(self, inst):  # entering a handler: save the exception being handled before
        exc = self.pop()
        self.push(ConstVar(None))  # sys.exc_info() outside any handler (nested handlers: not modelled)
        self.push(exc)

    def CHECK_EXC_MATCH(self, inst):  # `except KeyError:` -> isinstance(exc, KeyError)
        cls = self.pop()
        self.push(ConstVar(isinstance(self.stack[-1].as_python(), cls.as_python())))

    def POP_EXCEPT(self, inst):
        self.pop()

    def RERAISE(self, inst):  # the handler did not match (or a cleanup block): raise again
        raise self.pop().as_python()

    def BEFORE_WITH(self, inst):
        """``with ctx:`` pushes ``ctx.__exit__`` and then what ``ctx.__enter__()`` returned."""
        ctx = self.pop()
        if isinstance(ctx, MODELLED_CONTEXTS):
            self.stack.extend(ctx.enter(self))
            return
        if not self.eager:
            raise Unsupported(f"with {ctx.describe()}: only torch.no_grad(), torch.enable_grad() and nullcontext() "
                              "blocks are modelled")  # fmt: skip
        obj = ctx.as_python()
        self.push(PyObjVar(type(obj).__exit__.__get__(obj)))
        self.push(self.wrap(type(obj).__enter__(obj)))

    def WITH_EXCEPT_START(self, inst):
        """An exception left the ``with`` body: call ``__exit__(type, value, traceback)``; its
        (true) answer tells the following POP_JUMP whether to swallow the exception."""
        exc, exit_fn = self.stack[-1].as_python(), self.stack[-4]
        info = [PyObjVar(type(exc)), PyObjVar(exc), PyObjVar(exc.__traceback__)]
        self.push(self.call_function(exit_fn, info, {}) if isinstance(exit_fn, ExitVar)
                  else self.wrap(exit_fn.as_python()(*[v.as_python() for v in info])))  # fmt: skip

    def handler_waits(self) -> bool:
        """Whether an exception raised now would land in a handler of this frame or of a caller
        we are inlining from (then ``raise`` is followed symbolically, as Python would)."""
        tx = self
        while tx is not None:
            offset = tx.current.offset if tx.current is not None else -1
            if any(e.start <= offset < e.end for e in tx.exception_table):
                return True
            tx = tx.parent
        return False

    def in_try_block(self, inst: Instr) -> bool:
        """Whether a try/except (not a ``with``, not a 3.12 generator guard) covers ``inst``."""
        for entry in self.exception_table:
            if not entry.start <= inst.offset < entry.end:
                continue
            at = self.index_of[entry.target]
            following = [ins.opname for ins in self.instructions[at : at + 2]]
            if "WITH_EXCEPT_START" in following or "STOPITERATION" in self.instructions[at].argrepr:
                continue
            return True
        return False

    # --- functions -----------------------------------------------------------------------------
    def KW_NAMES(self, inst):
        self.kw_names = inst.argval if isinstance(inst.argval, tuple) else self.code.co_consts[inst.arg]

    def CALL(self, inst):
        args = self.popn(inst.arg)
        below, fn = self.pop(), self.pop()
        if isinstance(fn, NullVar):
            fn = below
        else:
            args = [below] + args
        kw_names, self.kw_names = self.kw_names, ()
        kwargs = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[-len(kw_names) :]))
            args = args[: -len(kw_names)]
        self.push(self.call_function(fn, args, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs = self.pop() if inst.arg & 1 else DictVar({})
        if not isinstance(kwargs, DictVar):
            raise Unsupported(f"** of {kwargs.describe()}")
        args = self.unpack(self.pop())
        fn = self.pop()
        if self.stack and isinstance(self.stack[-1], NullVar):
            self.pop()
        self.push(self.call_function(fn, list(args), dict(kwargs.items)))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().value
        flags = inst.arg or 0
        closure = tuple(self.pop().items) if flags & 0x08 else ()
        if flags & 0x04:
            self.pop()  # annotations
        kwdefaults = self.pop().items if flags & 0x02 else {}
        defaults = tuple(self.unpack(self.pop())) if flags & 0x01 else ()  # a BUILD_TUPLE or a constant tuple
        self.push(NestedFunctionVar(code, self.globals, defaults, dict(kwdefaults), closure))

    # ====================================================================== dispatch to the values' rules
    # Each asks the Var (variables/); after a break (``eager``) a rule that cannot capture falls
    # back to plain Python on the values.
    def truth(self, value: Var, inst: Instr | None = None) -> bool:
        return value.truth(self)

    def unpack(self, value: Var) -> list[Var]:
        """The items of an iterable Var (loops and unpacking are unrolled over them)."""
        return value.unpack(self)

    def binary(self, op, a: Var, b: Var) -> Var:
        if isinstance(a, TensorVar) or isinstance(b, TensorVar):
            return self.call_operator(op, [a, b])
        if isinstance(a, ListVar) and isinstance(b, ListVar) and op is operator.add:
            return ListVar(a.items + b.items, a.kind)
        if isinstance(a, ListVar) and isinstance(b, ConstVar) and op is operator.mul:
            return ListVar(a.items * b.value, a.kind)
        if self.eager or not (a.has_tensor() or b.has_tensor()):
            return self.wrap(op(a.as_python(), b.as_python()))
        raise Unsupported(f"{op.__name__} on {a.describe()} and {b.describe()}")

    def getitem(self, obj: Var, index: Var) -> Var:
        if isinstance(index, TensorVar) and not isinstance(obj, TensorVar) and not self.eager:
            raise Unsupported("indexing a Python container with a tensor")
        return obj.getitem(self, index)

    def setitem(self, obj: Var, key: Var, value: Var) -> None:
        if isinstance(obj, (ListVar, DictVar)) and not key.has_tensor():
            obj.setitem(self, key, value)
        elif self.eager:
            obj.as_python()[key.as_python()] = value.as_python()
        else:
            raise Unsupported(f"item assignment into {obj.describe()} (tensor mutation is not modelled)")

    def load_attr(self, obj: Var, name: str) -> Var:
        eager_plain = self.eager and not isinstance(obj, (ModuleVar, TensorVar, ListVar, DictVar, SetVar))
        if eager_plain:  # after a break: read the attribute off the Python object
            return self.wrap(getattr(obj.as_python(), name))
        return obj.var_getattr(self, name)  # the value's own rule (modules, tensors, containers keep theirs)

    def module_attr(self, obj: ModuleVar, name: str) -> Var:
        return obj.var_getattr(self, name)

    def call_method(self, obj: Var, name: str, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return obj.call_method(self, name, args, kwargs)

    def call_builtin(self, fn, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return call_builtin(self, fn, args, kwargs)

    def call_torch(self, fn, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return TorchFnVar(fn).call_function(self, args, kwargs)

    def call_module(self, mod: ModuleVar, args: list[Var], kwargs: dict[str, Var]) -> Var:
        return mod.call_function(self, args, kwargs)

    def call_function(self, fn: Var, args: list[Var], kwargs: dict[str, Var]) -> Var:
        """Dispatch a call on the kind of callable (Dynamo: ``VariableTracker.call_function``)."""
        if isinstance(fn, BuiltinVar) and fn.value is super and not args and not kwargs:
            return zero_arg_super(self)  # needs this frame's __class__ cell, even after a break
        if _two_arg_super(fn, args, kwargs):  # super(C, self): a CALL on 3.11; 3.12 uses LOAD_SUPER_ATTR
            return SuperVar(args[0].as_python(), args[1])
        if self.eager:
            return self.call_eagerly(fn, args, kwargs)
        return fn.call_function(self, args, kwargs)

    def call_eagerly(self, fn: Var, args: list[Var], kwargs: dict[str, Var]) -> Var:
        """Run a call for real (after a graph break). A user function gets its own frame."""
        if isinstance(fn, MethodVar) and isinstance(fn.obj, (ListVar, DictVar, SetVar)):
            try:  # the container's own rules keep its Var current
                return fn.call_function(self, args, kwargs)
            except Unsupported:  # no rule (list.sort(key=...)): run it on the real object, then read it back
                self.output.mutated.pop(id(fn.obj), None)  # the rule changed nothing before it gave up
        pyargs = [a.as_python() for a in args]
        pykw = {k: v.as_python() for k, v in kwargs.items()}
        target = fn.as_python()
        if (
            isinstance(fn, MethodVar)
            and isinstance(fn.obj, ModuleVar)
            and is_user_function(getattr(target, "__func__", None))
        ):
            return self.wrap(self.output_run_frame(target, pyargs, pykw))
        if isinstance(fn, (FunctionVar, NestedFunctionVar)) or (isinstance(fn, ModuleVar) and not _is_leaf(fn.value)):
            return self.wrap(self.output_run_frame(target, pyargs, pykw))
        return self.wrap(target(*pyargs, **pykw))

    def output_run_frame(self, fn, args, kwargs):
        from course_lib.dynamo.eval_frame import run_frame

        return run_frame(fn, args, kwargs, self.output)

    def call_operator(self, op, args: list[Var]) -> Var:
        """``operator.add`` and friends on tensors: a call_function node."""
        if self.eager:
            return self.wrap(op(*[a.as_python() for a in args]))
        return TorchFnVar(op).call_function(self, args, {})

    # ---------------------------------------------------------------------- graph building
    def add_node(self, op: str, target: Any, args: list[Var], kwargs: dict[str, Var], example: Any) -> Var:
        """Record one node in the current graph (OutputGraph.add_node) and return its Var."""
        return self.output.add_node(op, target, args, kwargs, example)

    # ---------------------------------------------------------------------- inlining
    def inline_call(self, fn: Var, args: list[Var], kwargs: dict[str, Var]) -> Var:
        """Run a user function with a child translator sharing the graph (inlining)."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported("inlining depth limit reached (recursion?)")
        if isinstance(fn, FunctionVar):
            func = fn.value
            code, globs = func.__code__, func.__globals__
            defaults = tuple(wrap(d) for d in (func.__defaults__ or ()))
            kwdefaults = {k: wrap(v) for k, v in (func.__kwdefaults__ or {}).items()}
            closure_src = fn.source.attr("__closure__") if fn.source is not None else None
            cells = tuple(
                CellVar(self.wrap(c.cell_contents, closure_src.item(i).attr("cell_contents") if closure_src else None))
                for i, c in enumerate(func.__closure__ or ())
            )
        else:
            code, globs, defaults, kwdefaults, cells = fn.code, fn.globals, fn.defaults, fn.kwdefaults, fn.closure
        problem = frame_unsupported(code, inlining=True)
        if problem is not None:
            raise Unsupported(f"cannot inline {code.co_name}: {problem}")
        bound = bind_arguments(code, defaults, kwdefaults, args, kwargs)
        child = type(self)(code, bound, globs, self.output, dict(zip(code.co_freevars, cells)), parent=self)
        child.eager = self.eager
        if code.co_flags & inspect.CO_GENERATOR:
            return self.inline_generator(child)
        result = child.run()
        self.trace.extend("  " + t for t in child.trace)
        return result

    def inline_generator(self, child: InstructionTranslator) -> Var:
        """Run a generator function to its end now and hand back an iterator over what it yielded
        (as Dynamo inlines a generator). Running it early is only safe when it has no side
        effects that the consumer could see in between: a generator that mutates a container or
        a closure cell is a graph break instead."""
        child.yielded = []
        mutated_before, log_before = set(self.output.mutated), len(self.output.mutations)
        try:
            child.run()
        except StopIteration as exc:  # 3.11: the generator object turns it into RuntimeError (3.12: bytecode does)
            raise stop_iteration_error(exc) from exc
        except Unsupported as exc:  # Dynamo runs the generator lazily, inside its consumer: no place to resume
            raise Unsupported(exc.reason, skip_frame=True) from exc
        self.trace.extend("  " + t for t in child.trace)
        cells_changed = any(isinstance(var, CellVar) for var, _, _ in self.output.mutations[log_before:])
        if set(self.output.mutated) - mutated_before or cells_changed:
            raise Unsupported("a generator with side effects cannot be run ahead of its consumer")
        return IteratorVar(child.yielded)


def stop_iteration_error(exc: BaseException) -> BaseException:
    """PEP 479: a StopIteration that escapes a generator's body becomes a RuntimeError (3.12 does it
    in the generator's bytecode, ``CALL_INTRINSIC_1 INTRINSIC_STOPITERATION_ERROR``; 3.11 in C)."""
    if isinstance(exc, StopIteration):
        error = RuntimeError("generator raised StopIteration")
        error.__cause__ = exc
        return error
    return exc


def frame_unsupported(code: types.CodeType, inlining: bool = False) -> str | None:
    """Why a frame cannot be translated at all, or None. Such a frame runs as plain Python.
    A generator function can be inlined (run to its end), not translated as a frame of its own."""
    allowed = inspect.CO_GENERATOR if inlining else 0
    if code.co_flags & _GENERATOR_FLAGS & ~allowed:
        return "generator or coroutine functions are not translated (the frame runs without a graph)"
    instrs = instructions(code)
    missing = sorted({ins.opname for ins in instrs} - set(HANDLED))
    if missing:
        return f"opcode {missing[0]} has no handler (the frame runs without a graph)"
    return None


def bind_arguments(code: types.CodeType, defaults: tuple, kwdefaults: dict, args: list, kwargs: dict) -> dict[str, Any]:
    """Bind call arguments to parameter names, as CPython does when it makes the frame."""
    dummy = types.FunctionType(
        code, {}, code.co_name, defaults or None, tuple(types.CellType() for _ in code.co_freevars) or None
    )
    dummy.__kwdefaults__ = dict(kwdefaults) or None
    sig = inspect.signature(dummy)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    # inspect renames a comprehension's ".0" argument to "implicit0"; the frame uses co_varnames
    real_names = frame_names(sig, code)
    out = {}
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        name = real_names.get(name, name)
        if kind is inspect.Parameter.VAR_POSITIONAL:
            value = ListVar(list(value), "tuple")
        elif kind is inspect.Parameter.VAR_KEYWORD:
            value = DictVar(dict(value))
        out[name] = value
    return out


def frame_names(sig: inspect.Signature, code: types.CodeType) -> dict[str, str]:
    """Parameter name -> the frame's local name. They are the same except for a comprehension's
    ``.0`` argument, which inspect calls ``implicit0``. (Zipping parameters with ``co_varnames``
    is wrong: keyword-only parameters come before ``*args`` in ``co_varnames``.)"""
    return {p: p if p in code.co_varnames else code.co_varnames[i] for i, p in enumerate(sig.parameters)}


def stack_label(var: Var) -> str:
    """A short, deterministic label for a stack entry (step-through views)."""
    if isinstance(var, TensorVar):
        if var.node is not None:
            return f"T({var.node.name})"
        return f"T({var.source.name})" if var.source is not None else "T(outside)"
    if isinstance(var, ConstVar):
        text = repr(var.value)
        return text if len(text) <= 12 else text[:11] + "…"
    if isinstance(var, MethodVar):
        return f"{stack_label(var.obj)}.{var.name}"
    if isinstance(var, (TorchFnVar, BuiltinVar, FunctionVar)):
        return getattr(var.value, "__name__", type(var.value).__name__)
    if isinstance(var, NullVar):
        return "NULL"
    if isinstance(var, ListVar):
        return f"{var.kind}[{len(var.items)}]"
    if isinstance(var, IteratorVar):
        return f"iter({var.pos}/{len(var.items)})"
    if isinstance(var, ModuleVar):
        return type(var.value).__name__
    if isinstance(var, PyObjVar):
        return getattr(var.value, "__name__", type(var.value).__name__)
    return type(var).__name__


def _is_leaf(module: torch.nn.Module) -> bool:
    from course_lib.dynamo.variables import is_leaf_module

    return is_leaf_module(module)


def _has_tensor(values) -> bool:
    return any_tensor(values)


def _two_arg_super(fn: Var, args: list[Var], kwargs: dict[str, Var]) -> bool:
    if not (isinstance(fn, BuiltinVar) and fn.value is super and len(args) == 2 and not kwargs):
        return False
    cls = args[0].as_python() if isinstance(args[0], (ConstVar, PyObjVar, BuiltinVar)) else None
    return isinstance(cls, type) and isinstance(args[1].as_python(), cls)


def _identity(var: Var) -> Any:
    if isinstance(var, NullVar):
        return None
    return var.as_python()


def _rel_line(code: types.CodeType, line: int | None) -> int | None:
    return None if line is None else line - code.co_firstlineno


_PY312 = sys.version_info >= (3, 12)

# What precedes BUILD_LIST/BUILD_MAP 0 in a 3.12 inlined comprehension (Dynamo derives the same
# list from ``dis`` of ``[i for i in range(1)]`` in comprehension_graph_break.py).
COMPREHENSION_PREFIX = ("LOAD_FAST_AND_CLEAR", "SWAP")


def comprehension_regions(instrs: list[Instr]) -> dict[int, int]:
    """Outermost inlined comprehensions (3.12+): index of the ``BUILD_LIST``/``BUILD_MAP`` that
    starts one -> index of its ``END_FOR`` (FOR_ITER/END_FOR nesting). Empty on 3.11."""
    regions: dict[int, int] = {}
    last_end = -1
    for i, ins in enumerate(instrs):
        if i <= last_end or ins.opname not in ("BUILD_LIST", "BUILD_MAP") or ins.arg != 0:
            continue
        if tuple(x.opname for x in instrs[max(0, i - len(COMPREHENSION_PREFIX)) : i]) != COMPREHENSION_PREFIX:
            continue
        depth = 0
        for j in range(i + 1, len(instrs)):
            depth += {"FOR_ITER": 1, "END_FOR": -1}.get(instrs[j].opname, 0)
            if instrs[j].opname == "END_FOR" and depth == 0:
                regions[i] = last_end = j
                break
    return regions


HANDLED = sorted(
    name for name in dir(InstructionTranslator) if name.isupper() and callable(getattr(InstructionTranslator, name))
)


def opcode_coverage(names: list[str] | None = None) -> dict[str, bool]:
    """For each opcode name of this Python (``dis.opname``), whether a handler exists."""
    names = names if names is not None else [n for n in dis.opname if not n.startswith("<")]
    return {n: n in HANDLED for n in names}


__all__ = [
    "BINARY_OPS", "COMPARE_OPS", "HANDLED", "InstructionTranslator", "UNARY_OPS", "Unsupported", "bind_arguments",
    "frame_names", "frame_unsupported", "is_torch_callable", "opcode_coverage",
]  # fmt: skip
