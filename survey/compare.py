r"""refpos's claims against what transformers' code did, layer by layer.

Each self-attention call of run A (:mod:`survey.probe`), and of every case of :mod:`survey.cases`, is paired
with the same call of a reference run whose query and key are the ones before any rotation: run B (every
position 0, rotary tables the identity) where the layer reads the same hidden states, else run C (A's
positions, rotary tables the identity: models whose layer inputs carry an absolute encoding). The claim of
that layer predicts the call's query and key from the reference's, each use of positions read from the input
the claim says it reads (:mod:`survey.sources`: the position ids, the token's slot, the mask's running count):

``rope``
    :math:`q = s(p_s)\,R_{p_r}\,q_{\text{ref}}`, :math:`k = R_{p_r}\,k_{\text{ref}}` with refpos's
    :func:`refpos.apply_rope` (its attention factor included) and query scale :math:`s`;
``none``
    :math:`q = s(p_s)\,q_{\text{ref}}`, :math:`k = k_{\text{ref}}`;
``no_attention``
    the layer calls no attention function.

A model that takes no position ids is referenced, where its rotary tables could not be replaced, by run D (the
same tokens :data:`~survey.probe.SHIFT` places later): its query turned back by ``SHIFT`` positions
(:func:`~survey.rotation.predict_shifted`) is the call's, whatever the positions start at and whatever the
attention factor is, so this compares the frequencies, direction, span and layout only, and only where the
model's rotary apply function ran, whose map compares the rest.

The rotation is also compared as a map, where the model's rotary apply function runs: its output against
refpos's rotation of its input (:func:`check_map`), in every run. The input is the query as the projection
made it: a function that regroups the channels before rotating (DeepSeek's interleaved pairs) differs there
from one that does not, while the two agree on the reference run's output (which went through the same
regrouping), so that a half, an interleaved and a deinterleaved claim are told apart.

Tolerance, per channel. transformers computes the inverse frequencies and the angles in float32. For the pair
:math:`j` with frequency :math:`\omega_j = \theta^{-e_j}` (:math:`e_j = 2j/d`, a scaling rule's factors
folded in), :math:`\hat\omega_j` carries the rounding of :math:`\theta` (relative :math:`e_j\,\epsilon`), of
the exponent (an absolute :math:`e_j\,\epsilon` on :math:`e_j`, so :math:`e_j \ln\theta\,\epsilon` relative),
of the power and of the reciprocal, and of a rule's own few products (a factor, a blend): at most
:math:`(K + e_j\ln\theta)\,\epsilon` relative with :math:`K` = :data:`RULE_ROUNDINGS`, and
:math:`e_j \ln\theta \le |\ln \omega_j|` for every rule that only shrinks frequencies. The angle
:math:`p\,\hat\omega_j` is one more rounding (positions below :math:`2^{24}` are exact). Hence

.. math::
    |\Delta\varphi_j(p)| \le (K + 1 + |\ln\omega_j|)\,\epsilon\,p\,\omega_j,

and a rotated pair :math:`x = (x_a, x_b)` is off by at most
:math:`A\,\lVert x\rVert\,(|\Delta\varphi_j(p)| + C)`, where :math:`C` = :data:`ROPE_CONSTANT` covers the
float32 cosine and sine (an ulp each), the products by :math:`A` and the two products and the sum of the
rotation. The bound is the pair's own: one bound for every channel (the fastest pair's,
:math:`p\,\omega_{\max}`) would allow the slowest pairs of a :math:`\theta = 10^6` model an error of
:math:`p\,\omega_{\max}\,3\epsilon`, against their angle :math:`p\,\omega_{\min} = 10^{-6}\,p\,\omega_{\max}`:
a 30 % error of their frequency would pass. A query scale is a float32 product: relative
:data:`SCALE_RTOL` (the reference ran at position 0, so its query is divided by the scale there). A layer
within its bound at every position and channel is exact; anything above is a mismatch, and its largest error
is reported.

Besides the rotation, a claim of ``rope`` or ``none`` is a mismatch where transformers also adds a
position-dependent bias to the logits (a ``position_bias``, ALiBi, or finite non-zero mask entries) or
reads a position table at the stack's input: refpos would be silent about an encoding the model has.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from survey import biases as bias_checks
from survey.boxes import check_boxes
from survey.claims import LayerClaim, LayerResult, Resolution
from survey.cross import compare_cross, split_sites
from survey.layout_bias import check_layout_bias
from survey.observed import (
    handed_positions,
    inline_layers,
    input_modules,
    layer_calls,
    observed_kinds,
    position_biases,
    position_lookups,
    reference,
    role,
)
from survey.probe import SHIFT, Call, Probe
from survey.rotation import (  # noqa: F401  (the bound's constants and Channels are documented here)
    EPS32,
    INPUT_RTOL,
    ROPE_CONSTANT,
    ROW_RTOL,
    RULE_ROUNDINGS,
    SCALE_RTOL,
    Channels,
    before_rotation,
    channels,
    check_applied,
    check_map,
    predict,
    predict_shifted,
    rounded_alike,
)
from survey.seen import Seen, case_reference, negative, own_keys, own_queries, positions_of, seen_of, unrotated
from survey.sources import SOURCES, inputs_of

#: claims whose positions are a bias on the logits, and those added to the stack's input
BIAS_KINDS = ("alibi", "t5", "layout_bias")
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
def _errors(predicted: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per-position max |predicted - observed| (the T axis is the second last)."""
    diff = np.abs(predicted - observed)
    return diff.reshape(-1, *diff.shape[-2:]).max(axis=(0, 2))


