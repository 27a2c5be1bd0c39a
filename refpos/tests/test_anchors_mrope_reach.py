"""Round-robin M-RoPE whose sections do not fit the rotated pairs, against transformers' own text rotary modules
(anchors env: torch CPU + transformers 5.x).

Qwen3-VL's ``recomposition_frequencies`` and the modules written after it (Qwen3-Omni's talker, Qwen4-Exp) write h
on the pairs ``[1 : 3·s_h : 3]`` and w on ``[2 : 3·s_w : 3]`` of the t row's angles; a slice stops at the module's
last pair and ``s_t`` is never read. A config whose sections sum to more pairs than the head rotates (the talker's
module default ``[24, 20, 20]`` on 32 pairs) or fewer (Qwen4-Exp's default ``[11, 11, 10]`` on 128) still runs;
:func:`refpos.models.mrope_hf.round_robin_reach` gives the sections that place every pair where the module does.

Compared: the module's forward (float32 angles) on three different position rows against refpos's tables from
:func:`refpos.models.from_hf_config` of the same config, within ``A·(3·max φ + 4)·2⁻²⁴``
(:func:`refpos.tests.ports.float32_table_atol`); the wrong variant (the stated sections' pair counts given
contiguously, or the reach's given contiguously) leaves that bound, and the application through the family's
``apply_rotary_pos_emb`` fed refpos's float64 tables equals :func:`refpos.apply_rope` bit for bit.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib

import numpy as np
import pytest

from refpos.models.hf import from_hf_config
from refpos.rope.core import apply_rope, rope_cos_sin
from refpos.rope.scaling import rope_frequencies
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

#: name -> (module, config class, rotary class, config, the sections refpos must resolve (t, h, w))
CASES = {
    "qwen3_omni_moe_talker_text default [24, 20, 20] on 32 pairs": (
        "qwen3_omni_moe", "Qwen3OmniMoeTalkerTextConfig", "Qwen3OmniMoeTalkerRotaryEmbedding",
        {"model_type": "qwen3_omni_moe_talker_text", "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 1, "num_hidden_layers": 2,
         "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}, (11, 11, 10)),
    "qwen3_omni_moe_talker_text [44, 44, 40] on 64 pairs": (
        "qwen3_omni_moe", "Qwen3OmniMoeTalkerTextConfig", "Qwen3OmniMoeTalkerRotaryEmbedding",
        {"model_type": "qwen3_omni_moe_talker_text", "hidden_size": 512, "num_attention_heads": 4,
         "num_key_value_heads": 1, "num_hidden_layers": 2,
         "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [44, 44, 40]}},
        (22, 21, 21)),
    "qwen4_exp_text default [11, 11, 10] on 128 pairs": (
        "qwen4_exp", "Qwen4ExpTextConfig", "Qwen4ExpTextRotaryEmbedding",
        {"model_type": "qwen4_exp_text", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 1,
         "num_hidden_layers": 4, "head_dim": 256, "rope_parameters": {"rope_type": "default", "rope_theta": 1e7}},
        (107, 11, 10)),
    "qwen4_exp_text [44, 44, 40] on 128 pairs": (
        "qwen4_exp", "Qwen4ExpTextConfig", "Qwen4ExpTextRotaryEmbedding",
        {"model_type": "qwen4_exp_text", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 1,
         "num_hidden_layers": 4, "head_dim": 256,
         "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [44, 44, 40]}},
        (45, 43, 40)),
    "qwen4_exp_text [11, 11, 10] fitting 32 pairs (partial 0.25)": (
        "qwen4_exp", "Qwen4ExpTextConfig", "Qwen4ExpTextRotaryEmbedding",
        {"model_type": "qwen4_exp_text", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 1,
         "num_hidden_layers": 4, "head_dim": 256,
         "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                             "mrope_section": [11, 11, 10]}}, (11, 11, 10)),
}


def _modeling(module: str):
    return importlib.import_module(f"transformers.models.{module}.modeling_{module}")


def _hf_rotary(name: str):
    module, config_cls, rotary_cls, config, _ = CASES[name]
    configuration = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    fresh = {k: copy.deepcopy(v) for k, v in config.items() if k != "model_type"}  # HF edits the dicts
    return getattr(_modeling(module), rotary_cls)(getattr(configuration, config_cls)(**fresh))


def _positions(seed: int) -> np.ndarray:
    """(3, B=2, T=24) rows t, h, w that differ everywhere (each pair's axis shows)."""
    return np.random.default_rng(seed).integers(0, 4000, size=(3, 2, 24))


def _table_error(name: str, rope) -> tuple[float, float]:
    """(max |refpos − transformers| over cos and sin, the float32 bound) at three different rows."""
    positions = _positions(0)
    hf_cos, hf_sin = _hf_rotary(name)(torch.zeros(1, dtype=torch.float32), torch.from_numpy(positions))
    cos, sin = rope_cos_sin(positions, rope)
    inv_freq, factor = rope_frequencies(rope, seq_len=int(positions.max()) + 1)
    atol = float32_table_atol(float(positions.max()) * float(inv_freq.max()), factor)
    error = max(np.abs(hf_cos.double().numpy() - cos).max(), np.abs(hf_sin.double().numpy() - sin).max())
    return float(error), atol


@pytest.mark.parametrize("name", sorted(CASES))
def test_reach_matches_the_module(name):
    rope = from_hf_config(CASES[name][3])
    assert (rope.mrope_section, rope.mrope_scheme) == (CASES[name][4], "interleaved")
    error, atol = _table_error(name, rope)
    assert error <= atol, (error, atol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_contiguous_reach_is_outside_the_bound(name):
    """The same pair counts given in bands (Qwen2-VL's assignment) are a wrong answer the tables tell apart."""
    wrong = dataclasses.replace(from_hf_config(CASES[name][3]), mrope_interleaved=False)
    error, atol = _table_error(name, wrong)
    assert error > 100 * atol, (error, atol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_application_is_exact(name):
    rope = from_hf_config(CASES[name][3])
    positions = _positions(2)
    x = np.random.default_rng(3).standard_normal((2, 3, positions.shape[-1], rope.head_dim))  # (B, H, T, D)
    cos, sin = rope_cos_sin(positions, rope)
    q = torch.from_numpy(x)
    hf_q, _ = _modeling(CASES[name][0]).apply_rotary_pos_emb(q, q, torch.from_numpy(cos), torch.from_numpy(sin))
    np.testing.assert_array_equal(apply_rope(x, positions, rope), hf_q.numpy())
