r"""Multi-axis RoPE (M-RoPE): each frequency pair reads one of three positions, temporal, height, width.

A token of a vision-language model (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4.1V) has three positions
:math:`(p_t, p_h, p_w)`: an image patch its frame, row and column, a text token the same number three
times. The frequencies :math:`\omega_j` are those of 1-D RoPE (any ``rope_type``); each pair ``j`` reads
the position of its axis :math:`a(j) \in \{t, h, w\}`:

.. math:: \varphi_{j} = p_{a(j)}\,\omega_j, \qquad j = 0, \dots, m - 1 ,

and is rotated by :math:`\varphi_j` as in 1-D RoPE (same layout, placement, attention factor). The
**sections** :math:`(s_t, s_h, s_w)`, :math:`s_t + s_h + s_w = m`, say how many pairs each axis gets, the
**assignment** which ones:

* ``contiguous`` (``mrope_interleaved=False``; Qwen2-VL, Qwen2.5-VL, Qwen2.5-Omni, GLM-4.1V): the first
  :math:`s_t` pairs read ``t``, the next :math:`s_h` read ``h``, the last :math:`s_w` read ``w``;
* ``interleaved`` (``mrope_interleaved=True``; Qwen3-VL, Qwen3.5, Qwen3-Omni): pairs go round-robin
  ``t, h, w, t, h, w, …``: pair ``j`` reads ``h`` when :math:`j \equiv 1 \pmod 3` and :math:`j < 3 s_h`,
  ``w`` when :math:`j \equiv 2 \pmod 3` and :math:`j < 3 s_w`, ``t`` otherwise (so the tail past the
  round-robin is ``t``);
* ``hw_alternating`` (ERNIE-4.5-VL): ``h`` and ``w`` alternate over the first :math:`s_h + s_w` pairs
  (even ``j`` reads ``h``, odd ``j`` reads ``w``; :math:`s_h = s_w`), the last :math:`s_t` pairs read ``t``.

The assignments are the records of :data:`ASSIGNMENTS`; ``mrope_interleaved`` (a bool) names the first two.

Which frequency reads which axis, for the sections of the real models (64 pairs, head size 128)::

    pair j            0         15 16                  39 40                  63
    contiguous        t t t ... t  h h h ........... h  w w w ........... w      Qwen2-VL [16, 24, 24]
    interleaved       t h w t h w t h w ....... t h w  t t t t                  Qwen3-VL [24, 20, 20]
                      0 1 2 3 4 5                 59  60    63
    hw_alternating    h w h w h w ............... h w  t t t ........... t      ERNIE-4.5-VL (t, h, w) = (20, 22, 22)
                      0 1 2 3                        43 44                 63
    fast ω_j  <-------------------------------------------------------->  slow ω_j

Contiguous bands give the temporal axis only the fastest frequencies and the width axis only the
slowest; the round-robin gives every axis the whole range. In the ``half`` layout pair ``j`` is the
channels ``(j, j + m)``, so the cos table is the band pattern twice; in ``interleaved`` it is channels
``(2j, 2j + 1)``.

**A fourth row** (ggml's ``rope_multi``, llama.cpp): sections :math:`(s_t, s_h, s_w, s_e)` and positions
with four rows ``t, h, w, e``. Contiguous: a fourth band of :math:`s_e` pairs reads ``e``. Interleaved:
pair ``j`` reads ``h`` and ``w`` as above and ``t`` when :math:`j \equiv 0 \pmod 3` and :math:`j < 3 s_t`;
every other pair reads ``e`` (not ``t``). With Qwen3-VL's ``[24, 20, 20, 0]`` that is pairs 61 and 62:
equal to the three-row rule when ``e = t`` (llama.cpp's text tokens), different when llama.cpp sets
``e = 0`` for image tokens.

When the three positions agree (text), :math:`\varphi_j = p\,\omega_j` for every ``j``: M-RoPE is 1-D
RoPE. That is why 1-D positions are accepted and mean :math:`p_t = p_h = p_w`.

Worked example: head size 12 (``m = 6`` pairs), θ = 10000, sections ``(2, 2, 2)``, a patch at
``(t, h, w) = (2, 5, 7)``. Contiguous axes are ``t t h h w w``, angles
:math:`(2\omega_0, 2\omega_1, 5\omega_2, 5\omega_3, 7\omega_4, 7\omega_5)`; interleaved axes are
``t h w t h w``, angles :math:`(2\omega_0, 5\omega_1, 7\omega_2, 2\omega_3, 5\omega_4, 7\omega_5)`, with
:math:`\omega_j = 10000^{-j/6}`.

Examples
--------
>>> import numpy as np
>>> pair_axes((2, 2, 2), interleaved=False), pair_axes((2, 2, 2), interleaved=True)
((0, 0, 1, 1, 2, 2), (0, 1, 2, 0, 1, 2))
>>> pair_axes((2, 2, 2), "hw_alternating")  # ERNIE-4.5-VL: h w h w, then t t
(1, 2, 1, 2, 0, 0)
>>> omega = 10000.0 ** (-np.arange(6) / 6)
>>> angles = mrope_angles(np.array([[2], [5], [7]]), omega, (2, 2, 2), interleaved=True)  # (T=1, m=6)
>>> np.round(angles[0] / omega, 12).tolist()
[2.0, 5.0, 7.0, 2.0, 5.0, 7.0]
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.validation import as_positions

#: the position axes, in the order of ``mrope_section`` and of the leading axis of positions; ``e`` is the
#: fourth row of ggml's rope_multi (four sections)
AXES = ("t", "h", "w")
AXES_FOUR = ("t", "h", "w", "e")


@dataclass(frozen=True)
class Assignment:
    """Which pairs read which axis: one record per scheme a model family's code uses.

    ``axes(sections)`` gives :math:`a(j)` for every pair (0 = t, 1 = h, 2 = w, 3 = e); ``fits(sections, m)``
    says why sections cannot be assigned so (``None``: they can); ``source`` names the code it was read from.
    """

    name: str
    axes: Callable[[tuple[int, ...]], tuple[int, ...]]
    fits: Callable[[tuple[int, ...], int], str | None]
    source: str


def _contiguous_axes(sections: tuple[int, ...]) -> tuple[int, ...]:
    r"""Bands in order: :math:`a(j) = 0` for :math:`j < s_t`, 1 for :math:`s_t \le j < s_t + s_h`, and so on."""
    return tuple(axis for axis, count in enumerate(sections) for _ in range(count))


def _round_robin_axes(sections: tuple[int, ...]) -> tuple[int, ...]:
    r""":math:`a(j) = j \bmod 3` when :math:`j < 3\,s_{j \bmod 3}`; the pairs the round-robin leaves read ``t``
    with three sections and ``e`` with four (ggml's rope_multi)."""
    rest = 3 if len(sections) == len(AXES_FOUR) else 0  # the pairs the round-robin leaves: e, or t
    axes = []
    for j in range(sum(sections)):
        axis = j % 3
        axes.append(axis if j < 3 * sections[axis] else rest)
    return tuple(axes)


def _round_robin_fits(sections: tuple[int, ...], n_pairs: int) -> str | None:
    if len(sections) == len(AXES) and (3 * sections[1] > n_pairs + 1 or 3 * sections[2] > n_pairs):
        return (f"h reads pairs 1, 4, … below 3·s_h and w pairs 2, 5, … below 3·s_w, which needs 3·s_h <= "
                f"{n_pairs + 1} and 3·s_w <= {n_pairs}")
    return None


def _hw_alternating_axes(sections: tuple[int, ...]) -> tuple[int, ...]:
    r""":math:`a(j) = 1 + (j \bmod 2)` for :math:`j < s_h + s_w` (h on even pairs, w on odd ones), else 0."""
    s_t, s_h, s_w = sections
    return tuple(1 + j % 2 for j in range(s_h + s_w)) + (0,) * s_t


def _hw_alternating_fits(sections: tuple[int, ...], n_pairs: int) -> str | None:
    if len(sections) != len(AXES):
        return "h and w alternate over three axes t, h, w (no fourth row)"
    if sections[1] != sections[2]:
        return "h and w alternate pair by pair, which needs s_h = s_w"
    return None


#: the assignments, by name (docs/mrope.md#the-math)
ASSIGNMENTS: dict[str, Assignment] = {a.name: a for a in (
    Assignment("contiguous", _contiguous_axes, lambda sections, m: None,
               "qwen2_vl/modeling_qwen2_vl.py: Qwen2VLRotaryEmbedding.recomposition_frequencies"),
    Assignment("interleaved", _round_robin_axes, _round_robin_fits,
               "qwen3_vl/modeling_qwen3_vl.py: Qwen3VLTextRotaryEmbedding.recomposition_frequencies"),
    Assignment("hw_alternating", _hw_alternating_axes, _hw_alternating_fits,
               "ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py: Ernie4_5_VLMoeTextRotaryEmbedding "
               "(compute_default_rope_parameters, recomposition_frequencies)"),
)}


def assignment_name(assignment: Any) -> str:
    """The name of an assignment given as a name of :data:`ASSIGNMENTS` or as ``mrope_interleaved`` (a bool:
    True is ``"interleaved"``, False ``"contiguous"``)."""
    if isinstance(assignment, bool):
        return "interleaved" if assignment else "contiguous"
    if not isinstance(assignment, str) or assignment not in ASSIGNMENTS:
        raise ValueError(f"mrope_assignment must be one of {sorted(ASSIGNMENTS)} (or mrope_interleaved a bool), "
                         f"got {assignment!r}")
    return assignment


def check_sections(sections: Any, n_pairs: int, interleaved: bool | str) -> tuple[int, ...] | None:
    """Validate ``mrope_section`` against the pair count ``m``; the sections as a tuple of 3 ints (rows t, h, w)
    or 4 (t, h, w, e) (``None``: 1-D RoPE, where the assignment must be the default, contiguous).

    ``interleaved`` is the assignment: a name of :data:`ASSIGNMENTS`, or ``mrope_interleaved`` (a bool).

    Raises
    ------
    TypeError
        ``sections`` is not a sequence of ints.
    ValueError
        An assignment without sections, not 3 or 4 entries, a negative entry, a sum other than ``n_pairs``,
        or sections the assignment cannot place (interleaved, three sections: an ``h`` or ``w`` section too
        long for the round-robin, ``3·s_h ≤ m + 1`` and ``3·s_w ≤ m`` are needed; hw_alternating: four
        sections, or ``s_h ≠ s_w``).
    """
    name = assignment_name(interleaved)
    if sections is None:
        if name != "contiguous":
            raise ValueError(f"the {name} M-RoPE assignment needs mrope_section (pairs per axis t, h, w)")
        return None
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Sequence):
        raise TypeError(f"mrope_section must be a list of 3 ints (pairs for t, h, w), got {type(sections).__name__}")
    if len(sections) not in (len(AXES), len(AXES_FOUR)):
        raise ValueError(f"mrope_section must have 3 entries (pairs for t, h, w) or 4 (t, h, w and ggml's e), got "
                         f"{len(sections)}: {list(sections)}")
    for axis, value in zip(AXES_FOUR, sections, strict=False):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"mrope_section[{axis}] must be an int, got {type(value).__name__} {value!r}")
        if value < 0:
            raise ValueError(f"mrope_section[{axis}] must be >= 0, got {value}")
    out = tuple(int(v) for v in sections)
    if sum(out) != n_pairs:
        raise ValueError(f"mrope_section {list(out)} sums to {sum(out)}, but the rotation has {n_pairs} "
                         f"frequency pairs (rotary_dim/2): the sections must sum to {n_pairs}")
    why = ASSIGNMENTS[name].fits(out, n_pairs)
    if why is not None:
        axes = ", ".join(AXES_FOUR[: len(out)])
        raise ValueError(f"mrope_section {list(out)} ({axes}) cannot be assigned {name} over {n_pairs} pairs: {why}")
    return out


