"""2-D vision RoPE against transformers' own modules: Qwen2-VL vision tower, Pixtral, Llama-4 (anchors env).

* positions: refpos's patch positions against transformers' (``vision_utils.get_vision_position_ids``,
  Pixtral's meshgrid, Llama-4's ``_compute_freqs_ci`` index rule): integers, exact;
* assignment, exact: the module's ``recomposition_frequencies`` applied to float64 angles gives, after
  cos/sin, refpos's tables bit for bit (Qwen2-VL, Pixtral; Llama-4's module has no such step);
* tables: the module's float32 tables against refpos's float64 ones, atol = (3·max φ + 4)·2⁻²⁴ (float32
  ω and product p·ω, relative to the angle; then 4 ulps for float32 cos/sin and their rounding);
* application: Qwen2-VL and Pixtral's ``rotate_half`` formula on float64 inputs, exact; Llama-4's
  ``vision_apply_rotary_emb`` runs in complex64: atol = (3·max φ + 4)·2⁻²⁴·max|x| (the table error above
  times |x|, plus float32 rounding of x and of the complex product).
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.rope.vision import (
    VisionRope,
    apply_vision_rope,
    llama4_patch_positions,
    pixtral_patch_positions,
    qwen_patch_positions,
    vision_angles,
    vision_cos_sin,
    vision_frequencies,
)
from refpos.tests.ports import float32_table_atol

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

GRIDS = [(1, 4, 6), (2, 6, 2), (1, 2, 2)]



def test_qwen2_vl_vision_tower():
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLVisionRotaryEmbedding, apply_rotary_pos_emb
    from transformers.vision_utils import get_vision_position_ids

    config = Qwen2VLVisionConfig(embed_dim=1280, num_heads=16)
    rotary = Qwen2VLVisionRotaryEmbedding(config)
    rope = VisionRope("qwen2_vl", 80, theta=config.rope_parameters["rope_theta"])
    hf_positions = get_vision_position_ids(torch.tensor(GRIDS), 2).numpy()  # (N, 2)
    positions = qwen_patch_positions(GRIDS, 2)
    np.testing.assert_array_equal(positions, hf_positions)
    _, inv_freq = vision_frequencies(rope)
    quarter = rope.head_dim // 4
    per_axis = positions[..., None].astype(np.float64) * inv_freq[:quarter]  # (N, 2, D/4)
    hf_angles = rotary.recomposition_frequencies(torch.from_numpy(per_axis)).numpy()  # (N, D)
    cos, sin = vision_cos_sin(positions, rope)
    np.testing.assert_array_equal(cos, np.cos(hf_angles))
    np.testing.assert_array_equal(sin, np.sin(hf_angles))
    hf_cos, hf_sin = rotary(torch.zeros(1), torch.from_numpy(positions))
    atol = float32_table_atol(np.abs(vision_angles(positions, rope)).max())
    np.testing.assert_allclose(hf_cos.double().numpy(), cos, rtol=0, atol=atol)
    np.testing.assert_allclose(hf_sin.double().numpy(), sin, rtol=0, atol=atol)
    x = np.random.default_rng(0).standard_normal((3, positions.shape[0], 80))  # (heads, N, D)
    hf_x, _ = apply_rotary_pos_emb(torch.from_numpy(x[None]), torch.from_numpy(x[None]),
                                   torch.from_numpy(cos[None]), torch.from_numpy(sin[None]))
    np.testing.assert_array_equal(apply_vision_rope(x, positions, rope), hf_x[0].numpy())


def test_pixtral():
    from transformers.models.pixtral.configuration_pixtral import PixtralVisionConfig
    from transformers.models.pixtral.modeling_pixtral import PixtralVisionRotaryEmbedding, apply_rotary_pos_emb

    config = PixtralVisionConfig(hidden_size=1024, num_attention_heads=16, rope_parameters={"rope_theta": 10000.0})
    rotary = PixtralVisionRotaryEmbedding(config)
    rope = VisionRope("pixtral", 64, theta=10000.0)
    positions = np.concatenate([pixtral_patch_positions(3, 5), pixtral_patch_positions(6, 2)])  # two images
    _, inv_freq = vision_frequencies(rope)
    per_axis = positions[..., None].astype(np.float64) * inv_freq  # (N, 2, D/2): HF's inv_freq_2d order
    hf_angles = rotary.recomposition_frequencies(torch.from_numpy(per_axis)).numpy()
    cos, sin = vision_cos_sin(positions, rope)
    np.testing.assert_array_equal(cos, np.cos(hf_angles))
    np.testing.assert_array_equal(sin, np.sin(hf_angles))
    hf_cos, hf_sin = rotary(torch.zeros(1, dtype=torch.float32), torch.from_numpy(positions))
    atol = float32_table_atol(np.abs(vision_angles(positions, rope)).max())
    np.testing.assert_allclose(hf_cos.double().numpy(), cos, rtol=0, atol=atol)
    np.testing.assert_allclose(hf_sin.double().numpy(), sin, rtol=0, atol=atol)
    x = np.random.default_rng(1).standard_normal((1, 2, positions.shape[0], 64))
    hf_x, _ = apply_rotary_pos_emb(torch.from_numpy(x), torch.from_numpy(x),
                                   torch.from_numpy(cos[None]), torch.from_numpy(sin[None]))
    np.testing.assert_array_equal(apply_vision_rope(x, positions, rope), hf_x.numpy())


def test_llama4_vision():
    from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig
    from transformers.models.llama4.modeling_llama4 import Llama4VisionRotaryEmbedding, vision_apply_rotary_emb

    config = Llama4VisionConfig(image_size=112, patch_size=14, hidden_size=1024, num_attention_heads=8,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    freqs_ci = Llama4VisionRotaryEmbedding(config).freqs_ci[:, 0, :]  # (side² + 1, D/2) complex64
    rope = VisionRope("llama4", 128, theta=10000.0)
    positions = llama4_patch_positions(112 // 14)
    angles = vision_angles(positions, rope)  # (N, D/2)
    atol = float32_table_atol(np.abs(angles).max())
    np.testing.assert_allclose(freqs_ci.real.double().numpy(), np.cos(angles), rtol=0, atol=atol)
    np.testing.assert_allclose(freqs_ci.imag.double().numpy(), np.sin(angles), rtol=0, atol=atol)
    np.testing.assert_array_equal(angles[-1], 0.0)  # the class token is not rotated
    x = np.random.default_rng(2).standard_normal((2, positions.shape[0], 4, 128))  # (B, N, heads, D) as HF
    hf_x, _ = vision_apply_rotary_emb(torch.from_numpy(x), torch.from_numpy(x), freqs_ci[:, None, :])
    ours = np.moveaxis(apply_vision_rope(np.moveaxis(x, 2, 1), positions, rope), 1, 2)  # heads before N
    x_atol = (3 * float(np.abs(angles).max()) + 4) * 2.0**-24 * float(np.abs(x).max())
    np.testing.assert_allclose(hf_x.double().numpy(), ours, rtol=0, atol=x_atol)


@pytest.mark.parametrize(("name", "module", "config_cls", "rotary_cls"), [
    ("Qwen/Qwen2-VL-7B-Instruct", "qwen2_vl", "Qwen2VLVisionConfig", "Qwen2VLVisionRotaryEmbedding"),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_5_vl", "Qwen2_5_VLVisionConfig", "Qwen2_5_VLVisionRotaryEmbedding"),
    ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl", "Qwen3VLVisionConfig", "Qwen3VLVisionRotaryEmbedding"),
    ("zai-org/GLM-4.1V-9B-Thinking", "glm4v", "Glm4vVisionConfig", "Glm4vVisionRotaryEmbedding"),
    ("mistral-community/pixtral-12b (vision_config)", "pixtral", "PixtralVisionConfig", "PixtralVisionRotaryEmbedding"),
])
def test_real_vision_configs(name, module, config_cls, rotary_cls):
    """The vision tower's ω from vision_rope_from_hf_config against transformers' module built from the same
    vision_config (float32 ω: rtol 1e-6)."""
    import importlib
    import json
    from importlib import resources

    from refpos.models.vision_towers import vision_rope_from_hf_config

    entry = json.loads(resources.files("refpos").joinpath("data/vlm_configs.json").read_text(encoding="utf8"))[name]
    vision = {k: v for k, v in entry["config"]["vision_config"].items() if k != "model_type"}
    configuration = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    rotary = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), rotary_cls)(
        getattr(configuration, config_cls)(**vision))
    rope = vision_rope_from_hf_config(entry["config"])
    _, inv_freq = vision_frequencies(rope)
    hf = rotary.inv_freq.double().numpy()
    np.testing.assert_allclose(inv_freq[: hf.size], hf, rtol=1e-6, atol=0)


def test_llama4_vision_table_is_added_with_the_class_row_last():
    """Llama 4's tower adds a learned table of one row per patch and one for the class token, which it appends
    after the patches: the rows added at the input of its first norm (``layernorm_pre``), seen as its input minus
    its input with the table zeroed, are refpos's grid record's, the class row last, exactly in float64 (a sum of
    two doubles, then the same sum less one term: one rounding of each, 2 ulps of the sum). The table with its
    class row first is outside that."""
    from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig
    from transformers.models.llama4.modeling_llama4 import Llama4VisionModel

    import refpos

    config = Llama4VisionConfig(image_size=56, patch_size=14, hidden_size=32, num_attention_heads=2,
                                num_hidden_layers=1, intermediate_size=128, projector_input_dim=32,
                                projector_output_dim=32, vision_output_dim=32)
    record = next(r for r in refpos.model_positions(config.to_dict()).layers if r.stack == "vision.input")
    assert (record.way, record.grid, record.prefix, record.suffix) == ("fixed", (4, 4), 0, 1)
    model = Llama4VisionModel(config).double().eval()
    torch.manual_seed(0)
    with torch.no_grad():
        model.positional_embedding_vlm.normal_()
    seen = []
    model.layernorm_pre.register_forward_pre_hook(lambda module, args: seen.append(args[0].reshape(-1, 32).clone()))
    pixels = torch.randn(1, 3, 56, 56, dtype=torch.float64)
    table = model.positional_embedding_vlm.detach().clone()
    with torch.no_grad():
        model(pixels)
        model.positional_embedding_vlm.zero_()
        model(pixels)
    added = (seen[0] - seen[1]).numpy()
    ours = np.asarray(record.reference(table.numpy(), (4, 4)))
    atol = 2 * 2.0**-53 * float(np.abs(seen[0].numpy()).max())
    np.testing.assert_allclose(added, ours, rtol=0, atol=atol)
    class_first = np.concatenate([ours[-1:], ours[:-1]])
    assert np.abs(added - class_first).max() > 100 * atol
    with pytest.raises(ValueError, match="not resampled"):
        record.reference(table.numpy(), (5, 5))
