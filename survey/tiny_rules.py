"""The rules that shrink one config dict to a tiny geometry, keeping what positions depend on.

The survey builds every model type from its config class's defaults, so the positions it measures are the
ones the class ships. To make a forward pass cheap it shrinks what positions do not depend on and keeps
what they do:

* kept: the head width (``head_dim``, or ``hidden / heads`` of the defaults, rounded down to a multiple of 8
  where the heads do not divide the width), every RoPE key, the MLA
  widths (``qk_rope_head_dim`` ...), ``max_position_embeddings``, windows, bucket counts and distances;
* shrunk: the number of heads (to :data:`HEADS`; key/value heads to 1 where the defaults share them, else
  as many), the width (heads x head width), the feed-forward widths (to at most :data:`FFN`), the number of
  layers (to at most :data:`LAYERS`, enough for every layer pattern of the defaults to show once: Gemma 3's
  sixth layer, Llama 4's fourth, Jamba's attention at layer 4 of 8), experts (to at most 4, 2 per token)
  and the vocabulary (to :data:`VOCAB`; a padding id past it becomes its last row: the survey feeds only
  ordinary tokens, never a padding, image or audio token, so other token ids may lie outside it).

Lists as long as the layer count (``layer_types``, ``no_rope_layers`` ...) are cut to the new count, so a
pattern keeps its phase; lists of layer indices (``hybrid_layer_ids``) keep the indices below it, and the
count stays high enough to keep each list's first index; a dict keyed by layer index (``per_layer_config``)
keeps the entries of the layers kept, their head counts shrunk as the config's. A layer-type list that is itself
the layer count (Nemotron-H's ``layers_block_type``) is cut to the shortest prefix that shows every type. Counts
of a layer count's parts (Dory's input, recurrent and output layers) are scaled to sum to the new count; a backbone's
output stages (``out_indices``) are mapped onto the stages left (:func:`_cut_stages`). A convolution with a
group per channel keeps one. Other vocabularies (``vocab_size_*``, BLT's hashed ``*_vocab``) shrink with the
vocabulary, and a CTC blank class past it becomes its last row, as a padding id does. A decoder that reads its
ids as rows of codebooks (``num_codebooks``) gets one, so the probe's row of ids is one sequence.

:func:`shrink_values` has four strengths; the survey tries them in order and records which one built:
``"tiny"`` (all of the above), ``"widths"`` (all but the vocabulary: configs whose token ranges must lie
inside it), ``"layers"`` (layers, experts and vocabulary only: widths as shipped) and ``"default"`` (the
defaults, only the layers cut). A state-space mixer's head count follows the new width (its heads times
their width must equal ``mamba_expand`` times the width; Mamba-2's ``num_heads`` and ``head_dim``, its
``expand``); a linear-attention mixer's key heads shrink to :data:`HEADS`, its value heads keeping their multiple
of them (Qwen3-Next's ``linear_num_value_heads``). A ``head_dim`` or ``num_key_value_heads`` of
None, which the config classes document as derived from the width, is stated as derived: some modules
read the None as it is (Ministral's attention cannot be built from its class defaults). So is any other count
a class leaves None where its modules compute with it (experts, experts per token, shared experts,
feed-forward widths, a vocabulary with its padding row: DeepSeek-V2, Dots1, ESM, DiffusionGemma). A model
without attention heads (RWKV) has its width shrunk to :data:`WIDTH`.
"""

from __future__ import annotations

import re
from typing import Any

HEADS = 4
FFN = 64
LAYERS = 8
EXPERTS = 4
VOCAB = 1024
STRENGTHS = ("tiny", "widths", "layers", "default")

_LAYER_KEY = re.compile(r"(num_hidden_layers|n_layers?|num_layers|(encoder|decoder)_layers|num_(encoder|decoder)_layers"
                        r"|num_text_layers|depth|num_blocks)")
_HEAD_KEY = re.compile(r"((cross_)?num_attention_heads|n_heads?|num_heads|attention_heads"
                       r"|(encoder|decoder)_attention_heads)")
