"""Module 5: occupancy, roofline/tiling, tensor-core numerics, collectives, sourced data files."""

import json
import pathlib

import numpy as np
import pytest
import torch

from course_lib import gpu
from course_lib.gpu import collectives, hierarchy, tensor_core
from course_lib.gpu import occupancy_calculator as occ

DATA = pathlib.Path(__file__).parent / "data" / "gpu"


@pytest.mark.parametrize(
    "arch,threads,regs,smem,warps,limit",
    [
        ("sm_90", 128, 64, 24576, 32, "registers"),
        ("sm_80", 256, 32, 0, 64, "warps"),
        ("sm_80", 64, 16, 0, 64, "warps"),
        ("sm_80", 32, 16, 0, 32, "blocks"),
        ("sm_90", 256, 32, 100_000, 16, "shared"),
        ("sm_80", 128, 255, 0, 8, "registers"),
    ],
)
def test_occupancy_table(arch, threads, regs, smem, warps, limit):
    o = gpu.occupancy(arch, threads, regs, smem)
    assert (o.active_warps, o.limiting) == (warps, limit)


def test_occupancy_with_limits_read_off_a_device():
    """An architecture the table lacks gets the device's budgets (compat.triton_resident_programs): with
    sm_80's budgets passed in, sm_100 gives sm_80's answer; with half the threads, half the warps."""
    got = gpu.occupancy("sm_100", 256, 32, 0, limits=occ.ARCHS["sm_80"])
    ref = gpu.occupancy("sm_80", 256, 32, 0)
    assert (got.blocks_per_sm, got.active_warps, got.limiting) == (ref.blocks_per_sm, ref.active_warps, ref.limiting)
    half = {**occ.ARCHS["sm_90"], "max_warps": 32, "max_threads": 1024}
    assert gpu.occupancy("sm_100", 256, 32, 0, limits=half).active_warps == 32


def test_occupancy_of_triton_kernels():
    meta = json.loads((DATA / "kernels.json").read_text())
    mm = meta["matmul_bf16_sm90"]
    o = gpu.occupancy("sm_90", 32 * mm["num_warps"], mm["registers"], mm["shared"])
    assert o.active_warps == 32 and o.limiting == "registers"


def test_latency_hiding_monotone():
    u = [occ.latency_hiding(w, 600, 20) for w in range(1, 40)]
    assert all(a <= b for a, b in zip(u, u[1:])) and u[-1] == 1.0
    assert occ.latency_hiding(occ.warps_needed(600, 20), 600, 20) == 1.0


