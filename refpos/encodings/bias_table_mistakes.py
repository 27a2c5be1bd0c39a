r"""The catalogued mistakes of relative position bias tables, the kind's tolerance, and an identifier.

Every bias here is rows of a per-offset table gathered through an index: ``B[h, a, b] = rows[idx[a, b], h]``.
A correct port may differ from refpos in how it rounds the rows (float32), never in the index. The tolerance
(:func:`bias_table_bound`) is therefore a bound per table row, derived from the computation of that row in
float32 (``u = 2⁻²⁴``; an anchor passes ``u = 2⁻⁵³`` for a float64 library) and gathered through the index:

* **Swin, BEiT at the table's window**: the row is a stored number, ``u·|row|``.
* **BEiT resampled**: each axis of the bilinear resampling computes its source coordinate
  ``(n_in/n_out)(i + ½) − ½`` in three roundings (``≤ 3u·n_in``, also covering a fused multiply-add), which
  moves the weight ``λ`` by as much and the value by ``3u·n_in·|x₁ − x₀| ≤ 6u·n_in·M``; the two products and
  the sum add ``3u·M`` (``M`` the largest patch row). Two axes, and the stored input: ``(12·n_in + 7)·u·M``;
  the three CLS rows are copied, ``u·|row|``.
* **Swin v2**: the coordinate ``c = sign(x)·log2(1 + |x|)/3`` (``x = 8Δ/(S − 1)``: one rounding) carries
  ``(2/(3 ln 2) + 3|c|)·u`` (the rounded ``x`` and ``1 + |x|`` move the logarithm by ``2u/ln 2``; ``log2`` within
  one ulp, ``2u·|log2|``; the division by 3, ``u|c|``). The first layer adds ``Σ_a |w1_aj|·ε_a`` and ``4u·(Σ_a
  |c_a w1_aj| + |b1_j|)`` (two products, two sums, the weights stored in float32); ReLU is 1-Lipschitz; the
  second layer adds ``Σ_j |w2_jh|·Δh_j + (n + 1)·u·Σ_j |w2_jh|·a_j`` (a sum of ``n`` = hidden products, the
  weights stored); ``16σ`` has slope at most 4 and its own evaluation (``exp``, a sum, a division) adds
  ``4u·16σ``.

A mistake is the same computation with one step changed, so its output's tolerance is the same rule applied to
its own rows and index. :func:`identify_bias_table` names the mistake a candidate's output matches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from refpos.backend import get_xp, to_numpy
from refpos.core.activations import sigmoid
from refpos.encodings._bilinear import bilinear_resize
from refpos.encodings.bias_table import BIAS_FORMS, beit_resample_table, swinv2_log_coords, window_bias
from refpos.encodings.bias_table_index import beit_relative_index, check_window, relative_rows, swin_relative_index
from refpos.validation import check_choice

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24


@dataclass(frozen=True)
class BiasTableInputs:
    """The inputs of one window bias (see :func:`refpos.encodings.bias_table.window_bias`), NumPy float64."""

    form: str
    window: tuple[int, int]
    table: np.ndarray | None = None
    table_window: tuple[int, int] | None = None
    mlp: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    pretrained_window: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        check_choice("form", self.form, BIAS_FORMS)
        object.__setattr__(self, "window", check_window("window", self.window))

    def reference(self) -> np.ndarray:
        """refpos's bias of these inputs."""
        return np.asarray(to_numpy(window_bias(self.form, self.window, table=self.table,
                                               table_window=self.table_window, mlp=self.mlp,
                                               pretrained_window=self.pretrained_window)))


