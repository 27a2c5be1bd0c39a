r"""Spec: Fourier features (docs/fourier.md#the-math): SAM's ``fourier_features`` and Perceiver's
``perceiver_fourier_features``.

The oracles follow the formulas with Python loops, independently of any implementation; each property is shown
failing on a tiny wrong implementation (``test_the_properties_catch_mutants``).

Tolerance (docs/fourier.md#mistakes, derived for a float32 computation): SAM's features within
``u·(2π·(n + 9)·max_j Σ_i |G_ij|·max(1, max|2c − 1|) + 4)``, Perceiver's within ``u·(12π·f_max·max(1, max|x|) + 4)``,
``u`` the unit roundoff of ``INFO["dtype"]``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.ulp import MANTISSA
from refpos.testing.strategies_fourier import fourier_inputs, perceiver_settings


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def sam_oracle(coords: np.ndarray, gaussian: np.ndarray) -> np.ndarray:
    n, m = gaussian.shape
    out = np.zeros((*coords.shape[:-1], 2 * m))
    for p in np.ndindex(coords.shape[:-1]):
        for j in range(m):
            phase = 2 * math.pi * sum((2 * float(coords[p][i]) - 1) * float(gaussian[i, j]) for i in range(n))
            out[p][j], out[p][m + j] = math.sin(phase), math.cos(phase)
    return out


def grid_positions(dims: list[int]) -> np.ndarray:
    axes = [[-1.0 + 2.0 * i / max(d - 1, 1) for i in range(d)] for d in dims]
    return np.array([[axes[a][index[a]] for a in range(len(dims))] for index in np.ndindex(*dims)])


def perceiver_oracle(positions, num_bands, max_resolution, concat_pos, sine_only) -> np.ndarray:
    rows = []
    for x in positions:
        angles = [math.pi * (1 + k * (r / 2 - 1) / max(num_bands - 1, 1)) * float(x[a])
                  for a, r in enumerate(max_resolution) for k in range(num_bands)]
        rows.append((list(x) if concat_pos else []) + [math.sin(t) for t in angles]
                    + ([] if sine_only else [math.cos(t) for t in angles]))
    return np.array(rows)


def sam_matches(fn, coords, gaussian, u: float) -> None:
    got, expected = np.asarray(fn(coords, gaussian), dtype=np.float64), sam_oracle(coords, gaussian)
    assert got.shape == expected.shape
    extent = max(1.0, float(np.abs(2 * coords - 1).max()))
    atol = u * (2 * math.pi * (gaussian.shape[0] + 9) * np.abs(gaussian).sum(axis=0).max() * extent + 4)
    assert np.all(np.abs(got - expected) <= atol), f"largest error {np.abs(got - expected).max():.3g}"


def sam_is_bounded_and_mirrors(fn, coords, gaussian, u: float) -> None:
    """Every channel in [−1, 1], unit pairs, and c ↦ 1 − c negates the sines and keeps the cosines."""
    m = gaussian.shape[1]
    here = np.asarray(fn(coords, gaussian), dtype=np.float64)
    mirrored = np.asarray(fn(1.0 - coords, gaussian), dtype=np.float64)
    atol = 8 * u * (2 * math.pi * (gaussian.shape[0] + 9) * np.abs(gaussian).sum(axis=0).max() + 4)
    assert np.all(np.abs(here) <= 1.0 + atol)
    np.testing.assert_allclose(here[..., :m] ** 2 + here[..., m:] ** 2, 1.0, atol=atol)
    np.testing.assert_allclose(mirrored[..., :m], -here[..., :m], atol=atol)
    np.testing.assert_allclose(mirrored[..., m:], here[..., m:], atol=atol)


def perceiver_matches(fn, settings: dict, u: float) -> None:
    positions = grid_positions(settings["index_dims"])
    kw = {k: v for k, v in settings.items() if k != "index_dims"}
    got, expected = np.asarray(fn(positions, **kw), dtype=np.float64), perceiver_oracle(positions, **kw)
    assert got.shape == expected.shape
    f_max = max(r / 2 for r in kw["max_resolution"]) if kw["num_bands"] > 1 else 1.0
    atol = u * (12 * math.pi * max(f_max, 1.0) + 4)
    assert np.all(np.abs(got - expected) <= atol), f"largest error {np.abs(got - expected).max():.3g}"


@given(inputs=fourier_inputs())
def test_sam_features_match_the_formula(impl, inputs):
    sam_matches(require(impl, "fourier_features"), *inputs, unit(impl))


@given(inputs=fourier_inputs())
def test_sam_features_are_bounded_unit_pairs_that_mirror(impl, inputs):
    sam_is_bounded_and_mirrors(require(impl, "fourier_features"), *inputs, unit(impl))


@given(settings=perceiver_settings())
def test_perceiver_features_match_the_formula(impl, settings):
    perceiver_matches(require(impl, "perceiver_fourier_features"), settings, unit(impl))


def test_a_gaussian_of_the_wrong_height_names_the_parameter(impl):
    fn = require(impl, "fourier_features")
    with pytest.raises(ValueError, match="gaussian"):
        fn(np.ones((3, 2)), np.ones((3, 4)))


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: 2c − 1 missing, 2π missing, π missing."""
    u = 2.0**-53
    rng = np.random.default_rng(0)
    coords, gaussian = rng.random((4, 2)), rng.standard_normal((2, 6))
    settings = {"index_dims": [3, 4], "num_bands": 3, "max_resolution": [6, 8], "concat_pos": True,
                "sine_only": False}

    def no_recentring(c, g):
        return sam_oracle((c + 1) / 2, g)

    def no_two_pi(c, g):
        return sam_oracle(0.5 + (c - 0.5) / (2 * math.pi), g)

    def no_pi(positions, **kw):
        return perceiver_oracle(positions / math.pi, **kw) * 1.0

    for check in (lambda: sam_matches(no_recentring, coords, gaussian, u),
                  lambda: sam_is_bounded_and_mirrors(no_recentring, coords, gaussian, u),
                  lambda: sam_matches(no_two_pi, coords, gaussian, u),
                  lambda: perceiver_matches(no_pi, settings, u)):
        with pytest.raises(AssertionError):
            check()
    sam_matches(sam_oracle, coords, gaussian, u)
    sam_is_bounded_and_mirrors(sam_oracle, coords, gaussian, u)
    perceiver_matches(perceiver_oracle, settings, u)
