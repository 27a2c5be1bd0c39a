r"""Claims of a bias on the logits (ALiBi, T5 buckets) and of an absolute encoding at a stack's input.

ALiBi
    The bias a layer receives is read from what transformers built: the eager call's ``position_bias`` or
    finite mask entries, else the return value of the modeling module's ALiBi builder (``build_alibi_tensor``
    ...), else the ``alibi`` tensor handed to the layer's attention. It is compared with refpos's
    ``bias(q_positions, k_positions)`` on the entries a causal query sees (key <= query), each row less its
    diagonal entry: the softmax ignores a per-row constant, and the forms differ by one (BLOOM's
    :math:`m_h j` against :math:`-m_h (i - j)`). A builder that builds for the longest sequence (MPT) is
    read at its last T keys, the slice the attention takes. Bound: the float32 products, 4 ulp of the
    largest entry.
T5 buckets
    The bucket map a layer computed (the return value of its ``_relative_position_bucket`` for the
    relative positions key - query) equals refpos's ``buckets(q, k)`` exactly, and so does the function at
    every relative position of :data:`survey.probe.SWEEP` (a few tokens reach only the exact buckets of short
    distances: a largest distance off by one shows only past it); a layer refpos says reuses another's table
    must compute none.
Learned and sinusoidal positions
    A learned table must be read at position + refpos's offset, and have refpos's number of rows (when
    refpos says it); its read is an embedding call, else a trained table indexed by the positions. The rows
    are the tokens' (a model that pads its sequence to its attention window reads the padding's after them).
    A sinusoid must equal refpos's ``sinusoid(positions)`` within the float32 evaluation of its angles,
    :math:`(3\,p_{\max} + 4)\,2^{-24}`: an embedding's rows, a positional module's output, or the rows of a
    table indexed by the positions (CTRL's ``pos_encoding[position_ids, :]``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.claims import LayerClaim, LayerResult
from survey.observed import input_carries_positions, layer_calls, own_positions, read_offset, role
from survey.probe import SWEEP, Probe
from survey.table_rows import case_rows, case_sinusoid, rows_offset, sinusoid_bound

EPS32 = 2.0**-24


def _result(claim: LayerClaim, status: str, error: float | None = None, cause: str = "") -> LayerResult:
    return LayerResult(claim.stack, claim.index, claim.kind, status, error, cause)


def _in_layer(layer: tuple[str, int] | None, path: str, index: int) -> bool:
    return layer is not None and layer == (path, index)


# ---------------------------------------------------------------------------------------------- ALiBi
def observed_alibi(run: Any, path: str, index: int, t: int) -> np.ndarray | None:
    """The ALiBi bias layer ``index`` of list ``path`` received in ``run`` over ``t`` keys, as
    ``(H, Tq or 1, Tk)``, or None."""
    for i in layer_calls(run).get((path, index), []):
        call = run.calls[i]
        for name, value in call.tensors.items():
            if "alibi" in name or name == "position_bias":
                return value.reshape(-1, *value.shape[-2:])
    for built in run.builders:
        if "alibi" in built.name.lower() and built.output.shape[-1] >= t and built.output.ndim >= 2:
            # built for the longest sequence (MPT): the attention reads its last T keys
            return built.output[..., -t:].reshape(-1, *built.output.shape[-2:-1], t)
    for module, handed in run.handed.items():
        if module.startswith(f"{path}.{index}."):
            for name, value in handed.items():
                if "alibi" in name and value.shape[-1] == t:
                    return value.reshape(-1, *value.shape[-2:])
    return None


def check_alibi(claim: LayerClaim, probe: Probe, path: str) -> Any:
    """The bias of run A and of every case against refpos's, on every entry a query sees (its own key and
    the unmasked keys before it), each row less its entry at the query's own key (the softmax ignores a
    per-row constant), the keys' and the queries' positions read from the inputs the claim says."""
    from survey.seen import seen_of

    worst = 0.0
    for seen in seen_of(probe):
        inputs, kept = seen.inputs, None if seen.case is None else seen.case.kept
        keys = inputs.slots.size if kept is None else kept.size
        observed = observed_alibi(seen.run, path, claim.index, keys)
        if observed is None:
            if seen.case is None:
                return _result(claim, "mismatch", None, "transformers built no ALiBi bias for this layer")
            continue
        k = inputs.read(claim.source("key"), "key")
        q = inputs.read(claim.source("query"), "query")
        k = k if kept is None else k[kept]
        expected = np.asarray(claim.params["bias"](q + claim.offset, k + claim.offset), dtype=np.float64)
        expected = expected.reshape(-1, *expected.shape[-2:])  # (H, Tq, Tk)
        if observed.shape[0] != expected.shape[0]:
            return _result(claim, "mismatch", None,
                           f"ALiBi heads: refpos {expected.shape[0]}, transformers {observed.shape[0]}")
        observed = np.broadcast_to(observed, expected.shape)
        slots = inputs.slots if kept is None else inputs.slots[kept]
        mask = np.ones(inputs.slots.size, dtype=bool) if inputs.attention_mask is None else \
            inputs.attention_mask.astype(bool)
        mask = mask if kept is None else mask[kept]
        own = np.arange(keys - inputs.queries, keys)  # each query's own key
        seen_entries = (slots[None, :] <= slots[own][:, None]) & mask[None, :] & mask[own][:, None]
        diff = (observed - observed[..., np.arange(own.size), own][..., None]) - (
            expected - expected[..., np.arange(own.size), own][..., None])
        diff = np.where(seen_entries, diff, 0.0)
        error = float(np.abs(diff).max())
        worst = max(worst, error)
        bound = 4 * EPS32 * (np.abs(expected).max() + np.abs(observed).max())
        if error > bound:
            h, i, j = (int(v) for v in np.unravel_index(np.abs(diff).argmax(), diff.shape))
            return _result(claim, "mismatch", error, f"{seen.name}: ALiBi bias: max |Δ| {error:.3g} (head {h}, "
                           f"query slot {int(slots[own[i]])}, key slot {int(slots[j])}; refpos reads "
                           f"{', '.join(claim.source('key'))} for the keys)")
    return _result(claim, "exact", worst)


# ------------------------------------------------------------------------------------------- T5 buckets
def stack_builders(probe: Probe, path: str) -> list[Any]:
    """The bucket maps computed outside every layer by the module holding layer list ``path`` (MPNet's encoder
    computes one bias before running its layers and hands it to each): the table of the stack's first layer."""
    owner = path.rsplit(".", 1)[0] if "." in path else ""
    return [b for b in probe.a.builders if "bucket" in b.name and b.layer is None
            and getattr(b, "caller", "") == owner]


