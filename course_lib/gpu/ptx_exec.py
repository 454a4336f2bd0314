"""Execute real PTX on the SIMT machine: one numpy operation per instruction per warp.

Teaches: what each PTX instruction that Triton emits does, lane by lane (PTX ISA manual,
chapter 9: integer, floating-point, comparison, data movement, control flow, parallel
synchronisation). The real executor is ptxas (PTX -> SASS) plus the hardware.

Registers hold raw bits (uint64 per lane) and every instruction reads them through its type
suffix (``.f32``, ``.s32``, ``.b64`` ...), the way PTX registers are untyped bit containers.
Rules are tables: ``BINARY`` maps opcode -> numpy function, ``COMPARE`` maps setp's comparison.

Simplified: ``fma`` rounds once through float64 (exact for nearly all inputs); ``ex2.approx``,
``div.full`` and ``rcp.approx`` are computed exactly rounded (hardware is within 2 ulp);
``.ftz``/``.sat`` flush/saturation and cache hints are ignored; atomics (``atom``, ``red``) run
one lane after another, which is one of the orders the hardware may pick; no ``cp.async``, no
tensor-core instructions (those are shown, not run: see :mod:`.tensor_core`). An instruction
outside the model raises :class:`UnsupportedInstruction` naming it and its PTX line.
"""

from __future__ import annotations

import os
import re

import numpy as np

from course_lib.gpu import memory as mem
from course_lib.gpu.ptx import Instr, PtxKernel, parse_ptx
from course_lib.gpu.simt import WARP, Issue, MemEvent, RunResult, WarpStats, dim3, schedule_block, thread_coords

WIDTH = {
    "b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
    "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4,
    "b64": 8, "u64": 8, "s64": 8, "f64": 8, "pred": 1,
}  # fmt: skip
_NP_INT = {"u8": np.uint8, "s8": np.int8, "b8": np.uint8, "u16": np.uint16, "s16": np.int16,
           "b16": np.uint16, "u32": np.uint32, "s32": np.int32, "b32": np.uint32,
           "u64": np.uint64, "s64": np.int64, "b64": np.uint64}  # fmt: skip
_U = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

SFU = {"ex2", "lg2", "rcp", "sqrt", "rsqrt", "sin", "cos", "tanh", "div"}
CONTROL = {"bra", "ret", "exit"}
SYNC = {"bar", "barrier"}
IGNORED_MODS = {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "ftz", "sat", "approx", "full",
                "uni", "sync", "aligned", "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt",
                "volatile", "relaxed", "acquire", "release", "weak", "gpu", "cta", "sys"}  # fmt: skip


def type_of(ins: Instr) -> str:
    """The instruction's operand type: its last mod that names a type."""
    for m in reversed(ins.mods):
        if m in WIDTH:
            return m
    return "b32"


# ---------------------------------------------------------------------------- bits <-> values
def from_bits(bits: np.ndarray, ty: str) -> np.ndarray:
    """View per-lane raw bits as values of PTX type ``ty``."""
    if ty == "f32":
        return bits.astype(np.uint32).view(np.float32)
    if ty == "f64":
        return bits.view(np.float64)
    if ty == "f16":
        return bits.astype(np.uint16).view(np.float16)
    if ty == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    w = WIDTH[ty]
    return bits.astype(_U[w]).view(_NP_INT[ty]) if ty in _NP_INT else bits


def to_bits(val, ty: str) -> np.ndarray:
    """Per-lane values of type ``ty`` -> raw uint64 bits (narrow types zero-extended)."""
    val = np.broadcast_to(np.asarray(val), (WARP,))
    if ty == "f32":
        return val.astype(np.float32).view(np.uint32).astype(np.uint64)
    if ty == "f64":
        return val.astype(np.float64).view(np.uint64)
    if ty == "f16":
        return val.astype(np.float16).view(np.uint16).astype(np.uint64)
    if ty == "bf16":
        u = val.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) & np.uint64(0xFFFF)
    if ty == "pred":
        return val.astype(bool).astype(np.uint64)
    w = WIDTH[ty]
    v = val.astype(np.int64) if val.dtype.kind in "fb" else val
    u = v if v.dtype == np.uint64 else v.astype(np.int64).view(np.uint64)
    return u & np.uint64((1 << (8 * w)) - 1) if w < 8 else u.copy()


