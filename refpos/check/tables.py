"""Name the mistake in ALiBi slopes/biases, T5 and DeBERTa buckets and sinusoid tables (docs/diagnosis.md).

The ids are those of the families ``alibi``, ``t5``, ``deberta`` and ``sinusoid`` of the one catalogue of known mistakes
(:mod:`refpos.check.catalogue`); docs/diagnosis.md documents each.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.catalogue import known
from refpos.check.problem import np_ns
from refpos.encodings.alibi import FORMS as ALIBI_FORMS
from refpos.golden.compare import compare
from refpos.pairs import pair_channels

Match = dict[str, Any]


def _np(x: Any) -> np.ndarray:
    return np.asarray(to_numpy(x))


def _try(candidate: np.ndarray, atol: Any, mutants: list[tuple[str, str, Callable[[], np.ndarray]]],
         reference: np.ndarray) -> list[Match]:
    found: list[Match] = []
    for mid, evidence, build in mutants:
        try:
            mutant = np.asarray(build())
        except (ValueError, TypeError):
            continue
        if mutant.shape != candidate.shape or np.array_equal(mutant, reference):
            continue
        fit = compare(candidate, mutant, atol=atol)
        if fit.ok:
            found.append({"id": known(mid), "max_abs_error": fit.max_abs_error,
                          "evidence": f"{evidence}; max |candidate − mutant| = {fit.max_abs_error:.3g}"})
    return found


# ------------------------------------------------------------------------------------------ ALiBi
def naive_slopes(n: int) -> np.ndarray:
    """``2^(−8h/n)``, h = 1…n, for every n: right only for powers of two (ml-explore/mlx#343)."""
    return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)


def diagnose_alibi(candidate: np.ndarray, n: int, *, q_len: int | None = None, k_len: int | None = None,
                   form: str = "causal", atol: Any, head_dim: int | None = None) -> list[Match]:
    """ALiBi catalogue for slopes ``(n,)`` or a bias ``(n, Tq, Tk)``."""
    import refpos

    ref_slopes = _np(refpos.encodings.alibi_slopes(n, xp=np_ns()))
    slope_mutants: list[tuple[str, str, np.ndarray]] = [
        ("alibi_closed_form_slopes", f"slopes equal the naive closed form 2^(−8h/{n}) for every head (right only "
         "for a power-of-two head count; the official recurrence interleaves a second geometric group)",
         naive_slopes(n)),
        ("alibi_slope_off_by_one", f"slopes equal 2^(−8h/{n}) counted from h = 0: every slope × 2^(8/{n}) "
         "(head 0 gets slope 1)", ref_slopes * 2.0 ** (8.0 / n)),
        ("alibi_sorted_slopes", "slopes equal the reference sorted in decreasing order (the official order "
         "appends the second group unsorted)", np.sort(ref_slopes)[::-1]),
    ]
    if head_dim:
        slope_mutants.append(("alibi_bias_scaled", f"slopes equal the reference divided by √{head_dim}: the bias "
                              "was added before the 1/√d scale (Falcon order)", ref_slopes / math.sqrt(head_dim)))
    if candidate.ndim == 1:
        return _try(candidate, atol, [(m, e, (lambda s=s: s)) for m, e, s in slope_mutants], ref_slopes)
    reference = _np(refpos.encodings.alibi_bias(n, q_len, k_len, form=form, xp=np_ns()))

    def bias_of(slopes: np.ndarray, bias_form: str) -> np.ndarray:
        base = _np(refpos.encodings.alibi_bias(1, q_len, k_len, form=bias_form, xp=np_ns()))[0] / ref_slopes_one
        return slopes[:, None, None] * base

    ref_slopes_one = float(_np(refpos.encodings.alibi_slopes(1, xp=np_ns()))[0])
    mutants = [(m, e, (lambda s=s: bias_of(s, form))) for m, e, s in slope_mutants]
    for other in ALIBI_FORMS:
        if other != form:
            mutants.append(("alibi_bias_form", f"equals the {other!r} bias form instead of {form!r} (equal "
                            "probabilities only under a causal mask)", lambda o=other: bias_of(ref_slopes, o)))
    return _try(candidate, atol, mutants, reference)


