"""course_lib.tour: the glue the tour notebook uses, checked against the real tools."""

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
