"""course_lib.llvm.backend: the course's SelectionDAG against what llc really selected."""

from __future__ import annotations

import pytest

from course_lib.llvm import backend, examples, targets

NEEDS_LLC = pytest.mark.skipif(backend.llc_path() is None, reason=backend.MISSING_LLC)

# straight-line code with arithmetic, a store, a load-op-store and a select
STRAIGHT = """\
define i32 @f(i32 %a, i32 %b, i32* %p, i32* %q) {
entry:
  %x = add i32 %a, %b
  %y = mul i32 %x, %a
  %z = sub i32 %y, %b
  %w = shl i32 %z, 2
  %o = xor i32 %w, %a
  %p1 = getelementptr i32, i32* %p, i64 1
  store i32 %o, i32* %p1
  %v = load i32, i32* %q
  %v2 = add i32 %v, %a
  store i32 %v2, i32* %q
  %c = icmp ult i32 %v2, %z
  %r = select i1 %c, i32 %y, i32 %o
  ret i32 %r
}
"""


def _ops(dag):
    return [n.op for n in dag.nodes]


def test_dag_of_the_loop_body_has_value_and_chain_edges():
    dag = backend.selection_dag(examples.SUM_PHI, "sum", "body")
    ops = _ops(dag)
    assert ops[0] == "EntryToken" and ops.count("CopyFromReg") == 3  # %i, %a, %s come from other blocks
    assert {"shl", "add", "load", "CopyToReg", "TokenFactor", "br"} <= set(ops)
    load = next(n for n in dag.nodes if n.op == "load")
    assert load.types == ("i64", "ch") and dag.is_chain_edge(load, 0) and not dag.is_chain_edge(load, 1)
    exports = {n.ir for n in dag.nodes if n.op == "CopyToReg"}
    assert exports == {"%s2", "%i2"}  # read by the phis in %cond
    assert dag.nodes[dag.root].op == "br"
    dot = dag.dot()
    assert dot.startswith("digraph") and "style=dashed" in dot and "rebuilds" in dot
    assert str(dag).splitlines()[1] == "  t0: ch,glue = EntryToken"


def test_conditional_branch_is_inverted_to_fall_through():
    dag = backend.selection_dag(examples.SUM_PHI, "sum", "cond")
    brcond = next(n for n in dag.nodes if n.op == "brcond")
    cond = dag.nodes[brcond.operands[1][0]]
    assert cond.op == "xor" and dag.nodes[cond.operands[0][0]].op == "setcc"
    assert dag.nodes[brcond.operands[2][0]].detail == " %exit"  # body is next: branch away to exit
    assert "CondCode setlt" in str(dag)


def test_store_merges_pending_loads_with_a_token_factor():
    dag = backend.selection_dag(STRAIGHT, "f", "entry")
    second_store = [n for n in dag.nodes if n.op == "store"][1]
    chain = dag.nodes[second_store.operands[0][0]]
    assert chain.op == "TokenFactor" and {dag.nodes[i].op for i, _ in chain.operands} == {"load", "store"}
    assert "Constant<1>" not in str(dag) and "Constant<4>" in str(dag)  # p + 1 element = p + 4 bytes


def test_unsupported_instructions_say_so():
    with pytest.raises(ValueError, match="does not handle 'call'"):
        backend.selection_dag(
            "declare i64 @g()\ndefine i64 @f() {\nentry:\n  %x = call i64 @g()\n  ret i64 %x\n}", "f", "entry"
        )


@NEEDS_LLC
@pytest.mark.parametrize(
    ("source", "function", "block"),
    [(examples.SUM_PHI, "sum", "cond"), (examples.SUM_PHI, "sum", "body"), (STRAIGHT, "f", "entry"), (examples.NESTED_PHI, "tri", "inner.body")],
)  # fmt: skip
def test_every_arithmetic_node_has_a_machine_instruction_in_finalize_isel(source, function, block):
    dag, rows, mir = backend.isel_view(source, function, block)
    assert mir, "llc printed no MachineIR for the block"
    assert backend.unmatched_arithmetic(dag, rows) == []
    arith = [n for n in dag.nodes if n.op in backend.ARITHMETIC]
    assert arith and all(any(r.node == str(n) and r.instruction in mir for r in rows) for n in arith)


@NEEDS_LLC
def test_selected_instructions_for_the_straight_block():
    dag, rows, mir = backend.isel_view(STRAIGHT, "f", "entry")
    picked = {}
    for r in rows:  # the first node of each opcode
        if r.how == "selected":
            picked.setdefault(r.node.split(" = ")[1].split()[0], backend.mir_opcode(r.instruction))
    assert picked["add"] == "ADD32rr" and picked["mul"] == "IMUL32rr" and picked["sub"] == "SUB32rr"
    assert picked["select"].startswith("CMOV") and picked["X86ISD::RET_GLUE"] == "RET"
    folded = [r for r in rows if r.how == "folded"]
    assert any(r.node.split(" = ")[1].startswith("load") and "rm" in backend.mir_opcode(r.instruction) for r in folded)


@NEEDS_LLC
def test_mcinst_of_the_body_block():
    text = backend.mcinst_block(examples.SUM_PHI, "body")
    assert "# %body" in text and "<MCInst" in text and "ADD64rm" in text


def test_without_llc_the_dag_is_still_built(monkeypatch):
    monkeypatch.setattr(backend, "llc_tool", lambda: None)
    dag, rows, mir = backend.isel_view(examples.SUM_PHI, "sum", "body")
    assert rows == [] and mir == [] and "load" in _ops(dag)


@pytest.mark.skipif(backend.llc_path() is None, reason="LLVM's llc is not installed")
def test_llc_fast_allocator_spills_what_greedy_keeps_in_registers():
    from course_lib import ir, llvm
    from course_lib.llvm import passes

    def dot(a: list[float], b: list[float], n: int) -> float:
        s = 0.0
        for i in range(n):
            s += a[i] * b[i]
        return s

    rows = {
        r.allocator: r for r in backend.regalloc_table(str(passes.optimize(str(llvm.lower(ir.from_python(dot))), 2)))
    }
    assert set(rows) == {"fast", "basic", "greedy"}
    assert rows["fast"].spills > 0 and rows["fast"].reloads > 0  # values live across blocks go to the stack
    assert rows["greedy"].spills == rows["basic"].spills == 0  # 16 registers are plenty for dot
    assert rows["fast"].instructions > rows["greedy"].instructions


@pytest.mark.skipif(targets.hsaco_missing() is not None, reason=str(targets.hsaco_missing()))
def test_saxpy_links_to_an_hsaco_whose_metadata_lays_out_the_arguments():
    co = targets.hsaco()
    with open(co.path, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    k = co.kernel("saxpy")
    assert co.metadata["amdhsa.target"].endswith("gfx942") and k[".wavefront_size"] == 64
    named = [(a[".name"], a[".offset"], a[".size"], a[".value_kind"]) for a in k[".args"] if ".name" in a]
    assert named == [
        ("x", 0, 8, "global_buffer"),
        ("y", 8, 8, "global_buffer"),
        ("a", 16, 4, "by_value"),
        ("n", 20, 4, "by_value"),
    ]
    assert 0 < k[".vgpr_count"] <= 16 and k[".vgpr_spill_count"] == 0


def test_chain_user_ops_on_every_block():
    dag = backend.selection_dag(examples.VADD_PHI, "vadd", "body")
    ops = backend.chain_user_ops(dag)
    assert ops == sorted(ops) and {"load", "store", "br", "TokenFactor"} <= set(ops)
    assert "add" not in ops  # data-only nodes take no chain
