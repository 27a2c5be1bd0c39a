"""Anchors: the real configs of the family set (``refpos/data/family_configs.json``) against transformers'
own modules (5.24, torch CPU), layer by layer.

* the rotation: each distinct layer RoPE of :func:`refpos.models.hf_layers` applied to a seeded ``q`` against the
  model's rotary module and its apply function (``apply_rotary_pos_emb``, DeepSeek-V3's
  ``apply_rotary_pos_emb_interleave``, Llama 4's complex ``apply_rotary_emb``); MLA configs on their
  rotated channels;
* the schedule: which layers rotate, read from transformers' attention modules built from a shrunk copy
  of the config (same layer keys; ``use_rope``, ``sliding_window``, ``is_sliding``);
* the query scales: ``get_llama_4_attn_scale`` (Ministral-3) and Llama 4's attention forward run with
  identity projections (the query it hands to attention is the temperature at each position).

Tolerance: transformers builds ``inv_freq`` and the angles ``p·ω`` in float32, so a rotated pair differs from
the float64 reference by up to ``(3·p·max ω·2⁻²⁴ + 1e-6)·A·‖pair‖`` at position ``p`` (the float32 angle
rounding; ``refpos.golden.tolerance``'s constant). The query scales are float32 products: rtol 1e-6.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

import refpos
from refpos.models.families import family_of

torch = pytest.importorskip("torch", reason="family anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="family anchors need transformers")

pytestmark = pytest.mark.anchors

CONFIGS = json.loads((Path(refpos.__file__).parent / "data" / "family_configs.json").read_text(encoding="utf8"))
PROBES = (0, 1, 2, 7, 100, 4095, 4096, 4097, 8191, 8192, 16383, 32767, 65535, 131071)


def hf_config(config):
    """transformers' config object of a family config (aliases followed: kimi_k2 is deepseek_v3)."""
    from transformers import AutoConfig

    config = dict(config)
    model_type = family_of(config.pop("model_type")).model_type
    config.pop("architectures", None)
    if isinstance(config.get("attn_temperature_tuning"), int):  # Scout base ships 4: 5.24 takes only a bool,
        config["attn_temperature_tuning"] = bool(config["attn_temperature_tuning"])  # 4.51 read its truth
    return AutoConfig.for_model(model_type, **config)


def modeling(hf_cfg):
    return importlib.import_module(type(hf_cfg).__module__.replace("configuration_", "modeling_"))


def rotary_module(hf_cfg, layer_type=None):
    mod = modeling(hf_cfg)
    name = next(n for n in sorted(dir(mod)) if n.endswith("RotaryEmbedding") and "Vision" not in n)
    return getattr(mod, name)(hf_cfg)


def hf_rotate(hf_cfg, q, positions):
    """q (1, H, T, d) rotated by transformers' own modules; d = qk_rope_head_dim for MLA configs."""
    mod, rotary = modeling(hf_cfg), rotary_module(hf_cfg)
    pos = torch.as_tensor(positions)[None]
    if hasattr(mod, "apply_rotary_emb") and not hasattr(mod, "apply_rotary_pos_emb"):  # Llama 4: complex pairs
        freqs_cis = rotary(q, pos)
        out, _ = mod.apply_rotary_emb(q.transpose(1, 2), q.transpose(1, 2), freqs_cis)
        return out.transpose(1, 2)
    cos, sin = rotary(q, pos)
    if getattr(hf_cfg, "rope_interleave", False) and hasattr(mod, "apply_rotary_pos_emb_interleave"):
        out, _ = mod.apply_rotary_pos_emb_interleave(q, q, cos, sin)
    else:
        out, _ = mod.apply_rotary_pos_emb(q, q, cos.to(q.dtype), sin.to(q.dtype))
    return out


def rope_layers(config):
    schedule = refpos.models.hf_layers(config)
    distinct = {}
    for layer in schedule:
        if layer.rope is not None:
            distinct.setdefault(layer.layer_type, layer.rope)
    return schedule, distinct


