r"""``refpos check alibi``: ALiBi slopes ``(n,)`` or a bias ``(n, Tq, Tk)`` against the reference, the catalogue's
ALiBi mistakes (docs/diagnosis.md#the-catalogue-alibi-t5-deberta-sinusoid) and the slopes the candidate used.

.. code-block:: text

    refpos check alibi --heads N --candidate S.npy [--q-len Q --k-len K --form causal] [--head-dim D]
    refpos check alibi --config CONFIG.json --candidate S.npy [--q-len Q --k-len K]

The fit (:func:`fit_alibi`) is the slope of every head: the candidate itself for slopes; for a bias the
least-squares slope :math:`\hat m_h = \sum b\,B / \sum B^2` against each form's unit bias ``B`` (the form whose
fit leaves the smallest residual is the one the candidate used). When the slopes are one geometric sequence
:math:`\hat m_h = m_0 r^h`, its ``m_0`` and ``r``.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.shared import stream
from refpos.check.shared.arrays import (
    Unusable,
    default_dtype,
    float_kind,
    host,
    non_finite,
    np_ns,
    same_shape,
    summary,
)
from refpos.check.shared.request import Progress, Request
from refpos.check.shared.stream import ranges
from refpos.check.tables import common
from refpos.check.tables.common import Match, as_np, direct, float32_values, runs, try_mutants, verdict
from refpos.encodings.alibi import FORMS, alibi_slopes
from refpos.golden.exact import tolerance as tol


# ------------------------------------------------------------------------------------------ mistakes
def naive_slopes(n: int) -> np.ndarray:
    """``2^(−8h/n)``, h = 1…n, for every n: right only for powers of two (ml-explore/mlx#343)."""
    return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)


def diagnose_alibi(candidate: np.ndarray, n: int, *, q_len: int | None = None, k_len: int | None = None,
                   form: str = "causal", atol: Any, head_dim: int | None = None) -> list[Match]:
    """ALiBi catalogue for slopes ``(n,)`` or a bias ``(n, Tq, Tk)``."""
    import refpos

    ref_slopes = as_np(refpos.encodings.alibi_slopes(n, xp=np_ns()))
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
        return try_mutants(candidate, atol, [(m, e, (lambda s=s: s)) for m, e, s in slope_mutants], ref_slopes)
    reference = as_np(refpos.encodings.alibi_bias(n, q_len, k_len, form=form, xp=np_ns()))

    def bias_of(slopes: np.ndarray, bias_form: str) -> np.ndarray:
        base = as_np(refpos.encodings.alibi_bias(1, q_len, k_len, form=bias_form, xp=np_ns()))[0] / ref_slopes_one
        return slopes[:, None, None] * base

    ref_slopes_one = float(as_np(refpos.encodings.alibi_slopes(1, xp=np_ns()))[0])
    mutants = [(m, e, (lambda s=s: bias_of(s, form))) for m, e, s in slope_mutants]
    for other in FORMS:
        if other != form:
            mutants.append(("alibi_bias_form", f"equals the {other!r} bias form instead of {form!r} (equal "
                            "probabilities only under a causal mask)", lambda o=other: bias_of(ref_slopes, o)))
    return try_mutants(candidate, atol, mutants, reference)


# ------------------------------------------------------------------------------------------------ fit
def _geometric(slopes: np.ndarray) -> dict[str, float] | None:
    r"""``{"first", "ratio"}`` when the slopes are :math:`m_0 r^h` to 1e-9 relative, else ``None``."""
    if slopes.size < 2 or not np.all(slopes > 0):
        return None
    ratios = slopes[1:] / slopes[:-1]
    if np.ptp(ratios) > 1e-9 * abs(float(ratios.mean())):
        return None
    return {"first": float(slopes[0]), "ratio": float(ratios.mean()), "log2_ratio": float(np.log2(ratios.mean()))}


def fit_alibi(candidate: np.ndarray, reference_slopes: np.ndarray, atol: np.ndarray | float, *,
              q_positions: np.ndarray | None = None, k_positions: np.ndarray | None = None) -> dict[str, Any]:
    """The slopes (and the bias form) a candidate used; ``atol`` the slope tolerance per head.

    ``candidate``: slopes ``(n,)``, or a bias ``(n, Tq, Tk)`` at query positions ``q_positions`` and key positions
    ``k_positions``.
    """
    import refpos

    form, residual = None, None
    if candidate.ndim == 1:
        slopes = candidate.astype(np.float64)
    else:
        best = None
        for name in FORMS:
            unit = np.asarray(to_numpy(refpos.encodings.alibi_bias_from_positions(
                np_ns().asarray(np.ones(1)), np_ns().asarray(q_positions), np_ns().asarray(k_positions),
                form=name)))[0]  # (Tq, Tk): the bias of slope 1
            power = float(np.sum(unit * unit))
            if power == 0:
                continue
            fitted = np.einsum("hqk,qk->h", candidate, unit) / power  # (n,)
            scale = np.maximum(np.abs(candidate).max(axis=(1, 2)), 1e-300)
            misfit = float(np.max(np.abs(candidate - fitted[:, None, None] * unit).max(axis=(1, 2)) / scale))
            if best is None or misfit < best[0]:
                best = (misfit, name, fitted)
        if best is None:  # every entry at distance 0 (one query, one key): no slope to fit
            return {"heads": [], "wrong_heads": [], "fitted": {
                "form": None, "form_residual": None, "geometric": None, "reference_geometric": None,
                "reason": "every bias entry is at distance 0: the slopes do not show"}}
        residual, form, slopes = best
    within = np.abs(slopes - reference_slopes) <= atol
    wrong = np.flatnonzero(~within)
    return {"heads": [{"index": h, "slope": float(reference_slopes[h]), "slope_fitted": float(slopes[h]),
                       "ok": bool(within[h])} for h in range(slopes.size)],
            "fitted": {"form": form, "form_residual": residual, "geometric": _geometric(slopes),
                       "reference_geometric": _geometric(reference_slopes)},
            "wrong_heads": runs(wrong)}


