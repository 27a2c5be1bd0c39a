"""Anchors: the adapter's RoPE against HF transformers (torch CPU).

* inv_freq and attention factor of every model in model_configs.json (the model's own rotary module,
  per layer type where it has several) and of random configs for every HF rope_type
  (``ROPE_INIT_FUNCTIONS``);
* cos/sin of HF rotary forwards (float32 angles), including Phi-3's LongRoPE switch at L_0 + 1 and the
  dynamic-NTK module's call history;
* the application: Llama ``apply_rotary_pos_emb`` (half), GPT-J (interleaved, partial), DeepSeek-V3
  ``apply_rotary_pos_emb_interleave`` (deinterleaved), all fed float64 tables built HF's way
  (``1/θ^(2j/d)``), so they agree to float64 rounding of the angle;
* DeepSeek's softmax multiplier ``yarn_apply_mscale``.

Tolerances (docs/conventions.md#tolerances, docs/anchors.md#the-cossin-tables): both sides err, so each
comparison adds the adapter's rule (its ``INFO["dtype"]``) and HF's (``support.assert_close`` with
``anchor_dtype``). HF builds ω in float32 (arange, division and power in float32): the float32 value rule,
rtol 1e-6 (measured ≤ 3.3e-7); the exact zeros of proportional RoPE compare exactly. YaRN and llama3 blend
float32 operands of size ω_j (``ω_j/s`` and ``ω_j``), so their rounding is relative to ω_j, not to the
blend: the value rule with scale ω_j there. HF's attention factors are Python floats: the adapter's value
rule alone (float64: rtol 1e-13). HF cos/sin come from float32 angles p·ω: the float32 phase rule at the
positions, 3·A·p·max ω·2⁻²⁴ + 1e-6 (measured ratios up to 2.02 for HF Phi-3.5 LongRoPE).
The float64 application: the phase rule of ``support.assert_close`` for a float64 adapter (ω computed as
``θ^(−2j/d)`` and as ``1/θ^(2j/d)`` differ by an ulp, which position 100000 multiplies).
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rope_support import HF_TYPES, base_inv, model_configs, rope_dicts, rotary_width
from support import assert_close, cases, require

torch = pytest.importorskip("torch", reason="anchor cross-checks need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="anchor cross-checks need transformers")

pytestmark = pytest.mark.anchors

CONFIGS = model_configs()
HF_KEYS = ("rope_type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
           "mscale", "mscale_all_dim", "attention_factor", "truncate", "low_freq_factor", "high_freq_factor",
           "short_factor", "long_factor")


def _hf_config(name):
    """The transformers config of a model_configs.json entry."""
    from transformers import AutoConfig

    config = dict(CONFIGS[name]["config"])
    return AutoConfig.for_model(config.pop("model_type"), **config)


def _hf_rotary(name):
    """(HF config, rotary module) of a model_configs.json entry."""
    hf_config = _hf_config(name)
    module_name = type(hf_config).__module__.replace("configuration_", "modeling_")
    modeling = importlib.import_module(module_name)
    cls = next(getattr(modeling, n) for n in sorted(dir(modeling))
               if n.endswith("RotaryEmbedding") and "Vision" not in n)
    return hf_config, cls(hf_config)


def _np(t):
    return t.detach().to(torch.float64).numpy()


@pytest.mark.parametrize("name", [n for n in CONFIGS if n != "EleutherAI/gpt-j-6b"])
def test_model_inv_freq_and_attention_factor(impl, name):
    resolve, frequencies = require(impl, "rope_params_from_hf_config", "rope_frequencies")
    _, rotary = _hf_rotary(name)
    layer_types = rotary.rope_type if isinstance(rotary.rope_type, dict) else {None: rotary.rope_type}
    for layer_type in layer_types:
        prefix = "" if layer_type is None else f"{layer_type}_"
        hf_inv = _np(getattr(rotary, f"{prefix}inv_freq"))
        hf_a = getattr(rotary, f"{prefix}attention_scaling")
        inv, a = frequencies(resolve(CONFIGS[name]["config"], layer_type))
        assert_close(inv, hf_inv, impl, anchor_dtype="float32", what=f"{name} {layer_type} inv_freq")
        assert_close(a, hf_a, impl, what=f"{name} {layer_type} attention factor")


def _gptj_embed_positions():
    """GPT-J's (max_positions, rotary_dim) table [sin | cos]: from GPTJRotaryEmbedding where transformers has
    that module (recent 5.x), else from the function GPTJAttention builds it with (4.x and early 5.x)."""
    from transformers.models.gptj import modeling_gptj

    if hasattr(modeling_gptj, "GPTJRotaryEmbedding"):
        return _hf_rotary("EleutherAI/gpt-j-6b")[1].embed_positions
    config = _hf_config("EleutherAI/gpt-j-6b")
    return modeling_gptj.create_sinusoidal_positions(config.max_position_embeddings, config.rotary_dim)


def test_gptj_table(impl):
    cos_sin = require(impl, "rope_cos_sin")
    table = _np(_gptj_embed_positions())  # (2048, 64) = [sin | cos] of the 32 pairs
    pos = np.array([0, 1, 7, 255, 256, 2047])
    params = require(impl, "rope_params_from_hf_config")(CONFIGS["EleutherAI/gpt-j-6b"]["config"])
    cos, sin = cos_sin(pos, params)  # interleaved: c0 c0 c1 c1 ...
    assert_close(cos[:, 0::2], table[pos, 32:], impl, "phase", positions=pos, anchor_dtype="float32", what="cos")
    assert_close(sin[:, 0::2], table[pos, :32], impl, "phase", positions=pos, anchor_dtype="float32", what="sin")


def _hf_llama_config(rope, max_position_embeddings=None):
    """A transformers LlamaConfig carrying the adapter rope dict (rotary size via partial_rotary_factor)."""
    from transformers import LlamaConfig

    head_dim, d = rope["head_dim"], rope.get("rotary_dim", rope["head_dim"])
    prf = d / head_dim
    while (int(prf * head_dim // 2) if rope["rope_type"] == "proportional" else int(head_dim * prf)) * (
            2 if rope["rope_type"] == "proportional" else 1) < d:
        prf = math.nextafter(prf, 2.0)  # HF truncates int(D·prf): nudge up to hit d exactly
    params = {k: rope[k] for k in HF_KEYS if k in rope}
    params["partial_rotary_factor"] = prf
    implied = int(rope["original_max_position_embeddings"] * rope.get("factor", 1.0)) \
        if "original_max_position_embeddings" in rope else None  # L_max = s·L_0: no HF warnings
    max_pos = max_position_embeddings or rope.get("max_position_embeddings") or implied or 4096
    return LlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
                       max_position_embeddings=max_pos, rope_parameters=params)


def _hf_init(rope, seq_len):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    config = _hf_llama_config(rope)
    if rope["rope_type"] == "default":  # GPT-NeoX's default init honours partial_rotary_factor (Llama's does not)
        return GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config, "cpu")
    return ROPE_INIT_FUNCTIONS[rope["rope_type"]](config, "cpu", seq_len=seq_len)


def _llama3_blend_gain(rope, base):
    r"""How much HF's float32 llama3 blend magnifies the rounding of its inputs, per pair (1 outside the band).

    In the band :math:`\mathrm{low} < r_j < \mathrm{high}`, :math:`r_j = L_0\,\omega_j / 2\pi`, the pair
    is :math:`\omega'_j = (1 - \sigma_j)\,\omega_j/s + \sigma_j\,\omega_j` with
    :math:`\sigma_j = (r_j - \mathrm{low})/(\mathrm{high} - \mathrm{low})`. HF computes :math:`r_j` in
    float32 from its float32 ω (:math:`2\pi/\omega`, then :math:`L_0/\lambda`), a relative error δ of a few
    float32 ulps, which moves :math:`\omega'_j` by :math:`(1 - 1/s)\,r_j\,\delta/(\mathrm{high} -
    \mathrm{low})\,\omega_j`: the gain multiplies the float32 rule. Measured: θ 1e4, rotary size 10,
    s = 8, L_0 = 4096, low 2, high 3: pair 3 (r = 2.60) off by 1.11e-6·ω (gain 3.27).
    """
    s, low, high = rope.get("factor", 8.0), rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    r = rope.get("original_max_position_embeddings", 8192) * base / (2 * math.pi)
    in_band = (r > low) & (r < high)
    return 1.0 + np.where(in_band, (1.0 - 1.0 / s) * r / (high - low), 0.0)


@pytest.mark.parametrize("rope_type", HF_TYPES)
@given(data=st.data())
def test_random_configs_match_rope_init_functions(impl, rope_type, data):
    rope = data.draw(rope_dicts((rope_type,), head_dims=(4, 8, 16, 32, 64, 128)))
    rope.pop("dynamic_rule", None)  # HF has only its own dynamic rule
    seq_len = data.draw(st.sampled_from([None, 1, 4096, 4097, 100000]))
    hf_inv, hf_a = _hf_init(rope, seq_len)
    inv, a = require(impl, "rope_frequencies")(rope, seq_len=seq_len)
    assert inv.shape == (rotary_width(rope) // 2,)
    # yarn, llama3: a float32 blend of operands of size ω_j, so the rounding is relative to ω_j (llama3's
    # band magnifies it: _llama3_blend_gain)
    scale = base_inv(rope["rope_theta"], rotary_width(rope)) if rope_type in ("yarn", "llama3") else None
    if rope_type == "llama3":
        scale = scale * _llama3_blend_gain(rope, scale)
    assert_close(inv, _np(hf_inv), impl, scale=scale, anchor_dtype="float32", what="inv_freq")
    assert_close(a, hf_a, impl, what="attention factor")


def _hf_forward(rotary, positions):
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), torch.as_tensor(positions)[None, :])
    return _np(cos)[0], _np(sin)[0]


@pytest.mark.parametrize("top", cases("top", [4095, 4096, 8000]))
def test_phi3_longrope_forward_switches_at_original_plus_one(impl, top):
    """HF Phi-3 picks the long factors iff max(position_ids) + 1 > 4096; so does seq_len=None."""
    name = "microsoft/Phi-3.5-mini-instruct"
    _, rotary = _hf_rotary(name)
    pos = np.array([0, 1, 2048, top])
    hf_cos, hf_sin = _hf_forward(rotary, pos)
    params = require(impl, "rope_params_from_hf_config")(CONFIGS[name]["config"])
    cos, sin = require(impl, "rope_cos_sin")(pos, params)
    a = 1.1902380714238083  # the attention factor of Phi-3.5's LongRoPE: the size of a cos/sin entry
    for ours, theirs, what in ((cos, hf_cos, "cos"), (sin, hf_sin, "sin")):
        assert_close(ours, theirs, impl, "phase", positions=pos, magnitude=a, anchor_dtype="float32", what=what)


def test_dynamic_ntk_module_history(impl):
    """HF's dynamic rotary module, called with a sequence of lengths, uses the frequencies the adapter's
    stateful helper reports for the same sequence."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rope = {"rope_type": "dynamic", "rope_theta": 10000.0, "head_dim": 128, "factor": 2.0,
            "max_position_embeddings": 4096}
    rotary = LlamaRotaryEmbedding(_hf_llama_config(rope))
    lengths = [10, 8192, 6000, 4096, 4095, 5000, 9000, 100]
    ours = require(impl, "rope_dynamic_ntk_frequencies")(rope, lengths)
    for row, n in zip(ours, lengths, strict=True):
        rotary(torch.zeros(1), torch.arange(n)[None, :])
        assert_close(row, _np(rotary.inv_freq), impl, anchor_dtype="float32", what=f"call with L={n}")


