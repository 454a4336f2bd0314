"""The course's PTX parser (course_lib/gpu/ptx.py) against NVIDIA's assembler, ptxas.

Ground truth: ``ptxas`` ships inside Triton's wheel and runs on the CPU. The corpus is real PTX from
Triton's compiler for sm_90 (the course kernels, tests/unseen_kernels.py, and Inductor's own Triton
kernels recorded on the H200 in data/inductor/inductor_gpu.json), each cut by many random
*single-instruction* corruptions: a type, an opcode, an operand count, a register name or class, a
modifier, a vector width, a state space, a comma, a semicolon or a brace. ptxas says whether each
text is still legal PTX; ``parse_ptx`` should agree, and when it rejects, name the line of the
corrupted instruction.

The confusion matrix (rows: ptxas, columns: parse_ptx):

    ptxas rejects, parser rejects   agreement (and the parser's line is the corrupted line)
    ptxas rejects, parser accepts   a miss: the parser let illegal PTX through
    ptxas accepts, parser rejects   a false alarm on legal PTX
    ptxas accepts, parser accepts   agreement

``main(results_dir)`` writes ``ptx_parser.json``; ``python bench/bench_ptx_parser.py --per-kernel 40``
prints the matrix and the misses. tests/test_ptx_against_ptxas.py runs a small fixed-seed sample.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import random
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------------------------ ptxas
def ptxas_exe() -> pathlib.Path | None:
    """The ptxas the course uses everywhere (the newest in Triton's wheel), or None."""
    from course_lib.gpu.occupancy_calculator import ptxas_path

    return ptxas_path()


def ptxas_verdicts(texts: list[str], arch: str = "sm_90a") -> list[str | None]:
    """For each PTX text: None when ptxas assembles it, else ptxas's first error line."""
    exe = ptxas_exe()
    if exe is None:
        raise FileNotFoundError("ptxas not found (it ships in triton/backends/nvidia/bin)")
    out: list[str | None] = []
    with tempfile.TemporaryDirectory() as d:
        src = pathlib.Path(d) / "k.ptx"
        for text in texts:
            src.write_text(text)
            run = subprocess.run([str(exe), f"-arch={arch}", str(src), "-o", "/dev/null"],
                                 capture_output=True, text=True, timeout=120)  # fmt: skip
            if run.returncode == 0:
                out.append(None)
            else:
                errors = [ln for ln in (run.stdout + run.stderr).splitlines() if "error" in ln or "fatal" in ln]
                out.append((errors or ["ptxas failed"])[0].replace(str(src), "k.ptx"))
    return out


def parser_verdict(text: str, module=None) -> str | None:
    """None when parse_ptx reads the text, else its error message (``module``: another version of
    course_lib/gpu/ptx.py, for a before/after comparison)."""
    if module is None:
        from course_lib.gpu import ptx as module

    try:
        module.parse_ptx(text)
    except module.PtxSyntaxError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 (an older parser's traceback counts as a rejection without a line)
        return f"traceback: {type(exc).__name__}: {exc}"
    return None


def load_parser(path: str):
    """Import another version of course_lib/gpu/ptx.py from a file (``git show REV:course_lib/gpu/ptx.py``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ptx_other", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ptx_other"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------ corpus
def _course_kernels() -> dict:
    from course_lib.triton import kernels

    out = {}
    for name in kernels.SIGNATURES:
        kernel, sig, consts = kernels.signature(name)
        out[f"course/{name}"] = (kernel, sig, consts, {"aligned": name == "matmul_contiguous"})
    return out


def _unseen_kernels() -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    import unseen_kernels as U

    return {f"unseen/{c.name}": (c.kernel, c.signature, c.constexprs, {"num_warps": c.num_warps}) for c in U.CASES}


_TRIPLE = re.compile(r"async_compile\.triton\('(\w+)', '''(.*?)'''", re.S)


def _inductor_kernels(workdir: pathlib.Path) -> dict:
    """Inductor's Triton kernels recorded on the H200, made importable on the CPU: the
    ``@triton_heuristics`` decorator (autotuning, a GPU driver) is dropped, the ``@triton.jit``
    function and its signature (``triton_meta``) are kept."""
    import importlib.util

    from course_lib import recorded

    rec = recorded.load("inductor/inductor_gpu.json")
    out = {}
    for model, sources in sorted(rec.value["sources"].items()):
        for kname, src in _TRIPLE.findall(sources["inductor"]):
            sig = ast.literal_eval(re.search(r"'signature': (\{.*?\})", src).group(1))
            body = src[src.index("@triton.jit") :]
            head = "\n".join(ln for ln in src[: src.index("@triton_heuristics")].splitlines() if "set_driver" not in ln)
            path = workdir / f"{kname}.py"
            path.write_text(head + "\n" + body)
            spec = importlib.util.spec_from_file_location(f"ind_{kname}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            consts = {k: _block(k) for k, v in sig.items() if v == "constexpr"}
            out[f"inductor/{model}/{kname}"] = (getattr(mod, kname), sig, consts, {})
    return out


def _block(name: str) -> int:
    """A constexpr block size for one of Inductor's kernels: rows 1 (x), reductions 256 (r)."""
    return {"XBLOCK": 4, "YBLOCK": 4}.get(name, 256)


def build_corpus(cache: pathlib.Path = ROOT / ".cache" / "ptx_corpus") -> dict[str, str]:
    """``{name: ptx}`` for every kernel of the corpus (compiled once, then read from ``cache``)."""
    cache.mkdir(parents=True, exist_ok=True)
    index = cache / "index.json"
    if index.is_file():
        return {k: (cache / v).read_text() for k, v in json.loads(index.read_text()).items()}
    from course_lib.triton import compile_stages

    with tempfile.TemporaryDirectory() as d:
        jobs = {**_course_kernels(), **_unseen_kernels(), **_inductor_kernels(pathlib.Path(d))}
        files = {}
        for name, (kernel, sig, consts, opts) in jobs.items():
            try:
                ptx = compile_stages(kernel, sig, consts, target="sm_90", **opts).raw["ptx"]
            except Exception as exc:  # noqa: BLE001 (a kernel Triton cannot compile here is reported, not fatal)
                print(f"  skipped {name}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            fname = name.replace("/", "__") + ".ptx"
            (cache / fname).write_text(ptx)
            files[name] = fname
    index.write_text(json.dumps(files, indent=1))
    return {k: (cache / v).read_text() for k, v in files.items()}


# ------------------------------------------------------------------------------------ corruptions
@dataclasses.dataclass(frozen=True)
class Corruption:
    """One edit of one instruction line: ``kind``, the 1-based ``line``, that line before and after."""

    kernel: str
    kind: str
    line: int
    before: str
    after: str
    text: str  # the whole PTX module with the edit


TYPES = [".b8", ".b16", ".b32", ".b64", ".u8", ".u16", ".u32", ".u64", ".s8", ".s16", ".s32", ".s64",
         ".f16", ".f16x2", ".bf16", ".bf16x2", ".f32", ".f64", ".pred"]  # fmt: skip
BOGUS_TYPES = [".b33", ".f31", ".u7", ".s128", ".f8", ".i32", ".b"]
OPCODES = ["add", "sub", "mul", "mad", "fma", "min", "max", "and", "or", "xor", "shl", "shr", "mov", "ld", "st",
           "cvt", "setp", "selp", "neg", "abs", "rcp", "sqrt", "ex2", "div", "rem", "not", "popc", "bfe", "bar"]  # fmt: skip
MODIFIERS = [".rn", ".rz", ".approx", ".ftz", ".sat", ".lo", ".hi", ".wide", ".sync", ".uni", ".relaxed", ".volatile",
             ".nc", ".L1::evict_last", ".cs", ".x4", ".aligned", ".full", ".gpu", ".cta", ".eq", ".lt"]  # fmt: skip
SPACES = [".global", ".shared", ".local", ".const", ".param", ".gobal", ".shard", ".shared::cta", ".shared::cluster"]
_TYPE_RE = re.compile(r"\.(?:[bsuf](?:8|16|32|64)|f16x2|bf16x2|bf16|pred)(?=[.\s;]|$)")
_REG_RE = re.compile(r"%([a-z]+)(\d+)\b")
_SPACE_RE = re.compile(r"\.(global|shared(?:::cta|::cluster)?|local|const|param)(?=[.\s])")


def instruction_lines(ptx: str) -> list[int]:
    """0-based indices of the lines of a module that hold exactly one instruction."""
    out = []
    for i, ln in enumerate(ptx.splitlines()):
        s = ln.strip()
        if s.endswith(";") and s.count(";") == 1 and re.match(r"^(@!?%?\w+\s+)?[a-z]", s):
            out.append(i)
    return out


def _opcode_span(line: str) -> tuple[int, int]:
    m = re.match(r"^(\s*(?:@!?%?\w+\s+)?)(\S+)", line)
    return m.start(2), m.end(2)


def _mutate_type(line, rng):
    a, b = _opcode_span(line)
    hits = list(_TYPE_RE.finditer(line, a, b))
    if not hits:
        return None
    h = rng.choice(hits)
    return line[: h.start()] + rng.choice(TYPES + BOGUS_TYPES) + line[h.end() :]


def _mutate_opcode(line, rng):
    a, b = _opcode_span(line)
    op = line[a:b].split(".")[0]
    if rng.random() < 0.5:
        new = rng.choice(OPCODES)
    else:  # a typo: drop, double or change one letter
        k = rng.randrange(len(op))
        new = rng.choice([op[:k] + op[k + 1 :], op[:k] + op[k] + op[k:], op[:k] + rng.choice("aeiouxz") + op[k + 1 :]])
    return line[:a] + new + line[a + len(op) :]


def _operands_span(line: str) -> tuple[int, int]:
    a, b = _opcode_span(line)
    return b, line.rindex(";")


def _mutate_operand_count(line, rng):
    a, b = _operands_span(line)
    ops = line[a:b]
    if not ops.strip():
        return line[:b] + " %r1" + line[b:]
    parts = ops.rsplit(",", 1)
    choice = rng.randrange(3)
    if choice == 0 and len(parts) == 2:
        return line[:a] + parts[0] + line[b:]  # drop the last operand
    if choice == 1:
        return line[:b] + ", " + parts[-1].strip() + line[b:]  # repeat the last operand
    return line[:b] + ", %r1" + line[b:]


def _mutate_register(line, rng):
    a, _ = _opcode_span(line)
    hits = list(_REG_RE.finditer(line, a))
    if not hits:
        return None
    h = rng.choice(hits)
    prefix, num = h.group(1), int(h.group(2))
    new = rng.choice(
        [f"%{prefix}{num + 100000}", f"%q{num}", *(f"%{p}{num}" for p in ("r", "rd", "rs", "p") if p != prefix)]
    )
    return line[: h.start()] + new + line[h.end() :]


def _mutate_modifier(line, rng):
    a, b = _opcode_span(line)
    mods = [m for m in re.finditer(r"\.[A-Za-z0-9_:]+", line[a:b]) if not _TYPE_RE.fullmatch(m.group(0))]
    choice = rng.randrange(3)
    if choice == 0 and mods:
        m = rng.choice(mods)
        return line[: a + m.start()] + line[a + m.end() :]
    if choice == 1 and mods:
        m = rng.choice(mods)
        k = rng.randrange(1, len(m.group(0)))
        return line[: a + m.start() + k] + line[a + m.start() + k + 1 :]  # drop one letter
    op_end = a + len(line[a:b].split(".")[0])
    return line[:op_end] + rng.choice(MODIFIERS) + line[op_end:]


def _mutate_vector(line, rng):
    a, b = _opcode_span(line)
    m = re.search(r"\.v(\d+)", line[a:b])
    new = rng.choice([".v1", ".v2", ".v3", ".v4", ".v8", ".v16"])
    if m:
        return line[: a + m.start()] + new + line[a + m.end() :]
    t = list(_TYPE_RE.finditer(line, a, b))
    if not t:
        return None
    return line[: t[-1].start()] + new + line[t[-1].start() :]


def _mutate_space(line, rng):
    a, b = _opcode_span(line)
    hits = list(_SPACE_RE.finditer(line, a, b))
    if hits:
        h = rng.choice(hits)
        return line[: h.start()] + rng.choice(SPACES) + line[h.end() :]
    op_end = a + len(line[a:b].split(".")[0])
    return line[:op_end] + rng.choice(SPACES) + line[op_end:]


def _mutate_punctuation(line, rng):
    a, b = _operands_span(line)
    marks = [i for i in range(a, len(line)) if line[i] in ",;{}[]"]
    if not marks:
        return None
    i = rng.choice(marks)
    if rng.random() < 0.6:
        return line[:i] + line[i + 1 :]  # a missing comma, semicolon, brace or bracket
    return line[:i] + line[i] + line[i:]  # a doubled one


def _mutate_immediate(line, rng):
    a, b = _operands_span(line)
    hits = list(_REG_RE.finditer(line, a, b))
    if not hits:
        return None
    h = rng.choice(hits[:1] * 2 + hits)  # the destination more often
    return line[: h.start()] + rng.choice(["1", "0f3F800000", "-7", "0x10"]) + line[h.end() :]


_SAME_CLASS = [
    (".s32", ".u32"),
    (".s64", ".u64"),
    (".b32", ".u32"),
    (".b64", ".u64"),
    (".u16", ".b16"),
    (".b32", ".s32"),
]


def _mutate_legal(line, rng):
    """Edits that usually stay legal PTX (ptxas decides): spacing, a same-width integer type, another
    declared register of the same class, an optional modifier, a different constant."""
    a, b = _operands_span(line)
    choice = rng.randrange(5)
    if choice == 0:  # spacing around commas and inside brackets
        return line[:a] + line[a:b].replace(", ", " ,\t").replace("[", "[ ").replace("]", " ]") + line[b:]
    if choice == 1:
        o0, o1 = _opcode_span(line)
        pairs = [(x, y) for x, y in _SAME_CLASS if x in line[o0:o1]] + [
            (y, x) for x, y in _SAME_CLASS if y in line[o0:o1]
        ]
        if not pairs:
            return None
        x, y = rng.choice(pairs)
        return line[:o0] + line[o0:o1].replace(x, y, 1) + line[o1:]
    if choice == 2:
        hits = list(_REG_RE.finditer(line, a, b))
        if not hits:
            return None
        h = rng.choice(hits)
        return line[: h.start()] + f"%{h.group(1)}{max(1, int(h.group(2)) - 1)}" + line[h.end() :]
    if choice == 3:
        o0, o1 = _opcode_span(line)
        op = line[o0:o1].split(".")[0]
        extra = {"add": ".ftz", "mul": ".ftz", "max": ".ftz", "bra": ".uni", "ld": ".L1::evict_last", "st": ".cs"}.get(
            op
        )
        if extra is None or extra in line or (extra == ".ftz" and ".f32" not in line[o0:o1]):
            return None
        return line[: o0 + len(op)] + extra + line[o0 + len(op) :]
    ints = list(re.finditer(r"(?<=[\s,])(\d+)(?=[,;\s])", line[a:b]))
    if not ints:
        return None
    h = rng.choice(ints)
    return line[: a + h.start()] + str(int(h.group(1)) * 2 + 1) + line[a + h.end() :]


MUTATORS = {
    "type": _mutate_type, "opcode": _mutate_opcode, "operand_count": _mutate_operand_count,
    "register": _mutate_register, "modifier": _mutate_modifier, "vector": _mutate_vector,
    "state_space": _mutate_space, "punctuation": _mutate_punctuation, "immediate": _mutate_immediate,
    "legal": _mutate_legal,
}  # fmt: skip


def corruptions(kernel: str, ptx: str, n: int, seed: int = 0) -> list[Corruption]:
    """``n`` distinct single-instruction corruptions of one module (fixed seed: the same every run)."""
    rng = random.Random(f"{seed}:{kernel}")
    lines = ptx.splitlines()
    targets = instruction_lines(ptx)
    out, seen = [], set()
    for _ in range(n * 20):
        if len(out) == n:
            break
        i = rng.choice(targets)
        kind = rng.choice(sorted(MUTATORS))
        after = MUTATORS[kind](lines[i], rng)
        if after is None or after == lines[i] or (i, after) in seen:
            continue
        seen.add((i, after))
        text = "\n".join(lines[:i] + [after] + lines[i + 1 :]) + "\n"
        out.append(Corruption(kernel, kind, i + 1, lines[i].strip(), after.strip(), text))
    return out


# ------------------------------------------------------------------------------------ the matrix
@dataclasses.dataclass
class Outcome:
    case: Corruption
    ptxas: str | None  # None: accepted
    parser: str | None  # None: accepted

    @property
    def cell(self) -> str:
        return (
            ("ptxas_rejects" if self.ptxas else "ptxas_accepts")
            + "/"
            + ("parser_rejects" if self.parser else "parser_accepts")
        )

    @property
    def right_line(self) -> bool:
        """The parser's message names the corrupted line."""
        return bool(self.parser) and re.match(rf"line {self.case.line}\b", self.parser) is not None


def evaluate(cases: list[Corruption], verdicts: list | None = None, module=None) -> list[Outcome]:
    """Each case through ptxas (unless its ``verdicts`` are given) and through parse_ptx."""
    verdicts = ptxas_verdicts([c.text for c in cases]) if verdicts is None else verdicts
    return [Outcome(c, v, parser_verdict(c.text, module)) for c, v in zip(cases, verdicts, strict=True)]


def matrix(outcomes: list[Outcome]) -> dict:
    cells = ["ptxas_rejects/parser_rejects", "ptxas_rejects/parser_accepts", "ptxas_accepts/parser_rejects",
             "ptxas_accepts/parser_accepts"]  # fmt: skip
    out = {c: sum(o.cell == c for o in outcomes) for c in cells}
    out["rejected_with_right_line"] = sum(o.ptxas is not None and o.right_line for o in outcomes)
    out["total"] = len(outcomes)
    return out


def by_kind(outcomes: list[Outcome]) -> dict:
    return {k: matrix([o for o in outcomes if o.case.kind == k]) for k in sorted(MUTATORS)}


def run(per_kernel: int = 12, seed: int = 0, other=None) -> tuple[dict, list[Outcome]]:
    """The matrix for ``per_kernel`` corruptions of each corpus kernel; with ``other`` (a parser
    module) also that parser's matrix on the same texts and ptxas verdicts (``result["other"]``)."""
    corpus = build_corpus()
    originals = ptxas_verdicts(list(corpus.values()))
    bad = [k for k, v in zip(corpus, originals, strict=True) if v is not None]
    if bad:
        raise AssertionError(f"ptxas rejects the uncorrupted PTX of {bad}")
    unparsed = {k: parser_verdict(t) for k, t in corpus.items() if parser_verdict(t)}
    cases = [c for k, t in corpus.items() for c in corruptions(k, t, per_kernel, seed)]
    outcomes = evaluate(cases)
    if other is not None:
        before = evaluate(cases, [o.ptxas for o in outcomes], other)
        result_other = {"matrix": matrix(before), "by_kind": by_kind(before)}
    result = {"kernels": len(corpus), "per_kernel": per_kernel, "seed": seed, "originals_rejected_by_parser": unparsed,
              "matrix": matrix(outcomes), "by_kind": by_kind(outcomes)}  # fmt: skip
    if other is not None:
        result["other"] = result_other
    return result, outcomes


def report(result: dict, outcomes: list[Outcome], show: int = 40) -> str:
    m = result["matrix"]
    lines = [f"{m['total']} corruptions of {result['kernels']} kernels (seed {result['seed']})",
             "                 parser rejects  parser accepts",
             f"  ptxas rejects  {m['ptxas_rejects/parser_rejects']:14d}  {m['ptxas_rejects/parser_accepts']:14d}",
             f"  ptxas accepts  {m['ptxas_accepts/parser_rejects']:14d}  {m['ptxas_accepts/parser_accepts']:14d}",
             f"  rejected by both with the corrupted line named: {m['rejected_with_right_line']}"]  # fmt: skip
    wrong = [o for o in outcomes if bool(o.ptxas) != bool(o.parser) or (o.ptxas and not o.right_line)]
    for o in wrong[:show]:
        lines.append(f"- [{o.case.kind}] {o.case.kernel} line {o.case.line}: {o.case.before!r} -> {o.case.after!r}")
        lines.append(f"    ptxas: {o.ptxas}\n    parser: {o.parser}")
    return "\n".join(lines)


def main(results_dir: pathlib.Path) -> None:
    result, outcomes = run(per_kernel=12)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "ptx_parser.json").write_text(json.dumps(result, indent=1))
    print(report(result, outcomes, show=10))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--per-kernel", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=40)
    ap.add_argument("--json")
    ap.add_argument("--compare-with", help="another ptx.py (git show REV:course_lib/gpu/ptx.py > old.py)")
    args = ap.parse_args()
    res, outs = run(args.per_kernel, args.seed, load_parser(args.compare_with) if args.compare_with else None)
    print(report(res, outs, args.show))
    if "other" in res:
        print("the other parser on the same texts:", json.dumps(res["other"]["matrix"]))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(res, indent=1))