def _sequence(geometric: dict[str, float] | None) -> str:
    if geometric is None:
        return "not one geometric sequence"
    return f"m_0·r^h with m_0 = {geometric['first']:.6g}, r = 2^{geometric['log2_ratio']:.6g}"


def alibi_lines(result: dict[str, Any]) -> list[str]:
    """The fitted slopes: the heads outside the tolerance, the form, the sequence the slopes make."""
    heads, fitted = result["heads"], result["fitted"]
    lines = []
    if fitted.get("form"):
        lines.append(f"fit: bias form {fitted['form']} (slopes fitted per head, residual "
                     f"{fitted['form_residual']:.3g} of the largest bias)")
    wrong = [h for h in heads if not h["ok"]]
    if wrong:
        shown = ", ".join(f"{h['index']}: {h['slope_fitted']:.6g} (× {h['slope_fitted'] / h['slope']:.9g})"
                          for h in wrong[:6])
        lines.append(f"fit: heads {ranges([h['index'] for h in wrong])} outside the tolerance; fitted slope (× the "
                     "reference's): " + shown + (" …" if len(wrong) > 6 else ""))
    lines.append(f"fit: the slopes are {_sequence(fitted['geometric'])}; the reference's are "
                 f"{_sequence(fitted['reference_geometric'])}")
    return lines


