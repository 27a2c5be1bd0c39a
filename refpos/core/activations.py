r"""The activations of the layers refpos models, in array-API code: GELU (exact and tanh), ReLU, SiLU,
the sigmoid and the identity.

The exact GELU needs the error function, which the array API standard does not have; :func:`erfc` evaluates it
from a series and a continued fraction, which together converge for every argument:

* :math:`|t| < 1`: Kummer's series of positive terms,
  :math:`\operatorname{erf}(t) = \frac{2t}{\sqrt\pi}\,e^{-t^2}\sum_{n \ge 0} \frac{(2t^2)^n}{(2n+1)!!}`
  (no cancellation; 30 terms reach :math:`2^{-80}` of the sum), and :math:`\operatorname{erfc} = 1 -
  \operatorname{erf}` (at most a factor :math:`\operatorname{erf}(1)/\operatorname{erfc}(1) < 6` of
  cancellation);
* :math:`t \ge 1`: Laplace's continued fraction
  :math:`\operatorname{erfc}(t) = \frac{e^{-t^2}}{\sqrt\pi}\cfrac{1}{t + \cfrac{1/2}{t + \cfrac{1}{t +
  \cfrac{3/2}{t + \cdots}}}}`, evaluated from depth 200 upwards (converged to the last bit from
  :math:`t = 1` on); :math:`t \le -1`: :math:`2 - \operatorname{erfc}(-t)`.

:math:`e^{-t^2}` is taken as :math:`e^{-t_h^2}\,e^{-(2t_h t_l + t_l^2)}` with :math:`t = t_h + t_l` split so
that :math:`t_h^2` is exact (Veltkamp), so the rounding of :math:`t^2` does not enter (:func:`gelu` splits
``x`` and takes :math:`e^{-x^2/2}`). Against mpmath (refpos/tests/test_activations.py) the relative error of
:math:`\operatorname{erfc}` stays within 32 ulps wherever it is a normal number (the worst just below
:math:`|t| = 1`, where :math:`1 - \operatorname{erf}` cancels a factor 5), and GELU's within 32 ulps down to
:math:`10^{-300}`: :math:`\Phi(x) = \tfrac12\operatorname{erfc}(-x/\sqrt2)` is accurate in its far tail as
well.

References
----------
Abramowitz and Stegun, *Handbook of Mathematical Functions*, 7.1.6 (the series) and 7.1.14 (the continued
fraction); Hendrycks and Gimpel 2016, "Gaussian Error Linear Units (GELUs)"; transformers, activations.py,
``ACT2CLS``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from refpos.backend import Array, array_namespace
from refpos.validation import check_choice

#: where the continued fraction takes over from the series, its depth, and the series' number of terms
SERIES_LIMIT = 1.0
FRACTION_DEPTH = 200
SERIES_TERMS = 30
#: Veltkamp's splitting constant 2²⁷ + 1: the high part of a float64 keeps 26 bits, so its square is exact
SPLITTER = 134217729.0


def _exp_minus_square(z: Array, scale: float) -> Array:
    """:math:`e^{-s z^2}` (``s`` 1 or 1/2) without the rounding of :math:`z^2`: the high part's square is exact."""
    xp = array_namespace(z)
    big = SPLITTER * z
    high = big - (big - z)
    low = z - high
    return xp.exp(-scale * (high * high)) * xp.exp(-scale * (2.0 * high * low + low * low))


def _erfc_from(t: Array, gauss: Array) -> Array:
    """erfc(t) given :math:`e^{-t^2}` (``gauss``): the series below 1 in magnitude, the continued fraction above."""
    xp = array_namespace(t)
    inside = xp.clip(t, -SERIES_LIMIT, SERIES_LIMIT)  # the series' entries; the others are discarded
    two_t2 = 2.0 * inside * inside
    term = xp.ones_like(t)
    total = xp.ones_like(t)
    for n in range(1, SERIES_TERMS):
        term = term * two_t2 / (2 * n + 1)  # (2t²)ⁿ / (2n+1)!!
        total = total + term
    series = 1.0 - (2.0 / math.sqrt(math.pi)) * inside * gauss * total
    outside = xp.maximum(xp.abs(t), xp.full_like(t, SERIES_LIMIT))  # the fraction's entries, at |t|
    f = outside
    for k in range(FRACTION_DEPTH, 0, -1):
        f = outside + (k / 2.0) / f
    fraction = gauss / (math.sqrt(math.pi) * f)  # erfc(|t|)
    return xp.where(xp.abs(t) < SERIES_LIMIT, series, xp.where(t > 0, fraction, 2.0 - fraction))


def erfc(t: Array) -> Array:
    r"""The complementary error function :math:`\operatorname{erfc}(t) = \frac{2}{\sqrt\pi}\int_t^\infty
    e^{-s^2}ds` of a real floating array (see the module's notes for the method)."""
    return _erfc_from(t, _exp_minus_square(t, 1.0))


def gelu(x: Array) -> Array:
    r"""The exact GELU, :math:`x\,\Phi(x) = \tfrac{x}{2}\operatorname{erfc}(-x/\sqrt2)` (transformers' ``"gelu"``).

    The Gaussian factor is :math:`e^{-x^2/2}` of ``x`` itself, so the rounding of :math:`x/\sqrt2` moves only the
    fraction's rational part (relative error a few ulps even where :math:`\Phi(x)` is :math:`10^{-300}`)."""
    return 0.5 * x * _erfc_from(-x / math.sqrt(2.0), _exp_minus_square(x, 0.5))


def gelu_tanh(x: Array) -> Array:
    r"""GELU's tanh approximation :math:`\tfrac{x}{2}\big(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715\,x^3))\big)`
    (transformers' ``"gelu_new"`` and ``"gelu_pytorch_tanh"``)."""
    xp = array_namespace(x)
    return 0.5 * x * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def relu(x: Array) -> Array:
    r""":math:`\max(x, 0)`."""
    xp = array_namespace(x)
    return xp.maximum(x, xp.zeros_like(x))


def sigmoid(z: Array) -> Array:
    r""":math:`\sigma(z) = 1/(1 + e^{-z})`, evaluated as :math:`e^{z}/(1 + e^{z})` for ``z < 0`` (no overflow)."""
    xp = array_namespace(z)
    e = xp.exp(-xp.abs(z))
    return xp.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu(x: Array) -> Array:
    r""":math:`x\,\sigma(x)` (transformers' ``"silu"`` and ``"swish"``)."""
    return x * sigmoid(x)


def linear(x: Array) -> Array:
    """The identity (transformers' ``"linear"``)."""
    return x


#: transformers' activation names (``ACT2FN`` keys) that refpos evaluates, and the function of each
ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": gelu, "gelu_python": gelu, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh,
    "relu": relu, "silu": silu, "swish": silu, "linear": linear,
}


def activation(name: str) -> Callable[[Array], Array]:
    """The function of a transformers activation name; another name is refused (``ValueError`` naming it)."""
    return ACTIVATIONS[check_choice("activation", name, tuple(ACTIVATIONS))]
