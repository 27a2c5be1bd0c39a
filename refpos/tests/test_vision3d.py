"""3-D vision RoPE (refpos.rope.vision3d): the two forms by hand, their properties, positions, bad input.

Hand values are formed from the formulas of the module docstring with the same float64 products, so they
compare exactly; the relative-position property holds to rounding of the rotated dot products (a few ulps
of their magnitude).
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.rope.vision3d import (
    VisionRope3D,
    apply_vision3d_rope,
    thw_patch_positions,
    vision3d_cos_sin,
    vision3d_frequencies,
    vjepa2_patch_positions,
)


def test_minimax_by_hand():
    """D = 16: d = 2·⌊5/2⌋ = 4 channels per axis, n = 2 frequencies (1, θ^-1/2), 12 channels rotated."""
    rope = VisionRope3D("minimax_m3_vl", 16, theta=100.0)
    axes, omega = vision3d_frequencies(rope)
    assert (rope.axis_dim, rope.rotary_dim, axes) == (4, 12, (0, 0, 1, 1, 2, 2))
    np.testing.assert_array_equal(omega, [1.0, 0.1, 1.0, 0.1, 1.0, 0.1])
    x = np.arange(1.0, 17.0)[None, :]  # (N=1, D)
    t, h, w = 3, 5, 7
    phi = np.array([t, t * 0.1, h, h * 0.1, w, w * 0.1])  # pair j: p_{⌊j/2⌋} ω_{j mod 2}
    u, v = x[0, :6], x[0, 6:12]  # pairs (j, j + 6)
    want = np.concatenate([u * np.cos(phi) - v * np.sin(phi), v * np.cos(phi) + u * np.sin(phi), x[0, 12:]])
    np.testing.assert_array_equal(apply_vision3d_rope(x, [[t, h, w]], rope)[0], want)


def test_vjepa2_by_hand():
    """D = 12: d = 4 per block, n = 2; channel c of a block turns by p·ω_{c mod 2}, pairs (2k, 2k + 1)."""
    rope = VisionRope3D("vjepa2", 12)
    x = np.arange(1.0, 13.0)[None, :]
    p = (2, 3, 4)
    omega = np.array([1.0, 0.01])  # 10000^(-i/2)
    want = []
    for block, position in enumerate(p):
        chunk = x[0, 4 * block:4 * block + 4]
        alpha = position * omega[np.arange(4) % 2]  # α_c = p ω_{c mod n}
        for k in range(2):
            a, b = chunk[2 * k], chunk[2 * k + 1]
            want += [a * np.cos(alpha[2 * k]) - b * np.sin(alpha[2 * k]),
                     b * np.cos(alpha[2 * k + 1]) + a * np.sin(alpha[2 * k + 1])]
    np.testing.assert_array_equal(apply_vision3d_rope(x, [p], rope)[0], want)
    cos, _ = vision3d_cos_sin([p], rope)
    assert cos.shape == (1, 12)


def test_minimax_scores_depend_on_the_offset_per_axis():
    """q·k after the rotation is a function of (t_q − t_k, h_q − h_k, w_q − w_k): shifting both by the same
    3-D offset keeps every score; reading the axes in another order changes them."""
    rope = VisionRope3D("minimax_m3_vl", 24, theta=1000.0)
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 24))
    pos = rng.integers(0, 20, size=(6, 3))
    shift = np.array([7, 2, 11])
    scores = apply_vision3d_rope(np.tile(q, (6, 1)), pos, rope) @ apply_vision3d_rope(k[None], pos[:1], rope)[0]
    moved = apply_vision3d_rope(np.tile(q, (6, 1)), pos + shift, rope) @ \
        apply_vision3d_rope(k[None], pos[:1] + shift, rope)[0]
    np.testing.assert_allclose(moved, scores, rtol=0, atol=64 * 2.0**-52 * float(np.abs(q).sum() * np.abs(k).sum()))
    swapped = pos[:, [1, 0, 2]]  # h and w read as t and h: other scores
    other = apply_vision3d_rope(np.tile(q, (6, 1)), swapped, rope) @ apply_vision3d_rope(k[None], swapped[:1], rope)[0]
    assert np.abs(other - scores).max() > 1e-3


def test_norms():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 18))
    pos = rng.integers(1, 30, size=(5, 3))
    minimax = apply_vision3d_rope(x, pos, VisionRope3D("minimax_m3_vl", 18))
    np.testing.assert_allclose(np.linalg.norm(minimax, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-14)
    vjepa = apply_vision3d_rope(x, pos, VisionRope3D("vjepa2", 18))
    assert np.abs(np.linalg.norm(vjepa, axis=-1) - np.linalg.norm(x, axis=-1)).max() > 1e-3  # not a rotation
    np.testing.assert_array_equal(apply_vision3d_rope(x, np.zeros((5, 3), dtype=int), VisionRope3D("vjepa2", 18)), x)


def test_positions():
    # one 2-frame grid 2 × 4 (merge 2): per frame the two 2 × 2 blocks, each row-major
    np.testing.assert_array_equal(thw_patch_positions([(2, 2, 4)], 2)[:8],
                                  [[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1], [0, 0, 2], [0, 0, 3], [0, 1, 2],
                                   [0, 1, 3]])
    assert thw_patch_positions([(2, 2, 4)], 2)[8:, 0].tolist() == [1] * 8
    np.testing.assert_array_equal(vjepa2_patch_positions([0, 5, 16, 23], 4), [[0, 0, 0], [0, 1, 1], [1, 0, 0],
                                                                             [1, 1, 3]])


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: VisionRope3D("cosmos", 16), ValueError, "kind must be one of"),
    (lambda: VisionRope3D("vjepa2", 16, theta=500.0), ValueError, "fixes 10000"),
    (lambda: VisionRope3D("minimax_m3_vl", 4), ValueError, "head_dim must be >= 6"),
    (lambda: apply_vision3d_rope(np.ones((2, 16)), [[0, 0]], VisionRope3D("minimax_m3_vl", 16)), ValueError,
     r"shape \(..., N, 3\)"),
    (lambda: apply_vision3d_rope(np.ones((2, 12)), [[0, 0, 0]] * 2, VisionRope3D("minimax_m3_vl", 16)), ValueError,
     "head_dim=16"),
    (lambda: apply_vision3d_rope(np.ones((2, 16)), [[0, 0, 0]] * 3, VisionRope3D("minimax_m3_vl", 16)), ValueError,
     "must end in x's N axis"),
    (lambda: vision3d_cos_sin([[0, 0, 0]], "vjepa2"), TypeError, "VisionRope3D"),
    (lambda: vjepa2_patch_positions([[1, 2]], 4), ValueError, r"token_ids must have shape \(N,\)"),
    (lambda: thw_patch_positions([], 2), ValueError, "at least one"),
])
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
