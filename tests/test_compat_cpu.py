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
