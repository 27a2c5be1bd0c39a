r"""How far a correct resampler computing in another precision may be from :mod:`refpos.encodings.resample`.

A correct port (torch's CPU kernels in float32 or float64, a NumPy or JAX port, a fused gather like
transformers' ``vision_utils``) computes the same map ``y = W x`` with rounded arithmetic. With ``u`` the
unit roundoff of its dtype and ``X = max|x|``, one axis moves the output by at most ``e·X``:

* **interpolation without antialias** (taps ``n``: 2 linear, 4 cubic). The output is a continuous function of
  the source coordinate ``s`` — at an integer ``s`` the taps of either side give the same value — with slope
  at most ``L·X``: ``L = 2`` (linear: ``|x_1 − x_0|``), ``L = 4.2`` (cubic, ``a = −0.75``: ``|k'| ≤ 1.35`` on
  the two near taps, ``≤ 0.75`` on the two far ones). The coordinate ``s = r·(i + ½) − ½`` takes three
  roundings (the step ``r``, the product, the difference): ``δ_s = 3u·(s_max + 1)``. Each weight is a
  polynomial evaluated with error ``c_w·u`` (``c_w = 2`` linear: one subtraction; 24 cubic: four Horner
  steps through intermediates up to ``8|a| = 6``). The ``n`` products are summed and stored:
  ``(n + 1)·u·‖W‖∞``. So :math:`e = L\,\delta_s + n\,c_w\,u + (n + 1)\,u\,\lVert W\rVert_\infty`.
* **antialias** (filter ``f``, Lipschitz ``F' = 1`` triangle, ``1.5`` cubic with ``a = −0.5``: ``|k'| ≤ 1.39``).
  The argument ``t = ((j − c) + ½)/σ`` is off by ``δ_t = 3u·(n_in + c_max + 1)/σ``; each unnormalised weight by
  ``ε_f = F'·δ_t + c_w·u``; normalising ``N`` of them by their sum ``S ≥ S_min`` moves the row of weights
  by at most ``2·N·ε_f/S_min`` in the 1-norm, and the sum of ``N`` products by ``(N + 3)·u·‖W‖∞``.
* **nearest** copies a row: 0 (the float32 index is the rule itself, :mod:`refpos.encodings.resample`).

Two axes compose as
:math:`E = e_h\lVert W_w\rVert + \lVert W_h\rVert e_w + e_h e_w + 2u\lVert W_h\rVert\lVert W_w\rVert`
(the last term: the table stored in the dtype, and the output stored). ``‖W‖∞`` (the largest row sum of ``|W|``),
``N`` (the most taps of a row) and ``S_min`` are read from the exact weights of the case.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from refpos.backend import to_numpy
from refpos.encodings.resample import (
    CUBIC_A_ANTIALIAS,
    cubic_kernel,
    resample_matrix,
    resample_scale,
    triangle_kernel,
)
from refpos.validation import check_float

#: per mode without antialias: (slope L of the output in s, taps n, weight evaluation error c_w in u)
INTERPOLATION_CONSTANTS = {"linear": (2.0, 2, 2.0), "bilinear": (2.0, 2, 2.0), "bicubic": (4.2, 4, 24.0)}
#: per mode with antialias: (filter Lipschitz constant F', filter width in σ, evaluation error c_w in u)
ANTIALIAS_CONSTANTS = {"bilinear": (1.0, 2, 2.0), "bicubic": (1.5, 4, 24.0)}


def _antialias_sums(in_size: int, out_size: int, r: float, cubic: bool) -> float:
    """``S_min``: the smallest row sum of the unnormalised filter weights."""
    centre = r * (np.arange(out_size) + 0.5)
    sigma = max(r, 1.0)
    t = ((np.arange(in_size)[None, :] - centre[:, None]) + 0.5) / sigma
    weights = to_numpy(cubic_kernel(t, CUBIC_A_ANTIALIAS, np) if cubic else triangle_kernel(t, np))
    return float(weights.sum(axis=1).min())


def axis_error_bound(in_size: int, out_size: int, *, mode: str, unit_roundoff: float, align_corners: bool = False,
                     antialias: bool = False, scale_factor: float | None = None,
                     padding: str = "border") -> tuple[float, float]:
    r"""``(e, ‖W‖∞)`` of one axis: a correct port's output is within ``e·max|x|`` of ``W x`` (module docstring)."""
    u = check_float("unit_roundoff", unit_roundoff, positive=True)
    weights = to_numpy(resample_matrix(in_size, out_size, mode=mode, align_corners=align_corners,
                                       antialias=antialias, scale_factor=scale_factor, padding=padding, xp=np))
    norm = float(np.abs(weights).sum(axis=1).max())
    if mode == "nearest":
        return 0.0, norm
    r = resample_scale(in_size, out_size, align_corners=align_corners, scale_factor=scale_factor)
    if antialias:
        slope, width, evaluation = ANTIALIAS_CONSTANTS[mode]
        sigma = max(r, 1.0)
        taps = int(np.ceil(width * sigma)) + 1
        delta_t = 3.0 * u * (in_size + r * out_size + 1.0) / sigma
        smallest = _antialias_sums(in_size, out_size, r, cubic=mode == "bicubic")
        return 2.0 * taps * (slope * delta_t + evaluation * u) / smallest + (taps + 3) * u * norm, norm
    slope, taps, evaluation = INTERPOLATION_CONSTANTS[mode]
    delta_s = 3.0 * u * (r * out_size + 1.0)
    return slope * delta_s + taps * evaluation * u + (taps + 1) * u * norm, norm


