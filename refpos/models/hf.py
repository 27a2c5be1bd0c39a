r"""``from_hf_config``: a transformers ``config.json`` → :class:`RopeConfig`, with provenance and unused keys.

Resolution follows HF 5.24.0 (docs/anchors.md#hf-config-resolution):

1. The rope dict is ``rope_scaling`` (v4) or ``rope_parameters`` (v5); both present and different is
   an error. ``rope_type`` wins over the legacy ``type``; neither means ``"default"``. ``"su"`` is read as
   ``"longrope"``; Phi-3 (``model_type="phi3"``) also reads ``"yarn"`` as ``"longrope"`` and accepts only
   default / longrope.
2. ``rope_theta``: the dict, else top level, else ``rotary_emb_base`` (GPT-NeoX), else the model
   default (GPT-J hard-codes 10000; Gemma 3: 1e6 global, 1e4 local), else 10000.
3. Head size ``D``: DeepSeek MLA ``qk_nope_head_dim + qk_rope_head_dim`` (rope channels last); Gemma 4
   full-attention ``global_head_dim``; ``head_dim``; else ``hidden_size / num_attention_heads`` (must
   divide; GPT-J ``n_embd / n_head``). Rotated ``d``: ``partial_rotary_factor`` (dict, then top level),
   ``rotary_pct`` (GPT-NeoX, default 0.25), ``rotary_dim`` (GPT-J, default 64), GLM's implicit 0.5.
4. ``original_max_position_embeddings`` (llama3, yarn, longrope): a top-level value **overwrites** the
   dict (Phi-3); otherwise the dict; otherwise ``max_position_embeddings`` (derived). In per-layer dicts
   it only defaults. yarn / longrope ``factor`` absent: ``L_max / L_0`` (derived).
5. **Per-layer-type configs** (Gemma 3, Gemma 4, LFM3, DeepSeek-V4): ``rope_parameters`` keyed by layer
   type, or Gemma 3's legacy ``rope_scaling`` + ``rope_local_base_freq``. Pass ``layer_type=``
   (``"full_attention"``, ``"sliding_attention"``, …; :func:`hf_layer_types` lists them); without it such a
   config is an error. A per-layer ``truncate`` is ignored, as in HF (reported unused).
6. Layout and placement come from the family table (:mod:`refpos.models.families`, keyed by ``model_type``,
   aliases followed: ``kimi_k2`` is DeepSeek-V3): half for most, interleaved for GPT-J, GLM, Cohere,
   ERNIE-4.5, Llama 4, DeepSeek-V2, …; ``rope_interleave`` (default true: deinterleaved) for DeepSeek-V3
   and its kin. MLA configs (``qk_rope_head_dim``) rotate their last channels. An unknown ``model_type``
   resolves half-split with that assumption reported as not modelled. DeepSeek yarn with
   ``mscale_all_dim`` sets ``softmax_mscale``.
7. Family rules of the rope dict: ``"dynamic"`` with ``alpha`` in Hunyuan is NTK-alpha (``rope_type
   "ntk"``, ``factor = alpha``); ``"ntk"`` (no transformers type) is vLLM's fixed or, with ``mixed_b``,
   mixed rule; Phi-3.5-MoE's ``short_mscale`` / ``long_mscale`` are read.

Every key of the config that did not enter the result is listed in ``unused_keys`` (dotted paths, e.g.
``"rope_scaling.finetuned"``). Those that change positions or attention (:mod:`refpos.models.position_keys`:
an explicit list, and every key of the rope dict) are also in ``not_modelled``, each with what it does;
so is what the model's code does that refpos does not model (key ``"model_type"``). ``strict=True``
raises ``ValueError`` when anything is not modelled (an unread key the positional rule of
:mod:`refpos.models.position_keys` names is among them).
Bad input raises ``ValueError`` / ``TypeError`` naming the key.

Examples
--------
>>> rope = from_hf_config({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
...                        "rope_theta": 500000.0, "max_position_embeddings": 131072,
...                        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
...                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})
>>> rope.rope_type, rope.head_dim, rope.provenance["head_dim"], rope.provenance["rope_type"]
('llama3', 128, 'derived', 'config')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refpos.models import restated_keys
from refpos.models.families import Family, family_of
from refpos.models.hf_files import as_language_view, hf_layer_types, language_config, load_hf_config
from refpos.models.hf_resolver import FIELD_NAMES, RARE_FIELDS, Resolver
from refpos.models.mrope_hf import resolve_mrope
from refpos.models.position_keys import not_modelled_report
from refpos.rope.config import RopeConfig
from refpos.rope.rules import RULES
from refpos.validation import check_bool

__all__ = ["check_rope_family", "from_hf_config", "hf_layer_types", "language_config", "load_hf_config", "resolve_rope"]


def resolve_rope(config: Any, layer_type: str | None, *, per_layer: bool,
                 family: Family | None = None) -> tuple[RopeConfig, list[str]]:
    """One resolution of a config, and what ``strict=True`` refuses in it (the not-modelled keys, an unread positional
    key among them: one rule, :func:`refpos.models.position_keys.is_positional`). ``config``: the
    :class:`~refpos.models.view.ConfigView` of the language model's section (what :func:`refpos.model_positions`
    passes), or a mapping or path (loaded, its language model found). ``per_layer``: the caller resolves the
    layer schedule and query scale itself (:func:`refpos.models.hf_layers`), so they are not reported here.
    ``family``: the row to resolve with instead of the config's own (conventions a caller states for an unknown
    family)."""
    view = as_language_view(config)
    prefix = view.path
    r = Resolver(view, layer_type, family=family)
    r.select_rope_dict()
    rope_type = r.rope_type()
    r.head_geometry()
    r.theta()
    r.layout()
    r.lengths(rope_type)
    r.scaling_keys(rope_type)
    restated_keys.check(r)  # keys a checkpoint states beside the per-layer-type rope dict (the row's rope.restated)
    resolve_mrope(r)  # M-RoPE sections, assignment, family layout (refpos.models.mrope_hf)
    r.notes.extend([f"read from {prefix[:-1]}"] if prefix else [])
    unused = r.unused()
    not_modelled = not_modelled_report(r, unused, rope_type, per_layer_done=per_layer)
    provenance = {name: r.provenance.get(name, "default") for name in FIELD_NAMES}  # every common field
    provenance.update({name: r.provenance[name] for name in sorted(RARE_FIELDS) if name in r.provenance})
    if prefix:  # a value read inside a wrapper names the nesting it came from
        provenance = {name: f"config ({prefix[:-1]})" if source == "config" else source
                      for name, source in provenance.items()}
    if "partial_rotary_factor" in r.fields and "rotary_dim" not in r.fields:
        provenance["rotary_dim"] = "derived"
    elif "rotary_dim" in r.fields and "partial_rotary_factor" not in r.fields:
        provenance["partial_rotary_factor"] = "derived"
    if RULES[rope_type].spans_head and provenance["placement"] == "default":
        provenance["placement"] = "derived"
    rope = RopeConfig(**r.fields, provenance=provenance, unused_keys=tuple(unused), notes=tuple(r.notes),
                      not_modelled=not_modelled)
    view.mark_paths(r.used)
    return rope, sorted(not_modelled)


def check_rope_family(family: Family, cfg: Mapping[str, Any], allowed: tuple[str, ...] = ("rope",)) -> str:
    """The encoding ``family``'s single stack has in ``cfg`` (its switch key read); a ``ValueError`` when it is not
    one of ``allowed`` or the model has two stacks: :func:`refpos.model_positions` resolves those."""
    encoding, value = family.switched(cfg, family.positions.encoding)
    if encoding not in allowed or family.stacks == "encoder-decoder":
        named = f"{family.switch.key}={value} gives" if family.switch is not None else "has"
        stacks = " in an encoder–decoder model" if family.stacks == "encoder-decoder" else ""
        raise ValueError(f"model_type {family.model_type!r} {named} {encoding or 'unmodelled'} positions{stacks}, "
                         "not RoPE: refpos.model_positions (refpos positions) resolves every layer of every encoding")
    return encoding


def from_hf_config(config_or_path: Any, *, strict: bool = False, layer_type: str | None = None) -> RopeConfig:
    """Resolve the RoPE of a transformers config (dict, path to ``config.json``, or its directory).

    Parameters
    ----------
    config_or_path : mapping or path
    strict : bool
        Raise ``ValueError`` when the resolution is not complete: a key that changes positions or attention
        is not modelled (``not_modelled``; this includes the layer schedule of families where not every
        layer rotates: :func:`refpos.models.hf_layers` resolves it; an unread key that
        :func:`refpos.models.position_keys.is_positional` names and that is set is among them).
    layer_type : str, optional
        For per-layer-type configs: which layer's RoPE (see the module docstring, rule 5).

    Returns
    -------
    RopeConfig with ``provenance`` (field → "config" / "default" / "derived"; a value read inside a wrapper
    names it: ``"config (thinker_config.text_config)"``), ``unused_keys``, ``notes`` and ``not_modelled``
    (key → what it does; empty: complete). A wrapper config (multimodal, omni) is read from its language
    model's config (:func:`refpos.models.hf_files.language_config`).
    """
    check_bool("strict", strict)
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be a str or None, got {type(layer_type).__name__}")
    view = as_language_view(config_or_path)
    model_type = view.raw.get("model_type")
    family = family_of(model_type) if isinstance(model_type, str) else None
    if family is not None:
        check_rope_family(family, view.raw)
    rope, problems = resolve_rope(view, layer_type, per_layer=False)
    if strict and problems:
        raise ValueError(f"strict: not modelled or unused: {problems} (strict=False resolves and reports them)")
    return rope
