r"""refpos's claims against what transformers' code did, layer by layer.

Each self-attention call of run A (:mod:`survey.probe`) is paired with the same call of a reference run
whose query and key are the ones before any rotation: run B (every position 0, rotary tables the identity)
where the layer's input is the same in A and B, else run C (A's positions, rotary tables the identity:
models whose layer inputs carry an absolute encoding). The claim of that layer predicts run A's query and
key from the reference's:

``rope``
    :math:`q_A = s(p)\,R_p\,q_{\text{ref}}`, :math:`k_A = R_p\,k_{\text{ref}}` with refpos's
    :func:`refpos.apply_rope` (its attention factor included) and query scale :math:`s`;
``none``
    :math:`q_A = s(p)\,q_{\text{ref}}`, :math:`k_A = k_{\text{ref}}`;
``no_attention``
    the layer calls no attention function.

Tolerance. transformers computes ``inv_freq`` and the angles :math:`p\,\omega` in float32: a rotated pair
is off by at most :math:`(3\,p\,\omega_{\max}\,2^{-24} + 10^{-6})\,A\,\lVert x\rVert` (two roundings of
:math:`\omega`, one of the product; the constant covers float32 cos/sin and the two products of the
rotation), bounded here by :math:`2\max|x|` for :math:`\lVert x\rVert`. A query scale is a float32 product:
relative 1e-6 (the reference ran at position 0, so its query is divided by the scale there). A layer within
its bound at every position is exact; anything above is a mismatch, and its largest error is reported.

Besides the rotation, a claim of ``rope`` or ``none`` is a mismatch where transformers also adds a
position-dependent bias to the logits (a ``position_bias``, ALiBi, or finite non-zero mask entries) or
reads a position table at the stack's input: refpos would be silent about an encoding the model has.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refpos.pairs import span_bounds
from survey import biases as bias_checks
from survey.claims import LayerClaim, LayerResult, Resolution
from survey.observed import (
    handed_positions,
    inline_layers,
    layer_calls,
    observed_kinds,
    position_biases,
    position_lookups,
    reference,
    role,
)
from survey.probe import SHIFT, Call, Probe

EPS32 = 2.0**-24
#: the angle and product rounding of float32 RoPE (see the module docstring)
ROPE_CONSTANT = 1e-6
SCALE_RTOL = 1e-6
#: claims whose positions are a bias on the logits, and those added to the stack's input
BIAS_KINDS = ("alibi", "t5")
ABSOLUTE_KINDS = ("learned", "sinusoidal")


@dataclass
class Verdict:
    """One model type's comparison: the per-layer results and what was observed."""

    layers: list[LayerResult] = field(default_factory=list)
    observed: list[str] = field(default_factory=list)  # encoding kinds seen in transformers' run
    notes: list[str] = field(default_factory=list)

    @property
    def max_error(self) -> float | None:
        errors = [r.error for r in self.layers if r.error is not None]
        return max(errors) if errors else None

    @property
    def mismatches(self) -> list[LayerResult]:
        return [r for r in self.layers if r.status == "mismatch"]


