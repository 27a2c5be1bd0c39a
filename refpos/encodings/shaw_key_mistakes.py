r"""The inputs, bound and catalogued mistakes of Shaw's key term over clipped frame distances
(:mod:`refpos.encodings.shaw_key`), and :func:`identify_shaw_key`.

The output compared is the terms at the attended pairs and 0 at the pairs of two blocks
(:meth:`ShawKeyInputs.output`): which pairs attend is a mask, told apart by where the terms are 0.

Bound. A port computing in a dtype of unit roundoff :math:`u` (float32: :math:`2^{-24}`) rounds the scale
(:math:`\sigma` stored, then multiplied: two roundings, on the table or on the product) and the :math:`d` products and
:math:`d - 1` sums of :math:`q_i \cdot E_r`; the table and queries are that dtype's values, exact in float64. So

.. math::
    |\hat e_{ij} - e_{ij}| \le \gamma_{d+3}\, \sigma \sum_k |q_{ik}|\,|E_{r_{ij} k}|, \qquad
    \gamma_n = \frac{n u}{1 - n u},

0 at the pairs not attended. A mistake is a wrong way to compute the terms from the same inputs; it is ``None``
(cannot be shown) where its output equals the reference, or reads a row the table does not hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from refpos.encodings.shaw_key import SIGNS, attended, shaw_key_rows, shaw_key_terms
from refpos.mistake_match import KindMistake, identify_output
from refpos.validation import check_choice, check_int

#: the unit roundoff of the dtypes a port computes in
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24}


@dataclasses.dataclass(frozen=True)
class ShawKeyInputs:
    """Queries ``q`` ``(..., H, T, d)``, the table ``(rows, d)``, the clip ``left``/``right``, the ``offset``, the
    ``sign`` (:data:`~refpos.encodings.shaw_key.SIGNS`), the frames per ``block`` (``None``: one block) and the
    ``scale`` (``None``: :math:`d^{-1/2}`)."""

    q: np.ndarray
    table: np.ndarray
    left: int
    right: int
    offset: int
    sign: str
    block: int | None = None
    scale: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "q", np.asarray(self.q, dtype=np.float64))
        object.__setattr__(self, "table", np.asarray(self.table, dtype=np.float64))
        check_choice("sign", self.sign, tuple(SIGNS))
        if self.block is not None:
            check_int("block", self.block, minimum=1)

    @property
    def length(self) -> int:
        return self.q.shape[-2]

    @property
    def sigma(self) -> float:
        return self.q.shape[-1] ** -0.5 if self.scale is None else float(self.scale)

    def output(self, **changed: object) -> np.ndarray:
        """The terms at the attended pairs, 0 at the others (of these inputs with ``changed`` fields)."""
        inputs = dataclasses.replace(self, **changed) if changed else self
        terms = shaw_key_terms(inputs.q, inputs.table, left=inputs.left, right=inputs.right, offset=inputs.offset,
                               sign=inputs.sign, block=inputs.block, scale=inputs.scale)
        return np.where(np.isfinite(terms), terms, 0.0)

    def bound(self, dtype: str = "float32") -> np.ndarray:
        """The bound per entry of a port computing in ``dtype`` (module docstring)."""
        n = self.q.shape[-1] + 3
        u = UNIT_ROUNDOFF[check_choice("dtype", dtype, tuple(UNIT_ROUNDOFF))]
        rows = shaw_key_rows(self.length, left=self.left, right=self.right, offset=self.offset, sign=self.sign)
        magnitude = np.einsum("...id,ijd->...ij", np.abs(self.q), np.abs(self.table[rows]))  # Σ_k |q_ik||E_r k|
        return np.where(attended(self.length, self.block), n * u / (1 - n * u) * self.sigma * magnitude, 0.0)

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        """The output and its float32 bound."""
        return self.output(), self.bound()


def _changed(change: Callable[[ShawKeyInputs], dict | None]) -> Callable[[ShawKeyInputs], tuple | None]:
    """A mistake computing the output with the fields ``change(inputs)`` changed (``None``: it cannot change them):
    ``None`` where the change cannot be shown."""
    def compute(inputs: ShawKeyInputs) -> tuple[np.ndarray, np.ndarray] | None:
        values = change(inputs)
        if values is None:
            return None
        try:
            wrong = inputs.output(**values)
        except ValueError:  # a row the table does not hold
            return None
        if np.array_equal(wrong, inputs.output()):
            return None
        return wrong, dataclasses.replace(inputs, **values).bound()
    return compute


def _block(change: int) -> Callable[[ShawKeyInputs], dict | None]:
    def block(x: ShawKeyInputs) -> dict | None:
        return None if x.block is None or x.block + change < 1 else {"block": x.block + change}
    return block


def _other_sign(x: ShawKeyInputs) -> dict:
    return {"sign": "query_minus_key" if x.sign == "key_minus_query" else "key_minus_query"}


#: the catalogued mistakes, in the order :func:`identify_shaw_key` tries them
SHAW_KEY_MISTAKES: tuple[KindMistake, ...] = (
    KindMistake("sign_flipped", "the distance taken with the other sign (key minus query for query minus key): "
                "the table read mirrored", _changed(_other_sign)),
    KindMistake("clip_swapped", "the clip below and the clip above exchanged",
                _changed(lambda x: {"left": x.right, "right": x.left} if x.left != x.right else None)),
    KindMistake("clip_narrow", "the distance clipped one frame short on each side (L - 1, R - 1)",
                _changed(lambda x: {"left": x.left - 1, "right": x.right - 1} if x.left and x.right else None)),
    KindMistake("clip_wide", "the distance clipped one frame further on each side (L + 1, R + 1)",
                _changed(lambda x: {"left": x.left + 1, "right": x.right + 1})),
    KindMistake("offset_shifted", "the rows read one further: distance 0 at row o + 1",
                _changed(lambda x: {"offset": x.offset + 1})),
    KindMistake("unscaled", "the terms not multiplied by the softmax scale d^-1/2",
                _changed(lambda x: {"scale": 1.0} if x.sigma != 1.0 else None)),
    KindMistake("block_short", "blocks one frame shorter (c - 1)", _changed(_block(-1))),
    KindMistake("block_long", "blocks one frame longer (c + 1)", _changed(_block(1))),
    KindMistake("unblocked", "every pair attended, the whole sequence one block",
                _changed(lambda x: None if x.block is None else {"block": None})),
)


def identify_shaw_key(candidate: np.ndarray, inputs: ShawKeyInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches (within its own bound), ``None`` for a correct output or one
    no mistake explains."""
    return identify_output(candidate, inputs.reference(), SHAW_KEY_MISTAKES, inputs)


__all__ = ["SHAW_KEY_MISTAKES", "UNIT_ROUNDOFF", "ShawKeyInputs", "identify_shaw_key"]
