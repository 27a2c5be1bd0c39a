"""``refpos.model_positions``: one typed record per layer of every stack, for every encoding.

Each family fact is checked on a config of that family (the values come from transformers 5.24's modeling
files the family table cites); the complete-or-say-so rules (unknown families, not-modelled keys, switches)
and the wrappers are checked with configs built to hit them.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest

import refpos
from refpos.encodings import alibi_slopes
from refpos.encodings.bias_table import BIAS_FORMS
from refpos.models import families, from_hf_config, hf_layers
from refpos.models import positions as mp
from refpos.models.kinds import KINDS
from refpos.models.kinds.alibi import ALIBI_SLOPES
from refpos.models.records import round_to
from refpos.rope.vision import VISION_ROPES, VISION_ROPES_MORE, VISION_ROPES_PREFIXED
from refpos.rope.vision3d import VISION_ROPES_3D

BLOOM = {"model_type": "bloom", "n_layer": 2, "n_head": 6, "hidden_size": 96}
FALCON = {"model_type": "falcon", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "alibi": True}
MPT = {"model_type": "mpt", "n_layers": 2, "n_heads": 6, "d_model": 96, "attn_config": {"alibi": True}}
T5 = {"model_type": "t5", "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4, "d_model": 32,
      "relative_attention_num_buckets": 32}
OPT = {"model_type": "opt", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
       "max_position_embeddings": 2048}
BART = {"model_type": "bart", "encoder_layers": 2, "decoder_layers": 1, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "d_model": 16, "max_position_embeddings": 1024}
WHISPER = {"model_type": "whisper", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
           "decoder_attention_heads": 2, "d_model": 16, "max_source_positions": 1500, "max_target_positions": 448}
M2M100 = {"model_type": "m2m_100", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
          "decoder_attention_heads": 2, "d_model": 16, "max_position_embeddings": 1024, "pad_token_id": 1}
LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32}


def kinds(config: dict, **kw) -> list[tuple[str, int, str]]:
    return [(r.stack, r.index, r.label) for r in refpos.model_positions(config, **kw)]


def test_alibi_families_keep_their_slopes_order_and_rounding():
    bloom = refpos.model_positions(BLOOM).layers[0]
    assert (bloom.kind, bloom.form, bloom.before_scale, bloom.dtype) == ("alibi", "key_index", False, "float32")
    np.testing.assert_array_equal(bloom.slopes, alibi_slopes(6, xp="numpy"))  # the official recurrence
    falcon = refpos.model_positions(FALCON).layers[0]
    assert (falcon.before_scale, falcon.dtype, falcon.head_dim) == (True, "bfloat16", 16)
    # Falcon's code multiplies bfloat16 slopes by the positions in bfloat16: 0.917 becomes 0.91796875
    assert float(round_to(0.917, "bfloat16")) == 0.91796875
    bias = falcon.bias_at(np.arange(3), np.array([0, 1, 300, 257]))  # 2^-2 · 300 = 75 exactly; 2^-8 · 257 rounds
    assert bias[0, 0, 2] == 75.0 and bias[3, 0, 3] == 1.0 and falcon.bias_at(
        np.arange(3), np.array([257]), rounded=False)[3, 0, 0] == 257 / 256
    mpt = refpos.model_positions(MPT).layers[0]  # MPT: the same slopes, the bias anchored at the last key
    np.testing.assert_array_equal(mpt.slopes, alibi_slopes(6, xp="numpy"))
    assert mpt.bias(attention_mask=np.ones(4), rounded=False)[1, 0].tolist() == [-0.1875, -0.125, -0.0625, 0.0]


def test_mpt_slopes_follow_alibi_bias_max():
    """transformers' build_mpt_alibi_tensor: 2^(-b·h/n') over the next power of two, odd entries first."""
    slopes = refpos.model_positions(dict(MPT, attn_config={"alibi": True, "alibi_bias_max": 16})).layers[0].slopes
    padded = [2.0 ** (-16 * h / 8) for h in range(1, 9)]
    assert list(slopes) == (padded[1::2] + padded[0::2])[:6]


def test_t5_direction_per_stack_and_which_layers_own_a_table():
    encoder, decoder = (refpos.model_positions(T5).stack(s) for s in ("encoder", "decoder"))
    assert [r.bidirectional for r in encoder + decoder] == [True] * 2 + [False] * 3
    assert [r.owns_table for r in decoder] == [True, False, False] and {r.table_layer for r in decoder} == {0}
    assert decoder[0].max_distance == 128  # the config class's default when the key is absent
    umt5 = refpos.model_positions(dict(T5, model_type="umt5", relative_attention_max_distance=64)).stack("decoder")
    assert [r.owns_table for r in umt5] == [True] * 3 and [r.table_layer for r in umt5] == [0, 1, 2]
    assert umt5[0].max_distance == 64


def test_absolute_tables_their_offsets_and_sizes():
    opt = refpos.model_positions(OPT).layers[0]
    assert (opt.kind, opt.offset, opt.table_size) == ("learned", 2, 2050)  # OPT adds two rows for its offset
    assert opt.rows([0, 2047]).tolist() == [2, 2049]
    with pytest.raises(ValueError, match=r"\[0, 2050\)"):
        opt.rows([2048])  # the table's last row is position 2047
    assert kinds(BART) == [("encoder", 0, "learned"), ("encoder", 1, "learned"), ("decoder", 0, "learned")]
    whisper = refpos.model_positions(WHISPER)
    encoder, decoder = whisper.stack("encoder")[0], whisper.stack("decoder")[0]
    assert (encoder.kind, encoder.spacing, encoder.layout, encoder.table_size) == ("sinusoidal", "tensor2tensor",
                                                                                  "concat", 1500)
    assert (decoder.kind, decoder.table_size, decoder.offset) == ("learned", 448, 0)
    m2m = refpos.model_positions(M2M100).layers[0]
    assert (m2m.kind, m2m.offset, m2m.table_size) == ("sinusoidal", 2, None)  # padding_idx + 1, any length
    np.testing.assert_allclose(m2m.sinusoid([0]), refpos.encodings.sinusoidal.sinusoidal([2], 16, layout="concat",
                                                                                         spacing="tensor2tensor"),
                               rtol=0, atol=0)
    marian = refpos.model_positions(dict(M2M100, model_type="marian")).layers[0]
    assert (marian.spacing, marian.offset, marian.table_size) == ("paper", 0, 1024)
    roberta = {"model_type": "roberta", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
               "max_position_embeddings": 514, "pad_token_id": 1}
    assert refpos.model_positions(roberta).layers[0].offset == 2  # padding_idx + 1, inside the 514 rows
    electra = {"model_type": "electra", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
               "embedding_size": 4, "max_position_embeddings": 16}
    assert refpos.model_positions(electra).layers[0].dim == 4


def test_switch_keys_choose_the_encoding_or_refuse_by_name():
    assert kinds(dict(FALCON, alibi=False))[0][2] == "rope"
    distil = {"model_type": "distilbert", "n_layers": 1, "n_heads": 2, "dim": 8, "max_position_embeddings": 16}
    assert kinds(distil)[0][2] == "learned" and kinds(dict(distil, sinusoidal_pos_embds=True))[0][2] == "sinusoidal"
    mpt = refpos.model_positions(dict(MPT, attn_config={"alibi": False}))
    assert [r.kind for r in mpt] == ["refused"] * 2 and "attn_config.alibi=false" in mpt.layers[0].reason
    assert "attn_config.alibi" in mpt.not_modelled and not mpt.complete


GRANITE_H = {"model_type": "granitemoehybrid", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 32,
             "layer_types": ["mamba", "attention", "mamba", "attention"]}


@pytest.mark.parametrize("config, expected", [
    (dict(GRANITE_H, position_embedding_type="nope"), "decoder layers 0-3: mamba ×2 (0, 2), none ×2 (every 2nd)"),
    (dict(GRANITE_H, position_embedding_type="rope"), "decoder layers 0-3: mamba ×2 (0, 2), rope ×2 (every 2nd)"),
    (dict(GRANITE_H, position_embedding_type="alibi"), "decoder layers 0-3: mamba ×2 (0, 2), refused ×2 (every 2nd)"),
    ({"model_type": "jamba", "num_hidden_layers": 8, "num_attention_heads": 4, "hidden_size": 32},
     "decoder layers 0-7: mamba ×7, none ×1"),
    ({"model_type": "jamba", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 32,
      "attn_layer_period": 2, "attn_layer_offset": 1}, "decoder layers 0-3: mamba ×2 (0, 2), none ×2 (every 2nd)"),
    ({"model_type": "nemotron_h", "num_hidden_layers": 52, "num_attention_heads": 4, "hidden_size": 32,
      "hybrid_override_pattern": "M-M*-ME"}, "decoder layers 0-6: mamba ×3 (0, 2, 5), mlp ×2 (1, 4), none ×1, moe ×1"),
    ({"model_type": "kimi_linear", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 32,
      "linear_attn_config": {"full_attn_layers": [2, 4], "kda_layers": [1, 3]}},
     "decoder layers 0-3: kda ×2 (0, 2), none ×2 (every 2nd)"),
    ({"model_type": "zamba2", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 40,
      "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"]},
     "decoder layers 0-3: mamba ×2 (0, 2), none ×2 (every 2nd)"),
    ({"model_type": "mamba", "num_hidden_layers": 3}, "decoder layers 0-2: mamba ×3"),
])
def test_hybrids_attention_without_positions_is_not_rotated(config, expected):
    resolved = refpos.model_positions(config)
    assert resolved.summary() == expected
    assert all(r.kind != "rope" for r in resolved) or "rope" in expected


def test_zamba2_rotates_its_shared_attention_at_twice_the_head_width():
    config = {"model_type": "zamba2", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 40,
              "layers_block_type": ["mamba", "hybrid"], "use_mem_rope": True, "attention_head_dim": 20}
    layer = refpos.model_positions(config).layers[1]
    assert layer.kind == "rope" and layer.rope.head_dim == 20  # 2 · 40 / 4, not 40 / 4


def test_an_unknown_family_resolves_only_what_it_states():
    unknown = {"model_type": "my_llm", "num_hidden_layers": 2, "rope_theta": 5e5, "hidden_size": 8}
    resolved = refpos.model_positions(unknown)
    assert [r.kind for r in resolved] == ["unknown", "unknown"] and not resolved.complete
    assert resolved.layers[0].stated == {"rope_theta": 5e5} and "layout" in resolved.layers[0].unknown
    assert "'my_llm' is not in refpos's family table" in resolved.unknown["model_type"]
    with pytest.raises(ValueError, match="strict: not modelled, refused or unknown"):
        refpos.model_positions(unknown, strict=True)
    stated = refpos.model_positions(dict(unknown, num_attention_heads=2), assume={"family": "llama"})
    assert [r.rope.theta for r in stated] == [5e5, 5e5] and stated.complete
    assert "stated by the caller" in stated.notes[0]
    columns = refpos.model_positions(dict(unknown, num_attention_heads=2),
                                     assume={"encoding": "rope", "layout": "interleaved"})
    assert columns.layers[0].rope.layout == "interleaved"
    assert kinds({"model_type": "my_llm", "n_layer": 1, "n_head": 2, "hidden_size": 8},
                 assume={"encoding": "alibi"}) == [("decoder", 0, "alibi")]


def test_a_family_counting_its_layers_per_stack_is_refused_by_name_for_every_layer():
    """LXMERT's config counts its language, cross and vision layers in one dict: each of the 19 layers is refused
    by name (its three encoders' positions are not modelled), not failed on the count's type."""
    lxmert = {"model_type": "lxmert", "num_hidden_layers": {"vision": 5, "cross_encoder": 5, "language": 9},
              "max_position_embeddings": 512}
    resolved = refpos.model_positions(lxmert)
    assert [r.kind for r in resolved] == ["refused"] * 19 and not resolved.complete
    assert "three encoders" in resolved.not_modelled["model_type"]
    with pytest.raises(TypeError, match="num_hidden_layers"):  # a count of the wrong type for a known family
        refpos.model_positions({"model_type": "llama", "num_hidden_layers": {"language": 9}})


@pytest.mark.parametrize("assume, named", [
    ({"colour": "red"}, "assume takes"), ({"family": "no_such"}, "family='no_such'"),
    ({"encoding": "spiral"}, "encoding"), ({"layout": "spiral"}, "layout"), ("family=llama", "mapping"),
])
def test_bad_assumptions_are_refused_by_name(assume, named):
    with pytest.raises((ValueError, TypeError), match=named):
        refpos.model_positions({"model_type": "my_llm", "num_hidden_layers": 1}, assume=assume)


def test_a_not_modelled_position_key_refuses_the_layers():
    """A key that changes positions is honoured or the layer refused; a mask or scale key is only reported."""
    logn = refpos.model_positions(dict(LLAMA, use_logn_attn=True))
    assert [r.kind for r in logn] == ["refused"] * 2 and "use_logn_attn" in logn.layers[0].reason
    window = refpos.model_positions(dict(LLAMA, sliding_window=16))
    assert [r.kind for r in window] == ["rope"] * 2 and "sliding_window" in window.not_modelled


def test_the_refusal_test_breaks_when_keys_are_ignored(monkeypatch):
    monkeypatch.setattr(mp, "_refuse_unmodelled", lambda layers, report, prefix: layers)
    with pytest.raises(AssertionError):
        test_a_not_modelled_position_key_refuses_the_layers()


@pytest.mark.parametrize("config, nesting", [
    ({"model_type": "voxtral", "hidden_size": 3072, "text_config": LLAMA}, "text_config."),  # mirrored keys
    ({"model_type": "qwen2_5_omni", "thinker_config": {"model_type": "x", "text_config": LLAMA}},
     "thinker_config.text_config."),
    ({"model_type": "internvl_chat", "llm_config": LLAMA}, "llm_config."),
    ({"model_type": "deepseek_vl_v2", "language_config": LLAMA}, "language_config."),
])
def test_every_wrapper_is_followed_and_named(config, nesting):
    resolved = refpos.model_positions(config)
    assert resolved.nesting == nesting and [r.kind for r in resolved] == ["rope", "rope"]
    assert resolved.layers[0].rope.provenance["theta"] == "default"
    assert from_hf_config(dict(config)).provenance["head_dim"] == "derived"
    named = from_hf_config({**config, **({"text_config": dict(LLAMA, rope_theta=1e6)} if "text_config" in config
                                               else {})})
    assert not named.notes or nesting[:-1] in named.notes[-1]


def test_a_wrapper_whose_row_is_unmodelled_refuses_by_name():
    """DiffusionGemma runs its text config as an encoder and a decoder stack: the text config alone resolves
    (its full-attention layers 512 wide), wrapped it is refused, naming the wrapper."""
    text = {"model_type": "diffusion_gemma_text", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 256,
            "hidden_size": 1024, "layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                "full_attention": {"rope_type": "default", "rope_theta": 1e6}}}
    alone = refpos.model_positions(text)
    assert [r.kind for r in alone] == ["rope", "rope"] and alone.layers[1].rope.head_dim == 512
    wrapped = refpos.model_positions({"model_type": "diffusion_gemma", "text_config": text})
    assert [r.kind for r in wrapped] == ["refused", "refused"] and "model_type" in wrapped.not_modelled
    assert "diffusion_gemma: an encoder and a decoder" in wrapped.layers[0].reason
    voxtral = refpos.model_positions({"model_type": "voxtral", "text_config": LLAMA})  # a modelled wrapper
    assert [r.kind for r in voxtral] == ["rope", "rope"]


_SUB = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}
_DORY_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
              "full_attention": {"rope_type": "default", "rope_theta": 1e7}}


@pytest.mark.parametrize(("config", "why"), [
    ({"model_type": "dory", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 64,
      "layer_types": ["sliding_attention", "mlp", "full_attention", "mlp"], "rope_parameters": _DORY_ROPE,
      "n_input_layers": 2, "n_recurrent_layers": 0, "n_output_layers": 2, "n_recurrent_loops": 2}, "mlp block"),
    ({"model_type": "blt", **{f"{part}_config": dict(_SUB) for part in ("patcher", "encoder", "global", "decoder")}},
     "four transformers"),
], ids=["dory", "blt"])
def test_released_layouts_refpos_does_not_model_are_refused_by_name(config: dict, why: str):
    """Dory's released config lists an mlp block after each attention block (``DoryConfig.to_dict``: the counts
    doubled) and loops its recurrent layers; BLT runs four transformers, each from its own sub-config. Each is
    refused by name, where refpos raised a ValueError (no rope dict for 'mlp'; no width at the top)."""
    resolved = refpos.model_positions(config)
    assert {r.kind for r in resolved} == {"refused"} and why in resolved.layers[0].reason


def test_dia_is_its_encoder_and_its_decoder():
    """Dia's composite holds no layers of its own (DiaModel.forward): its encoder (dia_encoder) and its decoder
    (dia_decoder: a rotating self-attention and a cross-attention without positions in every layer), each from its
    own sub-config."""
    for named in ({"encoder_config": "dia_encoder", "decoder_config": "dia_decoder"}, {}):  # DiaConfig's defaults
        config = {"model_type": "dia", **{key: {**_SUB, **({"model_type": named[key]} if named else {})}
                                          for key in ("encoder_config", "decoder_config")}}
        resolved = refpos.model_positions(config)
        assert resolved.complete and resolved.stacks == ("encoder", "decoder", "decoder.cross")
        assert [r.kind for r in resolved] == ["rope"] * 4 + ["none"] * 2


def test_records_describe_themselves_as_json():
    for config in (BLOOM, T5, OPT, WHISPER, LLAMA, GRANITE_H):
        described = refpos.model_positions(config).describe()
        assert json.loads(json.dumps(described)) == described
        assert all({"stack", "index", "kind"} <= set(layer) for layer in described["layers"])


def test_rope_families_keep_their_answers():
    llama4 = {"model_type": "llama4_text", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
              "num_hidden_layers": 8, "rope_theta": 5e5, "max_position_embeddings": 8192}
    resolved, schedule = refpos.model_positions(llama4), hf_layers(llama4)
    assert [r.label for r in resolved] == [layer.kind for layer in schedule]
    assert all(r.rope == layer.rope for r, layer in zip(resolved, schedule, strict=True) if layer.rope is not None)
    assert resolved.layers[3].query_scale == schedule[3].scale


@pytest.mark.parametrize("config, named", [
    (OPT, "learned positions, not RoPE"), (BLOOM, "alibi positions"), (T5, "encoder–decoder"),
    (dict(FALCON, alibi=True), "alibi=true gives alibi"),
])
def test_the_rope_api_refuses_a_model_without_rope(config, named):
    with pytest.raises(ValueError, match=named):
        from_hf_config(config)
    with pytest.raises(ValueError, match="model_positions"):
        hf_layers(config)


def _model_type_comparisons(source: str, names: set[str]) -> list[str]:
    """``x == "gptj"`` / ``x in {"glm", …}`` comparisons of a model type in Python source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values = [side] if isinstance(side, ast.Constant) else list(getattr(side, "elts", []))
                found += [v.value for v in values if isinstance(v, ast.Constant) and v.value in names]
    return found