_KV_KEY = re.compile(r"((cross_)?num_key_value_heads|num_kv_heads|n_head_kv|multi_query_group_num)")
WIDTH_KEY = re.compile(r"(hidden_size|d_model|n_embd|embed_dim|emb_dim|embedding_dim)")
_FFN_KEY = re.compile(r"\w*(intermediate_size|ffn_dim|d_ff|n_inner|ffn_hidden_size)\w*")
_EXPERT_KEY = re.compile(r"(num_experts|num_local_experts|n_routed_experts|moe_num_experts|num_routed_experts"
                         r"|zero_expert_num|n_shared_experts)")
_PER_TOKEN_KEY = re.compile(r"(num_experts_per_tok|moe_topk|top_k|num_experts_per_token|moe_k|top_k_experts)")
_INDEX_KEY = re.compile(r"(?!.*token).*(layer|idx|indices|_ids)\w*")
#: lists of layer types, one entry per layer
_TYPE_LIST_KEYS = ("layer_types", "layers_block_type")
#: counts of a layer count's parts (Dory's input, recurrent and output layers), which must sum to it
_PART_KEY = re.compile(r"n_\w+_layers")
#: the width of a model without attention heads (RWKV, xLSTM's blocks): shrunk to this
WIDTH = 256
_HEAD_DIM_KEY = ("head_dim", "d_kv", "kv_channels", "attention_head_size")
#: head counts bounded by the query heads of one key head (Kolibri's sparse-attention indexer: its validator
#: asks ``0 < index_num_heads <= num_attention_heads // num_key_value_heads``): cut to the bound when past it
_GROUP_BOUNDED_HEADS = ("index_num_heads",)
#: widths named after another config's width, which must equal it (see :func:`_follow_widths`)
NAMED_WIDTH_KEY = re.compile(r"(audio|backbone|text|vision|cross)_hidden_size|hidden_size_global"
                             r"|adapter_(in|out)(_dim|put_size)")
#: widths a config class computes from the model width when they are absent (Zamba2's shared attention)
_DERIVED_WIDTHS = ("attention_head_dim", "attention_hidden_size")
_GROUP_KEYS = ("n_group", "num_group", "num_expert_group", "moe_num_groups")
_GROUP_TOPK_KEYS = ("topk_group", "group_topk", "num_topk_groups")
_SSM_HEADS = (("mamba_n_heads", "mamba_d_head"), ("mamba_num_heads", "mamba_head_dim"),
              ("n_mamba_heads", "mamba_headdim"))


