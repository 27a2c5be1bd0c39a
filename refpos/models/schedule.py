"""Which layer is which: the layer count, the layer types and which layers rotate, as a family's config
class and attention code fix them (the ``layer_pattern``, ``types_key``, ``count`` and ``rope_layers``
columns of the family table, :mod:`refpos.models.families`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

from refpos.models.families import Family, family_of
from refpos.models.layer_pattern import LayerPattern
from refpos.models.stages import Stage, stage_plan, stage_types
from refpos.validation import check_int, check_size

LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
#: the most layers a schedule holds (models have at most a few hundred)
MAX_LAYERS = 2**16


class LayerCountMissing(ValueError):
    """The config does not say how many layers it has: no schedule can be built (a ``ValueError``, so bad
    input stays one kind of error; callers that can do without a schedule catch this class)."""


def _nested(cfg: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted ``key`` (``linear_attn_config.full_attn_layers``), or None."""
    value: Any = cfg
    for part in key.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def layer_count(cfg: Mapping[str, Any], family: Family | None = None) -> int:
    """The number of layers: the first of :data:`LAYER_COUNT_KEYS` (the sum of its counts for a family whose
    config counts them per encoder in a dict, ``count = "per_encoder"``), or the length of the layer types for a
    family whose config class counts them (``count = "layer_types"``), or the sum of the blocks of each stage
    (``count = "blocks_per_stage"``: SAM 2's Hiera), or every stage's layers (a row's ``stages``,
    :mod:`refpos.models.stages`)."""
    if family is not None and family.stages is not None:
        total = sum(stage.layers for stage in stage_plan(cfg, family.stages))
        return check_size("stages", total, maximum=MAX_LAYERS, bytes_each=200, what="layer schedule")
    if family is not None and family.count == "blocks_per_stage" and isinstance(cfg.get("blocks_per_stage"), list):
        blocks = cfg["blocks_per_stage"]
        for i, count in enumerate(blocks):
            check_size(f"blocks_per_stage[{i}]", count, maximum=MAX_LAYERS, bytes_each=200, what="layer schedule")
        return check_size("blocks_per_stage", sum(blocks), maximum=MAX_LAYERS, bytes_each=200, what="layer schedule")
    if family is not None and family.count == "layer_types":
        types = layer_types(cfg, family, None)
        if types is not None:
            return len(types)
    for key in LAYER_COUNT_KEYS:
        value = cfg.get(key)
        if family is not None and family.count == "per_encoder" and isinstance(value, Mapping):
            for name, count in value.items():  # LXMERT's language, vision and cross layers: all of them
                check_size(f"{key}.{name}", count, maximum=MAX_LAYERS, bytes_each=200, what="layer schedule")
            value = sum(value.values())
        if value is not None:
            # the schedule holds a record and list entries per layer (~200 bytes each)
            return check_size(key, value, maximum=MAX_LAYERS, bytes_each=200, what="layer schedule")
    raise LayerCountMissing("num_hidden_layers: the config does not say how many layers it has "
                            f"(none of {list(LAYER_COUNT_KEYS)})")


def layer_types(cfg: Mapping[str, Any], family: Family | None, n: int | None) -> list[str] | None:
    """The config's layer types (``layer_types``, or the family's ``types_key``), or the family's pattern
    filling them, or the stage of each layer (``stage_<s>``, a row's ``stages``); None when neither says. ``n``:
    the layer count they must match (None: any)."""
    if family is not None and family.stages is not None:
        return stage_types(stage_plan(cfg, family.stages))
    key = "layer_types" if family is None else family.types_key
    value = cfg.get(key)
    if value is not None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"{key} must be a list of str")
        if n is not None and len(value) != n:
            raise ValueError(f"{key} has {len(value)} entries for {n} layers")
        return list(value)
    pattern = None if family is None else family.layer_pattern
    return None if pattern is None else _filled(cfg, pattern, n)