def test_family_facts_are_table_data_not_python_branches(tmp_path):
    """No module of refpos.models that reads a config compares a model type with a family's name: the facts are
    the table's (names that are also an encoding's, a slope rule's, a bias form's or a vision-RoPE form's, ``t5``,
    ``mpt``, ``swinv2``, ``llama4``, are those; the multimodal
    position ids of mm_positions are built from token spans, not read from a config)."""
    names = set(families.FAMILIES) | set(families.ALIASES)
    # a kind's own form names (Swin v2's bias form is "swinv2"; the vision-RoPE forms, "llama4", "vjepa2" …)
    names -= {*KINDS, *ALIBI_SLOPES, *BIAS_FORMS, *VISION_ROPES, *VISION_ROPES_PREFIXED, *VISION_ROPES_MORE,
              *VISION_ROPES_3D}
    problems = {path.name: found for path in Path(mp.__file__).parent.rglob("*.py") if path.name != "mm_positions.py"
                and (found := _model_type_comparisons(path.read_text(encoding="utf8"), names))}
    assert not problems, problems
    assert _model_type_comparisons('if model_type == "gptj" or t in ("glm", "x"):\n    pass\n', names) == [
        "gptj", "glm"]  # the check finds the branches it is for


DEBERTA_V3 = {"model_type": "deberta-v2", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
              "relative_attention": True, "position_buckets": 256, "max_relative_positions": -1,
              "max_position_embeddings": 512, "pos_att_type": ["p2c", "c2p"], "share_att_key": True,
              "position_biased_input": False}


