r"""Cross-attention claims (refpos's ``<stack>.cross`` records) and their comparison with transformers' calls.

A layer's cross-attention projects its queries from one sequence's states (the decoder's tokens, BLT's patches)
and its keys from another's (the encoder's states, the bytes). refpos claims it adds no positions
(:class:`refpos.models.cross.CrossAttention`): a :class:`~survey.claims.LayerClaim` of site ``"cross"``, kind
``"none"``. transformers' cross-attention calls are the eager calls of run A whose module path names a cross
attention (:data:`survey.observed.CROSS`), in the claim's layer.

The reference is run B's same call (every position 0, rotary tables the identity, each attention returning zeros,
so that every layer's input is what its embeddings and MLPs make of the tokens): where the call's query input
(its hidden states, by digest) and its key input (the states handed as ``key_value_states`` /
``cross_attention_states``) are the same in both runs, a cross-attention without positions projects the same query
and key in both. The claim predicts them (:func:`survey.rotation.predict`): ``none``,
:math:`q = q_B`, :math:`k = k_B` within a float32 product's rounding relative to the largest entry
(:data:`survey.rotation.SCALE_RTOL`); a claim that the cross-attention rotates (a wrong answer, :mod:`survey.mutants`),
:math:`q = R_{p}\,q_B` at the tokens' positions and :math:`k = R_{j}\,k_B` at the keys' indices
:math:`j = 0 … S-1`, within the rotation's bound. Anything over its bound is a mismatch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from survey.claims import LayerClaim, LayerResult, Resolution
from survey.observed import CROSS
from survey.rotation import predict

#: the keyword arguments through which a cross-attention module is handed the states its keys are projected from
KEY_STATES = ("key_value_states", "cross_attention_states", "encoder_hidden_states")


def split_cross(records: Any) -> tuple[list[Any], list[LayerClaim]]:
    """refpos's records without those of a ``<stack>.cross`` sub-site of a text stack, and those as claims (a
    refused one is left out: the stack's layers are refused for the same reason, and said so)."""
    from refpos.models.cross import CROSS as SUFFIX
    from survey.claims import STACKS

    rest, claims = [], []
    for r in records:
        stack = r.stack.removesuffix(SUFFIX)
        if r.stack == stack or stack not in STACKS:
            rest.append(r)
        elif r.kind == "none":
            claims.append(LayerClaim(stack, r.index, "none", detail=f"cross: {r.queries} -> {r.keys}", site="cross"))
    return rest, claims


def cross_calls(run: Any, path: str | None, index: int) -> list[int]:
    """Run ``run``'s cross-attention call indices in layer ``index`` of the layer list ``path``."""
    return [i for i, call in enumerate(run.calls) if call.layer == (path, index) and CROSS.search(call.path)]


def _same_inputs(probe: Any, call: Any, ref: Any) -> bool:
    """Whether the call's query input and key input were the same in run A and run B."""
    if probe.a.digests.get(call.path) != probe.b.digests.get(call.path):
        return False
    a, b = probe.a.handed.get(call.path, {}), probe.b.handed.get(ref.path, {})
    names = [name for name in KEY_STATES if name in a or name in b]
    return all(name in a and name in b and a[name].shape == b[name].shape and np.array_equal(a[name], b[name])
               for name in names)


def check_cross(claim: LayerClaim, probe: Any, path: str | None) -> list[LayerResult]:
    """The claim against every cross-attention call of its layer in run A (the module docstring); a mismatch
    where the layer makes no such call."""
    found = cross_calls(probe.a, path, claim.index)
    if not found:
        return [LayerResult(claim.stack, claim.index, claim.kind, "mismatch", None,
                            "transformers calls no cross-attention in this layer")]
    if len(probe.b.calls) != len(probe.a.calls):
        return [LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                            "the runs called attention a different number of times")]
    return [_check_one(claim, probe, i) for i in found]


def _check_one(claim: LayerClaim, probe: Any, index: int) -> LayerResult:
    call, ref = probe.a.calls[index], probe.b.calls[index]
    name = f"{claim.stack} cross-attention {claim.index}"
    if ref.path != call.path or ref.query.shape != call.query.shape or ref.key.shape != call.key.shape \
            or not _same_inputs(probe, call, ref):
        return LayerResult(claim.stack, claim.index, claim.kind, "not reached", None,
                           f"{name}: its query or key input differs between run A and run B")
    queries, keys = call.query.shape[-2], call.key.shape[-2]
    positions = np.asarray(probe.positions).reshape(-1)
    rotation = positions if positions.size == queries else np.arange(queries)
    q_pred, k_pred, bound_q, bound_k = predict(dataclasses.replace(claim, query_scale=None), ref, rotation,
                                               rotation, "identity", np.arange(keys))
    err_q, err_k = np.abs(q_pred - call.query), np.abs(k_pred - call.key)
    error = float(max(err_q.max(), err_k.max()))
    over = [side for side, err, bound in (("query", err_q, bound_q), ("key", err_k, bound_k)) if (err > bound).any()]
    if over:
        return LayerResult(claim.stack, claim.index, claim.kind, "mismatch", error,
                           f"{name} ({call.path}): {over[0]} max |Δ| {error:.3g} over its bound")
    return LayerResult(claim.stack, claim.index, claim.kind, "exact", error,
                       f"{name} ({call.path}): query and key the same at every position")


def split_sites(resolution: Resolution) -> tuple[Resolution, list[LayerClaim]]:
    """``resolution`` without its cross-attention claims, and those claims."""
    own = tuple(c for c in resolution.layers if c.site != "cross")
    return dataclasses.replace(resolution, layers=own), [c for c in resolution.layers if c.site == "cross"]


def compare_cross(claims: list[LayerClaim], own: Resolution, probe: Any, add: Callable[[LayerResult], None]) -> None:
    """Every cross-attention claim against run A (:func:`check_cross`), each in the layer list that the stack's
    self-attention claims were matched to (:func:`survey.compare.match_stacks`); ``add`` takes each result."""
    from survey.compare import match_stacks
    from survey.observed import layer_calls

    matched, _ = match_stacks(own, layer_calls(probe.a)) if own.layers else ({}, [])
    holding = list(dict.fromkeys(c.layer[0] for c in probe.a.calls if c.layer and CROSS.search(c.path)))
    for claim in claims:
        path = matched.get(claim.stack)
        if path not in holding and len(holding) == 1:  # the one list whose layers cross-attend (a decoder beside
            path = holding[0]  # an encoder of as many layers, which the self-attention match may have taken)
        for result in check_cross(claim, probe, path):
            add(result)


def rotated_cross(claims: tuple[LayerClaim, ...], rope: Any) -> tuple[LayerClaim, ...] | None:
    """The wrong answer that every cross-attention rotates its queries and keys by ``rope`` (None without one)."""
    if rope is None or not any(c.site == "cross" for c in claims):
        return None
    return tuple(dataclasses.replace(c, kind="rope", rope=rope) if c.site == "cross" else c for c in claims)


__all__ = ["KEY_STATES", "check_cross", "compare_cross", "cross_calls", "rotated_cross", "split_cross", "split_sites"]