def _is_float(ty: str) -> bool:
    return ty in ("f16", "bf16", "f32", "f64")


def _ftype(ty: str):
    return np.float64 if ty == "f64" else np.float32


# ---------------------------------------------------------------------------- rule tables
BINARY = {
    "add": np.add, "sub": np.subtract, "and": np.bitwise_and, "or": np.bitwise_or,
    "xor": np.bitwise_xor, "min": np.fmin, "max": np.fmax,
}  # fmt: skip
UNARY_FLOAT = {
    "ex2": np.exp2, "lg2": np.log2, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "rcp": lambda x: 1 / x, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "neg": np.negative, "abs": np.abs,
}  # fmt: skip
COMPARE = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
    "hi": np.greater, "hs": np.greater_equal,
}  # fmt: skip
_UNSIGNED_CMP = {"lo", "ls", "hi", "hs"}


class PtxWarp:
    """One warp's registers, per-lane pcs and counters while it runs a :class:`PtxKernel`."""

    def __init__(self, run, block_idx: tuple, warp: int, shared):
        self.run, self.k = run, run.kernel
        self.block_idx, self.warp, self.shared = block_idx, warp, shared
        self.coords = thread_coords(run.block, warp)
        self.pc = np.zeros(WARP, np.int64)
        self.done = ~self.coords["exists"]
        self.regs: dict = {}
        self.preds: dict = {}
        self.at_barrier = False
        self.stats = WarpStats(block_idx, warp)

    @property
    def finished(self) -> bool:
        return bool(self.done.all())

    # ---- operands
    def special(self, name: str) -> np.ndarray:
        r, c = self.run, self.coords
        axis = name.split(".")[-1]
        i = "xyz".index(axis) if axis in "xyz" else 0
        table = {
            "%tid": lambda: c[axis], "%ntid": lambda: np.full(WARP, r.block[i]),
            "%ctaid": lambda: np.full(WARP, self.block_idx[i]), "%nctaid": lambda: np.full(WARP, r.grid[i]),
            "%laneid": lambda: c["lane"], "%warpid": lambda: np.full(WARP, self.warp),
            "%nwarpid": lambda: np.full(WARP, r.warps_per_block), "%smid": lambda: np.zeros(WARP),
        }  # fmt: skip
        return table[name.split(".")[0]]().astype(np.uint64)

    def bits(self, op) -> np.ndarray:
        kind, t = op.kind, op.text
        if kind == "reg":
            return self.regs.get(t, np.zeros(WARP, np.uint64))
        if kind == "imm":
            return np.full(WARP, int(t, 0) & 0xFFFFFFFFFFFFFFFF, np.uint64)
        if kind == "fimm":
            return np.full(WARP, int(t[2:], 16), np.uint64)
        if kind == "sreg":
            return self.special(t)
        if kind == "sym" and t in self.k.shared:
            return np.full(WARP, self.k.shared[t][0], np.uint64)
        raise NotImplementedError(f"operand {t!r} ({kind})")

    def read(self, op, ty: str) -> np.ndarray:
        if op.kind == "imm" and _is_float(ty):
            return np.full(WARP, float(int(op.text, 0)), _ftype(ty))
        if op.kind == "fimm" and ty == "f32" and op.text[1] in "dD":
            return np.full(WARP, np.uint64(int(op.text[2:], 16))).view(np.float64).astype(np.float32)
        if self.is_pred(op.text):
            return self.preds.get(op.text, np.zeros(WARP, bool))
        return from_bits(self.bits(op), ty)

    def is_pred(self, name: str) -> bool:
        prefix = re.match(r"%[A-Za-z_]+", name)
        return prefix is not None and self.k.regs.get(prefix.group(0), ("",))[0] == "pred"

    def write(self, name: str, value, ty: str, mask) -> None:
        if name == "_":
            return
        if self.is_pred(name):
            old = self.preds.get(name, np.zeros(WARP, bool))
            self.preds[name] = np.where(mask, np.broadcast_to(np.asarray(value, bool), (WARP,)), old)
            return
        old = self.regs.get(name, np.zeros(WARP, np.uint64))
        self.regs[name] = np.where(mask, to_bits(value, ty), old)

    # ---- one step
    def step(self) -> None:
        live = ~self.done
        pc = int(self.pc[live].min())
        ins = self.k.instrs[pc]
        mask = live & (self.pc == pc)
        run = self.run
        self.stats.issued += 1
        self.stats.active_lanes += int(mask.sum())
        run.timeline.append(Issue(run.cycle, self.block_idx, self.warp, pc, _kind(ins), int(mask.sum())))
        if run.cycle < run.trace:
            lanes = "".join("1" if b else "." for b in mask)
            print(f"{run.cycle:5d} blk{self.block_idx[0]} w{self.warp} pc{pc:4d} {lanes} {ins.text}")
        run.cycle += 1
        exec_mask = mask
        if ins.guard is not None:
            g = self.preds.get(ins.guard, np.zeros(WARP, bool))
            exec_mask = mask & (~g if ins.guard_negated else g)
        self.pc[mask] = pc + 1
        handler = HANDLERS.get(ins.op)
        if handler is None:
            raise UnsupportedInstruction(ins, "the simulator does not model this instruction")
        try:
            with np.errstate(all="ignore"):  # inf - inf in masked-off lanes: the GPU does not warn either
                handler(self, ins, exec_mask, mask)
        except UnsupportedInstruction:
            raise
        except (NotImplementedError, KeyError, ValueError, TypeError) as exc:
            raise UnsupportedInstruction(ins, str(exc) or type(exc).__name__) from None


