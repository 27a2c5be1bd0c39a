"""The towers, heads and sub-configs of transformers 5.25 that the family table once lacked: each model type is
answered or refused by name — its row says what the code does with positions, or what refpos does not model —
and none resolves as "not in the family table".

The anchors read transformers' own code: each type's default config (its class's, as a ``config.json`` writes it)
resolves without an unknown network; the Perception Encoder's rotation pairs ``(x[2j], x[2j + 1])`` (the row's
``interleaved``); EdgeTAM's mask decoder, prompt encoder and Fourier features are SAM 2's line for line (the rows
read SAM 2's Fourier features); GLM-5.3-Flash's language model takes no RoPE; Qwen3-Omni-MoE's talker runs the thinker's
attention and M-RoPE module.
"""

from __future__ import annotations

import inspect
import json
import re
import warnings

import pytest

import refpos
from refpos.models import families as fam

#: the model types, and the one composite (glm5_next) answered through the rows of the networks it nests
TYPES = ("apertus1p5_vision_tokenizer", "clap_audio_model", "cosmos3_edge_vision", "edgetam_mask_decoder",
         "edgetam_prompt_encoder", "edgetam_video_mask_decoder", "edgetam_video_prompt_encoder",
         "gemma4_unified_audio", "gemma4_unified_vision", "glm5_next", "glm5_next_text", "glm_image_vision",
         "hunyuan_vl_vision", "hy_v4_vl_vision", "idefics_vision", "inkling_vision", "lw_detr_vit",
         "moonshine_streaming_encoder", "muse_spark_audio", "nemotron3_5_transcribe_word_timestamp",
         "nemotron3_diarization_audio", "pe_audio_encoder", "pe_audio_video_encoder", "pe_video_encoder",
         "pocket_tts_audio_tokenizer", "pocket_tts_audio_tokenizer_decoder", "pocket_tts_audio_tokenizer_encoder",
         "qwen3_omni_moe_talker_text", "sapiens2_head", "vibevoice_diffusion", "voxtral_realtime_encoder",
         "wavtokenizer_encoder")
#: the networks a composite of the list nests, which answer for it
NESTED = {"glm5_next": ("glm5_next_text", "glm5_next_vision")}
#: the words of a resolution that does not know a network's model type
UNKNOWN = re.compile(r"not in (refpos's )?(the )?family table")


def _rows_missing(types=TYPES) -> list[str]:
    """The model types (or the networks a composite nests) that the family table has no row or alias for."""
    known = set(fam.FAMILIES) | set(fam.ALIASES)
    return [name for model_type in types for name in NESTED.get(model_type, (model_type,)) if name not in known]


def _unknown_in(positions) -> list[str]:
    """What a resolution says it does not know, as "not in the family table"."""
    said = [*positions.not_modelled.values(), *positions.unknown.values()]
    said += [getattr(record, "reason", "") for record in positions.layers]
    return [text for text in said if UNKNOWN.search(str(text))] + [
        f"{record.stack} layer {record.index}: unknown" for record in positions.layers if record.kind == "unknown"]


def test_every_type_has_a_row_or_its_networks_do():
    assert _rows_missing() == []


def test_a_type_without_its_row_is_caught(monkeypatch):
    monkeypatch.delitem(fam.FAMILIES, "lw_detr_vit")
    monkeypatch.delitem(fam.FAMILIES, "glm5_next_text")
    assert _rows_missing() == ["glm5_next_text", "glm5_next_text", "lw_detr_vit"]  # glm5_next's, its own


@pytest.mark.parametrize("model_type", [t for t in TYPES if t not in NESTED])
def test_each_row_answers_or_names_what_it_does_not_model(model_type):
    """A row that refuses says what the code does (its ``unmodelled`` names a module, a key or a layout), never
    a bare refusal; a row that answers names no ``unmodelled``."""
    row = fam.FAMILIES[model_type]
    assert row.release == "5.25", row.release
    assert not row.unmodelled or len(row.unmodelled.split()) >= 12, row.unmodelled


# ------------------------------------------------------------------------------------------ anchors
@pytest.mark.anchors
@pytest.mark.parametrize("model_type", TYPES)
def test_the_class_default_config_resolves_without_an_unknown_network(model_type):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = json.loads(transformers.AutoConfig.for_model(model_type).to_json_string())
    positions = refpos.model_positions(config)
    assert _unknown_in(positions) == [], model_type
    refused = [r for r in positions.layers if r.kind == "refused"]
    assert all(len(str(r.reason).split()) >= 6 for r in refused), [r.reason for r in refused]


@pytest.mark.anchors
def test_the_unknown_anchor_catches_a_type_without_its_row(monkeypatch):
    monkeypatch.delitem(fam.FAMILIES, "pe_audio_encoder")
    with pytest.raises(AssertionError):
        test_the_class_default_config_resolves_without_an_unknown_network("pe_audio_encoder")


