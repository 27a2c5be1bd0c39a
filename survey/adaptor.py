"""refpos's answer for a config, as survey claims: the one module that knows refpos's API.

Two interfaces, the newer first:

* :func:`refpos.model_positions` (where refpos has it): one typed record per layer of every stack, for
  every encoding, with the inputs each use of positions reads (the record's ``reads``; the position ids where
  a record states none: :func:`survey.sources.reads_of`). A ``refused`` or ``unknown`` record is refpos declining by
  name, and so is a key it reports as not modelled, unless the key concerns the attention core only (masks, scales:
  ``refpos.models.position_keys.ATTENTION_ONLY``), which is kept as a note.
* :func:`refpos.models.hf_layers` (the RoPE resolver): every decoder layer's :class:`refpos.RopeConfig` (or none),
  its query scale, and the layers without attention. A resolution is *refused* where refpos reports
  something that bears on positions as not modelled (an unknown model type, a rope key it does not read, a
  family's code gap); what it reports about the attention core only (windows, soft-caps, softmax scales) is
  a note.

With either, an exception whose message names the model type or says "not modelled" is a refusal, any other
exception an *error*.
"""

from __future__ import annotations

import warnings
from typing import Any

from survey.claims import LayerClaim, Resolution, refused_layers, without_repeats
from survey.cross import split_cross
from survey.sources import reads_of

#: not-modelled keys that concern the attention core, not positions (masks, scales): notes, not refusals
ATTENTION_CORE = frozenset({"sliding_window", "sliding_window_pattern", "max_window_layers",
                            "global_attn_every_n_layers", "attention_chunk_size", "attn_logit_softcapping",
                            "query_pre_attn_scalar", "attention_multiplier", "softmax_scale", "index_topk",
                            "layer_types"})
#: words of an exception message by which refpos declines (rather than fails to read the config)
REFUSAL_WORDS = ("not modelled", "not in the family table", "refpos does not model", "unknown family")



def api() -> str:
    """The refpos function the survey asks."""
    import refpos

    return "refpos.model_positions" if hasattr(refpos, "model_positions") else "refpos.models.hf_layers"


def is_refusal(message: str, model_type: str) -> bool:
    """Whether an exception message is refpos declining by name (the model type, or a not-modelled report)."""
    return f"'{model_type}'" in message or any(word in message for word in REFUSAL_WORDS)


def resolve(config: dict[str, Any]) -> Resolution:
    """refpos's per-layer answer for ``config`` (a config dict, as ``config.json`` holds it)."""
    import refpos

    model_type = str(config.get("model_type"))
    ask = _from_records if hasattr(refpos, "model_positions") else _from_schedule
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ask(config)
    except (ValueError, TypeError, KeyError) as exc:
        message = f"{type(exc).__name__}: {exc}"
        return Resolution(refused=message) if is_refusal(message, model_type) else Resolution(error=message)


def _tower(record: Any, stacks: Any) -> bool:
    """Whether token ids never reach ``record``'s stack: a stack not among the text ``stacks``, or one named as a
    text stack (Granite Speech's ``encoder_config`` makes an ``encoder``) whose kind no text model has (an audio
    encoder's table of frame distances: :attr:`refpos.models.kinds.EncodingKind.modalities`)."""
    from refpos.models.kinds import KINDS

    kind = KINDS.get(record.kind)
    return record.stack not in stacks or (kind is not None and "text" not in kind.modalities)