class UnsupportedInstruction(NotImplementedError):
    """An instruction (or a form of one) the simulator does not model; says which and where."""

    def __init__(self, ins: Instr, why: str):
        self.instr = ins
        at = f"PTX line {ins.line}" if ins.line else f"instruction {ins.index}"
        super().__init__(f"unsupported instruction `{ins.opcode}` at {at} (`{ins.text}`): {why}")


def _mods(ins: Instr) -> tuple:
    """Modifiers with PTX 8's scope qualifiers dropped: ``st.shared::cta`` stores to shared memory."""
    return tuple(m.split("::")[0] for m in ins.mods)


def _kind(ins: Instr) -> str:
    if ins.op in ("ld", "st"):
        return "shared" if "shared" in _mods(ins) else "global" if "global" in _mods(ins) else "alu"
    if ins.op in SFU:
        return "sfu"
    if ins.op in CONTROL:
        return "control"
    if ins.op in SYNC or ins.op == "shfl":
        return "sync"
    return "alu"


# ---------------------------------------------------------------------------- instruction handlers
def _binary(w: PtxWarp, ins: Instr, m, _live):
    ty = type_of(ins)
    d, a, b = ins.operands
    if ty in ("f16x2", "bf16x2"):
        half = ty[:-2]
        ra, rb = w.bits(a), w.bits(b)
        lo = BINARY[ins.op](from_bits(ra & np.uint64(0xFFFF), half), from_bits(rb & np.uint64(0xFFFF), half))
        hi = BINARY[ins.op](from_bits(ra >> np.uint64(16), half), from_bits(rb >> np.uint64(16), half))
        w.write(d.text, to_bits(lo, half) | (to_bits(hi, half) << np.uint64(16)), "b64", m)
        return
    x, y = w.read(a, ty), w.read(b, ty)
    if ins.op in ("min", "max") and not _is_float(ty):
        fn = np.minimum if ins.op == "min" else np.maximum
    else:
        fn = BINARY[ins.op]
    w.write(d.text, fn(x, y), ty, m)


