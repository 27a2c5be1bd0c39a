"""Reading a transformers ``config.json``: the file, its text config, its rope dict and its layer types.

:func:`load_hf_config` reads a mapping, a path or a model directory; :func:`text_config_of` picks the
``text_config`` of a multimodal config without top-level RoPE keys; :func:`hf_layer_types` lists the layer
types of a per-layer-type rope dict. :mod:`refpos.models.hf` resolves what they find.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refpos.models.families import family_of
from refpos.models.view import WRAPPERS, ConfigView, check_sub_configs, load_config
from refpos.rope.rules import config_keys

#: keys of a rope dict that refpos reads, by rope_type (other keys are reported unused): each rule's record
ROPE_KEYS = config_keys()
_COMMON_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
ALL_ROPE_KEYS = _COMMON_KEYS.union(*ROPE_KEYS.values())


def load_hf_config(config_or_path: Any) -> dict[str, Any]:
    """A config.json as a dict: a mapping is copied; a path (or a directory holding config.json) is read
    (:func:`refpos.models.view.load_config`: a regular file, bounded, strict JSON)."""
    return load_config(config_or_path)


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


def language_view(view: ConfigView) -> ConfigView:
    """The view of the language model's section of a config (:data:`WRAPPERS` followed as
    :func:`language_config` follows them; the view itself at the top level)."""
    current = view
    for _ in range(len(WRAPPERS)):
        inner = next((key for key in WRAPPERS if isinstance(current.raw.get(key), Mapping)), None)
        if inner is None:
            break
        current = current.section(inner)
    return current


def as_language_view(config: Any) -> ConfigView:
    """A :class:`~refpos.models.view.ConfigView` is the language model's section as given; anything else (a mapping,
    a path) is loaded and its language model's section found."""
    return config if isinstance(config, ConfigView) else language_view(ConfigView.load(config))


def hf_layer_types(config_or_path: Any) -> tuple[str, ...]:
    """Layer types with their own RoPE in a per-layer config (empty for a config with one RoPE)."""
    cfg = as_language_view(config_or_path).raw
    for key in ("rope_parameters", "rope_scaling"):
        value = cfg.get(key)
        if isinstance(value, Mapping) and is_per_layer(value, key):
            return tuple(sorted(map(str, value)))
    model_type = cfg.get("model_type")
    family = family_of(model_type) if isinstance(model_type, str) else None
    if family is not None and family.rope.local_theta_key is not None:  # Gemma 3's v4 form
        return ("full_attention", "sliding_attention")
    return ()
