"""Triton's compiler pipeline, run with no GPU: Python -> TTIR -> TTGIR -> LLVM IR -> PTX -> SASS.

Teaches: ``python/triton/compiler/compiler.py`` (``triton.compile`` walks the stages a backend
lists), ``third_party/nvidia/backend/compiler.py`` (``make_ttir``, ``make_ttgir``,
``make_llir``, ``make_ptx``, ``make_cubin``; the last one calls ``ptxas``) and
``third_party/amd/backend/compiler.py`` (``make_amdgcn``, ``make_hsaco``).

None of it needs a GPU: the compiler only needs a *target* (``GPUTarget("cuda", 90, 32)`` is an
H100/H200). The cubin that ``ptxas`` writes is disassembled to SASS with the ``cuobjdump`` /
``nvdisasm`` Triton ships in ``triton/backends/nvidia/bin``; register counts come from
``cuobjdump -res-usage``. Every MLIR pass can print the module before it runs
(``MLIR_ENABLE_DUMP=1``, read by ``triton/knobs.py``); we split that stream into one snapshot per
pass.

Compiles cost a second or more, so results are cached in memory and on disk under
``.cache/course_lib/triton/``, keyed by a hash of the kernel source, signature, constants,
target, options and the Triton version.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import hashlib
import inspect
import json
import os
import re
import subprocess
import tempfile

from course_lib import compat, env

#: Course target name -> (backend, arch, warp size) for ``triton.backends.compiler.GPUTarget``.
TARGETS = {
    "sm_80": ("cuda", 80, 32),  # A100
    "sm_90": ("cuda", 90, 32),  # H100 / H200
    "sm_100": ("cuda", 100, 32),  # B200
    "gfx942": ("hip", "gfx942", 64),  # MI300X
}

#: The stages kept for each backend, in pipeline order. ``llvm_dialect`` is the MLIR module in
#: the ``llvm`` dialect just before MLIR translates it to LLVM IR (``llir``); Triton does not keep
#: it in ``compiled.asm``, so it is read from the pass dumps (``MLIR_ENABLE_DUMP``).
NVIDIA_STAGES = ("ttir", "ttgir", "llvm_dialect", "llir", "ptx", "sass")
AMD_STAGES = ("ttir", "ttgir", "llvm_dialect", "llir", "amdgcn")
_CACHE_VERSION = 2  # bump when a compile result gains a field (2: llvm_dialect)

_MEMORY: dict[str, Stages] = {}


@dataclasses.dataclass
class PassDump:
    """The MLIR module just *before* pass ``name`` ran; ``stage`` is ttir, ttgir or llir (LLVM dialect)."""

    index: int
    name: str  # the C++ pass class, e.g. TritonGPUCoalesce
    flag: str  # its command-line name, e.g. tritongpu-coalesce
    stage: str
    ir: str


@dataclasses.dataclass
class Stages(collections.abc.Mapping):
    """Every stage of one compile. Indexing gives readable text (``s["ttgir"]``) without debug info.

    ``raw`` keeps the text with location info (``loc(...)``, ``.loc``, SASS line comments) that
    :func:`course_lib.triton.sourcemap.line_map` reads. ``metadata`` holds ``num_warps``,
    ``num_stages``, ``shared`` (bytes of shared memory), ``registers`` and ``spills``.
    """

    target: str
    stages: dict
    raw: dict
    metadata: dict
    passes: list
    source: str  # the kernel's Python source
    first_line: int  # line number of the ``def`` line in its file

    def __getitem__(self, key: str) -> str:
        return self.stages[key]

    def __iter__(self):
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def pass_names(self) -> list[str]:
        return [p.name for p in self.passes]

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        return d

    @classmethod
    def from_json(cls, d: dict) -> Stages:
        d = dict(d)
        d["passes"] = [PassDump(**p) for p in d["passes"]]
        return cls(**d)


def gpu_target(target: str):
    """``GPUTarget`` for a course target name (``"sm_90"``, ``"gfx942"``...)."""
    from triton.backends.compiler import GPUTarget

    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {sorted(TARGETS)}")
    return GPUTarget(*TARGETS[target])


def kernel_source(kernel) -> tuple[str, int]:
    """The Python source of a ``@triton.jit`` kernel (interpreted or not) and its first line."""
    fn = compat.triton_jit_function(kernel).fn
    lines, start = inspect.getsourcelines(fn)
    return "".join(lines), start


def _cache_key(kernel, signature, constexprs, target, options, passes) -> str:
    import triton

    src, _ = kernel_source(kernel)
    jit = compat.triton_jit_function(kernel)
    with compat.triton_compile_scope(kernel):  # helpers it calls are InterpretedFunctions on a CPU
        deps = getattr(jit, "cache_key", "")  # covers jit functions the kernel calls
    blob = json.dumps([src, str(deps), signature, sorted((constexprs or {}).items(), key=str), target,
                       sorted(options.items()), passes, triton.__version__, _CACHE_VERSION], default=str)  # fmt: skip
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def compile_stages(kernel, signature: dict, constexprs: dict | None = None, target: str = "sm_90", *,
                   num_warps: int = 4, num_stages: int | None = None, passes: bool = False,
                   aligned: bool = False) -> Stages:  # fmt: skip
    """Compile ``kernel`` for ``target`` and return every stage (no GPU needed).

    ``signature`` maps each argument name to Triton's type string (``"*fp32"``, ``"i32"``,
    ``"constexpr"``); ``constexprs`` gives the constexpr values (``{"BLOCK": 1024}``).
    The result is a mapping with keys ``ttir, ttgir, llir, ptx, sass`` (NVIDIA targets) or
    ``ttir, ttgir, llir, amdgcn`` (``"gfx942"``), plus ``.metadata``, ``.raw`` and, with
    ``passes=True``, ``.passes``: the module before every MLIR pass, with the pass name.
    ``aligned=True`` tells the compiler every pointer is 16-byte aligned and every integer
    argument divisible by 16 (``tt.divisibility``), as ``@triton.jit`` specialises a launch with
    such arguments; that enables vector loads and ``cp.async`` pipelining.
    """
    _check_arguments(kernel, signature, constexprs)
    options = {"num_warps": num_warps}
    if aligned:
        options["aligned"] = True  # part of the cache key only
    if num_stages is not None:
        options["num_stages"] = num_stages
    key = _cache_key(kernel, signature, constexprs, target, options, passes)
    if key in _MEMORY:
        return _MEMORY[key]
    path = env.cache_dir() / "triton" / f"{key}.json"
    if path.is_file():
        try:
            result = Stages.from_json(json.loads(path.read_text()))
            _MEMORY[key] = result
            return result
        except (ValueError, TypeError, KeyError):
            pass  # a stale cache entry: compile again
    result = _compile(kernel, signature, constexprs, target, options, passes)
    if path.is_file():  # a stale entry: the artefact cache never overwrites, so drop it first
        path.unlink(missing_ok=True)
    env.artefact("triton", path.name, lambda tmp: tmp.write_text(json.dumps(result.to_json())))
    _MEMORY[key] = result
    return result


#: Triton's argument type strings (``"*fp16"``: pointer to fp16); ``tensordesc<...>`` passes as is.
_ARG_TYPE = re.compile(
    r"^(\*k?)?(i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8\w*|fp16|bf16|fp32|fp64)$|^constexpr$|^tensordesc"
)


def _check_arguments(kernel, signature: dict, constexprs: dict | None) -> None:
    """Say what is wrong with a signature before Triton's code generator fails somewhere inside."""
    if not hasattr(kernel, "fn") and not hasattr(kernel, "arg_names"):
        raise TypeError(f"compile_stages needs a @triton.jit kernel, got {type(kernel).__name__} "
                        f"{getattr(kernel, '__name__', '')!s}; decorate it with @triton.jit")  # fmt: skip
    if not isinstance(signature, dict):
        raise TypeError(f"signature must map argument names to Triton types, got {type(signature).__name__}")
    names = list(compat.triton_jit_function(kernel).arg_names)
    missing = [a for a in names if a not in signature]
    extra = [a for a in signature if a not in names]
    if missing or extra:
        raise ValueError(f"signature of {names}: " + "; ".join(
            ([f"missing {missing}"] if missing else []) + ([f"not arguments: {extra}"] if extra else [])))  # fmt: skip
    bad = {a: t for a, t in signature.items() if not isinstance(t, str) or not _ARG_TYPE.match(t)}
    if bad:
        raise ValueError(f"unknown Triton types {bad}: use e.g. '*fp32', '*bf16', 'i32', 'fp32' or 'constexpr'")
    given = {
        names[k[0]] if isinstance(k, tuple) and k and isinstance(k[0], int) and k[0] < len(names) else k
        for k in (constexprs or {})
    }  # fmt: skip  (keys may be names or Triton's (index,) tuples)
    unset = [a for a, t in signature.items() if t == "constexpr" and a not in given]
    if unset:
        raise ValueError(f"constexpr arguments without a value: {unset}; pass constexprs={{{unset[0]!r}: ...}}")


