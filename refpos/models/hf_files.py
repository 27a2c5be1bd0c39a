"""Reading a transformers ``config.json``: the file, its text config, its rope dict and its layer types.

:func:`load_hf_config` reads a mapping, a path or a model directory; :func:`text_config_of` picks the
``text_config`` of a multimodal config without top-level RoPE keys; :func:`hf_layer_types` lists the layer
types of a per-layer-type rope dict. :mod:`refpos.models.hf` resolves what they find.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from refpos.inputs import InputError, load_json
from refpos.rope.rules import config_keys

#: keys of a rope dict that refpos reads, by rope_type (other keys are reported unused): each rule's record
ROPE_KEYS = config_keys()
_COMMON_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
ALL_ROPE_KEYS = _COMMON_KEYS.union(*ROPE_KEYS.values())
#: model types whose RoPE is per layer type without a per-layer dict (Gemma 3's v4 form)
GEMMA3 = frozenset({"gemma3", "gemma3_text"})


def load_hf_config(config_or_path: Any) -> dict[str, Any]:
    """A config.json as a dict: a mapping is copied; a path (or a directory holding config.json) is read.

    The file is read through :mod:`refpos.inputs`: a regular file only (a FIFO or a device is refused
    before reading), at most :data:`~refpos.inputs.MAX_JSON_BYTES`, UTF-8, nesting at most
    :data:`~refpos.inputs.MAX_JSON_DEPTH`, no duplicate keys. Each refusal and invalid JSON is a
    ``ValueError``, a non-object JSON or a wrong type a ``TypeError``, each naming the path.
    """
    if isinstance(config_or_path, Mapping):
        return dict(config_or_path)
    if not isinstance(config_or_path, (str, os.PathLike)):
        raise TypeError("config_or_path must be a config mapping or a path to config.json, got "
                        f"{type(config_or_path).__name__}")
    path = os.fspath(config_or_path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        data = load_json(path, what="config.json")
    except InputError as exc:
        raise ValueError(f"config_or_path: {exc}") from None
    if not isinstance(data, dict):
        raise TypeError(f"config_or_path: {path!r} must hold a JSON object, got {type(data).__name__}")
    return data


def is_per_layer(rope_dict: Mapping[str, Any], name: str = "rope_parameters") -> bool:
    """Keys are layer types: every value a mapping or None, no key a rope parameter.

    A dict with no rope parameter whose values are partly rope dicts (or null) and partly not is neither
    form: a ``ValueError`` naming ``name`` and the stray key (it would otherwise resolve to default RoPE).
    """
    if not rope_dict or any(k in ALL_ROPE_KEYS for k in rope_dict):
        return False
    layered = {k: isinstance(v, Mapping) or v is None for k, v in rope_dict.items()}
    stray = [k for k, ok in layered.items() if not ok]
    if stray and len(stray) < len(layered):
        value = rope_dict[stray[0]]
        raise ValueError(f"{name} is keyed by layer type ({', '.join(sorted(map(str, rope_dict)))}), but "
                         f"{name}.{stray[0]} is {type(value).__name__} {repr(value)[:40]}: each layer type's value "
                         "must be a rope dict or null")
    return not stray


def hf_layer_types(config_or_path: Any) -> tuple[str, ...]:
    """Layer types with their own RoPE in a per-layer config (empty for a config with one RoPE)."""
    cfg = load_hf_config(config_or_path)
    cfg = cfg["text_config"] if isinstance(cfg.get("text_config"), Mapping) and not has_rope_keys(cfg) else cfg
    for key in ("rope_parameters", "rope_scaling"):
        value = cfg.get(key)
        if isinstance(value, Mapping) and is_per_layer(value, key):
            return tuple(sorted(map(str, value)))
    if cfg.get("model_type") in GEMMA3:
        return ("full_attention", "sliding_attention")
    return ()


def has_rope_keys(cfg: Mapping[str, Any]) -> bool:
    return any(k in cfg for k in ("rope_scaling", "rope_parameters", "rope_theta", "head_dim", "hidden_size"))


def text_config_of(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The dict RoPE is read from and its key prefix: ``text_config`` of a multimodal config without
    top-level RoPE keys, else the config itself."""
    if isinstance(cfg.get("text_config"), Mapping) and not has_rope_keys(cfg):
        return dict(cfg["text_config"]), "text_config."
    return dict(cfg), ""


