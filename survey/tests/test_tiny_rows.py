"""Model types whose class defaults did not build, or were fed what their forward does not run on, and now are:
each test names the defect and shows the shrunk config or the chosen inputs no longer have it."""

from __future__ import annotations

import pytest

from survey import tiny


def test_a_rope_read_per_layer_type_is_stated_per_layer_type():
    """Cohere Compass's rotary module reads ``rope_parameters[layer_type]``; its class leaves the field None
    (empty once standardized), so every build raised ``KeyError: 'full_attention'``: the shrunk config states
    the class's default rope per layer type, composite and text config alike."""
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import AutoConfig

    for name in ("cohere_compass_text", "cohere_compass"):
        config = tiny.shrink(AutoConfig.for_model(name), "tiny")
        text = getattr(config, "text_config", config)
        assert set(text.rope_parameters) == set(text.layer_types), name
        assert all(rope["rope_theta"] == type(text).default_theta for rope in text.rope_parameters.values())


def test_a_layers_own_head_counts_shrink_as_the_configs():
    """Dots3's sliding layers state their own 64 heads in ``per_layer_config``; left unshrunk, the tiny model
    had 286M parameters (past the survey's bound at every strength): each kept layer's heads shrink as the
    config's do, key/value heads alike (one where fewer than the heads)."""
    shrunk = tiny.shrink_dict({"num_hidden_layers": 44, "num_attention_heads": 64, "num_key_value_heads": 64,
                               "hidden_size": 4096, "head_dim": 256,
                               "per_layer_config": {"02": {"num_attention_heads": 64, "num_key_value_heads": 64,
                                                           "qk_nope_head_dim": 192},
                                                    "03": {"num_key_value_heads": 8}}},
                              "tiny")
    assert shrunk["per_layer_config"] == {"02": {"num_attention_heads": tiny.HEADS, "num_key_value_heads": tiny.HEADS,
                                                 "qk_nope_head_dim": 192}, "03": {"num_key_value_heads": 1}}


def test_dots3_builds_within_the_surveys_bound_its_adapters_following_the_widths():
    """Dots3's text model (its sliding layers' heads) and its composite (the audio adapter's input and the vision
    adapter's output width must equal the widths they join) build tiny within the survey's parameter bound."""
    pytest.importorskip("torch", reason="counts a model's parameters: pip install torch transformers")
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import AutoConfig

    from survey import building, run

    for name in ("dots3_note_text", "dots3_note"):
        config = tiny.shrink(AutoConfig.for_model(name), "tiny")
        assert building.parameter_count(building.model_class(config), config) <= run.MAX_PARAMETERS, name
