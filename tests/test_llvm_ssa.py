"""course_lib.llvm.ssa_compare: pruning rules, and LLVM's mem2reg phis read back."""

from __future__ import annotations

from course_lib.llvm import examples, passes
from course_lib.llvm import ssa_compare as sc


def test_trivially_redundant_phis_go_and_their_users_see_the_value():
    phis = [sc.Phi("a", "h", "x", ["1", "a"]), sc.Phi("b", "j", "y", ["a", "1"])]
    # a == 1, so b merges 1 and 1: redundant too
    assert sc.prune(phis, {"b"}) == set()


def test_dead_phis_go_even_in_cycles():
    phis = [sc.Phi("p", "h", "x", ["0", "q"]), sc.Phi("q", "l", "x", ["p", "1"])]
    assert sc.prune(phis, set()) == set()
    assert sc.prune(phis, {"q"}) == {("h", "x"), ("l", "x")}


def test_llvm_phis_after_mem2reg_name_the_source_variables():
    text = passes.run_passes(examples.SUM_ALLOCA, ["mem2reg"]).final
    phis, used = sc.llvm_phis(text)
    assert {(p.block, p.var) for p in phis} == {("cond", "i"), ("cond", "s")}
    assert sc.prune(phis, used) == {("cond", "i"), ("cond", "s")}