def pair_axes(sections: Sequence[int], interleaved: bool | str) -> tuple[int, ...]:
    r"""The axis each pair reads, ``a(j)`` for ``j = 0 … m-1`` (0 = t, 1 = h, 2 = w, 3 = e).

    ``interleaved`` is the assignment: a name of :data:`ASSIGNMENTS`, or ``mrope_interleaved`` (a bool).

    Notes
    -----
    Contiguous: the sections are bands in order, :math:`a(j) = 0` for :math:`j < s_t`, 1 for
    :math:`s_t \le j < s_t + s_h`, and so on. Interleaved: :math:`a(j) = j \bmod 3` when
    :math:`j < 3\,s_{j \bmod 3}`; otherwise ``t`` with three sections and ``e`` with four (ggml's rope_multi).
    hw_alternating: :math:`a(j) = 1 + (j \bmod 2)` for :math:`j < s_h + s_w`, else 0.
    """
    return ASSIGNMENTS[assignment_name(interleaved)].axes(tuple(sections))


def axis_positions(positions: Any, *, rows: int = len(AXES), xp: Any = None) -> Array:
    """Positions for M-RoPE as an int64 array ``(rows, ..., T)``: rows t, h, w (and e with four sections).

    ``(T,)`` (text) becomes ``rows`` equal rows; ``(rows, ..., T)`` is taken as it is (transformers'
    ``position_ids`` of Qwen2-VL and its successors, ggml's four rows). Any other shape is an error: a batch
    of text positions ``(B, T)`` is ambiguous here and must be given as ``(rows, B, T)``.
    """
    positions = as_positions(positions, xp=xp)
    ns = array_namespace(positions)
    names = ", ".join((AXES_FOUR if rows == len(AXES_FOUR) else AXES)[:rows])
    if positions.ndim == 1:
        return ns.broadcast_to(positions[None, :], (rows, positions.shape[0]))  # (rows, T)
    if positions.ndim >= 2 and positions.shape[0] == rows:
        return positions
    raise ValueError(f"positions for M-RoPE (mrope_section set) must have shape (T,) (text: every row equal) or "
                     f"({rows}, ..., T) with rows {names}; got shape {tuple(positions.shape)} (leading axis "
                     f"{positions.shape[0] if positions.ndim else 'none'}, not {rows})")


