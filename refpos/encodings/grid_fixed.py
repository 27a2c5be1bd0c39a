r"""Learned position tables added as they are at the native grid, never resampled (SAM's image encoder, EoMT, AIMv2,
ViTPose's backbone, the Audio Spectrogram Transformer).

A table of ``p + N + s`` rows (``p`` extra rows before the ``N = M_h·M_w`` grid rows in raster order, ``s`` after)
is added to the tokens of an input whose patch grid is the native ``M_h × M_w``; the model's code has no other
grid (a differently sized input fails there, or is refused by the model). Two readings occur:

* ``"as_is"``: the tokens (the extra tokens and the patches) gain the table row for row, :math:`P' = P`;
* ``"first_row_added"``: there is no extra token, and every patch gains its grid row plus the table's first row
  (ViTPose's backbone adds ``position_embeddings[:, 1:] + position_embeddings[:, :1]``, a table trained with a CLS
  row that its patches now share):

  .. math:: P'_q = P_{1+q} + P_0, \qquad q = 0 \ldots N - 1

A spectrogram's grid (AST) is what the strided patch convolution cuts: a kernel of ``k × k`` bins moved
``s_f`` along the ``F`` frequency bins and ``s_t`` along the ``T`` frames gives

.. math:: M_f = \lfloor (F - k)/s_f \rfloor + 1, \qquad M_t = \lfloor (T - k)/s_t \rfloor + 1

patches, frequency-major (the convolution's output ``(d, M_f, M_t)`` flattened), overlapping where ``s < k``.

:data:`FIXED_MISTAKES` are wrong readings of such a table, each a function of the table and the reading.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from refpos.backend import Array, array_namespace
from refpos.validation import check_choice, check_int, floating_array

#: how a table added as it is reaches the tokens (module docstring)
FIXED_READS = ("as_is", "first_row_added")


def _grid(name: str, value: tuple[int, int]) -> tuple[int, int]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (rows, columns), got {value!r}")
    return check_int(f"{name}[0]", value[0], minimum=1), check_int(f"{name}[1]", value[1], minimum=1)


def fixed_position_rows(table: Array, grid: tuple[int, int], *, source_grid: tuple[int, int], prefix_tokens: int = 0,
                        suffix_tokens: int = 0, read: str = "as_is") -> Array:
    r"""The rows a table added as it is gives the tokens of an input of patch grid ``grid`` (module docstring).

    Parameters
    ----------
    table : real floating array ``(p + M_h·M_w + s, d)``
        The trained table: ``prefix_tokens`` rows, the grid in raster order, ``suffix_tokens`` rows.
    grid : (int, int)
        The input's patch grid; it must be ``source_grid``.
    source_grid : (int, int)
        The native grid ``(M_h, M_w)``.
    prefix_tokens, suffix_tokens : int
        ``p`` and ``s``; ``"first_row_added"`` takes ``p = 1``, ``s = 0``.
    read : {"as_is", "first_row_added"}
        ``P' = P`` (``(p + N + s, d)``), or :math:`P'_q = P_{1+q} + P_0` (``(N, d)``).

    Notes
    -----
    .. math:: P'_q = P_{1+q} + P_0, \qquad q = 0 \ldots N - 1 \quad (\texttt{first\_row\_added})

    See Also
    --------
    refpos.encodings.grid.resample_position_table : a table resampled to the input's grid.
    refpos.models.kinds.grid.GridLayer.reference : the record that calls this for a fixed table.

    References
    ----------
    transformers ``models/vitpose_backbone/modeling_vitpose_backbone.py``, ``VitPoseBackboneEmbeddings.forward``;
    ``models/audio_spectrogram_transformer/modeling_audio_spectrogram_transformer.py``, ``ASTEmbeddings.forward``.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.array([[10.0], [1.0], [2.0], [3.0], [4.0]])
    >>> fixed_position_rows(table, (2, 2), source_grid=(2, 2), prefix_tokens=1, read="first_row_added")[:, 0].tolist()
    [11.0, 12.0, 13.0, 14.0]
    """
    check_choice("read", read, FIXED_READS)
    source = _grid("source_grid", source_grid)
    if _grid("grid", grid) != source:
        raise ValueError(f"grid: the table is added as it is, at its native grid {source} only, got {tuple(grid)}")
    prefix = check_int("prefix_tokens", prefix_tokens, minimum=0)
    suffix = check_int("suffix_tokens", suffix_tokens, minimum=0)
    if read == "first_row_added" and (prefix, suffix) != (1, 0):
        raise ValueError(f"prefix_tokens: the first_row_added reading takes a table of one row before the grid and "
                         f"none after, got {prefix} and {suffix}")
    table = floating_array(table, name="table")
    rows = prefix + source[0] * source[1] + suffix
    if table.ndim != 2 or table.shape[0] != rows:
        raise ValueError(f"table must have shape ({rows}, dim) for the grid {source} with {prefix} + {suffix} extra "
                         f"rows, got {tuple(table.shape)}")
    return table if read == "as_is" else table[1:, :] + table[:1, :]


def strided_grid(lengths: tuple[int, int], kernel: int, strides: tuple[int, int]) -> tuple[int, int]:
    r"""The patch grid a ``kernel × kernel`` convolution of strides ``strides`` cuts from an input of ``lengths``
    (module docstring): :math:`(\lfloor (F - k)/s_f \rfloor + 1,\ \lfloor (T - k)/s_t \rfloor + 1)`.

    >>> strided_grid((128, 1024), 16, (10, 10))
    (12, 101)
    """
    k = check_int("kernel", kernel, minimum=1)
    out = []
    for axis, (length, stride) in enumerate(zip(lengths, strides, strict=True)):
        n = check_int(f"lengths[{axis}]", length, minimum=1)
        s = check_int(f"strides[{axis}]", stride, minimum=1)
        if n < k:
            raise ValueError(f"lengths[{axis}]: {n} bins hold no kernel of {k}")
        out.append((n - k) // s + 1)
    return out[0], out[1]


def _grid_transposed(table: Array, grid: tuple[int, int], prefix: int, suffix: int) -> Array:
    """The grid rows listed column by column, the extra rows in place."""
    xp = array_namespace(table)
    n = grid[0] * grid[1]
    cells = xp.reshape(xp.permute_dims(xp.reshape(table[prefix:prefix + n, :], (*grid, -1)), (1, 0, 2)), (n, -1))
    return xp.concat([table[:prefix, :], cells, table[prefix + n:, :]], axis=0)


def _read(table: Array, read: str) -> Array:
    return table if read == "as_is" else table[1:, :] + table[:1, :]


#: a wrong reading of a fixed table -> its rows, from (table, source_grid, prefix, suffix, read); ``None`` where the
#: mistake does not apply to that reading
FIXED_MISTAKES: Mapping[str, Callable[[Array, tuple[int, int], int, int, str], Array | None]] = MappingProxyType({
    "grid_transposed": lambda t, g, p, s, read: _read(_grid_transposed(t, g, p, s), read),
    "extra_rows_after_grid": lambda t, g, p, s, read: None if read != "as_is" or not p else array_namespace(
        t).concat([t[p:, :], t[:p, :]], axis=0),
    "first_row_left_out": lambda t, g, p, s, read: None if read != "first_row_added" else t[1:, :],
})

__all__ = ["FIXED_MISTAKES", "FIXED_READS", "fixed_position_rows", "strided_grid"]