def _compile(kernel, signature, constexprs, target, options, passes) -> Stages:
    import triton

    if compat.triton_language_patched():
        return _compile_in_subprocess(kernel, signature, constexprs, target, options, passes)

    aligned = options.pop("aligned", False)
    divisible = [a for a, t in signature.items() if t.startswith("*") or t in ("i32", "i64")] if aligned else []
    src = compat.triton_ast_source(kernel, signature, constexprs, divisible_by_16=divisible)
    # the pass dumps are always read: the LLVM-dialect stage is the last of them
    env_vars = {"TRITON_ALWAYS_COMPILE": "1", "MLIR_ENABLE_DUMP": "1"}
    with _environ(env_vars), compat.triton_compile_scope(kernel), capture_stderr() as err:
        compiled = triton.compile(src, target=gpu_target(target), options=options)
    md = compat.triton_metadata_dict(compiled)
    asm = compiled.asm
    dumps = split_pass_dumps(err.text)
    llvm_dialect = next((d.ir for d in reversed(dumps) if d.stage == "llir"), "")
    raw = {"ttir": asm["ttir"], "ttgir": asm["ttgir"], "llvm_dialect": llvm_dialect, "llir": asm["llir"]}
    if TARGETS[target][0] == "cuda":
        raw["ptx"] = asm["ptx"]
        raw["sass"] = disassemble(asm["cubin"])
        regs, spills = resource_usage(asm["cubin"])
    else:
        raw["amdgcn"] = asm["amdgcn"]
        regs, spills = _amd_registers(asm["amdgcn"])
    readable = {k: readable_text(k, v) for k, v in raw.items()}
    source, first = kernel_source(kernel)
    metadata = {
        "num_warps": md.get("num_warps"),
        "num_stages": md.get("num_stages"),
        "shared": md.get("shared"),
        "registers": regs,
        "spills": spills,
        "warp_size": md.get("warp_size", TARGETS[target][2]),
        "name": md.get("name"),
    }
    dumps = dumps if passes else []
    return Stages(target, readable, {k: _relative_paths(v) for k, v in raw.items()}, metadata, dumps, source, first)


