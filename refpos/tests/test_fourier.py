r"""refpos.encodings.fourier: the properties of SAM's and Perceiver's Fourier features, bad input, the mistakes.

Each property is a function of the feature map it checks, run on refpos (it holds) and on a deliberately wrong map
(it fails).

Tolerance. The phases are float64 sums of ``n`` products of size ``2π·|G|`` (≤ 2π·6·2 here); two equal forms
differ by their rounding, a few ulps of 100, and ``sin``/``cos`` by as much: ``atol = 1e-12``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.fourier import (
    FOURIER_VARIANTS,
    fourier_features,
    grid_centre_coordinates,
    linear_positions,
    perceiver_bands,
    perceiver_fourier_features,
    pixel_centre_coordinates,
)
from refpos.encodings.fourier_mistakes import FOURIER_MISTAKES, FourierInputs, identify_fourier
from refpos.tests.kind_checks import check_case, check_mistakes, check_port

ATOL = 1e-12


def _np(a) -> np.ndarray:
    return np.asarray(to_numpy(a), dtype=np.float64)


def shifts_rotate(features, seed: int) -> None:
    """Features are bounded, every (sin, cos) pair has unit norm, and moving c by δ turns pair j by 4π·(δ G)_j."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 4)), int(rng.integers(1, 9))
    gaussian, coords, delta = rng.standard_normal((n, m)), rng.random((5, n)), rng.random(n) * 0.1
    here, there = _np(features(coords, gaussian)), _np(features(coords + delta, gaussian))
    assert np.all(np.abs(here) <= 1.0)
    np.testing.assert_allclose(here[:, :m] ** 2 + here[:, m:] ** 2, 1.0, atol=ATOL)
    turn = 4.0 * math.pi * (delta @ gaussian)  # 2π·2δ·G
    s, c = here[:, :m], here[:, m:]
    np.testing.assert_allclose(there[:, :m], s * np.cos(turn) + c * np.sin(turn), atol=ATOL)
    np.testing.assert_allclose(there[:, m:], c * np.cos(turn) - s * np.sin(turn), atol=ATOL)


@given(seed=st.integers(0, 2**32 - 1))
def test_features_are_bounded_unit_pairs_that_rotate_with_the_coordinate(xp, seed):
    shifts_rotate(lambda c, g: fourier_features(xp.asarray(c), xp.asarray(g)), seed)


def test_the_rotation_property_fails_without_the_recentring():
    def no_recentring(c, g):
        phases = 2 * math.pi * (c @ g)
        return np.concatenate([np.sin(phases), np.cos(phases)], axis=-1)
    with pytest.raises(AssertionError):
        shifts_rotate(no_recentring, 0)


@given(seed=st.integers(0, 2**32 - 1))
def test_mirrored_coordinates_negate_the_sines(xp, seed):
    """c ↦ 1 − c maps 2c − 1 to its negative: sines change sign, cosines stay; the centre c = ½ gives [0 | 1]."""
    rng = np.random.default_rng(seed)
    gaussian, coords = rng.standard_normal((2, 6)), rng.random((4, 2))
    here = _np(fourier_features(xp.asarray(coords), xp.asarray(gaussian)))
    mirrored = _np(fourier_features(xp.asarray(1.0 - coords), xp.asarray(gaussian)))
    np.testing.assert_allclose(mirrored, np.concatenate([-here[:, :6], here[:, 6:]], axis=1), atol=ATOL)
    centre = _np(fourier_features(xp.asarray(np.full((1, 2), 0.5)), xp.asarray(gaussian)))
    np.testing.assert_allclose(centre, [[0.0] * 6 + [1.0] * 6], atol=ATOL)


def test_prompt_points_and_the_grid_read_pixel_centres(xp):
    np.testing.assert_allclose(_np(pixel_centre_coordinates(xp.asarray([[0.0, 0.0], [639.0, 479.0]]), (480, 640))),
                               [[0.5 / 640, 0.5 / 480], [639.5 / 640, 479.5 / 480]], rtol=1e-15)
    grid = _np(grid_centre_coordinates(2, 4, xp=xp))
    assert grid.shape == (2, 4, 2)
    np.testing.assert_allclose(grid[1, 3], [3.5 / 4, 1.5 / 2], rtol=1e-15)


@given(dims=st.lists(st.integers(1, 7), min_size=1, max_size=3), bands=st.integers(1, 6),
       concat_pos=st.booleans(), sine_only=st.booleans())
def test_perceiver_layout(xp, dims, bands, concat_pos, sine_only):
    """[positions | sines | cosines]: the positions copied, each block axis-major, sines of the full form first."""
    positions = _np(linear_positions(dims, xp=xp)).reshape(-1, len(dims))
    resolution = [2 * d + 3 for d in dims]
    out = _np(perceiver_fourier_features(xp.asarray(positions), bands, resolution, concat_pos=concat_pos,
                                         sine_only=sine_only))
    n_feat = len(dims) * bands
    assert out.shape == (positions.shape[0], (len(dims) if concat_pos else 0) + n_feat * (1 if sine_only else 2))
    lead = len(dims) if concat_pos else 0
    np.testing.assert_array_equal(out[:, :lead], positions[:, :lead])
    f = _np(perceiver_bands(bands, resolution, xp=xp))
    np.testing.assert_allclose(out[:, lead: lead + bands], np.sin(math.pi * positions[:, :1] * f[0]), atol=ATOL)
    if not sine_only:
        np.testing.assert_allclose(out[:, lead + n_feat: lead + n_feat + bands],
                                   np.cos(math.pi * positions[:, :1] * f[0]), atol=ATOL)
    assert f[:, 0].tolist() == [1.0] * len(dims)
    if bands > 1:
        np.testing.assert_allclose(f[:, -1], [r / 2 for r in resolution], rtol=1e-15)


