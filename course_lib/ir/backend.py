"""Back end: instruction selection, register allocation (linear scan, Chaitin-Briggs), list scheduling.

Teaches what LLVM's code generator does after SelectionDAG (``llvm/lib/CodeGen/``):
``RegAllocLinearScan`` (removed from LLVM, kept in JITs and in GCC's LRA ideas),
``RegAllocGreedy``/``RegAllocPBQP`` descend from Chaitin-Briggs graph colouring, and
``MachineScheduler``/``ScheduleDAGInstrs`` build a dependence DAG and list-schedule it.

Input: a phi-free IR function (``from_ssa`` output). Variables are virtual registers.
References: Poletto and Sarkar, "Linear Scan Register Allocation" (1999); Briggs, Cooper,
Torczon, "Improvements to Graph Coloring Register Allocation" (1994); Gibbons and Muchnick
(1986) for list scheduling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from course_lib.ir.cfg import natural_loops
from course_lib.ir.core import FLOAT, Alloc, Branch, Call, Const, Function, Jump, Load, Op, Phi, Return, Store
from course_lib.ir.dataflow import liveness

# --- instruction selection -----------------------------------------------------------------
#: IR operation -> machine mnemonic, by operand type; an "i" suffix takes an immediate.
SELECT = {
    ("add", "int"): "add",
    ("sub", "int"): "sub",
    ("mul", "int"): "mul",
    ("floordiv", "int"): "div",
    ("mod", "int"): "rem",
    ("add", "float"): "fadd",
    ("sub", "float"): "fsub",
    ("mul", "float"): "fmul",
    ("div", "float"): "fdiv",
    ("floordiv", "float"): "ffloordiv",
    ("mod", "float"): "fmod",
    ("min", "int"): "min",
    ("max", "int"): "max",
    ("min", "float"): "fmin",
    ("max", "float"): "fmax",
    ("neg", "int"): "neg",
    ("neg", "float"): "fneg",
    ("abs", "int"): "abs",
    ("abs", "float"): "fabs",
    ("not", "int"): "seqz",
    ("float", "float"): "cvt.f.i",
    ("int", "int"): "cvt.i.f",
    ("len", "int"): "len",
    ("copy", "int"): "mov",
    ("copy", "float"): "fmov",
}
CMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "seq", "ne": "sne"}

#: Cycles until a result can be used (a textbook in-order pipeline).
LATENCY = {
    "mul": 3,
    "div": 20,
    "rem": 20,
    "fadd": 4,
    "fsub": 4,
    "fmul": 4,
    "fdiv": 15,
    "ffloordiv": 18,
    "fmod": 18,
    "ld": 4,
    "call": 10,
    "alloc": 10,
}


@dataclass
class MInstr:
    """A machine instruction: mnemonic, destination register (or None), sources (regs or imms)."""

    op: str
    dst: str | None
    srcs: list
    ir: object = field(default=None, repr=False, compare=False)

    def uses(self):
        return [s for s in self.srcs if isinstance(s, str)]

    def __str__(self):
        srcs = ", ".join(s if isinstance(s, str) else f"#{s.value}" for s in self.srcs)
        return f"{self.op:8} {self.dst + ', ' if self.dst else ''}{srcs}".rstrip()


def select_instr(i, types) -> list[MInstr]:
    """One IR instruction -> machine instructions (the rule table above)."""
    if isinstance(i, Op):
        if i.op in CMP:
            t = types.get(i.args[0], "int") if isinstance(i.args[0], str) else i.args[0].type
            return [MInstr(("f" if t == FLOAT else "") + CMP[i.op], i.dest, list(i.args), i)]
        key = (i.op, i.type)
        op = SELECT.get(key, i.op)
        if i.op == "copy" and isinstance(i.args[0], Const):
            op = "li" if i.type != FLOAT else "fli"
        elif len(i.args) == 2 and isinstance(i.args[1], Const) and op in ("add", "sub", "mul"):
            op += "i"
        return [MInstr(op, i.dest, list(i.args), i)]
    if isinstance(i, Load):
        return [MInstr("ld", i.dest, [i.array, i.index], i)]
    if isinstance(i, Store):
        return [MInstr("st", None, [i.array, i.index, i.value], i)]
    if isinstance(i, Alloc):
        return [MInstr("alloc", i.dest, [i.size, i.init], i)]
    if isinstance(i, Call):
        return [MInstr("call", i.dest, [Const(i.func)] + list(i.args), i)]
    if isinstance(i, Branch):
        return [MInstr("bnez", None, [i.cond, Const(i.true)], i), MInstr("j", None, [Const(i.false)], i)]
    if isinstance(i, Jump):
        return [MInstr("j", None, [Const(i.target)], i)]
    if isinstance(i, Return):
        return [MInstr("ret", None, [i.value] if i.value is not None else [], i)]
    raise ValueError(f"cannot select {i} (run from_ssa first)")


def select(fn: Function) -> dict[str, list[MInstr]]:
    """Block label -> machine instructions."""
    if any(isinstance(i, Phi) for _, i in fn.instructions()):
        raise ValueError("select() needs a phi-free function: call from_ssa first")
    types = fn.var_types()
    return {b.label: [m for i in b.all() for m in select_instr(i, types)] for b in fn.blocks}


def machine_text(code: dict[str, list[MInstr]], assignment: dict | None = None) -> str:
    def reg(x):
        if assignment and isinstance(x, str) and x in assignment:
            a = assignment[x]
            return f"[sp+{a[1]}]" if isinstance(a, tuple) else f"r{a}"
        return x

    out = []
    for label, ms in code.items():
        out.append(f"{label}:")
        for m in ms:
            mm = MInstr(m.op, reg(m.dst) if m.dst else None, [reg(s) for s in m.srcs])
            out.append(f"  {mm}")
    return "\n".join(out)


# --- live ranges and interference --------------------------------------------------------------
def linear_order(fn: Function) -> list[tuple[str, object]]:
    """(block, instruction) in layout order; position k is the index."""
    return list(fn.instructions())


def live_intervals(fn: Function) -> dict[str, tuple[int, int]]:
    """var -> [start, end] in layout positions: one interval covering every point it is live
    (the coarse 'lifetime interval' of Poletto-Sarkar, holes not modelled)."""
    live = liveness(fn)
    pos = 0
    iv: dict[str, list[int]] = {}

    def touch(v, p):
        if v in iv:
            iv[v][0] = min(iv[v][0], p)
            iv[v][1] = max(iv[v][1], p)
        else:
            iv[v] = [p, p]

    for p, _ in fn.params:
        touch(p, 0)
    for b in fn.blocks:
        first = pos
        for i in b.all():
            for u in i.uses():
                touch(u, pos)
            for d in i.defs():
                touch(d, pos)
            pos += 1
        for v in live.into[b.label]:
            touch(v, first)
        for v in live.out[b.label]:
            touch(v, pos - 1)
    return {v: (a, b) for v, (a, b) in sorted(iv.items()) if not reserved(v)}


#: Stack slots live in memory addressed off the stack pointer; these names (and every name
#: starting with "sp.", such as an argument passed on the stack) are never allocated.
RESERVED = ("sp.i", "sp.f")


def reserved(v: str) -> bool:
    return v.startswith("sp.")


def interference(fn: Function) -> dict[str, set[str]]:
    """Interference graph: a definition interferes with everything live after it (except the
    source of a copy, so copies can share a register: Chaitin's rule)."""
    live = liveness(fn)
    graph: dict[str, set[str]] = {v: set() for v in fn.var_types()}
    params = [p for p, _ in fn.params]
    for a in params:  # parameters are all live at entry together
        graph[a] |= set(params) - {a}
    for b in fn.blocks:
        cur = set(live.out[b.label])
        for i in reversed(b.all()):
            src = i.args[0] if isinstance(i, Op) and i.op == "copy" else None
            for d in i.defs():
                for v in cur:
                    if v != d and v != src:
                        graph[d].add(v)
                        graph[v].add(d)
            cur -= set(i.defs())
            cur |= set(i.uses())
        for a in cur:  # live at block entry: interfere pairwise (covers parameters)
            for c in cur:
                if a != c:
                    graph[a].add(c)
    for r in [v for v in graph if reserved(v)]:
        graph.pop(r)
    for v in graph:
        graph[v] = {n for n in graph[v] if not reserved(n)}
    return graph


def spill_costs(fn: Function) -> dict[str, float]:
    """Uses + defs weighted by 10^loop depth (the classic estimate)."""
    depth = {b: 0 for b in fn.labels()}
    for lp in natural_loops(fn).values():
        for b in lp.body:
            depth[b] = max(depth[b], lp.depth)
    cost = {v: 0.0 for v in fn.var_types()}
    for label, i in fn.instructions():
        for v in i.uses() + i.defs():
            cost[v] += 10.0 ** depth[label]
    for v in cost:  # spill code's own temporaries must never spill again
        if re.search(r"\.(ld|st)\d+$", v):
            cost[v] = float("inf")
    return cost


@dataclass
class Allocation:
    """``assignment``: var -> register number or ("spill", slot). ``spilled`` lists the latter."""

    method: str
    k: int
    assignment: dict
    spilled: list

    def __str__(self):
        regs = ", ".join(
            f"{v}->{'r' + str(a) if not isinstance(a, tuple) else 'spill' + str(a[1])}"
            for v, a in sorted(self.assignment.items())
        )
        return f"{self.method} (k={self.k}): {len(self.spilled)} spilled; {regs}"


def linear_scan(fn: Function, k: int) -> Allocation:
    """Poletto-Sarkar: walk intervals by start; expire ended ones; when all k registers are
    busy, spill whichever active interval ends last (it may be the new one). O(n log n)."""
    iv = live_intervals(fn)
    order = sorted(iv, key=lambda v: (iv[v][0], iv[v][1], v))
    free = list(range(k))
    active: list[str] = []
    assign: dict = {}
    spilled = []
    for v in order:
        start = iv[v][0]
        for a in sorted(active, key=lambda x: iv[x][1]):
            if iv[a][1] < start:
                active.remove(a)
                free.append(assign[a])
        free.sort()
        if free:
            assign[v] = free.pop(0)
            active.append(v)
            continue
        victim = max(active + [v], key=lambda x: (iv[x][1], x))
        if victim != v:
            assign[v] = assign[victim]
            active.remove(victim)
            active.append(v)
        assign[victim] = ("spill", len(spilled))
        spilled.append(victim)
    return Allocation("linear scan", k, assign, spilled)


def graph_coloring(fn: Function, k: int) -> Allocation:
    """Chaitin-Briggs: simplify (remove nodes of degree < k onto a stack); when none is left,
    push the node with the lowest cost/degree optimistically (Briggs); select pops and gives
    each node the lowest colour its coloured neighbours leave free, spilling when none is."""
    graph = interference(fn)
    cost = spill_costs(fn)
    g = {v: set(n) for v, n in graph.items()}
    stack = []
    while g:
        low = sorted(v for v in g if len(g[v]) < k)
        v = low[0] if low else min(g, key=lambda x: (cost[x] / (len(g[x]) or 1), x))
        stack.append(v)
        for n in g.pop(v):
            g[n].discard(v)
    assign: dict = {}
    spilled = []
    while stack:
        v = stack.pop()
        used = {assign[n] for n in graph[v] if n in assign and not isinstance(assign[n], tuple)}
        free = [c for c in range(k) if c not in used]
        if free:
            assign[v] = free[0]
        else:
            assign[v] = ("spill", len(spilled))
            spilled.append(v)
    return Allocation("graph colouring", k, assign, sorted(spilled))


def insert_spill_code(fn: Function, spilled) -> Function:
    """Chaitin's rewrite: each spilled variable gets a stack slot; every use reads it into a
    fresh short-lived temporary (``v.ld3 = load sp.i, slot``) and every definition writes a
    temporary stored right after (``store sp.i, slot, v.st4``). Slots are elements of two frame
    lists ``sp.i`` / ``sp.f`` allocated at entry (standing for memory off the stack pointer)."""
    new = fn.copy()
    types = new.var_types()
    entry = new.blocks[0]
    used = [
        i.index.value
        for _, i in new.instructions()
        if isinstance(i, (Load, Store)) and i.array in RESERVED and isinstance(i.index, Const)
    ]
    first = max(used, default=-1) + 1
    entry.instrs = [i for i in entry.instrs if not (isinstance(i, Alloc) and i.dest in RESERVED)]
    slots = {v: first + k for k, v in enumerate(sorted(spilled))}
    n_slots = first + len(slots)
    counter = [sum(len(b.all()) for b in new.blocks)]  # fresh suffixes never collide with earlier rounds

    def frame(v):
        return "sp.f" if types[v] == FLOAT else "sp.i"

    def fresh(v, tag):
        counter[0] += 1
        return f"{v}.{tag}{counter[0]}"

    for b in new.blocks:
        out = []
        for i in b.all():
            loads = {}
            for u in dict.fromkeys(i.uses()):
                if u in slots:
                    t = fresh(u, "ld")
                    out.append(Load(t, types[u], frame(u), Const(slots[u])))
                    loads[u] = t
            if loads:
                i.replace_uses(lambda x, loads=loads: loads.get(x, x) if isinstance(x, str) else x)
            out.append(i)
            if i.dest is not None and i.dest in slots:
                d = i.dest
                i.dest = fresh(d, "st")
                out.append(Store(frame(d), Const(slots[d]), i.dest))
        b.term = out[-1]
        b.instrs = out[:-1]
    prologue = [
        Alloc("sp.i", "list[int]", Const(n_slots), Const(0)),
        Alloc("sp.f", "list[float]", Const(n_slots), Const(0.0)),
    ]
    # a spilled parameter is passed on the stack (as an ABI does once registers run out)
    prologue += [Store(frame(p), Const(slots[p]), f"sp.{p}") for p, _ in new.params if p in slots]
    new.params = [(f"sp.{p}" if p in slots else p, t) for p, t in new.params]
    entry.instrs = prologue + entry.instrs
    return new


@dataclass
class SpillResult:
    fn: Function
    allocation: Allocation
    rounds: int
    spilled: list

    def __str__(self):
        return f"{self.rounds} round(s), spilled {self.spilled}; {self.allocation}"


def allocate_with_spilling(fn: Function, k: int, max_rounds: int = 6) -> SpillResult:
    """Chaitin's loop: colour; if something spilled, insert spill code and colour again,
    until every remaining variable has a register."""
    cur, all_spilled = fn, []
    for rounds in range(1, max_rounds + 1):
        alloc = graph_coloring(cur, k)
        if not alloc.spilled:
            return SpillResult(cur, alloc, rounds, all_spilled)
        all_spilled += alloc.spilled
        cur = insert_spill_code(cur, alloc.spilled)
    raise ValueError(f"still spilling after {max_rounds} rounds with k={k}")


def spill_everything(fn: Function, k: int = 0) -> Allocation:
    """The bottom rung: every variable lives in memory."""
    vs = sorted(fn.var_types())
    return Allocation("spill everything", k, {v: ("spill", n) for n, v in enumerate(vs)}, vs)


def check_allocation(fn: Function, alloc: Allocation) -> list[str]:
    """Why an allocation is invalid: a variable without a location, a register outside 0..k-1,
    or two interfering variables in one register. Empty list = valid."""
    problems = []
    graph = interference(fn)
    for v in sorted(graph):
        a = alloc.assignment.get(v)
        if a is None:
            problems.append(f"{v} has no register or stack slot")
        elif not isinstance(a, tuple) and not 0 <= a < alloc.k:
            problems.append(f"{v} is in r{a}, but only r0..r{alloc.k - 1} exist")
    for v in sorted(graph):
        for n in sorted(graph[v]):
            a, b = alloc.assignment.get(v), alloc.assignment.get(n)
            if v < n and a is not None and a == b and not isinstance(a, tuple):
                problems.append(f"{v} and {n} are live at the same time but share r{a}")
    return problems


# --- list scheduling ---------------------------------------------------------------------------
@dataclass
class DAG:
    instrs: list  # MInstr
    edges: dict  # k -> list of (successor k, latency)

    def preds(self):
        out = {k: [] for k in range(len(self.instrs))}
        for a, es in self.edges.items():
            for b, lat in es:
                out[b].append((a, lat))
        return out


def latency(m: MInstr) -> int:
    return LATENCY.get(m.op, 1)


def dependence_dag(instrs: list[MInstr]) -> DAG:
    """Edges for read-after-write (latency of the producer), write-after-read and
    write-after-write (latency 0/1), memory order (stores against loads/stores and calls),
    and everything before the final branch."""
    edges = {k: [] for k in range(len(instrs))}

    def add(a, b, lat):
        if all(x != b for x, _ in edges[a]):
            edges[a].append((b, lat))

    for b, mb in enumerate(instrs):
        for a in range(b):
            ma = instrs[a]
            raw = ma.dst is not None and ma.dst in mb.uses()
            war = mb.dst is not None and mb.dst in ma.uses()
            waw = ma.dst is not None and ma.dst == mb.dst
            mem = {"st", "call", "alloc"}
            memdep = (ma.op in mem or mb.op in mem) and (ma.op in mem | {"ld"} and mb.op in mem | {"ld"})
            ctrl = mb.op in ("j", "bnez", "ret")
            if raw:
                add(a, b, latency(ma))
            elif waw:
                add(a, b, 1)
            elif war or memdep or ctrl:
                add(a, b, 0 if war or ctrl else 1)
    return DAG(instrs, edges)


@dataclass
class Schedule:
    """``cycle[k]``: the cycle instruction k issues in; ``cycles``: when the last result is ready."""

    cycle: dict
    cycles: int
    width: int

    def rows(self, dag: DAG):
        return [(self.cycle[k], str(dag.instrs[k])) for k in sorted(self.cycle, key=lambda k: (self.cycle[k], k))]


def critical_path(dag: DAG) -> dict[int, int]:
    """Longest latency path from each instruction to the end (the list scheduler's priority)."""
    n = len(dag.instrs)
    prio = {}
    for k in reversed(range(n)):
        prio[k] = latency(dag.instrs[k]) + max([prio[b] for b, _ in dag.edges[k]] or [0])
    return prio


def list_schedule(dag: DAG, width: int = 1) -> Schedule:
    """Cycle by cycle, issue up to ``width`` ready instructions, highest critical path first."""
    preds = dag.preds()
    prio = critical_path(dag)
    n = len(dag.instrs)
    cycle: dict[int, int] = {}
    t = 0
    while len(cycle) < n:
        ready = [
            k for k in range(n) if k not in cycle and all(p in cycle and cycle[p] + lat <= t for p, lat in preds[k])
        ]
        ready.sort(key=lambda k: (-prio[k], k))
        for k in ready[:width]:
            cycle[k] = t
        t += 1
    end = max([cycle[k] + latency(dag.instrs[k]) for k in cycle] or [0])
    return Schedule(cycle, end, width)


def in_order_schedule(dag: DAG) -> Schedule:
    """The naive rung: program order, each instruction waits for its operands."""
    preds = dag.preds()
    cycle: dict[int, int] = {}
    t = 0
    for k in range(len(dag.instrs)):
        t = max([t] + [cycle[p] + lat for p, lat in preds[k]])
        cycle[k] = t
        t += 1
    end = max([cycle[k] + latency(dag.instrs[k]) for k in cycle] or [0])
    return Schedule(cycle, end, 1)


def check_schedule(dag: DAG, sched: Schedule) -> list[str]:
    """Violated dependences and over-full cycles. Empty = valid."""
    problems = []
    for a, es in dag.edges.items():
        for b, lat in es:
            if sched.cycle[b] < sched.cycle[a] + lat:
                problems.append(f"{dag.instrs[b]} issues at {sched.cycle[b]} before {dag.instrs[a]} is ready")
    per = {}
    for c in sched.cycle.values():
        per[c] = per.get(c, 0) + 1
    problems += [f"cycle {c} issues {m} > width {sched.width}" for c, m in sorted(per.items()) if m > sched.width]
    return problems
