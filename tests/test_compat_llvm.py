"""compat functions used by course_lib.llvm: each fails with a clear message when Triton changes."""

from __future__ import annotations

import course_lib  # noqa: F401  (sets Triton's mode first)
from course_lib import compat
from course_lib.llvm import mlir


def test_triton_jit_function_unwraps_the_interpreter():
    from triton.runtime.jit import JITFunction

    jf = compat.triton_jit_function(mlir.add_kernel)
    assert isinstance(jf, JITFunction), "compat.triton_jit_function: Triton's kernel wrapper changed"
    assert jf.fn.__name__ == "add_kernel"
