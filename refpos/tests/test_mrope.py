"""M-RoPE (refpos.rope.mrope and the (3, ..., T) positions of rope_cos_sin / apply_rope).

Exact comparisons (``array_equal``) where the same float64 products are formed in the same order: the
reduction to 1-D RoPE and the per-pair gathers. The complex form and the rotation matrix are independent
evaluations of the same operator: agreement to two float64 ulps of the largest output value.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.rope.config import RopeConfig
from refpos.rope.core import apply_rope, rope_cos_sin
from refpos.rope.forms import apply_rope_complex, rope_rotation_matrix
from refpos.rope.mrope import assignment_name, axis_positions, check_sections, mrope_angles, pair_axes
from refpos.rope.params import rope_config_from_params
from refpos.rope.scaling import rope_frequencies

#: the real models' sections (pairs t, h, w) and assignment
REAL = [((16, 24, 24), False), ((24, 20, 20), True), ((8, 12, 12), False), ((11, 11, 10), True),
        ((20, 22, 22), "hw_alternating")]


def _grid_positions(start: int, t: int, h: int, w: int) -> np.ndarray:
    """(3, t·h·w) positions of one image grid starting at ``start`` (row-major t, h, w)."""
    tt, hh, ww = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
    return np.stack([tt.ravel(), hh.ravel(), ww.ravel()]) + start  # (3, t·h·w)


@pytest.mark.parametrize(("sections", "interleaved"), REAL)
def test_sections_partition_the_pairs(sections, interleaved):
    axes = pair_axes(sections, interleaved)
    assert len(axes) == sum(sections)
    assert tuple(axes.count(a) for a in range(3)) == sections


def test_assignments_of_the_real_models():
    qwen2 = pair_axes((16, 24, 24), False)
    assert qwen2[:16] == (0,) * 16 and qwen2[16:40] == (1,) * 24 and qwen2[40:] == (2,) * 24
    qwen3 = pair_axes((24, 20, 20), True)
    assert qwen3[:60] == (0, 1, 2) * 20 and qwen3[60:] == (0,) * 4
    ernie = pair_axes((20, 22, 22), "hw_alternating")  # ERNIE-4.5-VL's [22, 22, 20] (h, w, t)
    assert ernie[:44] == (1, 2) * 22 and ernie[44:] == (0,) * 20
    assert pair_axes((24, 20, 20), "interleaved") == qwen3 and pair_axes((16, 24, 24), "contiguous") == qwen2


def test_the_assignment_is_stored_once():
    """mrope_interleaved names contiguous and interleaved; mrope_assignment holds only the others, so a
    ``replace`` of either field changes the assignment (never a silent disagreement)."""
    import dataclasses

    qwen3 = RopeConfig(head_dim=128, mrope_section=(24, 20, 20), mrope_assignment="interleaved")
    assert qwen3 == RopeConfig(head_dim=128, mrope_section=(24, 20, 20), mrope_interleaved=True)
    assert qwen3.mrope_assignment is None and qwen3.mrope_scheme == "interleaved"
    assert dataclasses.replace(qwen3, mrope_interleaved=False).mrope_scheme == "contiguous"
    ernie = RopeConfig(head_dim=128, mrope_section=(20, 22, 22), mrope_assignment="hw_alternating")
    assert ernie.mrope_scheme == "hw_alternating" and ernie.mrope_interleaved is False
    assert rope_config_from_params(ernie.to_params()) == ernie
    assert ernie.to_params()["mrope_assignment"] == "hw_alternating" and "mrope_assignment" not in qwen3.to_params()
    assert dataclasses.replace(ernie, mrope_assignment=None).mrope_scheme == "contiguous"
    assert RopeConfig(head_dim=8).mrope_scheme is None


@pytest.mark.parametrize(("sections", "interleaved"), REAL)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_one_dimensional_positions_are_one_dimensional_rope(sections, interleaved, layout):
    m = sum(sections)
    mrope = RopeConfig(head_dim=2 * m, theta=1e6, layout=layout, mrope_section=sections,
                       mrope_assignment=assignment_name(interleaved))
    plain = RopeConfig(head_dim=2 * m, theta=1e6, layout=layout)
    positions = np.array([0, 3, 17, 1000, 65535])
    x = np.random.default_rng(1).standard_normal((2, 5, 2 * m))
    for got, want in zip(rope_cos_sin(positions, mrope), rope_cos_sin(positions, plain), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(rope_cos_sin(np.stack([positions] * 3), mrope)[0],
                                  rope_cos_sin(positions, plain)[0])
    np.testing.assert_array_equal(apply_rope(x, positions, mrope), apply_rope(x, positions, plain))


def test_worked_example_of_the_docs():
    omega = 10000.0 ** (-np.arange(6) / 6)
    point = np.array([[2], [5], [7]])
    contiguous = mrope_angles(point, omega, (2, 2, 2), interleaved=False)[0]
    interleaved = mrope_angles(point, omega, (2, 2, 2), interleaved=True)[0]
    np.testing.assert_array_equal(contiguous, np.array([2, 2, 5, 5, 7, 7]) * omega)
    np.testing.assert_array_equal(interleaved, np.array([2, 5, 7, 2, 5, 7]) * omega)


@pytest.mark.parametrize(("sections", "interleaved"), REAL)
def test_each_pair_reads_its_axis(sections, interleaved):
    m = sum(sections)
    rope = RopeConfig(head_dim=2 * m, theta=1e4, mrope_section=sections, mrope_assignment=assignment_name(interleaved))
    positions = _grid_positions(4, 2, 3, 5)  # (3, 30)
    cos, sin = rope_cos_sin(positions, rope)  # (30, 2m)
    inv_freq, _ = rope_frequencies(rope)
    axes = np.array(pair_axes(sections, interleaved))
    want = positions[axes].T * inv_freq  # (30, m): pair j at position p_{a(j)}
    np.testing.assert_array_equal(cos[:, :m], np.cos(want))
    np.testing.assert_array_equal(sin[:, m:], np.sin(want))


def test_batched_positions_with_heads_and_the_independent_forms():
    rope = RopeConfig(head_dim=24, theta=1e4, mrope_section=(4, 4, 4), mrope_interleaved=True, layout="interleaved")
    rng = np.random.default_rng(2)
    positions = rng.integers(0, 40, size=(3, 2, 6))  # (3, B, T)
    x = rng.standard_normal((2, 3, 6, 24))  # (B, H, T, D)
    y = apply_rope(x, positions, rope)
    for b in range(2):
        for t in range(6):
            single = apply_rope(x[b, 0, t], positions[:, b, t : t + 1], rope)
            np.testing.assert_array_equal(single, y[b, 0, t])
    atol = 2 * np.spacing(np.abs(y).max())  # two ulps: the forms round their sums differently
    np.testing.assert_allclose(apply_rope_complex(x, positions, rope), y, rtol=0, atol=atol)
    matrices = rope_rotation_matrix(positions[:, 0], rope)  # (T, D, D)
    np.testing.assert_allclose(np.einsum("tij,htj->hti", matrices, x[0]), y[0], rtol=0, atol=atol)
    np.testing.assert_allclose(rope_rotation_matrix(positions[:, 0, 2], rope), matrices[2], rtol=0, atol=0)


def test_every_rope_type_goes_with_sections():
    yarn = RopeConfig(rope_type="yarn", head_dim=32, factor=4.0, original_max_position_embeddings=4096,
                      mrope_section=(4, 6, 6))
    plain = RopeConfig(rope_type="yarn", head_dim=32, factor=4.0, original_max_position_embeddings=4096)
    positions = _grid_positions(10, 1, 4, 4)
    cos, _ = rope_cos_sin(positions, yarn)
    inv_freq, factor = rope_frequencies(plain)
    axes = np.array(pair_axes((4, 6, 6), False))
    np.testing.assert_array_equal(cos[:, :16], factor * np.cos(positions[axes].T * inv_freq))


def test_params_round_trip_and_equality():
    rope = RopeConfig(head_dim=128, theta=1e6, mrope_section=[16, 24, 24])
    assert rope.mrope_section == (16, 24, 24) and rope.mrope_interleaved is False
    assert rope_config_from_params(rope.to_params()) == rope
    qwen3 = RopeConfig(head_dim=128, theta=1e6, mrope_section=[24, 20, 20])
    assert qwen3 != RopeConfig(head_dim=128, theta=1e6, mrope_section=[24, 20, 20], mrope_interleaved=True)
    assert rope != RopeConfig(head_dim=128, theta=1e6)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mrope_section": (16, 24, 23)}, "sums to 63"),
    ({"mrope_section": (32, 32)}, "3 entries"),
    ({"mrope_section": (-1, 33, 32)}, r"mrope_section\[t\] must be >= 0"),
    ({"mrope_section": (4, 40, 20), "mrope_interleaved": True}, "cannot be assigned interleaved"),
    ({"mrope_interleaved": True}, "needs mrope_section"),
    ({"mrope_section": (20, 24, 20), "mrope_assignment": "hw_alternating"}, "needs s_h = s_w"),
    ({"mrope_assignment": "hw_alternating"}, "needs mrope_section"),
    ({"mrope_section": (20, 22, 22), "mrope_assignment": "ernie"}, "mrope_assignment must be one of"),
    ({"mrope_section": (20, 22, 22), "mrope_assignment": "hw_alternating", "mrope_interleaved": True},
     "disagrees"),
])
def test_bad_sections_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RopeConfig(head_dim=128, **kwargs)


def test_bad_section_types_are_named():
    with pytest.raises(TypeError, match="mrope_section must be a list"):
        RopeConfig(head_dim=128, mrope_section="16,24,24")
    with pytest.raises(TypeError, match=r"mrope_section\[h\] must be an int"):
        check_sections((16, 24.0, 24), 64, False)
    with pytest.raises(TypeError, match="mrope_interleaved must be a bool"):
        RopeConfig(head_dim=128, mrope_section=(16, 24, 24), mrope_interleaved=1)


def test_interleaved_bounds_are_exact():
    """check_sections accepts exactly the sections whose round-robin slices (pairs a, a+3, … below
    3·s_a, as Python slices them over m pairs) give every axis all its pairs."""
    for m in range(1, 13):
        for s_t in range(m + 1):
            for s_h in range(m + 1 - s_t):
                sections = (s_t, s_h, m - s_t - s_h)
                counts = [len(range(m)[slice(a, 3 * sections[a], 3)]) for a in (1, 2)]
                fits = counts == list(sections[1:])
                if fits:
                    assert check_sections(sections, m, True) == sections
                    assert tuple(pair_axes(sections, True).count(a) for a in range(3)) == sections
                else:
                    with pytest.raises(ValueError, match="cannot be assigned interleaved"):
                        check_sections(sections, m, True)


def test_hw_alternating_needs_equal_h_and_w():
    """ERNIE's h and w alternate pair by pair (its module stacks the two bands: equal lengths only)."""
    for m in range(1, 13):
        for s_t in range(m + 1):
            for s_h in range(m + 1 - s_t):
                sections = (s_t, s_h, m - s_t - s_h)
                if s_h == sections[2]:
                    assert check_sections(sections, m, "hw_alternating") == sections
                    axes = pair_axes(sections, "hw_alternating")
                    assert tuple(axes.count(a) for a in range(3)) == sections
                    assert axes[: 2 * s_h] == (1, 2) * s_h  # h on even pairs, w on odd ones, t last
                else:
                    with pytest.raises(ValueError, match="needs s_h = s_w"):
                        check_sections(sections, m, "hw_alternating")


