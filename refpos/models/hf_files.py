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
from refpos.models.families import family_of
from refpos.rope.rules import config_keys

#: keys of a rope dict that refpos reads, by rope_type (other keys are reported unused): each rule's record
ROPE_KEYS = config_keys()
_COMMON_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
ALL_ROPE_KEYS = _COMMON_KEYS.union(*ROPE_KEYS.values())


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
    check_sub_configs(data)
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


#: keys that hold the language model's config inside a wrapper config, tried in this order at every level:
#: Qwen2.5-Omni / Qwen3-Omni ``thinker_config`` (whose ``text_config`` is the language model), ColPali's
#: ``vlm_config``, the ``text_config`` of transformers' multimodal configs, and the ``llm_config`` /
#: ``language_config`` of remote-code configs (InternVL, DeepSeek-VL2)
WRAPPERS = ("thinker_config", "vlm_config", "text_config", "llm_config", "language_config")


#: keys whose value is a config of its own (a wrapper's language model, a vision or audio tower)
SUB_CONFIGS = (*WRAPPERS, "vision_config", "audio_config")


def check_sub_configs(cfg: Mapping[str, Any], prefix: str = "") -> None:
    """``TypeError`` naming the key when a :data:`SUB_CONFIGS` key, at any depth, holds something other than a
    JSON object or null: a ``text_config`` that is a list is a malformed config, not a model without one."""
    for key in SUB_CONFIGS:
        value = cfg.get(key)
        if isinstance(value, Mapping):
            check_sub_configs(value, f"{prefix}{key}.")
        elif value is not None:
            raise TypeError(f"{prefix}{key} must be a JSON object (a config of its own) or null, got "
                            f"{type(value).__name__} {repr(value)[:40]}")


def language_config(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], str, Any]:
    """The language model's config, its dotted path (``"thinker_config.text_config."``, empty at the top level)
    and the ``model_type`` of the config that wraps it (``None`` at the top level).

    Wrappers are followed whenever they hold a mapping, whatever the top level holds besides: a wrapper
    that mirrors ``hidden_size`` at its top (Voxtral) still has its language model in ``text_config``.
    """
    check_sub_configs(cfg)
    prefix, parent = "", None
    current: Mapping[str, Any] = cfg
    for _ in range(len(WRAPPERS)):
        inner = next((key for key in WRAPPERS if isinstance(current.get(key), Mapping)), None)
        if inner is None:
            break
        parent = current.get("model_type", parent)
        prefix, current = f"{prefix}{inner}.", current[inner]
    return dict(current), prefix, parent


def hf_layer_types(config_or_path: Any) -> tuple[str, ...]:
    """Layer types with their own RoPE in a per-layer config (empty for a config with one RoPE)."""
    cfg = language_config(load_hf_config(config_or_path))[0]
    for key in ("rope_parameters", "rope_scaling"):
        value = cfg.get(key)
        if isinstance(value, Mapping) and is_per_layer(value, key):
            return tuple(sorted(map(str, value)))
    model_type = cfg.get("model_type")
    family = family_of(model_type) if isinstance(model_type, str) else None
    if family is not None and family.rope.local_theta_key is not None:  # Gemma 3's v4 form
        return ("full_attention", "sliding_attention")
    return ()