# ---------------------------------------------------------------------------------------- prediction
def _rope_bound(claim: LayerClaim, x: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-position bound of a float32 rotation against refpos (module docstring), and the attention factor."""
    import refpos

    inv_freq, factor = refpos.rope_frequencies(claim.rope, seq_len=int(positions.max()) + 1)
    w_max = float(np.max(refpos.to_numpy(inv_freq)))
    bound = (3 * positions * w_max * EPS32 + ROPE_CONSTANT) * factor * 2 * np.abs(x).max()
    return bound, float(factor)


def before_rotation(rope: Any, x: np.ndarray, mode: str) -> np.ndarray:
    """The query (or key) before rotation, from the reference run's: the claim's own rotation at position 0
    undone. At position 0 RoPE is ``A·P`` (``A`` the attention factor, ``P`` the identity, or for the
    ``deinterleaved`` layout the regrouping permutation that transformers' apply function performs whatever
    its tables): a reference taken with identity tables went through ``P`` alone, one taken at position 0
    through ``A·P``."""

    step = _step_at_zero(rope, x.shape[-1], mode)  # x_ref = x_pre @ step, a (scaled) permutation
    return x @ step.T / np.max(step) ** 2


@functools.cache
def _step_at_zero(rope: Any, d: int, mode: str) -> np.ndarray:
    import refpos

    at_zero = refpos.to_numpy(refpos.apply_rope(np.eye(d), np.zeros(d, dtype=np.int64), rope))  # row i: e_i at 0
    _, factor = refpos.rope_frequencies(rope, seq_len=1)
    step = at_zero / float(factor) if mode == "identity" else at_zero
    nonzero = np.count_nonzero(step, axis=1)
    if not (np.all(nonzero == 1) and np.all(np.count_nonzero(step, axis=0) == 1)):
        raise ValueError("RoPE at position 0 is not a scaled permutation")  # its inverse would not be its transpose
    return step


def predict(claim: LayerClaim, ref: Call, positions: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray,
                                                                                        np.ndarray, np.ndarray]:
    """refpos's prediction of run A's (query, key) from the reference call, with their per-position bounds."""
    import refpos

    q, k = ref.query, ref.key
    scale = np.ones(positions.size) if claim.query_scale is None else np.asarray(
        claim.query_scale(positions), dtype=np.float64)
    if claim.query_scale is not None:  # the reference ran at position 0: its query carries the scale there
        q = q / float(np.asarray(claim.query_scale(np.zeros(1, dtype=np.int64)), dtype=np.float64)[0])
    if claim.kind == "rope":
        q, k = before_rotation(claim.rope, q, mode), before_rotation(claim.rope, k, mode)
        q_rot = refpos.to_numpy(refpos.apply_rope(q, positions, claim.rope))
        k_rot = refpos.to_numpy(refpos.apply_rope(k, positions, claim.rope))
        bound_q, _ = _rope_bound(claim, q, positions)
        bound_k, _ = _rope_bound(claim, k, positions)
    else:
        q_rot, k_rot = q, k
        bound_q = np.full(positions.size, SCALE_RTOL * np.abs(q).max())
        bound_k = np.full(positions.size, SCALE_RTOL * np.abs(k).max())
    q_pred = q_rot * scale[..., :, None]
    return q_pred, k_rot, bound_q * np.abs(scale) + SCALE_RTOL * np.abs(q_pred).max(), bound_k


def _errors(predicted: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per-position max |predicted - observed| (the T axis is the second last)."""
    diff = np.abs(predicted - observed)
    return diff.reshape(-1, *diff.shape[-2:]).max(axis=(0, 2))


def check_attention(claim: LayerClaim, probe: Probe, index: int) -> LayerResult:
    """One self-attention call of run A against a claim: its query and key (rotated for ``rope``, as they
    were for every other kind) and, unless the claim is a bias, no position bias."""
    call = probe.a.calls[index]
    result = LayerResult(claim.stack, claim.index, claim.kind, "exact")
    ref, mode = reference(probe, index)
    if ref is None and not handed_positions(probe, call.path) and claim.kind != "rope":
        # nothing positional reaches the layer: its query and key cannot depend on positions
        return LayerResult(claim.stack, claim.index, claim.kind, "exact", None,
                           f"{mode}; no position argument reaches the layer")
    if ref is None:
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None, mode)
    if mode == "shifted" and (claim.kind == "rope" or claim.query_scale is not None):
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           "the model takes no position ids: its rotation is not isolated")
    extra = [] if claim.kind in BIAS_KINDS else position_biases(probe, index)
    if claim.kind == "rope" and claim.rope.head_dim != call.query.shape[-1]:
        return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                           f"head width: refpos {claim.rope.head_dim}, transformers {call.query.shape[-1]}")
    if call.query.shape[-2] != probe.positions.size:
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           f"the layer attends over {call.query.shape[-2]} rows, not the {probe.positions.size} tokens")
    q_pred, k_pred, bound_q, bound_k = predict(claim, ref, probe.positions, mode)
    err_q, err_k = _errors(q_pred, call.query), _errors(k_pred, call.key)
    result.error = float(max(err_q.max(), err_k.max()))
    over = np.flatnonzero((err_q > bound_q) | (err_k > bound_k))
    causes = []
    if over.size:
        p = int(probe.positions[over[0]])
        causes.append(f"{'rotation' if claim.kind == 'rope' else 'positions change q/k'}: max |Δ| "
                      f"{result.error:.3g} (first over its bound at position {p})")
    if extra:
        causes.append("transformers adds " + ", ".join(extra))
    if causes:
        result.status, result.cause = "mismatch", "; ".join(causes)
    elif mode == "shifted":
        result.cause = f"query and key unchanged with every position shifted by {SHIFT}"
    return result


