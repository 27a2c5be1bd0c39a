"""The config.json resolver: every model of model_configs.json against its HF 5.24.0-resolved block,
provenance, unused keys, strict mode, schema variants and malformed input (fuzzed).

Tolerance: attention factors and multipliers are float64 re-derivations of the spec's closed forms,
rtol 1e-13 (spec_tests/test_rope_vectors.py).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import refpos
from refpos.models import from_hf_config, hf_layer_types
from refpos.rope import rope_frequencies, softmax_multiplier

DATA = Path(refpos.__file__).resolve().parent / "data" / "model_configs.json"
CONFIGS = json.loads(DATA.read_text(encoding="utf-8"))
LLAMA31 = CONFIGS["meta-llama/Llama-3.1-8B"]["config"]


def _check_resolved(rope, expected):
    assert rope.head_dim == expected.get("head_dim", expected.get("qk_head_dim"))
    if "rotary_dim" in expected:
        assert rope.rotary_dim == expected["rotary_dim"]
    assert rope.rope_type == expected["rope_type"]
    assert rope.theta == expected["rope_theta"]
    _, a = rope_frequencies(rope)
    assert a == pytest.approx(expected["attention_factor"], rel=1e-13)
    for key in ("original_max_position_embeddings", "factor"):
        if expected.get(key) is not None:
            assert getattr(rope, key) == expected[key], key
    if "softmax_scale_multiplier" in expected:
        assert rope.softmax_mscale and rope.placement == "last"
        assert softmax_multiplier(rope) == pytest.approx(expected["softmax_scale_multiplier"], rel=1e-13)
    if "rotated_pairs" in expected:
        inv, _ = rope_frequencies(rope)
        n_zero = int(refpos.to_numpy(inv == 0).sum())
        assert (inv.shape[0] - n_zero, n_zero) == (expected["rotated_pairs"], expected["zero_frequency_pairs"])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_model_resolves_as_hf(name):
    entry = CONFIGS[name]
    resolved = entry["resolved_by_hf_5_24"]
    layers = hf_layer_types(entry["config"])
    if layers:
        per_layer = resolved.get("per_layer_type", resolved)
        for layer in layers:
            expected = {**{k: v for k, v in resolved.items() if k != "per_layer_type"}, **per_layer[layer]}
            _check_resolved(from_hf_config(entry["config"], layer_type=layer), expected)
        return
    _check_resolved(from_hf_config(entry["config"]), resolved)
    if "with_long_context_recipe" in resolved:
        recipe = {**entry["config"], **entry["long_context_recipe"]}
        _check_resolved(from_hf_config(recipe), {**resolved, **resolved["with_long_context_recipe"]})


def test_layouts_and_placements_of_the_real_configs():
    def resolve(name, **kw):
        return from_hf_config(CONFIGS[name]["config"], **kw)

    assert resolve("EleutherAI/gpt-j-6b").layout == "interleaved"
    assert resolve("deepseek-ai/DeepSeek-V3").layout == "deinterleaved"
    assert resolve("deepseek-ai/DeepSeek-Coder-V2-Lite-Base").layout == "interleaved"
    assert resolve("meta-llama/Llama-3.1-8B").layout == "half"
    phi4 = resolve("microsoft/Phi-4-mini-instruct")
    assert (phi4.head_dim, phi4.rotary_dim, phi4.placement) == (128, 96, "first")
    gemma4 = resolve("Gemma-4 family (HF Gemma4Config defaults)", layer_type="full_attention")
    assert gemma4.placement == "proportional" and gemma4.provenance["head_dim"] == "config"


def test_provenance_says_where_each_field_came_from():
    neox = from_hf_config(CONFIGS["EleutherAI/gpt-neox-20b"]["config"])
    assert neox.provenance["theta"] == "config"  # rotary_emb_base
    assert neox.provenance["partial_rotary_factor"] == "config"  # rotary_pct
    assert neox.provenance["rotary_dim"] == neox.provenance["head_dim"] == "derived"
    assert neox.provenance["layout"] == "default"
    yarn = from_hf_config(CONFIGS["NousResearch/Yarn-Llama-2-13b-64k"]["config"])
    assert yarn.provenance["theta"] == "default" and yarn.theta == 10000.0
    phi = from_hf_config(CONFIGS["microsoft/Phi-3.5-mini-instruct"]["config"])
    assert phi.provenance["factor"] == "derived" and phi.factor == 32.0
    no_l0 = copy.deepcopy(LLAMA31)
    del no_l0["rope_scaling"]["original_max_position_embeddings"]
    derived = from_hf_config(no_l0)
    assert derived.original_max_position_embeddings == 131072
    assert derived.provenance["original_max_position_embeddings"] == "derived"
    gemma = from_hf_config(CONFIGS["google/gemma-3-12b-it (text_config)"]["config"], layer_type="sliding_attention")
    assert gemma.provenance["rope_type"] == "default" and gemma.theta == 10000.0


def test_unused_keys_are_reported_and_strict_refuses_rope_keys():
    yarn = CONFIGS["NousResearch/Yarn-Llama-2-13b-64k"]["config"]
    rope = from_hf_config(yarn)  # finetuned selects dynamic YaRN in the original code: read, no effect here
    assert "rope_scaling.finetuned" not in rope.unused_keys and any("finetuned" in n for n in rope.notes)
    config = {**yarn, "rope_scaling": {**yarn["rope_scaling"], "wobble": 2}}
    rope = from_hf_config(config)
    assert "rope_scaling.wobble" in rope.unused_keys and "rope_scaling.wobble" in rope.not_modelled
    assert "num_key_value_heads" in rope.unused_keys
    assert "rope_scaling.factor" not in rope.unused_keys
    with pytest.raises(ValueError, match=r"rope_scaling\.wobble"):
        from_hf_config(config, strict=True)
    # keys unrelated to positions are reported, never an error; an active sliding window is not modelled
    mistral = from_hf_config(CONFIGS["mistralai/Mistral-7B-v0.1"]["config"])
    assert mistral.unused_keys == ("num_key_value_heads", "sliding_window")
    assert list(mistral.not_modelled) == ["sliding_window"]
    with pytest.raises(ValueError, match="sliding_window"):
        from_hf_config(CONFIGS["mistralai/Mistral-7B-v0.1"]["config"], strict=True)
    assert not from_hf_config(CONFIGS["mistralai/Mistral-7B-Instruct-v0.2"]["config"], strict=True).not_modelled
    # a key of another rope type, a rope-like top-level key
    wrong = copy.deepcopy(LLAMA31)
    wrong["rope_scaling"]["beta_fast"] = 32
    wrong["no_rope_layers"] = [1, 1, 0]
    rope = from_hf_config(wrong)
    assert {"rope_scaling.beta_fast", "no_rope_layers"} <= set(rope.unused_keys)
    with pytest.raises(ValueError, match="beta_fast"):
        from_hf_config(wrong, strict=True)
    # per-layer configs: the other layer's entries are expected to be unused and are not "not modelled";
    # the sliding window and the softmax scale are
    gemma = CONFIGS["google/gemma-3-12b-it (text_config)"]["config"]
    for layer in ("full_attention", "sliding_attention"):
        rope = from_hf_config(gemma, layer_type=layer)
        assert rope.rope_type in ("linear", "default")
        assert set(rope.not_modelled) <= {"sliding_window", "sliding_window_pattern", "query_pre_attn_scalar",
                                          "layer_types"}


def test_v4_and_v5_schemas_resolve_alike():
    v4 = from_hf_config(LLAMA31)
    v5 = copy.deepcopy(LLAMA31)
    v5["rope_parameters"] = {**v5.pop("rope_scaling"), "rope_theta": v5.pop("rope_theta")}
    assert from_hf_config(v5) == v4
    legacy = copy.deepcopy(LLAMA31)
    legacy["rope_scaling"]["type"] = legacy["rope_scaling"].pop("rope_type")
    assert from_hf_config(legacy) == v4
    both = {**LLAMA31, "rope_parameters": LLAMA31["rope_scaling"]}
    assert from_hf_config(both) == v4  # equal dicts are fine
    conflict = {**LLAMA31, "rope_parameters": {"rope_type": "linear", "factor": 2.0}}
    with pytest.raises(ValueError, match="rope_scaling and rope_parameters"):
        from_hf_config(conflict)


def test_rope_type_wins_over_type_and_phi3_renames():
    both = copy.deepcopy(LLAMA31)
    both["rope_scaling"]["type"] = "linear"
    rope = from_hf_config(both)
    assert rope.rope_type == "llama3" and "rope_scaling.type" in rope.unused_keys and rope.notes
    phi = copy.deepcopy(CONFIGS["microsoft/Phi-3.5-mini-instruct"]["config"])
    phi["rope_scaling"]["type"] = "su"
    rope = from_hf_config(phi)
    assert rope.rope_type == "longrope" and any("su" in note for note in rope.notes)
    phi["rope_scaling"]["type"] = "yarn"
    assert from_hf_config(phi).rope_type == "longrope"
    phi["rope_scaling"] = {"type": "linear", "factor": 2.0}
    with pytest.raises(ValueError, match="phi3"):
        from_hf_config(phi)


def test_phi3_top_level_original_overwrites_the_dict():
    phi = copy.deepcopy(CONFIGS["microsoft/Phi-3.5-mini-instruct"]["config"])
    phi["rope_scaling"]["original_max_position_embeddings"] = 2048
    rope = from_hf_config(phi)
    assert rope.original_max_position_embeddings == 4096
    assert any("overwrites" in note for note in rope.notes)


def test_head_size_sources():
    base = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32}
    assert from_hf_config(base).head_dim == 128
    assert from_hf_config({**base, "head_dim": 64}).head_dim == 64
    with pytest.raises(ValueError, match="num_attention_heads"):
        from_hf_config({**base, "num_attention_heads": 30})
    with pytest.raises(ValueError, match="head_dim"):
        from_hf_config({"model_type": "llama"})
    assert from_hf_config({**base, "partial_rotary_factor": 0.5}).rotary_dim == 64
    glm = from_hf_config({"model_type": "glm", "hidden_size": 4096, "num_attention_heads": 32})
    assert (glm.rotary_dim, glm.layout, glm.provenance["partial_rotary_factor"]) == (64, "interleaved", "default")
    with pytest.raises(ValueError, match="rotary_dim"):
        from_hf_config({**base, "head_dim": 10, "partial_rotary_factor": 0.5})  # d = 5 is odd


def test_per_layer_configs_need_a_layer_type():
    gemma4 = CONFIGS["Gemma-4 family (HF Gemma4Config defaults)"]["config"]
    assert hf_layer_types(gemma4) == ("full_attention", "sliding_attention")
    with pytest.raises(ValueError, match="layer_type"):
        from_hf_config(gemma4)
    with pytest.raises(ValueError, match="chunked_attention"):
        from_hf_config(gemma4, layer_type="chunked_attention")
    with pytest.raises(ValueError, match="layer_type"):
        from_hf_config(LLAMA31, layer_type="full_attention")
    nope_layer = {"model_type": "x", "head_dim": 64,
                  "rope_parameters": {"full_attention": None, "sliding_attention": {"rope_type": "default"}}}
    with pytest.raises(ValueError, match="NoPE"):
        from_hf_config(nope_layer, layer_type="full_attention")
    per_layer_truncate = {"model_type": "x", "head_dim": 64, "max_position_embeddings": 8192,
                          "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 4.0,
                                                                 "truncate": False}}}
    rope = from_hf_config(per_layer_truncate, layer_type="full_attention")
    assert rope.truncate is True and "rope_parameters.full_attention.truncate" in rope.unused_keys
    assert rope.original_max_position_embeddings == 8192  # per-layer: only defaults to L_max


def test_text_config_is_read_when_the_top_level_has_no_rope():
    wrapped = {"model_type": "gemma3", "text_config": CONFIGS["google/gemma-3-12b-it (text_config)"]["config"]}
    rope = from_hf_config(wrapped, layer_type="full_attention")
    assert rope.factor == 8.0 and "read from text_config" in rope.notes
    assert "text_config.sliding_window" in rope.unused_keys


def test_paths(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA31))
    assert from_hf_config(tmp_path / "config.json") == from_hf_config(LLAMA31)
    assert from_hf_config(str(tmp_path)) == from_hf_config(LLAMA31)  # a model directory
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        from_hf_config(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(TypeError, match="JSON object"):
        from_hf_config(tmp_path / "list.json")
    with pytest.raises(ValueError, match="cannot read"):
        from_hf_config(tmp_path / "missing.json")
    for bad in (42, None, b"{}", ["rope_theta"]):
        with pytest.raises(TypeError, match="config_or_path"):
            from_hf_config(bad)


@pytest.mark.parametrize(("patch", "name"), [
    ({"rope_scaling": {"rope_type": "ntk-by-parts", "factor": 2.0}}, "rope_type"),
    ({"rope_scaling": {"rope_type": "ntk", "factor": -2.0}}, "factor"),  # vLLM's ntk: factor still checked
    ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}, "max_position_embeddings": None},
     "original_max_position_embeddings"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 0.5}}, "factor"),
    ({"rope_scaling": {"rope_type": "linear"}}, "factor"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 1, "beta_slow": 32}}, "beta_fast"),
    ({"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 64}},
     "short_factor"),
    ({"rope_scaling": "yarn"}, "rope_scaling"),
    ({"rope_theta": "1e4"}, "theta"),
    ({"head_dim": 127}, "rotary_dim"),
    ({"rope_theta": -1.0}, "theta"),
])
def test_bad_configs_name_the_parameter(patch, name):
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "max_position_embeddings": 4096, **patch}
    with pytest.raises((ValueError, TypeError), match=name):
        from_hf_config(config)


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8) | st.sampled_from(["yarn", "llama3", "longrope", "su", "default", "linear", "dynamic",
                                            "proportional", "full_attention"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
_keys = st.sampled_from(["model_type", "hidden_size", "num_attention_heads", "head_dim", "rope_theta",
                         "max_position_embeddings", "original_max_position_embeddings", "partial_rotary_factor",
                         "rotary_pct", "rotary_dim", "rope_interleave", "qk_rope_head_dim", "qk_nope_head_dim",
                         "global_head_dim", "rope_local_base_freq", "text_config", "n_embd", "n_head"])
_rope_keys = st.sampled_from(["rope_type", "type", "factor", "original_max_position_embeddings", "beta_fast",
                              "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate",
                              "low_freq_factor", "high_freq_factor", "short_factor", "long_factor", "rope_theta",
                              "partial_rotary_factor", "full_attention"])


@st.composite
def malformed_configs(draw):
    config = draw(st.dictionaries(_keys, _values, max_size=8))
    if draw(st.booleans()):
        config.setdefault("hidden_size", draw(st.sampled_from([64, 4096, 100])))
        config.setdefault("num_attention_heads", draw(st.sampled_from([1, 2, 32, 0])))
    if draw(st.booleans()):
        key = draw(st.sampled_from(["rope_scaling", "rope_parameters"]))
        config[key] = draw(st.dictionaries(_rope_keys, _values, max_size=6) | _values)
    return config


@st.composite
def mutated_real_configs(draw):
    """A real config with 1-3 keys (top level or in the rope dict) deleted, replaced or added."""
    config = copy.deepcopy(CONFIGS[draw(st.sampled_from(sorted(CONFIGS)))]["config"])
    for _ in range(draw(st.integers(1, 3))):
        rope = next((config[k] for k in ("rope_scaling", "rope_parameters") if isinstance(config.get(k), dict)), None)
        target = rope if rope is not None and draw(st.booleans()) else config
        action = draw(st.sampled_from(["delete", "replace", "add"]))
        if action == "delete" and target:
            del target[draw(st.sampled_from(sorted(target)))]
        elif action == "replace" and target:
            target[draw(st.sampled_from(sorted(target)))] = draw(_values)
        else:
            target[draw(_rope_keys | _keys)] = draw(_values)
    return config


@given(malformed_configs() | mutated_real_configs(), st.sampled_from([None, "full_attention", "sliding_attention"]),
       st.booleans())
def test_fuzz_only_value_and_type_errors_escape(config, layer_type, strict):
    try:
        rope = from_hf_config(config, layer_type=layer_type, strict=strict)
    except (ValueError, TypeError):
        return
    inv, a = rope_frequencies(rope, seq_len=10**6)  # a resolved config is usable
    assert math.isfinite(a) and bool((refpos.to_numpy(inv) >= 0).all())
    assert all(math.isfinite(float(w)) for w in refpos.to_numpy(inv))


def test_cli(tmp_path, capsys):
    from refpos.cli import main

    path = tmp_path / "config.json"
    yarn = CONFIGS["NousResearch/Yarn-Llama-2-13b-64k"]["config"]
    path.write_text(json.dumps({**yarn, "rope_scaling": {**yarn["rope_scaling"], "wobble": 2}}))
    assert main(["rope", str(path), "--seq-len", "8192"]) == 0
    out = capsys.readouterr().out
    assert "attention factor A = 1.2772588722239782" in out and "rope_scaling.wobble" in out
    assert main(["rope", str(path), "--strict"]) == 2
    assert "rope_scaling.wobble" in capsys.readouterr().err
    gemma = tmp_path / "gemma4.json"
    gemma.write_text(json.dumps(CONFIGS["Gemma-4 family (HF Gemma4Config defaults)"]["config"]))
    assert main(["rope", str(gemma), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["full_attention"]["inv_freq"][64:] == [0.0] * 192
    assert summary["sliding_attention"]["params"]["head_dim"] == 256


MISTRAL4 = {"model_type": "mistral4", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 4,
            "qk_nope_head_dim": 64, "qk_rope_head_dim": 64, "kv_lora_rank": 256, "q_lora_rank": 1024,
            "max_position_embeddings": 1048576,
            "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 128.0,
                                "original_max_position_embeddings": 8192, "max_position_embeddings": 1048576,
                                "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                "llama_4_scaling_beta": 0.1, "partial_rotary_factor": 0.5}}


def test_the_rope_dicts_length_and_an_mla_fraction_are_read_as_the_model_reads_them():
    """Mistral-4's and Ministral-3's config classes copy max_position_embeddings into the yarn dict, which no rope
    function reads (_compute_yarn_parameters reads the top level's); Mistral-4's partial_rotary_factor is
    qk_rope_head_dim / (qk_nope_head_dim + qk_rope_head_dim), the rotated channels the MLA split gives."""
    rope = from_hf_config(MISTRAL4)
    assert (rope.rotary_dim, rope.head_dim, rope.rope_type) == (64, 128, "yarn")
    from refpos.models.layers import hf_layers

    assert hf_layers(MISTRAL4).not_modelled == {}
    assert any("max_position_embeddings" in n and "without effect" in n for n in rope.notes)
    odd = from_hf_config({**MISTRAL4, "rope_parameters": {**MISTRAL4["rope_parameters"],
                                                          "partial_rotary_factor": 0.25}})
    assert "not the qk_rope_head_dim=64 channels" in odd.not_modelled["rope_parameters.partial_rotary_factor"]


def test_jetmoe_heads_are_kv_channels_wide():
    """JetMoeConfig maps head_dim to kv_channels (default 128), the width JetMoeRotaryEmbedding and the attention
    read, whatever hidden_size / num_attention_heads is."""
    config = {"model_type": "jetmoe", "hidden_size": 2048, "num_attention_heads": 16, "kv_channels": 64,
              "num_key_value_heads": 16, "max_position_embeddings": 4096, "rope_theta": 1e4}
    rope = from_hf_config(config, strict=True)
    assert (rope.head_dim, rope.provenance["head_dim"]) == (64, "config")
    unset = from_hf_config({k: v for k, v in config.items() if k != "kv_channels"}, strict=True)
    assert (unset.head_dim, unset.provenance["head_dim"]) == (128, "default")


DOTS3_NOTE_TEXT = {"model_type": "dots3_note_text", "hidden_size": 4096, "num_attention_heads": 64,
                   "num_hidden_layers": 4, "head_dim": 256, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                   "kv_lora_rank": 512, "q_lora_rank": 1024, "max_position_embeddings": 524288,
                   "layer_types": ["indexed_attention", "indexed_attention", "sliding_attention", "indexed_attention"],
                   "per_layer_config": {"2": {"num_attention_heads": 64, "qk_nope_head_dim": 192}},
                   "rope_parameters": {
                       "indexed_attention": {"rope_type": "default", "rope_theta": 8e7, "partial_rotary_factor": 0.25},
                       "sliding_attention": {"rope_type": "default", "rope_theta": 5e4, "partial_rotary_factor": 0.25}}}


def test_dots3_note_reads_each_types_fraction_and_names_the_per_layer_widths():
    """Dots3NoteTextRotaryEmbedding builds int(head_dim · prf) = 64 frequencies per layer type (head_dim 256, not
    d_nope + d_rope = 192); the sliding layers' own widths in per_layer_config are not read, and said so."""
    rope = from_hf_config(DOTS3_NOTE_TEXT, layer_type="indexed_attention")
    assert (rope.rotary_dim, rope.theta) == (64, 8e7)
    assert not [key for key in rope.not_modelled if key.startswith("rope_parameters")]
    assert any("int(256·0.25) = 64" in n for n in rope.notes)
    sliding = from_hf_config(DOTS3_NOTE_TEXT, layer_type="sliding_attention")
    assert "layer 2 (sliding_attention) sets its own qk_nope_head_dim" in sliding.not_modelled["per_layer_config"]
    odd = {**DOTS3_NOTE_TEXT, "rope_parameters": {**DOTS3_NOTE_TEXT["rope_parameters"], "indexed_attention": {
        "rope_type": "default", "rope_theta": 8e7, "partial_rotary_factor": 0.5}}}
    assert "qk_rope_head_dim=64" in from_hf_config(odd, layer_type="indexed_attention").not_modelled[
        "rope_parameters.indexed_attention.partial_rotary_factor"]
