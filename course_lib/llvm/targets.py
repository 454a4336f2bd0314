"""One LLVM IR function, three back ends: x86-64, NVPTX (CUDA) and AMDGPU (ROCm).

Teaches: ``llvm/lib/Target/X86``, ``llvm/lib/Target/NVPTX`` (what Triton and ``nvcc`` use to
make PTX) and ``llvm/lib/Target/AMDGPU`` (what Triton and ``hipcc`` use for ``.hsaco``).
Position: LLVM IR -> assembly text or an object file (and its disassembly).

A *target triple* names the back end (``x86_64-unknown-linux-gnu``, ``nvptx64-nvidia-cuda``,
``amdgcn-amd-amdhsa``); the *CPU* picks the generation (``x86-64-v3`` = AVX2,
``x86-64-v4`` = AVX-512, ``sm_90`` = Hopper, ``gfx942`` = MI300); the *data layout* tells the
optimiser sizes and alignments, so a module is re-targeted before it is optimised.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import subprocess

import llvmlite.binding as llvm
import llvmlite.ir as ir

from course_lib import env
from course_lib.llvm import passes

TRIPLES = {"x86_64": "x86_64-unknown-linux-gnu", "nvptx64": "nvptx64-nvidia-cuda", "amdgcn": "amdgcn-amd-amdhsa"}
DEFAULT_CPU = {"x86_64": "x86-64", "nvptx64": "sm_80", "amdgcn": "gfx942"}
# x86 levels: the psABI micro-architecture levels, so output does not depend on this machine's CPU.
X86_LEVELS = {"baseline": "x86-64", "avx2": "x86-64-v3", "avx512": "x86-64-v4"}
# LLVM prefers 256-bit vectors even on AVX-512 CPUs (clock throttling); ask for zmm explicitly.
X86_FEATURES = {"x86-64-v4": "-prefer-256-bit"}
PTX_FEATURES = {"sm_80": "+ptx70", "sm_90": "+ptx80"}


def target_machine(target: str, cpu: str | None = None, features: str = "", opt: int = 3):
    """A TargetMachine for ``target`` in ``TRIPLES`` (``cpu`` defaults per :data:`DEFAULT_CPU`)."""
    passes.init()
    if target not in TRIPLES:
        raise ValueError(f"target must be one of {sorted(TRIPLES)}, got {target!r}")
    cpu = cpu or DEFAULT_CPU[target]
    if not features:
        features = PTX_FEATURES.get(cpu, "") if target == "nvptx64" else X86_FEATURES.get(cpu, "")
    t = llvm.Target.from_triple(TRIPLES[target])
    return t.create_target_machine(cpu=cpu, features=features, opt=opt, reloc="pic", codemodel="small")


def retarget(llvm_ir, target: str, tm=None) -> llvm.ModuleRef:
    """Parse ``llvm_ir`` and set its triple and data layout for ``target``."""
    mod = passes.parse(llvm_ir)
    tm = tm or target_machine(target)
    if target == "amdgcn" and any(
        i.opcode == "alloca" for f in mod.functions for b in f.blocks for i in b.instructions
    ):
        # AMDGPU keeps the stack in address space 5; promote clang-style slots to SSA first
        mod = passes.parse(passes.run_passes(mod, ["mem2reg"]).final)
    mod.triple = TRIPLES[target]
    mod.data_layout = str(tm.target_data)
    return mod


def emit_asm(llvm_ir, target: str = "x86_64", cpu: str | None = None, level: int = 3, optimize: bool = True) -> str:
    """Assembly text for ``llvm_ir`` (text, ``llvmlite.ir.Module`` or ModuleRef) on ``target``.

    ``target``: ``"x86_64"`` | ``"nvptx64"`` | ``"amdgcn"``; ``cpu`` e.g. ``"x86-64-v4"``,
    ``"sm_90"``, ``"gfx942"``. The module is optimised at ``O<level>`` for that target first
    (as ``clang -O3 --target=...`` would), unless ``optimize=False``.
    """
    tm = target_machine(target, cpu, opt=level)
    mod = retarget(llvm_ir, target, tm)
    if optimize and level > 0:
        mod = passes.optimize(mod, level, tm=tm)
    return _tidy_asm(tm.emit_assembly(mod))


def emit_object(llvm_ir, target: str = "x86_64", cpu: str | None = None, level: int = 3) -> bytes:
    """An ELF object file (bytes) for ``llvm_ir``, optimised at ``O<level>``."""
    tm = target_machine(target, cpu, opt=level)
    mod = passes.optimize(retarget(llvm_ir, target, tm), level, tm=tm)
    return tm.emit_object(mod)


def _tidy_asm(text: str) -> str:
    # drop the line naming the in-memory file: '<string>' is noise
    return "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith(".file")) + "\n"


def disassemble(obj: bytes) -> str:
    """``llvm-objdump -d`` (or ``objdump -d``) of an object file; a sentence if neither exists."""
    tool = shutil.which("llvm-objdump") or shutil.which("objdump")
    if tool is None:
        return "(no objdump found: install binutils or llvm to see the disassembly)\n"
    key = hashlib.sha256(obj).hexdigest()[:16]
    path = env.cache_dir() / f"llvm_{key}.o"
    path.write_bytes(obj)
    args = [tool, "-d", "--no-show-raw-insn", str(path)]
    out = subprocess.run(args, capture_output=True, text=True, check=False).stdout
    # keep from the first section header on: the file path in the banner varies
    lines = out.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Disassembly")), 0)
    return "\n".join(lines[start:]) + "\n"


# ----------------------------------------------------------------------------- vector instructions

_VEC_REG = re.compile(r"%([xyz])mm\d+")


def vector_width(line: str) -> int:
    """The widest SIMD register in one x86 instruction: 128 (xmm), 256 (ymm), 512 (zmm), or 0."""
    widths = {"x": 128, "y": 256, "z": 512}
    return max((widths[m] for m in _VEC_REG.findall(line)), default=0)


def vector_instructions(asm: str) -> list[str]:
    """The packed SIMD instructions in x86 assembly (``vaddpd``, ``vpaddq``... on xmm/ymm/zmm).

    Scalar SSE (``addsd``, ``movss``) uses xmm registers too, so a line counts only if its
    mnemonic is packed: ends in ``ps``/``pd`` or starts with ``vp``/``p``.
    """
    out = []
    for line in asm.splitlines():
        parts = line.split()
        if not parts or not _VEC_REG.search(line):
            continue
        op = parts[0]
        if op.endswith(("ps", "pd")) or op.startswith(
            ("vp", "p", "movdq", "vmovdq", "vbroadcast", "vextract", "vinsert")
        ):
            out.append(line.strip())
    return out


def mark_vector_instructions(asm: str) -> str:
    """The assembly with each packed SIMD instruction tagged ``# <== SIMD <bits>-bit``."""
    packed = set(vector_instructions(asm))
    out = []
    for line in asm.splitlines():
        if line.strip() in packed:
            line = f"{line}    # <== SIMD {vector_width(line)}-bit"
        out.append(line)
    return "\n".join(out) + "\n"