def _over(claim: LayerClaim, ref: Call, call: Call, seen: Seen, mode: str,
          reads: dict[str, tuple[str, ...]] | None = None) -> tuple[float, str | None]:
    """The largest error of the claim's prediction of ``call`` (reading ``reads`` where given), and where it
    first passes its bound (None: nowhere). A decoding step's keys are its own tokens' where the model's cache
    kept other keys than the case's (a sliding window)."""
    if reads is not None:
        claim = dataclasses.replace(claim, reads={**claim.reads, **reads})
    rotation = positions_of(claim, seen, "rotation")
    keys = positions_of(claim, seen, "rotation", "key")
    if call.key.shape[-2] != ref.key.shape[-2] or call.key.shape[-2] != keys.size:
        queries = seen.inputs.queries
        own = own_keys(call, ref, queries)
        call = dataclasses.replace(call, key=call.key[..., own, :])
        ref = dataclasses.replace(ref, key=ref.key[..., -queries:, :] if ref.key.shape[-2] == keys.size else
                                  ref.key[..., own, :] if ref.key.shape == call.key.shape else
                                  ref.key[..., keys.size - queries:keys.size, :])
        keys = rotation
    if mode == "shifted" and claim.kind == "rope":  # run D: where the positions start is the map's to compare
        q_pred, k_pred, bound_q, bound_k = predict_shifted(claim, ref, rotation, SHIFT, keys)
    else:
        q_pred, k_pred, bound_q, bound_k = predict(claim, ref, rotation, positions_of(claim, seen, "scale"), mode,
                                                   keys)
    if seen.case is not None and seen.case.queries:  # the step's projections ran on another shape than run B's
        bound_q = bound_q + ROW_RTOL * np.abs(ref.query).max(axis=-1, keepdims=True)
        bound_k = bound_k + ROW_RTOL * np.abs(ref.key).max(axis=-1, keepdims=True)
    err_q, err_k = np.abs(q_pred - call.query), np.abs(k_pred - call.key)
    error = float(max(err_q.max(), err_k.max()))
    over_q = (err_q > bound_q).reshape(-1, *err_q.shape[-2:]).any(axis=0)
    over_k = (err_k > bound_k).reshape(-1, *err_k.shape[-2:]).any(axis=0)
    if not over_q.any() and not over_k.any():
        return error, None
    which, over = ("query", over_q) if over_q.any() else ("key", over_k)
    token, channel = (int(v[0]) for v in np.nonzero(over))
    positions = rotation if which == "query" else positions_of(claim, seen, "rotation", "key")
    return error, f"{which} of the token at position {int(positions[token])}, channel {channel}"


