"""The catalogued mistakes of decomposed relative positions, one :class:`DecomposedMistake` each, and
:func:`identify_decomposed`.

A mistake is a wrong way to compute the terms ``q_yx·R_h[y, y'] + q_yx·R_w[x, x']`` from the same inputs
(:class:`DecomposedInputs`); ``applies`` says when it differs from the reference at all (the q/k ratio only
matters for grids of different sizes, the resampling only for a table of another length).
:func:`identify_decomposed` names the mistake a candidate made, or nothing when it is within what a correct
float32 port may differ by (:func:`refpos.encodings.decomposed.decomposed_error_bound`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from refpos.backend import to_numpy
from refpos.encodings.decomposed import decomposed_error_bound, decomposed_rel_pos_index, decomposed_rel_pos_terms
from refpos.encodings.resample import interpolate
from refpos.validation import check_choice

#: what :func:`identify_decomposed` answers for a wrong output no catalogued mistake explains
UNRECOGNISED = "decomposed_unrecognised"
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24}


@dataclasses.dataclass(frozen=True)
class DecomposedInputs:
    """``q`` ``(..., q_h·q_w, C)``, the tables ``(L_h, C)`` and ``(L_w, C)``, the query and key grids."""

    q: np.ndarray
    rel_pos_h: np.ndarray
    rel_pos_w: np.ndarray
    q_size: tuple[int, int]
    k_size: tuple[int, int]

    def terms(self, q: np.ndarray | None = None, rel_pos_h: np.ndarray | None = None,
              rel_pos_w: np.ndarray | None = None) -> np.ndarray:
        """The reference terms ``(..., q_h·q_w, k_h·k_w)`` (of other arrays where given)."""
        out = to_numpy(decomposed_rel_pos_terms(self.q if q is None else q,
                                                self.rel_pos_h if rel_pos_h is None else rel_pos_h,
                                                self.rel_pos_w if rel_pos_w is None else rel_pos_w,
                                                self.q_size, self.k_size))
        return out.reshape(*out.shape[:-4], self.q_size[0] * self.q_size[1], self.k_size[0] * self.k_size[1])

    def lengths_match(self) -> bool:
        """Both tables already have ``2·max(q, k) − 1`` rows (no resampling)."""
        return all(table.shape[0] == 2 * max(a, b) - 1 for table, a, b in
                   ((self.rel_pos_h, self.q_size[0], self.k_size[0]), (self.rel_pos_w, self.q_size[1], self.k_size[1])))


@dataclasses.dataclass(frozen=True)
class DecomposedMistake:
    """A wrong way to compute decomposed relative positions."""

    name: str
    description: str
    compute: Callable[[DecomposedInputs], np.ndarray]
    applies: Callable[[DecomposedInputs], bool]


def _with_rows(inputs: DecomposedInputs, rows: Callable[[np.ndarray, int, int], np.ndarray]) -> np.ndarray:
    """The terms with each axis's ``(q, k, C)`` rows given by ``rows(table, q, k)``."""
    (qh, qw), (kh, kw) = inputs.q_size, inputs.k_size
    table_h, table_w = rows(inputs.rel_pos_h, qh, kh), rows(inputs.rel_pos_w, qw, kw)
    grid = inputs.q.reshape(*inputs.q.shape[:-2], qh, qw, 1, inputs.q.shape[-1])
    rel_h = np.sum(grid * table_h[:, None], axis=-1)
    rel_w = np.sum(grid * table_w[None], axis=-1)
    out = rel_h[..., :, None] + rel_w[..., None, :]
    return out.reshape(*out.shape[:-4], qh * qw, kh * kw)


def _resized(table: np.ndarray, q: int, k: int, **options: object) -> np.ndarray:
    return to_numpy(interpolate(table.T, 2 * max(q, k) - 1, mode="linear", **options)).T


def _unscaled_rows(table: np.ndarray, q: int, k: int) -> np.ndarray:
    index = np.arange(q)[:, None] - np.arange(k)[None, :] + (k - 1)
    return _resized(table, q, k)[index]


