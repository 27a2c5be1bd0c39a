r"""refpos.encodings.sincos2d: the properties of the math, bad input refused by name, and the catalogued mistakes.

Each property is a function of the builder it checks; a test runs it on refpos (it holds) and on a deliberately
wrong builder (it fails), so that every property is shown able to fail.

Tolerance. Every value is ``sin``/``cos`` of a float64 angle of size at most ``θ``; two algebraically equal forms
(a rotated row against the row at the shifted position) differ by the angle's rounding, ``≈ 2·2⁻⁵³·θ``, plus the
products of the rotation, a few ulps of 1: ``atol = 1e-15·(θ + 8)``, and 1e-12 covers every θ drawn here (≤ 300).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.sincos2d import (
    TWO_PI,
    mask_coordinates,
    sincos_2d_grid,
    sine_coordinates,
    sine_features,
    sine_frequencies,
    sine_position_map,
)
from refpos.encodings.sincos2d_mistakes import SINCOS2D_MISTAKES, Sincos2dInputs, identify_sincos2d
from refpos.encodings.sincos2d_variants import SINE_VARIANTS, sincos2d_variant, variants_of
from refpos.tests.kind_checks import check_case, check_mistakes, check_port

ATOL = 1e-12


def _np(a) -> np.ndarray:
    return np.asarray(to_numpy(a), dtype=np.float64)


def _rotate(pair_sin: np.ndarray, pair_cos: np.ndarray, angle: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sin(a + b), cos(a + b)) from (sin a, cos a) and b: the rotation by b."""
    return pair_sin * np.cos(angle) + pair_cos * np.sin(angle), pair_cos * np.cos(angle) - pair_sin * np.sin(angle)


