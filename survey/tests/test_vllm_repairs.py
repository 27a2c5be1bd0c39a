"""The fields the vLLM survey states where transformers' config classes no longer define what vLLM's model code
reads (:mod:`survey.vllm_engine.repairs`), and vLLM's KV-sharing layers recorded with the keys they attend over
(:mod:`survey.vllm_engine.engine`). The first need no vLLM; the last builds Gemma 3n's text model with it."""

from __future__ import annotations

import pytest

from survey.vllm_engine import repairs


def test_each_field_is_stated_at_the_value_transformers_computes_and_named():
    values, notes = repairs.repaired({"model_type": "glm4_moe", "hidden_size": 256, "num_attention_heads": 4})
    assert values["head_dim"] == 64 and notes == [f"head_dim=64 stated: {repairs.REPAIRS['glm4_moe'][0]}"]
    lite = {"model_type": "glm4_moe_lite", "mlp_layer_types": ["dense", "dense", "sparse", "sparse"]}
    assert repairs.repaired(lite)[0]["first_k_dense_replace"] == 2
    assert repairs.repaired({"model_type": "lfm2", "hidden_size": 96})[0]["block_dim"] == 96
    assert repairs.repaired({"model_type": "gte"})[0] == {"model_type": "gte", "position_embedding_type": "rope"}
    assert repairs.repaired({"model_type": "lighton_ocr", "image_token_id": 7})[0] == {
        "model_type": "lighton_ocr", "image_token_id": 7, "vision_feature_layer": -1, "projector_hidden_act": "gelu",
        "multimodal_projector_bias": False, "image_token_index": 7}


def test_a_stated_value_is_kept_and_a_sub_config_is_repaired_where_it_is():
    assert repairs.repaired({"model_type": "glm4_moe", "hidden_size": 256, "num_attention_heads": 4,
                             "head_dim": 32}) == ({"model_type": "glm4_moe", "hidden_size": 256,
                                                   "num_attention_heads": 4, "head_dim": 32}, [])
    values, notes = repairs.repaired({"model_type": "lfm2_vl", "text_config": {"model_type": "lfm2",
                                                                               "hidden_size": 64}})
    assert values["text_config"]["block_dim"] == 64 and "block_dim" not in values
    assert notes[0].startswith("text_config.block_dim=64 stated")
    assert repairs.repaired({"model_type": "llama", "hidden_size": 64}) == ({"model_type": "llama",
                                                                            "hidden_size": 64}, [])


def test_glm4v_moe_text_states_its_head_width_no_query_key_norm_and_its_sections():
    values, notes = repairs.repaired({"model_type": "glm4v_moe", "text_config": {
        "model_type": "glm4v_moe_text", "hidden_size": 256, "num_attention_heads": 8,
        "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}})
    text = values["text_config"]
    assert text["head_dim"] == 32 and text["use_qk_norm"] is False
    # 32 · 0.5 / 2 = 8 frequency pairs: [8, 12, 12] scaled to sum to 8, the largest remainders first
    assert text["rope_parameters"] == {"rope_type": "default", "partial_rotary_factor": 0.5, "mrope_section": [2, 3, 3]}
    assert [n.split("=")[0] for n in notes] == ["text_config.head_dim", "text_config.use_qk_norm",
                                                "text_config.rope_parameters"]
    kept = {"model_type": "glm4v_moe_text", "hidden_size": 256, "num_attention_heads": 8, "head_dim": 16,
            "use_qk_norm": True, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3]}}
    assert repairs.repaired(kept) == (kept, [])


def test_a_dotted_field_is_stated_on_the_sub_config_it_names_where_unset():
    text = {"model_type": "deepseek_v2", "n_group": None, "topk_group": 4}
    values, notes = repairs.repaired({"model_type": "kimi_vl", "text_config": text})
    assert values["text_config"] == {"model_type": "deepseek_v2", "n_group": 1, "topk_group": 4}
    assert "text_config.n_group" not in values and "n_group" not in values
    assert [n.split(" stated")[0] for n in notes] == ["text_config.n_group=1"]


def test_a_schedule_that_is_not_a_dense_prefix_is_not_stated():
    with pytest.raises(ValueError, match="dense prefix"):
        repairs.repaired({"model_type": "glm4_moe_lite", "mlp_layer_types": ["dense", "sparse", "dense"]})


def test_every_record_says_why():
    assert all(isinstance(why, str) and "vLLM" in why and callable(rule) for why, rule in repairs.REPAIRS.values())


def test_a_kv_sharing_layer_is_recorded_with_its_target_layers_keys(vllm_observe):
    """Gemma 3n's last layers read an earlier layer's cache and are handed no key: each call is recorded with the
    key its target layer's call was handed, and the row is exact as transformers' is."""
    import numpy as np

    from survey.vllm_engine import run

    seen = vllm_observe("Gemma3nForCausalLM")
    assert seen.run is not None, seen.row.cause
    calls = seen.run.a.calls
    shared = seen.config["num_kv_shared_layers"]
    assert shared > 0 and len(calls) == seen.config["num_hidden_layers"]
    last, target = calls[-1], calls[-1 - shared]  # the same layer type, every `shared` layers back at most
    assert any(np.array_equal(last.key, c.key) for c in calls[:-shared]) and last.key.shape == target.key.shape
    assert run.judge(seen).status == "exact"


def test_a_composite_tie_and_an_architectures_own_key_are_stated():
    values, _ = repairs.repaired({"model_type": "muse_glimmer", "out_hidden_size": 6144,
                                  "vision_config": {"model_type": "muse_glimmer_vision", "hidden_size": 96,
                                                    "merge_size": 2}})
    assert values["out_hidden_size"] == 96 * 2**2  # the pixel shuffle's width at the tiny tower's width
    bidirectional = {"model_type": "llama", "architectures": ["LlamaBidirectionalModel"]}
    values, notes = repairs.repaired(bidirectional)
    assert values["pooling"] == "avg" and notes[0].startswith("pooling='avg' stated")
    assert "pooling" not in repairs.repaired({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})[0]
