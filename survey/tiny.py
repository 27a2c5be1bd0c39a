"""A model type's default config shrunk to a tiny geometry, with what positions depend on kept.

The survey builds every model type from its config class's defaults, so the positions it measures are the
ones the class ships. To make a forward pass cheap it shrinks what positions do not depend on and keeps
what they do:

* kept: the head width (``head_dim``, or ``hidden / heads`` of the defaults), every RoPE key, the MLA
  widths (``qk_rope_head_dim`` ...), ``max_position_embeddings``, windows, bucket counts and distances;
* shrunk: the number of heads (to :data:`HEADS`; key/value heads to 1 where the defaults share them, else
  as many), the width (heads x head width), the feed-forward widths (to at most :data:`FFN`), the number of
  layers (to at most :data:`LAYERS`, enough for every layer pattern of the defaults to show once: Gemma 3's
  sixth layer, Llama 4's fourth, Jamba's attention at layer 4 of 8), experts (to at most 4, 2 per token)
  and the vocabulary (to :data:`VOCAB`, or just past the padding id: the survey feeds only ordinary tokens,
  never an image or audio placeholder, so other token ids may lie outside it).

Lists as long as the layer count (``layer_types``, ``no_rope_layers`` ...) are cut to the new count, so a
pattern keeps its phase. Sub-configs (``text_config``, ``vision_config`` ...) are shrunk by the same rules.
:func:`shrink` has three strengths; the survey tries them in order and records which one built:
``"tiny"`` (all of the above), ``"layers"`` (layers, experts and vocabulary only: widths as shipped) and
``"default"`` (the defaults, only the layers cut).
"""

from __future__ import annotations

import re
from typing import Any

HEADS = 4
FFN = 64
LAYERS = 8
EXPERTS = 4
VOCAB = 1024
STRENGTHS = ("tiny", "layers", "default")

_LAYER_KEY = re.compile(r"(num_hidden_layers|n_layers?|num_layers|(encoder|decoder)_layers|num_(encoder|decoder)_layers"
                        r"|num_text_layers|depth)")
_HEAD_KEY = re.compile(r"(num_attention_heads|n_heads?|num_heads|(encoder|decoder)_attention_heads)")
_KV_KEY = re.compile(r"(num_key_value_heads|num_kv_heads|n_head_kv|multi_query_group_num)")
_WIDTH_KEY = re.compile(r"(hidden_size|d_model|n_embd|embed_dim)")
_FFN_KEY = re.compile(r"(intermediate_size|ffn_dim|d_ff|(encoder|decoder)_ffn_dim|n_inner|moe_intermediate_size"
                      r"|shared_expert_intermediate_size|ffn_hidden_size|expert_intermediate_size)")
_EXPERT_KEY = re.compile(r"(num_experts|num_local_experts|n_routed_experts|moe_num_experts|num_routed_experts)")
_PER_TOKEN_KEY = re.compile(r"(num_experts_per_tok|moe_topk|top_k|num_experts_per_token|moe_k)")
_HEAD_DIM_KEY = ("head_dim", "d_kv", "kv_channels", "attention_head_size")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)



def shrink_dict(values: dict[str, Any], strength: str) -> dict[str, Any]:
    """The config dict ``values`` (``to_dict()`` of a config) shrunk at ``strength`` (one of :data:`STRENGTHS`);
    nested config dicts (``sub_configs``) are shrunk alike by :func:`shrink`'s caller."""
    if strength not in STRENGTHS:
        raise ValueError(f"strength must be one of {STRENGTHS}, got {strength!r}")
    out = dict(values)
    layer_counts = {key: v for key, v in values.items() if _LAYER_KEY.fullmatch(key) and _int(v) and v > 0}
    for key, count in layer_counts.items():
        out[key] = min(count, LAYERS)
    # lists as long as a layer count keep their prefix (the pattern's phase)
    for key, value in values.items():
        if isinstance(value, list) and value and any(len(value) == n != out[k] for k, n in layer_counts.items()):
            n_new = next(out[k] for k, n in layer_counts.items() if len(value) == n)
            out[key] = value[:n_new]
    if strength == "default":
        return out
    for key, value in values.items():
        if _EXPERT_KEY.fullmatch(key) and _int(value) and value > EXPERTS:
            out[key] = EXPERTS
        elif _PER_TOKEN_KEY.fullmatch(key) and _int(value) and value > 2:
            out[key] = 2
    if _int(values.get("n_group")) and values["n_group"] > 1:
        out["n_group"], out["topk_group"] = 1, 1
    vocab = values.get("vocab_size")
    if _int(vocab) and vocab > VOCAB:
        # an embedding's padding row must exist; other token ids (image, audio placeholders) are never fed
        pad = values.get("pad_token_id")
        out["vocab_size"] = max(VOCAB, pad + 1 if _int(pad) and pad < vocab else 0)
    if strength == "layers":
        return out
    heads = {key: v for key, v in values.items() if _HEAD_KEY.fullmatch(key) and _int(v) and v > 0}
    widths = {key: v for key, v in values.items() if _WIDTH_KEY.fullmatch(key) and _int(v) and v > 0}
    explicit = next((values[k] for k in _HEAD_DIM_KEY if _int(values.get(k)) and values[k] > 0), None)
    if heads and widths:
        first_heads = next(iter(heads.values()))
        # several widths (a vision tower's embed_dim and its output hidden_size): the narrowest head
        head_dim = explicit or min(w // first_heads for w in widths.values())
        for key, n in heads.items():
            out[key] = min(n, HEADS)
        for key, value in values.items():
            if _KV_KEY.fullmatch(key) and _int(value) and value > 0:
                out[key] = 1 if value < first_heads else min(value, HEADS)
        for key, width in widths.items():
            out[key] = min(width, min(first_heads, HEADS) * head_dim)
    for key, value in values.items():
        if _FFN_KEY.fullmatch(key):
            if _int(value) and value > FFN:
                out[key] = FFN
            elif isinstance(value, list) and all(_int(v) for v in value):
                out[key] = [min(v, FFN) for v in out[key]]
    return out


def shrink(config: Any, strength: str) -> Any:
    """A new config of ``type(config)`` from its ``to_dict()`` shrunk at ``strength``, sub-configs too."""
    values = config.to_dict()
    for name in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            values[name] = {**shrink_dict(sub.to_dict(), strength), "model_type": sub.model_type}
    return type(config).from_dict(shrink_dict(values, strength))