def resample_error_bound(in_sizes: Sequence[int], out_sizes: Sequence[int], *, mode: str, unit_roundoff: float,
                         magnitude: float, align_corners: bool = False, antialias: bool = False,
                         scale_factors: Sequence[float | None] | None = None, padding: str = "border") -> float:
    r"""The largest ``|ŷ − y|`` of a correct port resampling an input of largest magnitude ``magnitude``.

    ``in_sizes`` and ``out_sizes`` name the resampled axes in order (one or two); ``scale_factors`` the
    factor of each when the scale-factor form was used; ``padding`` as :func:`~refpos.encodings.resample.interpolate`.

    Notes
    -----
    .. math:: \mathrm{atol} = X \Big(\sum_a e_a \prod_{b \ne a} \lVert W_b \rVert + \prod_a e_a
        + 2u \prod_a \lVert W_a \rVert\Big)

    Examples
    --------
    >>> bound = resample_error_bound([16, 16], [24, 24], mode="bicubic", unit_roundoff=2.0**-24, magnitude=1.0)
    >>> f"{bound:.1e}"                  # of |x| ≤ 1; torch's float32 kernel lands within 2e-6 of the reference
    '5.2e-05'
    """
    factors = list(scale_factors) if scale_factors is not None else [None] * len(in_sizes)
    if not (len(in_sizes) == len(out_sizes) == len(factors)) or len(in_sizes) not in (1, 2):
        raise ValueError("in_sizes, out_sizes and scale_factors must name the same one or two axes")
    axes = [axis_error_bound(n_in, n_out, mode=mode, unit_roundoff=unit_roundoff, align_corners=align_corners,
                             antialias=antialias, scale_factor=s, padding=padding)
            for n_in, n_out, s in zip(in_sizes, out_sizes, factors, strict=True)]
    errors, norms = [e for e, _ in axes], [n for _, n in axes]
    total = sum(e * float(np.prod([n for b, n in enumerate(norms) if b != a])) for a, e in enumerate(errors))
    total += float(np.prod(errors)) if len(errors) > 1 else 0.0
    total += 2.0 * unit_roundoff * float(np.prod(norms))
    return check_float("magnitude", magnitude, minimum=0.0) * total