def test_deberta_layers_read_the_keys_their_version_reads():
    v3 = refpos.model_positions(DEBERTA_V3).layers[0]
    assert (v3.kind, v3.stack, v3.position_buckets, v3.share_att_key, v3.pos_att_type) == (
        "deberta", "encoder", 256, True, ("p2c", "c2p"))
    assert v3.params()["relative_range"] == 512 and v3.params()["attention_span"] == 256  # -1: the table length
    assert v3.softmax_scale == 1.0 / math.sqrt(8 * 3)  # (d (1 + n))^-1/2, n = 2 terms
    np.testing.assert_array_equal(v3.relative_index(cache_position=[0, 1]), [[256, 255], [257, 256]])
    v1 = refpos.model_positions(dict(DEBERTA_V3, model_type="deberta", pos_att_type="c2p|p2c")).layers[0]
    assert (v1.position_buckets, v1.share_att_key, v1.pos_att_type) == (-1, False, ("c2p", "p2c"))  # v1 reads neither
    default = refpos.model_positions({"model_type": "deberta-v2", "num_hidden_layers": 1, "num_attention_heads": 2,
                                      "hidden_size": 8}).layers[0]
    assert (default.relative_attention, default.position_biased_input, default.pos_att_type) == (False, True, ())
    with pytest.raises(ValueError, match="position_buckets"):
        refpos.model_positions(dict(DEBERTA_V3, position_buckets=1))
    with pytest.raises(ValueError, match="pos_att_type"):
        refpos.model_positions(dict(DEBERTA_V3, pos_att_type=["p2p"]))