def _compile_in_subprocess(kernel, signature, constexprs, target, options, passes) -> Stages:
    """Compile in a fresh Python when the interpreter left ``triton.language`` patched here.

    That happens when an interpreted kernel calling ``tl.max``/``tl.cdiv``... ran before
    ``course_lib.triton`` was imported (see ``compat.triton_interpreter_scoped_device_calls``).
    The kernel must live in an importable module.
    """
    import sys

    fn = compat.triton_jit_function(kernel).fn
    module, name = fn.__module__, fn.__qualname__
    if module == "__main__" or "<" in name:
        raise RuntimeError(
            "Triton's interpreter left triton.language patched in this process, so the compiler "
            "cannot run here: import course_lib.triton before launching kernels (restart the kernel)."
        )
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "spec.json")
        out = os.path.join(d, "out.json")
        with open(spec, "w") as f:
            json.dump(
                {
                    "module": module,
                    "file": inspect.getsourcefile(fn),
                    "name": name,
                    "signature": signature,
                    "constexprs": constexprs,
                    "target": target,
                    "options": options,
                    "passes": passes,
                },
                f,
            )
        code = (
            "import json, sys; import course_lib; from course_lib.triton import compile as c; "
            "s = json.load(open(sys.argv[1])); "
            "k = getattr(c._import_kernel_module(s['module'], s['file']), s['name']); "
            "r = c._compile(k, s['signature'], s['constexprs'], s['target'], s['options'], s['passes']); "
            "json.dump(r.to_json(), open(sys.argv[2], 'w'))"
        )
        res = subprocess.run([sys.executable, "-c", code, spec, out], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"compiling {name} in a subprocess failed:\n{res.stderr[-2000:]}")
        with open(out) as f:
            return Stages.from_json(json.load(f))


# ----------------------------------------------------------------------------- helpers


def _import_kernel_module(module: str, file: str | None):
    """Import a kernel's module by name, or from its file (a module written under the cache, such
    as course_lib.inductor's generated Triton code, is not on ``sys.path``)."""
    import importlib
    import importlib.util
    import sys

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        if not file:
            raise
    spec = importlib.util.spec_from_file_location(module, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def _environ(values: dict):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Captured:
    text = ""


@contextlib.contextmanager
def capture_stderr():
    """Capture what C++ code (MLIR's IR printer) writes to file descriptor 2."""
    import sys

    out = _Captured()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.text = tmp.read().decode(errors="replace")


_DUMP_HEAD = re.compile(r"^// -----// IR Dump Before (\w+)(?::\s*([\w-]+)|\s+\(([\w-]+)\))?.*$", re.M)


def split_pass_dumps(text: str) -> list[PassDump]:
    """Split an ``MLIR_ENABLE_DUMP`` stream into one :class:`PassDump` per pass.

    The stage is told apart by what the module contains: ``ttg.`` encodings appear once
    TTIR became TTGIR (``ConvertTritonToTritonGPU``), ``llvm.func`` once it reached the LLVM
    dialect.
    """
    heads = list(_DUMP_HEAD.finditer(text))
    dumps = []
    stage = "ttir"
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = strip_locations(text[h.end() : end])
        if "llvm.func" in body:
            stage = "llir"
        elif "#ttg." in body or "ttg.num-warps" in body:
            stage = "ttgir" if stage == "ttir" else stage
        dumps.append(PassDump(i, h.group(1), h.group(2) or h.group(3) or "", stage, body))
    return dumps


def strip_locations(mlir: str) -> str:
    """MLIR without ``loc(...)`` and ``#loc`` lines."""
    lines = [ln for ln in mlir.splitlines() if not ln.startswith("#loc")]
    text = "\n".join(lines)
    text = re.sub(r" loc\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)", "", text)
    return text.strip() + "\n"


def _strip_llir(llir: str) -> str:
    text = re.sub(r",? !dbg !\d+", "", llir)
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("!")).strip() + "\n"


