"""course_lib.llvm.plugin: the C++ MulToShl pass, built against the installed LLVM and loaded
into opt, rewrites what the Python strength_reduce rewrites, and the result computes the same."""

from __future__ import annotations

import random

import pytest

from course_lib.llvm import analysis, mcjit, plugin

pytestmark = pytest.mark.skipif(plugin.missing() is not None, reason=str(plugin.missing()))


def _module(constants: list[int]) -> str:
    lines, prev = [], "%x"
    for k, c in enumerate(constants):
        flag = "nsw " if k % 2 else ""
        lines.append(f"  %m{k} = mul {flag}i64 {prev}, {c}")
        lines.append(f"  %s{k} = add i64 %m{k}, {k + 1}")
        prev = f"%s{k}"
    body = "\n".join(lines)
    return f"define i64 @chain(i64 %x) {{\n{body}\n  ret i64 {prev}\n}}\n"


def _python_chain(x: int, constants: list[int]) -> int:
    for k, c in enumerate(constants):
        x = (x * c + k + 1) & (2**64 - 1)
    return x - 2**64 if x >= 2**63 else x


def test_the_cpp_plugin_rewrites_like_the_python_pass_and_keeps_the_value():
    rng = random.Random(2)
    constants = [rng.choice([2 ** rng.randint(0, 40), rng.randint(3, 10**6) | 1]) for _ in range(12)]
    ir_text = _module(constants)
    done = plugin.run(ir_text)
    _, rewrites = analysis.strength_reduce(ir_text)
    assert done.rewritten == {"chain": len(rewrites)} and len(rewrites) == sum(c & (c - 1) == 0 for c in constants)
    assert done.text.count(" shl ") == len(rewrites) and "shl nsw" not in done.text  # flags dropped, as in C++
    f = mcjit.compile_function(done.text, "chain", "i64", ["i64"], level=0)
    for _ in range(50):
        x = rng.randint(-(2**40), 2**40)
        assert f(x) == _python_chain(x, constants), x


def test_a_module_opt_cannot_read_is_a_clear_error():
    with pytest.raises(ValueError, match="opt rejected the module"):
        plugin.run("define i64 @f( {")


# ----------------------------------------------------------------------------- 02b exercise 2b: the learner's udiv pass

_UDIV_ALL_DIVS = r"""
    SmallVector<BinaryOperator *, 8> Todo;
    for (Instruction &I : instructions(F))
      if (auto *BO = dyn_cast<BinaryOperator>(&I); BO && (BO->getOpcode() == Instruction::UDiv ||
                                                          BO->getOpcode() == Instruction::SDiv))
        if (auto *C = dyn_cast<ConstantInt>(BO->getOperand(1)); C && C->getValue().isPowerOf2())
          Todo.push_back(BO);
    for (BinaryOperator *BO : Todo) {
      unsigned K = cast<ConstantInt>(BO->getOperand(1))->getValue().logBase2();
      auto *Shr = BinaryOperator::CreateLShr(BO->getOperand(0), ConstantInt::get(BO->getType(), K), "", BO->getIterator());
      BO->replaceAllUsesWith(Shr);
      BO->eraseFromParent();
      ++Rewritten;
    }
"""


def test_udiv_exercise_fails_a_pass_that_also_shifts_sdiv_and_a_body_that_does_not_compile():
    from course_lib.llvm import examples

    assert plugin.udiv_power_of_two_count(examples.UDIV_FUNCTIONS) == {
        "by_eight": 1, "mixed": 2, "not_constant": 0, "narrow": 2, "in_a_loop": 1}  # fmt: skip
    wrong = plugin.check_udiv_body(_UDIV_ALL_DIVS)  # sdiv x, 4 of a negative x is not x >> 2
    assert not wrong.ok and "@mixed" in wrong.message
    broken = plugin.check_udiv_body("\n    Rewritten += NoSuchThing;\n")
    assert not broken.ok and "line 2 of your code" in broken.message and "NoSuchThing" in broken.message