def test_linear_positions_end_at_the_range(xp):
    pos = _np(linear_positions([3, 1], xp=xp))
    assert pos.shape == (3, 1, 2) and pos[:, 0, 0].tolist() == [-1.0, 0.0, 1.0] and pos[0, 0, 1] == -1.0


@pytest.mark.parametrize(("call", "name"), [
    (lambda: fourier_features(np.ones((2, 2)), np.ones((3, 4))), "gaussian"),
    (lambda: fourier_features(np.ones((2, 0)), np.ones((0, 4))), "coords"),
    (lambda: fourier_features(np.array([[np.nan, 0.0]]), np.ones((2, 4))), "coords"),
    (lambda: fourier_features(np.ones((2, 2), dtype=np.int64), np.ones((2, 4))), "coords"),
    (lambda: pixel_centre_coordinates(np.ones((2, 3)), (4, 4)), "points"),
    (lambda: pixel_centre_coordinates(np.ones((2, 2)), (4,)), "image_size"),
    (lambda: pixel_centre_coordinates(np.ones((2, 2)), (0, 4)), "image_size"),
    (lambda: grid_centre_coordinates(0, 3), "height"),
    (lambda: linear_positions([]), "index_dims"),
    (lambda: perceiver_fourier_features(np.ones((3, 2)), 4, (8,), concat_pos=True, sine_only=False),
     "max_resolution"),
    (lambda: perceiver_fourier_features(np.ones((3, 2)), 0, (8, 8), concat_pos=True, sine_only=False), "num_bands"),
    (lambda: perceiver_fourier_features(np.ones((3, 2)), 2, (8, 8), concat_pos=1, sine_only=False), "concat_pos"),
    (lambda: FourierInputs("nerf", np.ones((1, 2))), "form"),
])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# ------------------------------------------------------------------------------------------- mistakes
def standard_inputs() -> list[FourierInputs]:
    rng = np.random.default_rng(1)
    gaussian = rng.standard_normal((2, 16)).astype(np.float32).astype(np.float64)  # a float32 model's G
    grid = np.reshape(_np(linear_positions([4, 5], xp=np)), (20, 2))
    return [FourierInputs("sam", rng.random((5, 2)), gaussian),
            FourierInputs("sam_prompts", np.floor(rng.random((5, 2)) * np.array([640, 480])), gaussian,
                          image_size=(480, 640)),
            FourierInputs("perceiver", grid, perceiver={"num_bands": 6, "max_resolution": (4, 5), "concat_pos": True,
                                                        "sine_only": False})]


def float32_port(inputs: FourierInputs) -> np.ndarray:
    """SAM's and Perceiver's features as a float32 library computes them, written independently of refpos."""
    f32 = np.float32
    if inputs.form == "perceiver":
        p = inputs.perceiver
        x = inputs.coords.astype(f32)
        bands = np.stack([np.linspace(1, r / 2, p["num_bands"], dtype=f32) for r in p["max_resolution"]])
        per = (x[:, :, None] * bands[None]).reshape(x.shape[0], -1)
        return np.concatenate([x, np.sin(f32(np.pi) * per), np.cos(f32(np.pi) * per)], axis=-1)
    c = inputs.coords.astype(f32)
    if inputs.form == "sam_prompts":
        c = (c + f32(0.5)) / np.array([inputs.image_size[1], inputs.image_size[0]], dtype=f32)
    phases = f32(2 * np.pi) * ((f32(2) * c - f32(1)) @ inputs.gaussian.astype(f32))
    return np.concatenate([np.sin(phases), np.cos(phases)], axis=-1)


@pytest.mark.parametrize("index", range(3))
def test_a_float32_port_is_within_the_bound_and_named_nothing(index):
    inputs = standard_inputs()[index]
    check_port(float32_port(inputs), inputs, identify_fourier)


@pytest.mark.parametrize("index", range(3))
def test_each_mistake_differs_beyond_the_bound_and_is_named(index):
    inputs = standard_inputs()[index]
    assert len(check_mistakes(inputs, FOURIER_MISTAKES, identify_fourier, margin=100)) >= 3


def test_every_mistake_applies_to_some_input_and_every_variant_names_models():
    applied = {m.name for i in standard_inputs() for m in FOURIER_MISTAKES if m.compute(i) is not None}
    assert applied == {m.name for m in FOURIER_MISTAKES}
    assert all(v["models"] and v["source"].startswith("transformers models/") for v in FOURIER_VARIANTS.values())


def test_golden_cases_replay_certify_and_reject_a_swap():
    from refpos.golden.fourier_cases import fourier_cases

    cases = fourier_cases()
    assert len({c.id for c in cases}) == len(cases) == 3
    for case in cases:
        check_case(case, lambda a: np.roll(a, a.shape[-1] // 2, axis=-1))  # [cos | sin]