def test_latency_default_is_the_recorded_hbm_latency():
    recorded = hierarchy.hierarchy()["gpus"]["H200"]["latency_cycles_approx"]["hbm"]
    assert occ.recorded_hbm_latency() == recorded
    assert occ.latency_hiding(8) == occ.latency_hiding(8, recorded) != occ.latency_hiding(8, 600)
    assert occ.warps_needed() == occ.warps_needed(recorded, 20) == -(-(20 + recorded) // 20)
    with pytest.raises(ValueError, match="no recorded GPU"):
        occ.recorded_hbm_latency("V100")


def test_hierarchy_table_is_sourced():
    h = hierarchy.hierarchy()
    assert set(h["gpus"]) == {"A100", "H100", "H200"}
    for g in h["gpus"].values():
        assert all(s in h["sources"] for s in g["source"])
    assert h["gpus"]["H200"]["hbm_bandwidth_gbs"] > h["gpus"]["H100"]["hbm_bandwidth_gbs"]


def test_roofline_and_tiling():
    assert hierarchy.attainable_tflops(0.1, 989, 4800) == pytest.approx(0.48)
    assert hierarchy.attainable_tflops(1e4, 989, 4800) == 989
    m = n = k = 256
    assert hierarchy.tiled_matmul_loads(m, n, k, 1, 1) == 2 * m * n * k
    assert hierarchy.tiled_matmul_loads(m, n, k, 64, 64) == 2 * m * n * k // 64
    assert hierarchy.tile_intensity(128, 128) > hierarchy.tile_intensity(32, 32)


def test_bf16_rounding_matches_torch():
    x = torch.randn(1000) * 100
    assert np.array_equal(tensor_core.to_bf16(x.numpy()), x.bfloat16().float().numpy())


def test_mma_tile_matches_torch():
    g = torch.Generator().manual_seed(0)
    a, b, c = torch.randn(16, 16, generator=g), torch.randn(16, 8, generator=g), torch.randn(16, 8, generator=g)
    d = tensor_core.mma_tile(a.numpy(), b.numpy(), c.numpy())
    ref = a.bfloat16().double() @ b.bfloat16().double() + c.double()
    np.testing.assert_allclose(d, ref.float().numpy(), rtol=1e-6, atol=1e-6)
    assert not np.allclose(d, (a @ b + c).numpy(), rtol=1e-6, atol=1e-6)  # bf16 inputs do lose bits


def test_tl_dot_becomes_mma_and_wgmma():
    sm80 = tensor_core.tensor_core_ops((DATA / "matmul_bf16_sm80.ptx").read_text())
    sm90 = tensor_core.tensor_core_ops((DATA / "matmul_bf16_sm90.ptx").read_text())
    assert any(op.startswith("mma.sync.aligned.m16n8k16") for op in sm80)
    assert any(op.startswith("wgmma.mma_async") for op in sm90)
    assert tensor_core.mma_shape("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == (64, 64, 16)


def test_ring_steps_simulation():
    vals = [[float(10 * r + c) for c in range(4)] for r in range(4)]
    final = collectives.ring_allreduce_steps(vals)[-1][2]
    want = [sum(v[c] for v in vals) for c in range(4)]
    assert all(row == want for row in final)
    assert len(collectives.ring_allreduce_steps(vals)) == 1 + 2 * 3


def test_alpha_beta_model():
    t = collectives.ring_allreduce_time(1e9, 8, 3e-6, 450e9)
    assert collectives.bus_bandwidth(1e9, t, 8) == pytest.approx(450e9, rel=0.02)
    assert collectives.tree_allreduce_time(1e3, 8, 3e-6, 450e9) < collectives.ring_allreduce_time(1e3, 8, 3e-6, 450e9)


def test_ring_and_tree_on_gloo_processes():
    res = collectives.check_allreduce(
        {"ring": collectives.ring_allreduce, "tree": collectives.tree_allreduce}, world=3, numel=50
    )
    for r in range(3):
        assert res[r]["ring"]["ok"] and res[r]["tree"]["ok"], res


def test_device_scripts_cpu_parts():
    import importlib.util

    root = pathlib.Path(__file__).parents[1] / "device"
    spec = importlib.util.spec_from_file_location("record_nccl", root / "record_nccl.py")
    nccl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nccl)
    full = nccl.sizes(dry_run=False)
    assert full[0] == 1024 and full[-1] == 1 << 30
    assert nccl.BUS_FACTOR["all_reduce"](2) == 1.0 and nccl.BUS_FACTOR["all_gather"](8) == 7 / 8
    spec = importlib.util.spec_from_file_location("record_gpu", root / "record_gpu.py")
    rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rec)
    assert callable(rec.occupancy_effects)


def test_record_gpu_kernels_run_in_interpreter():
    import importlib.util
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs Triton's interpreter (course_lib sets it when no GPU is present)")
    spec = importlib.util.spec_from_file_location(
        "record_gpu", pathlib.Path(__file__).parents[1] / "device" / "record_gpu.py"
    )
    rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rec)
    persist_copy, add_kernel = rec._kernels()
    x = torch.randn(1000)
    y = torch.zeros(1000)
    persist_copy[(3,)](x, y, 1000, BLOCK=128, num_warps=2)
    assert torch.equal(x, y)
    z = torch.zeros(1000)
    add_kernel[(1,)](x, y, z, 1000, BLOCK=1024, num_warps=4)
    assert torch.equal(z, 2 * x)