def _from_records(config: dict[str, Any]) -> Resolution:
    """:func:`refpos.model_positions`: one claim per record."""
    import refpos
    from survey.claims import STACKS

    answer = refpos.model_positions(config)
    records, cross = split_cross(answer.layers)  # a layer's cross-attention: survey.cross's claims
    layers, refused = [], []
    inputs = _input_sinusoids(records)
    tables = _input_tables(records)
    # vision towers (token ids never reach them), and the input sites of text stacks not claimed as a sinusoid
    towers = [r for r in records if _tower(r, STACKS) and r.stack.removesuffix(".input") not in inputs
              and id(r) not in tables and r.kind != "box_tables"]
    for r in records:
        more = {"reads": reads_of(r)}
        if r.kind == "unknown":  # whatever its stack is called: the family is not in the table
            refused.append(f"model_type {answer.model_type!r} is not in the family table; unknown: "
                           + ", ".join(r.unknown))
            continue
        if id(r) in tables:  # a text stack's input table beside its layers' bias (MPNet): claimed as the stack's
            layers.append(LayerClaim(tables[id(r)], -1, r.kind, params={
                "offset": r.offset, "table_size": r.table_size, "sinusoid": r.sinusoid, "dim": r.dim}, **more))
            continue
        if r.kind == "box_tables" and (stack := r.stack.removesuffix(".input")) in STACKS:  # survey.boxes
            layers.append(LayerClaim(stack, -1, "box_tables", params={"record": r, "reads": r.reads_at}, **more))
            continue
        if _tower(r, STACKS):
            continue
        where = (r.stack, r.index)
        if r.kind in ("rope", "mrope"):
            layers.append(LayerClaim(*where, "rope", rope=r.rope, query_scale=r.query_scale,
                                     detail=r.layer_type or "", indexer=getattr(r, "indexer", None), **more))
        elif r.kind == "none" and r.stack in inputs:  # no rotation: the stack's input carries the sinusoid
            site = inputs[r.stack]
            layers.append(LayerClaim(*where, "sinusoidal", query_scale=r.query_scale, detail=site.label, params={
                "offset": 0, "table_size": None, "dim": site.dim,
                "sinusoid": lambda positions, s=site: s.reference(positions=positions)}, **more))
        elif r.kind == "none":
            layers.append(LayerClaim(*where, "none", query_scale=r.query_scale, detail=r.layer_type or "", **more))
        elif r.kind == "no_attention":
            layers.append(LayerClaim(*where, "no_attention", detail=r.mixer))
        elif r.kind == "alibi":  # the bias at positions already read (the survey has read them: sources.py)
            layers.append(LayerClaim(*where, "alibi", params={"bias": r.bias_at,
                                                              "before_scale": r.before_scale, "record": r}, **more))
        elif r.kind == "t5":
            layers.append(LayerClaim(*where, "t5", params={"buckets": r.buckets_at,
                                                          "owns_table": r.owns_table, "table_layer": r.table_layer,
                                                          "record": r}, **more))
        elif r.kind == "layout_bias":  # survey.layout_bias; the boxes fed are sized by the stack's box tables
            rows = next((b.rows for b in records if b.kind == "box_tables" and b.stack == f"{r.stack}.input"), None)
            layers.append(LayerClaim(*where, "layout_bias", params={"record": r, "bias": r.bias_at,
                                                                   "box_rows": rows}, **more))
        elif r.kind in ("learned", "sinusoidal"):
            layers.append(LayerClaim(*where, r.kind, params={"offset": r.offset, "table_size": r.table_size,
                                                            "sinusoid": r.sinusoid, "dim": r.dim}, **more))
        elif r.kind == "deberta" and not r.relative_attention:  # the learned absolute table alone (or nothing)
            layers.append(LayerClaim(*where, "learned", params={"offset": 0, "table_size": r.max_position_embeddings,
                                                               "sinusoid": None, "dim": None})
                          if r.position_biased_input else LayerClaim(*where, "none"))
        elif r.kind == "deberta":  # relative terms the survey has no comparison for; the table claimed or not
            layers.append(LayerClaim(*where, "other", detail="deberta", params={"absolute": r.position_biased_input}))
        elif r.kind == "refused":
            continue  # said once per stack and reason below
        else:
            layers.append(LayerClaim(*where, "other", detail=r.kind))
    from refpos.models.position_keys import ATTENTION_ONLY

    refused = refused_layers([r for r in records if not _tower(r, STACKS)]) + refused + _unrun_sequence_stacks(towers)
    notes = [f"{stack} stack: {sum(r.stack == stack for r in towers)} layers resolved, {NOT_RUN}"
             for stack in dict.fromkeys(r.stack for r in towers if r.kind != "unknown")]
    part_paths = tuple(path + "." for _, path, _ in answer.parts)
    for key, what in answer.not_modelled.items():  # masks and scales are notes; any other key is a refusal
        in_a_part = key.startswith(part_paths)  # a network the survey does not run: noted, not compared
        (notes if in_a_part or key.rsplit(".", 1)[-1] in ATTENTION_ONLY else refused).append(f"{key}: {what}")
    return Resolution((*layers, *cross), "; ".join(without_repeats(refused)) or None, None, tuple(notes))


