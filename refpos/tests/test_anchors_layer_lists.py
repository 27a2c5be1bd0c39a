"""Anchors: the per-layer lists of a config (``layer_rope_theta``, ``rope_scaling_layers``, Cohere2-MoE's dense
prefix) against transformers' own models (5.25, torch CPU): the cos/sin each decoder layer receives, and which
attention modules rotate.

Each layer's ``position_embeddings`` are captured by a forward pre-hook on the decoder layer of a tiny model built
from the config; refpos's ``hf_layers`` gives that layer's RoPE (or none) and :func:`refpos.rope.core.rope_cos_sin`
its tables. Tolerance: transformers builds ``inv_freq`` and ``p·ω`` in float32, so a table entry differs from the
float64 one by at most ``3·p·max ω·2⁻²⁴ + 1e-6`` (the angle's rounding, then cos/sin's); with ``p < 16`` and
``ω ≤ 1``: ``atol = 3·16·2⁻²⁴ + 1e-6 ≈ 3.9e-6``, times the attention factor (≤ 2 here).
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.models import layers as rl
from refpos.rope.core import rope_cos_sin

torch = pytest.importorskip("torch", reason="layer-list anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="layer-list anchors need transformers")

pytestmark = pytest.mark.anchors

T = 16
ATOL = 2 * (3 * T * 2.0**-24 + 1e-6)
TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
        "intermediate_size": 64, "vocab_size": 128, "max_position_embeddings": 4096}


def _received(model_class, config_class, cfg):
    """The (cos, sin) each decoder layer of the transformers model receives (None: no position embeddings)."""
    torch.manual_seed(0)
    model = model_class(config_class(**cfg)).eval()
    got = {}

    def hook(index):
        def grab(module, args, kwargs):
            got[index] = kwargs.get("position_embeddings")
        return grab

    for i, layer in enumerate(model.layers):
        layer.register_forward_pre_hook(hook(i), with_kwargs=True)
    with torch.no_grad():
        model(input_ids=torch.arange(T)[None] % cfg["vocab_size"])
    return got, model


def _compare(cfg, got):
    schedule = rl.hf_layers(cfg)
    for layer in schedule:
        pe = got[layer.index]
        if layer.rope is None:
            assert pe is None, layer.index
            continue
        cos, sin = rope_cos_sin(np.arange(T), layer.rope)
        np.testing.assert_allclose(pe[0][0].double().numpy(), cos, atol=ATOL, err_msg=f"layer {layer.index}")
        np.testing.assert_allclose(pe[1][0].double().numpy(), sin, atol=ATOL, err_msg=f"layer {layer.index}")


def test_granite_swa_layer_bases():
    from transformers.models.granite_swa import configuration_granite_swa as c
    from transformers.models.granite_swa import modeling_granite_swa as m

    cfg = {"model_type": "granite_swa", **TINY, "num_hidden_layers": 4, "sliding_window": 8,
           "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}, "layer_rope_theta": [0, 1e4, 50.0, 1e4]}
    got, _ = _received(m.GraniteSWAModel, c.GraniteSWAConfig, cfg)
    _compare(cfg, got)


def test_muse_spark_flags_and_fill():
    from transformers.models.muse_spark import configuration_muse_spark as c
    from transformers.models.muse_spark import modeling_muse_spark as m

    cfg = {"model_type": "muse_spark_text", **TINY, "num_hidden_layers": 6, "sliding_window": 8,
           "moe_intermediate_size": 32, "moe_hidden_size": 64, "num_local_experts": 2, "num_experts_per_tok": 1,
           "bos_token_id": 0, "eos_token_id": 1, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}
    got, _ = _received(m.MuseSparkTextModel, c.MuseSparkTextConfig, cfg)
    _compare(cfg, got)
    listed = {**cfg, "layer_rope_theta": [0, 7.0, 0, 500.0, 1.0, 0]}
    got, _ = _received(m.MuseSparkTextModel, c.MuseSparkTextConfig, listed)
    _compare(listed, got)


def test_molmo2_unscaled_layers():
    from transformers.models.molmo2 import configuration_molmo2 as c
    from transformers.models.molmo2 import modeling_molmo2 as m

    cfg = {"model_type": "molmo2_text", **TINY, "num_hidden_layers": 4, "rope_scaling_layers": [1, 2],
           "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                               "original_max_position_embeddings": 1024}}
    got, _ = _received(m.Molmo2TextModel, c.Molmo2TextConfig, cfg)
    _compare(cfg, got)


def test_cohere2_moe_dense_prefix_rotates():
    from transformers.models.cohere2_moe import configuration_cohere2_moe as c
    from transformers.models.cohere2_moe import modeling_cohere2_moe as m

    cfg = {"model_type": "cohere2_moe", **TINY, "num_hidden_layers": 6, "sliding_window": 8, "rope_theta": 5e4,
           "layer_types": ["full_attention", "full_attention", "sliding_attention", "full_attention",
                           "sliding_attention", "full_attention"],
           "mlp_layer_types": ["dense", "dense", "sparse", "sparse", "sparse", "sparse"]}
    for pattern in (1, 4):
        model = m.Cohere2MoeModel(c.Cohere2MoeConfig(**cfg, prefix_dense_sliding_window_pattern=pattern))
        rotates = [a.self_attn.sliding_window is not None or a.self_attn.force_rope for a in model.layers]
        schedule = rl.hf_layers({**cfg, "prefix_dense_sliding_window_pattern": pattern})
        assert [layer.rope is not None for layer in schedule] == rotates, pattern