def rotation_error(config, rope, seed=0, below=None):
    """(max |refpos − transformers| over the probe positions (those < ``below`` if given), the float32-angle
    bound there)."""
    limit = min(config.get("max_position_embeddings") or 131072, below or 2**62)
    positions = np.array([p for p in PROBES if p < limit], dtype=np.int64)
    width = config.get("qk_rope_head_dim") or rope.head_dim
    x = np.random.default_rng(seed).standard_normal((2, positions.size, rope.head_dim))  # (H, T, D)
    ours = refpos.to_numpy(refpos.apply_rope(x, positions, rope))[..., rope.head_dim - width:]  # (H, T, d)
    theirs = hf_rotate(hf_config(config), torch.from_numpy(x[..., rope.head_dim - width:])[None],
                       positions)[0].double().numpy()
    inv, a = refpos.rope_frequencies(rope, seq_len=int(positions.max()) + 1)
    w_max = float(np.max(refpos.to_numpy(inv)))
    bound = (3 * positions * w_max * 2.0**-24 + 1e-6) * a * 2 * np.abs(x).max()  # (T,)
    error = np.abs(ours - theirs).max(axis=(0, 2))  # (T,)
    return float(error.max()), error, bound


def _keeps_short_factors(config):
    """Families whose transformers module keeps the short LongRoPE factors past L_0 (see the xfail below)."""
    return "longrope_mscale" in family_of(config["model_type"]).rope_dict


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_rotation_matches_transformers(name):
    config = CONFIGS[name]["config"]
    _, distinct = rope_layers(config)
    assert distinct, "every config of the family set rotates somewhere"
    for rope in distinct.values():  # Phi-3.5-MoE: up to L_0 here, past it below
        below = rope.original_max_position_embeddings if _keeps_short_factors(config) else None
        _, error, bound = rotation_error(config, rope, below=below)
        assert (error <= bound).all(), (error, bound)


@pytest.mark.xfail(strict=True, reason="transformers 5.24 models/phimoe/modeling_phimoe.py "
                   "PhimoeRotaryEmbedding.forward takes long_mscale past L_0 = 4096 but inv_freq from "
                   "rope_init_fn(self.config) without the length, i.e. the short factors; refpos (like Phi-3.5-MoE's "
                   "own modeling code and vLLM) switches to the long factors. Measured on "
                   "microsoft/Phi-3.5-MoE-instruct at the probes up to 131071 (transformers run at L = 131072): "
                   "max |refpos - transformers| = 7.33 (1.88 x max |x|), 0.127 already at p = 1")
@pytest.mark.parametrize("name", sorted(n for n in CONFIGS if _keeps_short_factors(CONFIGS[n]["config"])))
def test_rotation_past_the_original_length_matches_transformers(name):
    config = CONFIGS[name]["config"]
    rope = rope_layers(config)[1][None]
    _, error, bound = rotation_error(config, rope)
    assert (error <= bound).all(), (error, bound)


