"""The direction a RoPE turns its pairs (``RopeConfig.angle_sign``): ``-1`` turns pair ``j`` at position ``p`` by
``−p·ω_j``, which NanoChat's ``rotate_half`` (``cat(x2, -x1)``, Llama's with both signs flipped) does.

* every form (the readable rotation, the fast form, the complex form, the rotation matrix, the public tables)
  turns by ``−φ``: the inverse of the ``+φ`` rotation, and the ``+φ`` rotation at ``−p``;
* the table cache keeps the two directions apart (same positions, ω and A);
* nanochat's row resolves to ``angle_sign = -1``, every other RoPE row to ``1``, and the adapter dict carries the
  key only when it is ``-1``;
* transformers' own nanochat ``apply_rotary_pos_emb`` is refpos's ``-1`` rotation, and not its ``+1`` one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.backend import get_xp
from refpos.rope.config import RopeConfig
from refpos.rope.core import rotate_pairs
from refpos.rope.forms import apply_rope_complex, rope_rotation_matrix
from refpos.rope.params import rope_config_from_params

NANOCHAT = {"model_type": "nanochat", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}


def _x(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape)


@pytest.mark.parametrize("layout", ["half", "interleaved", "deinterleaved"])
@pytest.mark.parametrize("rotary_dim", [16, 8])
def test_negative_direction_is_the_inverse_rotation(layout, rotary_dim):
    plus = RopeConfig(head_dim=16, rotary_dim=rotary_dim, layout=layout, theta=100.0)
    minus = dataclasses.replace(plus, angle_sign=-1)
    x, p = _x((3, 7, 16)), np.arange(7) * 5
    turned = refpos.to_numpy(refpos.apply_rope(x, p, minus))
    assert not np.allclose(turned, refpos.to_numpy(refpos.apply_rope(x, p, plus)))
    # R(−φ) R(+φ) x = P x, where P is the layout's fixed regrouping (the identity but for deinterleaved)
    regrouped = refpos.to_numpy(refpos.apply_rope(x, np.zeros(7, dtype=np.int64), plus))
    if layout != "deinterleaved":
        back = refpos.to_numpy(refpos.apply_rope(refpos.to_numpy(refpos.apply_rope(x, p, plus)), p, minus))
        np.testing.assert_allclose(back, regrouped, atol=1e-12)
    # every form agrees: the readable rotation, the complex form, the rotation matrix
    inv, factor = refpos.rope_frequencies(minus, seq_len=64)
    xp = get_xp()  # the internal rotation takes the backend's arrays
    np.testing.assert_allclose(refpos.to_numpy(rotate_pairs(xp.asarray(x), xp.asarray(p), inv, factor, minus)),
                               turned, atol=1e-13)
    np.testing.assert_allclose(refpos.to_numpy(apply_rope_complex(x, p, minus)), turned, atol=1e-12)
    matrices = refpos.to_numpy(rope_rotation_matrix(p, minus))  # (T, D, D)
    np.testing.assert_allclose(np.einsum("tij,btj->bti", matrices, x), turned, atol=1e-12)


def test_public_tables_carry_the_direction_in_the_sine():
    """``rope_cos_sin``: ``y = x ⊙ cos + rh(x) ⊙ sin`` holds in either direction; the sine table changes sign."""
    plus = RopeConfig(head_dim=8)
    minus = dataclasses.replace(plus, angle_sign=-1)
    p = np.arange(6)
    cos_p, sin_p = (refpos.to_numpy(t) for t in refpos.rope_cos_sin(p, plus))
    cos_m, sin_m = (refpos.to_numpy(t) for t in refpos.rope_cos_sin(p, minus))  # the same positions: cached tables
    np.testing.assert_array_equal(cos_m, cos_p)
    np.testing.assert_array_equal(sin_m, -sin_p)
    x = _x((6, 8))
    rh = np.concatenate([-x[:, 4:], x[:, :4]], axis=-1)
    np.testing.assert_allclose(x * cos_m + rh * sin_m, refpos.to_numpy(refpos.apply_rope(x, p, minus)), atol=1e-14)


def test_angle_sign_is_checked_and_travels_only_when_negative():
    assert "angle_sign" not in RopeConfig(head_dim=8).to_params()
    params = RopeConfig(head_dim=8, angle_sign=-1).to_params()
    assert params["angle_sign"] == -1 and rope_config_from_params(params).angle_sign == -1
    for bad in (0, 2, True, -1.0):
        with pytest.raises(ValueError, match="angle_sign"):
            RopeConfig(head_dim=8, angle_sign=bad)


def test_nanochat_resolves_to_the_negative_direction_and_llama_does_not():
    resolved = refpos.model_positions(NANOCHAT)
    assert resolved.complete and {r.rope.angle_sign for r in resolved.layers} == {-1}
    assert resolved.layers[0].rope.provenance.get("angle_sign") == "default"
    assert resolved.layers[0].params()["rope"]["angle_sign"] == -1
    llama = refpos.model_positions({**NANOCHAT, "model_type": "llama"})
    assert {r.rope.angle_sign for r in llama.layers} == {1}
    assert "angle_sign" not in llama.layers[0].params()["rope"]
    assert "angle_sign" not in llama.layers[0].rope.provenance


def test_nanochat_rotation_is_the_model_s():
    """transformers' nanochat ``apply_rotary_pos_emb`` with its rotary module's tables at positions 0 … 40 is
    refpos's ``angle_sign = -1`` rotation within the float32 angle rounding; the ``+1`` rotation is off by O(1)."""
    torch = pytest.importorskip("torch", reason="the nanochat anchor runs transformers")
    pytest.importorskip("transformers", reason="the nanochat anchor runs transformers")
    from transformers import AutoConfig
    from transformers.models.nanochat import modeling_nanochat as nano

    config = AutoConfig.for_model("nanochat", **{k: v for k, v in NANOCHAT.items() if k != "model_type"})
    positions = np.arange(41)
    q, k = _x((2, 1, 4, 41, 16))
    cos, sin = nano.NanoChatRotaryEmbedding(config)(torch.zeros(1, dtype=torch.float64),
                                                    torch.as_tensor(positions)[None])
    want_q, _ = nano.apply_rotary_pos_emb(torch.as_tensor(q), torch.as_tensor(k), cos.double(), sin.double())
    (rope,) = {r.rope for r in refpos.model_positions(config.to_dict()).layers}
    assert rope.angle_sign == -1
    got = refpos.to_numpy(refpos.apply_rope(q, positions, rope))
    assert np.abs(got - want_q.numpy()).max() < 1e-5  # float32 angles up to 40 rad: 40·2^-24·‖x‖ and the tables
    wrong = refpos.to_numpy(refpos.apply_rope(q, positions, dataclasses.replace(rope, angle_sign=1)))
    assert np.abs(wrong - want_q.numpy()).max() > 0.5