def check_t5(claim: LayerClaim, probe: Probe, path: str) -> Any:
    """The bucket map of a layer refpos says owns its table, or none where it says the layer reuses one; a map
    the stack computes before its layers (:func:`stack_builders`) is the table of the layer refpos says owns it
    (its ``table_layer``)."""
    built = [b for b in probe.a.builders if "bucket" in b.name and _in_layer(b.layer, path, claim.index)]
    owns = bool(claim.params.get("owns_table", True))
    if owns and not built and claim.params.get("table_layer", claim.index) == claim.index:
        built = stack_builders(probe, path)
    if not owns:
        if built:
            return _result(claim, "mismatch", None, "transformers computes a bucket table in this layer; refpos "
                           f"says it reuses layer {claim.params.get('table_layer')}'s")
        return _result(claim, "exact")
    if not built:
        return _result(claim, "mismatch", None, "transformers computes no bucket map in this layer; refpos says "
                       "it owns a table")
    buckets = built[0].output
    tq, tk = buckets.shape[-2:]
    expected = np.asarray(claim.params["buckets"](np.arange(tq), np.arange(tk)))
    wrong = int(np.count_nonzero(expected != buckets.reshape(tq, tk)))
    if wrong:
        return _result(claim, "mismatch", float(np.abs(expected - buckets.reshape(tq, tk)).max()),
                       f"bucket map: {wrong} of {tq * tk} entries differ")
    swept = built[0].swept
    if swept is not None:  # the function at every distance of SWEEP: bucket(k - q) with q = 0
        expected = np.asarray(claim.params["buckets"](np.zeros(1, dtype=np.int64), SWEEP)).reshape(-1)
        differ = np.flatnonzero(expected != swept.reshape(-1))
        if differ.size:
            return _result(claim, "mismatch", float(np.abs(expected - swept.reshape(-1)).max()),
                           f"bucket function: {differ.size} of {SWEEP.size} relative positions differ (first at "
                           f"k - q = {int(SWEEP[differ[0]])}: refpos {int(expected[differ[0]])}, transformers "
                           f"{int(swept.reshape(-1)[differ[0]])})")
    return _result(claim, "exact", 0.0)


