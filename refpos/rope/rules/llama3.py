r"""Llama 3.1's ``apply_scaling`` (docs/extrapolation.md#llama3): three wavelength bands.

With :math:`\lambda_j = 2\pi/\omega_j`, ``l`` / ``h`` the low / high frequency factors and ``L_0`` the
pre-training length:

.. math::
    \omega'_j = \begin{cases} \omega_j & \lambda_j < L_0/h \\ \omega_j / s & \lambda_j > L_0/l \\
    (1 - g_j)\,\omega_j / s + g_j\,\omega_j & \text{otherwise (inclusive band)} \end{cases},
    \quad g_j = \frac{L_0/\lambda_j - l}{h - l}
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from refpos.rope.rules.inverse import Changes, Fitted, invert_theta
from refpos.rope.rules.plain import base_inv_freq
from refpos.rope.rules.record import Arithmetic, Config, DrawContext, FactorRule, RopeRule


def llama3_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic, *, cycle: Any = None) -> Any:
    r"""The three bands above. ``cycle`` is the angle of one turn, :math:`2\pi` (``λ_j = cycle/ω_j``); another
    value is a variant (a port that takes the period ``1/ω`` for the wavelength uses ``cycle = 1``).

    ``l = h`` (Llama 4): the band holds only a wavelength equal to ``L_0/l``, where ``g`` is ``0/0``
    (transformers computes NaN there); refpos raises ``ValueError`` for that one case and otherwise computes
    the two outer bands, as transformers does.
    """
    w = base_inv_freq(ar.real(rope.theta), rope.rotary_dim, ar)
    s, l0 = ar.real(rope.factor), ar.real(rope.original_max_position_embeddings)
    low, high = ar.real(rope.low_freq_factor), ar.real(rope.high_freq_factor)
    wavelen = (2 * ar.pi if cycle is None else cycle) / w
    low_freq_wavelen, high_freq_wavelen = l0 / low, l0 / high
    mid = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    if high == low:
        if ar.any(mid):
            raise ValueError("low_freq_factor == high_freq_factor and a wavelength equals "
                             "original_max_position_embeddings / low_freq_factor: the blend is 0/0 there")
        return ar.where(wavelen > low_freq_wavelen, w / s, w)
    g = (l0 / wavelen - low) / (high - low)
    blended = (1 - g) * w / s + g * w
    return ar.where(wavelen > low_freq_wavelen, w / s, ar.where(mid, blended, w))


def band_of(rope: Config, omega: np.ndarray) -> np.ndarray:
    r"""0 high (:math:`\lambda < L_0/h`, kept), 1 smooth (blended), 2 low (:math:`\lambda > L_0/l`, ω/s) for
    plain frequencies ``omega``, by wavelength :math:`\lambda = 2\pi/\omega`."""
    with np.errstate(divide="ignore"):
        wavelength = 2 * math.pi / omega
    l0 = rope.original_max_position_embeddings
    return np.where(wavelength < l0 / rope.high_freq_factor, 0,
                    np.where(wavelength > l0 / rope.low_freq_factor, 2, 1))


#: the names of llama3's bands, as ``refpos check`` prints them
BAND_NAMES = ("high band: kept", "smooth band: blended", "low band: ω/s")


def llama3_bands(rope: Config, seq_len: int | None) -> list[str]:
    return [BAND_NAMES[b] for b in band_of(rope, rope.theta ** (-np.arange(0, rope.rotary_dim, 2) / rope.rotary_dim))]


def invert_llama3(fitted: Fitted) -> Iterator[Changes]:
    r"""In the smooth band :math:`g_j = (\hat\omega_j/\omega_j - 1/s)/(1 - 1/s) = \alpha\omega_j + \beta` with
    :math:`\alpha = L_0/(2\pi(h - l))`, :math:`\beta = -l/(h - l)`: ``L_0`` at the config's ``l, h``, or
    ``l, h`` at the config's ``L_0``; the low band gives ``s``, the high band ``θ``."""
    rope, r = fitted.rope, fitted.ratio()
    s, plain = rope.factor, fitted.plain()
    bands = band_of(rope, plain)
    if (fitted.use & (bands == 2)).any():
        yield {"factor": float(1 / np.median(r[fitted.use & (bands == 2)]))}
    with np.errstate(invalid="ignore", divide="ignore"):
        g = (r - 1 / s) / (1 - 1 / s)
    blend = fitted.use & (g > 1e-9) & (g < 1 - 1e-9)
    l0, low, high = rope.original_max_position_embeddings, rope.low_freq_factor, rope.high_freq_factor
    kept, divided = fitted.use & (np.abs(r - 1) < 1e-9), fitted.use & (np.abs(r * s - 1) < 1e-3)
    if blend.sum() >= 2:
        alpha, beta = np.polyfit(plain[blend], g[blend], 1)
        if alpha > 0:
            width = l0 / (2 * math.pi * alpha)  # h − l at the config's L_0
            yield {"original_max_position_embeddings": max(1, round(2 * math.pi * alpha * (high - low)))}
            yield {"low_freq_factor": float(-beta * width), "high_freq_factor": float(-beta * width + width)}
    elif kept.any() and divided.any():  # no blended pair: L_0 between h·(longest kept λ) and l·(shortest divided λ)
        lowest, highest = high * 2 * math.pi / plain[kept].min(), low * 2 * math.pi / plain[divided].max()
        if lowest < highest:
            yield {"original_max_position_embeddings": max(1, round(math.sqrt(lowest * highest)))}
    yield from invert_theta(fitted, bands == 0)


def check_llama3(rope: Config) -> Mapping[str, Any]:
    if rope.high_freq_factor < rope.low_freq_factor:
        raise ValueError(f"high_freq_factor must be >= low_freq_factor, got high_freq_factor="
                         f"{rope.high_freq_factor}, low_freq_factor={rope.low_freq_factor}")
    return {}


def draw_llama3(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    low = draw(st.sampled_from([1.0, 0.5, 2.0]))
    return {"factor": ctx.factor, "original_max_position_embeddings": ctx.original, "low_freq_factor": low,
            "high_freq_factor": low * draw(st.sampled_from([2.0, 4.0, 1.5]))}


LLAMA3 = RopeRule(
    name="llama3", doc="docs/extrapolation.md#llama3", omega="three wavelength bands", attention="1",
    source="Meta Llama 3.1 apply_scaling", inv_freq=llama3_inv_freq, draw=draw_llama3,
    parameters=("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
    required=(("original_max_position_embeddings", ""), ("low_freq_factor", ""), ("high_freq_factor", "")),
    factor=FactorRule(), check=check_llama3, transformers="_compute_llama3_parameters",
    example={"theta": 500000.0, "factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
             "high_freq_factor": 4.0},
    invert=invert_llama3, bands=llama3_bands,
)
