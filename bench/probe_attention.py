"""Probe (a CUDA machine): which attention kernel ``scaled_dot_product_attention`` picks for each
real model, in eager and in course_lib's trace, and why a trace may fall to the math path.

For each model of course_lib.aot.real_models: the SDPA calls of Dynamo's graph (their argument
shapes, dtypes, strides, whether an input requires grad), ``torch._fused_sdp_choice`` on those
arguments (0 math, 1 flash, 2 efficient, 3 cudnn), and the attention ops of the ATen graphs
course_lib compiled. Prints one line a call.
"""

import sys

import torch

import course_lib.inductor  # noqa: F401  (registers the backend; its compile_fx module is patched below)
from course_lib.aot import real_models

BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def describe(t):
    if not isinstance(t, torch.Tensor):
        return repr(t)
    return f"{tuple(t.shape)} {str(t.dtype)[6:]} stride {t.stride()} grad {t.requires_grad} {type(t).__name__}"


def main(names):
    import torch.nn.functional as F

    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if not torch.compiler.is_compiling():
            choice = torch._fused_sdp_choice(
                q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
            )
            seen.append(
                f"  eager sdpa: q {describe(q)} k {describe(k)} mask {describe(attn_mask)} causal {is_causal} "
                f"gqa {enable_gqa} -> {BACKENDS.get(int(choice), choice)}"
            )
        return real(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
        )

    F.scaled_dot_product_attention = spy
    torch.nn.functional.scaled_dot_product_attention = spy
    compile_fx = sys.modules["course_lib.inductor.compile_fx"]
    graphs = []
    orig = compile_fx.compile_graph

    def spy_compile(gm, *a, **k):
        graphs.append(
            sorted(
                {
                    str(n.target)
                    for n in gm.graph.nodes
                    if n.op == "call_function" and ("attention" in str(n.target) or "bmm" in str(n.target))
                }
            )
        )
        return orig(gm, *a, **k)

    compile_fx.compile_graph = spy_compile
    from course_lib import decomp

    def why(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        """While course_lib traces: can the efficient kernel take these arguments, and if not, why."""
        import warnings

        from torch.backends.cuda import SDPAParams, can_use_efficient_attention

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ok = can_use_efficient_attention(SDPAParams(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa), True)
        graphs.append(
            f"traced sdpa: q {describe(q)} k {describe(k)} mask {describe(attn_mask)} causal {is_causal} "
            f"-> efficient {ok} {[str(w.message)[:200] for w in caught]}"
        )
        return NotImplemented

    decomp.BEFORE_DISPATCH[torch._C._nn.scaled_dot_product_attention] = why
    course_aot = compile_fx._course_aot

    def spy_aot(gm, example_inputs, *a, **k):
        from course_lib import decomp

        for n in gm.graph.nodes:
            if n.op == "call_function" and "scaled_dot_product" in str(n.target):
                vals = [getattr(x, "meta", {}).get("example_value") for x in n.args[:3]]
                graphs.append(
                    f"dynamo node {n.target} kwargs {sorted(n.kwargs)} args: " + "; ".join(describe(v) for v in vals)
                )
        try:
            aten_graph = decomp.trace(gm, *example_inputs, table={})
            graphs.append(
                "undecomposed trace: "
                + str(
                    sorted(
                        {
                            str(n.target)
                            for n in aten_graph.nodes
                            if n.op == "call_function" and ("attention" in str(n.target) or "bmm" in str(n.target))
                        }
                    )
                )
            )
        except Exception as exc:
            graphs.append(f"undecomposed trace failed: {exc}"[:200])
        return course_aot(gm, example_inputs, *a, **k)

    compile_fx._course_aot = spy_aot
    for name in names:
        seen.clear(), graphs.clear()
        try:
            r = real_models.compare(name, device="cuda")
            print(name, "ok" if r.ok() else "WRONG", r.grad_error, flush=True)
        except Exception as exc:
            print(name, "error", type(exc).__name__, str(exc)[:300], flush=True)
        for line in dict.fromkeys(seen):
            print(line)
        for g in graphs:
            print("  compiled graph:", g)


if __name__ == "__main__":
    main(sys.argv[1:] or ["bert", "vit", "llama"])
