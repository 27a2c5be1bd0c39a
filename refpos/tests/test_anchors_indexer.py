"""The DSA indexer's RoPE (refpos.models.indexer) against DeepSeek-V3.2's, GLM-5's and A.X-K2's own indexers
(anchors env).

transformers' indexer returns top-k indices only; the test reads what it rotates from inside it:

* **the rotated slice**: the family's rotary apply function, wrapped, hands back its input and output; refpos's
  indexer RoPE (the resolved main RoPE with the indexer's head, placement and layout) applied to the same
  input agrees to the float32 tables: atol = A·(3·max φ + 4)·2⁻²⁴·2·max|x| (the table error of cos and sin,
  A the attention factor, two terms per output);
* **the scores**: ``F.relu``'s argument, ``q·k × index_head_dim^-½`` in float32, against refpos's float64 scores
  of the same unrotated q and k (the indexer's own projections): atol per score =
  scale·Σ|q||k|·(2·table error + (index_head_dim + 4)·2⁻²⁴) (the rotation's table error on both factors, then
  float32 rounding of q, k and of the sum).

Scores do not tell a layout from its de-interleaved twin (both rotate q and k alike); the rotated slice does.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.models.hf import from_hf_config
from refpos.models.indexer import INDEXER_ROPES, indexer_layers, indexer_rope
from refpos.rope.core import apply_rope
from refpos.rope.scaling import rope_frequencies
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

#: family -> (module, config class, indexer class, rotary class, the apply function its indexer calls)
MODELS = {"deepseek_v32": ("deepseek_v32", "DeepseekV32Config", "DeepseekV32Indexer", "DeepseekV32RotaryEmbedding",
                           "apply_rotary_pos_emb"),
          "glm_moe_dsa": ("glm_moe_dsa", "GlmMoeDsaConfig", "GlmMoeDsaIndexer", "GlmMoeDsaRotaryEmbedding",
                          "apply_rotary_pos_emb_interleave"),
          "axk2": ("axk2", "AXK2Config", "AXK2Indexer", "AXK2RotaryEmbedding", "apply_rotary_pos_emb")}
ROPES = {"default": {"rope_type": "default", "rope_theta": 10000.0},
         "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
                  "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}}


def _config(family: str, rope: str) -> dict:
    return {"model_type": family, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
            "q_lora_rank": 16, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8,
            "index_head_dim": 24, "index_n_heads": 2, "index_topk": 4, "num_hidden_layers": 1,
            "max_position_embeddings": 256, "rope_parameters": dict(ROPES[rope])}


@pytest.mark.parametrize("family", sorted(INDEXER_ROPES))
@pytest.mark.parametrize("rope_name", sorted(ROPES))
def test_indexer_rotation_and_scores(family, rope_name, monkeypatch):
    module, config_cls, indexer_cls, rotary_cls, apply_name = MODELS[family]
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    configuration = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    config = _config(family, rope_name)
    hf_config = getattr(configuration, config_cls)(**{k: (dict(v) if isinstance(v, dict) else v)
                                                       for k, v in config.items() if k != "model_type"})
    torch.manual_seed(0)
    indexer = getattr(modeling, indexer_cls)(hf_config, 0).double()
    rotary = getattr(modeling, rotary_cls)(hf_config)
    rope = indexer_rope(config, from_hf_config(config))
    layout = INDEXER_ROPES[family].layout
    assert (rope.head_dim, rope.rotary_dim, rope.placement, rope.layout) == (24, 8, "first", layout)

    seen, scores = {}, {}
    original = getattr(modeling, apply_name)

    def wrapped(q, k, cos, sin, *args, **kwargs):
        out = original(q, k, cos, sin, *args, **kwargs)
        seen.update(q_in=q.detach().numpy().copy(), q_out=out[0].detach().numpy().copy())
        return out

    def relu(x):
        scores["x"] = x.detach().double().numpy().copy()
        return torch.relu(x)

    monkeypatch.setattr(modeling, apply_name, wrapped)
    monkeypatch.setattr(modeling, "F", SimpleNamespace(relu=relu))
    positions = np.array([[0, 1, 5, 63, 64, 200]])  # (B, T), past the original length for yarn
    hidden = torch.randn(1, positions.shape[1], 64, dtype=torch.float64)
    resid = torch.randn(1, positions.shape[1], 16, dtype=torch.float64)
    cos, sin = rotary(hidden, torch.from_numpy(positions))
    mask = torch.zeros(1, 1, positions.shape[1], positions.shape[1], dtype=torch.float64)
    indexer(hidden, resid, (cos.double(), sin.double()), mask, torch.from_numpy(positions))

    inv_freq, factor = rope_frequencies(rope, seq_len=int(positions.max()) + 1)
    table_error = float32_table_atol(float(positions.max()) * float(np.max(inv_freq)), factor)
    # the rotated slice: (B, S, H, d) as the indexer passes it
    slice_in = seen["q_in"]
    ours = apply_rope(np.moveaxis(slice_in, 2, 1), positions[0], _slice_rope(rope))
    np.testing.assert_allclose(np.moveaxis(ours, 1, 2), seen["q_out"], rtol=0,
                               atol=2 * table_error * float(np.abs(slice_in).max()))
    # the scores: refpos's rotation of the whole index heads, the indexer's own projections
    q = indexer.wq_b(resid).view(1, positions.shape[1], 2, 24).detach().numpy()  # (B, S, H, D_I)
    k = indexer.k_norm(indexer.wk(hidden)).detach().numpy()  # (B, S, D_I)
    q_rot = np.moveaxis(apply_rope(np.moveaxis(q, 2, 1), positions[0], rope), 1, 2)  # (B, S, H, D_I)
    k_rot = apply_rope(k, positions[0], rope)
    want = np.einsum("bshd,btd->bsht", q_rot, k_rot) * 24**-0.5
    bound = 24**-0.5 * np.einsum("bshd,btd->bsht", np.abs(q), np.abs(k)) * (2 * table_error + 28 * 2.0**-24)
    assert np.all(np.abs(scores["x"] - want) <= bound)


def _slice_rope(rope):
    """The indexer's RoPE on the rotated slice alone (the apply function sees only those channels)."""
    import dataclasses

    return dataclasses.replace(rope, head_dim=rope.rotary_dim, rotary_dim=rope.rotary_dim, partial_rotary_factor=None)


@pytest.mark.parametrize("kwargs", [{}, {"index_topk_freq": 3}, {"index_topk_freq": 2, "index_skip_topk_offset": 0},
                                    {"index_topk_pattern": "FSSFSF"}, {"indexer_types": ["full", "shared"] * 3}])
def test_which_glm5_layers_run_an_indexer(kwargs):
    from transformers.models.glm_moe_dsa.configuration_glm_moe_dsa import GlmMoeDsaConfig

    hf = GlmMoeDsaConfig(num_hidden_layers=6, **kwargs)
    want = tuple(t == "full" for t in hf.indexer_types)
    assert indexer_layers({"model_type": "glm_moe_dsa", **kwargs}, 6) == want
    assert indexer_layers({"model_type": "deepseek_v32", **kwargs}, 6) == (True,) * 6
