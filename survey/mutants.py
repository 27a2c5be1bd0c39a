"""The survey proves it can fail: every exact row's claims changed one way at a time, each judged again on the
stored observation, each of which must come out wrong.

A *mutant* is refpos's resolution with one thing changed in every layer it concerns (:func:`mutants`):

=====================  ===========================================================================================
kind of layer          mutants
=====================  ===========================================================================================
RoPE                   the layout changed to each other one (half, interleaved, deinterleaved); the direction
                       every pair turns reversed (``angle_sign``: :math:`+p\\omega` for NanoChat's
                       :math:`-p\\omega`, and the other way for every other RoPE); the base
                       :math:`\\theta (1 + 10^{-4})`; each length the rule reads ±1 (the original and the maximum
                       length: LongRoPE's switch, dynamic NTK's growth, YaRN's and llama3's ranges); llama3's band
                       edges (the wavelengths :math:`L_0/h`, :math:`L_0/l`) ±1; the attention factor
                       :math:`\\times (1 + 10^{-3})`; the rotated width ±2 channels; every position + 1; the
                       token's slot read for the position id (or the id for the slot); the slot read for the slot
                       plus one (a claim of 1-indexed positions: ColPali's); the first layer without RoPE rotated
                       as the others
cross-attention        its queries and keys rotated as the stack's first RoPE (:mod:`survey.cross`): the queries at
                       the tokens' positions, the keys at their indices
query scale            each length of its rule ±1 (Llama 4's ``floor_scale``); the slot read for the id, or the id
                       for the slot
ALiBi                  the bias's sign; the last head's slope :math:`\\times (1 + 10^{-2})`; the keys read from the
                       position ids for the mask's running count, or the other way
T5 buckets             the bucket count ±1 (±2 where split between two directions), the largest
                       distance ±1, the direction flipped
learned / sinusoidal   the row read for every position ±1 (a learned table's offset; a sinusoid's rows); the rows
                       read at the slot for the id (or the id for the slot); a table read at a count of the mask
                       (OPT's) read at each other count (BLOOM's, π0's); a table read at the count of the input
                       ids that are not padding (RoBERTa's, fairseq's) read at the slot, and at the other count
                       (M2M100's for FSMT's, which adds the cache's length to a padding token too)
box tables             each catalogued mistake of the kind: the rows a port reads with x and y swapped, x1 from
                       the y table, no height and width, height and width swapped, the box read as
                       (x0, x1, y0, y1), extents counted inclusively, the top-left corner alone
layout bias            each mistake a record can state (x and y swapped, y at the top edge, x at the right edge,
                       half the buckets, half the largest distances, the x and y distance + 1, no spatial part),
                       the distances' sign flipped, no division by √d, the places read from the position ids
=====================  ===========================================================================================

A mutant that gives the same answer as refpos's on every input (a length the rule does not read, a layout of
a two-channel rotation) is *equivalent* and left out (:func:`differs`: the frequencies at every length up to
:math:`2^{21}` and the scales at every position near a threshold compared). A mutant graded exact *survives*:
the survey cannot tell refpos's answer from a wrong one there, the row is not exact, and the page lists the
mutant as a survey defect.

Two sets of mutants are left out where no input could tell them: the slot read for the id (or the id for the
slot) where the model takes no ids, so that its id is its slot on every input; and, where every forward was
handed ids (vLLM's always are), every mutant that changes only what a layer reads when it is handed none
(:func:`without_ids_only`: the slot for the slot plus one, one count of the mask for another, the offset of a
table whose ids are its rows), since what the model builds without ids is never read there (transformers'
survey reads it in its cases without ids, :mod:`survey.cases`). A mutant some input could tell but the probe holds
none of (:data:`UNTOLD`: M2M100's count of the input ids for FSMT's, which differ only at a padding token decoded
after a cache) is not tried either, and the row names it (:func:`untried`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from survey.claims import LayerClaim, Resolution
from survey.cross import rotated_cross
from survey.layout_bias import layout_bias_mutants
from survey.sources import COUNTED

THETA = 1e-4
#: how the mutants that read the other of the two position inputs are named
SLOT_OR_ID = "the other of slot and id"
#: the name of the mutant reading the slot where a model handed no ids builds the slot plus one
FALLBACK = "the slot for the slot plus one"
#: the inputs a caller hands a model: a source that reads one of them first reads what follows only without it
PASSED = ("position_ids", "row_ids", "decoder_position_ids")
#: the counts of the mask's ones a table's rows may be read at (BLOOM's, OPT's, π0's: refpos.models.sources.derived)
MASK_COUNTS = ("mask_cumsum", "mask_count", "mask_cumsum_minus_one")
#: the names of the mutants reading the slot for the count of the input ids, and the other count
UNCOUNTED = "the slot for the count of the input ids"
OTHER_COUNT = "the other count of the input ids"
GAIN = 1e-3
SLOPE = 1e-2
#: lengths at which a mutant's frequencies are compared with refpos's (with every threshold's neighbours)
LENGTHS = tuple(2**k for k in range(22))
#: where a scale rule reads its thresholds
SCALE_LENGTHS = ("floor_scale", "original_max_position_embeddings")


def _swap(sources: tuple[str, ...]) -> tuple[str, ...]:
    return ("cache_position",) if sources[0] == "position_ids" else ("position_ids",)


def _each(resolution: Resolution, kind: str, change: Callable[[LayerClaim], LayerClaim | None]) -> Resolution | None:
    """``resolution`` with ``change`` applied to every layer of ``kind``; None when it changes none."""
    changed, layers = False, []
    for claim in resolution.layers:
        new = change(claim) if claim.kind == kind else None
        changed |= new is not None and new != claim
        layers.append(claim if new is None else new)
    return dataclasses.replace(resolution, layers=tuple(layers)) if changed else None


def _rope(rope: Any, **changes: Any) -> Any:
    try:
        return dataclasses.replace(rope, **changes)
    except (ValueError, TypeError):
        return None


def _rope_mutants(rope: Any) -> Iterator[tuple[str, Any]]:
    """``(name, changed RopeConfig)`` of one RoPE (see the module docstring)."""
    for layout in ("half", "interleaved", "deinterleaved"):
        if layout != rope.layout:
            yield f"layout {layout}", _rope(rope, layout=layout)
    yield "angle sign flipped", _rope(rope, angle_sign=-rope.angle_sign)
    yield f"theta x (1 + {THETA:g})", _rope(rope, theta=rope.theta * (1 + THETA))
    for key in ("original_max_position_embeddings", "max_position_embeddings"):
        value = getattr(rope, key, None)
        if isinstance(value, int):
            for step in (-1, 1):
                yield f"{key} {step:+d}", _rope(rope, **{key: value + step})
    if rope.rope_type == "llama3":
        l0 = rope.original_max_position_embeddings
        for key in ("high_freq_factor", "low_freq_factor"):
            edge = l0 / getattr(rope, key)
            for step in (-1, 1):
                yield f"llama3 band edge L0/{key} {step:+d}", _rope(rope, **{key: l0 / (edge + step)})
    rotary = rope.rotary_dim
    for step in (-2, 2):
        if 2 <= rotary + step <= rope.head_dim:
            yield f"rotated width {step:+d}", _rope(rope, rotary_dim=rotary + step,
                                                    partial_rotary_factor=(rotary + step) / rope.head_dim)


def _zero_indexed(claim: LayerClaim) -> LayerClaim | None:
    """``claim`` turning by the slot where it turns by the slot plus one (PaliGemma's 1-indexed positions); None
    for a claim that reads no slot plus one."""
    source = claim.source("rotation")
    if "slot_plus_one" not in source:
        return None
    slots = tuple("cache_position" if name == "slot_plus_one" else name for name in source)
    return dataclasses.replace(claim, reads={**claim.reads, "rotation": slots})


def _scale_mutants(scale: Any) -> Iterator[tuple[str, Any]]:
    params = dict(scale.params)
    for key in SCALE_LENGTHS:
        if key in params:
            for step in (-1, 1):
                yield f"query scale {key} {step:+d}", dataclasses.replace(
                    scale, params=tuple({**params, key: params[key] + step}.items()))


def mutants(resolution: Resolution) -> list[tuple[str, Resolution]]:
    """Every mutant of ``resolution`` (the module docstring), named."""
    out: list[tuple[str, Resolution | None]] = []
    ropes = list(dict.fromkeys(c.rope for c in resolution.layers if c.kind == "rope"))
    for rope in ropes:
        for name, changed in _rope_mutants(rope):
            if changed is not None:
                out.append((name, _each(resolution, "rope", lambda c, r=rope, n=changed:
                                        dataclasses.replace(c, rope=n) if c.rope == r else None)))
    if ropes:
        out.append((f"attention factor x (1 + {GAIN:g})", _each(
            resolution, "rope", lambda c: dataclasses.replace(c, gain=c.gain * (1 + GAIN)))))
        out.append(("positions + 1", _each(resolution, "rope", lambda c: dataclasses.replace(c, offset=c.offset + 1))))
        out.append(("rotation reads the other of slot and id", _each(resolution, "rope", lambda c: dataclasses.replace(
            c, reads={**c.reads, "rotation": _swap(c.source("rotation"))}))))
        out.append((f"rotation reads {FALLBACK}", _each(resolution, "rope", _zero_indexed)))
        first_none = next((c for c in resolution.layers if c.kind == "none" and c.site == "self"), None)
        if first_none is not None:
            out.append(("a layer without RoPE rotated", dataclasses.replace(resolution, layers=tuple(
                dataclasses.replace(c, kind="rope", rope=ropes[0]) if c is first_none else c
                for c in resolution.layers))))
        crossed = rotated_cross(resolution.layers, ropes[0])  # a cross-attention's queries and keys rotated
        if crossed is not None:
            out.append(("cross-attention rotated", dataclasses.replace(resolution, layers=crossed)))
    for kind in ("rope", "none"):
        scales = list(dict.fromkeys(c.query_scale for c in resolution.layers if c.kind == kind and c.query_scale))
        for scale in scales:
            for name, changed in _scale_mutants(scale):
                out.append((name, _each(resolution, kind, lambda c, s=scale, n=changed:
                                        dataclasses.replace(c, query_scale=n) if c.query_scale == s else None)))
        if scales:
            out.append((f"query scale ({kind} layers) reads the other of slot and id", _each(
                resolution, kind, lambda c: dataclasses.replace(c, reads={**c.reads, "scale": _swap(c.source("scale"))})
                if c.query_scale else None)))
    out += list(_bias_mutants(resolution))
    out += list(_box_mutants(resolution))
    out += list(layout_bias_mutants(resolution, _each))
    return [(name, changed) for name, changed in out if changed is not None]


def _box_mutants(resolution: Resolution) -> Iterator[tuple[str, Resolution | None]]:
    """Each catalogued mistake of the box tables (:data:`refpos.encodings.box_tables_mistakes.MISTAKE_READS`):
    the claim reading the rows the mistaken port reads."""
    if not any(c.kind == "box_tables" for c in resolution.layers):
        return
    from refpos.encodings.box_tables_mistakes import MISTAKE_READS

    for name, (_, reads) in MISTAKE_READS.items():
        yield f"box tables: {name}", _each(resolution, "box_tables", lambda c, r=reads: dataclasses.replace(
            c, params={**c.params, "reads": lambda bbox, r=r: r(np.asarray(bbox))}))


def _bias_mutants(resolution: Resolution) -> Iterator[tuple[str, Resolution | None]]:
    def params(c: LayerClaim, **changes: Any) -> LayerClaim:
        return dataclasses.replace(c, params={**c.params, **changes})

    def last_head(bias: Callable[..., Any]) -> Callable[..., Any]:
        def changed(q: Any, k: Any) -> np.ndarray:
            out = np.array(bias(q, k), dtype=np.float64)
            out[..., -1, :, :] *= 1 + SLOPE
            return out
        return changed

    yield "ALiBi sign flipped", _each(resolution, "alibi", lambda c: params(
        c, bias=lambda q, k, b=c.params["bias"]: -np.asarray(b(q, k), dtype=np.float64)))
    yield f"ALiBi last slope x (1 + {SLOPE:g})", _each(resolution, "alibi", lambda c: params(
        c, bias=last_head(c.params["bias"])))
    yield "ALiBi keys read from the other of the mask's count and the ids", _each(
        resolution, "alibi", lambda c: dataclasses.replace(c, reads={**c.reads, "key": (
            "position_ids",) if "mask_cumsum" in c.source("key") else ("mask_cumsum",)}))
    for key, change in (("num_buckets", 1), ("num_buckets", -1), ("max_distance", 1), ("max_distance", -1),
                        ("bidirectional", None)):
        def t5(c: LayerClaim, key: str = key, change: int | None = change) -> LayerClaim | None:
            record = c.params.get("record")
            if record is None:
                return None
            value = getattr(record, key)
            if change is not None and key == "num_buckets" and record.bidirectional:
                change *= 2  # half the buckets per direction: an odd count is no count of this record
            new = dataclasses.replace(record, **{key: (not value) if change is None else value + change})
            return params(c, buckets=new.buckets_at, record=new)
        yield f"T5 {key} {'flipped' if change is None else f'{change:+d}'}", _each(resolution, "t5", t5)
    for kind in ("learned", "sinusoidal"):
        for step in (-1, 1):
            yield f"{kind} table offset {step:+d}", _each(resolution, kind, lambda c, s=step: _offset(c, s))
        yield f"{kind} table rows read {SLOT_OR_ID}", _each(resolution, kind, lambda c: dataclasses.replace(
            c, reads={**c.reads, "rows": _swap(c.source("rows"))}))
        for count in MASK_COUNTS:
            yield f"{kind} table rows read {count}", _each(resolution, kind, lambda c, n=count: _counted(c, n))
        yield f"{kind} table rows read {UNCOUNTED}", _each(resolution, kind, _uncounted)
        yield f"{kind} table rows read {OTHER_COUNT}", _each(resolution, kind, _other_count)


def _other_count(claim: LayerClaim) -> LayerClaim | None:
    """``claim`` reading the other of M2M100's and FSMT's counts of the input ids (:data:`COUNTED`: they differ at
    a padding token after a cache); None for a claim that reads neither."""
    source = claim.source("rows")
    if not any(name in COUNTED for name in source):
        return None
    other = {COUNTED[0]: COUNTED[1], COUNTED[1]: COUNTED[0]}
    return dataclasses.replace(claim, reads={**claim.reads, "rows": tuple(other.get(name, name) for name in source)})


def _offset(claim: LayerClaim, step: int) -> LayerClaim:
    """``claim``'s table read ``step`` rows further: its offset, and a sinusoid's rows with it (a learned table's
    rows are its weights, read at the offset)."""
    changed: dict[str, Any] = {"offset": int(claim.params.get("offset") or 0) + step}
    if claim.kind == "sinusoidal":
        changed["sinusoid"] = _shifted(claim.params.get("sinusoid"), step)
    return dataclasses.replace(claim, params={**claim.params, **changed})


def _uncounted(claim: LayerClaim) -> LayerClaim | None:
    """``claim`` reading its table rows at the slot where it reads the count of the non-padding input ids; None
    for a claim that reads no such count."""
    source = claim.source("rows")
    if not any(name in COUNTED for name in source):
        return None
    return dataclasses.replace(claim, reads={**claim.reads, "rows": tuple(
        "cache_position" if name in COUNTED else name for name in source)})


def _counted(claim: LayerClaim, count: str) -> LayerClaim | None:
    """``claim`` reading its table rows from the mask's ``count`` where it reads another of :data:`MASK_COUNTS`
    (OPT's ``mask_count`` read as π0's ``mask_cumsum_minus_one``); None for a claim that reads none, or this one."""
    source = claim.source("rows")
    if count in source or not any(name in MASK_COUNTS for name in source):
        return None
    return dataclasses.replace(claim, reads={**claim.reads, "rows": tuple(
        count if name in MASK_COUNTS else name for name in source)})


def _shifted(sinusoid: Callable[[np.ndarray], Any] | None, step: int) -> Callable[[np.ndarray], Any] | None:
    """A claim's sinusoid read ``step`` rows further: position ``p`` answered with the row of ``p + step``."""
    if sinusoid is None:
        return None
    return lambda positions: sinusoid(np.asarray(positions, dtype=np.int64) + step)


def differs(original: Resolution, mutant: Resolution) -> bool:
    """Whether ``mutant`` answers some input otherwise than ``original`` (else it is equivalent): RoPE
    frequencies and attention factors at every length of :data:`LENGTHS` and near every length the two
    read, rotations of every unit vector, query scales near every threshold; any other change differs."""
    import refpos

    for a, b in zip(original.layers, mutant.layers, strict=True):
        if a == b:
            continue
        if (a.kind, a.gain, a.offset, a.reads, a.params.keys()) != (b.kind, b.gain, b.offset, b.reads,
                                                                    b.params.keys()) or a.params != b.params:
            return True
        if a.rope != b.rope:
            if a.rope is None or b.rope is None or _rotation(a.rope) != _rotation(b.rope):
                return True
            lengths = set(LENGTHS) | {n + s for r in (a.rope, b.rope) for n in _lengths(r) for s in (-1, 0, 1, 2)}
            for length in sorted(x for x in lengths if x >= 1):
                fa, fb = (refpos.rope_frequencies(r, seq_len=length) for r in (a.rope, b.rope))
                if fa[1] != fb[1] or not np.array_equal(refpos.to_numpy(fa[0]), refpos.to_numpy(fb[0])):
                    return True
        if a.query_scale != b.query_scale:
            if a.query_scale is None or b.query_scale is None:
                return True
            marks = [int(v) for _, v in a.query_scale.params + b.query_scale.params if float(v).is_integer()]
            p = np.unique(np.clip(np.concatenate([np.arange(64), *(np.arange(m - 4, m + 4) for m in marks)]), 0, None))
            if not np.array_equal(a.query_scale(p), b.query_scale(p)):
                return True
    return False


def _lengths(rope: Any) -> list[int]:
    return [v for key in ("original_max_position_embeddings", "max_position_embeddings")
            if isinstance(v := getattr(rope, key, None), int)]


def _rotation(rope: Any) -> tuple[Any, ...]:
    """What a rotation is besides its frequencies: which channels pair up, where the span sits and which way
    each pair turns (a layout change of a two-channel span is no change): the signs of the rotation at position
    1 with every frequency 1 (cos 1 and sin 1 both positive)."""
    import refpos

    at_one = refpos.to_numpy(refpos.apply_rope(np.eye(rope.head_dim)[:, None, :], np.array([1]), rope,
                                               frequencies=(np.ones(rope.n_pairs), 1.0)))
    return tuple(map(tuple, np.sign(at_one[:, 0, :]).astype(int)))


def without_ids_only(original: Resolution, mutant: Resolution) -> bool:
    """Whether ``mutant`` changes only what a layer reads where it is handed no ids: in every layer where the two
    differ, only a source that reads the same passed input first (:data:`PASSED`), the inputs it falls back on
    changed (OPT's ``position_ids`` else the mask's count read at π0's count; PaliGemma's ids else the slot plus
    one read at the slot), or the offset of a table whose ids passed are its rows (RoBERTa's ``row_ids``: the
    offset is added only to the positions it counts itself)."""
    if len(original.layers) != len(mutant.layers):
        return False
    changed = [(old, new) for old, new in zip(original.layers, mutant.layers, strict=True) if old is not new]
    for old, new in changed:
        if dataclasses.replace(new, reads=old.reads, params=old.params) != old:
            return False
        if new.params != old.params and not (_but_offset(new) == _but_offset(old) and all(
                claim.source("rows")[0] == "row_ids" for claim in (old, new))):
            return False
        for use in {*old.reads, *new.reads}:
            before, after = old.source(use), new.source(use)
            if before != after and not (before[0] == after[0] and before[0] in PASSED):
                return False
    return bool(changed)


def _but_offset(claim: LayerClaim) -> dict[str, Any]:
    """A claim's parameters less its table offset (and those it leaves unset)."""
    return {key: value for key, value in claim.params.items() if key != "offset" and value is not None}


def _decoded_padding(probe: Any) -> bool:
    """Whether a decoding step of the padding token ran: the one input where M2M100's and FSMT's counts differ."""
    return any(case.run is not None and case.queries and case.padding_token is not None
               for case in getattr(probe, "cases", []))


#: mutants a probe may hold no input to tell from refpos's answer, by name: whether it holds one, and why not. Such
#: a mutant is not tried where it holds none, and the row says so (:func:`untried`) rather than counting it
UNTOLD: dict[str, tuple[Callable[[Any], bool], str]] = {
    OTHER_COUNT: (_decoded_padding, "the counts differ only at a padding token decoded after a cache, and no "
                                    "such step ran: the model takes no cache, or the survey does not decode it"),
}


def untried(resolution: Resolution, probe: Any) -> list[str]:
    """The row's notes on the mutants of ``resolution`` that ``probe`` holds no input to tell (:data:`UNTOLD`)."""
    return [f"not tried: {name} ({UNTOLD[key][1]})" for name, mutant in mutants(resolution)
            if (key := _left_out(resolution, name, mutant, probe)) in UNTOLD]


def _left_out(resolution: Resolution, name: str, mutant: Resolution, probe: Any) -> str | None:
    """Why a mutant is not tried on ``probe`` (None: it is): ``"equivalent"`` to refpos's answer; ``"no ids"``,
    the slot read for the id of a model that takes none (its id is its slot on every input); ``"handed ids"``,
    what a model builds without ids where every forward was handed them (vLLM's always are); or the key of
    :data:`UNTOLD` whose input the probe does not hold (the row says so: :func:`untried`)."""
    from survey.seen import seen_of

    if not differs(resolution, mutant):
        return "equivalent"
    if SLOT_OR_ID in name and not probe.position_ids_taken:
        return "no ids"
    if all(seen.inputs.position_ids is not None for seen in seen_of(probe)) and without_ids_only(resolution, mutant):
        return "handed ids"
    return next((key for key, (told, _) in UNTOLD.items() if key in name and not told(probe)), None)


def survivors(resolution: Resolution, probe: Any) -> tuple[int, list[str]]:
    """``(mutants tried, names of those graded exact)`` on ``probe``; a mutant left out (:func:`_left_out`) is not
    tried."""
    from survey.compare import compare

    tried, survived = 0, []
    for name, mutant in mutants(resolution):
        if _left_out(resolution, name, mutant, probe) is not None:
            continue
        tried += 1
        verdict = compare(mutant, probe, stop_at_mismatch=True)
        if not verdict.mismatches:
            survived.append(name)
    return tried, survived


__all__ = ["UNTOLD", "differs", "mutants", "survivors", "untried", "without_ids_only"]
