"""Real third-party models for the course backend: Hugging Face ``transformers`` architectures
built from tiny configs with random weights (nothing is downloaded).

Used by tests/test_real_models.py (inference and one training step through
``backend="course_lib"`` against eager), bench/bench_real_models.py and
device/record_real_models.py. Each entry builds ``(model, example inputs)``; the configs are
as small as the architecture allows (one or two layers, widths of 16-64, 8 tokens, 32x32 images)
so the whole suite compiles in minutes on two CPU cores. Dropout is 0 so eager and compiled
training steps see the same function.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch


@dataclasses.dataclass(frozen=True)
class RealModel:
    name: str
    family: str  # "decoder" | "encoder" | "vision transformer" | "cnn"
    build: Callable[[], tuple[torch.nn.Module, dict]]


def _text(model_cls, config_cls, vocab: int = 96, seq: int = 8, **cfg):
    def build():
        import transformers

        config = getattr(transformers, config_cls)(vocab_size=vocab, **cfg)
        config._attn_implementation = "sdpa"
        model = getattr(transformers, model_cls)(config)
        g = torch.Generator().manual_seed(0)
        return model, {"input_ids": torch.randint(0, vocab, (2, seq), generator=g)}

    return build


def _image(model_cls, config_cls, size: int = 32, **cfg):
    def build():
        import transformers

        model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**cfg))
        g = torch.Generator().manual_seed(0)
        return model, {"pixel_values": torch.randn(2, 3, size, size, generator=g)}

    return build


_DEC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64, attention_dropout=0.0)  # fmt: skip
_ENC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip

MODELS: dict[str, RealModel] = {m.name: m for m in [
    RealModel("gpt2", "decoder", _text("GPT2LMHeadModel", "GPT2Config", n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
    RealModel("llama", "decoder", _text("LlamaForCausalLM", "LlamaConfig", **_DEC)),
    RealModel("qwen2", "decoder", _text("Qwen2ForCausalLM", "Qwen2Config", **_DEC)),
    RealModel("mistral", "decoder", _text("MistralForCausalLM", "MistralConfig", **_DEC)),
    RealModel("bert", "encoder", _text("BertModel", "BertConfig", **_ENC)),
    RealModel("roberta", "encoder", _text("RobertaModel", "RobertaConfig", **_ENC)),
    RealModel("vit", "vision transformer", _image("ViTModel", "ViTConfig", image_size=32, patch_size=8, **_ENC)),
    RealModel("mobilenet_v2", "cnn", _image("MobileNetV2Model", "MobileNetV2Config", image_size=32,
                                            depth_multiplier=0.35)),
    RealModel("resnet", "cnn", _image("ResNetModel", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32],
                                      depths=[1, 1], layer_type="basic")),
    RealModel("convnext", "cnn", _image("ConvNextModel", "ConvNextConfig", hidden_sizes=[16, 32], depths=[1, 1],
                                        num_stages=2, drop_path_rate=0.0)),
]}  # fmt: skip


def build(name: str, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """A fresh model (random weights from ``seed``) and its example inputs."""
    if name not in MODELS:
        raise ValueError(f"unknown real model {name!r}; choose from {', '.join(MODELS)}")
    torch.manual_seed(seed)
    return MODELS[name].build()


def first_output(out) -> torch.Tensor:
    """The main tensor of a transformers output (logits or last hidden state)."""
    for key in ("logits", "last_hidden_state"):
        if getattr(out, key, None) is not None:
            return getattr(out, key)
    return out[0]


def loss_of(out) -> torch.Tensor:
    """A scalar every parameter feeds: mean square of the main output (random weights, no labels)."""
    return first_output(out).float().pow(2).mean()


@dataclasses.dataclass
class Comparison:
    """One model through a backend against eager: worst output and gradient differences."""

    name: str
    output_error: float  # max |compiled - eager| of the inference output, relative to max |eager|
    train_output_error: float
    grad_error: float  # worst over parameters of max |dg| / max(|g|, 1e-3 * largest |g| of the model)
    worst_param: str
    params: int
    compile_s: float  # first training call (compile included) minus an eager call

    def ok(self, tol: float = 2e-3) -> bool:
        return max(self.output_error, self.train_output_error, self.grad_error) <= tol


def _rel(a: torch.Tensor, b: torch.Tensor, floor: float = 0.0) -> float:
    return float((a.detach().float() - b.detach().float()).abs().max()) / max(
        float(b.detach().abs().max()), floor, 1e-12
    )


def compare(name: str, backend="course_lib", device: str = "cpu") -> Comparison:
    """Inference, then one training step (forward, loss, backward), compiled vs eager on copies."""
    import copy
    import time

    from course_lib import compat

    compat.dynamo_reset()
    model, inputs = build(name)
    model = model.to(device)
    inputs = {k: v.to(device) for k, v in inputs.items()}
    twin = copy.deepcopy(model)
    compiled = torch.compile(twin, backend=backend)
    model.eval(), twin.eval()
    with torch.no_grad():
        out_err = _rel(first_output(compiled(**inputs)), first_output(model(**inputs)))
    model.train(), twin.train()
    t0 = time.perf_counter()
    loss_c = loss_of(compiled(**inputs))
    loss_c.backward()
    t1 = time.perf_counter()
    loss_e = loss_of(model(**inputs))
    loss_e.backward()
    t2 = time.perf_counter()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    scale = max(float(g.abs().max()) for g in grads.values())
    worst, worst_name = 0.0, ""
    for n, p in twin.named_parameters():
        if n not in grads:
            continue
        if p.grad is None:
            worst, worst_name = float("inf"), n
            break
        err = _rel(p.grad, grads[n], 1e-3 * scale)
        if err > worst:
            worst, worst_name = err, n
    return Comparison(name, out_err, _rel(loss_c, loss_e), worst, worst_name, len(grads), (t1 - t0) - (t2 - t1))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step_seconds(name: str, backend=None, device: str = "cpu", iters: int = 20, warmup: int = 3) -> dict:
    """Time one training step (forward, loss, backward) of a model, eager (``backend=None``) or
    compiled: ``{"compile_s": first call, "step_ms": median of `iters` timed steps}``.

    Each timed step is bracketed by ``torch.cuda.synchronize()`` on a GPU (the kernels are
    asynchronous), so a step's time covers its whole forward and backward. Gradients are reset
    to None between steps, the same for every backend.
    """
    import statistics
    import time

    from course_lib import compat

    compat.dynamo_reset()
    model, inputs = build(name)
    model = model.to(device).train()
    inputs = {k: v.to(device) for k, v in inputs.items()}
    run = model if backend is None else torch.compile(model, backend=backend)

    def step() -> float:
        model.zero_grad(set_to_none=True)
        _sync(device)
        t0 = time.perf_counter()
        loss_of(run(**inputs)).backward()
        _sync(device)
        return time.perf_counter() - t0

    first = step()
    for _ in range(warmup):
        step()
    times = [step() for _ in range(iters)]
    return {"compile_s": round(first, 3), "step_ms": round(1e3 * statistics.median(times), 4)}
