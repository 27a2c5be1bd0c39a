r"""Absolute position encodings, added to the input embeddings.

This module starts with the learned (or any fixed) table; the sinusoidal table joins it.
"""

from __future__ import annotations

from typing import Any

from refpos._checks import as_positions, float64_array
from refpos.backend import array_namespace
from refpos.encoding import Encoding

Array = Any


def learned_lookup(table: Array, positions: Array) -> Array:
    r"""Rows of a position table: ``E[positions]``, shape ``(*positions.shape, d)``.

    Positions outside ``[0, N)`` raise ``ValueError`` (NumPy would wrap ``-1`` to the last row
    silently; a real model raises or reads garbage).

    Notes
    -----
    .. math:: P_t = E_{p_t}, \qquad E \in \mathbb{R}^{N \times d}

    Examples
    --------
    >>> import numpy as np
    >>> learned_lookup(np.eye(3), [2, 0]).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    table = float64_array(table, name="table")
    xp = array_namespace(table)
    if table.ndim != 2:
        raise ValueError(f"table must be a matrix (num_positions, dim), got shape {tuple(table.shape)}")
    positions = as_positions(positions, xp=xp)
    n = table.shape[0]
    if positions.size and bool(xp.any(positions >= n)):
        raise ValueError(
            f"positions must be < {n} (the table's num_positions), got a maximum of {int(xp.max(positions))}"
        )
    flat = xp.reshape(positions, (-1,))  # (N_lookups,)
    rows = xp.take(table, flat, axis=0)  # (N_lookups, d)
    return xp.reshape(rows, (*positions.shape, table.shape[1]))  # (*positions.shape, d)


class LearnedAbsolute(Encoding):
    """A learned (or any given) table of position vectors added to the input embeddings."""

    name = "learned"

    def __init__(self, table: Array) -> None:
        self.table = float64_array(table, name="table")
        if self.table.ndim != 2:
            raise ValueError(f"table must be a matrix (num_positions, dim), got shape {tuple(self.table.shape)}")

    def embed(self, positions: Array, d_model: int, xp: Any) -> Array:
        if self.table.shape[1] != d_model:
            raise ValueError(f"table has dim {self.table.shape[1]} but the model has d_model={d_model}")
        return learned_lookup(self.table, positions)

    def __repr__(self) -> str:
        return f"LearnedAbsolute(table of shape {tuple(self.table.shape)})"