def _filled(cfg: Mapping[str, Any], pattern: LayerPattern, n: int | None) -> list[str] | None:
    """The layer types a pattern gives (see :class:`refpos.models.families.LayerPattern`)."""
    if pattern.cycle:  # block names repeated over the layers (RecurrentGemma's block_types)
        return _cycled(cfg, pattern, n)
    if pattern.chars:  # one character per layer (Nemotron-H's hybrid_override_pattern)
        text = _nested(cfg, pattern.key or "")
        if text is None:
            return None
        chars = dict(pattern.chars)
        if not isinstance(text, str) or any(c not in chars for c in text) or (n is not None and len(text) != n):
            raise ValueError(f"{pattern.key} must be a string of {sorted(chars)} characters, one per layer, "
                             f"got {text!r}")
        return [chars[c] for c in text]
    if n is None:
        return None
    if pattern.indices is not None:  # the config lists the full-attention layers (Bamba, LFM2, Kimi-Linear), or others
        listed = _nested(cfg, pattern.indices)
        if listed is None:
            return None if pattern.absent is None else [pattern.absent] * n
        first = int(pattern.one_based)
        if not isinstance(listed, list) or any(isinstance(i, bool) or not isinstance(i, int)
                                               or not first <= i < n + first for i in listed):
            raise ValueError(f"{pattern.indices} must be a list of layer indices in [{first}, {n + first}), got "
                             f"{listed!r}")
        return [pattern.listed if i + first in listed else pattern.other for i in range(n)]
    every = pattern.every if pattern.key is None or cfg.get(pattern.key) is None else \
        check_int(pattern.key, cfg[pattern.key], minimum=1)
    offset = every - 1 if pattern.offset is None else pattern.offset
    if pattern.offset_key is not None and cfg.get(pattern.offset_key) is not None:
        offset = check_int(pattern.offset_key, cfg[pattern.offset_key], minimum=0)
    return [pattern.listed if i >= pattern.start and i % every == offset else pattern.other for i in range(n)]


def _cycled(cfg: Mapping[str, Any], pattern: LayerPattern, n: int | None) -> list[str] | None:
    """Layer ``i`` is the type ``chars`` gives the block ``blocks[i mod len(blocks)]``, ``blocks`` the config's
    list at ``key`` (absent: the class's, ``cycle``); as RecurrentGemmaConfig.layers_block_type, which repeats the
    list 100 times and cuts it at the layer count."""
    blocks = _nested(cfg, pattern.key or "")
    blocks = pattern.cycle if blocks is None else blocks
    chars = dict(pattern.chars)
    if isinstance(blocks, str) or not isinstance(blocks, (list, tuple)) or not blocks \
            or any(not isinstance(b, str) or b not in chars for b in blocks):
        raise ValueError(f"{pattern.key} must be a non-empty list of {sorted(chars)}, got {blocks!r}")
    if n is None:
        return None
    if n > 100 * len(blocks):
        raise ValueError(f"{pattern.key}: {len(blocks)} blocks repeated 100 times give the config class "
                         f"{100 * len(blocks)} layer types, fewer than its {n} layers")
    return [chars[blocks[i % len(blocks)]] for i in range(n)]


#: the per-layer list of RoPE bases the ``"theta_list"`` and ``"theta_flags"`` rules read (0: no RoPE)
LAYER_THETA_KEY = "layer_rope_theta"


def layer_thetas(cfg: Mapping[str, Any], n: int) -> list[float] | None:
    """The config's ``layer_rope_theta``: one base per layer, 0 for a layer without RoPE; None when absent."""
    values = cfg.get(LAYER_THETA_KEY)
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != n or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"{LAYER_THETA_KEY} must be a list of {n} finite numbers >= 0 (0 = no RoPE), got {values!r}")
    return [float(v) for v in values]


#: the layers the ``"scaling_list"`` rule gives the rope dict's scaling (the others: plain RoPE at the same base)
SCALING_LAYERS_KEY = "rope_scaling_layers"


