"""The general rules by which a model type whose class defaults do not build as they are is built all the same.

Each rule is one piece of :mod:`survey.tiny` or :mod:`survey.run` that serves every model type it fits: a
composite's model class that is one of its networks, a model class in another modeling module of the package, a
sub-config built alone that lacks the fields its composite states on it. The torch-free checks use stand-in
classes; the others build transformers' configs (skipped without transformers) or models (without torch too).
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from survey import run, tiny


class _Decoder:
    model_type = "decoder_part"


class _Composite:
    model_type = "composite"
    sub_configs: ClassVar[dict] = {"decoder": _Decoder}

    def __init__(self) -> None:
        self.decoder = _Decoder()

    def to_dict(self) -> dict:
        return {"model_type": self.model_type}


def test_a_composite_types_model_class_is_built_from_the_sub_config_it_takes():
    """MusicGen's base model is its decoder: the class names the decoder's config class, and is built from the
    composite's decoder config; a class that takes the config itself gets the config."""
    composite = _Composite()
    composite.decoder.to_dict = lambda: {"model_type": "decoder_part"}
    takes_decoder = type("Model", (), {"config_class": _Decoder})
    takes_composite = type("Model", (), {"config_class": _Composite})
    assert run.held_config(takes_decoder, composite) is composite.decoder
    assert run.held_config(takes_composite, composite) is composite
    assert run.held_config(type("Model", (), {}), composite) is composite


def test_a_sub_config_alone_takes_the_fields_its_composite_states():
    """Pix2Struct's config copies its ``initializer_range`` onto its text config, T5Gemma2's its ``dropout_rate``
    onto the text config its encoder config holds: a text config shrunk alone states them, from the composite's
    defaults; a config no composite holds gains nothing."""
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import AutoConfig

    pix2struct = tiny.shrink(AutoConfig.for_model("pix2struct_text_model"), "tiny")
    assert pix2struct.initializer_range == AutoConfig.for_model("pix2struct").initializer_range
    t5gemma2 = tiny.shrink(AutoConfig.for_model("t5gemma2_text"), "tiny")
    assert t5gemma2.dropout_rate == AutoConfig.for_model("t5gemma2").dropout_rate
    assert tiny.composite_fields(AutoConfig.for_model("llama")) == {}


@pytest.mark.anchors
@pytest.mark.parametrize("model_type, model", [("musicgen", "MusicgenModel"),
                                               ("musicgen_melody", "MusicgenMelodyModel"),
                                               ("blip_text_model", "BlipTextModel")])
def test_types_built_by_the_general_rules_run_on_token_ids(model_type: str, model: str):
    """MusicGen (its base model takes the decoder's sub-config) and BLIP's text model (its class in
    ``modeling_blip_text.py``) build tiny and run the probe; no geometry of either built before."""
    pytest.importorskip("torch", reason="builds transformers' models: pip install torch transformers")
    pytest.importorskip("transformers", reason="builds transformers' models")
    from survey import catalogue, stored

    stored.quiet()
    config, built, _, strength = run.build(catalogue.find(model_type).config())
    assert type(built).__name__ == model and strength == "tiny"
    assert config.model_type == model_type  # refpos is asked about the type itself