@pytest.mark.parametrize(("layout", "rotary_dim"), cases("layout, rotary_dim", [
    ("half", 64), ("half", 24), ("interleaved", 64), ("interleaved", 16), ("deinterleaved", 64)]))
def test_application_matches_hf_in_float64(impl, layout, rotary_dim):
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama_apply

    head_dim, theta = 64, 10000.0
    rng = np.random.default_rng(rotary_dim)
    q = rng.standard_normal((2, 3, 5, head_dim))  # (B, H, T, D)
    pos = np.array([[0, 1, 2, 4095, 100000], [7, 8, 9, 10, 11]])  # (B, T)
    inv = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    freqs = torch.as_tensor(pos, dtype=torch.float64)[..., None] * inv  # (B, T, d/2), float64 angles
    qt = torch.as_tensor(q)
    rot, passthrough = qt[..., :rotary_dim], qt[..., rotary_dim:]
    if layout == "half":
        emb = torch.cat((freqs, freqs), dim=-1)
        hf_rot, _ = llama_apply(rot, rot, emb.cos(), emb.sin())
    elif layout == "interleaved":  # GPT-J: (B, T, H, d) with (B, T, d/2) tables
        hf_rot = gptj_apply(rot.transpose(1, 2), freqs.sin(), freqs.cos()).transpose(1, 2)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
        hf_rot, _ = apply_rotary_pos_emb_interleave(rot, rot, emb.cos(), emb.sin())
    expected = torch.cat([hf_rot, passthrough], dim=-1).numpy()
    rope = {"rope_type": "default", "rope_theta": theta, "head_dim": head_dim, "rotary_dim": rotary_dim,
            "layout": layout}
    got = require(impl, "apply_rope")(q, pos, rope)
    assert_close(got, expected, impl, "phase", positions=np.broadcast_to(pos[:, None, :], q.shape[:-1]),
                 inv_freq=inv.numpy(), magnitude=2 * np.abs(q).max(), what=f"{layout}, d={rotary_dim}")