# ------------------------------------------------------------------------------------------- properties
def grid_rows_rotate(grid) -> None:
    """Moving a token r rows down turns every pair of the row block by r·ω_j and leaves the column block alone."""
    height, width, dim = 6, 5, 16
    table = _np(grid(height, width, dim))
    omega = _np(sine_frequencies(dim // 2, xp=np))
    quarter = dim // 4
    for r in (1, 3):
        here, there = table[: (height - r) * width], table[r * width:]
        s, c = _rotate(here[:, :quarter], here[:, quarter: 2 * quarter], r * omega)
        np.testing.assert_allclose(there[:, :quarter], s, atol=ATOL)
        np.testing.assert_allclose(there[:, quarter: 2 * quarter], c, atol=ATOL)
        np.testing.assert_allclose(there[:, dim // 2:], here[:, dim // 2:], atol=ATOL)


def test_grid_rows_are_rotations_in_each_axis():
    grid_rows_rotate(lambda h, w, d: sincos_2d_grid(h, w, d, axes="yx", xp=np))


def test_grid_rotation_fails_on_axes_swapped():
    with pytest.raises(AssertionError):
        grid_rows_rotate(lambda h, w, d: sincos_2d_grid(h, w, d, axes="xy", xp=np))


@given(height=st.integers(1, 9), width=st.integers(1, 9), quarter=st.integers(1, 8),
       axes=st.sampled_from(["yx", "xy"]), flatten=st.sampled_from(["row_major", "column_major"]),
       cls_rows=st.integers(0, 2), temperature=st.sampled_from([20.0, 10000.0]))
def test_grid_is_the_coordinate_builder_on_patch_indices(xp, height, width, quarter, axes, flatten, cls_rows,
                                                         temperature):
    """The two builders agree: the grid equals sine_coordinates of its (y, x) indices, concat, scale 1; each pair has
    unit norm; the class rows are zero."""
    dim = 4 * quarter
    table = _np(sincos_2d_grid(height, width, dim, temperature=temperature, axes=axes, flatten=flatten,
                               cls_rows=cls_rows, xp=xp))
    t = np.arange(height * width)
    y, x = (t // width, t % width) if flatten == "row_major" else (t % height, t // height)
    coords = np.stack((y, x) if axes == "yx" else (x, y), axis=-1)
    expected = _np(sine_coordinates(xp.asarray(coords.astype(np.float64)), dim // 2, temperature=temperature,
                                    scale=1.0, swap_xy=False, layout="concat"))
    assert np.all(table[:cls_rows] == 0.0)
    np.testing.assert_allclose(table[cls_rows:], expected, atol=ATOL)
    half = table[cls_rows:].reshape(-1, 2, 2, quarter)  # (tokens, axis, sin|cos, frequency)
    np.testing.assert_allclose((half**2).sum(axis=2), 1.0, atol=ATOL)


def valid_region_ignores_padding(embed) -> None:
    """An image padded at the bottom and right: its valid pixels get exactly the unpadded image's embedding."""
    for height, width, pad_h, pad_w in [(3, 4, 2, 0), (5, 2, 0, 3), (2, 2, 1, 1)]:
        mask = np.zeros((1, height + pad_h, width + pad_w), dtype=bool)
        mask[:, :height, :width] = True
        padded = _np(embed(mask))[:, :height, :width]
        alone = _np(embed(np.ones((1, height, width), dtype=bool)))
        np.testing.assert_allclose(padded, alone, atol=ATOL)


@pytest.mark.parametrize("name", [n for n, v in SINE_VARIANTS.items() if v.builder == "mask"])
def test_positions_come_from_the_mask(name):
    variant = sincos2d_variant(name)
    extra = {"temperature": (20.0, 30.0), "scale": None} if name == "dab_detr" else (
        {"temperature": 20.0} if "temperature" in variant.config_keys else {})
    valid_region_ignores_padding(lambda m: variant.build(mask=m, num_features=8, **extra))


def test_mask_property_fails_on_positions_from_the_pixel_index():
    def index_positions(mask):  # the mistake: the mask's cumulative sum ignored
        return sine_position_map(np.ones(mask.shape, dtype=bool), 8, normalize=True)
    with pytest.raises(AssertionError):
        valid_region_ignores_padding(index_positions)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 4), quarter=st.integers(1, 6),
       layout=st.sampled_from(["interleaved", "concat"]), rule=st.sampled_from(["paired", "doubled"]))
def test_coordinate_features_rotate_with_the_coordinate(xp, seed, n, quarter, layout, rule):
    rotated_coordinates(seed, n, 2 * quarter, layout, rule, lambda c, **kw: sine_coordinates(xp.asarray(c), **kw))


def rotated_coordinates(seed: int, n: int, width: int, layout: str, rule: str, fn) -> None:
    """Adding δ to every coordinate turns each pair j of each block by δ·scale·ω_j."""
    rng = np.random.default_rng(seed)
    coords, delta = rng.random((3, n)), float(rng.random())
    options = {"num_features": width, "temperature": 10000.0, "scale": TWO_PI, "swap_xy": True, "layout": layout,
               "rule": rule}
    here, there = _np(fn(coords, **options)), _np(fn(coords + delta, **options))
    omega = _np(sine_frequencies(width, rule=rule, xp=np))
    half = width // 2
    split = (lambda b: (b[..., 0::2], b[..., 1::2])) if layout == "interleaved" else (lambda b: (b[..., :half],
                                                                                                  b[..., half:]))
    for block in range(n):
        s, c = split(here[:, block * width:(block + 1) * width])
        s2, c2 = split(there[:, block * width:(block + 1) * width])
        rs, rc = _rotate(s, c, delta * TWO_PI * omega)
        np.testing.assert_allclose(s2, rs, atol=ATOL)
        np.testing.assert_allclose(c2, rc, atol=ATOL)


def test_coordinate_rotation_fails_on_a_missing_scale():
    def no_scale(c, **kw):
        return sine_coordinates(c, **{**kw, "scale": 1.0})
    with pytest.raises(AssertionError):
        rotated_coordinates(0, 2, 8, "interleaved", "paired", no_scale)


def test_unnormalised_counts_start_at_one_and_normalised_ones_end_at_the_scale(xp):
    mask = xp.asarray(np.array([[[1, 1, 0], [1, 1, 0]]], dtype=bool))
    y, x = (_np(c) for c in mask_coordinates(mask, normalize=False))
    assert y[0, :, 0].tolist() == [1.0, 2.0] and x[0, 0].tolist() == [1.0, 2.0, 2.0]
    y, x = (_np(c) for c in mask_coordinates(mask, normalize=True, offset=-0.5))
    np.testing.assert_allclose(x[0, 0], [0.5 / (2 + 1e-6) * TWO_PI, 1.5 / (2 + 1e-6) * TWO_PI, 1.5 / (2 + 1e-6)
                                         * TWO_PI], rtol=1e-15)


def test_frequencies_of_both_rules(xp):
    np.testing.assert_allclose(_np(sine_frequencies(8, temperature=20.0, xp=xp)), 20.0 ** (-np.arange(4) / 4),
                               rtol=1e-15)
    np.testing.assert_allclose(_np(sine_frequencies(8, rule="doubled", xp=xp)), [1, 1, 0.01, 0.01], rtol=1e-15)


# ------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("call", "name"), [
    (lambda: sincos_2d_grid(2, 2, 6), "dim"),
    (lambda: sincos_2d_grid(0, 2, 8), "height"),
    (lambda: sincos_2d_grid(2, 2, 8, axes="hw"), "axes"),
    (lambda: sincos_2d_grid(2, 2, 8, flatten="c"), "flatten"),
    (lambda: sincos_2d_grid(2, 2, 8, cls_rows=-1), "cls_rows"),
    (lambda: sincos_2d_grid(2, 2, 8, temperature=1.0), "temperature"),
    (lambda: sine_features(np.ones(2), 3), "width"),
    (lambda: sine_features(np.ones(2), 4, layout="half"), "layout"),
    (lambda: sine_frequencies(4, rule="x"), "rule"),
    (lambda: sine_position_map(np.ones((2, 2)), 4, normalize=True), "mask"),
    (lambda: sine_position_map(np.full((1, 2, 2), 2), 4, normalize=True), "mask"),
    (lambda: sine_position_map(np.ones((2,), dtype=bool), 4, normalize=True), "mask"),
    (lambda: sine_position_map(np.ones((1, 2, 2), dtype=bool), 4, normalize=False, offset=-0.5), "normalize"),
    (lambda: sine_position_map(np.ones((1, 2, 2), dtype=bool), 4, normalize="yes"), "normalize"),
    (lambda: sine_position_map(np.ones((1, 2, 2), dtype=bool), 4, normalize=True, temperature=(2.0,)),
     "temperature"),
    (lambda: sine_coordinates(np.ones((2, 0)), 4, swap_xy=True), "coords"),
    (lambda: sine_coordinates(np.ones((2, 2), dtype=np.int64), 4, swap_xy=True), "coords"),
    (lambda: sine_coordinates(np.ones((2, 2)), 4, swap_xy=1), "swap_xy"),
    (lambda: sincos2d_variant("vit"), "variant"),
    (lambda: SINE_VARIANTS["mae"].build(height=2, width=2, dim=8, axes="yx"), "fixes"),
])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


def test_every_variant_names_its_models_and_source():
    for name, variant in SINE_VARIANTS.items():
        assert variant.models and variant.source.startswith("transformers models/") and variant.description
        assert all(name in variants_of(model) for model in variant.models)


# ------------------------------------------------------------------------------------------- mistakes
_MASK = np.ones((2, 6, 9), dtype=bool)
_MASK[0, 4:, :] = False
_MASK[1, :, 5:] = False


def standard_inputs(name: str) -> Sincos2dInputs:
    """A non-square grid, a padded mask, or random coordinates, with config values unlike the defaults."""
    variant = sincos2d_variant(name)
    rng = np.random.default_rng(0)
    if variant.builder == "grid":
        extra = {"temperature": 20.0} if "temperature" in variant.config_keys else {}
        return Sincos2dInputs(name, {"height": 3, "width": 5, "dim": 16, **extra})
    if variant.builder == "mask":
        extra = {"temperature": (20.0, 30.0), "scale": None} if name == "dab_detr" else (
            {"temperature": 20.0} if "temperature" in variant.config_keys else {})
        return Sincos2dInputs(name, {"mask": _MASK, "num_features": 8, **extra})
    n = 1 if name in ("grounding_text", "sam2_pointers") else 4
    return Sincos2dInputs(name, {"coords": rng.random((3, n)) * (5 if name == "grounding_text" else 1),
                                 "num_features": 8})


def float32_port(inputs: Sincos2dInputs) -> np.ndarray:
    """The variant computed as a float32 library does (float32 frequencies, coordinates and angles), written
    independently of refpos."""
    kw, builder = inputs.keywords(), inputs.record.builder
    f32 = np.float32
    t = kw.get("temperature", 10000.0)

    def feats(c, width, temperature, layout="interleaved"):
        dim_t = f32(temperature) ** (f32(2) * (np.arange(width, dtype=f32) // 2) / f32(width))  # each ω twice
        angle = c.astype(f32)[..., None] / dim_t
        sin, cos = np.sin(angle[..., 0::2]), np.cos(angle[..., 1::2])
        return np.stack([sin, cos], -1).reshape(*c.shape, width) if layout == "interleaved" else \
            np.concatenate([sin, cos], -1)

    if builder == "grid":
        h, w, d = kw["height"], kw["width"], kw["dim"]
        t_idx = np.arange(h * w)
        y, x = (t_idx // w, t_idx % w) if kw["flatten"] == "row_major" else (t_idx % h, t_idx // h)
        a, b = (y, x) if kw["axes"] == "yx" else (x, y)
        table = np.concatenate([feats(a, d // 2, t, "concat"), feats(b, d // 2, t, "concat")], -1)
        return np.concatenate([np.zeros((kw["cls_rows"], d), f32), table])
    if builder == "mask":
        m = kw["mask"].astype(f32)
        y, x = np.cumsum(m, -2, dtype=f32), np.cumsum(m, -1, dtype=f32)
        s = f32(TWO_PI if kw.get("scale") is None else kw["scale"])
        y = (y + f32(kw["offset"])) / (y[..., -1:, :] + f32(kw["eps"])) * s
        x = (x + f32(kw["offset"])) / (x[..., :, -1:] + f32(kw["eps"])) * s
        ty, tx = t if isinstance(t, tuple) else (t, t)
        return np.concatenate([feats(y, kw["num_features"], ty), feats(x, kw["num_features"], tx)], -1)
    c = kw["coords"].astype(f32) * f32(kw["scale"])
    order = [1, 0, *range(2, c.shape[-1])] if kw["swap_xy"] and c.shape[-1] >= 2 else list(range(c.shape[-1]))
    if kw["rule"] == "doubled":  # SAM 2's pointers: dim_t over W/2 entries, each frequency twice, sin then cos
        half = kw["num_features"] // 2
        dim_t = f32(t) ** (f32(2) * (np.arange(half, dtype=f32) // 2) / f32(half))
        return np.concatenate([np.concatenate([np.sin(c[..., i, None] / dim_t), np.cos(c[..., i, None] / dim_t)],
                                              -1) for i in order], -1)
    return np.concatenate([feats(c[..., i], kw["num_features"], t, kw["layout"]) for i in order], -1)


@pytest.mark.parametrize("name", list(SINE_VARIANTS))
def test_a_float32_port_is_within_the_bound_and_named_nothing(name):
    inputs = standard_inputs(name)
    check_port(float32_port(inputs), inputs, identify_sincos2d)


@pytest.mark.parametrize("name", list(SINE_VARIANTS))
def test_each_mistake_differs_beyond_the_bound_and_is_named(name):
    inputs = standard_inputs(name)
    assert len(check_mistakes(inputs, SINCOS2D_MISTAKES, identify_sincos2d, margin=100)) >= 3


def test_every_mistake_applies_to_some_variant():
    applied = {m.name for name in SINE_VARIANTS for m in SINCOS2D_MISTAKES if m.compute(standard_inputs(name))
               is not None}
    assert applied == {m.name for m in SINCOS2D_MISTAKES}


def test_an_unexplained_output_is_named_nothing():
    inputs = standard_inputs("detr")
    assert identify_sincos2d(inputs.reference()[0] + 0.5, inputs) is None
    assert math.isfinite(float(inputs.bound().max()))


# ------------------------------------------------------------------------------------------- goldens
def test_golden_cases_replay_certify_and_reject_a_swap():
    from refpos.golden.sincos2d_cases import sincos2d_cases

    cases = sincos2d_cases()
    assert len({c.id for c in cases}) == len(cases) == 9
    for case in cases:
        check_case(case, lambda a: np.roll(a, 1, axis=-1))  # every channel read from its neighbour
