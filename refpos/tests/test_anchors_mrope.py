"""M-RoPE against transformers' own text rotary modules (anchors env: torch CPU + transformers 5.x).

Families: Qwen2-VL, Qwen2.5-VL, Qwen2.5-Omni, PaddleOCR-VL (contiguous, half layout), Qwen3-VL, Qwen3-VL-MoE,
Qwen3-Omni (interleaved), Qwen3.5 and Qwen3.5-MoE (interleaved on a quarter of the channels), GLM-4.1V and GLM-OCR
(contiguous, interleaved layout, half the channels rotated), GLM-4.5V (contiguous, half layout, half the channels
rotated), ERNIE-4.5-VL (h and w alternating, t last; interleaved layout; its module stores ω permuted, which the
assignment test undoes by matching the stored values).

Three comparisons per family:

* **assignment, exact**: the module's own ``recomposition_frequencies`` applied to float64 angles
  (refpos's ω times each axis' positions) gives, after cos, refpos's table bit for bit;
* **tables**: the module's forward (float32 angles, as HF computes them) against refpos's float64
  tables; atol = A·(3·max φ + 4)·2⁻²⁴ (float32 rounding of ω and of the product p·ω, relative to the
  angle φ; then 4 ulps for float32 cos/sin and their rounding; A the attention factor);
* **application**: HF's ``apply_rotary_pos_emb`` of the family fed refpos's float64 tables against
  :func:`refpos.apply_rope`: the same products, exact.
"""

from __future__ import annotations

import copy
import importlib

import numpy as np
import pytest

from refpos.rope.config import RopeConfig
from refpos.rope.core import apply_rope, rope_cos_sin
from refpos.rope.mrope import mrope_angles
from refpos.rope.scaling import rope_frequencies
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

#: family: (module, text config class, rotary class, config kwargs, refpos RopeConfig kwargs)
FAMILIES = {
    "qwen2_vl": ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding",
                 {"hidden_size": 1536, "num_attention_heads": 12,
                  "rope_parameters": {"rope_type": "mrope", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}},
                 {"head_dim": 128, "theta": 1e6, "mrope_section": (16, 24, 24)}),
    "qwen2_5_vl": ("qwen2_5_vl", "Qwen2_5_VLTextConfig", "Qwen2_5_VLRotaryEmbedding",
                   {"hidden_size": 1536, "num_attention_heads": 12,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}},
                   {"head_dim": 128, "theta": 1e6, "mrope_section": (16, 24, 24)}),
    "qwen3_vl": ("qwen3_vl", "Qwen3VLTextConfig", "Qwen3VLTextRotaryEmbedding",
                 {"hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
                  "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
                                      "mrope_interleaved": True}},
                 {"head_dim": 128, "theta": 5e6, "mrope_section": (24, 20, 20), "mrope_interleaved": True}),
    "qwen3_vl_moe": ("qwen3_vl_moe", "Qwen3VLMoeTextConfig", "Qwen3VLMoeTextRotaryEmbedding",
                     {"hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
                                          "mrope_interleaved": True}},
                     {"head_dim": 128, "theta": 5e6, "mrope_section": (24, 20, 20), "mrope_interleaved": True}),
    "glm4v": ("glm4v", "Glm4vTextConfig", "Glm4vTextRotaryEmbedding",
              {"hidden_size": 4096, "num_attention_heads": 32,
               "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12],
                                   "partial_rotary_factor": 0.5}},
              {"head_dim": 128, "theta": 10000.0, "partial_rotary_factor": 0.5, "layout": "interleaved",
               "mrope_section": (8, 12, 12)}),
    "glm4v_moe": ("glm4v_moe", "Glm4vMoeTextConfig", "Glm4vMoeTextRotaryEmbedding",
                  {"hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
                   "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12],
                                       "partial_rotary_factor": 0.5}},
                  {"head_dim": 128, "theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": (8, 12, 12)}),
    "qwen3_5": ("qwen3_5", "Qwen3_5TextConfig", "Qwen3_5TextRotaryEmbedding",
                {"hidden_size": 1024, "num_attention_heads": 8, "head_dim": 256,
                 "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                     "mrope_section": [11, 11, 10], "mrope_interleaved": True}},
                {"head_dim": 256, "theta": 1e7, "partial_rotary_factor": 0.25, "mrope_section": (11, 11, 10),
                 "mrope_interleaved": True}),
    "qwen3_5_moe": ("qwen3_5_moe", "Qwen3_5MoeTextConfig", "Qwen3_5MoeTextRotaryEmbedding",
                    {"hidden_size": 2048, "num_attention_heads": 16, "head_dim": 256,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                         "mrope_section": [11, 11, 10], "mrope_interleaved": True}},
                    {"head_dim": 256, "theta": 1e7, "partial_rotary_factor": 0.25, "mrope_section": (11, 11, 10),
                     "mrope_interleaved": True}),
    "qwen2_5_omni": ("qwen2_5_omni", "Qwen2_5OmniTextConfig", "Qwen2_5OmniRotaryEmbedding",
                     {"hidden_size": 3584, "num_attention_heads": 28,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}},
                     {"head_dim": 128, "theta": 1e6, "mrope_section": (16, 24, 24)}),
    "qwen3_omni_moe": ("qwen3_omni_moe", "Qwen3OmniMoeTextConfig", "Qwen3OmniMoeThinkerTextRotaryEmbedding",
                       {"hidden_size": 2048, "num_attention_heads": 32, "head_dim": 128,
                        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [24, 20, 20],
                                            "mrope_interleaved": True, "interleaved": True}},
                       {"head_dim": 128, "theta": 1e6, "mrope_section": (24, 20, 20), "mrope_interleaved": True}),
    "ernie4_5_vl_moe": ("ernie4_5_vl_moe", "Ernie4_5_VLMoeTextConfig", "Ernie4_5_VLMoeTextRotaryEmbedding",
                        {"hidden_size": 2560, "num_attention_heads": 20,
                         "rope_parameters": {"rope_type": "default", "rope_theta": 5e5, "mrope_section": [22, 22, 20]}},
                        {"head_dim": 128, "theta": 5e5, "layout": "interleaved", "mrope_section": (20, 22, 22),
                         "mrope_assignment": "hw_alternating"}),
    "paddleocr_vl": ("paddleocr_vl", "PaddleOCRTextConfig", "PaddleOCRRotaryEmbedding",
                     {"hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 5e5, "mrope_section": [16, 24, 24]}},
                     {"head_dim": 128, "theta": 5e5, "mrope_section": (16, 24, 24)}),
    "glm_ocr": ("glm_ocr", "GlmOcrTextConfig", "GlmOcrTextRotaryEmbedding",
                {"hidden_size": 2048, "num_attention_heads": 16,
                 "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12],
                                     "partial_rotary_factor": 0.5}},
                {"head_dim": 128, "theta": 10000.0, "partial_rotary_factor": 0.5, "layout": "interleaved",
                 "mrope_section": (8, 12, 12)}),
    "cosmos3_edge": ("cosmos3_edge", "Cosmos3EdgeTextConfig", "Cosmos3EdgeTextRotaryEmbedding",
                     {"hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20]}},
                     {"head_dim": 128, "theta": 5e6, "mrope_section": (24, 20, 20), "mrope_interleaved": True}),
    "qwen2_vl_yarn": ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding",
                      {"hidden_size": 1536, "num_attention_heads": 12, "max_position_embeddings": 131072,
                       "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                           "original_max_position_embeddings": 32768,
                                           "mrope_section": [16, 24, 24]}},
                      {"rope_type": "yarn", "head_dim": 128, "theta": 1e6, "factor": 4.0,
                       "original_max_position_embeddings": 32768, "max_position_embeddings": 131072,
                       "mrope_section": (16, 24, 24)}),
}


