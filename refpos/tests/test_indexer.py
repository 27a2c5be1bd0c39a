"""The DSA indexer's RoPE records (refpos.models.indexer): head, placement, layout, layers; bad input named."""

from __future__ import annotations

import pytest

from refpos.models.hf import from_hf_config
from refpos.models.indexer import indexer_layers, indexer_rope

V32 = {"model_type": "deepseek_v32", "hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64,
       "qk_nope_head_dim": 128, "v_head_dim": 128, "kv_lora_rank": 512, "q_lora_rank": 1536, "index_head_dim": 128,
       "index_n_heads": 64, "index_topk": 2048, "num_hidden_layers": 61, "max_position_embeddings": 163840,
       "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                                             "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}}


def test_the_indexer_shares_the_main_frequencies_on_its_own_head():
    main = from_hf_config(V32)
    rope = indexer_rope(V32, main)
    assert (main.head_dim, main.placement, main.layout) == (192, "last", "deinterleaved")
    assert (rope.head_dim, rope.rotary_dim, rope.placement, rope.layout) == (128, 64, "first", "half")
    assert (rope.rope_type, rope.factor, rope.theta, rope.mscale_all_dim) == ("yarn", 40.0, 10000.0, 1.0)
    glm = {**V32, "model_type": "glm_moe_dsa"}
    assert indexer_rope(glm, from_hf_config(glm)).layout == "deinterleaved"
    axk2 = {**V32, "model_type": "axk2"}  # A.X-K2: its main attention de-interleaves, its indexer splits in halves
    assert (from_hf_config(axk2).layout, indexer_rope(axk2, from_hf_config(axk2)).layout) == ("deinterleaved", "half")
    assert indexer_rope({**V32, "model_type": "deepseek_v3"}, main) is None


def test_which_layers_run_an_indexer():
    assert indexer_layers(V32, 3) == (True,) * 3
    glm = {"model_type": "glm_moe_dsa", "index_topk_freq": 2}
    # layer i is full where max(i − 2 + 1, 0) mod 2 = 0: 0, 1, 3, 5
    assert indexer_layers(glm, 6) == (True, True, False, True, False, True)
    assert indexer_layers({"model_type": "glm_moe_dsa", "index_topk_pattern": "FSF"}, 3) == (True, False, True)
    assert indexer_layers({"model_type": "llama"}, 2) == (False, False)


@pytest.mark.parametrize(("config", "error", "message"), [
    ({**V32, "index_head_dim": None}, TypeError, "index_head_dim must be an int"),
    ({**V32, "index_head_dim": 32, "qk_rope_head_dim": 64}, ValueError, "exceeds index_head_dim=32"),
])
def test_bad_indexer_configs_are_named(config, error, message):
    with pytest.raises(error, match=message):
        indexer_rope(config, from_hf_config(V32))


def test_bad_indexer_types_are_named():
    with pytest.raises(ValueError, match="indexer_types must list 'full' or 'shared'"):
        indexer_layers({"model_type": "glm_moe_dsa", "indexer_types": ["full"]}, 2)