# ------------------------------------------------------------------------------------------ compare
def stream_alibi(raw: np.ndarray, n: int, form: str, dtype: str, head_dim: int | None,
                 progress: Progress) -> dict[str, Any]:
    """Check an ALiBi bias ``raw`` ``(n, Tq, Tk)`` (validated shape, ``Tq <= Tk``), block by block."""
    import refpos

    _, q_len, k_len = raw.shape
    slopes = np.asarray(to_numpy(refpos.encodings.alibi_slopes(n, xp=np_ns())))  # (n,)
    q_positions = np.arange(k_len - q_len, k_len, dtype=np.int64)  # (Tq,): aligned to the end of the keys
    k_positions = np.arange(k_len, dtype=np.int64)  # (Tk,)
    rows_positions = np.broadcast_to(q_positions, (n, q_len))  # (L = n, T = Tq): the query of each row

    def reference_of(lead: slice, rows: slice, rule: str = dtype) -> tuple[np.ndarray, np.ndarray]:
        bias = refpos.encodings.alibi_bias_from_positions(np_ns().asarray(slopes[lead]),
                                                          np_ns().asarray(q_positions[rows]),
                                                          np_ns().asarray(k_positions), form=form)
        reference = np.asarray(to_numpy(bias))  # (k, rows, Tk)
        return reference, np.asarray(tol.value_tolerance(rule, reference))

    tally = stream.compare_rows(raw, rows_positions, reference_of, progress)
    result = verdict("alibi", dtype, tally, raw.shape, raw.shape)
    if tally.n_outside == 0:
        return result
    last = max(1, min(q_len, common.SAMPLE_ELEMENTS // max(1, n * k_len)))  # the last query rows
    cand = np.asarray(raw[:, q_len - last:, :], dtype=np.float64)  # (n, last, Tk)
    reference = np.asarray(to_numpy(refpos.encodings.alibi_bias(n, last, k_len, form=form, xp=np_ns())))
    atol = np.asarray(tol.value_tolerance(dtype, reference))
    result["diagnosis"] = [*tally.non_finite(), *diagnose_alibi(cand, n, q_len=last, k_len=k_len, form=form,
                                                                atol=atol, head_dim=head_dim)]
    result.update(fit_alibi(cand, slopes, np.asarray(tol.value_tolerance(dtype, slopes)),
                            q_positions=q_positions[q_len - last:], k_positions=k_positions))
    if dtype == "float64" and stream.compare_rows(raw, rows_positions, partial(reference_of, rule="float32")
                                                  ).n_outside == 0:  # a second pass, under the float32 tolerance
        result["diagnosis"].insert(0, float32_values())
    if last < q_len:
        result["diagnosis_rows"] = last
    return result


def check_alibi(candidate: Any, n: int, *, q_len: int | None = None, k_len: int | None = None,
                form: str = "causal", dtype: str | None = None, head_dim: int | None = None,
                progress: Progress = None) -> dict[str, Any]:
    """Compare ALiBi slopes ``(n,)`` or a bias ``(n, q_len, k_len)`` with the reference.

    A bias may be memory-mapped: it is compared block by block along the query rows (:func:`stream_alibi`); the
    diagnosis runs on its last rows.
    """
    import refpos

    raw = float_kind(host(candidate), "candidate")
    dtype = tol.check_dtype(dtype or default_dtype(raw))
    if raw.ndim != 1:
        if q_len is None or k_len is None:
            raise Unusable("a bias candidate needs --q-len and --k-len")
        same_shape(raw, (n, q_len, k_len), "a bias (heads, q_len, k_len)")
        if q_len > k_len:
            raise Unusable(f"q_len must be <= k_len (queries aligned to the end of the keys), got q_len={q_len}, "
                           f"k_len={k_len}")
        return stream_alibi(raw, n, form, dtype, head_dim, progress)
    cand = np.asarray(raw, dtype=np.float64)
    same_shape(cand, (n,), f"slopes for --heads {n}")
    reference = np.asarray(to_numpy(refpos.encodings.alibi_slopes(n, xp=np_ns())))
    atol = np.asarray(tol.value_tolerance(dtype, reference))
    result = {"target": "alibi", "dtype": dtype, **summary(cand, reference, atol)}
    result["diagnosis"] = [] if result["ok"] else [*non_finite(cand, reference), *diagnose_alibi(
        cand, n, atol=atol, head_dim=head_dim)]
    if not result["ok"]:
        result.update(fit_alibi(cand, reference, atol))
    if not result["ok"] and dtype == "float64" and summary(cand, reference, np.asarray(
            tol.value_tolerance("float32", reference)))["ok"]:
        result["diagnosis"].insert(0, float32_values())
    return result


def _layer_alibi(request: Request) -> dict[str, Any]:
    """The candidate against the ``--config`` layer's ALiBi: its head count, form and slopes; a family whose form
    is not one of the check's (MPT's end-anchored key index) or whose slopes are not the official ones is compared
    with the layer's exact slopes or bias directly."""
    layer, candidate, q_len, k_len = request.layer, request.candidate, request.option("q_len"), request.option("k_len")
    n = len(layer.slopes)
    official = np.allclose(layer.slopes, np.asarray(alibi_slopes(n, xp="numpy")), rtol=1e-15, atol=0.0)
    if candidate.ndim == 1 or (layer.form in FORMS and official):
        if not official:
            return direct("alibi", candidate, np.asarray(layer.slopes), request.dtype)
        return check_alibi(candidate, n, q_len=q_len, k_len=k_len, form=layer.form, dtype=request.dtype,
                           head_dim=request.option("head_dim"), progress=request.progress)
    if q_len is None or k_len is None:
        raise Unusable("a bias candidate needs --q-len and --k-len")
    same_shape(candidate, (n, q_len, k_len), "a bias (heads, q_len, k_len)")
    # an unpadded sequence of k_len keys whose last q_len are the queries: its mask is all ones, so the keys read
    # the mask's running count (BLOOM, Falcon) or their index (MPT) alike
    slots, mask = np.arange(k_len - q_len, k_len), np.ones(k_len, dtype=np.int64)
    return direct("alibi", candidate, layer.bias(cache_position=slots, attention_mask=mask, rounded=False),
                  request.dtype)


def run(request: Request) -> dict[str, Any]:
    """``refpos check alibi``: ``--heads`` (or the ``--config`` layer's), ``--q-len``/``--k-len`` for a bias,
    ``--form``, ``--head-dim`` (tests the 1/√d mistake)."""
    if request.layer is not None:
        return {**_layer_alibi(request), **request.where()}
    return check_alibi(request.candidate, request.need("heads", "--heads N"), q_len=request.option("q_len"),
                       k_len=request.option("k_len"), form=request.option("form", "causal"), dtype=request.dtype,
                       head_dim=request.option("head_dim"), progress=request.progress)


def golden(case: dict[str, Any], args: list[Any], inputs: dict[str, np.ndarray], candidate: np.ndarray,
           dtype: str) -> dict[str, Any]:
    """The check of a golden case of ``alibi_slopes(n)`` or ``alibi_bias(n, q_len, k_len, form)``."""
    if case.get("function") == "alibi_slopes":
        return check_alibi(candidate, int(args[0]), dtype=dtype)
    return check_alibi(candidate, int(args[0]), q_len=int(args[1]), k_len=int(args[2]), form=str(args[3]), dtype=dtype)


__all__ = ["alibi_lines", "check_alibi", "diagnose_alibi", "fit_alibi", "golden", "naive_slopes", "run",
           "stream_alibi"]