# ------------------------------------------------------------------------------------- absolute positions
def check_absolute(claim: LayerClaim, probe: Probe, lookups: list[tuple[str, int, int]], single: bool) -> Any:
    """A stack's learned or sinusoidal input encoding (checked once per stack). ``single``: refpos resolves
    one stack, which every table belongs to (BERT's ``embeddings.position_embeddings`` names no encoder);
    with two, each stack reads the tables under its own name."""
    mine = [entry for entry in lookups if single or role(entry[0]) == claim.stack]
    offset = int(claim.params.get("offset", 0))
    run, positions = own_positions(probe)
    indexed = [(read.table, found, read.rows, read) for read in getattr(run, "indexed", [])
               if (single or role(read.table) == claim.stack)
               and (found := read_offset(read, positions, run)) is not None]
    if claim.kind == "learned" and not mine:  # a trained table indexed by the positions, without an embedding call
        mine = [(table, found, rows) for table, found, rows, read in indexed if read.trained]
    if claim.kind == "learned":
        if not mine:
            if input_carries_positions(probe):
                return _result(claim, "not reached", None, "the stack's input changes with the positions, but "
                               "not through an embedding lookup the survey sees")
            return _result(claim, "mismatch", None, "transformers reads no position table")
        table, found, rows = mine[0]
        size = claim.params.get("table_size")
        expected = rows_offset(claim, run is probe.a and probe.position_ids_taken, offset)
        if found != expected or (size is not None and rows != size):
            return _result(claim, "mismatch", None, f"position table {table}: transformers reads row p + {found} of "
                           f"{rows}, refpos p + {expected} of {size}")
        return _with_cases(case_rows(claim, probe, table, offset), claim, 0.0)
    try:
        expected = np.asarray(claim.params["sinusoid"](positions), dtype=np.float64)  # (T, dim)
    except ValueError as exc:  # the claim has no row for a position the model read
        return _result(claim, "mismatch", None, f"refpos's sinusoid at positions {positions.tolist()}: {exc}")
    candidates = [lk.vectors[..., : positions.size, :] for lk in run.lookups
                  if (lk.table, read_offset(lk, positions, run), lk.rows) in mine]
    candidates += [out for module, out in run.positional.items() if single or role(module) == claim.stack]
    candidates += [read.vectors[..., : positions.size, :] for *_, read in indexed]
    bound = sinusoid_bound(positions + offset)  # the angle is taken at the row
    errors = []
    for vectors in candidates:
        v = vectors.reshape(-1, *vectors.shape[-2:])[0] if vectors.ndim >= 2 else vectors
        if v.shape[-2:] == expected.shape:
            errors.append(float(np.abs(v - expected).max()))
    if not errors:
        if input_carries_positions(probe):
            return _result(claim, "not reached", None, "the stack's input changes with the positions, but not "
                           f"through a table or module output of shape {expected.shape} the survey sees")
        return _result(claim, "mismatch", None, "transformers adds no sinusoid of this shape "
                       f"{expected.shape} to the stack's input")
    error = min(errors)
    if error > bound:
        return _result(claim, "mismatch", error, f"sinusoid: max |Δ| {error:.3g}")
    stored = [(table, found) for table, found, _ in mine if found == offset]  # a sinusoid stored as a table
    in_cases = case_rows(claim, probe, *stored[0]) if stored else case_sinusoid(claim, probe, single)
    return _with_cases(in_cases, claim, error)


def _with_cases(in_cases: LayerResult, claim: LayerClaim, error: float) -> LayerResult:
    """Run A's exact result (its ``error``) unless a case differs; the cases not compared named in its cause."""
    return in_cases if in_cases.status == "mismatch" else _result(claim, "exact", error, in_cases.cause)