def _shrunk(hf_cfg):
    """The same layer keys, small tensors: attention modules build in microseconds."""
    small = hf_cfg.__class__.from_dict({**hf_cfg.to_dict(), "hidden_size": 64, "num_attention_heads": 2,
                                        "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 32})
    return small


def hf_rotating_layers(config):
    """Per layer, whether transformers' attention module of that layer applies RoPE."""
    hf_cfg = hf_config(config)
    mod, small = modeling(hf_cfg), _shrunk(hf_cfg)
    attention = next(getattr(mod, n) for n in sorted(dir(mod)) if n.endswith("Attention")
                     and n.startswith(type(hf_cfg).__name__.replace("Config", "")[:5]) and "Flash" not in n)
    out = []
    for i in range(hf_cfg.num_hidden_layers):
        module = attention(small, i)
        if hasattr(module, "use_rope"):
            out.append(bool(module.use_rope))
        elif hasattr(module, "is_sliding"):  # EXAONE-4: sliding layers, or all without a window
            out.append(module.sliding_window is None or module.is_sliding)
        elif type(hf_cfg).__name__.startswith("Cohere2"):
            out.append(module.sliding_window is not None)
        else:
            out.append(True)
    return out


@pytest.mark.parametrize("name", sorted(n for n in CONFIGS if family_of(CONFIGS[n]["config"]["model_type"]).rope_layers
                                        != "all"))
def test_schedule_matches_transformers_attention(name):
    config = CONFIGS[name]["config"]
    ours = [layer.rope is not None for layer in refpos.models.hf_layers(config)]
    assert ours == hf_rotating_layers(config)
    assert not all(ours) or family_of(config["model_type"]).rope_layers == "sliding_or_no_window"


@pytest.mark.parametrize("name", sorted(n for n in CONFIGS if CONFIGS[n]["config"]["model_type"] == "ministral3"))
def test_llama_4_scaling_beta_matches_get_llama_4_attn_scale(name):
    from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale

    config = CONFIGS[name]["config"]
    rope = config["rope_parameters"]
    l0 = rope["original_max_position_embeddings"]
    positions = np.array([0, 1, l0 - 1, l0, l0 + 1, 2 * l0, 262143], dtype=np.int64)
    theirs = get_llama_4_attn_scale(torch.as_tensor(positions)[None].float(), rope["llama_4_scaling_beta"],
                                    rope["original_max_position_embeddings"])[0, 0, :, 0].double().numpy()
    ours = refpos.models.hf_layer(config, 0).query_scale(positions)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)  # float32 log and product in transformers
    assert ours[3] > 1.0 == ours[2]


def llama4_attention_query_scale(config, length):
    """The query Llama 4's NoPE attention hands to attention, for unit inputs and identity projections."""
    from transformers import AttentionInterface
    from transformers.models.llama4.modeling_llama4 import Llama4TextAttention

    captured = {}

    def capture(module, query, key, value, attention_mask, **kwargs):
        captured["q"] = query
        return torch.zeros_like(query).transpose(1, 2), None

    AttentionInterface.register("refpos_capture", capture)
    small = _shrunk(hf_config(config))
    small._attn_implementation = "refpos_capture"
    layer = next(i for i, flag in enumerate(small.no_rope_layers) if not flag)
    attention = Llama4TextAttention(small, layer)
    with torch.no_grad():
        for proj in (attention.q_proj, attention.k_proj, attention.v_proj):
            proj.weight.copy_(torch.eye(*proj.weight.shape))
        hidden = torch.ones(1, length, small.hidden_size)
        attention(hidden, position_embeddings=None, attention_mask=None)
    return layer, captured["q"][0, 0, :, 0].double().numpy()


@pytest.mark.parametrize("name", sorted(n for n in CONFIGS if CONFIGS[n]["config"]["model_type"] == "llama4_text"))
def test_llama4_temperature_matches_the_attention_forward(name):
    config = CONFIGS[name]["config"]
    layer, theirs = llama4_attention_query_scale(config, 16390)
    ours = refpos.models.hf_layer(config, layer).query_scale(cache_position=np.arange(16390))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)  # the captured q is float32: ~8 ulps of float32 (2^-23)
    assert ours[8190] == 1.0 < ours[8191]
    assert refpos.models.hf_layer(config, layer - 1).query_scale([10**6])[0] == 1.0  # RoPE layers: no scale


def test_rotation_anchor_breaks_on_the_wrong_layout():
    config = CONFIGS["CohereForAI/c4ai-command-r-v01"]["config"]
    rope = rope_layers(config)[1][None]
    import dataclasses

    wrong = dataclasses.replace(rope, layout="half")
    error, per_row, bound = rotation_error(config, wrong)
    assert not (per_row <= bound).all() and error > 0.1
