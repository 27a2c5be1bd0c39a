"""The config keys that change positions or attention: the explicit list behind "not modelled".

A resolution (:func:`refpos.models.from_hf_config`, :func:`refpos.models.hf_layers`) reads some keys of a
config.json and leaves the rest unused. Most unused keys are harmless for positions (``vocab_size``,
``hidden_act``); the keys listed here are not: each changes where or how a query meets a key. When one of them
is *active* in a config (its value turns the behaviour on) and the resolution did not model it, the resolution
reports it as *not modelled*, with the effect written here, and ``strict=True`` makes that an error.

Activity rules (``ACTIVE``):

``set``
    the value is neither null nor false nor empty;
``window``
    a sliding window is on: ``sliding_window`` is set and ``use_sliding_window`` is not false (Qwen2 ships
    ``sliding_window: 131072`` with ``use_sliding_window: false``: transformers then sets no window);
``not_rope``
    the value names something other than rotary positions (``position_embedding_type``).

Every key of the rope dict (``rope_scaling`` / ``rope_parameters``) is position-relevant by its place: an
unused one is reported too (``ROPE_DICT_EFFECTS`` says what the known ones do).

**Positional by name or role** (:func:`is_positional`, the one rule): a key whose name holds a word of
:data:`POSITIONAL_WORDS` (``rope_ratio``, ``rotary_emb_base``, ``position_encoding_2d``, ``use_logn_attn``,
``alibi_scaling``, ``base_seqlen``, …) or that is named as one of :data:`POSITIONAL_NAMES` (a training or
table length such as ``seq_length``, the width the rotation is built over such as ``kv_channels``) may change
positions whatever family it belongs to. A model's code that ships outside transformers names its position
keys as it likes, so no explicit list can hold them all; a resolution reports every such key that is set and
that no step of it read (:func:`unread_positional`), so a key refpos does not know is never dropped without a
word.

Examples
--------
>>> active_position_keys({"sliding_window": 4096, "use_sliding_window": False, "use_qk_norm": True})
['use_qk_norm']
>>> [key for key in ("rope_ratio", "kv_channels", "seq_length", "dim_model_base", "vocab_size") if is_positional(key)]
['rope_ratio', 'kv_channels', 'seq_length']
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from refpos.models.query_scales import scale_key_effects
from refpos.models.view import ConfigView

#: top-level key -> (activity rule, what it does to positions or attention)
POSITION_KEYS: dict[str, tuple[str, str]] = {
    "layer_types": ("set", "attention kind per layer (its mask; in some families which layers rotate)"),
    "sliding_window": ("window", "sliding-window attention mask"),
    "sliding_window_pattern": ("window", "which layers use the sliding window"),
    "max_window_layers": ("window", "which layers use the sliding window"),
    "global_attn_every_n_layers": ("window", "which layers use the sliding window"),
    "attention_chunk_size": ("set", "chunked attention mask (queries see keys of their chunk only)"),
    "no_rope_layers": ("set", "layers without RoPE"),
    "no_rope_layer_interval": ("set", "layers without RoPE (every n-th)"),
    "use_rope": ("set", "RoPE switched on or off"),
    "use_mem_rope": ("set", "RoPE switched on or off"),
    "attn_logit_softcapping": ("set", "tanh soft-capping of the attention logits"),
    "query_pre_attn_scalar": ("set", "softmax scale 1/sqrt(query_pre_attn_scalar) instead of 1/sqrt(head_dim)"),
    "attention_multiplier": ("set", "softmax scale replaced by this multiplier"),
    "softmax_scale": ("set", "softmax scale replaced"),
    "use_qk_norm": ("set", "normalisation of queries and keys around the rotation"),
    "qk_layernorm": ("set", "normalisation of queries and keys around the rotation"),
    "qk_norm": ("set", "normalisation of queries and keys around the rotation"),
    "alibi": ("set", "ALiBi bias instead of RoPE"),
    "position_embedding_type": ("not_rope", "positions encoded otherwise than by RoPE"),
    "mrope_section": ("set", "multi-axis RoPE (M-RoPE) sections"),
    "mrope_interleaved": ("set", "multi-axis RoPE (M-RoPE) channel interleaving"),
    "use_logn_attn": ("set", "log-n scaling of the attention logits"),
    "use_dynamic_ntk": ("set", "dynamic NTK switched on outside the rope dict"),
    "dual_chunk_attention_config": ("set", "dual-chunk attention (position remapping per chunk)"),
    "index_topk": ("set", "sparse attention: each query attends to its top-k keys only"),
    "rope_interleave": ("set", "pair layout of the rotation"),
    "scale_qk_dot_by_d": ("set", "softmax scale 1/head_dim instead of 1/sqrt(head_dim) (muP)"),
    "mup_scale_qk_dot_by_d": ("set", "softmax scale 1/head_dim instead of 1/sqrt(head_dim) (muP)"),
    "mup_use_scaling": ("set", "softmax scale mup_attn_multiplier/head_dim instead of 1/sqrt(head_dim) (muP)"),
    "dense_attention_every_n_layers": ("set", "block-sparse attention mask on the other layers"),
}

#: keys that change attention but not positions (masks, scales, soft-capping, norms): a resolution that does not
#: model one still describes the positions of its layers; any other key it does not model refuses them
ATTENTION_ONLY = frozenset({
    "layer_types", "sliding_window", "sliding_window_pattern", "max_window_layers", "global_attn_every_n_layers",
    "attention_chunk_size", "attn_logit_softcapping", "query_pre_attn_scalar", "attention_multiplier",
    "softmax_scale", "use_qk_norm", "qk_layernorm", "qk_norm", "index_topk", "scale_qk_dot_by_d",
    "mup_scale_qk_dot_by_d", "mup_use_scaling", "dense_attention_every_n_layers"})

#: rope-dict key -> what it does (any unused rope-dict key is reported; these are the known ones)
ROPE_DICT_EFFECTS: dict[str, str] = {
    "alpha": "NTK-alpha base θ·α^(d/(d−2))",
    "short_mscale": "LongRoPE attention factor for L <= L_0",
    "long_mscale": "LongRoPE attention factor for L > L_0",
    "mixed_b": "vLLM mixed NTK exponent",
    "mrope_section": "multi-axis RoPE (M-RoPE) sections",
    "mrope_interleaved": "multi-axis RoPE (M-RoPE) channel interleaving",
}

ACTIVE = ("set", "window", "not_rope")

#: words that make a key positional wherever they stand in its name (split at ``_``, ``-`` and ``.``): the rotary
#: and other position encodings, their bases and spans, the long-context rules, a training length (``seqlen``)
POSITIONAL_WORDS = frozenset({"rope", "rotary", "position", "positions", "positional", "pos", "theta", "alibi",
                              "ntk", "logn", "2d", "xpos", "yarn", "longrope", "mrope", "nope", "seqlen"})
#: whole key names that are positional by their role: a training or table length, the width a rotation is built
#: over, a bare base, fraction or ratio
POSITIONAL_NAMES = frozenset({"seq_length", "seq_len", "max_sequence_length", "kv_channels", "base", "pct", "ratio"})
#: keys that a layer of some kinds reads without effect (:attr:`refpos.models.kinds.EncodingKind.inert`):
#: ``lengths`` bound the positions or size a table whose entries do not depend on it; ``rotary`` are the keys of a
#: rotation, without effect on a layer that does not rotate
INERT_GROUPS: dict[str, tuple[str, ...]] = {
    "lengths": ("max_position_embeddings", "n_positions", "max_source_positions", "max_target_positions",
                "max_sequence_length", "seq_length"),
    "rotary": ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "rotary_pct", "rotary_dim",
               "rotary_emb_base", "qk_rope_head_dim", "qk_nope_head_dim", "kv_channels"),
}
#: what an unread key positional by name is reported to do (its effect is not known to refpos)
BY_NAME = "positional by its name or role, and read by no step of the resolution: its effect is not modelled"


def is_positional(key: str) -> bool:
    """Whether the config key ``key`` (its last dotted part) is positional by name or role: the one rule (module
    docstring; :data:`POSITIONAL_WORDS`, :data:`POSITIONAL_NAMES`).

    See Also
    --------
    unread_positional : the keys of a config section this rule reports when no step read them.
    """
    name = key.rsplit(".", 1)[-1].lower()
    return name in POSITIONAL_NAMES or not POSITIONAL_WORDS.isdisjoint(re.split(r"[_\-]+", name))


def unread_positional(view: ConfigView) -> dict[str, str]:
    """Every key of ``view``'s section that is positional by name (:func:`is_positional`; set: not null, false or
    empty) or a key of :func:`position_keys` that is active, and that no view of the config read: full path → what
    it does. A mapping some step read part of (MPT's ``attn_config``) is searched key by key; a mapping read whole
    (a rope dict: its resolver reports its keys) is not.

    See Also
    --------
    is_positional : the rule.
    refpos.model_positions : reports these keys as not modelled and refuses the layers they may change.
    """
    read = view.read
    found: dict[str, str] = {}

    def visit(section: Mapping[str, Any], path: str) -> None:
        for key, value in section.items():
            full = path + str(key)
            if full in read:
                continue
            inside = full + "."
            if isinstance(value, Mapping) and any(k.startswith(inside) for k in read):
                visit(value, inside)
            elif path == view.path and key in position_keys():
                if is_active(section, key):
                    found[full] = effect(key)
            elif is_positional(str(key)) and _is_set(value):
                found[full] = BY_NAME

    visit(view.raw, view.path)
    return found


def position_keys() -> dict[str, tuple[str, str]]:
    """Every top-level key that changes positions or attention: :data:`POSITION_KEYS` and the keys of every
    query-scale rule, read from its record (:mod:`refpos.models.query_scales`) when asked, so a rule added
    there is reported without another list."""
    return {**POSITION_KEYS, **{key: ("set", what) for key, what in scale_key_effects()[0].items()}}


def rope_dict_effects() -> dict[str, str]:
    """What the known rope-dict keys do: :data:`ROPE_DICT_EFFECTS` and the query-scale rules' keys."""
    return {**ROPE_DICT_EFFECTS, **scale_key_effects()[1]}


def _is_set(value: Any) -> bool:
    return value is not None and value is not False and value != [] and value != {} and value != ""


def is_active(cfg: Mapping[str, Any], key: str) -> bool:
    """Whether ``key`` (a :func:`position_keys` key) turns its behaviour on in ``cfg``."""
    rule, _ = position_keys()[key]
    value = cfg.get(key)
    if rule == "window":
        return _is_set(cfg.get("sliding_window")) and cfg.get("use_sliding_window", True) is not False \
            and _is_set(value)
    if rule == "not_rope":
        return _is_set(value) and str(value).lower() not in ("rope", "rotary")
    return _is_set(value)


def active_position_keys(cfg: Mapping[str, Any]) -> list[str]:
    """The :func:`position_keys` of ``cfg`` that are active, sorted."""
    return sorted(key for key in position_keys() if key in cfg and is_active(cfg, key))


def effect(key: str) -> str:
    """What ``key`` (top-level, or a rope-dict key) does, for a not-modelled report."""
    keys = position_keys()
    if key in keys:
        return keys[key][1]
    return rope_dict_effects().get(key, "a rope parameter")


def not_modelled_report(r: Any, unused: list[str], rope_type: str, *,
                        per_layer_done: bool = False) -> dict[str, str]:
    """The unused keys of resolution ``r`` (a :class:`refpos.models.hf` resolver) that change positions or
    attention, with what each does, and the code gaps of its family (key ``model_type``)."""
    report: dict[str, str] = {}
    rules = r.family.rope_dict if r.family else frozenset()
    for key in unused:
        if key in r.siblings:
            continue
        if key.startswith(r.rope_path + "."):
            name = key[len(r.rope_path) + 1:]
            report[key] = f"{effect(name)}: not read for rope_type {rope_type!r}"
            if name == "alpha" and "ntk_alpha" not in rules:
                report[key] += (f" ({r.model_type}'s transformers code ignores it; vLLM reads "
                                "'dynamic' with alpha as NTK-alpha θ·α^(d/(d−2)))")
            if name in ("short_mscale", "long_mscale") and "longrope_mscale" not in rules:
                report[key] += f" ({r.model_type}'s transformers code ignores it; vLLM applies it)"
            continue
        bare = key[len(r.prefix):]
        if bare in position_keys() and is_active(r.cfg, bare):
            report[key] = effect(bare)
        elif is_positional(bare) and _is_set(r.cfg.get(bare)):
            report[key] = BY_NAME
    report.update(r.key_gaps)
    gaps = list(r.code_gaps)
    family = r.family
    if family and not per_layer_done and (family.rope_layers != "all" or family.query_scale or family.no_attention):
        what = "not every layer rotates" if family.rope_layers != "all" else \
            "the query is scaled by position" if family.query_scale else "some layers have no attention (no positions)"
        gaps.append(f"{family.model_type}: {what} (refpos.models.hf_layers resolves each layer)")
    if gaps:
        report[r.prefix + "model_type"] = "; ".join(gaps)
    return report
