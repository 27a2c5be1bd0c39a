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