def _time_axis_last(x: np.ndarray, t: int) -> np.ndarray | None:
    """``x`` with its token axis second last (apply functions take (B, H, T, d) or (B, T, H, d))."""
    if x.ndim >= 2 and x.shape[-2] == t:
        return x
    if x.ndim >= 3 and x.shape[-3] == t:
        return np.swapaxes(x, -2, -3)
    return None


def check_applied(claim: LayerClaim, probe: Probe, path: str) -> LayerResult:
    """A layer whose attention is computed inline, through its modeling module's rotary apply function: the
    function's output against refpos's rotation of its input (on the rotated span when the model slices the
    span out before the call)."""
    import refpos

    positions = probe.positions
    records = [a for a in probe.a.applied if a.layer == (path, claim.index)]
    if claim.kind == "none":
        if records:
            return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                               f"transformers rotates in this layer ({records[0].name.rsplit('.', 1)[-1]})")
        if probe.a.applied:
            return LayerResult(claim.stack, claim.index, claim.kind, "exact", None,
                               "the model's rotary apply function runs in other layers, not in this one")
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None, "attention computed inline")
    if not records:
        return LayerResult(claim.stack, claim.index, claim.kind, "mismatch" if probe.a.applied else "not reached",
                           None, "transformers' rotary apply function does not run in this layer" if probe.a.applied
                           else "attention computed inline, and no rotary apply function runs")
    if claim.query_scale is not None or not probe.position_ids_taken:
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           "attention computed inline: the query scale, or the positions, cannot be isolated")
    rope, worst = claim.rope, 0.0
    start, stop = span_bounds(rope.head_dim, rope.rotary_width, rope.placement)  # the rotated channels
    for record in records:
        for before, after in zip(record.before, record.after, strict=False):
            x, y = _time_axis_last(before, positions.size), _time_axis_last(after, positions.size)
            if x is None or y is None or x.shape != y.shape:
                return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                                   f"{record.name}: no token axis of {positions.size} in {before.shape}")
            width = x.shape[-1]
            if width == rope.head_dim:
                full = x
            elif width == stop - start:
                full = np.zeros((*x.shape[:-1], rope.head_dim))
                full[..., start:stop] = x
            else:
                return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                                   f"rotated width: transformers {width}, refpos {rope.head_dim} "
                                   f"(span {stop - start})")
            predicted = refpos.to_numpy(refpos.apply_rope(full, positions, rope))
            if width != rope.head_dim:
                predicted = predicted[..., start:stop]
            errors = _errors(predicted, y)
            bound, _ = _rope_bound(claim, x, positions)
            worst = max(worst, float(errors.max()))
            if np.any(errors > bound):
                return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", worst,
                                   f"rotation ({record.name.rsplit('.', 1)[-1]}): max |Δ| {worst:.3g}")
    return LayerResult(claim.stack, claim.index, claim.kind, "exact", worst,
                       "read at the model's rotary apply function (attention computed inline)")


# ---------------------------------------------------------------------------------------- matching
def match_stacks(resolution: Resolution, calls: dict[tuple[str, int], list[int]]) -> tuple[dict[str, str], list[str]]:
    """Claimed stack -> observed layer list path, and the observed lists nothing was matched to."""
    lists = list(dict.fromkeys(path for path, _ in calls))
    claimed = list(dict.fromkeys(layer.stack for layer in resolution.layers))
    matched: dict[str, str] = {}
    if len(claimed) == 1 and len(lists) >= 1:
        # one resolved stack: the observed list with the most attention layers
        counts = {path: sum(1 for p, _ in calls if p == path) for path in lists}
        matched[claimed[0]] = max(lists, key=lambda p: counts[p])
    else:
        for stack in claimed:
            found = [path for path in lists if role(path) == stack]
            if found:
                matched[stack] = found[0]
    return matched, [path for path in lists if path not in matched.values()]