@pytest.mark.parametrize("shape", [(2, 5), (4, 5), (5,) * 0])
def test_positions_with_the_wrong_leading_axis_are_named(shape):
    rope = RopeConfig(head_dim=12, mrope_section=(2, 2, 2))
    with pytest.raises(ValueError, match=r"\(3, \.\.\., T\) with rows t, h, w"):
        rope_cos_sin(np.zeros(shape, dtype=np.int64), rope)
    with pytest.raises(ValueError, match="leading axis"):
        axis_positions(np.zeros(shape, dtype=np.int64))


def test_one_vector_takes_one_token():
    rope = RopeConfig(head_dim=12, mrope_section=(2, 2, 2))
    x = np.arange(12.0)
    np.testing.assert_array_equal(apply_rope(x, [[1], [2], [3]], rope), apply_rope(x[None], [[1], [2], [3]], rope)[0])
    with pytest.raises(ValueError, match="one vector"):
        apply_rope(x, [[1, 2], [2, 3], [3, 4]], rope)
    with pytest.raises(ValueError, match=r"give \(3,\) for one token"):
        rope_rotation_matrix(4, rope)


def test_fast_form_is_bit_identical_to_the_readable_form(monkeypatch):
    """NumPy's fast rotation consumes the readable form's tables: M-RoPE keeps its bits there too."""
    from refpos.rope import core

    rope = RopeConfig(head_dim=128, theta=5e6, mrope_section=(24, 20, 20), mrope_interleaved=True)
    rng = np.random.default_rng(4)
    positions = rng.integers(0, 5000, size=(3, 2, 40))  # (3, B, T)
    for dtype in (np.float64, np.float32):
        x = rng.standard_normal((2, 4, 40, 128)).astype(dtype)  # (B, H, T, D)
        fast = apply_rope(x, positions, rope)
        monkeypatch.setattr(core, "_rotation_for", lambda x: core.rotate_pairs)
        readable = apply_rope(x, positions, rope)
        monkeypatch.undo()
        np.testing.assert_array_equal(fast, readable)
