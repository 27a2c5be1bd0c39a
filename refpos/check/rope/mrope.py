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
import threading
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.rope.mistakes import Context, RopeCall
from refpos.check.rope.problem import pair_magnitude
from refpos.check.rope.rope_mistakes import ROPE_MISTAKES
from refpos.check.shared.arrays import np_ns
from refpos.check.shared.catalogue import family, known
from refpos.golden.exact import tolerance as tol
from refpos.golden.exact.compare import compare


def _apply(x: np.ndarray, positions: np.ndarray, rope: Any, seq_len: int) -> np.ndarray:
    import refpos

    return np.asarray(to_numpy(refpos.apply_rope(x, positions, rope, seq_len=seq_len)))


def _mutants(x: np.ndarray, positions: np.ndarray, rope: Any, seq_len: int,
             first_token: int = 0) -> list[tuple[str, str, np.ndarray]]:
    """(id, evidence, output) of every variant of the catalogue's M-RoPE mistakes
    (:data:`refpos.check.rope.rope_mistakes.ROPE_MISTAKES`); ``x`` holds the tokens from ``first_token`` on."""
    call = RopeCall.of(rope, positions, seq_len)
    context = Context(np.broadcast_to(np.arange(first_token, first_token + x.shape[-2]), positions.shape[1:]), 0, 0)
    out = []
    for entry in family("mrope"):
        mistake = ROPE_MISTAKES.get(entry.id)
        if mistake is not None and entry.diagnosed:
            out += [(mistake.id, variant.evidence, variant.call.run(x)) for variant in mistake.variants(call, context)]
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


class TokenKinds:
    """The error of an M-RoPE check by kind of token: text (``t = h = w``) and vision (the axes differ).

    A wrong port often rotates the text right and the image wrong (1-D positions, a section order): the
    profile by position mixes both, this one separates them. Feed :meth:`add` every block of the check
    (any order, any thread); :meth:`profile` is one entry per kind that occurs.
    """

    KINDS = ("text", "vision")

    def __init__(self, axes_rows: np.ndarray) -> None:
        self.vision = ~((axes_rows[0] == axes_rows[1]) & (axes_rows[1] == axes_rows[2]))  # (L, T)
        self.per_token = axes_rows.max(axis=0)  # (L, T)
        self.stats = {kind: {"tokens": 0, "tokens_outside": 0, "max_abs_error": 0.0, "max_ratio": 0.0,
                             "first_bad_position": None} for kind in self.KINDS}
        self.lock = threading.Lock()

    def add(self, lead: slice, rows: slice, candidate: np.ndarray, reference: np.ndarray, atol: np.ndarray) -> None:
        """One block ``(k, rows, D)`` of the candidate (float64), its reference and tolerance."""
        from refpos.check.shared.stream import block_error

        err = block_error(candidate, reference)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((err == 0) & (atol == 0), 0.0, err / atol)
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
        row_err, row_ratio = err.max(axis=-1), ratio.max(axis=-1)  # (k, rows)
        vision, at = self.vision[lead, rows], self.per_token[lead, rows]
        with self.lock:
            for kind, mask in zip(self.KINDS, (~vision, vision), strict=True):
                if not mask.any():
                    continue
                s, bad = self.stats[kind], mask & (row_ratio > 1)
                s["tokens"] += int(mask.sum())
                s["tokens_outside"] += int(bad.sum())
                s["max_abs_error"] = max(s["max_abs_error"], float(row_err[mask].max()))
                s["max_ratio"] = max(s["max_ratio"], float(row_ratio[mask].max()))
                if bad.any():
                    first = int(at[bad].min())
                    s["first_bad_position"] = first if s["first_bad_position"] is None else min(
                        first, s["first_bad_position"])

    def profile(self) -> dict[str, dict[str, Any]]:
        return {kind: dict(s) for kind, s in self.stats.items() if s["tokens"]}


def token_kinds_text(profile: dict[str, dict[str, Any]]) -> str:
    """One clause per kind: ``text tokens: 8 of 8 within the tolerance; vision tokens: 24 of 24 outside …``."""
    parts = []
    for kind, s in profile.items():
        state = (f"{s['tokens']} within the tolerance" if not s["tokens_outside"] else
                 f"{s['tokens_outside']} of {s['tokens']} outside (from position {s['first_bad_position']})")
        parts.append(f"{kind} tokens: {state}, max error {s['max_abs_error']:.3g} ({s['max_ratio']:.3g}×)")
    return "; ".join(parts)