def _modeling(name):
    return importlib.import_module(f"transformers.models.{FAMILIES[name][0]}.modeling_{FAMILIES[name][0]}")


def _hf_rotary(name):
    module, config_cls, rotary_cls, kwargs, _ = FAMILIES[name]
    configuration = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    fresh = {k: (dict(v) if isinstance(v, dict) else v) for k, v in kwargs.items()}  # HF edits the dict
    config = getattr(configuration, config_cls)(**fresh)
    return getattr(_modeling(name), rotary_cls)(config)


def _layout_positions(seed: int) -> np.ndarray:
    """(3, 2, T) positions: text, an image grid (1, 3, 4) and text after it, then random rows (batch 2)."""
    text = np.arange(3)
    tt, hh, ww = np.meshgrid(np.arange(1), np.arange(3), np.arange(4), indexing="ij")
    image = np.stack([tt.ravel(), hh.ravel(), ww.ravel()]) + 3  # (3, 12)
    after = np.arange(7, 12)
    row = np.concatenate([np.stack([text] * 3), image, np.stack([after] * 3)], axis=1)  # (3, 20)
    other = np.random.default_rng(seed).integers(0, 3000, size=(3, row.shape[1]))
    return np.stack([row, other], axis=1)  # (3, B=2, T=20)


