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


def test_inputs_a_forward_needs_beside_the_ids_are_fed_at_each_calls_length():
    """A forward that fails on ids alone is fed what it needs beside them (:data:`survey.building.COMPANIONS`):
    an input its forward names (RAG's retrieved documents: the ids themselves, one document), or, where it names
    none and passes its keyword arguments on, one a layer's forward names (Voxtral Realtime's ``t_cond``), each
    computed at the call's own length; a forward that needs none is fed none."""
    torch = pytest.importorskip("torch", reason="wraps a torch module: pip install torch")
    from types import SimpleNamespace

    from survey import building

    class Layer(torch.nn.Module):
        def forward(self, hidden_states, t_cond=None):
            return hidden_states * (1 + t_cond)

    class TimeConditioned(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = Layer()

        def forward(self, input_ids=None, attention_mask=None, **kwargs):
            return self.layer(input_ids[..., None].float(), **kwargs)

    class Retrieving(torch.nn.Module):
        def forward(self, input_ids=None, context_input_ids=None, context_attention_mask=None, doc_scores=None,
                    n_docs=None):
            assert context_input_ids is not None, "Make sure that `context_input_ids` are passed"
            return context_input_ids, context_attention_mask, doc_scores, n_docs

    config = SimpleNamespace(hidden_size=4)
    assert building.companions(TimeConditioned()) == ["t_cond"]
    assert building.companions(Retrieving()) == ["context_input_ids"]
    assert building.companions(Layer()) == ["t_cond"] and building.companions(torch.nn.Linear(2, 2)) == []
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    assert building.fed(TimeConditioned(), config)(ids).shape == (1, 5, 4)
    context, mask, scores, n_docs = building.fed(Retrieving(), config)(ids[:, :3])
    assert torch.equal(context, ids[:, :3]) and mask.shape == (1, 3) and scores.shape == (1, 1) and n_docs == 1


def test_an_input_many_forwards_leave_optional_is_fed_only_where_the_error_names_it():
    """A box per token, image regions or an image are fed beside the ids only to a forward whose error on the ids
    alone names them (Bros's boxes, LXMERT's regions, ViLT's image): a forward that failed for another reason, or
    fails naming another input, is not fed them, nor an image a model of towers (its language model is run alone);
    the boxes are ordered corners, one per token."""
    torch = pytest.importorskip("torch", reason="wraps a torch module: pip install torch")
    from types import SimpleNamespace

    from survey import building

    class Document(torch.nn.Module):
        def forward(self, input_ids=None, bbox=None, pixel_values=None):
            if bbox is None:
                raise ValueError("You have to specify bbox")
            return bbox

    assert building.companions(Document(), "You have to specify bbox") == ["bbox"]
    assert building.companions(Document(), "index out of range") == []
    assert building.companions(Document(), "You have to specify pixel_values") == ["pixel_values"]
    towers = Document()
    towers.config = SimpleNamespace(vision_config=SimpleNamespace(image_size=32))  # BLIP's: run its text alone
    assert building.companions(towers, "You have to specify pixel_values") == []
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    boxes = building.fed(Document(), SimpleNamespace(hidden_size=4), error="You have to specify bbox")(ids)
    assert boxes.shape == (1, 5, 4) and bool((boxes[..., :2] <= boxes[..., 2:]).all())


@pytest.mark.anchors
def test_voxtral_realtimes_text_model_runs_fed_its_time_conditioning():
    """Voxtral Realtime's text model scales its norms by ``t_cond``, which its forward does not name (it passes
    on to the layers): every geometry failed on ``linear()`` of None; fed a seeded one, it runs the probe."""
    pytest.importorskip("torch", reason="builds transformers' models: pip install torch transformers")
    pytest.importorskip("transformers", reason="builds transformers' models")
    from survey import catalogue, run, stored

    stored.quiet()
    seen = run.observe_quietly(catalogue.find("voxtral_realtime_text"))
    assert seen.run is not None and seen.row.strength == "tiny", seen.row.cause


def test_a_vision_encoder_decoder_is_fed_its_encoders_image_size():
    """A vision encoder–decoder states its image size on its encoder's sub-config (``encoder``: a ViT's 224): its
    pixel values are fed at that size, where 64 pixels (the size of a model that states none) were refused."""
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import AutoConfig

    from survey.pixel_inputs import candidates

    config = tiny.shrink(AutoConfig.for_model("vision-encoder-decoder"), "tiny")
    size = config.encoder.image_size
    assert candidates("pixel_values", config)["native"][0] == (1, config.encoder.num_channels, size, size)


@pytest.mark.anchors
def test_patchtsts_standardisation_mistake_is_told_apart_at_its_tiny_width():
    """PatchTST's table standardised with the biased deviation (``std_biased``) lay within the float32 bound at
    the default width (32 patches of 128 channels) and was graded exact too; at the repaired width every
    catalogued mistake is graded wrong and the row is exact."""
    pytest.importorskip("torch", reason="builds transformers' models: pip install torch transformers")
    pytest.importorskip("transformers", reason="builds transformers' models")
    from survey import catalogue, run, stored

    stored.quiet()
    row = run.judge_quietly(run.observe_quietly(catalogue.find("patchtst")))
    assert row.status == "exact" and row.mutants and not row.survived, (row.cause, row.survived)


def test_fields_hunyuan_vl_and_qwen4_exp_compute_with_are_stated():
    """HunYuan-VL's rotary module takes ``len(mrope_section)`` of a section its class leaves None, Qwen4-Exp's
    indexer divides two fields its class leaves None: stated (four equal parts of the half head; the indexer its
    validator accepts), so transformers runs them and the refusal is recorded beside its run."""
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import AutoConfig

    hunyuan = tiny.shrink(AutoConfig.for_model("hunyuan_vl_text"), "tiny")
    sections = hunyuan.rope_parameters["mrope_section"]
    assert len(sections) == 4 and sum(sections) == hunyuan.head_dim // 2
    qwen4 = tiny.shrink(AutoConfig.for_model("qwen4_exp_text"), "tiny")
    assert qwen4.indexer_budget % qwen4.indexer_compress_ratio == 0 and qwen4.indexer_kv_heads == 1


def test_a_linear_attention_mixers_heads_shrink_keeping_their_multiple():
    """Qwen4-Exp's Gated DeltaNet keeps 16 key and 32 value heads of 128 channels: 165M parameters at the tiny
    strength, past the survey's bound; its heads shrink as attention heads do, the value heads twice the key heads."""
    shrunk = tiny.shrink_dict({"hidden_size": 2048, "num_attention_heads": 16, "head_dim": 256,
                               "linear_num_key_heads": 16, "linear_num_value_heads": 32}, "tiny")
    assert (shrunk["linear_num_key_heads"], shrunk["linear_num_value_heads"]) == (tiny.HEADS, 2 * tiny.HEADS)