def rope_positions(positions: Any, sections: Sequence[int] | None, *, xp: Any = None) -> Array:
    """Validated int64 positions of a RoPE: ``(..., T)``, or ``(rows, ..., T)`` (:func:`axis_positions`) with
    sections, one row per section."""
    if sections is None:
        return as_positions(positions, xp=xp)
    return axis_positions(positions, rows=len(sections), xp=xp)


def token_positions(positions: Array, sections: Sequence[int] | None) -> Array:
    """The per-token part of validated positions, ``(..., T)``: M-RoPE's t row (every row has its shape)."""
    return positions if sections is None else positions[0, ...]


def mrope_cos_sin(positions: Array, inv_freq: Array, attention_factor: float, sections: Sequence[int], *,
                  interleaved: bool | str) -> tuple[Array, Array]:
    r"""``A·cos φ`` and ``A·sin φ`` per pair, ``(..., T, m)``, :math:`\varphi_j = p_{a(j)}\,\omega_j`
    (``interleaved``: the assignment, as in :func:`pair_axes`)."""
    xp = array_namespace(inv_freq)
    angles = mrope_angles(positions, inv_freq, sections, interleaved=interleaved)
    return attention_factor * xp.cos(angles), attention_factor * xp.sin(angles)


def mrope_angles(positions: Array, inv_freq: Array, sections: Sequence[int], *, interleaved: bool | str) -> Array:
    r"""Angles :math:`\varphi_j = p_{a(j)}\,\omega_j` per pair, ``(..., T, m)`` float64.

    Parameters
    ----------
    positions : int array ``(3, ..., T)``
        Rows t, h, w (see :func:`axis_positions`).
    inv_freq : float64 array ``(m,)``
    sections : (s_t, s_h, s_w)
    interleaved : bool or str
        The assignment: ``mrope_interleaved``, or a name of :data:`ASSIGNMENTS`.

    Notes
    -----
    The product is elementwise in float64, the same product 1-D RoPE forms: with equal rows the angles
    are bit for bit those of 1-D RoPE.
    """
    xp = array_namespace(inv_freq)
    axes = xp.asarray(pair_axes(sections, interleaved), dtype=xp.int64)  # (m,)
    per_pair = xp.take(positions, axes, axis=0)  # (m, ..., T): pair j's row a(j)
    per_pair = xp.moveaxis(per_pair, 0, -1)  # (..., T, m)
    return xp.astype(per_pair, xp.float64) * inv_freq  # φ_j = p_{a(j)} ω_j
