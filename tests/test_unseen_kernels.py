"""The course's Triton/PTX tools on kernels written in the styles of real code (tests/unseen_kernels.py).

Each test is a regression test for a fix: source maps of code inlined from Triton's library,
@autotune/@heuristics kernels, the PTX simulator's atomics, scope blocks and ``shared::cta``,
its "unsupported instruction X at PTX line N" message, and the PTX parser's errors on malformed text.
"""

import random
import re

import pytest
import torch
import unseen_kernels as U

from course_lib.gpu import ptx as P
from course_lib.gpu import ptx_exec
from course_lib.triton import compile_stages, sourcemap

CASES = {c.name: c for c in U.CASES}


def _stages(name: str, target: str = "sm_90"):
    c = CASES[name]
    return compile_stages(c.kernel, c.signature, c.constexprs, target=target, num_warps=c.num_warps)


def _line_of(stages, needle: str) -> int:
    return stages.first_line + next(i for i, ln in enumerate(stages.source.splitlines()) if needle in ln)


def test_inlined_library_code_maps_to_the_calling_kernel_line():
    s = _stages("ln_fwd")
    lo, hi = s.first_line, s.first_line + len(s.source.splitlines())
    sum_line = _line_of(s, "mean = tl.sum")
    for stage in ("ttir", "ttgir", "llir", "ptx", "sass"):
        rows = sourcemap.line_map(s, stage)
        assert all(lo <= p < hi for _, p in rows if p is not None), stage  # never a line of standard.py
    shfl = [p for t, p in sourcemap.line_map(s, "ptx") if "shfl.sync" in t]
    assert shfl and sum_line in shfl  # the warp reduction of tl.sum belongs to the tl.sum line


def test_ptx_inlined_at_chain_is_followed():
    ptx = (
        '.file 1 "k.py"\n.file 2 "standard.py"\n'
        "\t.loc 2 314 12, function_name $L1, inlined_at 1 28 12\n\tshfl.sync.bfly.b32 %r1, %r2, 16, 31, -1;\n"
        "\t.loc 2 287 12, function_name $L1, inlined_at 2 314 12\n\tadd.f32 %r3, %r1, %r2;\n"
        "\t.loc 1 0 5\n\tmov.b32 %r4, 0;\n"
    )
    from course_lib.triton.compile import Stages

    s = Stages("sm_90", {}, {"ptx": ptx, "ttir": '#loc = loc("k.py":20:1)\n'}, {}, [], "\n" * 20, 20)
    got = [p for _, p in sourcemap.line_map(s, "ptx")]
    assert got == [28, 28, None]


@pytest.mark.parametrize("name", ["scale_heur", "relu_tuned"])
def test_heuristics_and_autotune_kernels_compile(name):
    s = _stages(name, "sm_80")
    assert "ld.global" in s["ptx"] and s.metadata["registers"]


def test_ptx_simulator_layernorm_matches_torch():
    s = _stages("ln_fwd")
    M, N = 3, 50
    x, w, b = torch.randn(M, N), torch.randn(N), torch.randn(N)
    y, mean, rstd = torch.zeros(M, N), torch.zeros(M), torch.zeros(M)
    r = ptx_exec.run_ptx(s.raw["ptx"], None, (M,), (128,), [x, y, w, b, mean, rstd, N, N, 1e-5])
    torch.testing.assert_close(r.outputs[1], torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5), atol=1e-4, rtol=1e-4)


def test_ptx_simulator_atomics_histogram_and_lock():
    s = _stages("histogram")  # shared-memory atom.add, then global red/atom.add
    x = torch.randint(0, 8, (128,), dtype=torch.int32)
    r = ptx_exec.run_ptx(s.raw["ptx"], None, (2,), (128,), [x, torch.zeros(8, dtype=torch.int32), 128])
    assert r.outputs[1].tolist() == torch.bincount(x, minlength=8).tolist()
    s = _stages("ln_bwd_dwdb")  # atom.cas spin lock, atom.exch release
    M, N = 4, 50
    dy, x = torch.randn(M, N), torch.randn(M, N)
    mean, rstd = x.mean(1), 1 / x.std(1, unbiased=False)
    args = [dy, x, mean, rstd, torch.zeros(2, N), torch.zeros(2, N), torch.zeros(2, dtype=torch.int32), N, N]
    r = ptx_exec.run_ptx(s.raw["ptx"], None, (M,), (128,), args)
    xhat = (x - mean[:, None]) * rstd[:, None]
    torch.testing.assert_close(r.outputs[4].sum(0), (dy * xhat).sum(0), atol=1e-4, rtol=1e-4)
    assert r.outputs[6].tolist() == [0, 0]  # every lock released