def alternatives(claim: LayerClaim, ref: Call, call: Call, seen: Seen, mode: str) -> list[str]:
    """The inputs under which the claim's formula would match the call where its stated reads do not: what
    the layer read, detected from the observation (``rotation reads cache_position``)."""
    found = []
    for use in ("rotation", "scale") if claim.query_scale is not None and claim.kind == "rope" else (
            ("rotation",) if claim.kind == "rope" else ("scale",) if claim.query_scale is not None else ()):
        for source in SOURCES:
            if (source,) == claim.source(use) or negative(seen, (source,)):
                continue  # a rotation at a negative position (OPT's padding, mask_count) is not one refpos applies
            _, where = _over(claim, ref, call, seen, mode, {use: (source,)})
            if where is None:
                found.append(f"{use} reads {source}")
    return found


def check_attention(claim: LayerClaim, probe: Probe, index: int, seen: Seen | None = None) -> LayerResult:
    """One self-attention call (of run A, or of a case) against a claim: its query and key (rotated for
    ``rope``, as they were for every other kind) and, unless the claim is a bias, no position bias."""
    seen = seen if seen is not None else Seen("run A", probe.a, inputs_of(None, probe))
    call = seen.run.calls[index]
    result = LayerResult(claim.stack, claim.index, claim.kind, "exact")
    ref, mode = reference(probe, index) if seen.case is None else case_reference(probe, seen, index)
    if ref is None and seen.case is not None:
        return LayerResult(claim.stack, claim.index, claim.kind, "exact", None, f"{seen.name}: not compared ({mode})")
    if ref is None and not handed_positions(probe, call.path) and claim.kind != "rope":
        # nothing positional reaches the layer: its query and key cannot depend on positions
        return LayerResult(claim.stack, claim.index, claim.kind, "exact", None,
                           f"{mode}; no position argument reaches the layer")
    if ref is None:
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None, mode)
    if mode == "shifted" and (claim.query_scale is not None or (claim.kind == "rope" and (
            claim.rope.mrope_section is not None or not probe.a.applied))):
        # a scale; or a rotation seen only against the same tokens shifted, no map showing where the positions start
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           "the model takes no position ids: its rotation is not isolated")
    extra = [] if claim.kind in BIAS_KINDS or seen.case is not None else position_biases(probe, index)
    if claim.kind == "rope" and claim.rope.head_dim != call.query.shape[-1]:
        return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                           f"head width: refpos {claim.rope.head_dim}, transformers {call.query.shape[-1]}")
    tokens = own_queries(call, ref, seen.inputs.queries) if seen.case is None else None
    if tokens is not None and call.key.shape == ref.key.shape and call.key.shape[-2] == call.query.shape[-2]:
        # rows beside the tokens' (a CLS token), a query and a key each: left out
        call, ref = (dataclasses.replace(c, query=c.query[..., tokens, :], key=c.key[..., tokens, :])
                     for c in (call, ref))
    if call.query.shape[-2] != seen.inputs.queries or ref.query.shape != call.query.shape \
            or ref.key.shape[:-2] != call.key.shape[:-2]:
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           f"{seen.name}: the layer attends over {call.query.shape[-2]} rows, not the "
                           f"{seen.inputs.queries} tokens")
    if (unrun := unrotated(claim, seen)) is not None:
        return LayerResult(claim.stack, claim.index, claim.kind, "exact", None, unrun)
    result.error, where = _over(claim, ref, call, seen, mode)
    causes = []
    if where is not None:
        other = alternatives(claim, ref, call, seen, mode)
        causes.append(f"{seen.name}: {'rotation' if claim.kind == 'rope' else 'positions change q/k'}: max |Δ| "
                      f"{result.error:.3g} (first over its bound: {where})"
                      + (f"; it matches where {', '.join(other)}" if other else ""))
    if extra:
        causes.append("transformers adds " + ", ".join(extra))
    if causes:
        result.status, result.cause = "mismatch", "; ".join(causes)
    elif mode == "shifted":
        result.cause = (f"{seen.name}: the rotation against the same tokens {SHIFT} places later, turned back by "
                        f"{SHIFT} positions" if claim.kind == "rope" else
                        f"query and key unchanged with every position shifted by {SHIFT}")
    return result