@pytest.mark.parametrize("name", ["deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-Coder-V2-Lite-Base"])
def test_deepseek_softmax_multiplier(impl, name):
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    params = require(impl, "rope_params_from_hf_config")(CONFIGS[name]["config"])
    hf_config, _ = _hf_rotary(name)
    hf_scale = yarn_apply_mscale(hf_config.rope_parameters, 192**-0.5)
    assert_close(192**-0.5 * require(impl, "rope_softmax_multiplier")(params), hf_scale, impl,
                 what="softmax scale")  # HF's is a Python float: the adapter's rule alone


# ------------------------------------------------------------------ rules of the model families
@pytest.mark.parametrize("rope", [
    {"rope_type": "llama3", "rope_theta": 5e5, "head_dim": 128, "factor": 16.0, "low_freq_factor": 1.0,
     "high_freq_factor": 1.0, "original_max_position_embeddings": 8192},  # Llama 4: empty middle band
    {"rope_type": "yarn", "rope_theta": 5e4, "head_dim": 64, "factor": 32.0, "beta_fast": 1.0, "beta_slow": 1.0,
     "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096},  # Kimi-K2: equal betas
    {"rope_type": "yarn", "rope_theta": 5e4, "head_dim": 64, "factor": 32.0, "beta_fast": 1.0, "beta_slow": 1.0,
     "truncate": False, "original_max_position_embeddings": 4096},  # lo == hi: the ramp widened by 0.001
], ids=["llama3-empty-band", "yarn-equal-betas", "yarn-equal-betas-untruncated"])
def test_relaxed_rules_match_rope_init_functions(impl, rope):
    hf_inv, hf_a = _hf_init(rope, None)
    inv, a = require(impl, "rope_frequencies")(rope, seq_len=None)
    scale = base_inv(rope["rope_theta"], rope["head_dim"])  # float32 blend: rounding relative to ω_j
    assert_close(inv, _np(hf_inv), impl, scale=scale, anchor_dtype="float32", what="inv_freq")
    assert_close(a, hf_a, impl, what="attention factor")


def _hunyuan_module(alpha):
    from transformers import AutoConfig
    from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import HunYuanDenseV1RotaryEmbedding

    config = AutoConfig.for_model("hunyuan_v1_dense", hidden_size=1024, num_attention_heads=8, head_dim=128,
                                  max_position_embeddings=32768, rope_theta=1e4,
                                  rope_scaling={"type": "dynamic", "alpha": alpha, "factor": 1.0})
    return HunYuanDenseV1RotaryEmbedding(config)


@pytest.mark.parametrize("alpha", [50.0, 1000.0])
def test_ntk_alpha_matches_hunyuan(impl, alpha):
    """Hunyuan's 'dynamic' with alpha: a fixed base θ·α^(d/(d−2)) (compute_ntk_alpha_rope_parameters)."""
    params = require(impl, "rope_params_from_hf_config")(
        {"model_type": "hunyuan_v1_dense", "hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
         "max_position_embeddings": 32768, "rope_theta": 1e4,
         "rope_scaling": {"type": "dynamic", "alpha": alpha, "factor": 1.0}})
    inv, a = require(impl, "rope_frequencies")(params, seq_len=100000)  # fixed: no growth with the length
    hf = _np(_hunyuan_module(alpha).inv_freq)
    assert_close(inv, hf, impl, anchor_dtype="float32", what="inv_freq")  # float32 power in transformers
    assert a == 1.0


def _phimoe(seq_lens):
    from transformers import AutoConfig
    from transformers.models.phimoe.modeling_phimoe import PhimoeRotaryEmbedding

    cfg = {"model_type": "phimoe", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 4,
           "max_position_embeddings": 131072, "rope_theta": 1e4,
           "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.01 * i for i in range(32)],
                            "long_factor": [2.0 + 0.1 * i for i in range(32)], "original_max_position_embeddings": 4096,
                            "short_mscale": 1.1, "long_mscale": 1.2}}
    config = dict(cfg)
    rotary = PhimoeRotaryEmbedding(AutoConfig.for_model(config.pop("model_type"), **config))
    return cfg, {n: _hf_forward(rotary, np.arange(n)) for n in seq_lens}


