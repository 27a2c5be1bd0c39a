r"""``RopeConfig``: every parameter of a rotary position embedding, validated on construction.

One frozen dataclass holds the parameters of every RoPE variant (docs/extrapolation.md#the-math). Names follow the
transformers v5 ``rope_parameters`` keys, except ``theta`` (``rope_theta``). A field the chosen
``rope_type`` does not use must stay at its default: ``RopeConfig(rope_type="default", factor=2.0)``
is an error, not a silently ignored value.

Defaults are the anchors' (HF 5.24.0): ``theta = 10000``, ``beta_fast = 32``, ``beta_slow = 1``,
``truncate = True``, full rotation, ``layout = "half"``. Parameters HF requires have no default.

Derived fields are filled in on construction:

* ``rotary_dim`` ``d`` and ``partial_rotary_factor`` from each other: ``d = int(head_dim · prf)`` (the
  HF rule; float product, then truncation). ``proportional`` uses ``d = 2·int(prf·head_dim // 2)``
  rotated channels of a full-width table (docs/rope.md#partial-rotary). The stored ``partial_rotary_factor`` is then
  ``d / head_dim``, so configurations that rotate the same channels compare equal.
* ``placement``: ``"first"``, or ``"proportional"`` for ``rope_type="proportional"``.
* ``factor`` of ``yarn`` / ``longrope`` when absent: ``max_position_embeddings /
  original_max_position_embeddings`` (HF); ``proportional``: 1.

``provenance``, ``unused_keys`` and ``notes`` are metadata filled by :func:`refpos.from_hf_config`; they
take no part in equality or hashing.

Examples
--------
>>> rope = RopeConfig(rope_type="default", theta=10000.0, head_dim=64)
>>> rope.rotary_dim, rope.layout, rope.placement
(64, 'half', 'first')
>>> RopeConfig(head_dim=80, partial_rotary_factor=0.4).rotary_dim
32
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from refpos.pairs import PLACEMENTS as PAIR_PLACEMENTS
from refpos.pairs import ROPE_LAYOUTS
from refpos.rope.mrope import check_sections
from refpos.validation import check_choice, check_float, check_int

#: every rope_type refpos computes (docs/extrapolation.md#the-math); "ntk" is the static NTK-aware base change
#: (docs/extrapolation.md#ntk-aware)
ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "proportional")
#: memory layouts of the rotated pairs (docs/conventions.md#pair-layouts); which channels pair up: :mod:`refpos.pairs`
LAYOUTS = ROPE_LAYOUTS
#: where the rotated channels sit in a head (docs/rope.md#partial-rotary); "head"/"tail" are accepted aliases
PLACEMENTS = PAIR_PLACEMENTS
_PLACEMENT_ALIASES = {"head": "first", "tail": "last"}
#: dynamic NTK: transformers' per-call rule, or vLLM's single static base at L = factor·L_max
DYNAMIC_RULES = ("hf", "vllm_static")
#: static NTK: the NTK-aware base change (also Hunyuan's NTK-alpha), vLLM's fixed and mixed "ntk" forms
NTK_RULES = ("aware", "vllm_fixed", "vllm_mixed")
#: the widest head refpos builds tables for: a bound on memory (a config asking for 2**40 would need 2**39 pairs)
MAX_HEAD_DIM = 2**16

#: fields each rope_type may set away from their defaults (all types: theta, head_dim, rotary_dim,
#: partial_rotary_factor, placement, layout, max_position_embeddings)
_TYPE_FIELDS: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "linear": frozenset({"factor"}),
    "ntk": frozenset({"factor", "ntk_rule", "mixed_b"}),
    "dynamic": frozenset({"factor", "dynamic_rule"}),
    "yarn": frozenset({"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
                       "mscale_all_dim", "attention_factor", "truncate", "softmax_mscale"}),
    "llama3": frozenset({"factor", "original_max_position_embeddings", "low_freq_factor",
                         "high_freq_factor"}),
    "longrope": frozenset({"factor", "original_max_position_embeddings", "attention_factor",
                           "short_factor", "long_factor", "short_mscale", "long_mscale"}),
    "proportional": frozenset({"factor"}),
}
_TYPE_SPECIFIC_DEFAULTS: dict[str, Any] = {
    "factor": None, "original_max_position_embeddings": None, "beta_fast": 32.0, "beta_slow": 1.0,
    "mscale": None, "mscale_all_dim": None, "attention_factor": None, "truncate": True,
    "low_freq_factor": None, "high_freq_factor": None, "short_factor": None, "long_factor": None,
    "dynamic_rule": "hf", "softmax_mscale": False, "ntk_rule": None, "mixed_b": None,
    "short_mscale": None, "long_mscale": None,
}


@dataclass(frozen=True, kw_only=True)
class RopeConfig:
    """Parameters of one rotary position embedding (docs/rope.md#the-math, docs/extrapolation.md#the-math).

    Parameters
    ----------
    rope_type : str
        One of :data:`ROPE_TYPES`.
    theta : float
        Base θ > 0 (HF ``rope_theta``).
    head_dim : int
        Head size ``D``.
    rotary_dim, partial_rotary_factor : int, float, optional
        Rotated channels ``d`` (even, ``2 ≤ d ≤ D``) or the fraction ``d/D``; give either (or both, if
        they agree). Default: all ``D`` channels.
    placement : {"first", "last", "proportional"}, optional
        Rotated channels at the start of the head (GPT-NeoX, Phi), at its end (DeepSeek MLA), or spread
        as zero-frequency pairs over the full table (``rope_type="proportional"`` only).
    layout : {"half", "interleaved", "deinterleaved"}
        Pairs ``(j, j + d/2)`` (NeoX, HF Llama), ``(2j, 2j + 1)`` (GPT-J, Meta) or interleaved input
        written half-split (HF DeepSeek-V3).
    factor : float, optional
        Scale ``s``. Required (≥ 1) for linear, ntk, dynamic, llama3; yarn: ≥ 1, default
        ``L_max/L_0``; longrope: > 0, default ``L_max/L_0``; proportional: > 0, default 1.
    original_max_position_embeddings : int, optional
        Pre-training length ``L_0``; required for yarn, llama3, longrope.
    max_position_embeddings : int, optional
        Declared length ``L_max``; required for dynamic.
    beta_fast, beta_slow : float
        YaRN ramp rotations, ``beta_fast >= beta_slow > 0`` (equal: the ramp is widened by 0.001, as in
        transformers; Kimi-K2 ships ``beta_fast == beta_slow == 1``).
    mscale, mscale_all_dim : float, optional
        YaRN (DeepSeek) magnitude keys; only used when both are non-zero.
    attention_factor : float, optional
        Explicit ``A`` (yarn, longrope): replaces the formula.
    truncate : bool
        YaRN: floor/ceil the correction range (False: gpt-oss).
    low_freq_factor, high_freq_factor : float, optional
        llama3 band factors, ``0 < low <= high`` (equal: the blended middle band is empty, as Llama 4
        ships them).
    short_factor, long_factor : sequence of float, optional
        longrope per-pair divisors, length ``d/2`` each.
    dynamic_rule : {"hf", "vllm_static"}
        dynamic: transformers' rule at the current length, or vLLM's base at ``L = factor·L_max``.
    softmax_mscale : bool
        yarn: multiply the softmax scale by ``mscale(s, mscale_all_dim)²`` (DeepSeek MLA).
    ntk_rule : {"aware", "vllm_fixed", "vllm_mixed"}, optional
        ntk only (default ``"aware"`` there, unset for the other types): the NTK-aware base
        θ·s^(d/(d−2)) (also Hunyuan's NTK-alpha with ``s = α``), or vLLM's fixed / mixed ``"ntk"`` forms
        (:func:`refpos.rope.scaling.vllm_ntk_inv_freq`).
    mixed_b : float, optional
        ntk with ``ntk_rule="vllm_mixed"``: the exponent ``b > 0`` of the mixed form (required there only).
    short_mscale, long_mscale : float, optional
        longrope: explicit attention factors for ``L <= L_0`` and ``L > L_0`` (Phi-3.5-MoE); give both or
        neither. They replace ``attention_factor``.
    mrope_section : sequence of 3 int, optional
        M-RoPE (:mod:`refpos.rope.mrope`, any ``rope_type``): pairs reading the t, h, w positions,
        ``s_t + s_h + s_w = n_pairs``. ``None``: 1-D RoPE.
    mrope_interleaved : bool
        M-RoPE assignment: contiguous bands (Qwen2-VL, GLM-4.1V) or round-robin ``t h w …`` (Qwen3-VL).
    """

    rope_type: str = "default"
    theta: float = 10000.0
    head_dim: int
    rotary_dim: int | None = None
    partial_rotary_factor: float | None = None
    placement: str | None = None
    layout: str = "half"
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    max_position_embeddings: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    dynamic_rule: str = "hf"
    softmax_mscale: bool = False
    ntk_rule: str | None = None
    mixed_b: float | None = None
    short_mscale: float | None = None
    long_mscale: float | None = None
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False
    #: per field: "config" (read from config.json), "default" or "derived" (from_hf_config)
    provenance: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: dotted config keys the resolver did not use (from_hf_config)
    unused_keys: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: resolver remarks: renamed types, anchor quirks, conflicts (from_hf_config)
    notes: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: config keys that change positions or attention and that refpos does not model, each with the
    #: reason (from_hf_config; empty: the resolution is complete)
    not_modelled: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def __post_init__(self) -> None:
        rope_type = check_choice("rope_type", self.rope_type, ROPE_TYPES)
        self._set("theta", check_float("theta", self.theta, positive=True))
        head_dim = check_int("head_dim", self.head_dim, minimum=2, maximum=MAX_HEAD_DIM)
        self._set("layout", check_choice("layout", self.layout, LAYOUTS))
        self._check_type_fields(rope_type)
        self._resolve_rotary(rope_type, head_dim)
        for name in ("original_max_position_embeddings", "max_position_embeddings"):
            if getattr(self, name) is not None:
                self._set(name, check_int(name, getattr(self, name), minimum=1))
        if rope_type in ("yarn", "llama3", "longrope") and self.original_max_position_embeddings is None:
            raise ValueError(f"original_max_position_embeddings is required for rope_type {rope_type!r}")
        if rope_type == "dynamic" and self.max_position_embeddings is None:
            raise ValueError("max_position_embeddings is required for rope_type 'dynamic' (HF scales from it)")
        self._resolve_factor(rope_type)
        self._check_yarn()
        self._check_llama3(rope_type)
        self._check_longrope(rope_type)
        self._set("dynamic_rule", check_choice("dynamic_rule", self.dynamic_rule, DYNAMIC_RULES))
        self._check_ntk(rope_type)
        for name in ("truncate", "softmax_mscale", "mrope_interleaved"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}")
        self._set("mrope_section", check_sections(self.mrope_section, self.n_pairs, self.mrope_interleaved))
        self._set("provenance", MappingProxyType(dict(self.provenance)))
        self._set("not_modelled", MappingProxyType(dict(self.not_modelled)))
        self._set("unused_keys", tuple(self.unused_keys))
        self._set("notes", tuple(self.notes))

    # --------------------------------------------------------------------------------- validation
    def _check_type_fields(self, rope_type: str) -> None:
        allowed = _TYPE_FIELDS[rope_type]
        for name, default in _TYPE_SPECIFIC_DEFAULTS.items():
            value = getattr(self, name)
            if name not in allowed and value is not None and value != default:
                raise ValueError(f"{name}={value!r} is not used by rope_type {rope_type!r}; leave it unset")

    def _resolve_rotary(self, rope_type: str, head_dim: int) -> None:
        prf = self.partial_rotary_factor
        if prf is not None:
            prf = check_float("partial_rotary_factor", prf, positive=True)
            if prf > 1:
                raise ValueError(f"partial_rotary_factor must be in (0, 1], got {prf}")
        rotary_dim = self.rotary_dim
        if rotary_dim is not None:
            rotary_dim = check_int("rotary_dim", rotary_dim, minimum=1)
        if prf is not None:
            from_prf = 2 * int(prf * head_dim // 2) if rope_type == "proportional" else int(head_dim * prf)
            if rotary_dim is not None and abs(prf * head_dim - rotary_dim) < 1e-9:
                from_prf = rotary_dim  # prf is the exact ratio d/D (as stored here): no truncation applies
            if rotary_dim is not None and rotary_dim != from_prf:
                raise ValueError(
                    f"rotary_dim={rotary_dim} disagrees with partial_rotary_factor={prf} "
                    f"(int(head_dim·prf) = {from_prf}); give one of them"
                )
            rotary_dim = from_prf
        elif rotary_dim is None:
            rotary_dim = head_dim
        if rotary_dim % 2 or rotary_dim < 2:
            raise ValueError(f"rotary_dim must be even and >= 2, got {rotary_dim} (head_dim={head_dim}, "
                             f"partial_rotary_factor={prf})")
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim={rotary_dim} exceeds head_dim={head_dim}")
        if rope_type == "proportional" and head_dim % 2:
            raise ValueError(f"head_dim must be even for rope_type 'proportional', got {head_dim}")
        if rope_type in ("ntk", "dynamic") and rotary_dim < 4:
            raise ValueError(f"rotary_dim must be >= 4 for rope_type {rope_type!r} (exponent d/(d-2))")
        self._set("rotary_dim", rotary_dim)
        self._set("partial_rotary_factor", rotary_dim / head_dim)  # normalised: equal configs compare equal
        placement = self.placement
        if placement is None:
            placement = "proportional" if rope_type == "proportional" else "first"
        if isinstance(placement, str):
            placement = _PLACEMENT_ALIASES.get(placement, placement)
        placement = check_choice("placement", placement, PLACEMENTS)
        if (placement == "proportional") != (rope_type == "proportional"):
            raise ValueError(f"placement 'proportional' goes with rope_type 'proportional' only, got "
                             f"placement={placement!r}, rope_type={rope_type!r}")
        self._set("placement", placement)

    def _resolve_factor(self, rope_type: str) -> None:
        factor = self.factor
        if factor is None and rope_type in ("yarn", "longrope") and self.max_position_embeddings is not None:
            factor = self.max_position_embeddings / self.original_max_position_embeddings
        if factor is None and rope_type == "proportional":
            factor = 1.0
        if factor is None:
            if rope_type in ("linear", "ntk", "dynamic", "llama3", "yarn"):
                raise ValueError(f"factor is required for rope_type {rope_type!r}"
                                 + (" (or max_position_embeddings to derive it)" if rope_type == "yarn" else ""))
            if rope_type == "longrope" and self.attention_factor is None:
                raise ValueError("longrope needs factor, max_position_embeddings (factor = L_max / L_0) "
                                 "or attention_factor")
            return
        factor = check_float("factor", factor, positive=True)
        if factor < 1 and rope_type in ("linear", "ntk", "dynamic", "yarn", "llama3"):
            raise ValueError(f"factor must be >= 1 for rope_type {rope_type!r}, got {factor}")
        self._set("factor", factor)

    def _check_yarn(self) -> None:
        if self.rope_type == "yarn" and self.theta == 1:
            raise ValueError("theta must not be 1 for rope_type 'yarn' (the ramp bounds divide by ln θ)")
        beta_fast = check_float("beta_fast", self.beta_fast, positive=True)
        beta_slow = check_float("beta_slow", self.beta_slow, positive=True)
        if beta_fast < beta_slow:
            raise ValueError(f"beta_fast must be >= beta_slow, got beta_fast={beta_fast}, beta_slow={beta_slow}")
        self._set("beta_fast", beta_fast)
        self._set("beta_slow", beta_slow)
        for name in ("mscale", "mscale_all_dim"):
            if getattr(self, name) is not None:
                self._set(name, check_float(name, getattr(self, name), minimum=0.0))
        if self.attention_factor is not None:
            self._set("attention_factor", check_float("attention_factor", self.attention_factor, positive=True))

    def _check_llama3(self, rope_type: str) -> None:
        if rope_type != "llama3":
            return
        for name in ("low_freq_factor", "high_freq_factor"):
            if getattr(self, name) is None:
                raise ValueError(f"{name} is required for rope_type 'llama3'")
            self._set(name, check_float(name, getattr(self, name), positive=True))
        if self.high_freq_factor < self.low_freq_factor:
            raise ValueError(f"high_freq_factor must be >= low_freq_factor, got high_freq_factor="
                             f"{self.high_freq_factor}, low_freq_factor={self.low_freq_factor}")

    def _check_longrope(self, rope_type: str) -> None:
        if rope_type != "longrope":
            return
        if self.attention_factor is None and self.factor is not None and self.factor > 1 \
                and self.original_max_position_embeddings < 2:
            raise ValueError("original_max_position_embeddings must be >= 2 for longrope's attention factor "
                             "sqrt(1 + ln s / ln L_0)")
        pairs = self.rotary_dim // 2
        for name in ("short_factor", "long_factor"):
            value = getattr(self, name)
            if value is None:
                raise ValueError(f"{name} is required for rope_type 'longrope' (a list of {pairs} numbers)")
            if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
                raise TypeError(f"{name} must be a list of numbers, got {type(value).__name__}")
            if len(value) != pairs:
                raise ValueError(f"{name} must have rotary_dim/2 = {pairs} entries, got {len(value)}")
            items = tuple(check_float(f"{name}[{i}]", v, positive=True) for i, v in enumerate(value))
            self._set(name, items)
        given = [name for name in ("short_mscale", "long_mscale") if getattr(self, name) is not None]
        if len(given) == 1:
            raise ValueError(f"{given[0]} is given without its partner: give short_mscale and long_mscale together")
        for name in given:
            self._set(name, check_float(name, getattr(self, name), positive=True))

    def _check_ntk(self, rope_type: str) -> None:
        if rope_type != "ntk":
            return
        self._set("ntk_rule", check_choice("ntk_rule", "aware" if self.ntk_rule is None else self.ntk_rule, NTK_RULES))
        if (self.ntk_rule == "vllm_mixed") != (self.mixed_b is not None):
            raise ValueError("mixed_b goes with ntk_rule='vllm_mixed' (required there, not allowed otherwise), got "
                             f"ntk_rule={self.ntk_rule!r}, mixed_b={self.mixed_b!r}")
        if self.mixed_b is not None:
            self._set("mixed_b", check_float("mixed_b", self.mixed_b, positive=True))

    # --------------------------------------------------------------------------------- derived
    @property
    def n_pairs(self) -> int:
        """Length of the frequency vector: ``d/2``, or ``head_dim/2`` for ``proportional``."""
        return self.head_dim // 2 if self.placement == "proportional" else self.rotary_dim // 2

    @property
    def rotary_width(self) -> int:
        """Channels the rotation table spans: ``d``, or ``head_dim`` for ``proportional``."""
        return 2 * self.n_pairs

    def to_params(self) -> dict[str, Any]:
        """The adapter-contract dict, unset keys omitted (inverse of
        :func:`refpos.rope.params.rope_config_from_params`).

        The rotated size is given as ``rotary_dim`` only (``partial_rotary_factor`` is derivable, and
        ``int(D·(d/D))`` may round below ``d``).
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            if not f.compare or f.name == "partial_rotary_factor":
                continue
            value = getattr(self, f.name)
            if value is None or (f.name == "mrope_interleaved" and self.mrope_section is None):
                continue  # unset; mrope_interleaved means nothing without sections (1-D RoPE)
            key = "rope_theta" if f.name == "theta" else f.name
            out[key] = list(value) if isinstance(value, tuple) else value
        return out
