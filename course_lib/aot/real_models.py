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

import contextlib
import dataclasses
import math
from collections.abc import Callable

import torch

from course_lib import compat


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


def _model(model_cls: str, config_cls: str, inputs: Callable[[torch.Generator], dict],
           tweak: Callable[[torch.nn.Module], None] | None = None, **cfg):  # fmt: skip
    """A builder for any architecture: ``inputs(generator)`` makes its example inputs, ``tweak``
    adjusts the fresh model (in place)."""

    def build():
        import transformers

        config = getattr(transformers, config_cls)(**cfg)
        if hasattr(config, "_attn_implementation"):
            config._attn_implementation = "sdpa" if getattr(transformers, model_cls)._supports_sdpa else "eager"
        model = getattr(transformers, model_cls)(config)
        if tweak is not None:
            tweak(model)
        return model, inputs(torch.Generator().manual_seed(0))

    return build


def _ids(vocab: int = 96, seq: int = 8, **more: tuple) -> Callable[[torch.Generator], dict]:
    """Token ids ``(2, seq)`` as ``input_ids``, plus ``name=(vocab, seq)`` for more id inputs."""

    def inputs(g):
        out = {"input_ids": torch.randint(0, vocab, (2, seq), generator=g)}
        out.update({k: torch.randint(0, v, (2, n), generator=g) for k, (v, n) in more.items()})
        return out

    return inputs


def _with_mask(inputs: Callable[[torch.Generator], dict]) -> Callable[[torch.Generator], dict]:
    """``inputs`` plus an all-ones ``attention_mask``. LongT5 builds that mask itself only when
    ``not is_torchdynamo_compiling()``: under torch.compile, without one, its transient-global
    attention concatenates tensors of different batch sizes (any backend, eager's included)."""

    def with_mask(g):
        out = inputs(g)
        return {**out, "attention_mask": torch.ones_like(out["input_ids"])}

    return with_mask


