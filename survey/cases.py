"""The probe's tokens run again with other inputs: every threshold the config defines crossed, and every
input a layer may read its positions from set apart from the others.

Run A (:mod:`survey.probe`) passes small gapped position ids in slots ``0 … T-1``. The cases here
(:func:`cases_for`) add, for a model that takes position ids:

``ids up to M``
    one case per largest id ``M``: each length the config states (``max_position_embeddings``,
    ``original_max_position_embeddings``, Llama 4's ``floor_scale`` …: :data:`THRESHOLD_KEYS`) less one, itself
    and plus one, twice the largest, and 131071. A rule that reads the sequence length
    (``max(position_ids) + 1``: dynamic NTK, LongRoPE's switch) is seen on both sides of each threshold and at
    several lengths; a rule of the position (Llama 4's ``floor((p + 1) / f)``) at ``f - 2``, ``f - 1`` and ``f``.
    The sequence stays short (:func:`threshold_ids`): long ids on a few tokens, the way decoding places a token
    at a large position, so that the tiny model's memory does not grow with the position.
``packed``
    two sequences packed into one row (ids ``0 1 2 3 0 1 2 3``) with no mask: transformers masks each off the
    other.
and, for every model:

``left padded``
    run A's ids (where taken) with the first :data:`PADDING` tokens masked out: the mask's running count, the
    slot and the id are three different numbers.
``left padded, no ids``
    (a model that takes position ids) the same mask and no ids: the model builds its own, from the slot or from
    the mask (OPT's ``Σm·m − 1``, BLOOM's ``(Σm − 1)·m``), and the record's fallback source is what is compared.
``masked inside``
    run A's ids with the token :data:`HOLE` masked out: after it, the mask's running count is neither the slot
    nor the slot less a constant (a per-row constant would vanish in the softmax).
``masked inside, no ids``
    (a model that takes position ids) the same mask and no ids: at the masked token the three counts of the mask
    part (BLOOM's 0, OPT's −1, π0's count so far less one), which left padding alone does not show (OPT's and
    π0's both put padding at −1).
``padding tokens, no mask``
    (a config that names its padding token) the first :data:`PADDING` tokens replaced by ``pad_token_id``, and
    neither a mask nor ids passed: a model that counts its positions off the input ids (RoBERTa's and fairseq's
    ``input_ids_cumsum``) skips them, and every count of a mask and the slot do not. The tokens differ from run
    B's, so its attention calls are not compared; its table rows are.
``decoding a padding token, no ids``
    (a config that names its padding token) the decoding case's step, its token the padding token, as a finished
    sequence of a batch decodes: M2M100's count keeps it at the padding row, FSMT's adds the cache's length
    (``input_ids_cumsum`` against ``input_ids_cumsum_plus_cache``).
``decoding``
    :data:`PREFILL` tokens (ids ``0 …``) run with a cache, then one more token whose id (where taken) is
    :data:`FAR_ID` in slot :data:`PREFILL`: a layer that reads the token's slot and one that reads its id part
    here. The case states every key's id, slot and mask entry; its last ``queries`` (one) are the step's.
``decoding at slot t``
    for each threshold ``t`` up to :data:`FAR_SLOTS`: the cache padded with zeros (id :data:`SYNTHETIC`) so that
    :data:`STEP` tokens with small ids sit in slots ``t - 2 … t``: a rule of the slot is crossed by the slot
    (Llama 4's temperature reads ``arange(T) + past_seen_tokens``), and its id is not the slot.

Before each case the model runs once at position 0 (its output dropped): a rule that keeps state across
calls (transformers' dynamic NTK grows its frequencies and resets them below the original length) starts
every case from its original frequencies, as a fresh model would; positions a model kept from an earlier call
(the Qwen2-VL family's ``rope_deltas``, :data:`STATE`) are forgotten before and after each case.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from survey.boxes import resized
from survey.probe import Case, Recorder, _forward, _patched

#: config keys holding a length (or a position) at which a rule changes (top level, rope dicts, text_config)
THRESHOLD_KEYS = ("max_position_embeddings", "original_max_position_embeddings", "floor_scale", "n_positions",
                  "max_sequence_length", "seq_length", "max_seq_len")
#: the largest id of one case besides the thresholds' neighbours: a long context, beyond most defaults
LONG = 131071
#: ids a float32 position holds exactly (2**24), less a margin: no case goes beyond
LARGEST = 2**23
#: masked tokens at the start of the left-padded case
PADDING = 2
#: the token masked out in the middle of the "masked inside" case
HOLE = 3
#: the tokens of a threshold case (run A's number: :data:`survey.probe.POSITIONS`)
CASE_TOKENS = 8
#: tokens of the decoding case's prefill, and the id of the token decoded after them (in slot PREFILL)
PREFILL = 5
FAR_ID = 32767
#: thresholds up to this many slots are also crossed by the slot (a cache padded with zeros: its memory grows
#: with the slot), STEP tokens at a time; a synthetic cache entry has the id SYNTHETIC (no token)
FAR_SLOTS = 16384
STEP = 3
SYNTHETIC = -1
#: the names a forward takes its cache by (transformers renamed ``past_key_values`` to ``cache``), and its output
CACHE_ARGUMENTS = ("cache", "past_key_values")


def thresholds(config: dict[str, Any]) -> list[int]:
    """Every length of :data:`THRESHOLD_KEYS` the config dict states, at any depth (rope dicts, sub-configs)."""
    found: set[int] = set()

    def walk(values: Any) -> None:
        if isinstance(values, dict):
            for key, value in values.items():
                if key in THRESHOLD_KEYS and isinstance(value, (int, float)) and not isinstance(value, bool) \
                        and float(value).is_integer() and 8 < value <= LARGEST:
                    found.add(int(value))
                else:
                    walk(value)
        elif isinstance(values, list):
            for value in values:
                walk(value)
    walk(config)
    return sorted(found)


def threshold_ids(config: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """``(name, ids)`` of the threshold cases: for each largest id ``M`` (each threshold ``t - 1, t, t + 1``,
    twice the largest threshold, :data:`LONG`), the ids ``0 1 2 5 M-3 M-2 M-1 M``: as many as run A's tokens,
    so that every layer reads the same hidden states as in run B (the probe's reference)."""
    found = thresholds(config)
    largest = {m for t in found for m in (t - 1, t, t + 1)} | {LONG} | ({2 * found[-1]} if found else set())
    out = []
    for m in sorted(x for x in largest if 5 < x <= LARGEST):
        ids = sorted({0, 1, 2, 5, m - 3, m - 2, m - 1, m})
        ids = sorted(set(ids) | set([i for i in range(m) if i not in ids][: CASE_TOKENS - len(ids)]))
        out.append((f"ids up to {m}", np.asarray(ids, dtype=np.int64)))
    return out


def cases_for(config: dict[str, Any], positions: np.ndarray, taken: bool) -> list[Case]:
    """The cases of the module docstring, not yet run."""
    out: list[Case] = []
    if taken:
        for name, ids in threshold_ids(config):
            out.append(Case(name, ids, np.arange(ids.size), np.ones(ids.size, dtype=np.int64)))
        half = max(2, positions.size // 2)
        packed = np.concatenate([np.arange(half), np.arange(half)]).astype(np.int64)
        out.append(Case("packed", packed, np.arange(packed.size), None))
    mask = np.ones(positions.size, dtype=np.int64)
    mask[:PADDING] = 0
    out.append(Case("left padded", positions.copy() if taken else None, np.arange(positions.size), mask))
    if taken:
        out.append(Case("left padded, no ids", None, np.arange(positions.size), mask))
    inside = np.ones(positions.size, dtype=np.int64)
    inside[HOLE] = 0
    out.append(Case("masked inside", positions.copy() if taken else None, np.arange(positions.size), inside))
    if taken:
        out.append(Case("masked inside, no ids", None, np.arange(positions.size), inside))
    padding_token = _padding_token(config)
    if padding_token is not None:
        out.append(Case("padding tokens, no mask", None, np.arange(positions.size), None,
                        padding_token=padding_token))
    decoded = np.asarray([*range(PREFILL), FAR_ID], dtype=np.int64) if taken else None
    out.append(Case("decoding", decoded, np.arange(PREFILL + 1), np.ones(PREFILL + 1, dtype=np.int64), queries=1))
    if padding_token is not None:
        out.append(Case("decoding a padding token, no ids", None, np.arange(PREFILL + 1),
                        np.ones(PREFILL + 1, dtype=np.int64), queries=1, padding_token=padding_token))
    for t in (t for t in thresholds(config) if t <= FAR_SLOTS):
        # PREFILL real tokens, zeros up to slot t - 3, then STEP tokens in slots t - 2 … t
        keys = t + 1
        ids = np.full(keys, SYNTHETIC, dtype=np.int64)
        ids[:PREFILL], ids[-STEP:] = np.arange(PREFILL), np.arange(PREFILL, PREFILL + STEP)
        out.append(Case(f"decoding at slot {t}", ids if taken else None, np.arange(keys),
                        np.ones(keys, dtype=np.int64), queries=STEP))
    return out


def _padding_token(config: dict[str, Any]) -> int | None:
    """The config's ``pad_token_id`` (its text config's where it states none), None where neither names one."""
    for values in (config, config.get("text_config") or {}):
        token = values.get("pad_token_id") if isinstance(values, dict) else None
        if isinstance(token, int) and not isinstance(token, bool) and token >= 0:
            return token
    return None


def _as_float32(run: Any) -> Any:
    """A case's run stored in float32: its values were float32 (or bfloat16) tensors, so nothing is lost."""
    def down(x: Any) -> Any:
        return x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype == np.float64 else x
    for call in run.calls:
        call.query, call.key, call.mask = down(call.query), down(call.key), down(call.mask)
        call.tensors = {k: down(v) for k, v in call.tensors.items()}
    for applied in run.applied:
        applied.before, applied.after = [down(x) for x in applied.before], [down(x) for x in applied.after]
    for built in run.builders:
        built.output = down(built.output)
    for lookup in run.lookups:
        lookup.vectors = down(lookup.vectors)
    run.handed = {k: {n: down(v) for n, v in handed.items()} for k, handed in run.handed.items()}
    run.positional = {k: down(v) for k, v in run.positional.items()}
    return run


#: the state a model keeps between calls where it built its own positions (the Qwen2-VL family's M-RoPE offsets,
#: computed from the mask when no ids are passed and reused on later calls), forgotten around every case
STATE = ("rope_deltas",)


def _forget(model: Any) -> None:
    """Every module's :data:`STATE` back to a fresh model's (None)."""
    for module in model.modules():
        for name in STATE:
            if getattr(module, name, None) is not None:
                setattr(module, name, None)


def _reset(model: Any, inputs: dict[str, Any]) -> None:
    """One forward at position 0 (output dropped): stateful rotary modules back to their original state, and the
    positions a model kept from an earlier call forgotten (:data:`STATE`)."""
    import torch

    _forget(model)
    zero = dict(inputs)
    if "position_ids" in zero:
        zero["position_ids"] = torch.zeros_like(zero["position_ids"])
    with torch.no_grad():
        model(**zero)
    _forget(model)


def run_case(model: Any, case: Case, ids: np.ndarray, base: dict[str, Any], attention: list[Any],
             positional: list[Any]) -> Case:
    """Run one case (in place): ``ids`` the probe's tokens, ``base`` run A's keyword arguments."""
    import torch

    try:
        if case.name.startswith("decoding"):
            return _decode(model, case, ids, base, attention, positional)
        n = case.slots.size
        tokens = (ids[:n] if ids.size >= n else np.resize(ids, n)).copy()
        if case.padding_token is not None:
            tokens[:PADDING] = case.padding_token
        inputs = _with_tokens(base, tokens)
        if case.position_ids is not None:
            inputs["position_ids"] = torch.as_tensor(case.position_ids)[None]
        for name in [k for k in inputs if k.endswith("attention_mask")]:
            if case.attention_mask is None:
                inputs.pop(name)
            else:
                inputs[name] = torch.as_tensor(case.attention_mask)[None]
        _reset(model, inputs)
        case.input_ids = tokens
        case.run = _as_float32(_forward(model, inputs, Recorder(model, neutral=False, keep_inputs=False),
                                        attention, positional))
    except Exception as exc:  # transformers' own error for these inputs: the case is not observed
        case.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    finally:
        _forget(model)  # what the case's forward kept is not carried into the next run
    return case


def _with_tokens(base: dict[str, Any], tokens: np.ndarray) -> dict[str, Any]:
    import torch

    inputs = {k: v for k, v in base.items() if k not in ("position_ids",)}
    for name in ("input_ids", "decoder_input_ids"):
        if name in inputs:
            inputs[name] = torch.as_tensor(tokens)[None]
    for name in [k for k in inputs if k.endswith("attention_mask")]:
        inputs[name] = torch.ones((1, tokens.size), dtype=torch.long)
    if "bbox" in inputs:  # a document model's boxes, one per token (survey.boxes)
        inputs["bbox"] = resized(inputs["bbox"], tokens.size)
    return inputs


def _decode(model: Any, case: Case, ids: np.ndarray, base: dict[str, Any], attention: list[Any],
            positional: list[Any]) -> Case:
    """:data:`PREFILL` tokens with a cache (ids ``0 …`` where taken), the cache padded with zero keys and values
    up to the case's first query slot (:func:`pad_cache`), then the case's last ``queries`` tokens (the probe's
    tokens from row PREFILL on, so that each reads run B's hidden states). An encoder–decoder's encoder runs once,
    over the prefill's tokens, and its decoder's step is handed its outputs: the step runs the decoder alone, so its
    attention calls are not run B's and are not compared, and its table rows are; its cache is not padded."""
    import inspect

    import torch

    params = inspect.signature(model.forward).parameters
    taking = next((name for name in CACHE_ARGUMENTS if name in params), None)
    # use_cache named, or handed on through **kwargs (a multimodal composite's forward passes it to its language
    # model, which takes it)
    keyword = "use_cache" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    seq2seq = "decoder_input_ids" in base  # an encoder–decoder: its decoder decodes, over the encoder's outputs
    if taking is None or not keyword or (seq2seq and "encoder_outputs" not in params):
        case.error = "the model takes no cache to decode with"
        return case
    keys, queries = case.slots.size, case.queries
    if seq2seq and keys - queries > PREFILL:
        case.error = "the survey pads no encoder–decoder's cache"
        return case
    tokens = np.resize(ids, PREFILL + queries)
    if case.padding_token is not None:  # the step's tokens are the padding token (a finished sequence's)
        tokens[PREFILL:] = case.padding_token
    prefill = _with_tokens(base, tokens[:PREFILL])
    prefill["use_cache"] = True
    if "position_ids" in base:
        prefill["position_ids"] = torch.arange(PREFILL)[None]
    _reset(model, {**prefill, "use_cache": False})
    with _patched(Recorder(model, neutral=False).patches()), torch.no_grad():  # attention outputs zero, as in run B
        out = model(**prefill)
    cache = next((c for name in CACHE_ARGUMENTS if (c := getattr(out, name, None)) is not None), None)
    if cache is None:
        case.error = "the model returned no cache"
        return case
    if keys - queries > PREFILL:
        pad_cache(cache, keys - queries - PREFILL)
    step = _with_tokens(base, tokens[PREFILL:])
    step.update({"use_cache": True, taking: cache})
    for name in [k for k in step if k.endswith("attention_mask")]:
        step[name] = torch.ones((1, keys), dtype=torch.long)
    if seq2seq:  # the step runs the decoder alone, handed the encoder's outputs over the prefill's tokens
        encoded = getattr(out, "encoder_last_hidden_state", None)
        if encoded is None:
            case.error = "the model returned no encoder output"
            return case
        from transformers.modeling_outputs import BaseModelOutput

        if "input_ids" in step:  # the encoder's tokens, which a forward may require though it runs no encoder
            step["input_ids"] = prefill["input_ids"]
        step["encoder_outputs"] = BaseModelOutput(last_hidden_state=encoded)
        if "attention_mask" in step:  # the encoder's mask, over its own tokens
            step["attention_mask"] = torch.ones((1, PREFILL), dtype=torch.long)
    if case.position_ids is not None:
        step["position_ids"] = torch.as_tensor(case.position_ids[-queries:])[None]
    case.input_ids = tokens
    # a few tokens: their hidden states are kept (rows PREFILL … of run B's, where the layer reads the same)
    run = _forward(model, step, Recorder(model, neutral=False, keep_inputs=True), attention, positional)
    if keys - queries > PREFILL:  # the zero keys are dropped from what is stored
        case.kept = np.concatenate([np.arange(PREFILL), np.arange(keys - queries, keys)])
        _keep_keys(run, case.kept, keys)
    case.run = _as_float32(run)
    return case


def _keep_keys(run: Any, kept: np.ndarray, keys: int) -> None:
    """The calls' keys, masks and biases of a padded cache cut to the ``kept`` key rows."""
    def cut(x: Any, axis: int) -> Any:
        return np.take(x, kept, axis=axis) if isinstance(x, np.ndarray) and x.ndim >= 2 and \
            x.shape[axis] == keys else x
    for call in run.calls:
        call.key, call.mask = cut(call.key, -2), cut(call.mask, -1)
        call.tensors = {k: cut(v, -1) for k, v in call.tensors.items()}
    for built in run.builders:
        built.output = cut(built.output, -1)


def pad_cache(cache: Any, n: int) -> None:
    """Append ``n`` zero keys and values to every attention layer of a transformers cache, through its own
    ``update`` (a sliding layer keeps its window): the next token's slot moves ``n`` further."""
    import torch

    layers = getattr(cache, "layers", None)
    if not layers:
        raise ValueError("the cache has no layers to pad")
    for index, layer in enumerate(layers):
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if not isinstance(keys, torch.Tensor) or not isinstance(values, torch.Tensor) or keys.ndim != 4:
            continue  # a layer without attention (a state-space mixer's state)
        shape_k, shape_v = list(keys.shape), list(values.shape)
        shape_k[-2] = shape_v[-2] = n
        cache.update(torch.zeros(shape_k, dtype=keys.dtype), torch.zeros(shape_v, dtype=values.dtype), index)
