"""One test per compat function that Module 6 (course_lib.cpu) uses."""

import torch

from course_lib import compat


def test_inductor_run_and_get_code_returns_cpp_kernels():
    try:
        out, codes = compat.inductor_run_and_get_code(lambda x: torch.exp(x) + 1.0, torch.ones(16))
    except compat.CompatError as exc:  # pragma: no cover - only after an upgrade
        raise AssertionError(f"torch._inductor.utils.run_and_get_code moved: {exc}") from exc
    assert torch.allclose(out, torch.exp(torch.ones(16)) + 1.0)
    assert any("cpp_fused" in c and 'extern "C"' in c for c in codes), (
        "Inductor's CPU output code no longer holds cpp_fused_* kernels as C++ strings; "
        "course_lib.cpu.inductor_view.parse_output_code needs updating"
    )


def test_inductor_fast_math_flags_read_as_gcc_reads_them():
    """Inductor's list switches parts of -ffast-math on and off; gcc reports the net state."""
    import shutil

    from course_lib import compat
    from course_lib.cpu import inductor_view as iv

    flags = compat.inductor_fast_math_flags()
    assert flags and all(f.startswith("-f") for f in flags)
    if shutil.which("gcc") is None:
        assert iv.gcc_math_state(flags) is None
        return
    fast = iv.gcc_math_state(["-ffast-math"])
    assert fast["math-errno"] == "disabled" and fast["associative-math"] == "enabled"
    state = iv.gcc_math_state(flags)
    assert set(state) == set(iv.MATH_SWITCHES) and "?" not in state.values()
    # each switch ends where the flags' last word on it puts it (gcc's opts.cc semantics)
    assert state["math-errno"] == ("enabled" if "-fmath-errno" in flags else "disabled")
    if "-fno-unsafe-math-optimizations" in flags:
        assert state["trapping-math"] == "enabled" and state["associative-math"] == "disabled"
    assert iv.gcc_math_state([], compiler="no-such-compiler-xyz") is None
