"""refpos.core.activations: erfc and the exact GELU against mpmath (50 digits), the tanh form, ReLU and SiLU.

The error is measured in ulps of the exact value (a relative error), where that value is a normal float64. The
bound, 32 ulps, is the one the module's docstring states: a few roundings of the series (about 5 ulps of erf)
times the cancellation of ``1 − erf`` just below ``|t| = 1`` (a factor 5.4), or a few roundings of the
continued fraction and the two exponentials.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from refpos.backend import to_numpy
from refpos.core.activations import ACTIVATIONS, activation, erfc, gelu, gelu_tanh, relu, silu

ULPS = 32


def _ulps(got: np.ndarray, exact: list) -> np.ndarray:
    return np.array([float(abs(mpmath.mpf(float(g)) - e) / abs(e)) / 2.0**-53 for g, e in zip(got, exact, strict=True)])


def test_erfc_matches_mpmath(xp):
    t = np.concatenate([np.linspace(-6.0, 6.0, 241), np.linspace(0.9, 1.1, 41), [0.0, 1e-12, -1e-12, 9.5, 26.0]])
    with mpmath.workdps(50):
        exact = [mpmath.erfc(mpmath.mpf(float(v))) for v in t]
        assert _ulps(to_numpy(erfc(xp.asarray(t))), exact).max() <= ULPS


def test_gelu_matches_mpmath_into_the_far_tail(xp):
    """x·Φ(x) with a relative error of a few dozen ulps down to 10⁻³⁰⁰ (x ≈ −37)."""
    x = np.concatenate([np.linspace(-37.0, 37.0, 297), np.linspace(-1.5, 1.5, 61)])
    with mpmath.workdps(50):
        exact = [mpmath.mpf(float(v)) * mpmath.ncdf(mpmath.mpf(float(v))) for v in x]
        keep = [i for i, e in enumerate(exact) if abs(e) > 1e-300]
        got = to_numpy(gelu(xp.asarray(x)))
        assert _ulps(got[keep], [exact[i] for i in keep]).max() <= ULPS
    assert float(to_numpy(gelu(xp.asarray([0.0])))[0]) == 0.0


def test_a_wrong_erfc_fails_the_bound(xp):
    """The check can fail: erfc with a continued fraction of depth 20 (unconverged near t = 1) is rejected."""
    import refpos.core.activations as module

    depth = module.FRACTION_DEPTH
    module.FRACTION_DEPTH = 20
    try:
        t = np.linspace(1.0, 2.0, 11)
        with mpmath.workdps(50):
            exact = [mpmath.erfc(mpmath.mpf(float(v))) for v in t]
        assert _ulps(to_numpy(erfc(xp.asarray(t))), exact).max() > ULPS
    finally:
        module.FRACTION_DEPTH = depth


def test_the_other_activations(xp):
    x = np.linspace(-5.0, 5.0, 41)
    tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(to_numpy(gelu_tanh(xp.asarray(x))), tanh_form, rtol=1e-15, atol=1e-16)
    np.testing.assert_array_equal(to_numpy(relu(xp.asarray(x))), np.maximum(x, 0))
    np.testing.assert_allclose(to_numpy(silu(xp.asarray(x))), x / (1 + np.exp(-x)), rtol=1e-15, atol=1e-16)
    assert float(to_numpy(silu(xp.asarray([-800.0])))[0]) == 0.0  # no overflow in exp(800)


def test_an_unknown_activation_is_refused_by_name():
    assert activation("swish") is ACTIVATIONS["silu"]
    with pytest.raises(ValueError, match="activation"):
        activation("mish")