def x86_levels(llvm_ir) -> dict[str, str]:
    """``{"baseline": asm, "avx2": asm, "avx512": asm}`` for the same IR."""
    return {name: emit_asm(llvm_ir, "x86_64", cpu) for name, cpu in X86_LEVELS.items()}


def vector_summary(llvm_ir) -> list[tuple[str, int, int]]:
    """``[(level, packed instructions, widest register bits), ...]`` per x86 level."""
    rows = []
    for name, asm in x86_levels(llvm_ir).items():
        vec = vector_instructions(asm)
        rows.append((name, len(vec), max((vector_width(v) for v in vec), default=0)))
    return rows


# ----------------------------------------------------------------------------- GPU kernels


def _sreg(module: ir.Module, name: str) -> ir.Function:
    return ir.Function(module, ir.FunctionType(ir.IntType(32), []), name)


def saxpy_kernel(target: str = "nvptx64") -> ir.Module:
    """``y[i] = a * x[i] + y[i]`` for ``i = blockIdx.x * blockDim.x + threadIdx.x < n``.

    The same kernel for NVPTX (``llvm.nvvm.read.ptx.sreg.*``, calling convention
    ``ptx_kernel``) and AMDGPU (``llvm.amdgcn.workitem.id.x`` / ``workgroup.id.x``,
    ``amdgpu_kernel``, global pointers in address space 1). AMDGPU's block size lives in the
    dispatch packet; here it is the constant 256 to keep the IR small.
    """
    m = ir.Module(name="saxpy")
    m.triple = TRIPLES[target]
    f32, i32 = ir.FloatType(), ir.IntType(32)
    space = 1  # global memory on both targets
    ptr = ir.PointerType(f32, addrspace=space)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ptr, ptr, f32, i32]), "saxpy")
    fn.calling_convention = "ptx_kernel" if target == "nvptx64" else "amdgpu_kernel"
    x, y, a, n = fn.args
    for arg, name in zip(fn.args, "xyan"):
        arg.name = name
    entry, body, done = fn.append_basic_block("entry"), fn.append_basic_block("body"), fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    if target == "nvptx64":
        tid = b.call(_sreg(m, "llvm.nvvm.read.ptx.sreg.tid.x"), [], "tid")
        bid = b.call(_sreg(m, "llvm.nvvm.read.ptx.sreg.ctaid.x"), [], "bid")
        bdim = b.call(_sreg(m, "llvm.nvvm.read.ptx.sreg.ntid.x"), [], "bdim")
    else:
        tid = b.call(_sreg(m, "llvm.amdgcn.workitem.id.x"), [], "tid")
        bid = b.call(_sreg(m, "llvm.amdgcn.workgroup.id.x"), [], "bid")
        bdim = ir.Constant(i32, 256)
    i = b.add(b.mul(bid, bdim, "base"), tid, "i")
    b.cbranch(b.icmp_signed("<", i, n, "inb"), body, done)
    b.position_at_end(body)
    px, py = b.gep(x, [i], name="px"), b.gep(y, [i], name="py")
    r = b.fadd(b.fmul(a, b.load(px, "xi"), "ax"), b.load(py, "yi"), "r")
    b.store(r, py)
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return m


