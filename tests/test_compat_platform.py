"""One test per platform use of a private torch API in course_lib/compat.py."""

import pytest
import torch

from course_lib import compat


def _model(x, w, b):
    return torch.nn.functional.gelu(x @ w + b).sum(dim=-1)


def _args(grad=False):
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(4, 8, generator=g), torch.randn(8, 16, generator=g), torch.randn(16, generator=g)
    return x, w.requires_grad_(grad), b.requires_grad_(grad)


def test_require_names_the_missing_api():
    with pytest.raises(compat.CompatError, match=r"torch\._dynamo\.no_such_thing"):
        compat.require("torch._dynamo", "no_such_thing")


def test_dynamo_explain_and_guard_summary():
    e = compat.dynamo_explain(_model, *_args())
    assert (e.graph_count, e.graph_break_count) == (1, 0)
    summaries = [compat.guard_summary(g) for g in e.out_guards]
    assert any(src == "LOCAL L['x']" and kind == "TENSOR_MATCH" for src, kind, _ in summaries)
    assert all("<id>" in c or "___check_obj_id" not in c for _, _, code in summaries for c in code)


def test_aot_graphs_forward_and_backward():
    fw, bw = compat.aot_graphs(_model, _args(grad=True))
    fw_ops = {str(n.target) for n in fw.graph.nodes if n.op == "call_function"}
    assert "aten.mm.default" in fw_ops and "aten.gelu.default" in fw_ops
    assert any(n.op == "placeholder" and n.name.startswith("tangents") for n in bw.graph.nodes)


def test_make_fx_with_decomposition_tables():
    core = compat.make_fx(_model, *_args(), decompositions=compat.core_aten_decompositions())
    ops = {str(n.target) for n in core.graph.nodes if n.op == "call_function"}
    assert "aten.gelu.default" in ops, "GELU is a core ATen op: core_aten_decompositions keeps it"
    ind = compat.make_fx(_model, *_args(), decompositions=compat.inductor_decompositions())
    ops = {str(n.target) for n in ind.graph.nodes if n.op == "call_function"}
    assert "aten.erf.default" in ops and "aten.gelu.default" not in ops


def test_inductor_output_code_contains_cpp_kernel():
    args = _args()
    with torch.no_grad():
        result, codes = compat.inductor_output_code(_model, *args)
    torch.testing.assert_close(result, _model(*args))
    assert len(codes) == 1 and 'extern "C"' in codes[0] and "cpp_fused" in codes[0]