def _strip_ptx(ptx: str) -> str:
    out = []
    for line in ptx.splitlines():
        s = line.strip()
        if s.startswith(".section") and "debug" in s:
            break
        if s.startswith((".loc", ".file", "$L__tmp", "$L__func")):
            continue
        out.append(line)
    return "\n".join(out).strip() + "\n"


def _strip_sass(sass: str) -> str:
    keep = [ln for ln in sass.splitlines() if not ln.strip().startswith("//##") and ln.strip()]
    return "\n".join(keep).strip() + "\n"


def _strip_amdgcn(text: str) -> str:
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith((".loc", ".file", ".Ltmp", ".Lfunc_end", ".Ldebug")) or (
            s.startswith(".section") and "debug" in s
        ):
            continue
        out.append(line)
    return "\n".join(out).strip() + "\n"


def readable_text(stage: str, text: str) -> str:
    """Stage text without debug/location noise (what the notebooks print)."""
    if stage in ("ttir", "ttgir", "llvm_dialect"):
        return strip_locations(text)
    return {"llir": _strip_llir, "ptx": _strip_ptx, "sass": _strip_sass, "amdgcn": _strip_amdgcn}[stage](text)


def _relative_paths(text: str) -> str:
    """Replace absolute file paths in location info by the file name (output must not hold paths)."""
    return re.sub(r"(?<=[\"'])/[^\"']*/([^/\"']+\.py)(?=[\"'])", r"\1", text)


def _run_tool(tool: str, args: list[str], cubin: bytes) -> str:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        res = subprocess.run(
            [compat.triton_nvidia_tool(tool), *args, path], capture_output=True, text=True, check=False
        )
    if res.returncode != 0:
        raise RuntimeError(f"{tool} failed: {res.stderr.strip()}")
    return res.stdout


def disassemble(cubin: bytes) -> str:
    """SASS of a cubin with line info (``nvdisasm -c -gi``: each line with its inlining chain;
    ``cuobjdump -sass`` without lines)."""
    try:
        return _run_tool("nvdisasm", ["-c", "-gi"], cubin)
    except RuntimeError:
        return _run_tool("cuobjdump", ["-sass"], cubin)


_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+).*?LOCAL:(\d+)")


def resource_usage(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers per thread, spill bytes) from ``cuobjdump -res-usage``. ptxas spills to the
    per-thread stack frame (``STACK``); ``LOCAL`` counts other local arrays. Both live in local memory."""
    m = _RES.search(_run_tool("cuobjdump", ["-res-usage"], cubin))
    return (int(m.group(1)), int(m.group(2)) + int(m.group(3))) if m else (None, None)


def _amd_registers(amdgcn: str) -> tuple[int | None, int | None]:
    vgpr = re.search(r"\.vgpr_count:\s+(\d+)", amdgcn) or re.search(r"NumVgprs:\s+(\d+)", amdgcn)
    spill = re.search(r"\.vgpr_spill_count:\s+(\d+)", amdgcn) or re.search(r"ScratchSize:\s+(\d+)", amdgcn)
    return (int(vgpr.group(1)) if vgpr else None, int(spill.group(1)) if spill else None)


def instruction_mix(sass: str) -> dict[str, int]:
    """Count SASS opcodes (``LDG``, ``FFMA``, ``HMMA``...) with their modifiers dropped."""
    counts: dict[str, int] = {}
    for m in re.finditer(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return dict(sorted(counts.items()))


def ptx_mix(ptx: str) -> dict[str, int]:
    """Count PTX instructions by their first name part (``ld``, ``mma``, ``wgmma``, ``fma``...)."""
    counts: dict[str, int] = {}
    for m in re.finditer(r"^\s+(?:@%p\d+\s+)?([a-z][a-z0-9_]*)[.\s]", ptx, re.M):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return dict(sorted(counts.items()))