def _mul(w, ins, m, _live, mad=False):
    ty = type_of(ins)
    d, a, b = ins.operands[:3]
    if _is_float(ty):
        r = w.read(a, ty) * w.read(b, ty)
        if mad:
            r = r + w.read(ins.operands[3], ty)
        w.write(d.text, r, ty, m)
        return
    signed = ty[0] == "s"
    width = WIDTH[ty]
    wide_t = ("s" if signed else "u") + str(8 * width * 2) if width < 8 else ty
    x = w.read(a, ty).astype(np.int64 if signed else np.uint64)
    y = w.read(b, ty).astype(np.int64 if signed else np.uint64)
    if "hi" in _mods(ins):
        if width == 8:
            raise NotImplementedError("mul.hi on 64-bit operands")
        r = (x * y) >> (8 * width)
        out_t = ty
    elif "wide" in _mods(ins):
        r, out_t = x * y, wide_t
    else:
        r, out_t = x * y, ty
    if mad:
        r = r + w.read(ins.operands[3], out_t).astype(r.dtype)
    w.write(d.text, r, out_t, m)


def _fma(w, ins, m, _live):
    ty = type_of(ins)
    d, a, b, c = ins.operands
    x, y, z = (w.read(o, ty).astype(np.float64) for o in (a, b, c))
    w.write(d.text, x * y + z, ty, m)