def ptx(llvm_ir=None, sm: str = "sm_80") -> str:
    """PTX for ``llvm_ir`` (default: :func:`saxpy_kernel`) for ``sm_80`` or ``sm_90``."""
    return emit_asm(llvm_ir if llvm_ir is not None else saxpy_kernel("nvptx64"), "nvptx64", sm)


def amdgcn(llvm_ir=None, gfx: str = "gfx942") -> str:
    """AMDGPU assembly for ``llvm_ir`` (default: :func:`saxpy_kernel`), for ``gfx942`` (MI300)."""
    return emit_asm(llvm_ir if llvm_ir is not None else saxpy_kernel("amdgcn"), "amdgcn", gfx)


def ptx_special_registers(ptx_text: str) -> list[str]:
    """The PTX special registers read (``%tid.x``, ``%ctaid.x``, ``%ntid.x``...), sorted."""
    return sorted(set(re.findall(r"%(?:tid|ntid|ctaid|nctaid)\.[xyz]", ptx_text)))


# ----------------------------------------------------------------------------- AMDGPU code objects
@dataclasses.dataclass
class CodeObject:
    """An AMDGPU code object (``.hsaco``): the ELF file ROCm's loader maps, and the kernel
    metadata note (``NT_AMDGPU_METADATA``) the runtime reads to lay out the arguments."""

    path: str
    size: int
    metadata: dict  # the note's YAML as llvm-readelf prints it: amdhsa.kernels, amdhsa.target...
    commands: list[str]

    def kernel(self, name: str) -> dict:
        return next(k for k in self.metadata["amdhsa.kernels"] if k[".name"] == name)


def _tool(name: str) -> str | None:
    """``llc`` of the newest installed LLVM, and ``ld.lld`` / ``llvm-readelf`` of that same version."""
    from course_lib.llvm import tools

    llc = tools.find("llc")
    if name == "llc":
        return llc.path if llc else None
    major = llc.major if llc else None
    for candidate in ([f"{name}-{major}", f"/usr/lib/llvm-{major}/bin/{name}"] if major else []) + [name]:
        path = shutil.which(candidate)
        if path:
            return path
    return None


def hsaco_missing() -> str | None:
    """None when llc, ld.lld and llvm-readelf are installed, else the sentence saying what is missing."""
    lacking = [n for n in ("llc", "ld.lld", "llvm-readelf") if _tool(n) is None]
    if not lacking:
        return None
    return (
        f"{', '.join(lacking)} not installed, so no .hsaco is linked here (Debian: "
        "`sudo apt-get install llvm-19 lld-19`); the AMDGPU assembly above is still real."
    )


def hsaco(llvm_ir=None, gfx: str = "gfx942") -> CodeObject:
    """Compile (``llc -filetype=obj``), link (``ld.lld -shared``, as Triton's AMD backend does in its
    ``hsaco`` stage) and read back the metadata note (``llvm-readelf --notes``) of a kernel."""
    import yaml

    why = hsaco_missing()
    if why:
        raise RuntimeError(why)
    text = str(llvm_ir if llvm_ir is not None else saxpy_kernel("amdgcn"))
    key = hashlib.sha256((text + gfx).encode()).hexdigest()[:16]
    folder = env.cache_dir() / "hsaco"
    folder.mkdir(parents=True, exist_ok=True)
    src, obj, out = (folder / f"{key}.{ext}" for ext in ("ll", "o", "hsaco"))
    src.write_text(text)
    commands = [
        [_tool("llc"), "-mtriple=amdgcn-amd-amdhsa", f"-mcpu={gfx}", "-O3", "-filetype=obj", str(src), "-o", str(obj)],
        [_tool("ld.lld"), "-shared", str(obj), "-o", str(out)],
    ]
    for cmd in commands:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[:1000]}")
    notes = subprocess.run([_tool("llvm-readelf"), "--notes", str(out)], capture_output=True, text=True, timeout=60)
    # the note prints as "AMDGPU Metadata:", an indented "---", the YAML document, then "..."
    note = notes.stdout.split("AMDGPU Metadata:", 1)[-1] if "AMDGPU Metadata:" in notes.stdout else ""
    block = note.split("---\n", 1)[-1].split("\n...", 1)[0] if "---\n" in note else ""
    if not block:
        raise RuntimeError("llvm-readelf printed no AMDGPU metadata note for the code object")
    metadata = yaml.safe_load(block.replace("!str ", ""))  # !str: a YAML tag PyYAML does not know
    shown = [
        " ".join(["llc" if k == 0 else "ld.lld", *c[1:]]).replace(str(folder) + "/", "") for k, c in enumerate(commands)
    ]
    return CodeObject(str(out), out.stat().st_size, metadata, shown)
