"""The general rules by which a model type whose class defaults do not build as they are is built all the same.

Each rule is one piece of :mod:`survey.tiny` or :mod:`survey.run` that serves every model type it fits: a
composite's model class that is one of its networks, a model class in another modeling module of the package, a
sub-config built alone that lacks the fields its composite states on it. The torch-free checks use stand-in
classes; the others build transformers' configs (skipped without transformers) or models (without torch too).
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from survey import building, run, tiny


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
    assert building.held_config(takes_decoder, composite) is composite.decoder
    assert building.held_config(takes_composite, composite) is composite
    assert building.held_config(type("Model", (), {}), composite) is composite


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
@pytest.mark.parametrize("model_type, file", [("musicgen", "musicgen/modeling_musicgen.py"),
                                              ("musicgen_melody", "musicgen_melody/modeling_musicgen_melody.py"),
                                              ("blip_text_model", "blip/modeling_blip_text.py"),
                                              ("qwen2_5_omni", "qwen2_5_omni/modeling_qwen2_5_omni.py")])
def test_types_built_by_the_general_rules_run_on_token_ids(model_type: str, file: str):
    """MusicGen (its base model takes the decoder's sub-config), BLIP's text model (its class in
    ``modeling_blip_text.py``) and Qwen2.5-Omni (its thinker's language model) build tiny and run the probe, and
    refpos is asked about the type itself; none was run before."""
    pytest.importorskip("torch", reason="builds transformers' models: pip install torch transformers")
    pytest.importorskip("transformers", reason="builds transformers' models")
    from survey import catalogue, stored

    stored.quiet()
    seen = run.observe_quietly(catalogue.find(model_type))
    assert seen.run is not None and seen.row.strength == "tiny", seen.row.cause
    assert seen.row.file == file and seen.config["model_type"] == model_type


def test_a_config_held_in_a_field_its_class_does_not_declare_is_shrunk():
    """RAG's config holds its question encoder's and generator's configs in fields its class does not declare
    as sub-configs: both are shrunk as declared ones are (515M parameters at every strength before)."""
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import AutoConfig

    rag = AutoConfig.for_model("rag")
    assert tiny.sub_config_names(rag) == ["question_encoder", "generator"]
    shrunk = tiny.shrink(rag, "tiny")
    assert shrunk.question_encoder.num_hidden_layers == shrunk.generator.encoder_layers == tiny.LAYERS
    assert shrunk.generator.d_model < rag.generator.d_model


def test_the_language_model_of_a_composite_may_lie_in_a_sub_config():
    """Qwen2.5-Omni's text model is its thinker's ``text_config``: the composite's language model is found
    there when the composite has no ``text_config`` of its own."""
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import AutoConfig

    omni = AutoConfig.for_model("qwen2_5_omni")
    assert building.language_path(omni) == ("thinker_config", "text_config")
    assert building.language_config(omni) is omni.thinker_config.text_config
    assert building.language_path(AutoConfig.for_model("llava")) == ("text_config",)
    assert building.language_path(AutoConfig.for_model("llama")) is None


def test_heads_bounded_by_a_key_heads_group_are_cut_to_the_bound():
    """Kolibri's indexer heads may not outnumber the query heads of one key head (its validator): cut to the
    shrunk heads over the shrunk key heads where past it, kept where within it."""
    kolibri = tiny.shrink_dict({"num_attention_heads": 48, "num_key_value_heads": 4, "index_num_heads": 12,
                                "hidden_size": 6144, "head_dim": 128}, "tiny")
    assert 0 < kolibri["index_num_heads"] <= kolibri["num_attention_heads"] // kolibri["num_key_value_heads"]
    assert tiny.shrink_dict({"num_attention_heads": 48, "num_key_value_heads": 48, "index_num_heads": 1,
                             "hidden_size": 6144}, "tiny")["index_num_heads"] == 1


def test_an_adapters_input_width_follows_the_towers_width():
    """Dots3's vision ``adapter_in_dim`` must equal the tower's ``hidden_size`` (its validator): it follows the
    shrunk width, as the widths named after another config's do."""
    original = {"hidden_size": 1536, "num_attention_heads": 12, "adapter_in_dim": 1536}
    shrunk = tiny.shrink_dict(original, "tiny")
    tiny._follow_widths(original, shrunk, tiny._width_pairs(original, shrunk))
    assert shrunk["adapter_in_dim"] == shrunk["hidden_size"] < 1536


def test_a_sliding_window_the_mask_needs_is_stated_wider_than_the_positions():
    """Step 3.5's text model builds the sliding-window mask whatever its layer types, and its class leaves the
    window None: stated as the position limit, so that the mask masks nothing; a window stated is kept."""
    step = tiny.shrink_dict({"model_type": "step3p5", "sliding_window": None, "max_position_embeddings": 262144},
                            "tiny")
    assert step["sliding_window"] == 262144
    assert tiny.shrink_dict({"model_type": "step3p5", "sliding_window": 512, "max_position_embeddings": 4096},
                            "tiny")["sliding_window"] == 512


def test_a_forward_refusing_input_ids_is_fed_their_embeddings():
    """Qwen3-Omni's code predictor refuses input ids and takes ``inputs_embeds``: wrapped, the ids are looked up
    in its own table and fed as embeddings; the wrapper names only the inputs the model takes, so the probe does
    not pass position ids a model would drop."""
    torch = pytest.importorskip("torch", reason="wraps a torch module: pip install torch")
    import inspect

    class Refusing(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.ModuleList([torch.nn.Embedding(10, 4)])

        def get_input_embeddings(self) -> torch.nn.Module:
            return self.table

        def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None):
            if input_ids is not None:
                raise ValueError("`input_ids` is expected to be `None`")
            return inputs_embeds

    model = Refusing()
    fed = building.fed(model, None, embeddings=True)
    ids = torch.tensor([[1, 2, 3]])
    assert torch.equal(fed(ids, attention_mask=torch.ones_like(ids)), model.table[0](ids))
    assert list(inspect.signature(fed.forward).parameters) == ["input_ids", "attention_mask"]