def inline_without_positions(claim: LayerClaim, probe: Probe, path: str) -> LayerResult:
    """A layer whose attention is computed inline, claimed to add no positions of its own (the stack's input
    carries them): its query and key are not observed, so it is exact only where nothing positional reaches its
    attention modules (no tensor argument named for positions, :func:`survey.observed.handed_positions`) and
    nothing positional runs in the layer (no rotary apply function, no bias builder); not reached otherwise."""
    modules = [m for m in probe.module_types if m.startswith(f"{path}.{claim.index}.")]
    classes = ", ".join(sorted({probe.module_types[m] for m in modules})[:3])
    handed = sorted({name for m in modules for name in handed_positions(probe, m)})
    ran = [r.name.rsplit(".", 1)[-1] for r in (*probe.a.applied, *probe.a.builders) if r.layer == (path, claim.index)]
    if handed or ran:
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           f"attention computed inline ({classes}): {', '.join(handed + ran)} reaches it, and its "
                           "query and key are not observed")
    return LayerResult(claim.stack, claim.index, claim.kind, "exact", None,
                       f"attention computed inline ({classes}): no position argument reaches it and nothing "
                       "positional runs in the layer" + "".join(f"; {note}" for note in getattr(probe, "notes", [])))


# ---------------------------------------------------------------------------------------- matching
def match_stacks(resolution: Resolution, calls: dict[tuple[str, int], list[int]]) -> tuple[dict[str, str], list[str]]:
    """Claimed stack -> observed layer list path, and the observed lists nothing was matched to."""
    lists = list(dict.fromkeys(path for path, _ in calls))
    claimed = list(dict.fromkeys(layer.stack for layer in resolution.layers))
    matched: dict[str, str] = {}
    if len(claimed) == 1 and len(lists) >= 1:
        # one resolved stack: the observed list with as many attention layers as refpos resolves, else the one
        # with the most (a tower that ran beside a text stack, GIT's image encoder, is not the text stack)
        counts = {path: sum(1 for p, _ in calls if p == path) for path in lists}
        size = sum(1 for c in resolution.stack(claimed[0]) if c.index >= 0)
        matched[claimed[0]] = max(lists, key=lambda p: (counts[p] == size, counts[p]))
    else:
        for stack in claimed:
            found = [path for path in lists if role(path) == stack]
            if found:
                matched[stack] = found[0]
    return matched, [path for path in lists if path not in matched.values()]


def compare(resolution: Resolution, probe: Probe, stop_at_mismatch: bool = False) -> Verdict:
    """Every claim of ``resolution`` against ``probe`` (see the module docstring); ``stop_at_mismatch``: return
    at the first mismatch (a mutant needs only one)."""
    verdict = Verdict(observed=observed_kinds(probe))
    own, cross = split_sites(resolution)  # a layer's cross-attention claims are survey.cross's
    try:
        _compare(own, probe, verdict, stop_at_mismatch)
        compare_cross(cross, own, probe, lambda result: _add(verdict, result, stop_at_mismatch))
    except _Stop:
        pass
    return verdict


class _Stop(Exception):
    """The first mismatch, where the caller asked for no more."""


def _add(verdict: Verdict, result: LayerResult, stop: bool) -> None:
    verdict.layers.append(result)
    if stop and result.status == "mismatch":
        raise _Stop


