"""``refpos check rope`` for M-RoPE configs: positions ``(3, ..., T)`` and the catalogue of docs/mrope.md#mistakes.

The reference is :func:`refpos.apply_rope` at the given multi-axis positions. The tolerance is the RoPE
rule (docs/conventions.md#tolerances) at each token's largest position over the three axes: a pair's
angle error grows with the position it reads, and no pair reads a larger one. Catalogue:

* ``mrope_1d_positions``: the candidate equals plain RoPE at one row (t, h or w) or at the token index
  ``0 … T−1`` for every pair: the image tokens were given 1-D positions;
* ``mrope_section_order``: it equals M-RoPE with the sections permuted (e.g. ``(w, h, t)``);
* ``mrope_assignment``: it equals M-RoPE with the other assignment (contiguous for interleaved, or the
  reverse).

The fourth mistake of the page, Qwen2.5-VL's temporal spacing ignored, is in the position ids, not in the
rotation: ``refpos check`` rotates at the ids it is given and cannot see it; compare the ids with
:func:`refpos.models.mm_positions.mm_position_ids` instead.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.catalogue import known
from refpos.check.problem import np_ns, pair_magnitude
from refpos.golden import tolerance as tol
from refpos.golden.compare import compare


def _apply(x: np.ndarray, positions: np.ndarray, rope: Any, seq_len: int) -> np.ndarray:
    import refpos

    return np.asarray(to_numpy(refpos.apply_rope(x, positions, rope, seq_len=seq_len)))


def _mutants(x: np.ndarray, positions: np.ndarray, rope: Any, seq_len: int,
             first_token: int = 0) -> list[tuple[str, str, np.ndarray]]:
    """(id, evidence, output) of every applicable M-RoPE mistake; ``x`` holds the tokens from ``first_token`` on."""
    from refpos.rope.mrope import check_sections

    plain = dataclasses.replace(rope, mrope_section=None, mrope_interleaved=False)
    out = []
    token_index = np.broadcast_to(np.arange(first_token, first_token + x.shape[-2]), positions.shape[1:])
    for name, rows in (("t row", positions[0]), ("h row", positions[1]), ("w row", positions[2]),
                       ("token index 0 … T−1", token_index)):
        out.append(("mrope_1d_positions", f"equals plain RoPE at the {name} for every pair: the image tokens got "
                    "1-D positions (each pair must read its own axis)",
                    _apply(x, rows, plain, seq_len)))
    seen = {rope.mrope_section}
    for order in itertools.permutations(range(3)):
        sections = tuple(rope.mrope_section[i] for i in order)
        if sections in seen:
            continue
        seen.add(sections)
        try:
            check_sections(sections, rope.n_pairs, rope.mrope_interleaved)
        except ValueError:
            continue
        names = "".join("thw"[i] for i in order)
        out.append(("mrope_section_order", f"equals M-RoPE with the sections in the order {names} "
                    f"({list(sections)} instead of {list(rope.mrope_section)})",
                    _apply(x, positions, dataclasses.replace(rope, mrope_section=sections), seq_len)))
    try:
        other = dataclasses.replace(rope, mrope_interleaved=not rope.mrope_interleaved)
    except ValueError:
        other = None
    if other is not None:
        kinds = ("contiguous", "interleaved")
        out.append(("mrope_assignment", f"equals M-RoPE with the {kinds[other.mrope_interleaved]} assignment instead "
                    f"of the {kinds[rope.mrope_interleaved]} one (which frequency reads which axis, "
                    "docs/mrope.md#the-math)", _apply(x, positions, other, seq_len)))
    return out


@dataclasses.dataclass
class MropeProblem:
    """The reference of an M-RoPE check and its tolerance."""

    x: np.ndarray  # (..., T, D)
    positions: np.ndarray  # (3, ..., T)
    per_token: np.ndarray  # (..., T): the largest position any pair of the token reads
    rope: Any
    seq_len: int
    dtype: str
    inv_freq: np.ndarray
    reference: np.ndarray
    magnitude: np.ndarray  # A·‖pair‖ on rotated channels, |x| elsewhere
    atol: np.ndarray


def mrope_problem(x: np.ndarray, positions: np.ndarray, rope: Any, seq_len: int | None, dtype: str) -> MropeProblem:
    """The reference ``apply_rope(x, positions, rope)`` for positions ``(3, ..., T)`` (or ``(T,)``: t = h = w).

    Raises ``ValueError`` when the positions do not fit ``x``.
    """
    import refpos
    from refpos.rope.forms import pair_channels
    from refpos.rope.mrope import axis_positions

    positions = np.asarray(to_numpy(axis_positions(positions, xp=np_ns())))
    per_token = np.broadcast_to(positions.max(axis=0), x.shape[:-1])  # (..., T)
    length = int(positions.max()) + 1 if seq_len is None and positions.size else seq_len
    inv_freq, factor = refpos.rope_frequencies(rope, seq_len=length, xp=np_ns())
    inv_freq = np.asarray(to_numpy(inv_freq))
    reference = _apply(x, positions, rope, length)
    # A·‖pair‖ on rotated channels, |x| on pass-through ones, as for 1-D RoPE; (..., T, D) as the reference
    magnitude = np.broadcast_to(pair_magnitude(x, pair_channels(rope), float(factor)), reference.shape)
    atol = np.asarray(tol.rope_tolerance(dtype, per_token, inv_freq, reference=reference, magnitude=magnitude))
    return MropeProblem(x, positions, per_token, rope, length, dtype, inv_freq, reference, magnitude, atol)


def diagnose_mrope(pb: MropeProblem, candidate: np.ndarray, first_token: int = 0) -> list[dict[str, Any]]:
    """Every M-RoPE mistake the candidate matches, within the tolerance the reference comparison used.

    ``first_token``: the token index of the first row of ``pb.x`` (a window of the rows, as
    ``refpos check`` diagnoses a large candidate)."""
    found = []
    for mid, evidence, mutant in _mutants(pb.x, pb.positions, pb.rope, pb.seq_len, first_token):
        if np.array_equal(mutant, pb.reference):
            continue
        limit = np.asarray(tol.rope_tolerance(pb.dtype, pb.per_token, pb.inv_freq, reference=mutant,
                                              magnitude=np.maximum(pb.magnitude, np.abs(mutant))))
        fit = compare(candidate, mutant, atol=limit)
        if fit.ok:
            found.append({"id": known(mid), "max_abs_error": fit.max_abs_error,
                          "evidence": f"{evidence}; max |candidate − mutant| = {fit.max_abs_error:.3g}"})
    return found