# --------------------------------------------------------------------------------------------- T5
def diagnose_t5(candidate: np.ndarray, rel: np.ndarray, *, bidirectional: bool, num_buckets: int,
                max_distance: int) -> list[Match]:
    """T5 catalogue for integer buckets of relative positions ``rel`` (memory − query)."""
    import refpos

    def bucket(r: np.ndarray, bidi: bool) -> np.ndarray:
        return _np(refpos.encodings.t5_bucket(np_ns().asarray(r), bidirectional=bidi, num_buckets=num_buckets,
                                              max_distance=max_distance))

    reference = bucket(rel, bidirectional)
    mutants = [
        ("t5_sign_flip", "equals the buckets of query − memory instead of memory − query (bidirectional: the "
         "transpose; causal: every past key in bucket 0)", lambda: bucket(-rel, bidirectional)),
        ("t5_direction", f"equals the {'causal' if bidirectional else 'bidirectional'} buckets: the "
         f"{'encoder' if bidirectional else 'decoder'} was run with bidirectional={not bidirectional} (equal up "
         "to distance 7, different from 8 on)", lambda: bucket(rel, not bidirectional)),
        ("t5_rounding", "equals the buckets with the log part rounded instead of truncated",
         lambda: _t5_rounded(rel, bidirectional, num_buckets, max_distance)),
    ]
    return _try(candidate, 0.0, mutants, reference)


def _t5_rounded(rel: np.ndarray, bidirectional: bool, num_buckets: int, max_distance: int) -> np.ndarray:
    nb, out = num_buckets, np.zeros_like(rel)
    if bidirectional:
        nb //= 2
        out = out + (rel > 0) * nb
        n = np.abs(rel)
    else:
        n = -np.minimum(rel, 0)
    exact = nb // 2
    log_part = np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact) * (nb - exact)
    return out + np.where(n < exact, n, np.minimum(exact + np.round(log_part).astype(np.int64), nb - 1))


# ---------------------------------------------------------------------------------------- DeBERTa
def diagnose_deberta(candidate: np.ndarray, rel: np.ndarray, *, position_buckets: int,
                     max_relative_positions: int) -> list[Match]:
    """DeBERTa catalogue for integer log buckets of ``rel`` (query − key)."""
    import refpos

    def bucket(r: np.ndarray) -> np.ndarray:
        return _np(refpos.encodings.deberta_log_buckets(np_ns().asarray(r), position_buckets, max_relative_positions))

    reference = bucket(rel)
    mutants = [
        ("deberta_relative_sign", "equals the buckets of key − query instead of query − key (the reference negated: "
         "the log bucket is odd)", lambda: bucket(-rel)),
        ("deberta_bucket_rounding", "equals the buckets with the log part truncated (T5's rule) instead of rounded "
         "up: every bucket beyond position_buckets // 2 one closer to zero",
         lambda: truncated_deberta_buckets(rel, position_buckets, max_relative_positions)),
    ]
    return _try(candidate, 0.0, mutants, reference)


def truncated_deberta_buckets(rel: np.ndarray, position_buckets: int, m: int) -> np.ndarray:
    """DeBERTa's log buckets of ``rel`` with the log part truncated instead of rounded up (the mistake
    ``deberta_bucket_rounding``; ``m`` is max_relative_positions, both already validated)."""
    mid = position_buckets // 2
    far = np.maximum(np.abs(rel), mid).astype(np.float64)
    log_part = np.trunc(np.log(far / mid) / np.log(np.full_like(far, (m - 1) / mid)) * (mid - 1)).astype(np.int64)
    return np.where(np.abs(rel) <= mid, rel, np.sign(rel) * (mid + log_part))


# --------------------------------------------------------------------------------------- sinusoid
def diagnose_sinusoid(candidate: np.ndarray, positions: np.ndarray, *, dim: int, base: float, layout: str,
                      spacing: str, atol: Any) -> list[Match]:
    import refpos

    def table(lay: str = layout, sp: str = spacing, offset: int = 0) -> np.ndarray:
        return _np(refpos.encodings.sinusoidal.sinusoidal(np_ns().asarray(positions), dim, base=base, layout=lay,
                                                          spacing=sp, offset=offset))

    reference = table()
    other_layout = "concat" if layout == "interleaved" else "interleaved"
    other_spacing = "tensor2tensor" if spacing == "paper" else "paper"
    _, _, sin_channels, cos_channels = pair_channels(layout, dim)  # where the layout writes pair k
    perm = np.empty(dim, dtype=np.int64)  # (dim,): each pair's sin and cos exchanged
    perm[sin_channels], perm[cos_channels] = cos_channels, sin_channels
    mutants = [
        ("sinusoid_layout_swap", f"equals the {other_layout!r} layout instead of {layout!r} (same values, channels "
         "permuted: equivalent from scratch, not with pretrained weights)", lambda: table(lay=other_layout)),
        ("sinusoid_spacing", f"equals the {other_spacing!r} frequency spacing instead of {spacing!r} (the k = 0 "
         "pair agrees, ω = 1; the others differ)", lambda: table(sp=other_spacing)),
        ("sinusoid_sin_cos_swap", "equals the reference with sin and cos exchanged in every pair",
         lambda: reference[..., perm]),
    ]
    for offset in (1, 2):
        mutants.append(("sinusoid_position_offset", f"equals the reference at positions p + {offset} (fairseq / "
                        "M2M100 start at padding_idx + 1)", lambda o=offset: table(offset=o)))
    return _try(candidate, atol, mutants, reference)