def is_int(value: Any) -> bool:
    """Whether ``value`` is an int and no bool (a count a config states)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _derived_head(width: int, heads: int) -> int:
    """``width / heads``; where the heads do not divide the width (GLM-4.5's defaults: 4096 / 96), no model
    ships that head width: the quotient rounded down to a multiple of 8."""
    return width // heads if width % heads == 0 else max(8, width // heads // 8 * 8)

def _shrunk_heads(entry: Any, first_heads: int) -> Any:
    """A layer's overrides (an entry of a dict keyed by layer index) with its head counts shrunk as the config's
    are: heads to at most :data:`HEADS`; key/value heads to 1 where fewer than the layer's heads (the config's
    where the entry names none), else as many."""
    if not isinstance(entry, dict):
        return entry
    heads = next((v for k, v in entry.items() if _HEAD_KEY.fullmatch(k) and is_int(v) and v > 0), first_heads)
    out = {k: min(v, HEADS) if _HEAD_KEY.fullmatch(k) and is_int(v) and v > 0 else v for k, v in entry.items()}
    for key, value in entry.items():
        if _KV_KEY.fullmatch(key) and is_int(value) and value > 0:
            out[key] = 1 if value < heads else min(value, HEADS)
    return out


def shrink_values(values: dict[str, Any], strength: str) -> dict[str, Any]:
    """The config dict ``values`` (``to_dict()`` of a config) shrunk at ``strength`` (one of :data:`STRENGTHS`),
    by the rules of the module docstring alone; nested config dicts (``sub_configs``) are shrunk alike by
    :func:`survey.tiny.shrink`, and a model type's repairs (:mod:`survey.tiny_repairs`) are applied there."""
    if strength not in STRENGTHS:
        raise ValueError(f"strength must be one of {STRENGTHS}, got {strength!r}")
    out = dict(values)
    layer_counts = {key: v for key, v in values.items() if _LAYER_KEY.fullmatch(key) and is_int(v) and v > 0}
    indices = {key: v for key, v in values.items() if _INDEX_KEY.fullmatch(key) and isinstance(v, list) and v
               and all(is_int(i) for i in v) and v == sorted(set(v)) and v[0] >= 0
               and not any(len(v) == n for n in layer_counts.values())
               and not (key == "out_indices" and "stage_names" in values)}  # a backbone's stages: _cut_stages
    # dicts keyed by layer index (Gemma's per_layer_config): keep the entries of the kept layers
    keyed = {key: v for key, v in values.items() if isinstance(v, dict) and v
             and all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in v)}
    # enough layers that every list of layer indices keeps its first entry (Zamba2's hybrid layers)
    # a dict keyed by layer index ends the kept layers at one of its keys (Gemma 4: the last layer is a
    # full-attention layer, and every full-attention layer has an entry)
    ends = [min([int(k) + 1 for k in v if int(k) + 1 >= LAYERS] or [max(map(int, v)) + 1]) for v in keyed.values()]
    keep = max([LAYERS, *(v[0] + 1 for v in indices.values()), *ends])
    for key, count in layer_counts.items():
        out[key] = min(count, keep)
    kept = min([keep, *layer_counts.values()])
    for key, listed in indices.items():
        out[key] = [i for i in listed if i < kept]
    types = out.get("layer_types")
    for key, value in values.items():  # layers that reuse an earlier layer's cache (Gemma 3n)
        if "shared_layers" in key and is_int(value) and value > 0:
            # as many as leave an earlier layer of every type they use
            fits = [n for n in range(min(value, kept // 2), -1, -1) if not isinstance(types, list)
                    or set(types[kept - n:kept]) <= set(types[:kept - n])]
            out[key] = fits[0]
    for key, entries in keyed.items():
        out[key] = {k: v for k, v in entries.items() if int(k) < kept}
    _cut_parts(values, out, layer_counts)
    if not layer_counts:  # a layer-type list that is the layer count (Nemotron-H's layers_block_type)
        for key in _TYPE_LIST_KEYS:
            listed = values.get(key)
            if isinstance(listed, list) and len(listed) > LAYERS and all(isinstance(t, str) for t in listed):
                # the shortest prefix of LAYERS layers or more that shows every type
                out[key] = listed[:max(LAYERS, *(listed.index(t) + 1 for t in set(listed)))]
    _cut_stages(values, out, layer_counts)
    # lists as long as a layer count keep their prefix (the pattern's phase)
    for key, value in values.items():
        if isinstance(value, list) and value and any(len(value) == n != out[k] for k, n in layer_counts.items()):
            n_new = next(out[k] for k, n in layer_counts.items() if len(value) == n)
            out[key] = value[:n_new]
    for key, value in values.items():
        if key == "num_codebooks" and is_int(value) and value > 1:
            # a decoder that reads its input ids as rows of codebooks (MusicGen reshapes them to (-1, codebooks,
            # T)): one codebook, so the probe's one row of ids is one sequence, its positions those of the row
            out[key] = 1
    if strength == "default":
        return out
    for key, value in values.items():
        # a count of None that the modules use as a number (DeepSeek-V2's experts per token, ESM's
        # vocabulary, Dots1's experts): stated as the shrunk count
        if _EXPERT_KEY.fullmatch(key) and (value is None or (is_int(value) and value > EXPERTS)):
            out[key] = EXPERTS
        elif _PER_TOKEN_KEY.fullmatch(key) and (value is None or (is_int(value) and value > 2)):
            out[key] = 2
    if "vocab_size" in values and values["vocab_size"] is None:
        out["vocab_size"] = VOCAB
        if "pad_token_id" in values and values["pad_token_id"] is None:
            # a padding row too (ESM compares the ids with it), the first: its positions count from the
            # padding id on (RoBERTa's offset), so a last row would start them past the table
            out["pad_token_id"] = 0
    for key in _GROUP_KEYS:  # expert groups must divide the (fewer) experts
        if is_int(values.get(key)) and values[key] > 1:
            out[key] = 1
    for key in _GROUP_TOPK_KEYS:
        if is_int(values.get(key)) and values[key] > 1:
            out[key] = 1
    for key, value in values.items():  # other vocabularies (Gemma 3n's per-layer inputs, BLT's hashed n-grams)
        other = key.startswith("vocab_size_") or key.endswith("_vocab")
        if other and is_int(value) and value > VOCAB and strength != "widths":
            out[key] = VOCAB
    vocab = values.get("vocab_size")
    if is_int(vocab) and vocab > VOCAB and strength != "widths":
        # an embedding's padding row must exist; other token ids (image, audio placeholders) are never fed
        out["vocab_size"] = VOCAB
        for key in ("pad_token_id", "blank_token_id"):  # a padding row, a CTC blank class: must exist
            if is_int(values.get(key)) and values[key] >= VOCAB:  # (the survey never feeds either)
                out[key] = VOCAB - 1
    if strength == "layers":
        return out
    heads = {key: v for key, v in values.items() if _HEAD_KEY.fullmatch(key) and is_int(v) and v > 0}
    widths = {key: v for key, v in values.items() if WIDTH_KEY.fullmatch(key) and is_int(v) and v > 0}
    explicit = next((values[k] for k in _HEAD_DIM_KEY if is_int(values.get(k)) and values[k] > 0), None)
    if heads and widths:
        first_heads = next(iter(heads.values()))
        if "head_dim" in values and values["head_dim"] is None:  # "None: width / heads", which some modules
            explicit = next(iter(widths.values())) // first_heads  # read as None (Ministral): stated
            out["head_dim"] = explicit
        # several widths (a vision tower's embed_dim and its output hidden_size): the narrowest head
        head_dim = explicit or min(_derived_head(w, first_heads) for w in widths.values())
        for key, n in heads.items():
            out[key] = min(n, HEADS)
        for key, value in values.items():
            if _KV_KEY.fullmatch(key) and is_int(value) and value > 0:
                out[key] = 1 if value < first_heads else min(value, HEADS)
            elif _KV_KEY.fullmatch(key) and value is None and key == "num_key_value_heads":
                out[key] = min(first_heads, HEADS)  # "None: as many as the heads": stated
        kv = out.get("num_key_value_heads")
        for key in _GROUP_BOUNDED_HEADS:  # heads that may not outnumber a key head's group of query heads
            if is_int(values.get(key)) and is_int(kv) and kv > 0 and "num_attention_heads" in out:
                out[key] = min(values[key], max(1, out["num_attention_heads"] // kv))
        for key, width in widths.items():
            out[key] = min(width, min(first_heads, HEADS) * head_dim)
        for key in keyed:  # a layer's own head counts (Dots3's sliding layers: 64 heads) shrink alike
            out[key] = {k: _shrunk_heads(entry, first_heads) for k, entry in out[key].items()}
        for key in _DERIVED_WIDTHS:  # widths the config class derives from the width: derived anew
            out.pop(key, None)
        for key, value in values.items():  # a convolution with a group per channel (Mimi's upsampling) stays so
            if key.endswith("groups") and is_int(value) and value in widths.values():
                out[key] = out[next(k for k, w in widths.items() if w == value)]
    elif widths:  # no attention heads (RWKV): the width alone, and what the config class derives from it
        for key, width in widths.items():
            out[key] = min(width, WIDTH)
        for key in _DERIVED_WIDTHS:
            out.pop(key, None)
    # a state-space model of its own (Mamba-2: a state size, no attention) names its mixer's heads plainly
    expand = values.get("mamba_expand", values.get("expand") if "state_size" in values else None)
    width = next((out[k] for k in widths), None)
    pairs = (*_SSM_HEADS, ("num_heads", "head_dim")) if "state_size" in values else _SSM_HEADS
    for heads_key, dim_key in pairs:  # a state-space mixer: its heads x head width = expand x width
        if is_int(values.get(heads_key)) and is_int(values.get(dim_key)) and is_int(expand) and width \
                and (expand * width) % values[dim_key] == 0:
            out[heads_key] = expand * width // values[dim_key]
    keys, vals = values.get("linear_num_key_heads"), values.get("linear_num_value_heads")
    if is_int(keys) and is_int(vals) and keys > HEADS and vals % keys == 0:
        # a linear-attention mixer's heads (Qwen3-Next's Gated DeltaNet): value heads a multiple of the key heads
        out["linear_num_key_heads"], out["linear_num_value_heads"] = HEADS, HEADS * (vals // keys)
    for key, value in values.items():
        if _FFN_KEY.fullmatch(key):
            if value is None or (is_int(value) and value > FFN):
                out[key] = FFN
            elif isinstance(value, list) and all(is_int(v) for v in value):
                out[key] = [min(v, FFN) for v in out[key]]
    return out



def _cut_parts(values: dict[str, Any], out: dict[str, Any], layer_counts: dict[str, int]) -> None:
    """Counts of a layer count's parts (:data:`_PART_KEY`) that sum to it in the defaults (Dory: 16 input, 40
    recurrent and 16 output layers of 72) are scaled to sum to the count kept (:func:`scaled_sections`), each
    part kept at one layer at least."""
    parts = {key: v for key, v in values.items() if _PART_KEY.fullmatch(key) and key not in layer_counts
             and is_int(v) and v > 0}
    for key, count in layer_counts.items():
        if parts and sum(parts.values()) == count and len(parts) <= out[key] < count:
            scaled = scaled_sections([parts[k] - 1 for k in parts], out[key] - len(parts))
            out.update({k: n + 1 for k, n in zip(parts, scaled, strict=True)})


def _cut_stages(values: dict[str, Any], out: dict[str, Any], layer_counts: dict[str, int]) -> None:
    """A backbone's output stages when its layers are cut.

    ``stage_names`` (a stem, then one stage per layer or per block of layers) is derived by the config class
    from the layer count; ``out_indices`` picks stages of it (0 the stem) and ``out_features`` names them. Of
    ``n`` stages cut to ``m``, each index ``i`` becomes ``m - (n - i)`` (the last stages stay the last: BEiT's
    ``[12]``, Depth Anything's ``[9, 10, 11, 12]``), or where that leaves the stem or before it,
    ``ceil(i * m / n)`` (spread as before: ZoeDepth's ``[6, 12, 18, 24]`` of 24 become ``[2, 4, 6, 8]``);
    ``out_features`` is then left for the class to name from the indices."""
    names = values.get("stage_names")
    if not isinstance(names, list) or len(names) < 2:
        return
    stages = len(names) - 1
    kept = next((out[key] for key, count in layer_counts.items() if count == stages), stages)
    chosen = values.get("out_indices")
    if not isinstance(chosen, list) and isinstance(values.get("out_features"), list):
        chosen = [names.index(f) for f in values["out_features"] if f in names]
    if kept == stages or not isinstance(chosen, list) or not chosen:
        return
    chosen = [i if i >= 0 else stages + 1 + i for i in chosen]  # a negative index counts from the end
    last = [kept - (stages - i) for i in chosen]
    mapped = last if min(last) >= 1 else [-(-i * kept // stages) for i in chosen]
    out["out_indices"] = sorted(set(mapped))
    out["out_features"] = None



def scaled_sections(sections: list[int], pairs: int) -> list[int]:
    """M-RoPE ``sections`` scaled to sum to ``pairs``: each ``pairs * s / sum(sections)``, rounded down, the
    pairs left over given to the largest remainders (first ones first on a tie)."""
    total = sum(sections)
    shares = [pairs * s / total for s in sections]
    out = [int(share) for share in shares]
    by_remainder = sorted(range(len(sections)), key=lambda i: (out[i] - shares[i], i))
    for i in by_remainder[:pairs - sum(out)]:
        out[i] += 1
    return out
