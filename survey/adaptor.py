"""refpos's answer for a config, as survey claims: the one module that knows refpos's API.

Today's interface is :func:`refpos.hf_layers` (the RoPE resolver): every decoder layer's
:class:`refpos.RopeConfig` (or none), its query scale, and the layers without attention. A resolution is
*refused* where refpos reports something that bears on positions as not modelled (an unknown model type,
a rope key it does not read, a family's code gap) or raises an error that names the model type; any other
exception is an *error*. What it reports as not modelled about the attention core only (windows, soft-caps,
softmax scales) is kept as a note.
"""

from __future__ import annotations

import warnings
from typing import Any

from survey.claims import LayerClaim, Resolution

#: not-modelled keys that concern the attention core, not positions (masks, scales): notes, not refusals
ATTENTION_CORE = frozenset({"sliding_window", "sliding_window_pattern", "max_window_layers",
                            "global_attn_every_n_layers", "attention_chunk_size", "attn_logit_softcapping",
                            "query_pre_attn_scalar", "attention_multiplier", "softmax_scale", "index_topk",
                            "layer_types"})
#: words of an exception message by which refpos declines (rather than fails to read the config)
REFUSAL_WORDS = ("not modelled", "not in the family table", "refpos does not model", "unknown family")



def api() -> str:
    """The refpos function the survey asks."""
    return API


API = "refpos.hf_layers"


def is_refusal(message: str, model_type: str) -> bool:
    """Whether an exception message is refpos declining by name (the model type, or a not-modelled report)."""
    return f"'{model_type}'" in message or any(word in message for word in REFUSAL_WORDS)


def resolve(config: dict[str, Any]) -> Resolution:
    """refpos's per-layer answer for ``config`` (a config dict, as ``config.json`` holds it)."""
    import refpos

    model_type = str(config.get("model_type"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            schedule = refpos.hf_layers(config)
    except (ValueError, TypeError, KeyError) as exc:
        message = f"{type(exc).__name__}: {exc}"
        return Resolution(refused=message) if is_refusal(message, model_type) else Resolution(error=message)
    layers = []
    for layer in schedule:
        if not layer.attention:
            layers.append(LayerClaim("decoder", layer.index, "no_attention", detail=layer.mixer or ""))
            continue
        scale = layer.query_scale if layer.scale is not None else None
        kind = "rope" if layer.rope is not None else "none"
        layers.append(LayerClaim("decoder", layer.index, kind, rope=layer.rope, query_scale=scale,
                                 detail=layer.layer_type or ""))
    refused, notes = [], []
    for key, what in schedule.not_modelled.items():
        (notes if key.rsplit(".", 1)[-1] in ATTENTION_CORE else refused).append(f"{key}: {what}")
    return Resolution(tuple(layers), "; ".join(refused) or None, None, tuple(notes))
