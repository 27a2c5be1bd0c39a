"""A config that states no base resolves to its class's default (the row's ``rope.theta``), not 10000."""

from __future__ import annotations

import pytest

from refpos.models import model_positions

TEXT = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256}


def _thetas(cfg: dict) -> set[float]:
    return {layer.rope.theta for layer in model_positions(cfg).layers if getattr(layer, "rope", None) is not None}


def test_qwen2_5_omni_text_without_a_base_gets_the_class_default():
    cfg = {"model_type": "qwen2_5_omni_text", **TEXT,
           "rope_parameters": {"rope_type": "default", "mrope_section": [8, 12, 12]}}
    assert _thetas(cfg) == {1e6}  # Qwen2_5OmniTextConfig.default_theta


def test_a_stated_base_wins_over_the_class_default():
    cfg = {"model_type": "qwen2_5_omni_text", **TEXT,
           "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [8, 12, 12]}}
    assert _thetas(cfg) == {1e4}


def test_the_rows_of_types_sharing_code_keep_their_own_defaults():
    assert _thetas({"model_type": "sarvam_moe", **TEXT}) == {8e6}  # SarvamMoEConfig.default_theta
    assert _thetas({"model_type": "glm4_moe", **TEXT}) == {1e4}


@pytest.mark.parametrize(("layer_type", "theta"), [("full_attention", 1e6), ("sliding_attention", 1e4)])
def test_a_per_layer_type_rope_dict_without_bases_gets_each_types_default(layer_type, theta):
    cfg = {"model_type": "neomme", **TEXT, "layer_types": [layer_type] * 2,
           "rope_parameters": {layer_type: {"rope_type": "default"}}}
    assert _thetas(cfg) == {theta}  # NeoMMEConfig.default_theta
