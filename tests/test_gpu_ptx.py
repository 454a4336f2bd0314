"""Module 5: the SIMT simulator runs Triton's real PTX; results equal torch, counts match the layout."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

from course_lib import gpu
from course_lib.gpu.ptx import parse_ptx

DATA = pathlib.Path(__file__).parent / "data" / "gpu"


def ptx(name):
    return (DATA / f"{name}.ptx").read_text()


def test_parse_vector_add():
    k = parse_ptx(ptx("vector_add"))
    assert k.name == "add_kernel"
    assert k.target.startswith("sm_90")
    assert [p[1] for p in k.params[:4]] == ["u64", "u64", "u64", "u32"]
    ops = {i.opcode for i in k.instrs}
    assert "ld.global.v4.b32" in ops and "st.global.v4.b32" in ops
    assert str(k).splitlines()[0] == f".entry add_kernel  (6 params, {len(k.instrs)} instructions)"


@pytest.mark.parametrize("name", ["vector_add", "vector_add_unaligned"])
def test_vector_add_equals_torch(name):
    n = 1000
    x, y = torch.randn(n), torch.randn(n)
    r = gpu.run_ptx(ptx(name), "add_kernel", 4, 64, [x, y, torch.zeros(n), n])
    assert torch.equal(r[2], x + y)
    t = r.totals()
    assert t["divergence_efficiency"] == 1.0
    assert t["global_sectors"] == 3 * 125  # 3 arrays x 4000 bytes / 32-byte sectors


def test_vectorised_loads_issue_fewer_requests():
    n = 512
    args = lambda: [torch.ones(n), torch.ones(n), torch.zeros(n), n]  # noqa: E731
    v4 = gpu.run_ptx(ptx("vector_add"), None, 2, 64, args()).totals()
    b32 = gpu.run_ptx(ptx("vector_add_unaligned"), None, 2, 64, args()).totals()
    assert b32["global_requests"] == 4 * v4["global_requests"]
    assert v4["global_sectors"] == b32["global_sectors"] == 3 * n * 4 // 32  # both fully coalesced
    assert v4["issued"] < b32["issued"]


def test_fused_pointwise_equals_torch():
    n = 700
    x, y = torch.randn(n).half(), torch.randn(n)
    r = gpu.run_ptx(ptx("fused_pointwise"), None, 3, 64, [x, y, torch.zeros(n), n])
    z = x.float() * 2 + y
    ref = torch.where(z > 0, z * torch.sigmoid(z), 0.5 * z * torch.sigmoid(z))
    torch.testing.assert_close(r[2], ref, rtol=1e-6, atol=1e-6)


def test_row_softmax_equals_torch():
    rows, cols = 3, 200
    a = torch.randn(rows, cols)
    r = gpu.run_ptx(ptx("row_softmax"), "softmax_kernel", rows, 64, [a, torch.zeros(rows, cols), cols, cols])
    torch.testing.assert_close(r[1], torch.softmax(a, 1), rtol=1e-6, atol=1e-7)
    t = r.totals()
    assert t["shared_requests"] > 0 and t["barriers"] == 3 * rows * 2  # 3 bar.sync x 2 warps per row
    assert t["bank_conflicts"] == 0


def test_row_softmax_looped_branches():
    rows, cols = 2, 150
    a = torch.randn(rows, cols)
    r = gpu.run_ptx(ptx("row_softmax_looped"), None, rows, 32, [a, torch.zeros(rows, cols), cols, cols])
    torch.testing.assert_close(r[1], torch.softmax(a, 1), rtol=1e-6, atol=1e-7)
    pcs = [i.pc for i in r.timeline if i.block == (0, 0, 0)]
    assert len(pcs) > len(set(pcs))  # the loops ran instructions more than once


def test_unknown_instruction_is_named():
    with pytest.raises(NotImplementedError, match="cp.async"):
        gpu.run_ptx(
            ptx("matmul_bf16_sm80"),
            None,
            1,
            128,
            [torch.zeros(64, 64).bfloat16()] * 2 + [torch.zeros(64, 64), 64, 64, 64],
        )


def test_regenerated_ptx_has_same_structure(tmp_path):
    """Triton (whatever version is installed) still emits the instruction mix the notebooks describe."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = pathlib.Path(__file__).parents[1] / "data" / "gpu" / "ptx" / "generate_ptx.py"
    subprocess.run(
        [sys.executable, str(script), str(tmp_path), "vector_add"],
        check=True,
        env=env,
        capture_output=True,
        timeout=120,
    )
    new, old = parse_ptx((tmp_path / "vector_add.ptx").read_text()), parse_ptx(ptx("vector_add"))
    base = lambda k: {i.op for i in k.instrs}  # noqa: E731
    assert base(new) == base(old)
    assert [p[1] for p in new.params[:4]] == [p[1] for p in old.params[:4]]
    n = 300
    x, y = torch.randn(n), torch.randn(n)
    r = gpu.run_ptx((tmp_path / "vector_add.ptx").read_text(), None, 2, 64, [x, y, torch.zeros(n), n])
    assert torch.equal(r[2], x + y)


def test_layer_norm_equals_torch():
    rows, cols = 2, 100
    x, w, b = torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)
    r = gpu.run_ptx(ptx("layer_norm"), None, rows, 128, [x, w, b, torch.zeros(rows, cols), cols, cols, 1e-5])
    ref = torch.nn.functional.layer_norm(x, (cols,), w, b, 1e-5)
    torch.testing.assert_close(r[3], ref, rtol=1e-5, atol=1e-5)


def test_integer_remainder_kernel():
    n, cols = 200, 7
    x, b = torch.randn(n), torch.randn(cols)
    r = gpu.run_ptx(ptx("bias_add_rem"), None, 2, 32, [x, b, torch.zeros(n), n, cols])
    assert torch.equal(r[2], x + b[torch.arange(n) % cols])
    assert "rem.s32" in {i.opcode for i in parse_ptx(ptx("bias_add_rem")).instrs}


def test_divergent_ptx_reconverges():
    from course_lib.gpu.reference import DIVERGENT_PTX

    r = gpu.run_ptx(DIVERGENT_PTX, "divergent", 1, 64, [np.zeros(64, np.int32)])
    i = np.arange(64)
    assert np.array_equal(r[0], np.where(i % 2 == 0, 2 * i, i + 100))
    w = r.warps[0]
    assert w.divergence_efficiency < 1.0
    store_pc = next(ins.index for ins in parse_ptx(DIVERGENT_PTX).instrs if ins.op == "st")
    assert [x.active for x in r.timeline if x.pc == store_pc] == [32, 32]  # one full store per warp