def _module_order(rotary, inv_freq: np.ndarray) -> np.ndarray:
    """Which of refpos's ω each entry of the module's ``inv_freq`` holds (ERNIE-4.5-VL stores them permuted:
    the even ones of the h/w span, then its odd ones, then the t span); float32 rounding apart, exactly one."""
    stored = rotary.inv_freq.double().numpy()
    order = np.array([int(np.argmin(np.abs(inv_freq - f))) for f in stored])
    np.testing.assert_allclose(inv_freq[order], stored, rtol=1e-6, atol=0)  # float32 pow: a few ulps
    assert sorted(order.tolist()) == list(range(len(inv_freq)))
    return order


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_assignment_is_exact(name):
    rotary = _hf_rotary(name)
    rope = RopeConfig(**FAMILIES[name][4])
    positions = _layout_positions(0)
    inv_freq, factor = rope_frequencies(rope, seq_len=int(positions.max()) + 1)
    per_axis = positions[..., None].astype(np.float64) * inv_freq[_module_order(rotary, inv_freq)]  # (3, B, T, m)
    hf_angles = rotary.recomposition_frequencies(torch.from_numpy(per_axis.copy())).numpy()  # (B, T, 2m)
    cos, sin = rope_cos_sin(positions, rope)
    np.testing.assert_array_equal(cos, factor * np.cos(hf_angles))
    np.testing.assert_array_equal(sin, factor * np.sin(hf_angles))
    m = rope.n_pairs
    angles = mrope_angles(positions, inv_freq, rope.mrope_section, interleaved=rope.mrope_scheme)
    layout_angles = hf_angles[..., :m] if rope.layout == "half" else hf_angles[..., ::2]
    if name == "ernie4_5_vl_moe":  # natural order again: pair j holds ω_j (h and w alternate, then t)
        assert _module_order(rotary, inv_freq).tolist() != list(range(m))
    np.testing.assert_array_equal(angles, layout_angles)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_forward_tables(name):
    rotary = _hf_rotary(name)
    rope = RopeConfig(**FAMILIES[name][4])
    positions = _layout_positions(1)
    hf_cos, hf_sin = rotary(torch.zeros(1, dtype=torch.float32), torch.from_numpy(positions))
    cos, sin = rope_cos_sin(positions, rope)
    inv_freq, factor = rope_frequencies(rope, seq_len=int(positions.max()) + 1)
    atol = float32_table_atol(float(positions.max()) * float(inv_freq.max()), factor)  # float32 angles, cos, sin
    np.testing.assert_allclose(hf_cos.double().numpy(), cos, rtol=0, atol=atol)
    np.testing.assert_allclose(hf_sin.double().numpy(), sin, rtol=0, atol=atol)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_application_is_exact(name):
    rope = RopeConfig(**FAMILIES[name][4])
    positions = _layout_positions(2)
    x = np.random.default_rng(3).standard_normal((2, 3, positions.shape[-1], rope.head_dim))  # (B, H, T, D)
    x = x.astype(np.float32).astype(np.float64)  # ERNIE's apply casts q to float32 first: exact on these
    cos, sin = rope_cos_sin(positions, rope)  # (B, T, w)
    hf_apply = _modeling(name).apply_rotary_pos_emb
    q = torch.from_numpy(x)
    hf_q, _ = hf_apply(q, q, torch.from_numpy(cos), torch.from_numpy(sin))
    np.testing.assert_array_equal(apply_rope(x, positions, rope), hf_q.numpy())


#: real config name -> (text rotary class module, class) for the resolution anchor
_REAL = {"Qwen/Qwen2-VL-7B-Instruct": ("qwen2_vl", "Qwen2VLRotaryEmbedding"),
         "Qwen/Qwen2.5-VL-7B-Instruct": ("qwen2_5_vl", "Qwen2_5_VLRotaryEmbedding"),
         "Qwen/Qwen3-VL-8B-Instruct": ("qwen3_vl", "Qwen3VLTextRotaryEmbedding"),
         "Qwen/Qwen3-VL-8B-Instruct (v5 rope_parameters)": ("qwen3_vl", "Qwen3VLTextRotaryEmbedding"),
         "zai-org/GLM-4.1V-9B-Thinking": ("glm4v", "Glm4vTextRotaryEmbedding"),
         "Qwen/Qwen3.5-27B": ("qwen3_5", "Qwen3_5TextRotaryEmbedding"),
         "baidu/ERNIE-4.5-VL-28B-A3B-PT (HF Ernie4_5_VLMoeConfig defaults)": ("ernie4_5_vl_moe",
                                                                             "Ernie4_5_VLMoeTextRotaryEmbedding"),
         "Qwen/Qwen2.5-Omni-7B (thinker)": ("qwen2_5_omni", "Qwen2_5OmniRotaryEmbedding"),
         "Qwen/Qwen3-Omni-30B-A3B-Instruct (thinker)": ("qwen3_omni_moe", "Qwen3OmniMoeThinkerTextRotaryEmbedding")}