@torch.no_grad()
def _unit_batch_norms(model: torch.nn.Module) -> None:
    """Batch-norm scales of 1 (torch's default). transformers draws EfficientNet's from N(0, 0.02),
    so twenty layers shrink its activations to 1e-32 and every gradient to 0: a check that passes
    whatever the backend computes."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.fill_(1.0)


@torch.no_grad()
def _random_tokens(model: torch.nn.Module) -> None:
    """DeiT's class, distillation and position embeddings start at 0 in transformers: the first
    two rows then enter layer norm (eps 1e-12) as all zeros, rstd = 1e6, and fp32 eager itself is
    3x off its own fp64 gradients there. Drawn from N(0, 0.02) the check is well conditioned."""
    emb = model.embeddings
    for p in (emb.cls_token, emb.distillation_token, emb.position_embeddings):
        p.normal_(0.0, 0.02)


def _pixels(size: int = 32):
    return lambda g: {"pixel_values": torch.randn(2, 3, size, size, generator=g)}


def _tensor(key: str, *shape: int):
    return lambda g: {key: torch.randn(*shape, generator=g)}


_NODROP = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_MOE = dict(num_local_experts=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[])  # fmt: skip
_SEQ2SEQ = dict(vocab_size=96, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0,
                attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip

#: More architectures, each with something the ten above lack (relative position buckets, alibi,
#: partial rotary, shared layers, disentangled attention, shifted windows, SE blocks, audio
#: front ends). Checked on CPU with :func:`probe`; see data/real_models/README.md for the outcome.
MORE: dict[str, RealModel] = {m.name: m for m in [
    RealModel("t5", "encoder-decoder", _model("T5Model", "T5Config", _ids(decoder_input_ids=(96, 4)), vocab_size=96,
              d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, relative_attention_num_buckets=8,
              dropout_rate=0.0)),
    RealModel("bart", "encoder-decoder", _model("BartModel", "BartConfig", _ids(), max_position_embeddings=64,
                                                **_SEQ2SEQ)),
    RealModel("opt", "decoder", _model("OPTForCausalLM", "OPTConfig", _ids(), vocab_size=96, hidden_size=32,
              num_hidden_layers=2, ffn_dim=64, num_attention_heads=4, max_position_embeddings=64,
              word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0)),
    RealModel("bloom", "decoder", _model("BloomForCausalLM", "BloomConfig", _ids(), vocab_size=96, hidden_size=32,
              n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0)),
    RealModel("gpt_neox", "decoder", _model("GPTNeoXForCausalLM", "GPTNeoXConfig", _ids(), vocab_size=96,
              hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              partial_rotary_factor=0.25, max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0)),
    RealModel("phi", "decoder", _model("PhiForCausalLM", "PhiConfig", _ids(), vocab_size=96, hidden_size=32,
              intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, partial_rotary_factor=0.5,
              max_position_embeddings=64, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)),
    RealModel("gemma", "decoder", _model("GemmaForCausalLM", "GemmaConfig", _ids(), vocab_size=96, hidden_size=32,
              intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
              max_position_embeddings=64)),
    RealModel("falcon", "decoder", _model("FalconForCausalLM", "FalconConfig", _ids(), vocab_size=96,
              hidden_size=32, num_hidden_layers=2, num_attention_heads=4, hidden_dropout=0.0,
              attention_dropout=0.0)),
    RealModel("distilbert", "encoder", _model("DistilBertModel", "DistilBertConfig", _ids(), vocab_size=96, dim=32,
              n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, dropout=0.0,
              attention_dropout=0.0)),
    RealModel("albert", "encoder", _model("AlbertModel", "AlbertConfig", _ids(), vocab_size=96, embedding_size=16,
                                          **_ENC)),
    RealModel("electra", "encoder", _model("ElectraModel", "ElectraConfig", _ids(), vocab_size=96,
                                           embedding_size=16, **_ENC)),
    RealModel("deberta_v2", "encoder", _model("DebertaV2Model", "DebertaV2Config", _ids(), vocab_size=96,
              relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8, max_relative_positions=16,
              **_ENC)),
    RealModel("swin", "vision transformer", _model("SwinModel", "SwinConfig", _pixels(), image_size=32,
              patch_size=4, embed_dim=16, depths=[2, 1], num_heads=[2, 4], window_size=4, drop_path_rate=0.0,
              **_NODROP)),
    RealModel("deit", "vision transformer", _model("DeiTModel", "DeiTConfig", _pixels(), _random_tokens, image_size=32,
                                                   patch_size=8, **_ENC)),
    RealModel("clip_vision", "vision transformer", _model("CLIPVisionModel", "CLIPVisionConfig", _pixels(),
              image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4)),
    RealModel("segformer", "vision transformer", _model("SegformerModel", "SegformerConfig", _pixels(),
              num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3],
              strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], drop_path_rate=0.0, **_NODROP)),
    RealModel("regnet", "cnn", _model("RegNetModel", "RegNetConfig", _pixels(), embedding_size=16,
                                      hidden_sizes=[16, 32], depths=[1, 1], groups_width=8)),
    RealModel("efficientnet", "cnn", _model("EfficientNetModel", "EfficientNetConfig", _pixels(64), _unit_batch_norms, image_size=64,
              width_coefficient=0.25, depth_coefficient=0.2, hidden_dim=320, drop_connect_rate=0.0, dropout_rate=0.0)),
    RealModel("whisper", "speech", _model("WhisperModel", "WhisperConfig",
              lambda g: {"input_features": torch.randn(2, 16, 32, generator=g),
                         "decoder_input_ids": torch.randint(0, 96, (2, 4), generator=g)},
              num_mel_bins=16, max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=1,
              eos_token_id=2, decoder_start_token_id=1, **_SEQ2SEQ)),
    RealModel("wav2vec2", "speech", _model("Wav2Vec2Model", "Wav2Vec2Config", _tensor("input_values", 2, 400),
              hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
              conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
              hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
              layerdrop=0.0, mask_time_prob=0.0)),
    # added 2026-12-04 from a sweep of 49 architectures the course had not seen (README has the outcomes)
    RealModel("qwen3_moe", "decoder", _model("Qwen3MoeForCausalLM", "Qwen3MoeConfig", _ids(), vocab_size=96, head_dim=8,
              **_MOE, **_DEC)),
    RealModel("deepseek_v3", "decoder", _model("DeepseekV3ForCausalLM", "DeepseekV3Config", _ids(), vocab_size=96,
              **{**_MOE, **_DEC}, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16,
              q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, head_dim=4, n_group=1,
              topk_group=1)),
    RealModel("phi3", "decoder", _model("Phi3ForCausalLM", "Phi3Config", _ids(), vocab_size=96, pad_token_id=0,
                                        **_DEC)),
    RealModel("cohere", "decoder", _model("CohereForCausalLM", "CohereConfig", _ids(), vocab_size=96, pad_token_id=0,
                                          **_DEC)),
    RealModel("gemma2", "decoder", _model("Gemma2ForCausalLM", "Gemma2Config", _ids(), vocab_size=96, head_dim=8,
              sliding_window=4, final_logit_softcapping=30.0, attn_logit_softcapping=50.0, **_DEC)),
    RealModel("gpt_neo", "decoder", _model("GPTNeoForCausalLM", "GPTNeoConfig", _ids(), vocab_size=96, hidden_size=32,
              num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=4,
              max_position_embeddings=64, resid_dropout=0.0, embed_dropout=0.0, attention_dropout=0.0)),
    RealModel("mamba", "state space", _model("MambaForCausalLM", "MambaConfig", _ids(), vocab_size=96, hidden_size=32,
              state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4)),
    RealModel("jamba", "hybrid", _model("JambaForCausalLM", "JambaConfig", _ids(), vocab_size=96, **_MOE, **_DEC,
              attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, mamba_d_state=8,
              mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4)),
    RealModel("xlnet", "encoder", _model("XLNetModel", "XLNetConfig", _ids(), vocab_size=96, d_model=32, n_layer=2,
              n_head=4, d_inner=64, dropout=0.0)),
    RealModel("funnel", "encoder", _model("FunnelModel", "FunnelConfig", _ids(seq=16), vocab_size=96,
              block_sizes=[1, 1], d_model=32, n_head=4, d_head=8, d_inner=64, hidden_dropout=0.0,
              attention_dropout=0.0, activation_dropout=0.0)),
    RealModel("modernbert", "encoder", _model("ModernBertModel", "ModernBertConfig", _ids(), vocab_size=96,
              hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, local_attention=4,
              global_attn_every_n_layers=2, max_position_embeddings=64, pad_token_id=0)),
    RealModel("mobilebert", "encoder", _model("MobileBertModel", "MobileBertConfig", _ids(), vocab_size=96,
              **{**_ENC, "hidden_size": 64}, embedding_size=16, intra_bottleneck_size=32, true_hidden_size=32,
              num_feedforward_networks=2)),
    RealModel("dinov2", "vision transformer", _model("Dinov2Model", "Dinov2Config", _pixels(), image_size=32,
                                                     patch_size=8, **_ENC)),
    RealModel("focalnet", "vision", _model("FocalNetModel", "FocalNetConfig", _pixels(), image_size=32, embed_dim=16,
                                           depths=[1, 1], focal_levels=[2, 2], drop_path_rate=0.0)),
    RealModel("hubert", "speech", _model("HubertModel", "HubertConfig", _tensor("input_values", 2, 400),
              hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
              conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
              hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
              layerdrop=0.0, mask_time_prob=0.0)),
    RealModel("phimoe", "decoder", _model("PhimoeForCausalLM", "PhimoeConfig", _ids(), vocab_size=96, **_MOE, **_DEC,
              router_jitter_noise=0.0, input_jitter_noise=0.0)),  # training-mode noise: no two runs agree
    RealModel("convbert", "encoder", _model("ConvBertModel", "ConvBertConfig", _ids(), vocab_size=96, embedding_size=32,
                                            head_ratio=2, conv_kernel_size=3, **_ENC)),
    RealModel("longt5", "encoder-decoder", _model("LongT5Model", "LongT5Config",
              _with_mask(_ids(decoder_input_ids=(96, 4))), vocab_size=96, d_model=32, d_kv=8, d_ff=64,
              num_layers=1, num_heads=4, relative_attention_num_buckets=8, dropout_rate=0.0, local_radius=2,
              encoder_attention_type="transient-global", global_block_size=4)),
    RealModel("beit", "vision transformer", _model("BeitModel", "BeitConfig", _pixels(), image_size=32, patch_size=8,
              use_relative_position_bias=True, drop_path_rate=0.0, **_ENC)),
    RealModel("dbrx", "decoder", _model("DbrxForCausalLM", "DbrxConfig", _ids(), vocab_size=96, d_model=32, n_heads=4,
              n_layers=2, max_seq_len=64, attn_config=dict(kv_n_heads=2, rope_theta=10000.0, clip_qkv=8.0),
              ffn_config=dict(ffn_hidden_size=64, moe_num_experts=4, moe_top_k=2))),
    RealModel("lfm2", "hybrid", _model("Lfm2ForCausalLM", "Lfm2Config", _ids(), vocab_size=96, pad_token_id=0, **_DEC,
              full_attn_idxs=[1], conv_L_cache=3, block_multiple_of=16, block_ff_dim=64,
              block_auto_adjust_ff_dim=False)),
    RealModel("hiera", "vision", _model("HieraModel", "HieraConfig", _pixels(64), image_size=[64, 64], patch_size=[7, 7],
              patch_stride=[4, 4], patch_padding=[3, 3], embed_dim=16, depths=[1, 1], num_heads=[1, 2],
              embed_dim_multiplier=2.0, num_query_pool=1, query_stride=[2, 2], masked_unit_size=[4, 4],
              masked_unit_attention=[True, False], drop_path_rate=0.0)),
    RealModel("bit", "cnn", _model("BitModel", "BitConfig", _pixels(), embedding_size=32, hidden_sizes=[32, 64],
              depths=[1, 1], layer_type="preactivation", global_padding="SAME", num_groups=8)),
    RealModel("wav2vec2_conformer", "speech", _model("Wav2Vec2ConformerModel", "Wav2Vec2ConformerConfig",
              _tensor("input_values", 2, 400), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
              intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
              num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_dropout=0.0, attention_dropout=0.0,
              activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0,
              position_embeddings_type="rotary", conv_depthwise_kernel_size=3, conformer_conv_dropout=0.0)),
    RealModel("recurrent_gemma", "hybrid", _model("RecurrentGemmaForCausalLM", "RecurrentGemmaConfig", _ids(),
              vocab_size=96, pad_token_id=0, **{**_DEC, "num_key_value_heads": 1}, head_dim=8,
              block_types=["recurrent", "attention"], lru_width=32, attention_window_size=4, conv1d_width=4)),
    RealModel("switch", "encoder-decoder", _model("SwitchTransformersModel", "SwitchTransformersConfig",
              _ids(decoder_input_ids=(96, 4)), vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2,
              num_decoder_layers=2, num_heads=4, num_experts=4, encoder_sparse_step=1, decoder_sparse_step=1,
              relative_attention_num_buckets=8, dropout_rate=0.0, router_jitter_noise=0.0)),
    # the third sweep: a subtraction of two attention maps (x + c reaches course_lib.aot as add.Scalar), and a
    # hybrid of attention and a Mamba-2 mixer whose cumsum is too long to decompose (a derivative rule for cumsum)
    RealModel("diffllama", "decoder", _model("DiffLlamaForCausalLM", "DiffLlamaConfig", _ids(), vocab_size=96,
                                             **_DEC, head_dim=8)),
    RealModel("falcon_h1", "hybrid", _model("FalconH1ForCausalLM", "FalconH1Config", _ids(), vocab_size=96,
                                            **_DEC, head_dim=8)),
    # RoPE as a complex product (view_as_complex(q) * freqs_cis): complex nodes take torch's formulas, and
    # Llama 4's mixture of experts scatters (scatter.src, which has no course rule)
    RealModel("deepseek_v2", "decoder", _model("DeepseekV2ForCausalLM", "DeepseekV2Config", _ids(), vocab_size=96,
              **{**_MOE, **_DEC}, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16,
              q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8, head_dim=4, n_group=1,
              topk_group=1)),
    RealModel("llama4", "decoder", _model("Llama4ForCausalLM", "Llama4TextConfig", _ids(), vocab_size=96,
              hidden_size=32, intermediate_size=32, intermediate_size_mlp=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=1,
              interleave_moe_layer_step=1, max_position_embeddings=64, attention_dropout=0.0, pad_token_id=0,
              no_rope_layers=[1, 1])),
    # from the architecture sweep (bench/sweep_architectures.py), built by tiny()'s one rule:
    # HRM runs all but its last reasoning cycles under torch.no_grad(); Qwen3.5 writes x[..., ::2]
    RealModel("hrm_text", "decoder", lambda: tiny("hrm_text").build()),
    RealModel("qwen3_5_text", "decoder", lambda: tiny("qwen3_5_text").build()),
]}  # fmt: skip


#: What :func:`tiny` sets, where an architecture's default config has the key (or an alias of it):
#: widths of 32, two layers, four heads, four experts, 96 tokens.
_TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             head_dim=8, vocab_size=96, max_position_embeddings=64, num_experts=4, num_local_experts=4,
             n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
             expert_intermediate_size=32, n_shared_experts=1, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=4,
             qk_nope_head_dim=4, v_head_dim=8, rotary_dim=4, n_group=1, topk_group=1, ffn_dim=64, d_model=32, d_ff=64,
             d_kv=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=64, decoder_ffn_dim=64, num_layers=2, num_heads=4, embed_dim=32, embedding_size=32,
             image_size=32, patch_size=8, num_channels=3, window_size=2, max_source_positions=16,
             max_target_positions=64, mask_time_prob=0.0, mask_feature_prob=0.0, num_frames=4, frames_per_clip=4,
             use_timm_backbone=False, use_pretrained_backbone=False, reassemble_hidden_size=32,
             fusion_hidden_size=32, head_hidden_size=16)  # fmt: skip

#: transformers' auto mappings by task: the model class for a model type (its inputs follow from
#: the class's ``main_input_name``: see :func:`_tiny_inputs`)
TASKS = {"causal_lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "masked_lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
         "image_classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
         "seq2seq_lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "ctc": "MODEL_FOR_CTC_MAPPING_NAMES",
         "speech_seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
         "semantic_segmentation": "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
         "depth_estimation": "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES",
         "object_detection": "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES",
         "video_classification": "MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES",
         "sequence_classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
         "token_classification": "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
         "question_answering": "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
         "multiple_choice": "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES",
         "audio_classification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"}  # fmt: skip
#: float config keys that draw random numbers in training (dropouts, skipped layers, a router's
#: jitter: SwitchTransformers, PhiMoE): tiny() sets them to 0 so eager agrees with itself
_RANDOM_IN_TRAINING = ("dropout", "pdrop", "drop_path", "layerdrop", "jitter")
#: a speech model's feature count a frame, by the first of these its config has
_FEATURES = ("feature_projection_input_dim", "num_mel_bins", "input_feat_per_channel", "feature_size", "n_mels")
#: frames of a tiny clip (a waveform: as many samples as its convolutions turn into this many frames)
_FRAMES = 16


#: a per-stage list of a vision model (as long as its ``depths``) keeps this many stages
_TINY_STAGES = 2
_STAGE_DEPTH = ("depths", "depth", "num_layers", "layers", "blocks")  # a key holding one of these: 1 a stage
_STAGE_WIDTH = ("hidden_size", "hidden_dim", "embed_dim", "dims", "channels", "widths")  # 16, 32, ...
_STAGE_HEADS = ("heads",)  # 1, 2, ... (16 channels a head)


def _shrink(config) -> dict:
    """tiny()'s rule, as constructor arguments for ``type(config)``: the keys of :data:`_TINY` that
    the config has (by name or through its ``attribute_map``), dropouts, layer drops and router
    jitter 0, a per-layer list cut to the first layer of each kind, a per-stage list of a vision
    model cut to its first stages with small widths, a dense-prediction backbone cut to the layers
    its head taps (:func:`_shrink_taps`), token ids moved inside the small vocabulary, and
    sub-configs (a vision or text tower's) shrunk by the same rule."""
    values = config.to_dict()
    alias = getattr(config, "attribute_map", {})
    present = set(values) | set(alias)
    kw = {k: v for k, v in _TINY.items() if k in present and not isinstance(values.get(alias.get(k, k)), (list, tuple))}
    if "qk_rope_head_dim" in kw and "head_dim" in kw:  # multi-head latent attention: RoPE runs on head_dim
        kw["head_dim"] = kw["qk_rope_head_dim"]
    stages = _shrink_stages(values)
    layers = getattr(config, "num_hidden_layers", None)
    layers = layers if isinstance(layers, int) and not stages else None  # ConvNeXt's is its stage count
    per_layer = [k for k, v in values.items() if isinstance(v, list) and layers and len(v) == layers > 1]
    if per_layer:  # keep one layer of each kind (full / linear / sliding attention...), at least two
        kinds = {}
        for i in range(layers):
            kinds.setdefault(repr([values[k][i] for k in per_layer]), i)
        keep = sorted(kinds.values())[:4]
        keep = keep if len(keep) > 1 else [0, 1]
        kw.update({k: [values[k][i] for i in keep] for k in per_layer}, num_hidden_layers=len(keep))
    kw.update(_every_layer_kind(values, kw.get("num_hidden_layers")))
    kw.update(stages)
    kw.update(_shrink_taps(values, kw))
    if isinstance(values.get("conv_dim"), list):  # a speech model's feature encoder: 512 channels a layer
        kw["conv_dim"] = [16] * len(values["conv_dim"])
    for k, v in values.items():  # a dense-prediction neck's widths (DPT: [96, 192, 384, 768]); never wider
        if k.endswith("hidden_sizes") and k not in kw and isinstance(v, list) and all(isinstance(x, int) for x in v):
            kw[k] = [min(x, 16 * 2 ** min(i, 3)) for i, x in enumerate(v)]  # than it was (MobileViT's 7: 640)
    if isinstance(values.get("image_size"), list) and len(values["image_size"]) == 2:  # Hiera, PVT-v2: [224, 224]
        kw["image_size"] = [_TINY["image_size"]] * 2
    for k, v in values.items():
        if isinstance(v, float) and any(w in k for w in _RANDOM_IN_TRAINING):
            kw[k] = 0.0
        # a nested config: CLIP's vision_config (getattr only there: Gemma 4 refuses a global head_dim)
        if isinstance(v, dict) and hasattr(sub := getattr(config, k, None), "to_dict"):
            kw[k] = {**v, **_shrink(sub)}
    vocab = kw.get("vocab_size", values.get("vocab_size", _TINY["vocab_size"]))
    if isinstance(vocab, int):  # token ids outside the small vocabulary move inside it
        for i, k in enumerate(sorted(k for k, v in values.items() if k.endswith("token_id")
                                     and isinstance(v, int) and v >= vocab)):  # fmt: skip
            kw[k] = i
    return kw


def _every_layer_kind(values: dict, layers) -> dict:
    """Layer kinds given by a pattern, not a per-layer list, made to appear within the small layer
    count: a cycled list of block kinds (RecurrentGemma's ``block_types``: recurrent, recurrent,
    attention) gets as many layers as its first sight of every kind needs; a kind every ``period``
    layers from ``offset`` (Jamba's attention: every 8th from the 4th) moves to the last layer, every
    ``layers`` layers. With no layer of a kind, eager failed (Jamba: a cache of no attention layer)."""
    if not isinstance(layers, int):
        return {}
    kw = {}
    kinds = values.get("block_types")
    if isinstance(kinds, list) and kinds and all(isinstance(k, str) for k in kinds) and len(kinds) != layers:
        needed = max(kinds.index(k) for k in set(kinds)) + 1
        kw["num_hidden_layers"] = layers = max(layers, needed)
    for key, period in values.items():
        offset = values.get(key.replace("_period", "_offset"))
        if key.endswith("_layer_period") and isinstance(period, int) and isinstance(offset, int) and offset >= layers:
            kw[key], kw[key.replace("_period", "_offset")] = layers, layers - 1
    return kw


def _shrink_taps(values: dict, kw: dict) -> dict:
    """A backbone whose layers a dense-prediction head taps (DPT's ``backbone_out_indices``
    [2, 5, 8, 11], Depth Anything's DINOv2 ``out_indices`` [9, 10, 11, 12]): as many layers as taps,
    at least the small count, and the taps moved to the last layers, in order (0-based hidden-state
    indices, or 1-based stage numbers with their ``stage{i}`` names)."""
    layers = kw.get("num_hidden_layers")
    taps = {k: v for k, v in values.items() if k in ("out_indices", "backbone_out_indices") and isinstance(v, list)
            and v and all(isinstance(i, int) for i in v)}  # fmt: skip
    if not isinstance(layers, int) or not taps or "depths" in values:
        return {}
    k = max(len(v) for v in taps.values())
    layers = max(layers, k)
    out = {"num_hidden_layers": layers}
    for key, v in taps.items():
        first = layers - len(v) + (1 if key == "out_indices" else 0)
        out[key] = list(range(first, first + len(v)))
    if isinstance(values.get("out_features"), list):
        out["out_features"] = [f"stage{i}" for i in out.get("out_indices", range(layers - k + 1, layers + 1))]
    if isinstance(values.get("stage_names"), list):
        out["stage_names"] = ["stem", *(f"stage{i}" for i in range(1, layers + 1))]
    return out


def _shrink_stages(values: dict) -> dict:
    """A vision model's per-stage lists (as long as ``depths``, or one longer: a stem first) cut to
    :data:`_TINY_STAGES` stages: one block a stage, widths 16, 32, ..., heads 1, 2, ...; its stage
    count (``num_stages``, ``num_encoder_blocks``) to match; a backbone's stage names and outputs
    left for the config to derive again."""
    depths = values.get("depths", values.get("depth"))  # CvT: "depth"
    if not (isinstance(depths, list) and len(depths) > _TINY_STAGES):
        return {}
    n, keep, kw = len(depths), _TINY_STAGES, {}
    for k, v in values.items():
        if isinstance(v, int) and not isinstance(v, bool) and v == n and ("stage" in k or "block" in k):
            kw[k] = keep  # num_stages, num_encoder_blocks
        if not isinstance(v, list) or len(v) not in (n, n + 1) or k in ("stage_names", "out_features", "out_indices"):
            continue
        cut = keep + (len(v) - n)
        if all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            if any(word in k for word in _STAGE_DEPTH):
                kw[k] = [1] * cut
                continue
            if any(word in k for word in _STAGE_WIDTH):
                kw[k] = [16 * 2 ** max(0, i - (len(v) - n)) for i in range(cut)]
                continue
            if any(word in k for word in _STAGE_HEADS):
                kw[k] = [2**i for i in range(cut)]
                continue
        kw[k] = v[:cut]
    if "out_features" in values:
        kw.update(out_features=None, out_indices=None)
    return kw


#: the columns of :func:`sweep_summary`, each the sweep outcomes it counts (bench/sweep_architectures.py)
SWEEP_COLUMNS = {"match eager": ("ok",), "match, some graphs by torch's AOT": ("ok_fallback",),
                 "rounding (as far from fp64 as eager)": ("rounding",), "wrong": ("wrong",),
                 "not checked": ("unbuildable", "eager_fails", "too_big", "dynamo_error", "noisy"),
                 "course error, crash or timeout": ("course_error", "crashed", "timeout")}  # fmt: skip


def sweep_summary(directory=None) -> list[tuple]:
    """One row per task of the recorded architecture sweeps (``data/real_models/sweep_<task>.jsonl``):
    the task, how many model types, then a count per :data:`SWEEP_COLUMNS` column."""
    import json
    import pathlib

    from course_lib import env

    directory = pathlib.Path(directory) if directory else env.data_dir() / "real_models"
    rows = []
    for path in sorted(directory.glob("sweep_*.jsonl")):
        outcomes = [json.loads(line)["outcome"] for line in path.read_text().splitlines() if line.strip()]
        counts = [sum(o in kinds for o in outcomes) for kinds in SWEEP_COLUMNS.values()]
        if sum(counts) != len(outcomes):
            raise ValueError(f"{path.name}: an outcome no column counts: {sorted(set(outcomes))}")
        rows.append((path.stem.removeprefix("sweep_"), len(outcomes), *counts))
    return rows


def tiny_types(task: str = "causal_lm") -> list[str]:
    """Every model type transformers has a class for, for ``task`` (a key of :data:`TASKS`)."""
    from transformers.models.auto import modeling_auto

    return sorted(getattr(modeling_auto, TASKS[task]))


def tiny(model_type: str, task: str = "causal_lm") -> RealModel:
    """Any architecture transformers knows, from its own default config made small by one rule
    (no hand-written config; :func:`_shrink` says what it sets). For sweeping architectures nobody
    here has looked at (bench/sweep_architectures.py); the result may still be large or refuse to
    build, which the sweep reports as such."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")

    def build_tiny():
        import transformers
        from transformers.models.auto import modeling_auto
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        classes = getattr(modeling_auto, TASKS[task])
        if model_type not in classes:
            raise ValueError(f"transformers has no {task} model for {model_type!r}")
        config_cls = CONFIG_MAPPING[model_type]
        default = config_cls()
        config = config_cls(**_shrink(default))
        config._attn_implementation = "eager"
        if getattr(config, "classifier_dropout", None) is None:  # a head's dropout falls back to 0.1 on None
            config.classifier_dropout = 0.0
        if getattr(config, "languages", None) and getattr(config, "default_language", "") is None:
            # one adapter a language and none named the default (X-MOD): eager refuses ids without lang_ids
            config.default_language = config.languages[0]
        if task == "sequence_classification":
            # a decoder-only classifier pools at each row's last token before padding: it needs a pad id
            _a_pad_token(config)
        names = classes[model_type]  # DeiT has two classes for the task: the first is the plain one
        model_cls = getattr(transformers, names[0] if isinstance(names, (list, tuple)) else names)
        if getattr(model_cls, "_supports_sdpa", False):
            config._attn_implementation = "sdpa"

        def build():
            try:
                model = model_cls(config)
            except ValueError as exc:  # a tower inside (VibeVoice's audio tokenizer) without SDPA: eager attention
                if "attention implementation" not in str(exc) or config._attn_implementation == "eager":
                    raise
                config._attn_implementation = "eager"
                model = model_cls(config)
            return model, _tiny_inputs(model, config, torch.Generator().manual_seed(0))

        built = build()
        if _runs(*built):
            return built
        for fix in _EAGER_FIXES:  # one at a time; the first whose model runs is kept
            undo = fix(config)
            if undo is None:  # does not apply to this config
                continue
            fixed = build()
            if _runs(*fixed):
                return fixed
            undo()
        return built  # the first model, whose failure eager reports

    return RealModel(f"{task}:{model_type}", task, build_tiny)


def _change(obj, name: str, value):
    """Set ``obj.name`` to ``value``; returns the undo (the old value set back), as an eager fix returns."""
    old = getattr(obj, name)
    setattr(obj, name, value)
    return lambda: setattr(obj, name, old)


def _one_key_head_a_query_head(config):
    """Grouped keys and values (2 heads for 4 queries) refused: multi-head latent attention that expands its
    latent to every query head and then groups the heads again (DeepSeek-V3.2, GLM-MoE-DSA, AXK2: 8 key
    heads met 4 query heads). As many key/value heads as query heads; returns the undo (None: no grouping)."""
    text = config.get_text_config()
    heads, groups = getattr(text, "num_attention_heads", None), getattr(text, "num_key_value_heads", None)
    if not (isinstance(heads, int) and isinstance(groups, int) and groups != heads):
        return None
    return _change(text, "num_key_value_heads", heads)


def _a_pad_token(config):
    """No pad id where the model needs one (ESM builds its attention mask from ``ids != pad``): the first
    plain token (returns the undo; None where the config has a pad id or no such key). A sequence
    classifier always gets one: it pools at each row's last token before padding. (A multimodal config
    keeps its token ids in its text config: Qwen3.5.)"""
    text = config.get_text_config()
    if getattr(text, "pad_token_id", 0) is not None:
        return None
    return _change(text, "pad_token_id", int(_plain_tokens(config)[0]))


def _a_hidden_size_of_thirds(config):
    """A hidden size of 48 where 32 does not divide as the model needs: LiLT cuts its layout embedding
    into 6 equal pieces (32 // 6 * 6 = 30 columns met 32). 48 is a multiple of 2, 3, 4, 6, 8, 12, 16 and 24
    (returns the undo; None where the hidden size is not the rule's 32)."""
    text = config.get_text_config()
    if getattr(text, "hidden_size", None) != _TINY["hidden_size"]:
        return None
    return _change(text, "hidden_size", 48)


#: What tiny() tries, one at a time, when the model as built fails in eager: each changes the config
#: in place and returns how to undo it, or None where it does not apply. A model that runs as built
#: keeps the one rule (:func:`_shrink`); these are the exceptions the sweeps found, each tried only
#: where the rule's model failed.
_EAGER_FIXES = (_one_key_head_a_query_head, _a_pad_token, _a_hidden_size_of_thirds)


def _runs(model: torch.nn.Module, inputs: dict) -> bool:
    """Does ``model`` run forward on ``inputs`` in eager (inference mode, its train flag restored)?"""
    training = model.training
    try:
        with torch.no_grad():
            model.eval()(**inputs)
        return True
    except Exception:  # noqa: BLE001  (a shape error, or a model's own ValueError: either way it does not run)
        return False
    finally:
        model.train(training)


def _tiny_inputs(model: torch.nn.Module, config, g: torch.Generator) -> dict:
    """Example inputs for a :func:`tiny` model, from what its class takes (``main_input_name``):
    token ids (2 x 8; 2 x 2 choices x 8 for a multiple-choice head; padded, with an attention mask,
    for a sequence classifier: :func:`_classified_ids`; an encoder-decoder gets decoder
    ids too), images at the config's size (a video: ``num_frames`` of them), a waveform of
    :data:`_FRAMES` frames after the feature encoder's convolutions (filter-bank frames where a model
    without one refuses a waveform: AST), or a clip of filter-bank features (frames x features, or
    features x frames where the model takes that)."""
    import inspect

    kind = getattr(model, "main_input_name", "input_ids")
    # a multimodal config keeps its vocabulary in its text tower: then the small one is assumed
    vocab = int(getattr(config, "vocab_size", _TINY["vocab_size"]))
    id_shape = (2, 2, 8) if type(model).__name__.endswith("ForMultipleChoice") else (2, 8)
    ids = lambda: torch.randint(0, vocab, id_shape, generator=g)  # noqa: E731
    signature = inspect.signature(model.forward).parameters
    decoder = {"decoder_input_ids": ids()} if "decoder_input_ids" in signature else {}
    if kind in ("pixel_values", "pixel_values_videos"):
        vision = getattr(config, "vision_config", None) or config  # CLIP, SigLIP: a vision tower's
        size = getattr(vision, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        channels = getattr(vision, "num_channels", 3)
        frames = getattr(vision, "num_frames", None) or getattr(vision, "frames_per_clip", None)  # a video
        shape = (2, frames, channels, size, size) if isinstance(frames, int) else (2, channels, size, size)
        return {kind: torch.randn(*shape, generator=g)}
    if kind == "input_values":  # raw audio: undo each convolution's (length - kernel) // stride + 1
        convs = list(zip(getattr(config, "conv_kernel", ()), getattr(config, "conv_stride", ())))
        samples = _FRAMES if convs else 4000  # convolutions sized in code (Moonshine): a quarter second
        for k, s in reversed(convs):
            samples = (samples - 1) * s + k
        wave = torch.randn(2, samples, generator=g)
        if convs:
            return {"input_values": wave, **decoder}
        # no feature encoder: a waveform, or filter-bank frames (AST: as many as its max_length)
        frames = config.max_length if isinstance(getattr(config, "max_length", None), int) else 2 * _FRAMES
        spectrogram = torch.randn(2, frames, _features(config), generator=g)
        return _first_accepted(model, [{kind: wave, **decoder}, {kind: spectrogram, **decoder}])
    if kind == "input_features":
        # Whisper's encoder takes exactly twice its positions (a stride-2 convolution halves them)
        frames = 2 * config.max_source_positions if hasattr(config, "max_source_positions") else 2 * _FRAMES
        clip = torch.randn(2, frames, _features(config), generator=g)
        return _first_accepted(model, [{kind: c, **decoder} for c in (clip, clip.transpose(1, 2).contiguous())])
    if type(model).__name__.endswith("ForSequenceClassification"):
        x = _classified_ids(ids(), config)
        pad = _special_tokens(config).get("pad_token_id")
        mask = {"attention_mask": (x != pad).long()} if "attention_mask" in signature and pad is not None else {}
        # without the mask where the tiny config refuses it (multi-head latent attention's SDPA)
        return _first_accepted(model, [{"input_ids": x, **mask, **decoder}, {"input_ids": x, **decoder}])
    return {"input_ids": ids(), **decoder}


def _special_tokens(config) -> dict[str, int]:
    """The config's special token ids (``pad_token_id``, ``eos_token_id``...) that are single ints
    (a multimodal config's: its text config's)."""
    config = config.get_text_config()
    values = {k: getattr(config, k, None) for k in dir(config) if k.endswith("_token_id")}
    return {k: v for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}


def _plain_tokens(config) -> torch.Tensor:
    """Every id of the vocabulary that is no special token, in order."""
    vocab = int(getattr(config, "vocab_size", _TINY["vocab_size"]))
    special = torch.tensor(sorted(set(_special_tokens(config).values())), dtype=torch.long)
    ids = torch.arange(vocab)
    return ids[~torch.isin(ids, special)]


def _classified_ids(ids: torch.Tensor, config) -> torch.Tensor:
    """Token ids as a sequence classifier pools them: no special token inside, then each row ends
    with ``eos`` (BART-like heads pool at it, and need as many a row); the second row is padded by
    3 after it (a decoder-only head pools at the last token before padding: an index per row;
    :func:`_tiny_inputs` adds the attention mask a padded batch comes with)."""
    plain = _plain_tokens(config)
    ids = plain[ids % len(plain)]
    special = _special_tokens(config)
    eos, pad = special.get("eos_token_id"), special.get("pad_token_id")
    if pad is not None:
        ids[1, -3:] = pad
    if eos is not None:
        ids[0, -1] = ids[1, -4 if pad is not None else -1] = eos
    return ids


def _features(config) -> int:
    """A speech model's feature count a frame: the first of :data:`_FEATURES` its config (or an
    audio encoder's config inside it) has, times its input channels where it counts per channel."""
    levels = [config, *(v for v in vars(config).values() if hasattr(v, "to_dict"))]
    features = next((getattr(c, k) for c in levels for k in _FEATURES if isinstance(getattr(c, k, None), int)), 80)
    return features * (getattr(config, "input_channels", 1) if hasattr(config, "input_feat_per_channel") else 1)


def _first_accepted(model: torch.nn.Module, candidates: list[dict]) -> dict:
    """The first of these input sets the model runs on in eager (the first if none)."""
    for inputs in candidates:
        try:
            with torch.no_grad():
                model(**inputs)
            return inputs
        except Exception:  # not these: the next ones
            continue
    return candidates[0]


def build(name: str, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """A fresh model (random weights from ``seed``) and its example inputs. ``name`` is one of
    :data:`MODELS` and :data:`MORE`, or ``task:model_type`` for :func:`tiny` (``causal_lm:olmoe``)."""
    known = {**MODELS, **MORE}
    task, _, model_type = name.partition(":")
    if name not in known and not (model_type and task in TASKS):
        raise ValueError(f"unknown real model {name!r}; choose from {', '.join(known)} (or task:model_type, "
                         f"task one of {', '.join(TASKS)})")  # fmt: skip
    torch.manual_seed(seed)
    return known[name].build() if name in known else tiny(model_type, task).build()


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
    grad_scale: float = 1.0  # largest |eager gradient|: 0 means the check compared nothing
    # grad_error's measure between two eager steps on identical copies: above zero when the model
    # draws random numbers in training (dropout, stochastic depth, router jitter), and then no
    # backend can match eager; GPU atomics (scatter-add backward) leave a trace of rounding here too
    eager_repeat_error: float = 0.0

    def ok(self, tol: float = 2e-3) -> bool:
        """Every error within ``tol``, something compared, and eager agreeing with itself (within
        ``tol / 10``: a model that does not is checked against noise, whatever the backend does)."""
        return (self.grad_scale > 0 and self.eager_repeat_error <= tol / 10
                and max(self.output_error, self.train_output_error, self.grad_error) <= tol)  # fmt: skip


def _rel(a: torch.Tensor, b: torch.Tensor, floor: float = 0.0) -> float:
    return float((a.detach().float() - b.detach().float()).abs().max()) / max(
        float(b.detach().abs().max()), floor, 1e-12
    )


@contextlib.contextmanager
def tf32(enabled: bool):
    """Let cuDNN convolutions and cuBLAS matmuls round their fp32 operands to TF32 (10 mantissa
    bits) or not, for the duration. torch's defaults on a GPU: convolutions on, matmuls off."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    with compat.torch_backend_flags_mutable():  # frozen once torch.testing's common_utils is imported
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        with compat.torch_backend_flags_mutable():
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def compare(name: str, backend="course_lib", device: str = "cpu", allow_tf32: bool = False,
            keep: dict | None = None, dtype: torch.dtype | None = None) -> Comparison:  # fmt: skip
    """Inference, then one training step (forward, loss, backward), compiled vs eager on copies.

    Both sides run in full fp32 unless ``allow_tf32``: with TF32 convolutions a value that differs
    in its last bit (another summation order) can round to another TF32 number, and a model whose
    batch norm sees only two values a channel (MobileNetV2 here) amplifies that to O(1) gradient
    differences for any backend, Inductor included (see :func:`tf32_sensitivity`).
    ``keep``, when given, receives the eager model, the compiled one and the inputs (for timing).
    ``dtype`` (``torch.bfloat16``, ``torch.float16``) casts the parameters and floating inputs of
    both sides: half-precision training, compared with eager in the same precision.
    """
    with tf32(allow_tf32):
        return _compare(name, backend, device, keep, dtype)


def _compare(name: str, backend, device: str, keep: dict | None, dtype: torch.dtype | None = None) -> Comparison:
    import copy
    import time

    from course_lib import compat

    compat.dynamo_reset()
    model, inputs = build(name)
    model = model.to(device=device, dtype=dtype)
    inputs = {k: v.to(device=device, dtype=dtype if v.is_floating_point() else None) for k, v in inputs.items()}
    twin, again = copy.deepcopy(model), copy.deepcopy(model)
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
    again.train()
    loss_of(again(**inputs)).backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    scale = max(float(g.abs().max()) for g in grads.values())
    worst, worst_name = _worst_grad(twin, grads, scale)
    if keep is not None:
        keep.update(eager=model, twin=twin, compiled=compiled, inputs=inputs)
    return Comparison(name, out_err, _rel(loss_c, loss_e), worst, worst_name, len(grads), (t1 - t0) - (t2 - t1),
                      scale, _worst_grad(again, grads, scale)[0])  # fmt: skip


@dataclasses.dataclass
class Precision:
    """A half-precision training step against the same step in float32: the worst relative
    gradient error of eager and of a backend, each against float32 (same rounded weights)."""

    name: str
    dtype: str
    eager: float
    backend: float
    worst_param: str
    # smallest relative gap between a router's k-th and (k+1)-th choice in eager's half-precision step
    # (:func:`topk_margins`; inf without top-k). Near the dtype's rounding (bf16: 2**-8 = 3.9e-3) a
    # backend that rounds in another order may send a token to another expert, and that token's whole
    # contribution moves between expert gradients: a large error that is not an arithmetic one.
    topk_margin: float = math.inf

    def ok(self, slack: float = 2.0, floor: float = 1e-3) -> bool:
        """No less accurate than eager in the same precision (within ``slack``). Where eager's own
        step overflowed (BEiT in float16: a NaN gradient), a finite one is enough."""
        if not math.isfinite(self.eager):
            return math.isfinite(self.backend)
        return self.backend <= slack * self.eager + floor


def precision(name: str, dtype: torch.dtype = torch.bfloat16, backend="course_lib", device: str = "cpu") -> Precision:
    """One training step of model ``name`` in ``dtype``, eager and through ``backend``, each measured
    against float32 eager on the same (rounded) weights and inputs.

    In half precision a backend cannot match eager bit for bit (it fuses, so it rounds less
    often), and some gradients are ill-conditioned: a layer norm weight's gradient sums products
    over every token, and in bfloat16 its worst element can be off by more than its own size for
    eager itself. So the question is not "equal to eager" but "as close to float32 as eager is".
    """
    import copy

    from course_lib import compat

    def step(module, inputs, compiled: bool) -> dict:
        module = copy.deepcopy(module).train()
        compat.dynamo_reset()
        loss_of((torch.compile(module, backend=backend) if compiled else module)(**inputs)).backward()
        return {n: p.grad.float() for n, p in module.named_parameters() if p.grad is not None}

    with tf32(False):
        model, inputs = build(name)
        half = model.to(device=device, dtype=dtype)
        half_in = {k: v.to(device=device, dtype=dtype if v.is_floating_point() else None) for k, v in inputs.items()}
        truth = step(copy.deepcopy(half).float(), {k: v.float() if v.is_floating_point() else v
                                                   for k, v in half_in.items()}, False)  # fmt: skip
        eager: dict = {}
        margins = topk_margins(lambda: eager.update(step(half, half_in, False)))
        compiled = step(half, half_in, True)
    scale = max(float(g.abs().max()) for g in truth.values())

    def worst(grads: dict) -> tuple[float, str]:
        # a parameter eager leaves without a gradient may get zeros (torch's AOT Autograd does the
        # same: an unused output's gradient is materialised); one eager differentiates must get one
        missing = sorted(set(truth) - set(grads))
        if missing:
            return float("inf"), ", ".join(missing)
        return max((_rel(grads[n], g, 1e-3 * scale), n) for n, g in truth.items())

    (e, _), (b, param) = worst(eager), worst(compiled)
    return Precision(name, str(dtype).removeprefix("torch."), e, b, param, min(margins, default=math.inf))


def graph_mismatches(name: str, dtype: torch.dtype | None = None, device: str = "cpu", tol: float = 1e-3) -> list[str]:
    """One training step of model ``name`` through the course (:func:`compare`, or :func:`precision`
    in ``dtype``), every graph it compiles checked by :func:`checking_graphs` against aten's kernels
    (``against="eager"``).
    Returns a line per output that differs.

    The loss and gradients can hide a wrong saved activation (Qwen3-MoE on CUDA: the planner recycled
    a buffer a ``split`` view still pointed into, and only some experts' gradients moved); this sees it.
    """
    with checking_graphs(tol) as problems:
        if dtype is None:
            compare(name, device=device)
        else:
            precision(name, dtype, device=device)
    return problems


@contextlib.contextmanager
def checking_graphs(tol: float = 1e-3, codegen: str | None = None, against: str = "eager"):
    """While inside, every graph the course compiles is checked output by output, saved activations
    included, on the inputs of each call; yields the list of lines it appends, one per output that
    differs: a floating one by more than ``tol`` of its largest value (with the rows), an integer one
    at all. ``codegen`` forces the course's code generator; ``against`` is the reference: ``eager``
    (the same FX graph run node by node by ``torch.fx.Interpreter``: aten's kernels) or ``cpp`` (the course's C++
    kernels). Each call hands the reference's outputs on, so one difference does not spread.
    (On CUDA the memory-efficient attention returns its random seed and offset, 0-d integers that
    differ on every run: expect those two lines per attention there.)"""
    import importlib

    if against not in ("eager", "cpp"):
        raise ValueError(f"against must be 'eager' or 'cpp', got {against!r}")
    compile_fx = importlib.import_module("course_lib.inductor.compile_fx")  # the module, not the function
    original, problems, count = compile_fx.compile_graph, [], [0]

    def checked(gm, example_inputs, **kw):
        compiled = original(gm, example_inputs, **{**kw, **({"codegen": codegen} if codegen else {})})
        if against == "cpp":
            reference = original(gm, example_inputs, **{**kw, "codegen": "cpp"})
        else:

            def reference(*inputs):
                with torch.no_grad():
                    return tuple(torch.fx.Interpreter(gm).run(*inputs))

        number, count[0] = count[0], count[0] + 1
        (out,) = [n for n in gm.graph.nodes if n.op == "output"]
        names = [getattr(a, "name", str(a)) for a in out.args[0]]

        def call(*inputs):
            got, want = compiled(*inputs), reference(*inputs)
            for i, (a, b) in enumerate(zip(got, want, strict=True)):
                if isinstance(a, torch.Tensor) and a.numel():
                    where = f"graph {number}, output {i} ({names[i]}) {tuple(a.shape)} {a.dtype}"
                    if not a.is_floating_point():
                        if not torch.equal(a, b):
                            problems.append(f"{where}: {int((a != b).sum())} elements differ")
                    elif (err := _rel(a, b)) > tol:
                        far = (a.float() - b.float()).abs() > tol * float(b.float().abs().max())
                        rows = far.reshape(a.shape[0] if a.dim() else 1, -1).any(1).nonzero().flatten().tolist()
                        problems.append(f"{where}: differs by {err:.3g} of its largest value, rows {rows[:16]}")
            return want

        return CheckedGraph(compiled, call)

    compile_fx.compile_graph = checked
    try:
        yield problems
    finally:
        compile_fx.compile_graph = original


class CheckedGraph:
    """A compiled graph whose call is checked (attributes come from the compiled graph)."""

    def __init__(self, compiled, call):
        self._compiled, self._call = compiled, call

    def __getattr__(self, name):
        return getattr(self._compiled, name)

    def __call__(self, *inputs):
        return self._call(*inputs)

    def call(self, args: list):  # the boxed call the torch.compile backend makes
        return self._call(*args)


def topk_margins(run: Callable[[], object]) -> list[float]:
    """Call ``run()`` and return, for every ``topk`` it dispatched, the smallest relative gap between
    the k-th value and the (k+1)-th (over the rows). A mixture-of-experts router picks experts with
    ``topk``; where this gap is within rounding, another backend's rounding may pick another expert."""
    from torch.utils._python_dispatch import TorchDispatchMode

    margins: list[float] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.topk.default:
                x, k, dim = args[0], args[1], args[2] if len(args) > 2 else -1
                if x.is_floating_point() and 0 < k < x.shape[dim]:
                    top = x.detach().float().topk(k + 1, dim).values
                    kth, next_ = top.narrow(dim, k - 1, 1), top.narrow(dim, k, 1)
                    margins.append(float(((kth - next_) / kth.abs().clamp_min(1e-30)).min()))
            return out

    with Record():
        run()
    return margins


def _worst_grad(module: torch.nn.Module, grads: dict, scale: float) -> tuple[float, str]:
    """Worst relative difference of ``module``'s parameter gradients from ``grads`` (eager's), each
    relative to max(its own largest |g|, 1e-3 * ``scale``), and that parameter's name; inf when a
    parameter eager differentiated got no gradient."""
    worst, worst_name = 0.0, ""
    for n, p in module.named_parameters():
        if n not in grads:
            continue
        if p.grad is None:
            return float("inf"), n
        err = _rel(p.grad, grads[n], 1e-3 * scale)
        if err > worst:
            worst, worst_name = err, n
    return worst, worst_name


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def step_ms(module: torch.nn.Module, run, inputs: dict, iters: int = 20, warmup: int = 3) -> float:
    """Median milliseconds of one training step (forward, loss, backward) of ``run`` (``module``
    itself or its compiled form). Each step is bracketed by ``torch.cuda.synchronize()`` on a GPU
    (kernels are asynchronous), so it covers the whole forward and backward, launches included.
    Gradients are reset to None before every step, the same for every backend."""
    import statistics
    import time

    device = next(iter(inputs.values())).device
    module.train()

    def step() -> float:
        module.zero_grad(set_to_none=True)
        _sync(device)
        t0 = time.perf_counter()
        loss_of(run(**inputs)).backward()
        _sync(device)
        return time.perf_counter() - t0

    for _ in range(warmup):
        step()
    return round(1e3 * statistics.median(step() for _ in range(iters)), 4)


def step_seconds(name: str, backend=None, device: str = "cpu", iters: int = 20, warmup: int = 3) -> dict:
    """Build a model, compile it with ``backend`` (None: eager) and time its training step:
    ``{"compile_s": the first step, compile included, "step_ms": median of the timed steps}``."""
    import time

    from course_lib import compat

    compat.dynamo_reset()
    model, inputs = build(name)
    model = model.to(device).train()
    inputs = {k: v.to(device) for k, v in inputs.items()}
    run = model if backend is None else torch.compile(model, backend=backend)
    t0 = time.perf_counter()
    loss_of(run(**inputs)).backward()
    _sync(device)
    first = time.perf_counter() - t0
    return {"compile_s": round(first, 3), "step_ms": step_ms(model, run, inputs, iters, warmup)}


def round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to the nearest TF32 value (fp32 with 10 mantissa bits), as tensor cores read it."""
    bits = t.detach().contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32).view(t.shape)


def tf32_sensitivity(name: str) -> tuple[float, str]:
    """How far a model's gradients move on CPU when every convolution rounds its operands to TF32
    (a GPU's default): worst relative parameter-gradient change (as in :class:`Comparison`) and
    where. A large number means the model is ill-conditioned, not that a backend is wrong."""
    import copy

    model, inputs = build(name)
    model.train()
    twin = copy.deepcopy(model)
    loss_of(model(**inputs)).backward()
    conv_forward = torch.nn.Conv2d._conv_forward

    def rounded(self, x, w, b):  # the rounded value forward, the gradient straight through
        return conv_forward(self, x + (round_to_tf32(x) - x.detach()), w + (round_to_tf32(w) - w.detach()), b)

    torch.nn.Conv2d._conv_forward = rounded
    try:
        loss_of(twin(**inputs)).backward()
    finally:
        torch.nn.Conv2d._conv_forward = conv_forward
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    scale = max(float(g.abs().max()) for g in grads.values())
    return _worst_grad(twin, grads, scale)


def fp32_rounding(name: str, backend=None) -> dict:
    """How far fp32 eager's own step is from fp64 eager's: the rounding floor of this model, as
    ``eager_grad`` (worst relative parameter-gradient difference, as in :class:`Comparison`; where in
    ``eager_where``) and ``eager_loss`` (relative). With ``backend``, the same distances of the
    backend's fp32 step (``backend_grad``, ``backend_where``, ``backend_loss``). A backend no further
    from fp64 than fp32 eager is rounds differently; it is not wrong. YOLOS's class token sits at
    6.4 (its fp32 gradient is mostly rounding); MobileNetV2's segmentation head at 0.71 (batch norm
    over two values a channel), where the course's step is at 0.04."""
    import copy

    model, inputs = build(name)
    model.train()
    wide = copy.deepcopy(model).double()
    loss_w = loss_of(wide(**{k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}))
    loss_w.backward()
    grads = {n: p.grad for n, p in wide.named_parameters() if p.grad is not None}
    scale = max(float(g.abs().max()) for g in grads.values())
    out = {}
    for who, module in [("eager", model)] + ([("backend", copy.deepcopy(model))] if backend is not None else []):
        run = torch.compile(module, backend=backend) if who == "backend" else module
        loss = loss_of(run(**inputs))
        loss.backward()
        err, where = _worst_grad(module, {n: g.float() for n, g in grads.items()}, scale)
        out.update({f"{who}_grad": err, f"{who}_where": where, f"{who}_loss": _rel(loss, loss_w)})
    return out


def compare_lengths(name: str, lengths: tuple[int, ...] = (8, 12, 5, 16), backend="course_lib") -> dict:
    """One compiled model trained at several sequence lengths, each step against eager's.

    Dynamo compiles the first length with static sizes; at the second it marks the length dynamic
    and compiles again, with a size symbol the course's AOT, lowering and code generation carry
    through (the guards then admit every later length). Token inputs only (``input_ids``,
    ``decoder_input_ids``): other inputs keep their shapes. Returns the worst relative loss and
    gradient errors over the lengths, and how many graphs came with symbolic sizes.
    """
    import copy

    from course_lib import compat

    compat.dynamo_reset()
    model, inputs = build(name)
    if not any(k.endswith("input_ids") for k in inputs):
        raise ValueError(f"{name} takes no token ids: its inputs have no sequence length to vary")
    model.train()
    twin = copy.deepcopy(model)
    graphs = {"static": 0, "symbolic": 0}
    inner = torch._dynamo.lookup_backend(backend) if isinstance(backend, str) else backend

    def counting(gm, example_inputs):
        values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]  # fake, as traced
        sizes = [s for v in values for s in ([v] if isinstance(v, torch.SymInt) else getattr(v, "shape", ()))]
        sym = any(isinstance(s, torch.SymInt) for s in sizes)
        graphs["symbolic" if sym else "static"] += 1
        return inner(gm, example_inputs)

    compiled = torch.compile(twin, backend=counting)
    vocab = int(inputs.get("input_ids", next(iter(inputs.values()))).max()) + 1
    g = torch.Generator().manual_seed(1)
    loss_err = grad_err = 0.0
    for n in lengths:
        step = {k: torch.randint(0, vocab, (v.shape[0], n), generator=g) if k.endswith("input_ids") else v
                for k, v in inputs.items()}  # fmt: skip
        for p in (*model.parameters(), *twin.parameters()):
            p.grad = None
        loss_e, loss_c = loss_of(model(**step)), loss_of(compiled(**step))
        loss_e.backward()
        loss_c.backward()
        grads = {k: p.grad for k, p in model.named_parameters() if p.grad is not None}
        scale = max(float(t.abs().max()) for t in grads.values())
        loss_err = max(loss_err, _rel(loss_c, loss_e))
        grad_err = max(grad_err, _worst_grad(twin, grads, scale)[0])
    return {"name": name, "lengths": list(lengths), "loss_error": loss_err, "grad_error": grad_err, **graphs}


def probe(name: str, backend="course_lib") -> dict:
    """One model through ``backend`` without strict mode: did it match eager, and which graphs
    left the course pipeline and why (course_lib.inductor's fallback report for this model)."""
    from course_lib.inductor import fallback_report

    report = fallback_report()
    report.clear()
    try:
        result = compare(name, backend=backend)
        outcome = {"ok": result.ok(), "comparison": dataclasses.asdict(result)}
    except Exception as exc:  # a crash is an outcome to record, not to propagate
        outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    outcome["fallbacks"] = [f"{n} x {kind} {what}: {reason}" for (kind, what, reason), n in report.counts.items()]
    return outcome
