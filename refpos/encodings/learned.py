r"""Learned absolute position tables (BERT, GPT-2, OPT): a row of a trained table per position.

A learned table :math:`P \in \mathbb{R}^{L \times d}` is added to the input embeddings:
:math:`x'_t = x_t + P_{p_t + \text{offset}}`. A position outside ``[0, L)`` is an error, never a
wrap-around (NumPy's negative indexing would silently read the table from its end).
"""

from __future__ import annotations

from typing import Any

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.validation import MAX_EXACT_POSITION, as_positions, check_int, floating_array, same_libraries


def learned_lookup(table: Array, positions: Array, *, offset: int = 0) -> Array:
    r"""Rows of a position table: ``E[positions + offset]``, shape ``(*positions.shape, d)``.

    ``offset`` serves tables with reserved rows (OPT and BART look up ``position + 2``). Indices outside
    ``[0, N)`` raise ``ValueError`` at both ends: NumPy would wrap ``-1`` to the last row silently,
    a real model raises (HF GPT-2: ``IndexError``) or reads garbage.

    Notes
    -----
    .. math:: P_t = E_{p_t + \text{offset}}, \qquad E \in \mathbb{R}^{N \times d}

    Examples
    --------
    >>> import numpy as np
    >>> learned_lookup(np.eye(3), [2, 0]).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    same_libraries(table=table, positions=positions)
    table = floating_array(table, name="table")
    xp = array_namespace(table)
    if table.ndim != 2:
        raise ValueError(f"table must be a matrix (num_positions, dim), got shape {tuple(table.shape)}")
    offset = check_int("offset", offset, minimum=-MAX_EXACT_POSITION, maximum=MAX_EXACT_POSITION)
    positions = as_positions(positions, xp=xp, allow_negative=offset > 0)
    index = positions + offset
    n = table.shape[0]
    if index.size and bool(xp.any(index < 0)):
        raise ValueError(f"positions + offset must be >= 0, got a minimum of {int(xp.min(index))}")
    if index.size and bool(xp.any(index >= n)):
        raise ValueError(
            f"positions + offset must be < {n} (the table's num_positions), "
            f"got a maximum of {int(xp.max(index))}"
        )
    flat = xp.reshape(index, (-1,))  # (N_lookups,)
    rows = xp.take(table, flat, axis=0)  # (N_lookups, d)
    return xp.reshape(rows, (*positions.shape, table.shape[1]))  # (*positions.shape, d)


class LearnedAbsolute(Encoding):
    """A learned (or any given) table of position vectors added to the input embeddings."""

    name = "learned"

    def __init__(self, table: Array, *, offset: int = 0) -> None:
        self.table = floating_array(table, name="table")
        if self.table.ndim != 2:
            raise ValueError(f"table must be a matrix (num_positions, dim), got shape {tuple(self.table.shape)}")
        self.offset = check_int("offset", offset)

    def embed(self, positions: Array, d_model: int, xp: Any) -> Array:
        if self.table.shape[1] != d_model:
            raise ValueError(f"table has dim {self.table.shape[1]} but the model has d_model={d_model}")
        return learned_lookup(self.table, positions, offset=self.offset)

    def __repr__(self) -> str:
        return f"LearnedAbsolute(table of shape {tuple(self.table.shape)}, offset={self.offset})"