@pytest.mark.parametrize("name", sorted(_REAL))
def test_real_configs_resolve_as_transformers(name):
    """inv_freq (HF builds it in float32: rtol 1e-6) and the sections of transformers' own config objects."""
    import copy
    import json
    from importlib import resources

    from transformers import AutoConfig

    from refpos.models.hf import from_hf_config

    entry = json.loads(resources.files("refpos").joinpath("data/vlm_configs.json").read_text(encoding="utf8"))[name]
    config = copy.deepcopy(entry["config"])
    hf = AutoConfig.for_model(config.pop("model_type"), **config)
    hf = hf.thinker_config.text_config if hasattr(hf, "thinker_config") else hf.get_text_config()
    module, cls = _REAL[name]
    rotary = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), cls)(hf)
    rope = from_hf_config(entry["config"])
    inv_freq, factor = rope_frequencies(rope)
    np.testing.assert_allclose(inv_freq[_module_order(rotary, inv_freq)], rotary.inv_freq.double().numpy(),
                               rtol=1e-6, atol=0)
    assert factor == rotary.attention_scaling
    stated = tuple(rotary.mrope_section)  # in the config's order: ERNIE-4.5-VL's is (h, w, t)
    assert (stated[2], stated[0], stated[1]) == rope.mrope_section if rope.mrope_scheme == "hw_alternating" \
        else stated == rope.mrope_section


#: model type -> (the config class transformers' default model is built from, text rotary class); no released
#: config of these is in refpos/data/vlm_configs.json: their config classes' defaults are resolved instead
_DEFAULT_CONFIGS = {"paddleocr_vl": ("PaddleOCRVLConfig", "PaddleOCRRotaryEmbedding"),
                    "glm_ocr": ("GlmOcrConfig", "GlmOcrTextRotaryEmbedding")}


@pytest.mark.parametrize("module", sorted(_DEFAULT_CONFIGS))
def test_default_configs_resolve_as_transformers(module):
    """A config class's default ``to_dict()`` through ``from_hf_config``: the text module's ω, attention factor
    and sections, and the layout and rotated width its apply uses (a rotation of q against the module's)."""
    from refpos.models.hf import from_hf_config

    config_cls, rotary_cls = _DEFAULT_CONFIGS[module]
    hf = getattr(importlib.import_module(f"transformers.models.{module}.configuration_{module}"), config_cls)()
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    rotary = getattr(modeling, rotary_cls)(hf.get_text_config())
    rope = from_hf_config(hf.to_dict(), strict=True)
    inv_freq, factor = rope_frequencies(rope)
    np.testing.assert_allclose(inv_freq, rotary.inv_freq.double().numpy(), rtol=1e-6, atol=0)
    assert factor == rotary.attention_scaling and tuple(rotary.mrope_section) == rope.mrope_section
    positions = _layout_positions(4)
    x = np.random.default_rng(5).standard_normal((2, 3, positions.shape[-1], rope.head_dim))
    cos, sin = rope_cos_sin(positions, rope)
    q = torch.from_numpy(x)
    hf_q, _ = modeling.apply_rotary_pos_emb(q, q, torch.from_numpy(cos), torch.from_numpy(sin))
    np.testing.assert_array_equal(apply_rope(x, positions, rope), hf_q.numpy())


def test_neomme_rows_and_columns_alternate():
    """NeoMMERotaryEmbedding (two axes, row and column, each layer type its own base and width) against refpos's
    ``(0, m/2, m/2)`` hw_alternating sections with row as h and column as w; float32 tables as above."""
    from transformers.models.neomme import configuration_neomme, modeling_neomme

    from refpos.models.hf import from_hf_config

    cfg = {"model_type": "neomme", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 64, "num_hidden_layers": 6, "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
           "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6,
                                                  "partial_rotary_factor": 0.5},
                               "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
                                                     "partial_rotary_factor": 1.0}}}
    fresh = {k: copy.deepcopy(v) for k, v in cfg.items() if k != "model_type"}  # HF edits the dicts
    rotary = modeling_neomme.NeoMMERotaryEmbedding(configuration_neomme.NeoMMEConfig(**fresh))
    rows = np.random.default_rng(4).integers(0, 3000, size=(2, 2, 20))  # (row, col), batch 2
    for layer_type in ("full_attention", "sliding_attention"):
        rope = from_hf_config(cfg, layer_type=layer_type)
        hf_cos, hf_sin = rotary(torch.zeros(1), torch.from_numpy(rows), layer_type)
        positions = np.stack([np.zeros_like(rows[0]), rows[0], rows[1]])  # (t, h, w): t reads no pair
        cos, sin = rope_cos_sin(positions, rope)
        inv_freq, factor = rope_frequencies(rope, seq_len=int(rows.max()) + 1)
        atol = float32_table_atol(float(rows.max()) * float(inv_freq.max()), factor)
        np.testing.assert_allclose(hf_cos.double().numpy(), cos, rtol=0, atol=atol, err_msg=layer_type)
        np.testing.assert_allclose(hf_sin.double().numpy(), sin, rtol=0, atol=atol, err_msg=layer_type)
