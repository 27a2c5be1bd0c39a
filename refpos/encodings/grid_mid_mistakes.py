r"""The catalogued mistakes of the tables a stack adds between its layers (YOLOS's mid position embeddings:
:mod:`refpos.models.kinds.grid_mid`), one :class:`~refpos.encodings.grid_mistakes.GridMistake` each, and
:func:`identify_mid`.

:class:`MidInputs` holds one call: the ``L − 1`` tables ``(L − 1, N, d)``, each laid out as the input's (the extra
rows before and after an ``M_h × M_w`` grid), the patch grid and the way. Its reference is each table resampled that
way, in layer order:

.. math:: P'^{(l)} = \big[P^{(l)}_{\text{cls}};\ \mathrm{vec}(\mathcal{R}(\mathrm{grid}(P^{(l)})));\
    P^{(l)}_{\text{det}}\big], \qquad l = 0 \ldots L - 2

**Bound.** Each table is resampled on its own: a correct float32 port is within the largest of the tables' bounds
(:func:`~refpos.encodings.grid_mistakes.grid_tolerance`).

Besides this module's mistakes, every grid mistake of :data:`~refpos.encodings.grid_mistakes.GRID_MISTAKES` made on
every table is named by its own name (:func:`mid_mistakes`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from refpos.encodings.grid_mistakes import GRID_MISTAKES, GridInputs, GridMistake, grid_tolerance, identify_among
from refpos.encodings.grid_variants import GridVariant


@dataclasses.dataclass(frozen=True)
class MidInputs:
    """The tables between the layers (module docstring): ``tables`` ``(L − 1, prefix + M_h·M_w + suffix, d)``."""

    tables: np.ndarray
    grid: tuple[int, int]
    variant: GridVariant
    prefix_tokens: int = 0
    suffix_tokens: int = 0
    source_grid: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.tables.ndim != 3 or self.tables.shape[0] < 1:
            raise ValueError(f"tables must have shape (layers - 1, rows, dim), one table after each layer but the "
                             f"last, got {self.tables.shape}")

    def table_inputs(self) -> list[GridInputs]:
        """Each table's resampling, in layer order."""
        return [GridInputs(table, tuple(self.grid), self.variant, prefix_tokens=self.prefix_tokens,
                           suffix_tokens=self.suffix_tokens, source_grid=self.source_grid) for table in self.tables]

    def reference(self) -> np.ndarray:
        r""":math:`P'^{(l)}`, ``l = 0 … L − 2``, stacked (module docstring)."""
        return np.stack([inputs.resample() for inputs in self.table_inputs()])  # P'^(l) = R(P^(l)), in layer order

    def tolerance(self, dtype: str = "float32") -> float:
        """The largest table's bound (module docstring)."""
        return max(grid_tolerance(inputs, dtype) for inputs in self.table_inputs())


def _several(inputs: MidInputs) -> bool:
    return inputs.tables.shape[0] > 1


#: every mistake of the tables between the layers, by name (the grid's own on every table: :func:`mid_mistakes`)
MID_MISTAKES: dict[str, GridMistake] = {m.name: m for m in (
    GridMistake("grid_mid_tables_reversed", "the tables between the layers added in the other layer order: table "
                "L - 2 - l after layer l", lambda i: i.reference()[::-1], _several),
    GridMistake("grid_mid_first_table_repeated", "the first table between the layers (the one after layer 0) "
                "added after every layer", lambda i: np.stack([i.reference()[0]] * i.tables.shape[0]), _several),
)}


def _on_every_table(mistake: GridMistake) -> GridMistake:
    """``mistake`` made on every table."""
    return GridMistake(mistake.name, mistake.description,
                       lambda i: np.stack([np.asarray(mistake.compute(t)) for t in i.table_inputs()]),
                       lambda i: mistake.applies(i.table_inputs()[0]))


#: the grid's mistakes, each made on every table
LIFTED_MISTAKES: dict[str, GridMistake] = {name: _on_every_table(m) for name, m in GRID_MISTAKES.items()}


def mid_mistakes() -> dict[str, GridMistake]:
    """Every mistake :func:`identify_mid` may name: this module's, then the grid's made on every table.

    See Also
    --------
    identify_mid : the search over them.
    """
    return {**MID_MISTAKES, **LIFTED_MISTAKES}


def identify_mid(candidate: np.ndarray, inputs: MidInputs, *, dtype: str = "float32") -> str | None:
    """The name of the catalogued mistake ``candidate`` made, ``None`` when it is within a correct ``dtype`` port's
    bound, :data:`~refpos.encodings.grid_mistakes.UNRECOGNISED` when no mistake explains it.

    See Also
    --------
    refpos.encodings.grid_mistakes.identify_among : the search.
    """
    return identify_among(candidate, inputs.reference(), inputs.tolerance(dtype), inputs, mid_mistakes().values())


__all__ = ["LIFTED_MISTAKES", "MID_MISTAKES", "MidInputs", "identify_mid", "mid_mistakes"]