PERCEPTION = {"pe_audio_encoder": "pe_audio.modeling_pe_audio", "pe_video_encoder": "pe_video.modeling_pe_video",
              "pe_audio_video_encoder": "pe_audio_video.modeling_pe_audio_video"}


@pytest.mark.anchors
@pytest.mark.parametrize("model_type", list(PERCEPTION))
def test_the_perception_encoder_rotates_the_row_s_pairs(model_type):
    """``apply_rotary_pos_emb`` of the file at cos 0, sin 1 (the pairing, exact integers) is the row's layout: the
    tables as the encoder passes them, (batch, tokens, head_dim), to queries of (batch, heads, tokens, head_dim)."""
    torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
    import importlib

    from refpos.tests.test_rope_families import _pairing

    module = importlib.import_module("transformers.models." + PERCEPTION[model_type])

    def rotate(x):
        cos = torch.zeros(x.shape[0], x.shape[2], x.shape[3], dtype=x.dtype)
        return module.apply_rotary_pos_emb(x, x, cos, cos + 1)[0]

    assert _pairing(rotate, 8) == fam.FAMILIES[model_type].layout


@pytest.mark.anchors
def test_the_pairing_anchor_fails_on_a_wrong_layout(monkeypatch):
    import dataclasses

    pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
    monkeypatch.setitem(fam.FAMILIES, "pe_audio_encoder",
                        dataclasses.replace(fam.FAMILIES["pe_audio_encoder"], layout="half"))
    with pytest.raises(AssertionError):
        test_the_perception_encoder_rotates_the_row_s_pairs("pe_audio_encoder")


#: EdgeTAM's classes and the SAM 2 classes their rows repeat (module, prefix) -> (module, prefix)
EDGETAM = {("edgetam.modeling_edgetam", "EdgeTam"): ("sam2.modeling_sam2", "Sam2"),
           ("edgetam_video.modeling_edgetam_video", "EdgeTamVideo"): ("sam2_video.modeling_sam2_video", "Sam2Video")}


@pytest.mark.anchors
@pytest.mark.parametrize("name", ["MaskDecoder", "PromptEncoder", "PositionalEmbedding", "TwoWayAttentionBlock",
                                  "TwoWayTransformer"])
def test_edgetam_s_prompt_and_mask_networks_are_sam2_s(name):
    import importlib

    pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
    for (ours, prefix), (theirs, other) in EDGETAM.items():
        mine = inspect.getsource(getattr(importlib.import_module("transformers.models." + ours), prefix + name))
        sam2 = inspect.getsource(getattr(importlib.import_module("transformers.models." + theirs), other + name))
        assert mine.replace(prefix, "X") == sam2.replace(other, "X"), (prefix + name)


@pytest.mark.anchors
def test_glm5_next_s_language_model_takes_no_rope():
    """The config class refuses a rotated part of the head, and the model passes no position embeddings."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
    from transformers.models.glm5_next import modeling_glm5_next

    with pytest.raises(Exception, match="NoPE"):
        transformers.AutoConfig.for_model("glm5_next_text", qk_rope_head_dim=64)
    assert "position_embeddings=None" in inspect.getsource(modeling_glm5_next.Glm5NextTextModel.forward)
    assert fam.FAMILIES["glm5_next_text"].positions.encoding == "none"


@pytest.mark.anchors
def test_qwen3_omni_moe_s_talker_runs_the_thinker_s_attention_and_m_rope():
    pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
    from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni

    assert issubclass(omni.Qwen3OmniMoeTalkerRotaryEmbedding, omni.Qwen3OmniMoeThinkerTextRotaryEmbedding)
    assert "Qwen3OmniMoeThinkerTextAttention(" in inspect.getsource(omni.Qwen3OmniMoeTalkerDecoderLayer.__init__)
    talker, thinker = fam.FAMILIES["qwen3_omni_moe_talker_text"], fam.FAMILIES["qwen3_omni_moe_text"]
    assert (talker.layout, talker.multi_axis) == (thinker.layout, thinker.multi_axis)


def test_granite_doclings_connector_is_answered_not_left_out():
    """Granite-Docling's vision model runs its connector after the encoder layers, and the connector's paths add a
    fixed 2-D sin–cos (``GraniteDoclingConnectorPath.pos_embed``): the tower is answered with a record per path
    after its layers (``vision.output``), never by its input grid alone (the survey's run found the two
    ``pos_embed`` sites unaccounted for while the row said nothing of them)."""
    transformers = pytest.importorskip("transformers", reason="the connector is read from transformers' model")
    from transformers.models.granite_docling import modeling_granite_docling as code

    assert "pos_embed" in inspect.getsource(code.GraniteDoclingConnectorPath.forward)
    config = transformers.AutoConfig.for_model("granite_docling_vision").to_dict()
    answer = refpos.model_positions(config)
    assert answer.complete
    assert [(r.kind, r.at, r.shuffle) for r in answer.stack("vision.output")] == [("sincos2d", "output", 4),
                                                                                    ("sincos2d", "output", 2)]
