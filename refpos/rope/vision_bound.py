r"""The bound of a float32 port of vision RoPE, per token: what ``refpos check vision_rope`` allows a correct port
(docs/vision-rope.md#checking-a-port-refpos-check-vision_rope).

A correct port may compute in float32 (``u = 2⁻²⁴``). Each output channel is a member of one pair ``(u, v)`` rotated
by ``φ = p·ω`` (or, before the patches, by a given angle ``α``, MLCD's learned class angles):

* the frequency ``ω = θ^(−e)``: the exponent ``e ≤ 1`` rounded (``u·|ln θ|`` relative in ``ω``), the power within
  two ulps, Qwen2-VL's reciprocal ``1/θ^e`` one more: ``(|ln θ| + 3)·u`` relative;
* the angle: an integer coordinate is exact in float32 (``|p| < 2²⁴``), DINOv3's patch centre
  ``(2i + 1)/n − 1 ∈ [−1, 1]`` within ``4u`` absolute (its sum, division and difference, or its float64 value
  stored), and its ``2π`` one rounding more of ``ω``; the product ``p·ω`` one rounding, so
  ``|Δφ| ≤ (|ln θ| + 5)·u·|φ| + 4u·ω``: the error grows with the angle, the largest at the largest coordinate of
  the fastest pair (``ω₀ = 1``, DINOv3's ``2π``); SAM 3's scaled coordinate ``p·s`` (the scale rounded, the
  product) adds ``2u·|φ|``; a given angle ``α`` stored in float32, ``u·|α|``;
* ``cos φ`` and ``sin φ`` (1-Lipschitz): ``|Δφ|`` plus their evaluation and storage, ``2u``;
* ``x`` stored in float32 (``u·|x|``), the two products and the sum of ``u' = u cos φ − v sin φ`` (and of
  ``v'``) three roundings: with ``|u'| ≤ |u| + |v|``, ``|Δu'| ≤ (|u| + |v|)·(|Δφ| + 5u)``.

So ``|Δu'| ≤ u·(|u| + |v|)·((|ln θ| + 5)·|φ| + 4ω + 5)``. With a margin of one ``u·|φ|`` and one ``u``, and per
token (``|u| + |v| ≤ 2·max_c |x_c|``, ``|φ| ≤ φ_max``, the token's largest angle; ``ω ≤ ω_max``, the fastest):

.. math:: \beta_t = u\cdot 2\max_c |x_{t,c}|\cdot\bigl((|\ln\theta| + 6 + 2[\mathrm{sam3}])\,\varphi_{\max,t}
    + 4\,\omega_{\max} + 6\bigr)

one bound for every channel of token ``t``. The 3-D forms (:mod:`refpos.rope.vision3d`) take it with the angles and
frequencies of their rotated channels (:func:`refpos.rope.vision3d.axial_part`): V-JEPA 2's two channels of a pair
turn by two angles of the same set, each output channel still ``x_a cos α − x_b sin α`` (or ``+``) of one angle, so
the same steps bound it; the channels passed through are ``x`` stored, ``u·|x|``, within it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.mistake_match import as_float64
from refpos.rope.vision import VisionRope, vision_angles, vision_frequencies

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24


def token_bound(x: np.ndarray, positions: np.ndarray, rope: VisionRope, prefix_angles: Any = None) -> np.ndarray:
    r"""``β_t = u·2·max_c|x_{t,c}|·((|ln θ| + 6 + 2[sam3])·φ_max,t + 4·ω_max + 6)``, ``(..., P + N, 1)``: what a
    float32 port of the rotation of ``x`` at ``positions`` (after ``P`` tokens turned by ``prefix_angles``
    ``(P, D/2)``, when given) may differ by (module docstring).

    See Also
    --------
    refpos.rope.vision.apply_vision_rope : the rotation it bounds.
    """
    angles = np.abs(as_float64(vision_angles(positions, rope, xp=np)))  # (..., N, D/2)
    if prefix_angles is not None:  # the tokens before the patches: φ = α, given
        given = np.abs(as_float64(prefix_angles))
        angles = np.concatenate([np.broadcast_to(given, (*angles.shape[:-2], *given.shape)), angles], axis=-2)
    phi_max = angles.max(axis=-1, keepdims=True)
    omega_max = float(np.max(vision_frequencies(rope)[1]))
    magnitude = 2.0 * np.abs(x).max(axis=-1, keepdims=True)  # |u| + |v| of any pair of the token
    scaled = 2.0 if rope.kind == "sam3" else 0.0  # SAM 3's coordinate p·s: 2u relative
    return U32 * magnitude * ((abs(math.log(rope.theta)) + 6.0 + scaled) * phi_max + 4.0 * omega_max + 6.0)


__all__ = ["U32", "token_bound"]