@pytest.mark.parametrize("seq_len", [1, 100, 4096])
def test_longrope_mscale_matches_phimoe_up_to_the_original_length(impl, seq_len):
    cfg, tables = _phimoe([seq_len])
    params = require(impl, "rope_params_from_hf_config")(cfg)
    pos = np.arange(seq_len)
    cos, sin = require(impl, "rope_cos_sin")(pos, params, seq_len=seq_len)
    for ours, theirs, what in ((cos, tables[seq_len][0], "cos"), (sin, tables[seq_len][1], "sin")):
        assert_close(ours, theirs, impl, "phase", positions=pos, magnitude=1.1,  # A = short_mscale
                     anchor_dtype="float32", what=what)


@pytest.mark.xfail(strict=True, reason="transformers 5.24 models/phimoe/modeling_phimoe.py "
                   "PhimoeRotaryEmbedding.forward applies long_mscale past L_0 but takes inv_freq from "
                   "rope_init_fn(self.config) without seq_len, so it keeps the short factors; measured on this "
                   "config at L = 4097: max |cos - transformers| = 2.40 (p = 710, pair 0), pair 0 at p = 4096: "
                   "1.13968 (long factors x long_mscale) vs 0.96479 (short factors x long_mscale); Phi-3.5-MoE's "
                   "own modeling code and vLLM use the long factors with long_mscale there, as refpos does")
def test_longrope_mscale_matches_phimoe_past_the_original_length(impl):
    cfg, tables = _phimoe([4097])
    params = require(impl, "rope_params_from_hf_config")(cfg)
    pos = np.arange(4097)
    cos, _ = require(impl, "rope_cos_sin")(pos, params, seq_len=4097)
    assert_close(cos, tables[4097][0], impl, "phase", positions=pos, magnitude=1.2,  # A = long_mscale
                 anchor_dtype="float32", what="cos")
