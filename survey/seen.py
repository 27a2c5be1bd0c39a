"""The forwards a claim is graded on, and the reference of each call: run A and every case the model ran
(:mod:`survey.cases`), the positions a claim says a layer reads in each, and the rows of a layer's keys that are its
own tokens'.

A case's call is compared with run B's same call (the tokens at position 0, :mod:`survey.probe`) where the layer
read the same hidden states; a decoding step's rows with run B's rows of the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from survey.claims import LayerClaim
from survey.probe import Call, Probe
from survey.rotation import rounded_alike
from survey.sources import Inputs, inputs_of


@dataclass(frozen=True)
class Seen:
    """One forward a claim is graded on: run A or a case (:mod:`survey.cases`), its run and its inputs."""

    name: str
    run: Any
    inputs: Inputs
    case: Any = None  # the Case (None for run A)


def seen_of(probe: Probe) -> list[Seen]:
    """Run A and every case the model ran."""
    out = [Seen("run A", probe.a, inputs_of(None, probe))]
    out += [Seen(case.name, case.run, inputs_of(case, probe), case) for case in probe.cases if case.run is not None]
    return out


def case_reference(probe: Probe, seen: Seen, index: int) -> tuple[Call | None, str]:
    """The reference of call ``index`` of a case: run B's same call where the layer read the same hidden states
    (its digests; a decoding step's rows against run B's rows of the same tokens, the same up to the rounding of
    the layers below, :data:`~survey.rotation.INPUT_RTOL`), cut to the case's rows."""
    from survey.cases import PREFILL

    call = seen.run.calls[index]
    if len(seen.run.calls) != len(probe.b.calls) or not probe.b.digests:
        return None, "the case called attention a different number of times"
    ref = probe.b.calls[index]
    mode = "identity" if probe.b.neutralized.get(call.path) else "zero"
    if mode == "zero" and not probe.position_ids_taken:  # run B could not put the tokens at position 0
        return None, "the model takes no position ids and its rotary tables were not replaced in run B"
    queries = seen.inputs.queries
    if seen.case.queries:  # a decoding step: its rows are run B's PREFILL … of the same tokens
        mine, theirs = seen.run.inputs.get(call.path), probe.b.inputs.get(call.path)
        rows = slice(PREFILL, PREFILL + queries)
        if not mine or not theirs or len(mine) != len(theirs) or any(
                a.shape[-1] != b.shape[-1] or not rounded_alike(a[..., -queries:, :], b[..., rows, :])
                for a, b in zip(mine, theirs, strict=True)):
            return None, "the layer's input differs from run B's"
        keys = call.key.shape[-2]
        return Call(ref.path, ref.layer, ref.query[..., rows, :], ref.key[..., :keys, :], None, {},
                    ref.scaling), mode
    if seen.run.digests.get(call.path) != probe.b.digests.get(call.path):
        return None, "the layer's input differs from run B's"
    return ref, mode


def read(seen: Seen, source: tuple[str, ...], side: str = "query", padding_idx: int | None = None) -> np.ndarray:
    """The positions ``source`` gives the tokens on ``side`` in ``seen`` (``padding_idx``: the token a count of
    the input ids skips); a case that keeps some keys (a sliding window's cache) reads theirs."""
    found = seen.inputs.read(source, side, padding_idx)
    if side == "key" and seen.case is not None and seen.case.kept is not None:
        found = found[seen.case.kept]
    return found


def positions_of(claim: LayerClaim, seen: Seen, use: str, side: str = "query") -> np.ndarray:
    """The positions the claim says the layer reads for ``use`` (``rotation``, ``scale``) on ``side`` in ``seen``
    (:func:`read`)."""
    return read(seen, claim.source(use), side)


def negative(seen: Seen, source: tuple[str, ...]) -> bool:
    """Whether ``source`` puts one of the keys in ``seen`` at a negative position (OPT's and π0's counts at left
    padding), which refpos does not rotate (``apply_rope`` refuses it)."""
    return bool((read(seen, source, "key") < 0).any())


def unrotated(claim: LayerClaim, seen: Seen) -> str | None:
    """Why the claim's rotation is not compared in ``seen``: the source it reads puts a token at a negative
    position (:func:`negative`); None where every position is one refpos rotates."""
    if claim.kind != "rope" or not negative(seen, claim.source("rotation")):
        return None
    return (f"{seen.name}: not compared (the rotation reads {' else '.join(claim.source('rotation'))}, a negative "
            "position at a masked token, which refpos does not rotate)")


def own_keys(call: Call, ref: Call, queries: int) -> slice:
    """The rows of ``call``'s keys that are its own tokens', where the layer attends over more keys than tokens.

    A cache puts the keys it kept *before* the tokens' (the last ``queries`` rows); a merged self- and
    cross-attention (T5Gemma 2's decoder) puts the encoder's keys *after* them (the first ``queries`` rows). The
    extra rows tell which: keys that are not the tokens' do not depend on the tokens' positions, so they are the
    same in run B (whose rotation is the identity) as in this run. Where the last extra rows are equal in both runs
    and the first are not, the tokens' keys come first; else last."""
    rows, extra = call.key.shape[-2], call.key.shape[-2] - queries
    if extra <= 0 or ref.key.shape != call.key.shape:
        return slice(rows - queries, rows)
    appended, prepended = _unmoved(call.key, ref.key, queries)
    return slice(0, queries) if appended and not prepended else slice(extra, rows)


def own_queries(call: Call, ref: Call, queries: int) -> slice | None:
    """The rows of ``call``'s queries that are its tokens', where the layer runs more rows than tokens (a CLS token
    appended after the text, VideoPrism's): the extra rows are those the same in the reference run, after the
    tokens' or before them (:func:`own_keys`); None where there are none, or where nothing tells which they are
    (the extra rows moved with the positions, or the reference has other rows)."""
    rows, extra = call.query.shape[-2], call.query.shape[-2] - queries
    if extra <= 0 or ref.query.shape != call.query.shape:
        return None
    appended, prepended = _unmoved(call.query, ref.query, queries)
    return slice(0, queries) if appended else slice(extra, rows) if prepended else None


def _unmoved(mine: np.ndarray, theirs: np.ndarray, queries: int) -> tuple[bool, bool]:
    """Whether the rows after the first ``queries``, and the rows before the last ``queries``, are the same in both
    runs."""
    extra = mine.shape[-2] - queries
    return (np.array_equal(mine[..., queries:, :], theirs[..., queries:, :]),
            np.array_equal(mine[..., :extra, :], theirs[..., :extra, :]))
