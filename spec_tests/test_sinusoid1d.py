r"""Spec: the 1-D sinusoids of audio and time-series models (docs/sinusoid1d.md#the-math): ``sinusoid_1d`` (signed
positions, which of the pair first, a frequency scale, an amplitude) and fairseq's ``padded_sinusoid``.

The oracles follow the formulas with Python loops, independently of any implementation; each property is shown
failing on a tiny wrong implementation (``test_the_properties_catch_mutants``).

Tolerance (docs/sinusoid1d.md#mistakes, derived for a float32 computation): per row ``|a|·u·((8 + ln base)·|p|·s + 4)``,
``u`` the unit roundoff of ``INFO["dtype"]``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from support import declared_dtype, require

from refpos.golden.ulp import MANTISSA
from refpos.testing.strategies_sinusoid1d import signed_positions, sinusoid_settings, step_masks


def unit(impl) -> float:
    return 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)


def oracle(positions, dim, spacing, layout, first="sin", base=10000.0, frequency_scale=1.0, amplitude=1.0):
    half = dim // 2
    out = np.zeros((*np.shape(positions), dim))
    for index in np.ndindex(np.shape(positions)):
        p = int(np.asarray(positions)[index])
        for k in range(half):
            omega = base ** (-2 * k / dim) if spacing == "paper" else math.exp(-k * math.log(base) / max(half - 1, 1))
            s, c = math.sin(p * frequency_scale * omega), math.cos(p * frequency_scale * omega)
            u, v = (s, c) if first == "sin" else (c, s)
            cols = (2 * k, 2 * k + 1) if layout == "interleaved" else (k, k + half)
            out[index][cols[0]], out[index][cols[1]] = amplitude * u, amplitude * v
    return out


def padded_oracle(mask, dim, padding_idx, past=0):
    positions = np.zeros(mask.shape, dtype=np.int64)
    for row in np.ndindex(mask.shape[:-1]):
        count = past
        for t in range(mask.shape[-1]):
            count += int(mask[row][t])
            positions[row][t] = padding_idx + count if mask[row][t] else padding_idx
    table = oracle(positions, dim, "tensor2tensor", "concat")
    table[~np.asarray(mask, dtype=bool)] = 0.0
    return table, positions


def row_bound(u, positions, settings):
    return abs(settings.get("amplitude", 1.0)) * u * (
        (8 + math.log(settings.get("base", 10000.0))) * np.abs(positions)[..., None] * settings.get(
            "frequency_scale", 1.0) + 4)


def table_matches(fn, positions, settings, u) -> None:
    got = np.asarray(fn(positions, **settings), dtype=np.float64)
    expected = oracle(positions, **settings)
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= row_bound(u, positions, settings)), \
        f"largest error {np.abs(got - expected).max():.3g}"


def negative_rows_mirror(fn, settings, u) -> None:
    """Row −p is row p with its sines negated (the two halves of a relative table)."""
    p = np.arange(0, 200, 7)
    here, there = (np.asarray(fn(x, **settings), dtype=np.float64) for x in (p, -p))
    half = settings["dim"] // 2
    take = (lambda t: (t[..., 0::2], t[..., 1::2])) if settings["layout"] == "interleaved" else \
        (lambda t: (t[..., :half], t[..., half:]))
    (a, b), (a2, b2) = take(here), take(there)
    sin, sin2, cos, cos2 = (a, a2, b, b2) if settings["first"] == "sin" else (b, b2, a, a2)
    atol = 2 * row_bound(u, p, settings)
    assert np.all(np.abs(sin2 + sin) <= atol) and np.all(np.abs(cos2 - cos) <= atol)


def padded_matches(fn, mask, padding_idx, u) -> None:
    got = np.asarray(fn(mask, 16, padding_idx), dtype=np.float64)
    expected, positions = padded_oracle(mask, 16, padding_idx)
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= row_bound(u, positions, {})), \
        f"largest error {np.abs(got - expected).max():.3g}"


@given(positions=signed_positions(), settings=sinusoid_settings())
def test_table_matches_the_formula(impl, positions, settings):
    table_matches(require(impl, "sinusoid_1d"), positions, settings, unit(impl))


@given(settings=sinusoid_settings())
def test_negative_positions_mirror_the_positive_ones(impl, settings):
    negative_rows_mirror(require(impl, "sinusoid_1d"), settings, unit(impl))


@given(mask=step_masks())
def test_fairseq_positions_come_from_the_mask(impl, mask):
    padded_matches(require(impl, "padded_sinusoid"), mask, 1, unit(impl))


def test_odd_dim_names_the_parameter(impl):
    fn = require(impl, "sinusoid_1d")
    with pytest.raises(ValueError, match="dim"):
        fn(np.arange(3), 7, "paper", "concat")


def test_the_properties_catch_mutants():
    """Each property fails on a tiny wrong implementation: the pair's order swapped, the sign of negative positions
    dropped, fairseq's positions from the step index."""
    u = 2.0**-53
    settings = {"dim": 8, "spacing": "tensor2tensor", "layout": "concat", "first": "cos", "base": 10000.0,
                "frequency_scale": 1.0, "amplitude": 1.0}
    mask = np.array([[True, False, True, True]])

    def swapped(p, **kw):
        return oracle(p, **{**kw, "first": "sin" if kw["first"] == "cos" else "cos"})

    def unsigned(p, **kw):
        return oracle(np.abs(p), **kw)

    def index_positions(m, dim, padding_idx):
        return padded_oracle(np.ones_like(m), dim, padding_idx)[0] * m[..., None]

    for check in (lambda: table_matches(swapped, np.arange(-3, 9), settings, u),
                  lambda: negative_rows_mirror(unsigned, settings, u),
                  lambda: padded_matches(index_positions, mask, 1, u)):
        with pytest.raises(AssertionError):
            check()
    table_matches(oracle, np.arange(-3, 9), settings, u)
    negative_rows_mirror(oracle, settings, u)
    padded_matches(lambda m, d, i: padded_oracle(m, d, i)[0], mask, 1, u)
