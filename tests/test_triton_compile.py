"""compile_stages: every stage for every target, with no GPU (results cached on disk)."""

import pytest

from course_lib.triton import compile_stages, instruction_mix, kernels


@pytest.mark.parametrize("target", ["sm_80", "sm_90", "sm_100"])
def test_nvidia_stages(target):
    s = compile_stages(*kernels.signature("add"), target=target)
    assert list(s) == ["ttir", "ttgir", "llvm_dialect", "llir", "ptx", "sass"]
    assert "tt.load" in s["ttir"] and "#ttg.blocked" in s["ttgir"]
    assert "llvm.func @add_kernel" in s["llvm_dialect"] and "tt.load" not in s["llvm_dialect"]
    assert f".target sm_{target[3:]}" in s["ptx"].replace("\t", " ") or f"sm_{target[3:]}" in s["ptx"]
    mix = instruction_mix(s["sass"])
    assert mix.get("LDG", 0) > 0 and mix.get("STG", 0) > 0
    assert s.metadata["num_warps"] == 4 and s.metadata["registers"] > 0


def test_amd_stages():
    s = compile_stages(*kernels.signature("add"), target="gfx942")
    assert list(s) == ["ttir", "ttgir", "llvm_dialect", "llir", "amdgcn"]
    assert "global_load" in s["amdgcn"] or "buffer_load" in s["amdgcn"]
    assert s.metadata["warp_size"] == 64


def test_pass_dumps_named_and_staged():
    s = compile_stages(*kernels.signature("add"), target="sm_90", passes=True)
    names = s.pass_names()
    assert "ConvertTritonToTritonGPU" in names and "TritonGPUCoalesce" in names
    stages = [p.stage for p in s.passes]
    assert stages[0] == "ttir" and "ttgir" in stages and stages[-1] == "llir"
    assert stages == sorted(stages, key=["ttir", "ttgir", "llir"].index)


def test_dot_lowering_per_arch():
    k, sig, c = kernels.signature("matmul")
    assert "mma.sync" in compile_stages(k, sig, c, target="sm_80")["ptx"]
    assert "wgmma" in compile_stages(k, sig, c, target="sm_90")["ptx"]


def test_compile_after_interpreted_launch():
    """The interpreter must not leave triton.language patched (compat fixes a leak)."""
    import torch

    x = torch.randn(4, 20)
    assert torch.allclose(kernels.softmax(x), x.softmax(-1), atol=1e-6)
    s = compile_stages(*kernels.signature("softmax"), target="sm_90", num_warps=2)
    assert s.metadata["num_warps"] == 2 and "tt.reduce" in s["ttir"]


def test_aligned_vectorises_and_pipelines():
    k, sig, c = kernels.signature("add")
    plain = instruction_mix(compile_stages(k, sig, c, target="sm_90")["sass"])
    wide = instruction_mix(compile_stages(k, sig, c, target="sm_90", aligned=True)["sass"])
    assert plain["LDG"] == 16 and wide["LDG"] == 4  # 8 elements per thread: scalar vs 128-bit loads
    mk, msig, mc = kernels.signature("matmul_contiguous")
    consts = {**mc, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    shared = [compile_stages(mk, msig, consts, "sm_80", num_stages=s, aligned=True).metadata["shared"] for s in (2, 4)]
    assert shared == [8192, 24576]
