r"""The maps of a pair a wrong candidate may apply instead of a rotation, each read as a rotation of another input.

Write pair ``j`` of an input row as :math:`z = u + iv` and the candidate's output pair as :math:`z'`. RoPE turns the
pair, :math:`z' = A e^{i\varphi} z`; :func:`refpos.check.fit.fit_pairs` fits that. A port with a sign or a table
built wrong may write another map of the pair at the same angle :math:`\varphi = \omega p + c`: the fit then finds
no rotation and, before this module, nothing else. Each map of :data:`MAPS` is a rotation of another input, so the
same fit recovers its :math:`\hat\omega`, :math:`\hat c` and :math:`\hat A`:

* ``rotation`` — :math:`z' = A e^{i\varphi} z`, read as it is. A rotation with :math:`\hat\omega = -\omega` is the
  sign of sin flipped; with :math:`\hat\omega = -\omega` and the angle :math:`\pi/2` at ``p = 0`` it is
  :math:`e^{i(\pi/2 - \omega p)}`: sin and cos exchanged (:mod:`refpos.check.identify_text` names both);
* ``reflection`` — :math:`z' = A e^{i\varphi} \bar z` (the two channels of the input exchanged, or one negated):
  a rotation of :math:`\bar z`;
* ``sin_reflection`` — the sin term with one sign on both channels, as a sin table ``[sin, −sin]`` multiplied
  into ``rotate_half(x) = [−v, u]`` writes it:

  .. math:: u' = A(u\cos\varphi - v\sin\varphi), \qquad v' = A(v\cos\varphi - u\sin\varphi),

  i.e. :math:`z' = A(\cos\varphi\,z - i\sin\varphi\,\bar z)`: the cos term keeps the pair, the sin term reflects it
  (:math:`(u, v) \to (v, u)`) where a rotation turns it. In matrix form :math:`(u', v') = A M (\cos\varphi,
  \sin\varphi)` with :math:`M = \begin{pmatrix} u & -v \\ v & -u \end{pmatrix}`, so each row gives
  :math:`e = A e^{i\varphi}` itself,

  .. math:: A\cos\varphi = \frac{u u' - v v'}{u^2 - v^2}, \qquad A\sin\varphi = \frac{v u' - u v'}{u^2 - v^2},

  a rotation of the unit input (the table ``[−sin, sin]`` is the same map at :math:`-\varphi`). The singular
  values of :math:`M` are :math:`|u + v|` and :math:`|u - v|`: the output's rounding reaches :math:`e` magnified by
  :math:`g = |z| / \min(|u + v|, |u - v|)`, so the fit allows each row ``g`` times the noise of a rotation; rows
  with ``g`` above :data:`MAX_AMPLIFICATION` (an input within 0.9° of a diagonal) are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from refpos.check.fit import PairFits, fit_pairs

#: the largest factor by which a map may magnify the output's rounding on a row it reads (rows beyond: left out)
MAX_AMPLIFICATION = 64.0

#: what a map reads: the input and output pairs of the equivalent rotation, and each row's amplification
Reading = tuple[np.ndarray, np.ndarray, np.ndarray | float]


@dataclass(frozen=True)
class PairMap:
    """One map of a pair: its name, what it is in words, and how to read it as a rotation.

    ``read(z_in, z_out)`` returns the input and output pairs ``(N, m)`` of the equivalent rotation (a row it
    cannot read has a NaN output: left out of the fit) and the factor by which that reading magnifies the
    output's rounding (a number, or one per row and pair).
    """

    name: str
    what: str
    read: Callable[[np.ndarray, np.ndarray], Reading]


def _as_given(z_in: np.ndarray, z_out: np.ndarray) -> Reading:
    return z_in, z_out, 1.0


def _conjugate_input(z_in: np.ndarray, z_out: np.ndarray) -> Reading:
    r""":math:`z' = A e^{i\varphi}\bar z`: a rotation of :math:`\bar z` (the same size: nothing magnified)."""
    return np.conj(z_in), z_out, 1.0


def _sin_reflected(z_in: np.ndarray, z_out: np.ndarray) -> Reading:
    r""":math:`e = A e^{i\varphi}` of every row from :math:`z' = A(\cos\varphi\,z - i\sin\varphi\,\bar z)`
    (the module docstring), as the rotation ``|z| → |z|·e``, with each row's amplification ``g``; rows with
    ``g`` beyond :data:`MAX_AMPLIFICATION` left out."""
    u, v, u2, v2 = z_in.real, z_in.imag, z_out.real, z_out.imag
    size = np.abs(z_in)
    smallest = np.minimum(np.abs(u + v), np.abs(u - v))  # the smaller singular value of M
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = size / smallest
        e = ((u * u2 - v * v2) + 1j * (v * u2 - u * v2)) / (u * u - v * v)  # A cos φ + i A sin φ
    readable = (size > 0) & (gain <= MAX_AMPLIFICATION)
    return size.astype(np.complex128), np.where(readable, size * e, np.nan), np.where(readable, gain, 1.0)


#: name -> map: the rotation first, then the maps a wrong table writes instead
MAPS: Mapping[str, PairMap] = MappingProxyType({m.name: m for m in (
    PairMap(name="rotation", what="a rotation", read=_as_given),
    PairMap(name="reflection", what="a reflection, z' = A·e^{iφ}·z̄ (the input's two channels exchanged, or one "
            "negated)", read=_conjugate_input),
    PairMap(name="sin_reflection", what="the sin term reflects the pair instead of turning it: u' = u·cos φ − "
            "v·sin φ, v' = v·cos φ − u·sin φ (a sin table [sin, −sin] against rotate_half)", read=_sin_reflected),
)})


def fit_map(name: str, z_in: np.ndarray, z_out: np.ndarray, positions: np.ndarray, dtype: str,
            omega_prior: np.ndarray) -> PairFits:
    """:func:`refpos.check.fit.fit_pairs` of every pair read as the map ``name`` of :data:`MAPS` (its ``maps``
    say so)."""
    z_in, z_out, gain = MAPS[name].read(z_in, z_out)
    fits = fit_pairs(z_in, z_out, positions, dtype, omega_prior, amplification=gain)
    return PairFits(**{**fits.__dict__, "maps": (name,) * omega_prior.size})
