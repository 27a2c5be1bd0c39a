"""The steps of :func:`refpos.models.from_hf_config`: one :class:`Resolver` per resolution, one method per rule.

The rules themselves, numbered, are the docstring of :mod:`refpos.models.hf`; this module is their code. A
resolver reads keys of one (text) config through :meth:`Resolver.top` and :meth:`Resolver.from_rope`, which
record every key used, so whatever was not read is reported as unused (and, where it matters, not modelled:
:mod:`refpos.models.position_keys`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refpos.models.families import ALIASES, Family, family_of, warn_assumed
from refpos.models.hf_files import ROPE_KEYS, is_per_layer
from refpos.models.kinds.record import GEOMETRY_KEYS
from refpos.models.kinds.rope import RopeFacts
from refpos.models.mla_keys import mla_fraction, per_layer_geometry
from refpos.models.mrope_hf import mrope_family, mrope_rope_type
from refpos.models.own_keys import default_theta as class_default_theta
from refpos.models.own_keys import length_keys, own_fraction, own_head_dim, own_theta, scaled_theta, switched_rule
from refpos.models.releases import release_of, row_for
from refpos.models.view import ConfigView
from refpos.rope.params import PARAM_KEYS
from refpos.rope.rules import PARAMETERS, PLAIN, RULES, TYPE_ALIASES
from refpos.rope.rules.ntk import DYNAMIC
from refpos.validation import check_bool, check_int

_HF_TYPES = tuple(name for name, rule in RULES.items() if rule.transformers)
#: fields of rules that only some families use: in the provenance only when set
RARE_FIELDS = frozenset({"mrope_section", "mrope_interleaved", "mrope_assignment", "angle_sign"}
                        | {p.name for p in PARAMETERS.values() if p.rare})
FIELD_NAMES = tuple(sorted({"theta"} | PARAM_KEYS - {"rope_theta"} - RARE_FIELDS))
#: rope-dict keys of a rope type that change nothing refpos resolves: read, with why (they are not reported)
INERT_ROPE_KEYS = {"yarn": {"finetuned": "the original YaRN code reads it only for dynamic YaRN; transformers and "
                                         "static YaRN do not",
                            "max_position_embeddings": "_compute_yarn_parameters reads the top level's "
                                                       "max_position_embeddings, never the dict's (Ministral-3's and "
                                                       "Mistral-4's config classes copy it there)"}}


class Resolver:
    """One resolution: reads keys, remembers which it used and where each field came from.

    Each step method applies one numbered rule of :mod:`refpos.models.hf`; :func:`refpos.models.hf.resolve_rope`
    calls them in order.
    """

    def __init__(self, view: ConfigView, layer_type: str | None, *, family: Family | None = None) -> None:
        """``view`` the language model's config section (its path: ``text_config.`` or empty); ``family``: the row
        to resolve with (default: the row of the section's model type). The keys read are kept in ``used`` (full
        paths), for this resolution's unused-key report."""
        cfg, prefix, parent_model_type = view.raw, view.path, view.wrapper_model_type
        self.cfg, self.prefix, self.layer_type = cfg, prefix, layer_type
        self.used: set[str] = set()
        self.fields: dict[str, Any] = {}
        self.provenance: dict[str, str] = {}
        self.notes: list[str] = []
        if cfg.get("model_type") is not None and not isinstance(cfg["model_type"], str):
            raise TypeError(f"{prefix}model_type must be a string, a transformers model type such as 'llama', got "
                            f"{type(cfg['model_type']).__name__} {cfg['model_type']!r}")
        written = self.top("model_type") if isinstance(cfg.get("model_type"), str) else None
        self.model_type = ALIASES.get(written, written)  # the family's transformers model_type
        release_gap = None
        if family is None:  # the row of the release that wrote the config (refpos.models.releases)
            root = view
            while root.parent is not None:
                root = root.parent
            family, release_gap = row_for(family_of(self.model_type), release_of(root.raw, None))
        self.family: Family | None = family
        #: what the family's rotary code fixes beyond the config (the family table's rope column)
        self.facts: RopeFacts = RopeFacts() if self.family is None else self.family.rope
        #: the M-RoPE family whose text rotary module this config runs (refpos.models.mrope_hf), or None
        self.mrope_family = mrope_family(self.model_type, parent_model_type)
        if self.family is not None and self.family.switch is not None:  # read by refpos.models.hf.check_rope_family
            self.used.add(self.prefix + self.family.switch.key)
        if self.family is not None:  # keys the family's code does not read for positions (its row says so)
            self.used.update(self.prefix + key for key in self.family.ignores if key in cfg)
        if written != self.model_type:
            self.notes.append(f"model_type {written!r} is transformers' {self.model_type!r} (family table alias)")
        self.code_gaps: list[str] = [] if release_gap is None else [release_gap]  # what refpos does not model
        self.key_gaps: dict[str, str] = {}  # a key the family's code reads in a way refpos does not model -> why
        self.ratio: tuple[float, str] | None = None  # the family's ratio key and what it scales (own_keys)
        self.rope_rule: dict[str, Any] = {}  # family rule applied to the rope dict: key -> value
        self.rope: dict[str, Any] = {}  # the rope dict resolved from (with injected defaults)
        self.rope_source: Mapping[str, Any] = {}  # the same dict as written in the config
        self.rope_path = ""  # dotted path of rope_source
        self.per_layer = False
        self.siblings: list[str] = []  # keys that belong to the other layer types
        self.theta_fallback, self.top_theta_applies = 10000.0, True

    def top(self, key: str) -> Any:
        self.used.add(self.prefix + key)
        return self.cfg[key]

    def has(self, key: str) -> bool:
        """Whether the config gives ``key`` a value the family's code reads (not a key its row ``ignores`` or
        restates: MiniMax-M3-VL's ``rotary_dim``, MiMo-V2-Flash's ``swa_rope_theta``: :attr:`Family.unread_keys`)."""
        return self.cfg.get(key) is not None and (self.family is None or key not in self.family.unread_keys)

    def from_rope(self, key: str) -> Any:
        self.used.add(f"{self.rope_path}.{key}")
        return self.rope[key]

    def set(self, name: str, value: Any, source: str) -> None:
        self.fields[name], self.provenance[name] = value, source

    # --------------------------------------------------------------------------------- steps
    def select_rope_dict(self) -> None:
        found: dict[str, Mapping[str, Any]] = {}
        for key in ("rope_scaling", "rope_parameters"):
            value = self.cfg.get(key)
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"{key} must be a mapping or null, got {type(value).__name__}")
            if value:
                found[key] = value
            elif key in self.cfg:
                self.top(key)  # null or {}: read, meaning "no scaling"
        if len(found) == 2:
            if dict(found["rope_scaling"]) != dict(found["rope_parameters"]):
                raise ValueError("rope_scaling and rope_parameters are both given and differ; keep one")
            self.top("rope_parameters")
        key, rope = next(iter(found.items()), ("", {}))
        if self.facts.local_theta_key is not None and not is_per_layer(rope, self.prefix + key):
            self._legacy_per_layer(key, rope)
        elif is_per_layer(rope, self.prefix + key):
            self.per_layer = True
            layers = sorted(map(str, rope))
            if self.layer_type is None:
                raise ValueError(f"{key} is per layer type {layers}: pass layer_type=")
            if self.layer_type not in rope:
                raise ValueError(f"layer_type {self.layer_type!r} is not in {key} {layers}")
            self.top(key)
            self.rope_path = f"{self.prefix}{key}.{self.layer_type}"
            self.used.add(self.rope_path)
            self.siblings = [f"{self.prefix}{key}.{k}" for k in rope if k != self.layer_type]
            if rope[self.layer_type] is None:
                raise ValueError(f"layer type {self.layer_type!r} has no RoPE (null): use refpos.encodings.NoPE")
            self.rope_source = rope[self.layer_type]
            self.rope = dict(self.rope_source)
        else:
            if self.layer_type is not None:
                raise ValueError(f"layer_type={self.layer_type!r} given, but the config has one RoPE for all layers")
            if key:
                self.top(key)
            self.rope_path, self.rope_source, self.rope = self.prefix + (key or "rope_scaling"), rope, dict(rope)

    def _legacy_per_layer(self, key: str, rope: Mapping[str, Any]) -> None:
        """Gemma 3's v4 form: rope_scaling + rope_theta for full attention (base default ``facts.theta``), the
        base of ``facts.local_theta_key`` (default ``facts.local_theta``) for sliding attention."""
        self.per_layer = True
        local = self.facts.local_theta_key
        if self.layer_type not in ("full_attention", "sliding_attention"):
            raise ValueError(f"{self.model_type} configs have RoPE per layer type: pass layer_type='full_attention' "
                             f"or 'sliding_attention' (got {self.layer_type!r})")
        if self.layer_type == "full_attention":
            if key:
                self.top(key)
            self.rope_path, self.rope_source = self.prefix + (key or "rope_scaling"), rope
            self.rope = dict(rope)
            self.theta_fallback = self.facts.theta or self.theta_fallback
            if self.rope.get("rope_type") is None and self.rope.get("type") is not None:
                self.notes.append(f"{self.model_type} full_attention: HF 5.24.0 ignores the legacy 'type' key here "
                                  "(its injected rope_type 'default' wins); refpos reads 'type'")
            self.siblings = [self.prefix + local]
        else:
            self.rope_path, self.rope = self.prefix + local, {}
            if self.has(local):
                self.rope["rope_theta"] = self.top(local)
            self.theta_fallback, self.top_theta_applies = self.facts.local_theta, False
            self.siblings = [self.prefix + k for k in ("rope_scaling", "rope_theta")]
            self.notes.append(f"sliding_attention: theta from {local}, rope_scaling not applied")

    def rope_type(self) -> str:
        value, source = "default", "default"
        if "rope_type" in self.rope and self.rope["rope_type"] is not None:
            value, source = self.from_rope("rope_type"), "config"
            if "type" in self.rope and self.rope["type"] != value:
                self.notes.append(f"rope_type {value!r} wins over type {self.rope['type']!r} (HF)")
            elif "type" in self.rope:
                self.from_rope("type")  # the legacy name of the same key, with the same value
        elif "type" in self.rope and self.rope["type"] is not None:
            value, source = self.from_rope("type"), "config"
        if not isinstance(value, str):
            raise TypeError(f"rope_type must be a str, got {type(value).__name__}")
        rules = self.family.rope_dict if self.family else frozenset()
        value = mrope_rope_type(value, self.notes)  # "mrope": default + mrope_section (refpos.models.mrope_hf)
        if RULES.get(value) is DYNAMIC and self.rope.get("alpha") is not None and "ntk_alpha" in rules:
            self.notes.append(f"{self.model_type}: 'dynamic' with alpha is NTK-alpha, a fixed base θ·α^(d/(d−2)) "
                              "(rope_type 'ntk', factor = alpha)")
            self.rope_rule["factor"] = self.from_rope("alpha")
            ignored = [k for k in self.rope if k not in ("alpha", "rope_type", "type", "rope_theta")]
            for key in ignored:
                self.from_rope(key)
            if ignored:
                self.notes.append(f"NTK-alpha reads only alpha and the base: {ignored} are not read (as in "
                                  "transformers)")
            value = "ntk"
        elif value in RULES and RULES[value].implied is not None:  # keys the dict implies (vLLM's "ntk" forms)
            implied, note = RULES[value].implied(self.rope)
            self.notes.append(note)
            self.rope_rule.update(implied)
        renamed = {**TYPE_ALIASES, **dict(self.facts.type_aliases)}  # the family's own renames (Phi-3)
        if value in renamed:
            self.notes.append(f"rope type {value!r} read as {renamed[value]!r} (HF's rewrite; HF 5.24.0 raises "
                              "KeyError for 'su' configs without original_max_position_embeddings in the dict)")
            value = renamed[value]
        switched = switched_rule(self, value)  # the family's own rule switch and position ratio (own_keys)
        value, source = switched, source if switched == value else "derived"
        if self.facts.types and value not in self.facts.types:
            raise ValueError(f"rope_type must be one of {list(self.facts.types)} for {self.model_type} (as HF), "
                             f"got {value!r}")
        if value not in ROPE_KEYS:
            raise ValueError(f"rope_type {value!r} is not a transformers rope type {_HF_TYPES} nor vLLM's 'ntk'")
        self.set("rope_type", value, source)
        return value

    def head_geometry(self) -> None:
        mla = self.has("qk_rope_head_dim")
        if mla:
            if not self.has("qk_nope_head_dim"):
                raise ValueError("qk_nope_head_dim is required with qk_rope_head_dim (DeepSeek MLA)")
            nope = check_int("qk_nope_head_dim", self.top("qk_nope_head_dim"), minimum=0)
            rot = check_int("qk_rope_head_dim", self.top("qk_rope_head_dim"), minimum=2)
            self.set("head_dim", nope + rot, "derived")
            self.set("rotary_dim", rot, "config")
            self.set("placement", "last", "derived")
            mla_fraction(self, nope + rot, rot)  # the rope dict's fraction, checked (refpos.models.mla_keys)
            per_layer_geometry(self)
        elif self.layer_type == "full_attention" and (self.has("global_head_dim") or self.facts.global_head_dim):
            head = self.top("global_head_dim") if self.has("global_head_dim") else self.facts.global_head_dim
            self.set("head_dim", head, "config" if self.has("global_head_dim") else "default")
        elif own_head_dim(self):  # the family's own key of the head size (refpos.models.own_keys)
            pass
        elif self.has("head_dim"):
            self.set("head_dim", self.top("head_dim"), "config")
        elif self.facts.head_dim is not None:
            self.set("head_dim", self.facts.head_dim, "default")
        else:
            widths = [n for n in GEOMETRY_KEYS["single"]["width"] if self.has(n)]
            counts = [n for n in GEOMETRY_KEYS["single"]["heads"] if self.has(n)]
            if not widths or not counts:
                raise ValueError("head_dim: the config has neither head_dim nor a width (hidden_size, n_embd, "
                                 "d_model, …) and a head count (num_attention_heads, n_head, n_heads, …)")
            names = (widths[0], counts[0])
            width, heads = (check_int(n, self.top(n), minimum=1) for n in names)
            factor = 1 if self.family is None else self.family.width_factor
            if factor * width % heads:
                raise ValueError(f"head_dim: {factor} × {names[0]}={width} is not a multiple of {names[1]}={heads}")
            self.set("head_dim", factor * width // heads, "derived")
            if factor != 1:
                self.notes.append(f"{self.model_type}: the attention runs on {factor} × {names[0]}, so head_dim = "
                                  f"{factor}·{width}/{heads} (the config class recomputes attention_head_dim so)")
                if "attention_head_dim" in self.cfg:
                    self.top("attention_head_dim")
        if not mla:
            self._partial()

    def _partial(self) -> None:
        if own_fraction(self):  # the family's own key of the rotated fraction (refpos.models.own_keys)
            pass
        elif "partial_rotary_factor" in self.rope and self.rope["partial_rotary_factor"] is not None:
            self.set("partial_rotary_factor", self.from_rope("partial_rotary_factor"), "config")
        elif self.has("partial_rotary_factor"):
            self.set("partial_rotary_factor", self.top("partial_rotary_factor"), "config")
        elif self.has("rotary_pct"):
            self.set("partial_rotary_factor", self.top("rotary_pct"), "config")
        elif self.facts.rotary_dim is not None and "rotary_dim" in self.cfg:  # null: the whole head (GPT-J)
            dim = self.top("rotary_dim")
            self.set("rotary_dim", dim if dim is not None else self.fields["head_dim"], "config")
        elif self.facts.rotary_dim is not None:
            self.set("rotary_dim", self.facts.rotary_dim, "default")
        elif self.has("rotary_dim"):
            self.set("rotary_dim", self.top("rotary_dim"), "config")
        elif self.facts.partial_rotary_factor is not None:
            self.set("partial_rotary_factor", self.facts.partial_rotary_factor, "default")
        self._rotary_dim_restated()
        partial = self.fields.get("partial_rotary_factor", 1.0) != 1.0 or "rotary_dim" in self.fields
        honoured = self.facts.partial_honoured
        if partial and self.fields["rope_type"] == PLAIN and not honoured:
            self.notes.append("partial rotary: refpos rotates d channels; the default init of many HF classes "
                              f"(llama, mistral, qwen2, ...) ignores partial_rotary_factor ({self.model_type!r})")

    def _rotary_dim_restated(self) -> None:
        """A ``rotary_dim`` beside the factor read, stating its width (``head_dim · factor``), is that fact
        (MiniMax-M2's class derives the factor from the legacy ``rotary_dim`` and writes both); another is reported."""
        factor, stated, fields = self.fields.get("partial_rotary_factor"), self.cfg.get("rotary_dim"), self.fields
        unread = {"rotary_dim", "head_dim"} - {*fields} == {"rotary_dim"}  # a head width, no rotary_dim read
        if factor is not None and isinstance(stated, int) and unread and stated == int(fields["head_dim"] * factor):
            self.top("rotary_dim")
            self.notes.append(f"rotary_dim={stated} states the width partial_rotary_factor={factor:g} rotates "
                              f"(head_dim {self.fields['head_dim']})")

    def theta(self) -> None:
        if self.facts.theta_fixed:
            self.set("theta", self.facts.theta, "default")
            self.notes.append(f"{self.model_type}: HF hard-codes theta = {self.facts.theta:g}")
            for key in ("rope_theta", "rotary_emb_base"):  # a base the config states is not the code's
                if self.has(key) and self.top(key) != self.facts.theta:
                    self.notes.append(f"{key}={self.cfg[key]!r} is not read: the code's base is {self.facts.theta:g}")
        elif own_theta(self):  # the family's own key of the base (refpos.models.own_keys)
            pass
        elif "rope_theta" in self.rope and self.rope["rope_theta"] is not None:
            self.set("theta", self.from_rope("rope_theta"), "config")
            if self.has("rope_theta") and self.top_theta_applies:  # the dict's base wins over the top level's
                if (top := self.top("rope_theta")) != self.fields["theta"]:
                    self.notes.append(f"top-level rope_theta {top!r} is not read: {self.rope_path}.rope_theta "
                                      f"{self.fields['theta']!r} is the base (as transformers)")
        elif self.has("rope_theta") and self.top_theta_applies:
            self.set("theta", self.top("rope_theta"), "config")
        elif self.has("rotary_emb_base"):
            self.set("theta", self.top("rotary_emb_base"), "config")
        else:  # the class's default base (its default_theta: the row's rope.theta, per layer type its local_theta)
            self.set("theta", class_default_theta(self), "default")
        scaled_theta(self)  # a family ratio that multiplies the base (refpos.models.own_keys)

    def layout(self) -> None:
        """Layout (and a code-fixed placement and direction) from the family table; unknown families: half, assumed."""
        family = self.family
        if family is None:
            self.set("layout", "half", "default")
            self.code_gaps.append(f"model_type {self.model_type!r} is not in the family table: half-split pairs "
                                  "and RoPE on every layer assumed")
            warn_assumed(self.model_type, stacklevel=4)  # the caller of from_hf_config / hf_layers
            return
        if family.layout == "rope_interleave":
            stated = "rope_interleave" in self.cfg
            interleave = check_bool("rope_interleave", self.top("rope_interleave") if stated else True)
            self.set("layout", "deinterleaved" if interleave else "half", "config" if stated else "default")
        else:
            self.set("layout", family.layout, "default")
            if "rope_interleave" in self.cfg:
                self.top("rope_interleave")
                self.notes.append(f"rope_interleave: not read by {family.source.split(':')[0]} (layout "
                                  f"{family.layout!r} is fixed by the code)")
        for name, value in (("placement", family.placement), ("angle_sign", self.facts.angle_sign)):  # code-fixed
            if value not in (None, 1):
                self.set(name, value, "default")
        if family.unmodelled:
            self.code_gaps.append(f"{family.model_type}: {family.unmodelled}")
        if family.note:
            self.notes.append(f"{family.model_type}: {family.note}")
        if family.multi_axis and self.mrope_family is None:  # else resolved by refpos.models.mrope_hf
            self.code_gaps.append(f"{family.model_type}: multi-axis positions (M-RoPE); resolved here as one axis")

    def lengths(self, rope_type: str) -> None:
        l_max = None
        for key in length_keys(self):
            if self.has(key):
                l_max = self.top(key)
                self.set("max_position_embeddings", l_max, "config")
                break
        if "original_max_position_embeddings" not in RULES[rope_type].parameters:
            if self.has("original_max_position_embeddings"):  # the rule reads no original length: no effect
                self.top("original_max_position_embeddings")
            return
        in_dict = self.rope.get("original_max_position_embeddings") is not None
        if self.has("original_max_position_embeddings") and not self.per_layer:
            value = self.top("original_max_position_embeddings")
            if in_dict and self.rope["original_max_position_embeddings"] != value:
                self.notes.append("top-level original_max_position_embeddings overwrites the dict value (HF)")
            self.set("original_max_position_embeddings", value, "config")
        elif in_dict:
            self.set("original_max_position_embeddings", self.from_rope("original_max_position_embeddings"),
                     "config")
        elif l_max is not None:
            self.set("original_max_position_embeddings", l_max, "derived")
        else:
            raise ValueError(f"original_max_position_embeddings is required for rope_type {rope_type!r} "
                             "(and there is no max_position_embeddings to default it to)")

    def scaling_keys(self, rope_type: str) -> None:
        for name, value in self.rope_rule.items():
            self.set(name, value, "derived")
        keys = ROPE_KEYS[rope_type] - {"original_max_position_embeddings"} - set(self.rope_rule)
        if self.family and "longrope_mscale" in self.family.rope_dict:
            keys |= {"short_mscale", "long_mscale"} & set(RULES[rope_type].parameters)
        for key in sorted(keys):
            if self.rope.get(key) is None:
                continue
            if key == "truncate" and self.per_layer:
                self.notes.append("per-layer truncate ignored (HF reads it from the top-level dict)")
                continue
            self.set(key, self.from_rope(key), "config")
        factor_rule = RULES[rope_type].factor
        if factor_rule is not None and factor_rule.from_lengths and "factor" not in self.fields \
                and self.fields.get("max_position_embeddings") is not None:
            self.provenance["factor"] = "derived"  # RopeConfig sets L_max / L_0 after validating both
        for key, why in INERT_ROPE_KEYS.get(rope_type, {}).items():
            if key in self.rope:
                self.from_rope(key)
                self.notes.append(f"{key}={self.rope[key]!r} read, without effect: {why}")
        mla = self.has("qk_rope_head_dim")
        if mla and "softmax_mscale" in RULES[rope_type].parameters and self.fields.get("mscale_all_dim"):
            self.set("softmax_mscale", True, "derived")

    def unused(self) -> list[str]:
        keys = [self.prefix + str(k) for k in self.cfg] + self.siblings
        keys += [f"{self.rope_path}.{k}" for k in self.rope_source]
        return sorted({k for k in keys if k not in self.used})
