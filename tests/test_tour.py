"""course_lib.tour: the glue the tour notebook uses, checked against the real tools."""

import dis

import torch

from course_lib import compat, tour


def test_model_and_inputs_are_seeded():
    a, b = tour.make_inputs(), tour.make_inputs()
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert tour.model(*a).shape == (8,)


def test_saved_tensors_are_exactly_what_the_backward_reads():
    fw, bw = compat.aot_graphs(tour.model, tour.make_inputs(requires_grad=True))
    assert tour.saved_tensors(fw) == tour.backward_inputs(bw) != []


def test_op_counts_see_gelu_decomposed():
    args = tour.make_inputs()
    counts = tour.op_counts(compat.make_fx(tour.model, *args, decompositions=compat.inductor_decompositions()))
    assert counts.get("aten.erf.default") == 1 and "aten.gelu.default" not in counts


def test_inductor_output_parsing():
    args = tour.make_inputs()
    with torch.no_grad():
        _, codes = compat.inductor_output_code(tour.model, *args)
    code = codes[0]
    assert tour.inductor_kernels(code) == ["cpp_fused_gelu_sum_0"]
    assert tour.inductor_externs(code) == ["addmm"]
    (src,) = tour.inductor_kernel_sources(code)
    assert src.lstrip().startswith("#include") and 'extern "C"' in src
    call = tour.inductor_wrapper_call(code)
    assert "extern_kernels.addmm" in call and "cpp_fused_gelu_sum_0(" in call


def test_fused_triton_kernel_matches_torch():
    x, w, b = tour.make_inputs(m=5, n=24)  # 24 columns: the block of 32 lanes is masked
    h = x @ w + b
    torch.testing.assert_close(tour.run_fused(h), torch.nn.functional.gelu(h).sum(-1), rtol=1e-4, atol=1e-4)


def test_fused_kernel_compiles_for_nvidia_and_amd():
    nv = tour.compile_fused("sm_90")
    assert "tt.reduce" in nv["ttir"] and "#blocked" in nv["ttgir"]
    assert ".target sm_90" in nv["ptx"] and "EXIT" in nv["sass"]
    amd = tour.compile_fused("gfx942")
    assert "gfx942" in amd["amdgcn"] and "s_endpgm" in amd["amdgcn"]


# ----------------------------------------------------------------------------- the exercises' cases and oracles


def _load_globals(fn) -> set[str]:
    return {ins.argval for ins in dis.get_instructions(fn) if ins.opname == "LOAD_GLOBAL"}


def test_bytecode_cases_know_their_global_reads():
    cases = tour.bytecode_cases(60)
    assert cases[0].fn is tour.model and cases[0].reads == {"torch"}
    assert all(_load_globals(c.fn) == c.reads for c in cases)
    # co_names alone (attributes, stored-only globals) is wrong on most of them
    assert sum(set(c.fn.__code__.co_names) != c.reads for c in cases) > 30
    assert any("COUNT =" in c.source for c in cases) and any("TOTAL +=" in c.source for c in cases)


def _guarded(t):
    return t.dtype, t.device, t.shape, t.stride(), t.requires_grad


def test_recompile_cases_agree_with_real_dynamo():
    labels, pairs = tour.recompile_cases()
    real = [tour.dynamo_compiles(tour.model, a, b) > 1 for a, b in pairs]
    assert real == [any(_guarded(p) != _guarded(q) for p, q in zip(a, b)) for a, b in pairs]
    assert 3 <= real.count(False) and 3 <= real.count(True)
    stride_blind = [any(_guarded(p)[:3] + _guarded(p)[4:] != _guarded(q)[:3] + _guarded(q)[4:] for p, q in zip(a, b))
                    for a, b in pairs]  # fmt: skip
    misses = [label for label, got, want in zip(labels, stride_blind, real) if got != want]
    assert misses and all("transposed" in label for label in misses)


def test_automatic_dynamic_shapes_compile_twice_for_four_sizes():
    assert tour.dynamo_compiles(tour.model, *(tour.make_inputs(m=m) for m in (4, 6, 8, 10))) == 2


def test_sass_global_loads_match_the_ptx_and_the_layout():
    for block, warps, aligned in tour.PTX_CASES:
        stages = tour.compile_fused("sm_90", block, warps, aligned)
        lines = [line for line in stages["ptx"].splitlines() if "ld.global" in line]
        width = sum(4 if ".v4" in line else 2 if ".v2" in line else 1 for line in lines)
        assert tour.sass_global_loads(stages["sass"]) == (len(lines), width)
        assert width == max(1, block // (32 * warps))
        assert (len(lines) < width) == (aligned and width > 1)