def _unresampled_rows(table: np.ndarray, q: int, k: int) -> np.ndarray:
    return table[to_numpy(decomposed_rel_pos_index(q, k, xp=np))]


def _mirrored_rows(table: np.ndarray, q: int, k: int) -> np.ndarray:
    return _resized(table, q, k)[2 * max(q, k) - 2 - to_numpy(decomposed_rel_pos_index(q, k, xp=np))]


def _align_corners_rows(table: np.ndarray, q: int, k: int) -> np.ndarray:
    return _resized(table, q, k, align_corners=True)[to_numpy(decomposed_rel_pos_index(q, k, xp=np))]


def _fits(inputs: DecomposedInputs) -> bool:
    """An unresampled table is long enough for every index (else the wrong code raises instead of computing)."""
    return all(table.shape[0] >= 2 * max(a, b) - 1 for table, a, b in
               ((inputs.rel_pos_h, inputs.q_size[0], inputs.k_size[0]),
                (inputs.rel_pos_w, inputs.q_size[1], inputs.k_size[1])))


#: every catalogued mistake, by name
DECOMPOSED_MISTAKES: dict[str, DecomposedMistake] = {m.name: m for m in (
    DecomposedMistake("decomposed_ratio_missing", "the coordinates not scaled to the longer grid: row i − j + k − 1",
                      lambda i: _with_rows(i, _unscaled_rows), lambda i: i.q_size != i.k_size),
    DecomposedMistake("decomposed_no_resample", "the table read as it is, not resampled to 2·max(q, k) − 1 rows",
                      lambda i: _with_rows(i, _unresampled_rows), lambda i: not i.lengths_match() and _fits(i)),
    DecomposedMistake("decomposed_axes_swapped", "rel_pos_h used along the width and rel_pos_w along the height",
                      lambda i: i.terms(rel_pos_h=i.rel_pos_w, rel_pos_w=i.rel_pos_h),
                      lambda i: i.q_size[0] == i.q_size[1] and i.k_size[0] == i.k_size[1]
                      and i.rel_pos_h.shape == i.rel_pos_w.shape),
    DecomposedMistake("decomposed_sign_flipped", "the offset taken key minus query: the table read mirrored",
                      lambda i: _with_rows(i, _mirrored_rows), lambda i: True),
    DecomposedMistake("decomposed_align_corners", "the table resampled with align_corners=True",
                      lambda i: _with_rows(i, _align_corners_rows), lambda i: not i.lengths_match()),
    DecomposedMistake("decomposed_scaled_query", "the terms of the query already scaled by C^-1/2 (SAM and ViTDet "
                      "take the query before the softmax scale)", lambda i: i.terms(q=i.q / np.sqrt(i.q.shape[-1])),
                      lambda i: i.q.shape[-1] > 1),
)}


def decomposed_tolerance(inputs: DecomposedInputs, dtype: str = "float32") -> float:
    """What a correct port computing in ``dtype`` may differ by."""
    u = UNIT_ROUNDOFF[check_choice("dtype", dtype, tuple(UNIT_ROUNDOFF))]
    return decomposed_error_bound(inputs.q, inputs.rel_pos_h, inputs.rel_pos_w, inputs.q_size, inputs.k_size,
                                  unit_roundoff=u)


def identify_decomposed(candidate: np.ndarray, inputs: DecomposedInputs, *, dtype: str = "float32") -> str | None:
    """The name of the catalogued mistake the candidate terms ``(..., q_h·q_w, k_h·k_w)`` made, ``None`` when
    correct for ``dtype``, :data:`UNRECOGNISED` when wrong in a way the catalogue does not hold."""
    candidate = np.asarray(candidate, dtype=np.float64)
    tolerance = decomposed_tolerance(inputs, dtype)
    reference = inputs.terms()
    if candidate.shape == reference.shape and float(np.max(np.abs(candidate - reference))) <= tolerance:
        return None
    for mistake in DECOMPOSED_MISTAKES.values():
        if mistake.applies(inputs):
            wrong = mistake.compute(inputs)
            if wrong.shape == candidate.shape and float(np.max(np.abs(candidate - wrong))) <= tolerance:
                return mistake.name
    return UNRECOGNISED