def compare(resolution: Resolution, probe: Probe) -> Verdict:
    """Every claim of ``resolution`` against ``probe`` (see the module docstring)."""
    verdict = Verdict(observed=observed_kinds(probe))
    calls = layer_calls(probe.a)
    lookups = position_lookups(probe)
    stacks = list(dict.fromkeys(c.stack for c in resolution.layers))

    def stack_of(path: str) -> str:  # the claimed stack a table or module belongs to
        return stacks[0] if len(stacks) == 1 else role(path)
    claims_table = any(c.kind in ABSOLUTE_KINDS or c.params.get("absolute") for c in resolution.layers)
    if lookups and not claims_table:
        for table, offset, rows in lookups:
            verdict.layers.append(LayerResult(stack_of(table), -1, "-", "mismatch", None,
                                              f"transformers reads position table {table} ({rows} rows) at "
                                              f"position + {offset}; refpos resolves no absolute encoding"))
    own = probe.own if probe.own is not None else probe.a
    if own.positional and not claims_table:
        for path in own.positional:
            name = probe.positional.get(path, ("?", False))[0]
            verdict.layers.append(LayerResult(stack_of(path), -1, "-", "mismatch", None,
                                              f"transformers adds the output of {path} ({name}) to a stack's input; "
                                              "refpos resolves no absolute encoding"))
    inline = not probe.a.calls and bool(probe.module_types)
    if inline:  # the layers are known, their queries and keys are not
        calls = inline_layers(probe)
        classes = ", ".join(sorted(set(probe.module_types.values()))[:3])
    matched, unmatched = match_stacks(resolution, calls)
    for path in unmatched:
        verdict.layers.append(LayerResult(role(path), -1, "-", "mismatch", None,
                                          f"transformers attends in {path}, which refpos resolves no layer of"))
    checked_input: set[str] = set()
    for claim in resolution.layers:
        path = matched.get(claim.stack)
        indices = calls.get((path, claim.index), []) if path else []
        if claim.kind == "no_attention":
            status = "mismatch" if indices else "exact"
            verdict.layers.append(LayerResult(claim.stack, claim.index, claim.kind, status, None,
                                              "transformers calls attention in this layer" if indices else ""))
            continue
        if not indices and not (inline and (path, claim.index) in calls):
            verdict.layers.append(LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                                              "transformers calls no attention in this layer"))
            continue
        if claim.kind == "other":
            verdict.layers.append(LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                                              f"no comparison for {claim.detail or claim.kind} claims"))
            continue
        if claim.kind == "alibi":
            verdict.layers.append(bias_checks.check_alibi(claim, probe, path))
        elif claim.kind == "t5":
            verdict.layers.append(bias_checks.check_t5(claim, probe, path))
        elif claim.kind in ABSOLUTE_KINDS and claim.stack not in checked_input:
            checked_input.add(claim.stack)
            verdict.layers.append(bias_checks.check_absolute(claim, probe, lookups, len(stacks) == 1))
        if inline and claim.kind in ("rope", "none"):
            verdict.layers.append(check_applied(claim, probe, path))
        elif inline and claim.kind not in BIAS_KINDS + ABSOLUTE_KINDS:
            verdict.layers.append(LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                                              f"attention computed inline ({classes}): its query and key are "
                                              "not observed"))
        for i in indices:
            verdict.layers.append(check_attention(claim, probe, i))
    claimed = {(matched.get(c.stack), c.index) for c in resolution.layers}
    for (path, index) in calls:
        if path in matched.values() and (path, index) not in claimed:
            verdict.layers.append(LayerResult(role(path), index, "-", "mismatch", None,
                                              f"transformers attends in {path}.{index}, refpos resolves no such layer"))
    return verdict