# ------------------------------------------------------------------------------------------- rows and bounds
def _gather(rows: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.moveaxis(rows[index], -1, 0)  # (H, Na, Nb)


def _swinv2_coords(inputs: BiasTableInputs, *, log: bool = True, own_window: bool = False
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The MLP's input ``(R, 2)`` and its error per entry in units of u: the log-spaced offsets, or (mistakes) the
    scaled offsets themselves, or the offsets measured in the window instead of the pretrained window."""
    pretrained = None if own_window else inputs.pretrained_window
    if log:
        coords = np.asarray(to_numpy(swinv2_log_coords(inputs.window, pretrained_window=pretrained,
                                                       xp=get_xp("numpy"))))
        coords = coords.reshape(-1, 2)
        return coords, 2 / (3 * math.log(2)) + 3 * np.abs(coords)
    sides = inputs.window if pretrained is None else check_window("pretrained_window", pretrained)
    axes = [8.0 * np.arange(-(w - 1), w) / max(s - 1, 1) for w, s in zip(inputs.window, sides, strict=True)]
    coords = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
    return coords, np.abs(coords)


def _cpb_rows(inputs: BiasTableInputs, coords: np.ndarray, coord_error: np.ndarray, *, squash: str,
              unit: float, coord_unit: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Swin v2's rows ``(R, H)`` through the MLP and the squash, and their bound (module docstring); the coordinates
    may carry the error of another precision (``coord_unit``: transformers computes them in float32 always)."""
    coord_unit = unit if coord_unit is None else coord_unit
    w1, b1, w2 = (np.asarray(a, dtype=np.float64) for a in inputs.mlp)
    hidden = coords @ w1 + b1  # (R, n)
    active = np.maximum(hidden, 0.0)
    z = active @ w2  # (R, H)
    hidden_error = coord_unit * coord_error @ np.abs(w1) + 4 * unit * (np.abs(coords) @ np.abs(w1) + np.abs(b1))
    z_error = hidden_error @ np.abs(w2) + (w2.shape[0] + 1) * unit * (active @ np.abs(w2))
    if squash == "none":
        return z, z_error + unit * np.abs(z)
    s = np.asarray(to_numpy(sigmoid(z)))
    factor = 16.0 if squash == "16sigmoid" else 1.0
    return factor * s, factor * (z_error / 4 + 4 * unit * s)


def _resampled_rows(inputs: BiasTableInputs, *, align_corners: bool, unit: float) -> tuple[np.ndarray, np.ndarray]:
    """BEiT's table at the input's window ``(R' + 3, H)`` and its bound (module docstring)."""
    table = np.asarray(inputs.table, dtype=np.float64)
    ph, pw = check_window("table_window", inputs.table_window)
    if (ph, pw) == inputs.window:
        return table, unit * np.abs(table)
    if not align_corners:
        rows = np.asarray(to_numpy(beit_resample_table(table, (ph, pw), inputs.window)))
    else:  # the mistake: corners aligned
        r = relative_rows((ph, pw))
        image = table[:r].T.reshape(table.shape[1], 2 * ph - 1, 2 * pw - 1)
        wh, ww = inputs.window
        resampled = np.asarray(to_numpy(bilinear_resize(image, (2 * wh - 1, 2 * ww - 1), align_corners=True)))
        rows = np.concatenate([resampled.reshape(table.shape[1], -1).T, table[r:]])
    n_in = max(2 * ph - 1, 2 * pw - 1)
    patch_max = np.abs(table[:-3]).max(initial=0.0)
    bound = unit * np.abs(rows)
    bound[:-3] = (12 * n_in + 7) * unit * patch_max
    return rows, bound


def rows_and_bound(inputs: BiasTableInputs, *, unit: float = U32, coord_unit: float | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The per-offset rows ``(R, H)`` of the reference (BEiT: with its three CLS rows) and their error bound in
    precision ``unit`` (Swin v2's coordinates in ``coord_unit``, by default the same)."""
    if inputs.form == "swin":
        table = np.asarray(inputs.table, dtype=np.float64)
        return table, unit * np.abs(table)
    if inputs.form == "beit":
        return _resampled_rows(inputs, align_corners=False, unit=unit)
    coords, error = _swinv2_coords(inputs)
    return _cpb_rows(inputs, coords, error, squash="16sigmoid", unit=unit, coord_unit=coord_unit)


def reference_index(inputs: BiasTableInputs) -> np.ndarray:
    """The index of the reference: Swin's, or BEiT's with the CLS token."""
    numpy = get_xp("numpy")
    if inputs.form == "beit":
        return np.asarray(to_numpy(beit_relative_index(inputs.window, xp=numpy)))
    return np.asarray(to_numpy(swin_relative_index(inputs.window, xp=numpy)))


def bias_table_bound(inputs: BiasTableInputs, *, unit: float = U32, coord_unit: float | None = None) -> np.ndarray:
    """The tolerance of every entry of the bias (the shape of :meth:`BiasTableInputs.reference`): what a correct
    port computing in precision ``unit`` (float32 by default) may differ by."""
    _rows, bound = rows_and_bound(inputs, unit=unit, coord_unit=coord_unit)
    return _gather(bound, reference_index(inputs))


# ------------------------------------------------------------------------------------------------ mistakes
@dataclass(frozen=True)
class BiasTableMistake:
    """A catalogued mistake: its name, one line saying what the port did, the forms it can happen in, and the
    wrong bias with its tolerance from the same inputs (``None`` where the inputs cannot show it)."""

    name: str
    description: str
    forms: tuple[str, ...]
    compute: Callable[[BiasTableInputs], tuple[np.ndarray, np.ndarray] | None]


def _patch_offsets(window: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    token = np.arange(window[0] * window[1])
    rows, cols = token // window[1], token % window[1]
    return rows[:, None] - rows[None, :], cols[:, None] - cols[None, :]


def _with_patch_index(inputs: BiasTableInputs, patches: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The bias of the reference rows read through another patch index (clamped to the table, as a gather that
    clamps does: JAX's default); BEiT keeps its CLS entries."""
    rows, bound = rows_and_bound(inputs)
    index = reference_index(inputs).copy()
    patches = np.clip(patches, 0, rows.shape[0] - 1)
    if inputs.form == "beit":
        index[1:, 1:] = patches
    else:
        index = patches
    return _gather(rows, index), _gather(bound, index)


def _offset_by_window(inputs: BiasTableInputs):
    (wh, ww), (dh, dw) = inputs.window, _patch_offsets(inputs.window)
    return _with_patch_index(inputs, (dh + wh) * (2 * ww - 1) + (dw + ww))


def _row_stride(inputs: BiasTableInputs):
    (wh, ww), (dh, dw) = inputs.window, _patch_offsets(inputs.window)
    return _with_patch_index(inputs, (dh + wh - 1) * (2 * ww) + (dw + ww - 1))


def _axes_swapped(inputs: BiasTableInputs):
    (wh, ww), (dh, dw) = inputs.window, _patch_offsets(inputs.window)
    return _with_patch_index(inputs, (dw + ww - 1) * (2 * wh - 1) + (dh + wh - 1))


def _key_minus_query(inputs: BiasTableInputs):
    (wh, ww), (dh, dw) = inputs.window, _patch_offsets(inputs.window)
    return _with_patch_index(inputs, (wh - 1 - dh) * (2 * ww - 1) + (ww - 1 - dw))


def _cpb(inputs: BiasTableInputs, *, log: bool = True, own_window: bool = False, squash: str = "16sigmoid"):
    coords, error = _swinv2_coords(inputs, log=log, own_window=own_window)
    rows, bound = _cpb_rows(inputs, coords, error, squash=squash, unit=U32)
    index = reference_index(inputs)
    return _gather(rows, index), _gather(bound, index)


def _window_normalised(inputs: BiasTableInputs):
    if inputs.pretrained_window is None or tuple(inputs.pretrained_window) == inputs.window:
        return None
    return _cpb(inputs, own_window=True)


def _beit_index_changed(inputs: BiasTableInputs, change: Callable[[np.ndarray], np.ndarray]):
    rows, bound = rows_and_bound(inputs)
    index = change(reference_index(inputs))
    return _gather(rows, index), _gather(bound, index)


def _cls_rows_swapped(index: np.ndarray) -> np.ndarray:
    out = index.copy()
    out[0, 1:], out[1:, 0] = index[1:, 0], index[0, 1:]
    return out


def _cls_last(index: np.ndarray) -> np.ndarray:
    return np.roll(index, -1, axis=(0, 1))  # token order: the patches, then CLS


def _no_cls(inputs: BiasTableInputs):
    rows, bound = rows_and_bound(inputs)
    index = reference_index(inputs)[1:, 1:]
    return _gather(rows, index), _gather(bound, index)


def _align_corners(inputs: BiasTableInputs):
    if tuple(inputs.table_window) == inputs.window:
        return None
    rows, bound = _resampled_rows(inputs, align_corners=True, unit=U32)
    index = reference_index(inputs)
    return _gather(rows, index), _gather(bound, index)


#: the catalogue, in the order the identifier tries it
BIAS_TABLE_MISTAKES: tuple[BiasTableMistake, ...] = (
    BiasTableMistake("index_offset_by_window", "the offsets moved by W instead of W − 1 before the row is formed "
                     "(rows past the table read its last row)", BIAS_FORMS, _offset_by_window),
    BiasTableMistake("index_row_stride", "the row offset multiplied by 2·Ww instead of 2·Ww − 1 (rows past the "
                     "table read its last row)", BIAS_FORMS, _row_stride),
    BiasTableMistake("index_axes_swapped", "the column offset taken as the major one: (Δw + Ww − 1)·(2Wh − 1) + "
                     "(Δh + Wh − 1)", BIAS_FORMS, _axes_swapped),
    BiasTableMistake("index_key_minus_query", "the offset of the key minus the query (each head's bias "
                     "transposed)", BIAS_FORMS, _key_minus_query),
    BiasTableMistake("cpb_linear_coords", "Swin v2's offsets fed to the MLP without the log spacing (8Δ/(S − 1) "
                     "itself)", ("swinv2",), lambda i: _cpb(i, log=False)),
    BiasTableMistake("cpb_no_squash", "Swin v2's MLP output used as the bias without 16·sigmoid", ("swinv2",),
                     lambda i: _cpb(i, squash="none")),
    BiasTableMistake("cpb_sigmoid_without_16", "Swin v2's sigmoid without the factor 16", ("swinv2",),
                     lambda i: _cpb(i, squash="sigmoid")),
    BiasTableMistake("cpb_window_normalised", "Swin v2's offsets divided by the window's side − 1 instead of the "
                     "pretrained window's", ("swinv2",), _window_normalised),
    BiasTableMistake("beit_cls_rows_swapped", "BEiT's CLS→patch and patch→CLS rows exchanged", ("beit",),
                     lambda i: _beit_index_changed(i, _cls_rows_swapped)),
    BiasTableMistake("beit_cls_last", "BEiT's CLS token placed after the patches instead of before them",
                     ("beit",), lambda i: _beit_index_changed(i, _cls_last)),
    BiasTableMistake("beit_no_cls", "BEiT's bias without the CLS token (the Swin rule on the patches alone)",
                     ("beit",), _no_cls),
    BiasTableMistake("beit_resample_align_corners", "BEiT's table resampled with align_corners=True instead of "
                     "half-pixel centres", ("beit",), _align_corners),
)


def _within(candidate: np.ndarray, values: np.ndarray, bound: np.ndarray) -> bool:
    return candidate.shape == values.shape and bool(np.all(np.abs(candidate - values) <= bound))


def identify_bias_table(candidate: object, inputs: BiasTableInputs) -> str | None:
    """The name of the catalogued mistake whose output ``candidate`` matches, or ``None``: ``None`` for a correct
    port (within :func:`bias_table_bound` of the reference, first) and for an output no mistake explains."""
    got = np.asarray(to_numpy(candidate), dtype=np.float64)
    if _within(got, inputs.reference(), bias_table_bound(inputs)):
        return None
    for mistake in BIAS_TABLE_MISTAKES:
        wrong = mistake.compute(inputs) if inputs.form in mistake.forms else None
        if wrong is not None and _within(got, *wrong):
            return mistake.name
    return None
