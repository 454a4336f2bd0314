"""course_lib.gpu.ptx's parser against NVIDIA's assembler (ptxas, shipped in Triton's wheel, runs on the CPU).

1. A fixed-seed sample of single-instruction corruptions of real Triton PTX (tests/data/gpu): for every
   text ptxas rejects, parse_ptx rejects it too, naming the corrupted line; every text ptxas accepts,
   parse_ptx accepts. bench/bench_ptx_parser.py runs the same comparison on a larger corpus.
2. The rule tables on hand-written lines: each bad line gets its sentence and column, each good line
   parses, and where ptxas is present it is asked to confirm both verdicts.
"""

import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))

import bench_ptx_parser as B  # noqa: E402

from course_lib.gpu import ptx as P  # noqa: E402

DATA = pathlib.Path(__file__).parent / "data" / "gpu"


def _ptxas_or_skip():
    """ptxas that reads the PTX version Triton 3.9 writes (9.x), or skip saying what is missing."""
    exe = B.ptxas_exe()
    if exe is None:
        pytest.skip("ptxas not found: it ships in triton/backends/nvidia/bin of the triton wheel (Linux x86-64)")
    first = B.ptxas_verdicts([(DATA / "vector_add.ptx").read_text()])[0]
    if first is not None:
        pytest.skip(f"this ptxas cannot assemble Triton's PTX ({first}); a newer one is needed")
    return exe


def test_fixed_sample_of_corruptions_agrees_with_ptxas():
    _ptxas_or_skip()
    corpus = {p.stem: p.read_text() for p in sorted(DATA.glob("*.ptx"))}
    assert B.ptxas_verdicts(list(corpus.values())) == [None] * len(corpus)  # the originals are legal
    cases = [c for name, text in corpus.items() for c in B.corruptions(name, text, 12, seed=7)]
    outcomes = B.evaluate(cases)
    m = B.matrix(outcomes)
    wrong = [o for o in outcomes if bool(o.ptxas) != bool(o.parser) or (o.ptxas and not o.right_line)]
    detail = "\n".join(f"{o.case.kind}: {o.case.before!r} -> {o.case.after!r}\n  ptxas: {o.ptxas}\n  parser: {o.parser}"
                       for o in wrong[:5])  # fmt: skip
    assert not wrong, f"{len(wrong)} disagreement(s) with ptxas:\n{detail}"
    # both verdicts occur, so the test can catch a miss and a false alarm alike
    assert m["ptxas_rejects/parser_rejects"] > 40 and m["ptxas_accepts/parser_accepts"] >= 5, m


