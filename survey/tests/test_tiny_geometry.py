"""The tiny geometry's rules for config classes whose defaults do not shrink by the common rules alone.

Each rule of :mod:`survey.tiny` is checked on the smallest config dict that needs it (no torch); the per-type
fields of :data:`survey.tiny.OVERRIDES` are checked by building each such model type from its class defaults
and running it on token ids (skipped without torch and transformers).
"""

from __future__ import annotations

import pytest

from survey import tiny


def test_backbone_stages_follow_the_cut_layers():
    """A backbone's ``out_indices`` pick stages of ``stage_names`` (0 the stem), which the class derives from the
    layer count: the last stages stay the last (BEiT, Depth Anything), else they spread as before (ZoeDepth);
    ``out_features`` is left for the class to name. Stages not cut stay (Swin's four stages of four)."""
    def vit(layers: int, indices: list[int]) -> dict:
        return {"num_hidden_layers": layers, "stage_names": ["stem", *(f"stage{i}" for i in range(1, layers + 1))],
                "out_features": [f"stage{i}" for i in indices], "out_indices": indices}

    beit = tiny.shrink_dict(vit(12, [12]), "tiny")
    assert (beit["out_indices"], beit["out_features"]) == ([8], None)
    assert tiny.shrink_dict(vit(12, [9, 10, 11, 12]), "tiny")["out_indices"] == [5, 6, 7, 8]
    assert tiny.shrink_dict(vit(24, [6, 12, 18, 24]), "tiny")["out_indices"] == [2, 4, 6, 8]
    features_only = {**vit(12, [12]), "out_indices": None}
    assert tiny.shrink_dict(features_only, "tiny")["out_indices"] == [8]
    swin = {"num_layers": 4, "depths": [2, 2, 6, 2], "stage_names": ["stem", "stage1", "stage2", "stage3", "stage4"],
            "out_features": ["stage4"], "out_indices": [4]}
    kept = tiny.shrink_dict(swin, "tiny")
    assert (kept["out_indices"], kept["out_features"]) == ([4], ["stage4"])
    # without stage names (Data2Vec-Vision's segmentation head): layer indices, those below the count kept
    assert tiny.shrink_dict({"num_hidden_layers": 12, "out_indices": [3, 5, 7, 11]}, "tiny")["out_indices"] == [3, 5, 7]


def test_the_parts_of_a_layer_count_sum_to_the_count_kept():
    """Dory's input, recurrent and output layers must sum to its layer count: scaled with it, one each at least."""
    dory = tiny.shrink_dict({"num_hidden_layers": 72, "n_input_layers": 16, "n_recurrent_layers": 40,
                             "n_output_layers": 16, "hidden_size": 2048, "num_attention_heads": 16}, "tiny")
    parts = [dory[k] for k in ("n_input_layers", "n_recurrent_layers", "n_output_layers")]
    assert dory["num_hidden_layers"] == tiny.LAYERS and parts == [2, 4, 2]
    assert tiny.shrink_dict({"num_hidden_layers": 4, "n_input_layers": 2, "n_output_layers": 2}, "tiny")[
        "n_input_layers"] == 2  # not cut: as shipped


def test_a_decoder_reading_rows_of_codebooks_gets_one():
    """MusicGen reshapes its ids to (-1, codebooks, T): the probe's one row of ids is one sequence of one."""
    for strength in tiny.STRENGTHS:
        assert tiny.shrink_dict({"num_codebooks": 4, "num_hidden_layers": 24}, strength)["num_codebooks"] == 1
    assert tiny.shrink_dict({"num_codebooks": 1}, "tiny")["num_codebooks"] == 1


def test_a_state_space_models_heads_follow_its_width():
    """Mamba-2 (a state size, heads named plainly): heads x head width = expand x the shrunk width; an attention
    config with an ``expand`` and no state size keeps its heads."""
    mamba2 = tiny.shrink_dict({"num_heads": 128, "head_dim": 64, "hidden_size": 4096, "expand": 2,
                               "state_size": 128, "num_hidden_layers": 64}, "tiny")
    assert mamba2["num_heads"] * mamba2["head_dim"] == 2 * mamba2["hidden_size"]
    attention = tiny.shrink_dict({"num_heads": 32, "head_dim": 64, "hidden_size": 2048, "expand": 2}, "tiny")
    assert attention["num_heads"] == tiny.HEADS


def test_other_vocabularies_and_a_blank_class_shrink_with_the_vocabulary():
    """BLT's hashed n-gram vocabulary (``*_vocab``) is shrunk as the vocabulary; a CTC blank class past the
    shrunk vocabulary becomes its last row, as a padding id does (NeMo's validator: blank < vocab_size)."""
    blt = tiny.shrink_dict({"encoder_hash_byte_group_vocab": 500002, "vocab_size": 260}, "tiny")
    assert blt["encoder_hash_byte_group_vocab"] == tiny.VOCAB
    assert tiny.shrink_dict({"encoder_hash_byte_group_vocab": 500002}, "widths")["encoder_hash_byte_group_vocab"] \
        == 500002
    nemo = tiny.shrink_dict({"vocab_size": 23863, "blank_token_id": 23862}, "tiny")
    assert (nemo["vocab_size"], nemo["blank_token_id"]) == (tiny.VOCAB, tiny.VOCAB - 1)


def test_a_group_per_channel_follows_the_width():
    """Mimi's upsampling convolution has a group per channel (``upsample_groups`` = the width): it stays so."""
    mimi = tiny.shrink_dict({"hidden_size": 512, "num_attention_heads": 8, "head_dim": 64, "upsample_groups": 512,
                             "num_groups": 2}, "tiny")
    assert mimi["upsample_groups"] == mimi["hidden_size"] == tiny.HEADS * 64 and mimi["num_groups"] == 2