def scaled_layers(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """Which layers take the rope dict's scaling: those ``rope_scaling_layers`` lists, every layer when absent."""
    listed = cfg.get(SCALING_LAYERS_KEY)
    if listed is None:
        return [True] * n
    if not isinstance(listed, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n
                                           for i in listed):
        raise ValueError(f"{SCALING_LAYERS_KEY} must be a list of layer indices in [0, {n}), got {listed!r}")
    return [i in listed for i in range(n)]


#: the keys the ``"sliding_or_dense_prefix"`` rule reads (Cohere2MoeConfig)
DENSE_PREFIX_KEYS = ("mlp_layer_types", "first_k_dense_replace", "prefix_dense_sliding_window_pattern")


def _dense_prefix(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """The layers Cohere2-MoE rotates whatever their window: those whose MLP is ``"dense"`` (``mlp_layer_types``,
    absent: the first ``first_k_dense_replace``, default 0) when ``prefix_dense_sliding_window_pattern`` is 1
    (its default)."""
    pattern = check_int("prefix_dense_sliding_window_pattern", cfg.get("prefix_dense_sliding_window_pattern", 1),
                        minimum=1)
    kinds = cfg.get("mlp_layer_types")
    if kinds is None:
        first = check_int("first_k_dense_replace", cfg.get("first_k_dense_replace", 0), minimum=0)
        kinds = ["dense" if i < first else "sparse" for i in range(n)]
    if not isinstance(kinds, list) or len(kinds) != n or any(k not in ("dense", "sparse") for k in kinds):
        raise ValueError(f"mlp_layer_types must be a list of {n} entries 'dense' or 'sparse', got {kinds!r}")
    return [pattern == 1 and kind == "dense" for kind in kinds]


def rotating(cfg: Mapping[str, Any], family: Family | None, types: list[str | None], n: int) -> list[bool]:
    """Which layers rotate, by the family's ``rope_layers`` rule (every layer for ``"all"``)."""
    rule = "all" if family is None else family.rope_layers
    if rule in ("theta_list", "theta_flags"):
        thetas = layer_thetas(cfg, n)
        if thetas is not None:  # GraniteSWAModel.forward, MuseSparkTextModel.forward: 0 passes no cos/sin
            return [theta != 0 for theta in thetas]
        if rule == "theta_flags":  # the config class's fill: 0 on every 4th layer counted back from the last
            return [(n - 1 - i) % 4 != 0 for i in range(n)]
        return [True] * n
    if rule == "no_rope_layers":
        flags = cfg.get("no_rope_layers")
        if flags:
            if not isinstance(flags, list) or len(flags) != n or any(f not in (0, 1) for f in flags):
                raise ValueError(f"no_rope_layers must be a list of {n} entries 0 or 1 (1 = RoPE), got {flags!r}")
            return [bool(f) for f in flags]
        interval = check_int("no_rope_layer_interval", cfg.get("no_rope_layer_interval", 4), minimum=1)
        return [(i + 1) % interval != 0 for i in range(n)]
    window = cfg.get("sliding_window") is not None
    if rule == "sliding":
        return [window and t == "sliding_attention" for t in types]
    if rule == "sliding_or_dense_prefix":  # Cohere2MoeAttention: a window, or force_rope on a dense-MLP layer
        forced = _dense_prefix(cfg, n)
        return [(window and t == "sliding_attention") or f for t, f in zip(types, forced, strict=True)]
    if rule == "sliding_or_no_window":
        return [not window or t == "sliding_attention" for t in types]
    if rule == "sliding_type":
        return [t == "sliding_attention" for t in types]
    return [True] * n


def summary_line(labels: list[tuple[int, str]]) -> str:
    """``(index, label)`` of every layer as one line: ``layers 0-47: rope ×36, none ×12 (every 4th)``."""
    counts: dict[str, list[int]] = {}
    for index, label in labels:
        counts.setdefault(label, []).append(index)
    parts = []
    for label, indices in counts.items():
        part = f"{label} ×{len(indices)}"
        if len(counts) > 1 and len(indices) > 1:
            step = indices[1] - indices[0]
            if all(b - a == step for a, b in itertools.pairwise(indices)) and indices[0] == step - 1 and step > 1:
                part += f" (every {_ordinal(step)})"
            elif len(indices) <= 6:
                part += " (" + ", ".join(map(str, indices)) + ")"
        parts.append(part)
    return f"layers 0-{len(labels) - 1}: " + ", ".join(parts)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def stages_of(config: Mapping[str, Any]) -> tuple[Stage, ...]:
    """The stages of a config whose family row states ``stages`` (its ``model_type``'s row); ``()`` for a family
    without them. A ``TypeError`` when ``config`` is not a mapping.

    See Also
    --------
    stage_plan : the stages under a given rule.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (a config.json's dict), got {type(config).__name__}")
    model_type = config.get("model_type")
    family = family_of(model_type) if isinstance(model_type, str) else None
    return () if family is None or family.stages is None else stage_plan(config, family.stages)


__all__ = ["DENSE_PREFIX_KEYS", "LAYER_COUNT_KEYS", "LAYER_THETA_KEY", "SCALING_LAYERS_KEY", "LayerCountMissing",
           "layer_count", "layer_thetas", "layer_types", "rotating", "scaled_layers", "stages_of", "summary_line"]