def _div(w, ins, m, _live):
    ty = type_of(ins)
    d, a, b = ins.operands
    x, y = w.read(a, ty), w.read(b, ty)
    if _is_float(ty):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (x.astype(np.float64) / y.astype(np.float64)).astype(_ftype(ty))
    else:
        y1 = np.where(y == 0, 1, y)
        r = np.where(
            y == 0,
            -1,
            (np.abs(x.astype(np.int64)) // np.abs(y1.astype(np.int64)))
            * np.sign(x.astype(np.int64))
            * np.sign(y1.astype(np.int64))
            if ty[0] == "s"
            else x // y1,
        )
    w.write(d.text, r, ty, m)


def _rem(w, ins, m, _live):
    ty = type_of(ins)
    d, a, b = ins.operands
    x, y = w.read(a, ty).astype(np.int64), w.read(b, ty).astype(np.int64)
    y1 = np.where(y == 0, 1, y)
    w.write(d.text, np.fmod(x, y1), ty, m)


def _unary(w, ins, m, _live):
    ty = type_of(ins)
    d, a = ins.operands
    x = w.read(a, ty)
    if _is_float(ty):
        with np.errstate(all="ignore"):
            r = UNARY_FLOAT[ins.op](x.astype(np.float64)).astype(_ftype(ty))
    elif ins.op == "not":
        r = ~x
    elif ins.op == "neg":
        r = -x.astype(np.int64)
    elif ins.op == "abs":
        r = np.abs(x.astype(np.int64))
    else:
        raise NotImplementedError(f"{ins.op} on integers")
    if ty == "pred":
        r = ~x
    w.write(d.text, r, ty, m)


def _shift(w, ins, m, _live):
    ty = type_of(ins)
    d, a, b = ins.operands
    bits = 8 * WIDTH[ty]
    amount = np.minimum(w.read(b, "u32").astype(np.int64), bits)
    x = w.read(a, ty)
    if ins.op == "shl":
        r = np.where(amount >= bits, 0, x.astype(np.uint64) << np.minimum(amount, bits - 1).astype(np.uint64))
        r = r & np.uint64((1 << bits) - 1) if bits < 64 else r
        w.write(d.text, r.astype(np.uint64), "b64" if bits == 64 else "u" + str(bits), m)
    elif ty[0] == "s":
        w.write(d.text, x.astype(np.int64) >> np.minimum(amount, bits - 1), ty, m)
    else:
        r = np.where(amount >= bits, 0, x.astype(np.uint64) >> np.minimum(amount, bits - 1).astype(np.uint64))
        w.write(d.text, r.astype(np.uint64), "b64" if bits == 64 else "u" + str(bits), m)


def _setp(w, ins, m, _live):
    cmp, ty = ins.mods[0], type_of(ins)
    dst, a, b = ins.operands[:3]
    x, y = w.read(a, ty), w.read(b, ty)
    if cmp in _UNSIGNED_CMP:
        x, y = w.read(a, "u" + ty[1:]), w.read(b, "u" + ty[1:])
    base = cmp.rstrip("u") if cmp.endswith("u") and cmp not in ("neu",) and len(cmp) == 3 else cmp
    if cmp == "neu":
        r = ~np.equal(x, y)
    elif cmp in ("num", "nan"):
        r = ~(np.isnan(x) | np.isnan(y)) if cmp == "num" else np.isnan(x) | np.isnan(y)
    elif cmp in ("equ", "ltu", "leu", "gtu", "geu"):
        r = COMPARE[base](x, y) | np.isnan(x) | np.isnan(y)
    else:
        r = COMPARE[cmp](x, y)
    if len(ins.mods) > 2 and ins.mods[1] in ("and", "or", "xor"):
        c = w.read(ins.operands[3], "pred")
        r = {"and": r & c, "or": r | c, "xor": r ^ c}[ins.mods[1]]
    names = dst.text.split("|")
    w.write(names[0], r, "pred", m)
    if len(names) > 1:
        w.write(names[1], ~r, "pred", m)


def _selp(w, ins, m, _live):
    ty = type_of(ins)
    d, a, b, c = ins.operands
    w.write(d.text, np.where(w.read(c, "pred"), w.read(a, ty), w.read(b, ty)), ty, m)


def _mov(w, ins, m, _live):
    ty = type_of(ins)
    d, a = ins.operands
    if d.kind == "vec":  # unpack: mov.b32 {%rs1, %rs2}, %r
        src, part = w.bits(a), WIDTH[ty] * 8 // len(d.parts)
        for k, name in enumerate(d.parts):
            w.write(name, (src >> np.uint64(k * part)) & np.uint64((1 << part) - 1), "b64", m)
        return
    if a.kind == "vec":  # pack
        part, acc = WIDTH[ty] * 8 // len(a.parts), np.zeros(WARP, np.uint64)
        for k, name in enumerate(a.parts):
            acc |= (w.regs.get(name, np.zeros(WARP, np.uint64)) & np.uint64((1 << part) - 1)) << np.uint64(k * part)
        w.write(d.text, acc, "b64", m)
        return
    if ty == "pred" or w.is_pred(d.text):
        w.write(d.text, w.read(a, "pred") if w.is_pred(a.text) else w.bits(a) != 0, "pred", m)
        return
    w.write(d.text, w.bits(a), "b64", m)


_ROUND_INT = {"rzi": np.trunc, "rni": np.rint, "rmi": np.floor, "rpi": np.ceil}


def _cvt(w, ins, m, _live):
    types = [t for t in _mods(ins) if t in WIDTH]
    if len(types) != 2 or any(t.endswith("x2") for t in ins.mods):  # fp8 pairs (e4m3x2), f16x2 packs
        raise NotImplementedError(f"cvt {'.'.join(ins.mods)} (packed or fp8 types)")
    dt, st = types[0], types[1]
    d, a = ins.operands
    x = w.read(a, st)
    if _is_float(dt):
        r = x.astype(np.float64)
    elif _is_float(st):
        rnd = next((_ROUND_INT[r] for r in _mods(ins) if r in _ROUND_INT), np.trunc)
        info = np.iinfo(_NP_INT[dt])
        r = np.clip(np.nan_to_num(rnd(x.astype(np.float64))), info.min, info.max).astype(_NP_INT[dt])
    else:
        r = x.astype(_NP_INT[dt]) if WIDTH[dt] >= WIDTH[st] else x
    w.write(d.text, r, dt, m)


def _bfe(w, ins, m, _live):
    ty = type_of(ins)
    d, a, b, c = ins.operands
    x = w.read(a, "u" + ty[1:]).astype(np.uint64)
    pos = w.read(b, "u32").astype(np.uint64) & np.uint64(0xFF)
    ln = w.read(c, "u32").astype(np.uint64) & np.uint64(0xFF)
    field = (x >> pos) & ((np.uint64(1) << ln) - np.uint64(1))
    if ty[0] == "s":
        sign = (field >> np.maximum(ln, np.uint64(1)) - np.uint64(1)) & np.uint64(1)
        field = np.where((sign == 1) & (ln > 0), field | ~((np.uint64(1) << ln) - np.uint64(1)), field)
        w.write(d.text, field.view(np.int64), ty, m)
    else:
        w.write(d.text, field, ty, m)


def _address(w: PtxWarp, op) -> np.ndarray:
    base, offset = op.parts
    if base in w.k.shared:
        return np.full(WARP, w.k.shared[base][0] + offset, np.int64)
    return w.bits(parse_reg(base)).astype(np.int64) + offset


def parse_reg(name: str):
    from course_lib.gpu.ptx import parse_operand

    return parse_operand(name)


def _ld(w, ins, m, live):
    space = next((s for s in ("param", "global", "shared", "local", "const") if s in _mods(ins)), "global")
    ty = type_of(ins)
    dst, src = ins.operands[:2]  # a 3rd operand is an L2 cache policy (ld.global.L2::cache_hint)
    if space == "param":
        value = w.run.params[src.parts[0]]
        w.write(dst.text, np.full(WARP, value & 0xFFFFFFFFFFFFFFFF, np.uint64), "b64", m)
        return
    names = dst.parts if dst.kind == "vec" else (dst.text,)
    width = WIDTH[ty]
    addr = _address(w, src)
    raw = _access(w, ins, space, "load", addr, width * len(names), m)
    for k, name in enumerate(names):
        chunk = raw[:, k * width : (k + 1) * width].copy().view(_U[width]).reshape(WARP)
        w.write(name, chunk.astype(np.uint64), "b64", m)


def _st(w, ins, m, live):
    space = next((s for s in ("global", "shared", "local") if s in _mods(ins)), "global")
    ty = type_of(ins)
    dst, src = ins.operands[:2]
    names = src.parts if src.kind == "vec" else (src.text,)
    width = WIDTH[ty]
    cols = []
    for name in names:
        b = w.bits(parse_reg(name)).astype(_U[width])
        cols.append(b.view(np.uint8).reshape(WARP, width))
    data = np.concatenate(cols, axis=1)
    addr = _address(w, dst)
    _access(w, ins, space, "store", addr, width * len(names), m, data)


def _access(w: PtxWarp, ins, space, kind, addr, nbytes, m, data=None):
    run, st = w.run, w.stats
    target = w.shared if space == "shared" else run.gmem
    ev = MemEvent(run.cycle - 1, w.block_idx, w.warp, ins.index, space, kind, nbytes, addr, m.copy(), text=ins.text)
    if m.any():
        if space == "shared":
            ev.wavefronts = mem.bank_wavefronts(addr, nbytes, m)
            st.shared_requests += 1
            st.shared_wavefronts += ev.wavefronts
        else:
            ev.sectors = mem.sectors_touched(addr, nbytes, m)
            ev.lines = mem.lines_touched(addr, nbytes, m)
            st.global_requests += 1
            st.global_sectors += ev.sectors
            st.global_lines += ev.lines
        run.events.append(ev)
    if kind == "load":
        return mem.gather(target, addr, nbytes, m, f"{ins.text}")
    mem.scatter(target, addr, data, m, f"{ins.text}")
    return None


def _shfl(w, ins, m, _live):
    mode = ins.mods[1] if ins.mods[0] == "sync" else ins.mods[0]
    dst, a, b, c = ins.operands[:4]
    lane = np.arange(WARP)
    bval = w.read(b, "u32").astype(np.int64)
    cval = w.read(c, "u32").astype(np.int64)
    seg = (cval >> 8) & 0x1F
    max_lane = (lane & seg) | (cval & 0x1F & ~seg)
    min_lane = lane & seg
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j, ok = lane + bval, None
    elif mode == "bfly":
        j, ok = lane ^ bval, None
    elif mode == "idx":
        j, ok = min_lane | (bval & 0x1F & ~seg), None
    else:
        raise NotImplementedError(f"shfl mode {mode}")
    if ok is None:
        ok = j <= max_lane
    j = np.where(ok, j, lane)
    src = w.bits(a)
    names = dst.text.split("|")
    w.write(names[0], src[j], "b64", m)
    if len(names) > 1:
        w.write(names[1], ok, "pred", m)


def _bra(w, ins, m, live):
    target = w.k.labels[ins.operands[0].text]
    w.pc[m] = target


def _ret(w, ins, m, live):
    w.done |= m


def _bar(w, ins, m, live):
    if "warp" in _mods(ins):
        return
    w.stats.barriers += 1
    w.at_barrier = True


def _nop(w, ins, m, live):
    return


#: ``atom.op`` / ``red.op``: new value from (old, operand[, operand]).
ATOMIC = {
    "add": lambda old, b, c: old + b, "min": lambda old, b, c: np.minimum(old, b),
    "max": lambda old, b, c: np.maximum(old, b), "exch": lambda old, b, c: b,
    "and": lambda old, b, c: old & b, "or": lambda old, b, c: old | b, "xor": lambda old, b, c: old ^ b,
    "cas": lambda old, b, c: c if old == b else old,
}  # fmt: skip


def _atom(w, ins, m, live):
    """``atom.space.op.type d, [a], b[, c]`` (``red`` has no ``d``): read-modify-write, lane by lane."""
    space = "shared" if "shared" in _mods(ins) else "global"
    op = next((o for o in _mods(ins) if o in ATOMIC), None)
    if op is None:
        raise NotImplementedError(f"atomic operation {'.'.join(ins.mods)}")
    ty = type_of(ins)
    if ty in ("f16x2", "bf16x2") or "v2" in _mods(ins) or "v4" in _mods(ins):
        raise NotImplementedError(f"vector atomics ({ty})")
    ops = ins.operands if ins.op == "atom" else (None, *ins.operands)
    dst, addr_op, b_op = ops[0], ops[1], ops[2]
    c_op = ops[3] if len(ops) > 3 else None
    width = WIDTH[ty]
    addr = _address(w, addr_op)
    b = w.read(b_op, ty)
    c = w.read(c_op, ty) if c_op is not None else b
    old_all = np.zeros(WARP, np.uint64)
    target = w.shared if space == "shared" else w.run.gmem
    _access(w, ins, space, "load", addr, width, m)  # counted once as one request
    for lane in np.flatnonzero(m):
        one = np.zeros(WARP, bool)
        one[lane] = True
        raw = mem.gather(target, addr, width, one, ins.text)[lane].copy().view(_U[width])
        old = from_bits(raw.astype(np.uint64), ty)[0]
        new = ATOMIC[op](old, b[lane], c[lane])
        bits = to_bits(np.array(new), ty)[0]
        data = np.zeros((WARP, width), np.uint8)
        data[lane] = np.array([bits], np.uint64).astype(_U[width]).view(np.uint8)
        mem.scatter(target, addr, data, one, ins.text)
        old_all[lane] = raw.astype(np.uint64)[0]
    if dst is not None:
        w.write(dst.text, old_all, "b64", m)


HANDLERS = {
    **{op: _binary for op in BINARY},
    "mul": _mul, "mad": lambda w, i, m, live: _mul(w, i, m, live, mad=True), "fma": _fma,
    "div": _div, "rem": _rem, **{op: _unary for op in UNARY_FLOAT}, "not": _unary,
    "shl": _shift, "shr": _shift, "setp": _setp, "selp": _selp, "mov": _mov, "cvt": _cvt,
    "bfe": _bfe, "ld": _ld, "st": _st, "shfl": _shfl, "bra": _bra, "ret": _ret, "exit": _ret,
    "bar": _bar, "barrier": _bar, "membar": _nop, "fence": _nop, "atom": _atom, "red": _atom,
}  # fmt: skip


# ---------------------------------------------------------------------------- the run
class _Run:
    def __init__(self, kernel: PtxKernel, grid, block, params, gmem, shared_bytes, trace=0):
        self.kernel, self.grid, self.block, self.trace = kernel, grid, block, trace
        self.params, self.gmem, self.shared_bytes = params, gmem, shared_bytes
        self.warps_per_block = -(-block[0] * block[1] * block[2] // WARP)
        self.cycle = 0
        self.events: list = []
        self.timeline: list = []


def _to_numpy(a):
    if isinstance(a, np.ndarray):
        return a, None
    import torch

    if isinstance(a, torch.Tensor):
        t = a.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().copy(), torch.bfloat16
        return t.numpy().copy(), t.dtype
    raise TypeError(f"unsupported argument {type(a).__name__}")


def run_ptx(
    ptx_text: str, kernel_name: str | None, grid, block, args, *, shared_bytes: int = 49152, trace: int | None = None
) -> RunResult:
    """Run one ``.entry`` of a PTX module on the SIMT simulator.

    ``args`` follow the kernel's parameters in order: arrays (numpy or torch) for pointer
    parameters, Python numbers for scalars. Parameters past the end of ``args`` (Triton appends
    scratch pointers) get 0. Returns a :class:`RunResult` whose ``outputs[i]`` is argument i
    after the run (same kind as given), plus per-warp statistics, memory events and timeline.

    ``trace=N`` (or the environment variable ``COURSE_GPU_TRACE=N``) prints the first N issued
    instructions: cycle, block, warp, pc, the 32-lane active mask and the instruction.
    """
    if trace is None:
        trace = int(os.environ.get("COURSE_GPU_TRACE", "0") or 0)
    kernel = parse_ptx(ptx_text, kernel_name)
    grid, block = dim3(grid), dim3(block)
    arrays, kinds, params = {}, [], {}
    for i, a in enumerate(args):
        if isinstance(a, (int, float, np.integer, np.floating)):
            kinds.append(None)
        else:
            arr, tdtype = _to_numpy(a)
            arrays[f"arg{i}"] = arr
            kinds.append(("torch", tdtype) if tdtype is not None else ("numpy", None))
    gmem = mem.GlobalMemory(arrays)
    addr = {b.name: b.address for b in gmem.buffers}
    for i, (pname, pty) in enumerate(kernel.params):
        if i >= len(args):
            params[pname] = 0
        elif kinds[i] is None:
            v = args[i]
            params[pname] = (
                int(to_bits(np.array(v), "f32" if isinstance(v, float) and pty == "f32" else pty)[0])
                if isinstance(v, float)
                else int(v)
            )
        else:
            params[pname] = addr[f"arg{i}"]
    run = _Run(kernel, grid, block, params, gmem, shared_bytes, trace)
    stats = []
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                shared = mem.SharedMemory(shared_bytes)
                warps = [PtxWarp(run, (bx, by, bz), wi, shared) for wi in range(run.warps_per_block)]
                schedule_block(warps)
                stats += [w.stats for w in warps]
    outputs = []
    for i, kind in enumerate(kinds):
        if kind is None:
            outputs.append(None)
            continue
        out = gmem.result(f"arg{i}")
        if kind[0] == "torch":
            import torch

            t = torch.from_numpy(out)
            outputs.append(t.view(torch.bfloat16) if kind[1] == torch.bfloat16 else t)
        else:
            outputs.append(out)
    return RunResult(kernel.name, grid, block, outputs, stats, run.events, run.timeline)
