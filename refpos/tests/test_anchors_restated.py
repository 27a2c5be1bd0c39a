"""Anchors: MiMo-V2-Flash's per-layer-type rotation, from a config carrying the published ``config.json``'s
top-level keys (``rope_theta``, ``swa_rope_theta``, ``partial_rotary_factor``, ``swa_head_dim``), against
transformers' own model (5.25, torch CPU): the cos/sin each decoder layer receives.

Each layer's ``position_embeddings`` are captured by a forward pre-hook on the decoder layer of a tiny model built
from the config; refpos's ``model_positions`` gives that layer's RoPE and :func:`refpos.rope.core.rope_cos_sin`
its tables. Tolerance: transformers builds ``inv_freq`` and ``p·ω`` in float32, so a table entry differs from the
float64 one by at most ``3·p·max ω·2⁻²⁴ + 1e-6`` (the angle's rounding, then cos/sin's); with ``p < 16`` and
``ω ≤ 1``: ``atol = 3·16·2⁻²⁴ + 1e-6 ≈ 3.9e-6`` (attention factor 1).

Two wrong answers are shown outside it: the sliding-window base used for the full-attention layers, and the
rotated fraction ignored (the whole head rotated). A config whose ``swa_rope_theta`` differs from the base the
class reads is refused by name, and the model is shown to rotate by the class's base, not the key's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refpos.models import model_positions
from refpos.models.records import Refused
from refpos.rope.core import rope_cos_sin

torch = pytest.importorskip("torch", reason="MiMo-V2-Flash anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="MiMo-V2-Flash anchors need transformers")

pytestmark = pytest.mark.anchors

T = 16
ATOL = 3 * T * 2.0**-24 + 1e-6
#: the published keys at their published values (survey/vllm_engine/published/MiMoV2FlashForCausalLM.json), the
#: widths shrunk: head_dim 48 rotates int(48 · 0.334) = 16 channels
PUBLISHED = {"model_type": "mimo_v2_flash", "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 48, "v_head_dim": 16, "intermediate_size": 64,
             "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2, "vocab_size": 128,
             "max_position_embeddings": 4096, "rope_theta": 5000000, "swa_rope_theta": 10000,
             "partial_rotary_factor": 0.334, "sliding_window_size": 8, "swa_head_dim": 48, "swa_v_head_dim": 16,
             "hybrid_layer_pattern": [0, 1, 1, 1, 1, 0], "routed_scaling_factor": None}


def _model_and_config(cfg):
    from transformers.models.mimo_v2_flash import configuration_mimo_v2_flash as c
    from transformers.models.mimo_v2_flash import modeling_mimo_v2_flash as m

    config = c.MiMoV2FlashConfig(**cfg)
    torch.manual_seed(0)
    return m.MiMoV2FlashModel(config).eval(), config.to_dict()


def _received(cfg):
    """The (cos, sin) each decoder layer of transformers' model receives, and the config dict it was built from."""
    model, values = _model_and_config(cfg)
    got = {}

    def hook(index):
        def grab(module, args, kwargs):
            got[index] = tuple(t[0].double().numpy() for t in kwargs["position_embeddings"])
        return grab

    for i, layer in enumerate(model.layers):
        layer.register_forward_pre_hook(hook(i), with_kwargs=True)
    with torch.no_grad():
        model(input_ids=torch.arange(T)[None] % cfg["vocab_size"])
    return got, values


def _error(layer_rope, received):
    cos, sin = rope_cos_sin(np.arange(T), layer_rope)
    if cos.shape != received[0].shape:
        return np.inf
    return max(np.abs(cos - received[0]).max(), np.abs(sin - received[1]).max())


@pytest.fixture(scope="module")
def published():
    return _received(PUBLISHED)


def test_each_layer_type_its_base_and_width(published):
    got, values = published
    answer = model_positions(values)
    assert [layer.layer_type for layer in answer.layers] == values["layer_types"]
    for layer in answer.layers:
        full = layer.layer_type == "full_attention"
        assert (layer.rope.theta, layer.rope.head_dim, layer.rope.rotary_dim) == (5e6 if full else 1e4, 48, 16)
        assert got[layer.index][0].shape == (T, 16)  # transformers rotates int(48 · 0.334) = 16 channels
        assert _error(layer.rope, got[layer.index]) <= ATOL, layer.index
    assert not {"rope_theta", "swa_rope_theta", "partial_rotary_factor", "swa_head_dim"} & set(answer.not_modelled)


def test_wrong_answers_are_caught(published):
    got, values = published
    answer = model_positions(values)
    full = next(layer for layer in answer.layers if layer.layer_type == "full_attention")
    sliding = next(layer for layer in answer.layers if layer.layer_type == "sliding_attention")
    swa_base = dataclasses.replace(full.rope, theta=sliding.rope.theta)  # the sliding base on a full layer
    assert _error(swa_base, got[full.index]) > 100 * ATOL
    whole = dataclasses.replace(sliding.rope, partial_rotary_factor=1.0, rotary_dim=48)  # the fraction ignored
    assert _error(whole, got[sliding.index]) > 100 * ATOL
    cos, _ = rope_cos_sin(np.arange(T), whole)
    assert np.abs(cos[:, :8] - got[sliding.index][0][:, :8]).max() > 100 * ATOL  # the same channels differ too


def test_a_key_the_class_does_not_read_is_refused_by_name():
    got, values = _received({**PUBLISHED, "swa_rope_theta": 77.0})
    answer = model_positions(values)
    assert all(isinstance(layer, Refused) and "swa_rope_theta=77.0" in layer.reason for layer in answer.layers)
    assert set(answer.not_modelled) >= {"swa_rope_theta"}
    kept = model_positions({**values, "swa_rope_theta": 10000})  # transformers rotates by the class's 1e4 anyway
    sliding = next(layer for layer in kept.layers if layer.layer_type == "sliding_attention")
    assert _error(sliding.rope, got[sliding.index]) <= ATOL
    assert _error(dataclasses.replace(sliding.rope, theta=77.0), got[sliding.index]) > 100 * ATOL


def test_a_restated_key_must_be_a_number():
    _, values = _received(PUBLISHED)
    with pytest.raises(TypeError, match="swa_rope_theta must be a number"):
        model_positions({**values, "swa_rope_theta": "1e4"})