def test_widths_named_after_another_configs_follow_it():
    """NeMo's ``head_config.audio_hidden_size`` must equal its audio encoder's width, Dia's ``cross_hidden_size``
    its encoder's: where the default equals one shrunk width, that one's new value; where two widths of that
    default shrank differently, left as shipped (not guessed)."""
    original = {"audio_config": {"hidden_size": 512}, "head_config": {"audio_hidden_size": 512, "hidden_size": 192},
                "cross_hidden_size": 512}
    shrunk = {"audio_config": {"hidden_size": 256}, "head_config": {"audio_hidden_size": 512, "hidden_size": 192},
              "cross_hidden_size": 512}
    tiny._follow_widths(original, shrunk, tiny._width_pairs(original, shrunk))
    assert shrunk["head_config"]["audio_hidden_size"] == shrunk["cross_hidden_size"] == 256
    twice = {"a": {"hidden_size": 512}, "b": {"hidden_size": 512}, "vision_hidden_size": 512}
    shrunk = {"a": {"hidden_size": 256}, "b": {"hidden_size": 128}, "vision_hidden_size": 512}
    tiny._follow_widths(twice, shrunk, tiny._width_pairs(twice, shrunk))
    assert shrunk["vision_hidden_size"] == 512


def test_cross_attention_heads_shrink_as_heads():
    """Dia's decoder: its cross-attention heads shrink as its own heads do (its projections then fit)."""
    dia = tiny.shrink_dict({"hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128,
                            "cross_num_attention_heads": 16, "cross_num_key_value_heads": 16}, "tiny")
    assert dia["cross_num_attention_heads"] == dia["cross_num_key_value_heads"] == tiny.HEADS


def test_a_layer_type_list_that_is_the_layer_count_is_cut():
    """Nemotron-H's ``layers_block_type`` is its layer count (no count key): cut to the shortest prefix of
    :data:`survey.tiny.LAYERS` layers or more that shows every type."""
    types = ["linear_attention", "moe"] * 2 + ["linear_attention", "full_attention"] + ["moe", "linear_attention"] * 20
    cut = tiny.shrink_dict({"layers_block_type": types, "hidden_size": 2688, "num_attention_heads": 32}, "tiny")
    assert cut["layers_block_type"] == types[:tiny.LAYERS] and set(cut["layers_block_type"]) == set(types)
    late = ["mamba"] * 20 + ["attention"] + ["mamba"] * 10
    assert tiny.shrink_dict({"layers_block_type": late}, "tiny")["layers_block_type"] == late[:21]
    counted = {"num_hidden_layers": 40, "layer_types": types[:40]}  # a count key: cut with it, as before
    assert tiny.shrink_dict(counted, "tiny")["layer_types"] == types[:tiny.LAYERS]


def test_every_override_says_why_and_states_only_what_it_names():
    for model_type, (why, fields) in tiny.OVERRIDES.items():
        assert why and callable(fields), model_type
    assert tiny.repaired({"model_type": "llama", "hidden_size": 64}) == {"model_type": "llama", "hidden_size": 64}
    xmod = tiny.shrink_dict({"model_type": "xmod", "languages": ["en_XX", "de_DE"], "default_language": None},
                            "default")
    assert xmod["default_language"] == "en_XX"


@pytest.mark.anchors
@pytest.mark.parametrize("model_type", sorted(tiny.OVERRIDES))
def test_each_overridden_type_builds_and_runs_on_token_ids(model_type: str):
    """Each model type of :data:`survey.tiny.OVERRIDES` (or the composite that holds it) builds tiny from its
    class defaults, within the survey's size bound, and runs the probe's token ids (no geometry of the defaults
    did)."""
    pytest.importorskip("torch", reason="builds transformers' models: pip install torch transformers")
    pytest.importorskip("transformers", reason="builds transformers' models")
    import torch

    from survey import catalogue, feeding, probe, run, stored

    stored.quiet()
    holders = {"qwen3_omni_moe_talker_text": "qwen3_omni_moe"}
    config = tiny.shrink(catalogue.find(holders.get(model_type, model_type)).config(), "tiny")
    torch.manual_seed(0)
    model = catalogue.model_class(config)._from_config(config, attn_implementation="eager").eval()
    if (how := feeding.feeding(model_type, config)) is not None:  # fed as the survey feeds it (survey.feeding)
        model = feeding.wrap(model, config, how)
    assert sum(p.numel() for p in model.parameters()) <= run.MAX_PARAMETERS
    try:
        inputs, _ = probe.inputs_for(model, probe.token_ids(config, 8), None)
    except probe.NotReached:  # a wrapper without a forward of its own (Qwen3-Omni generates): built is all
        return
    with torch.no_grad():
        model(**inputs)


def test_a_run_whose_every_resolved_layer_lies_in_an_unrun_stack_is_not_reached():
    """FastSpeech2 with HiFi-GAN, once it builds: refpos resolves its networks as parts (the speech model, not
    in the family table, and the vocoder), none a stack the survey runs on token ids. The row is ``not
    reached`` saying so, where judging it failed on an assertion."""
    import numpy as np

    from survey import probe, run

    config = {"model_type": "fastspeech2_conformer_with_hifigan",
              "model_config": {"model_type": "fastspeech2_conformer"},
              "vocoder_config": {"model_type": "fastspeech2_conformer_hifigan"}}
    observed = probe.Probe(np.arange(3), False, probe.Run(), probe.Run(), probe.Run(), None, None, {}, np.arange(3))
    row = run.judge(run.Observation(config, observed, run.Row(config["model_type"], "not reached")))
    assert (row.status, row.cause) == ("not reached", "refpos resolved no layer to compare")