def test_unsupported_instruction_names_it_and_its_ptx_line():
    s = _stages("casts")  # fp8 conversion: cvt.rn.satfinite.e4m3x2.f32
    x = torch.randn(64)
    outs = [torch.zeros(64).half(), torch.zeros(64).bfloat16(), torch.zeros(64), torch.zeros(64).char()]
    with pytest.raises(
        ptx_exec.UnsupportedInstruction, match=r"unsupported instruction `cvt\..*e4m3x2.*` at PTX line \d+"
    ) as e:
        ptx_exec.run_ptx(s.raw["ptx"], None, (1,), (128,), [x, *outs, 64])
    line = s.raw["ptx"].splitlines()[e.value.instr.line - 1]
    assert "e4m3x2" in line


def test_malformed_ptx_gets_a_line_never_a_traceback():
    ptx = _stages("ln_fwd").raw["ptx"]
    rng = random.Random(0)
    bad = [ptx[: rng.randrange(len(ptx))] for _ in range(30)]
    lines = ptx.splitlines()
    for _ in range(30):
        i = rng.randrange(len(lines))
        bad.append("\n".join(lines[:i] + ["\t@%p1 ld.global.[b32 %r1, [%rd1+;"] + lines[i + 1 :]))
    bad.append(ptx.replace("add.s32", "add!s32", 1))
    for text in bad:
        try:
            P.parse_ptx(text)
        except P.PtxSyntaxError as exc:
            assert re.match(r"line \d+|no \.entry", str(exc)), str(exc)
    row = next(i for i, ln in enumerate(lines) if "add.s32" in ln)
    col = lines[row].index("add.s32") + 1
    with pytest.raises(P.PtxSyntaxError, match=rf"^line {row + 1}, column {col}: 'add!s32' is not a PTX opcode"):
        P.parse_ptx(ptx.replace("add.s32", "add!s32", 1))


def test_every_blocked_layout_parses_and_corruptions_say_where():
    from course_lib.triton import layouts

    s = _stages("softmax_rows")
    enc = layouts.encodings(s["ttgir"])
    got = layouts.parse_blocked(s["ttgir"])
    assert got and len(got) == sum(kind == "blocked" for kind in enc.values())
    raw = s.raw["ttgir"]
    line = next(ln for ln in raw.splitlines() if "#ttg.blocked<" in ln)
    with pytest.raises(layouts.LayoutParseError, match=r"line 1, column \d+: .* not closed"):
        layouts.parse_blocked(line[:60])
    with pytest.raises(layouts.LayoutParseError, match=r"line 2, column \d+: expected a list of integers"):
        layouts.parse_blocked("module {\n" + line.replace("sizePerThread = [1", "sizePerThread = [x", 1))
    rng = random.Random(0)
    for _ in range(60):  # random cuts and stray characters: parsed, or a LayoutParseError naming the line
        k = rng.randrange(len(raw))
        try:
            layouts.parse_blocked(raw[:k] + rng.choice(["", "]", ",", "x"]) + raw[k + 1 :])
        except layouts.LayoutParseError as exc:
            assert str(exc).startswith("line ")


def test_malformed_llvm_ir_and_course_ir_say_line_and_column():
    from course_lib.ir import textparse
    from course_lib.llvm import passes as LP

    llir = _stages("ln_fwd")["llir"]
    lines = llir.splitlines()
    i = next(k for k, ln in enumerate(lines) if " = fadd " in ln)
    with pytest.raises(LP.LLVMParseError, match=rf"line {i + 1}, column \d+: "):
        LP.parse("\n".join(lines[:i] + [lines[i].replace(" = fadd ", " = fadd(")] + lines[i + 1 :]))
    with pytest.raises(LP.LLVMParseError, match=r"line \d+, column \d+"):
        LP.parse(llir[: len(llir) // 2])
    text = "func f(x: int) -> int {\nentry:\n  y: int = add x, 1\n  ret y\n}\n"
    assert str(textparse.parse(text)).strip() == text.strip()
    rng = random.Random(1)
    for _ in range(200):
        k = rng.randrange(len(text))
        try:
            textparse.parse(text[:k] + rng.choice(["", "}", ",", ":", "@"]) + text[k + 1 :])
        except textparse.IRParseError as exc:
            assert exc.line >= 1 and exc.col >= 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no .entry function"),
        (".version 8.0\n.entry k(\n", r"line 2: the parameter list of .entry k is not closed"),
        (".entry k() {\n add.s32 %r1, %r2, 1;\n", r"line 1: the body of .entry k opened here never closes"),
        (".entry k() {\n\n bra $L_nowhere;\n}", r"line 3, column 6: label \$L_nowhere is not defined"),
        (".entry k() {\n @%p1;\n}", r"line 2, column 2: guard '@%p1'"),
        (".entry k() {\n.reg .b64 %rd<3>;\n ld.global.b32 %rd1;\n}", r"line 3, column 2: ld takes 2 operand\(s\)"),
        (".entry k() {\n.reg .b64 %rd<3>;\n ld.global.b32 %rd1, %rd2;\n}", r"line 3, column 22: .* must be an address"),
        (".entry k() {\n.reg .b32 %r<3>;\n mov.b32 %r3, 1;\n}", r"line 3, column 10: register %r3 is not declared"),
        (".entry k() {\n.reg .b32 %r<3>;\n mov.b32 %q1, 1;\n}", r"line 3, column 10: register %q1 is not declared"),
    ],
)
def test_small_malformed_ptx(text, message):
    with pytest.raises(P.PtxSyntaxError, match=message):
        P.parse_ptx(text)