def _compare(resolution: Resolution, probe: Probe, verdict: Verdict, stop: bool) -> None:
    def add(result: LayerResult) -> None:
        _add(verdict, result, stop)

    calls = layer_calls(probe.a)
    lookups = position_lookups(probe)
    stacks = list(dict.fromkeys(c.stack for c in resolution.layers))

    def stack_of(path: str) -> str:  # the claimed stack a table or module belongs to
        return stacks[0] if len(stacks) == 1 else role(path)
    claims_table = any(c.kind in ABSOLUTE_KINDS or c.params.get("absolute") for c in resolution.layers)
    if lookups and not claims_table:
        for table, offset, rows in lookups:
            add(LayerResult(stack_of(table), -1, "-", "mismatch", None,
                                              f"transformers reads position table {table} ({rows} rows) at "
                                              f"position + {offset}; refpos resolves no absolute encoding"))
    if not claims_table:
        for path in input_modules(probe):
            name = probe.positional.get(path, ("?", False))[0]
            add(LayerResult(stack_of(path), -1, "-", "mismatch", None,
                                              f"transformers adds the output of {path} ({name}) to a stack's input; "
                                              "refpos resolves no absolute encoding"))
    # layers whose attention ran inline (no eager call in the layer): known, their queries and keys are not
    inline_only = {layer: [] for layer in inline_layers(probe) if layer not in calls}
    calls = {**calls, **inline_only}
    matched, unmatched = match_stacks(resolution, calls)
    for path in unmatched:
        add(LayerResult(role(path), -1, "-", "mismatch", None,
                                          f"transformers attends in {path}, which refpos resolves no layer of"))
    checked_input: set[str] = set()
    for claim in resolution.layers:
        path = matched.get(claim.stack)
        if claim.index < 0:  # the stack's input table, beside its layers' own claims (MPNet)
            if claim.kind in ABSOLUTE_KINDS and claim.stack not in checked_input:
                checked_input.add(claim.stack)
                add(bias_checks.check_absolute(claim, probe, lookups, len(stacks) == 1))
            elif claim.kind == "box_tables":  # a document model's box rows
                add(check_boxes(claim, probe))
            elif claim.kind not in ABSOLUTE_KINDS:
                add(LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                                f"no comparison for a {claim.kind} claim on a stack's input"))
            continue
        indices = calls.get((path, claim.index), []) if path else []
        inline = (path, claim.index) in inline_only
        if claim.kind == "no_attention":
            status = "mismatch" if indices else "exact"
            add(LayerResult(claim.stack, claim.index, claim.kind, status, None,
                            "transformers calls attention in this layer" if indices else ""))
            continue
        if not indices and not inline:
            add(LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                                              "transformers calls no attention in this layer"))
            continue
        if claim.kind == "other":
            add(LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                                              f"no comparison for {claim.detail or claim.kind} claims"))
            continue
        if claim.kind == "alibi":
            add(bias_checks.check_alibi(claim, probe, path))
        elif claim.kind == "t5":
            add(bias_checks.check_t5(claim, probe, path))
        elif claim.kind == "layout_bias":
            add(check_layout_bias(claim, probe, path))
        elif claim.kind in ABSOLUTE_KINDS and claim.stack not in checked_input:
            checked_input.add(claim.stack)
            add(bias_checks.check_absolute(claim, probe, lookups, len(stacks) == 1))
        if inline and claim.kind in ("rope", "none"):
            add(check_applied(claim, probe, path))
        elif inline and claim.kind in ABSOLUTE_KINDS:
            add(inline_without_positions(claim, probe, path))
        for i in indices:
            add(check_attention(claim, probe, i))
        if inline or claim.kind not in ("rope", "none"):
            continue
        for seen in seen_of(probe):
            if seen.case is not None:
                for i in layer_calls(seen.run).get((path, claim.index), []):
                    add(check_attention(claim, probe, i, seen))
            mapped = check_map(claim, probe, path, seen)
            if mapped is not None:
                add(mapped)
    claimed = {(matched.get(c.stack), c.index) for c in resolution.layers}
    for (path, index) in calls:
        if path in matched.values() and (path, index) not in claimed:
            add(LayerResult(role(path), index, "-", "mismatch", None,
                                              f"transformers attends in {path}.{index}, refpos resolves no such layer"))