#: the end of the note on a tower's stack the token-id run does not reach (:mod:`survey.towers` runs it)
NOT_RUN = "not compared (the survey runs token ids only)"

#: the inputs that hold a token's place in the sequence (position ids, slots, the mask's running count)
SEQUENCE = ("position_ids", "cache_position", "mask_cumsum", "mask_count", "mask_cumsum_minus_one")


def _unrun_sequence_stacks(records: Any) -> list[str]:
    """A refusal naming each stack the survey does not run whose layers rotate by the tokens' places in a
    sequence (π0.5's action expert, whose positions continue after the prefix's; a speech model's second
    language stack): a second RoPE stack of the same sequence, which a row must not certify by comparing the
    first alone. Vision and audio towers rotate by grid or frame positions and stay notes."""
    found: dict[str, list[Any]] = {}
    for r in records:
        if r.kind in ("rope", "mrope") and set(reads_of(r).get("rotation", ())) & set(SEQUENCE):
            found.setdefault(r.stack, []).append(r)
    return [f"{stack} stack: {len(layers)} RoPE layers whose positions are read from "
            f"{', else '.join(reads_of(layers[0])['rotation'])}, {UNRUN}" for stack, layers in found.items()]


#: how the refusal of an unrun sequence stack ends (:mod:`survey.sequence_towers` runs it, dropping or sharpening it)
UNRUN = "a stack the survey does not run (its answer is not compared)"


def _input_tables(records: Any) -> dict[int, str]:
    """``id(record)`` -> text stack of each learned or sinusoidal ``<stack>.input`` record of a text stack whose
    own layers carry no absolute encoding (MPNet: a learned table at the input, a bucketed bias in every layer):
    claimed as the stack's input, index -1 (:func:`survey.compare.compare` checks it once for the stack)."""
    from survey.claims import STACKS

    absolute = {r.stack for r in records if r.kind in ("learned", "sinusoidal") and r.stack in STACKS}
    return {id(r): stack for r in records if r.kind in ("learned", "sinusoidal") and getattr(r, "at", "") == "input"
            and (stack := r.stack.removesuffix(".input")) in STACKS and r.stack != stack and stack not in absolute}


def _input_sinusoids(records: Any) -> dict[str, Any]:
    """Text stack name -> the 1-D sinusoid refpos adds at its input (a ``<stack>.input`` record of kind
    ``sinusoid1d`` read at the stack's positions: Canary's decoder), claimed on the stack's layers without RoPE
    as the sinusoidal kind is (:func:`survey.biases.check_absolute` compares it with the module's output)."""
    from survey.claims import STACKS

    return {stack: r for r in records if r.kind == "sinusoid1d" and getattr(r, "at", "") == "input"
            and (stack := r.stack.removesuffix(".input")) in STACKS and r.stack != stack}


def _from_schedule(config: dict[str, Any]) -> Resolution:
    """:func:`refpos.models.hf_layers`: the decoder's RoPE schedule."""
    import refpos

    schedule = refpos.models.hf_layers(config)
    layers = []
    for layer in schedule:
        if not layer.attention:
            layers.append(LayerClaim("decoder", layer.index, "no_attention", detail=layer.mixer or ""))
            continue
        scale = layer.scale  # the rule at p: the survey's probes are tokens whose ids are their slots
        kind = "rope" if layer.rope is not None else "none"
        layers.append(LayerClaim("decoder", layer.index, kind, rope=layer.rope, query_scale=scale,
                                 detail=layer.layer_type or ""))
    refused, notes = [], []
    for key, what in schedule.not_modelled.items():
        (notes if key.rsplit(".", 1)[-1] in ATTENTION_CORE else refused).append(f"{key}: {what}")
    return Resolution(tuple(layers), "; ".join(refused) or None, None, tuple(notes))