HEAD = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
.reg .pred %p<4>;
.reg .b16 %rs<4>;
.reg .b32 %r<8>;
.reg .b64 %rd<4>;
.shared .align 16 .b8 smem[256];
$L0:
"""


def _kernel(line: str) -> str:
    return f"{HEAD}\t{line}\n\tret;\n}}\n"


#: (instruction, the rule it breaks: a piece of parse_ptx's sentence); all on line 12, after one tab
BAD = [
    ("add.b33 %r1, %r2, %r3;", r"'\.b33' is not a PTX type"),
    ("add.b32 %r1, %r2, %r3;", r"add does not take type \.b32"),
    ("ld.global.b32 %r1, [%rd1], %r2;", r"ld takes 2 operand"),
    ("add.s32 %rd1, %r2, %r3;", r"%rd1 is a \.b64 register \(64 bits\); operand 1 of add needs \.s32"),
    ("ld.global.b64 %r1, [%rd1];", r"%r1 is a \.b32 register .* needs \.b64 or wider"),
    ("shl.b32 %r1, %r2, %rd1;", r"%rd1 is a \.b64 register"),
    ("ld.global.v4.b32 {%r1, %r2, %r3}, [%rd1];", r"\.v4 needs a vector of 4 registers; this has 3"),
    ("ld.global.v3.b32 {%r1, %r2, %r3}, [%rd1];", r"'\.v3' is not a vector width"),
    ("ld.global.v4.b64 {%rd1, %rd2, %rd3, %rd1}, [%rd1];", r"moves 256 bits"),
    ("ld.gobal.b32 %r1, [%rd1];", r"'\.gobal' is not a PTX modifier"),
    ("ld.global.shared.b32 %r1, [%rd1];", r"one state space"),
    ("mov.global.b32 %r1, %r2;", r"mov takes no state space"),
    ("ld.global.b32 %r1, [%r1];", r"a \.global address needs a 64-bit register"),
    ("ld.global.relaxed.b32 %r1, [%rd1];", r"'\.relaxed' needs a scope"),
    ("ld.shared.L1::evict_last.b32 %r1, [%rd1];", r"cannot be used with the \.shared space"),
    ("mul.s32 %r1, %r2, %r3;", r"mul\.s32 needs one of \.hi \.lo \.wide"),
    ("mad.lo.wide.s32 %rd1, %r1, %r2, %rd2;", r"'\.lo' and '\.wide' exclude each other"),
    ("fma.f32 %r1, %r2, %r3, %r4;", r"fma\.f32 needs one of \.rm \.rn \.rp \.rz"),
    ("add.rz.s64 %rd1, %rd2, %rd3;", r"'\.rz' applies to floating-point types only"),
    ("cvt.f32.s32 %r1, %r2;", r"integer to float\) needs a rounding mode"),
    ("setp.lt.s32 %r1, %r2, %r3;", r"%r1 is a \.b32 register .* needs \.pred"),
    ("add.f32 %r1, %r2, 1;", r"1 is an integer constant; \.f32 needs a float constant"),
    ("mov.b32 1, %r1;", r"the result of mov must go to a register"),
    ("@%r1 bra $L0;", r"guard %r1 is a \.b32 register; a guard must be a \.pred"),
    ("bra $L_nowhere;", r"label \$L_nowhere is not defined"),
    ("addd.s32 %r1, %r2, %r3;", r"'addd' is not a PTX instruction"),
    ("add.s32 %r1, %r2 %r3;", r"',' missing between '%r2' and '%r3'"),
    ("add.s32 %r1, %r2,, %r3;", r"an empty operand"),
    ("mov.b64 %rd1, {%r1, %r2}};", r"'}' with no '{' before it"),
    ("ld.global.b32 %r1, [%rd1;", r"the address opened here is not closed"),
    ("add.s32 %r1, %r2, %r3;;", r"an empty statement"),
    ("add.s32 %r1, %r2, %r8;", r"register %r8 is not declared"),
    ("cvt.rn.bf16.f32 %r1, %r2;", r"%r1 is a \.b32 register \(32 bits\); operand 1 of cvt needs \.bf16$|needs \.bf16 "),
    ("mov.f32 %r1, %tid.x;", r"%tid\.x is a special register; \.f32 cannot read it"),
    ("redux.sync.add.s32 %r1, %r2, %r3, %r3;", r"redux takes 3 operand"),
    ("mov.u64 %rd1, {%r1, %r2};", r"mov packs and unpacks vectors with bit types only"),
    ("ldmatrix.sync.aligned.m8n8.x1.shared.s32 {%r1}, [%r2];", r"ldmatrix does not take type \.s32"),
    (
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r1, %r2, %r3, %r4}, %rd1, %rd2, %p1, 1, 1, 0;",
        r"with \.f16 inputs takes 8 operands; this has 7",
    ),
    (
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r1, %r2, %r3}, %rd1, %rd2, %p1, 1, 1, 0, 1;",
        r"m64n8k16\.f32 accumulates in 4 registers; this vector has 3",
    ),
]

#: lines ptxas accepts although they look odd (wider registers for ld/st/cvt, packing movs, sinks)
GOOD = [
    "ld.global.u8 %r1, [%rd1];",
    "ld.global.b32 %rd1, [%rd1+-16];",
    "st.global.b16 [%rd1], %r1;",
    "cvt.u32.u64 %r1, %rd1;",
    "cvt.rn.f16.f32 %r1, %r1;",
    "mov.b64 %rd1, {%r1, %r2};",
    "mov.b32 {%rs1, %rs2}, %r1;",
    "ld.shared.v4.b32 {%r1, %r2, %r3, %r4}, [smem+16];",
    "ld.relaxed.gpu.global.b32 %r1, [%rd1];",
    "shfl.sync.bfly.b32 %r1|%p1, %r2, 16, 31, -1;",
    "setp.lt.and.s32 %p1, %r2, %r3, !%p2;",
    "mad.hi.sat.s32 %r1, %r2, %r3, %r4;",
    "ld.shared.b32 %r1, [%rs1];",
    "bar.sync 0, 128;",
    "cvt.rn.f16.f32 %r1, %r2;",
    "redux.sync.add.s32 %r1, %r2, -1;",
    "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [%r2];",
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r1, %r2, %r3, %r4}, %rd1, %rd2, %p1, 1, 1, 0, 1;",
]


@pytest.mark.parametrize("line, message", BAD, ids=[b[0] for b in BAD])
def test_rule_tables_reject_with_line_column_and_reason(line, message):
    with pytest.raises(P.PtxSyntaxError, match=r"^line 12, column \d+: ") as exc:
        P.parse_ptx(_kernel(line))
    col = int(re.match(r"line 12, column (\d+)", str(exc.value)).group(1))
    assert 2 <= col <= len(line) + 2  # within the line (after its tab)
    assert re.search(message, str(exc.value)), str(exc.value)


@pytest.mark.parametrize("line", GOOD)
def test_rule_tables_accept_legal_lines(line):
    k = P.parse_ptx(_kernel(line))
    assert k.instrs[0].text == line.rstrip(";") and k.instrs[-1].op == "ret"


def test_hand_written_lines_agree_with_ptxas():
    """The same lines through ptxas: BAD ones are rejected by it too, GOOD ones assembled."""
    _ptxas_or_skip()
    verdicts = B.ptxas_verdicts([_kernel(line) for line, _ in BAD] + [_kernel(line) for line in GOOD])
    rejected_by_ptxas = [v is not None for v in verdicts]
    assert rejected_by_ptxas == [True] * len(BAD) + [False] * len(GOOD), [
        (line, v) for line, v in zip([b[0] for b in BAD] + GOOD, verdicts, strict=True)
    ]


def test_columns_point_at_the_bad_token():
    text = _kernel("add.s32 %r1, %r2, %r9;")
    with pytest.raises(P.PtxSyntaxError, match=r"^line 12, column 20: register %r9 is not declared"):
        P.parse_ptx(text)
    with pytest.raises(P.PtxSyntaxError, match=r"^line 12, column 5: '\.b33' is not a PTX type"):
        P.parse_ptx(_kernel("add.b33 %r1, %r2, %r3;"))
    with pytest.raises(P.PtxSyntaxError, match=r"^line 12, column 23: ';' missing at the end of this instruction"):
        P.parse_ptx(_kernel("add.s32 %r1, %r2, %r3\n\tmov.b32 %r4, 1;"))