def test_parsers_reject_non_text_clearly():
    from course_lib.ir import textparse

    with pytest.raises(TypeError, match="reads text"):
        textparse.parse(None)
    with pytest.raises(TypeError, match="PTX text"):
        P.parse_ptx(b".entry")


def test_trace_records_atomics():
    from course_lib.triton import trace

    x = torch.randint(0, 8, (128,), dtype=torch.int32)
    h = torch.zeros(8, dtype=torch.int32)
    tr = trace.trace(lambda: U.histogram[(2,)](x, h, 128, BINS=8, BLOCK=64), {"x": x, "h": h}, U.histogram)
    assert h.tolist() == torch.bincount(x, minlength=8).tolist()
    assert tr.footprint("h", "atomic").tolist() == [1] * 8  # program 1 was the last to add into each bin
    assert tr.heatmap("h", "atomic").tolist() == [2] * 8
    M, N = 3, 20
    lock = torch.zeros(2, dtype=torch.int32)
    t = {"dy": torch.randn(M, N), "x": torch.randn(M, N), "mean": torch.zeros(M), "rstd": torch.ones(M),
         "dw": torch.zeros(2, N), "db": torch.zeros(2, N), "lock": lock}  # fmt: skip
    tr = trace.trace(lambda: U.ln_bwd_dwdb[(M,)](*t.values(), N, N, GROUP=2, BLOCK_N=32), t, U.ln_bwd_dwdb)
    locks = tr.for_tensor("lock", "atomic")
    assert len(locks) == 2 * M and {a.line for a in locks} == {_line_of_fn(U.ln_bwd_dwdb, "atomic_cas"),
                                                             _line_of_fn(U.ln_bwd_dwdb, "atomic_xchg")}  # fmt: skip


def _line_of_fn(kernel, needle: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(kernel.fn)
    return start + next(i for i, ln in enumerate(lines) if needle in ln)


def test_loads_in_inline_asm_map_to_their_tl_load_line():
    # Triton writes loads as inline asm "mov.u32 $0, 0x0; ld.global ..."; LLVM gives the asm's 2nd line
    # the call's line + 1, and ptxas copies that into the SASS line table
    s = _stages("ln_bwd_dwdb")
    src = s.source.splitlines()
    for stage, memory_op in (("ptx", r"^\s*(@%p\d+\s+)?ld\.global"), ("sass", r"\bLDG\.")):
        lines = [src[p - s.first_line] for t, p in sourcemap.line_map(s, stage) if p and re.search(memory_op, t)]
        assert lines and all("tl.load" in ln for ln in lines), (stage, lines)


@pytest.mark.parametrize(
    "signature, constexprs, message",
    [
        ({"X": "*fp32", "Y": "*fp32"}, {"BLOCK": 128}, r"missing \['n', 'BLOCK'\]"),
        ({"X": "*fp33", "Y": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 128}, "unknown Triton types"),
        ({"X": "*fp32", "Y": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {}, r"without a value: \['BLOCK'\]"),
    ],
)
def test_compile_stages_says_what_is_wrong_with_a_signature(signature, constexprs, message):
    with pytest.raises(ValueError, match=message):
        compile_stages(U.relu_tuned, signature, constexprs)


def test_compile_stages_rejects_a_plain_function():
    with pytest.raises(TypeError, match=r"@triton\.jit"):
        compile_stages(lambda x: x, {"x": "i32"})


def test_tensor_core_tools_on_unseen_matmuls_and_bad_shapes():
    import numpy as np

    from course_lib.gpu import simt, tensor_core

    ptx = _stages("matmul_k_loop", "sm_80")["ptx"]
    ops = tensor_core.tensor_core_ops(ptx)
    mma = [o for o in ops if o.startswith("mma.sync")]
    assert mma and {tensor_core.mma_shape(o) for o in mma} == {(16, 8, 16)}
    assert len(tensor_core.ptx_mma_operands(ptx)) == sum(ops[o] for o in mma)
    with pytest.raises(ValueError, match=r"shape \(16, 16\), got \(16, 8\)"):
        tensor_core.to_fragments("A", np.zeros((16, 8)))
    with pytest.raises(ValueError, match="A \\(M x K\\), B \\(K x N\\)"):
        tensor_core.mma_tile(np.zeros((16, 16)), np.zeros((8, 8)), np.zeros((16, 8)))
    with pytest.raises(ValueError, match="1 to 3 positive integers"):
        simt.dim3((1, 2, 3, 4))
