r"""Tolerances of the suite's own comparisons, each derived from the computation it allows.

The golden rules (:mod:`refpos.golden.exact.tolerance`) bound single quantities: a frequency, an angle-derived value, a
probability, an attention output. The properties compare *combinations* of them: a ratio of a scaled frequency
to the plain one, a dot product of two rotated vectors, two evaluations of the same attention. Each function here
takes the bound of the parts from those rules (for the adapter's ``INFO["dtype"]`` and ``INFO["forms"]``) and
adds what the combination itself rounds, with the count of roundings written out, so that a correct float32
implementation, in any form the rules admit, is never called wrong, and an error just above the bound is.
``u`` is the unit roundoff of the arithmetic (:func:`support.unit_roundoff`: 2⁻⁵³ for float64, 2⁻²⁴ otherwise,
the rules assuming float32 arithmetic below float32).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np
from rope_support import base_inv, rotary_width
from support import declared_dtype, frequency_rtol, tolerance_array, unit_roundoff

from refpos.golden.exact.tolerance import MANTISSA, attention_tolerance, probability_tolerance


def scaled_frequency_rtol(impl: ModuleType, base: Any, roundings: float) -> np.ndarray:
    r"""Per pair, the relative error of a correct scaled frequency :math:`\omega'_j = \omega_j\,f_j` against the
    float64 :math:`\omega_j f_j`, where ``base`` holds the float64 :math:`\omega_j = \theta^{-2j/d}` and the rule's
    factor :math:`f_j` costs ``roundings`` roundings (each a relative :math:`u`, the rule's inputs exact):

    .. math:: \frac{|\delta\omega'_j|}{\omega'_j} \le \rho_j + \mathrm{roundings}\cdot u

    with :math:`\rho_j` the bound of a correct :math:`\omega_j` (:func:`support.frequency_rtol`: the angle forms in
    force at position 1). A ratio :math:`\omega'_j/\omega_j` taken against the float64 :math:`\omega_j` errs by the
    same relative amount.
    """
    return frequency_rtol(impl, base) + roundings * unit_roundoff(impl)


def yarn_rtol(impl: ModuleType, base: Any, factor: float) -> np.ndarray:
    r"""Per pair, the relative error of a correct YaRN ratio :math:`\omega'_j/\omega_j = (1 - r_j) + r_j/s`
    (:math:`r_j` the ramp, ``factor`` :math:`s`).

    A correct implementation computes :math:`\omega_j` (:math:`\rho_j`), :math:`\omega_j/s` (one rounding), the
    ramp :math:`r_j = (j - lo)/(hi - lo)` clipped to [0, 1] (two roundings of a value at most 1, then exact when
    clipped: :math:`\delta r \le 3u`), and the blend :math:`\omega_j(1 - r) + (\omega_j/s)\,r` (``1 − r``, two
    products, the sum: four roundings). The ramp's error moves the ratio by :math:`(1 - 1/s)\,\delta r` against a
    ratio of at least :math:`1/s`: a relative :math:`(s - 1)\,3u`. Summed:

    .. math:: \rho_j + (5 + 3(s - 1))\,u
    """
    return scaled_frequency_rtol(impl, base, 5 + 3 * max(factor - 1.0, 0.0))


def yarn_log_rtol(impl: ModuleType, base: Any, factor: float) -> np.ndarray:
    r"""Per pair, the relative error of a correct log-space YaRN ratio :math:`s^{-(1 - \mu_j)}`.

    The weight :math:`\mu_j = (1 - r_j)\,e` rounds three times beyond the ramp's :math:`3u` (``1 − r``, the
    product, and :math:`1 - \mu`): :math:`\delta\mu \le 6u`, which moves :math:`\ln(\omega'/\omega)` by
    :math:`\ln s\cdot\delta\mu`; the power (or ``exp`` of the product with :math:`\ln s`) rounds the exponent and
    its result (two more :math:`u\ln s` and one :math:`u` and ``exp``'s ulp, :math:`2u`); the product with
    :math:`\omega_j` one :math:`u`:

    .. math:: \rho_j + (4 + 8\ln s)\,u
    """
    return scaled_frequency_rtol(impl, base, 4 + 8 * math.log(max(factor, 1.0)))


def ntk_last_pair_rtol(impl: ModuleType, theta: float, d: int, factor: float) -> float:
    r"""The relative error of a correct static NTK :math:`\omega_{m-1} = \theta'^{-(d-2)/d}`,
    :math:`\theta' = \theta\,s^{d/(d-2)}`.

    :math:`\theta'` rounds the exponent :math:`d/(d-2)` (amplified by :math:`\ln s`), the power and the product:
    :math:`\delta\theta'/\theta' \le (2 + \tfrac{d}{d-2}\ln s)\,u`; raised to :math:`-(d-2)/d` that shrinks by
    :math:`(d-2)/d`, and the power itself is a frequency of base :math:`\theta'` (:math:`\rho_{m-1}`, the angle
    forms' bound at that base):

    .. math:: \rho_{m-1}(\theta') + (2 + \ln s)\,u
    """
    base = (theta * factor ** (d / (d - 2))) ** -(np.arange(0, d, 2) / d)
    own = frequency_rtol(impl, base)
    return float(own[-1]) + (2 + math.log(max(factor, 1.0))) * unit_roundoff(impl)


def dot_atol(impl: ModuleType, max_position: float, a: Any, b: Any, *, inv_freq: Any = None,
             attention_factor: float = 1.0, computed: int = 2) -> float:
    r"""atol of :math:`R_p a\cdot R_q b`, two vectors rotated (at positions up to ``max_position``, frequencies
    ``inv_freq``, default 1) and multiplied, in each of ``computed`` evaluations that are compared.

    The phase rule (:func:`support.tolerance_array`, kind ``"phase"``) splits into an angle part, proportional to
    the pair's size (:math:`\alpha` per unit size at ``max_position``, the forms in force), and a storage part
    :math:`\sigma(m)` of each entry of size :math:`m`. Each pair :math:`a_j` turns by an angle off by at most
    :math:`\alpha`, which moves it by :math:`\alpha\lVert a_j\rVert`: the rotated vector by
    :math:`\alpha\lVert a\rVert` in all, and its ``d`` entries' storage by :math:`\sqrt d\,\sigma(\lVert a\rVert)`.
    With :math:`e_a = A(\alpha\lVert a\rVert + \sqrt d\,\sigma(\lVert a\rVert))` (``A`` the attention
    factor) and the product's own ``d`` roundings:

    .. math:: \mathrm{computed}\cdot\bigl(e_a A\lVert b\rVert + A\lVert a\rVert e_b
        + d\,u\,A^2\lVert a\rVert\lVert b\rVert\bigr)
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    d = a.shape[-1]
    na, nb = float(np.linalg.norm(a, axis=-1).max()), float(np.linalg.norm(b, axis=-1).max())

    def phase(position: float, size: float) -> float:
        return float(tolerance_array(impl, np.zeros((1, 1)), "phase", positions=np.array([position]),
                                     inv_freq=inv_freq, magnitude=size).max())

    alpha = phase(max_position, 1.0) - phase(0, 1.0)  # the angle part per unit size

    def moved(norm: float) -> float:
        return attention_factor * (alpha * norm + math.sqrt(d) * phase(0, norm))

    own = d * unit_roundoff(impl) * attention_factor**2 * na * nb
    return computed * (moved(na) * attention_factor * nb + attention_factor * na * moved(nb) + own)


def attention_atol(impl: ModuleType, q: Any, k: Any, v: Any, *, bias: Any = None, scale: float | None = None,
                   softcap: float | None = None, computed: int = 2, rescales: int = 0) -> dict[str, float]:
    r"""``{"rtol": 0, "atol": …}`` for ``computed`` evaluations of one attention compared with each other (or
    ``computed = 1`` against the float64 formula): each errs by at most
    :func:`refpos.golden.exact.tolerance.attention_tolerance` for the declared dtype.

    A softcap :math:`c\tanh(s/c)` has slope at most 1, so it never grows the logits' error, and rounds three
    times (``s/c``, ``tanh`` to an ulp, the product) on values of size at most :math:`c`: :math:`4u\,c`,
    counted twice in the probabilities as a logit error is, times :math:`\max|v|`. An online softmax over
    ``rescales`` chunks rescales its accumulator once per chunk (the factor :math:`e^{m_{old} - m_{new}}`: a
    subtraction, ``exp``'s ulp, the product and the sum: :math:`5u` of :math:`\max|v|` each).
    """
    u = unit_roundoff(impl)
    top_v = float(np.abs(np.asarray(v, dtype=np.float64)).max()) if np.size(v) else 0.0
    one = attention_tolerance(declared_dtype(impl), q, k, v, scale=scale, bias=bias)
    if softcap is not None:
        one += top_v * 2 * 4 * u * abs(softcap)
    one += top_v * 5 * u * rescales
    return {"rtol": 0.0, "atol": computed * one}


def probability_atol(impl: ModuleType, logits: Any, *, computed: int = 1) -> dict[str, float]:
    """``{"rtol": 0, "atol": …}``: ``computed`` softmaxes of ``logits`` each within
    :func:`refpos.golden.exact.tolerance.probability_tolerance` for the declared dtype."""
    return {"rtol": 0.0, "atol": computed * probability_tolerance(declared_dtype(impl), logits)}


def llama3_rtol(impl: ModuleType, rope: dict[str, Any]) -> np.ndarray:
    """Per pair, the relative error of a correct llama3 ``ω_j`` in the declared dtype: the pair's frequency bound
    (:func:`support.frequency_rtol`: the angle forms in force) amplified by the blend, plus the blend's own
    roundings.

    In the band ``L0/high ≤ λ ≤ L0/low`` the factor is ``f = (1 − g)/s + g`` with ``g = (L0/λ − low)/(high − low)``
    and ``λ = 2π/ω``, so a relative error δ of ``ω`` moves ``f`` by ``κ·δ``, ``κ = (1 − 1/s)·(L0/λ)/((high − low)·f)``
    (``s − 1`` times ``low/(high − low)`` at the low edge: 20× for s = 21, high = 2·low). A pair just outside
    the band may be computed inside it (its ``λ`` rounds across the edge): ``κ`` is taken at ``λ`` clipped into
    the band. The blend's own arithmetic rounds eight times (``2π/ω``, ``L0/λ``, ``− low``, ``/(high − low)``,
    ``1 − g``, ``/s``, ``+ g``, the product with ``ω``).
    """
    d, s, l0 = rotary_width(rope), rope["factor"], rope["original_max_position_embeddings"]
    low, high = rope["low_freq_factor"], rope["high_freq_factor"]
    base = base_inv(rope["rope_theta"], d)
    wavelen = np.clip(2 * math.pi / base, l0 / high, l0 / low)
    g = (l0 / wavelen - low) / (high - low) if high > low else np.zeros_like(base)
    f = (1 - g) / s + g
    kappa = (1 - 1 / s) * (l0 / wavelen) / ((high - low) * f) if high > low else np.zeros_like(base)
    return (1 + kappa) * frequency_rtol(impl, base) + 8 * unit_roundoff(impl)


# ------------------------------------------------------------------------- encodings beyond RoPE
def alibi_slope_rtol(impl: ModuleType, powers: Any) -> np.ndarray:
    r"""Per slope, the relative error of a correct ALiBi slope :math:`m = b^h` (``powers`` :math:`h`: the first
    group's :math:`h` with :math:`b = 2^{-8/c}`, the second group's odd powers of :math:`2^{-4/c}`).

    The forms: BLOOM's ``base ** arange`` rounds the base (:math:`u`, raised to :math:`h`: :math:`h\,u`) and the
    power (an ulp, :math:`2u`); a running product :math:`m_{h+1} = m_h\,b` rounds the base (:math:`h\,u`) and
    each of its :math:`h - 1` products (:math:`(h - 1)\,u`); ``exp2(−8h/c)`` rounds only the result (the exponent
    is exact, ``c`` a power of two). The largest, with the slope stored in the declared dtype (:math:`u_t`):

    .. math:: \frac{|\delta m_h|}{m_h} \le (2h + 2)\,u + u_t
    """
    stored = 2.0 ** -(MANTISSA[declared_dtype(impl)] + 1)
    return (2 * np.asarray(powers, dtype=np.float64) + 2) * unit_roundoff(impl) + stored


def fire_small_c(impl: ModuleType) -> float:
    r"""The ``c`` at which FIRE's :math:`\psi(x) = \ln(1 + c\,x)` tends to its limit :math:`c\,x` as closely as the
    arithmetic allows: :math:`\sqrt u` (the rounding of :math:`1 + cx`, :math:`u/(cx)` relative, then matches the
    series error :math:`cx/2` at :math:`x \approx 1`): 1.05e-8 in float64, 2.4e-4 in float32."""
    return math.sqrt(unit_roundoff(impl))


def fire_small_c_rtol(impl: ModuleType, distance: Any, norm: Any) -> np.ndarray:
    r"""Per entry, the relative distance of a correct FIRE feature
    :math:`\phi = \psi(x)/\psi(n)` at ``c`` = :func:`fire_small_c` from its limit :math:`x/n`
    (``distance`` :math:`x = i - j > 0`, ``norm`` :math:`n = \max(i, L)`, ``eps`` 0).

    The series :math:`\ln(1 + y) = y(1 - y/2 + \dots)` moves the ratio by :math:`c(n - x)/2` relative, at most
    :math:`\tfrac{cn}{2}(1 + cn)` with the higher terms. The arithmetic: :math:`c\,x` and :math:`1 + cx` round
    (an absolute :math:`2u` in :math:`\psi` after the logarithm, :math:`2u/(cx)` relative), the logarithm to an
    ulp (:math:`2u`); the same for :math:`\psi(n)`, and the quotient one more :math:`u`:

    .. math:: \frac{cn}{2}(1 + cn) + u\Bigl(\frac{2}{cx} + \frac{2}{cn} + 9\Bigr)
    """
    c, u = fire_small_c(impl), unit_roundoff(impl)
    x, n = np.asarray(distance, dtype=np.float64), np.asarray(norm, dtype=np.float64)
    return c * n / 2 * (1 + c * n) + u * (2 / (c * x) + 2 / (c * n) + 9)


def sandwich_atol(impl: ModuleType, d: int, max_position: int, max_distance: int) -> float:
    r"""atol of a Sandwich bias (before the head's division, which only shrinks it) against
    :math:`P_i\cdot P_j - \cos(i - j) + \cos((i - j)10^{-4}) - d/2` formed in float64 from the adapter's own
    sinusoid table :math:`P` at positions up to ``max_position``.

    Each entry of :math:`P` errs by :math:`a` (the phase rule at ``max_position``, size 1, the forms in force),
    so each of the :math:`d` products :math:`P_{ik}P_{jk}` by :math:`2a + a^2`. The bias sums :math:`d/2`
    cosines of angles up to ``max_distance`` (each within :math:`a'`, the phase rule there) in :math:`d/2`
    roundings of values at most :math:`d/2`, and subtracts :math:`d/2` (one more):

    .. math:: d\,(2a + a^2) + \tfrac d2\,a' + \bigl(\tfrac d2 + 1\bigr)\tfrac d2\,u
    """
    m = d // 2
    base = 10000.0 ** (-np.arange(m + 1) / m)  # the sinusoid's ω_0 … ω_{d/2}, the bias reads ω_1 … ω_{d/2}

    def phase(position: int) -> float:
        return float(tolerance_array(impl, np.zeros((1, m + 1)), "phase", positions=np.array([position]),
                                     inv_freq=base, magnitude=1.0).max())

    a, a_rel = phase(max_position), phase(max_distance)
    return d * (2 * a + a * a) + m * a_rel + (m + 1) * m * unit_roundoff(impl)


def xpos_score_atol(impl: ModuleType, q: Any, k: Any, positions: Any, *, base: float = 10000.0,
                    scale_base: float = 512.0) -> np.ndarray:
    r"""Per score, the atol of a correct xPos score :math:`\hat q_m\cdot\hat k_n` ``(..., T, T)``, q and k
    ``(..., T, d)`` at ``positions``: :math:`\hat q_m = \zeta^{e_m}R_m q_m`, :math:`\hat k_n = \zeta^{-e_n}R_n k_n`
    per pair, :math:`e_p = (p - c)/\gamma`, :math:`c = \lfloor T/2\rfloor`.

    Pair :math:`i` of :math:`\hat q_m` has size :math:`A_i = \lVert q_{m,i}\rVert\zeta_i^{e_m}`; its rotation errs
    by :math:`A_i\,\rho_m` (:math:`\rho_m` the phase rule at position :math:`m`, size 1, frequencies
    :math:`\theta^{-2i/d}`, the forms in force), its decay by :math:`A_i\,\sigma_m`: :math:`\zeta_i` rounds
    (:math:`u`, raised to :math:`|e_m|`), the exponent rounds (:math:`u\,|e_m\ln\zeta_i|`), the power to an ulp
    (:math:`2u`), the product with the pair once more, so
    :math:`\sigma_m = (|e_m|(1 + |\ln\zeta_{\min}|) + 3)\,u`, :math:`\zeta_{\min} = 2/7`. The same for
    :math:`\hat k_n` (:math:`B_i`), and the dot product's :math:`d` roundings:

    .. math:: \sum_i A_i B_i\,\bigl(\rho_m + \sigma_m + \rho_n + \sigma_n + d\,u\bigr)(1 + \rho_m + \sigma_m)
    """
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    d = q.shape[-1]
    pos = np.asarray(positions)
    u = unit_roundoff(impl)
    e = (pos - len(pos) // 2) / scale_base  # (T,)
    zeta = (np.arange(0, d, 2) + 0.4 * d) / (1.4 * d)  # (d/2,)
    a = np.linalg.norm(q.reshape(*q.shape[:-1], d // 2, 2), axis=-1) * zeta ** e[:, None]  # (..., T, d/2)
    b = np.linalg.norm(k.reshape(*k.shape[:-1], d // 2, 2), axis=-1) * zeta ** (-e)[:, None]
    sizes = a @ np.swapaxes(b, -1, -2)  # (..., T, T): Σ_i A_i B_i
    inv_freq = base ** (-np.arange(0, d, 2) / d)
    rho = np.asarray(tolerance_array(impl, np.zeros((len(pos), 1)), "phase", positions=pos, inv_freq=inv_freq,
                                     magnitude=1.0)).reshape(-1)  # (T,)
    sigma = (np.abs(e) * (1 + abs(math.log(2 / 7))) + 3) * u
    per_q, per_k = rho + sigma, rho + sigma
    return sizes * (per_q[:, None] + per_k[None, :] + d * u) * (1 + per_q[:, None])
