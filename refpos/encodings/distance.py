r"""Relative positions, and the distance bias of the worked example.

Every relative encoding in refpos uses one sign convention: ``rel[i, j] = k_pos[j] - q_pos[i]`` ("key
minus query": negative means the key lies in the past) and ``dist = -rel`` — except DeBERTa
(:mod:`refpos.encodings.deberta`), whose functions take its own ``δ = q_pos[i] - k_pos[j]``. The distance bias of the
worked example (:mod:`refpos.pipeline.worked_example`) is the simplest relative encoding, a penalty that
grows with the distance:

.. math::
    b_{ij} = -\alpha\,\lvert i - j \rvert .

See docs/conventions.md for the sign convention and docs/relative.md#the-distance-bias for the bias.
"""

from __future__ import annotations

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.validation import as_positions, check_bool, check_float, same_libraries, same_library


def relative_positions(q_positions: Array, k_positions: Array) -> Array:
    """``rel[..., i, j] = k_positions[..., j] - q_positions[..., i]``, shape ``(..., Tq, Tk)``."""
    q_positions = as_positions(q_positions, name="q_positions")
    same_library("k_positions", k_positions, array_namespace(q_positions))
    k_positions = as_positions(k_positions, name="k_positions", xp=array_namespace(q_positions))
    return k_positions[..., None, :] - q_positions[..., :, None]


def distance_bias(q_positions: Array, k_positions: Array, *, alpha: float = 1.0) -> Array:
    r"""The worked example's distance bias, ``B[i, j] = -alpha · |i - j|``, shape ``(..., Tq, Tk)``.

    Notes
    -----
    .. math:: B_{ij} = -\alpha\,|p_i - p_j|

    Symmetric and Toeplitz: it depends only on the distance, so it cannot tell left from right.
    Added *before* the ``1/√d`` scale (the worked example's order) its effective strength is ``alpha/√d``;
    restricted to the causal triangle it is ALiBi with the single slope ``alpha``.

    Examples
    --------
    >>> distance_bias([0, 1, 2], [0, 1, 2]).tolist()
    [[-0.0, -1.0, -2.0], [-1.0, -0.0, -1.0], [-2.0, -1.0, -0.0]]
    """
    same_libraries(q_positions=q_positions, k_positions=k_positions)
    alpha = check_float("alpha", alpha)
    rel = relative_positions(q_positions, k_positions)
    xp = array_namespace(rel)
    return -alpha * xp.astype(xp.abs(rel), xp.float64)


class DistanceBias(Encoding):
    """The worked example's distance bias as a pipeline encoding (one value shared by all heads).

    ``before_scale=True`` (the worked example's order) adds it to q·kᵀ before the ``1/√d`` scale.
    """

    name = "distance_bias"

    def __init__(self, alpha: float = 1.0, *, before_scale: bool = True) -> None:
        self.alpha = check_float("alpha", alpha)
        check_bool("before_scale", before_scale)
        self.bias_scaled = before_scale

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        b = distance_bias(q_positions, k_positions, alpha=self.alpha)  # (..., Tq, Tk)
        xp = array_namespace(b)
        return xp.expand_dims(b, axis=-3)  # (..., 1, Tq, Tk): one bias for every head

    def __repr__(self) -> str:
        return f"DistanceBias(alpha={self.alpha}, before_scale={self.bias_scaled})"


