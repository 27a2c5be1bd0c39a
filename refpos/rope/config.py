r"""``RopeConfig``: every parameter of a rotary position embedding, validated on construction.

One frozen dataclass holds the parameters of every RoPE variant (docs/extrapolation.md#the-math): the head
geometry every RoPE has, declared here, and one field per key of a scaling rule, taken from the rule registry
(:data:`refpos.rope.rules.PARAMETERS`, in its order, after ``max_position_embeddings``). Each rule's record
(:data:`refpos.rope.rules.RULES`) says which keys it reads, which it requires, how ``factor`` is checked and
derived, and what else it validates; this class applies that record. Names follow the transformers v5
``rope_parameters`` keys, except ``theta`` (``rope_theta``). A key the chosen ``rope_type`` does not read
must stay at its default: ``RopeConfig(rope_type="default", factor=2.0)`` is an error, not a silently ignored
value.

Defaults are the anchors' (HF 5.24.0): ``theta = 10000``, ``beta_fast = 32``, ``beta_slow = 1``,
``truncate = True``, full rotation, ``layout = "half"``, ``angle_sign = 1``. Parameters HF requires have no default.

Derived fields are filled in on construction:

* ``rotary_dim`` ``d`` and ``partial_rotary_factor`` from each other: ``d = int(head_dim · prf)`` (the
  HF rule; float product, then truncation). ``proportional`` uses ``d = 2·int(prf·head_dim // 2)``
  rotated channels of a full-width table (docs/rope.md#partial-rotary). The stored ``partial_rotary_factor`` is then
  ``d / head_dim``, so configurations that rotate the same channels compare equal.
* ``placement``: ``"first"``, or ``"proportional"`` for ``rope_type="proportional"``.
* ``factor`` of ``yarn`` / ``longrope`` when absent: ``max_position_embeddings /
  original_max_position_embeddings`` (HF); ``proportional``: 1.

``provenance``, ``unused_keys`` and ``notes`` are metadata filled by :func:`refpos.models.from_hf_config`; they
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

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from refpos.bounds import BASE
from refpos.pairs import PLACEMENTS as PAIR_PLACEMENTS
from refpos.pairs import ROPE_LAYOUTS
from refpos.rope.mrope import assignment_name, check_sections
from refpos.rope.rules import DYNAMIC_RULES, NTK_RULES, PARAMETERS, ROPE_TYPES, RopeRule, rule_of
from refpos.validation import MAX_EXACT_POSITION, check_bool, check_choice, check_float, check_int

__all__ = ["DYNAMIC_RULES", "LAYOUTS", "MAX_HEAD_DIM", "NTK_RULES", "PLACEMENTS", "ROPE_TYPES", "RopeConfig"]

#: memory layouts of the rotated pairs (docs/conventions.md#pair-layouts); which channels pair up: :mod:`refpos.pairs`
LAYOUTS = ROPE_LAYOUTS
#: where the rotated channels sit in a head (docs/rope.md#partial-rotary); "head"/"tail" are accepted aliases
PLACEMENTS = PAIR_PLACEMENTS
_PLACEMENT_ALIASES = {"head": "first", "tail": "last"}
#: the widest head refpos builds tables for: a bound on memory (a config asking for 2**40 would need 2**39 pairs)
MAX_HEAD_DIM = 2**16
#: the declared field after which the scaling rules' keys are inserted
_RULE_KEYS_AFTER = "max_position_embeddings"


def _with_rule_keys(cls: type) -> type:
    """Declare one field per key of the rule registry (:data:`refpos.rope.rules.PARAMETERS`, with its default)
    right after ``max_position_embeddings``, before :func:`dataclasses.dataclass` turns the class into one, and
    list the keys in the class docstring."""
    own = inspect.get_annotations(cls)
    annotations: dict[str, Any] = {}
    for name, annotation in own.items():
        annotations[name] = annotation
        if name == _RULE_KEYS_AFTER:
            annotations.update({p.name: p.annotation for p in PARAMETERS.values()})
    cls.__annotations__ = annotations
    for parameter in PARAMETERS.values():
        setattr(cls, parameter.name, parameter.default)
    cls.__doc__ = (cls.__doc__ or "") + "\n    Scaling-rule keys (:data:`refpos.rope.rules.PARAMETERS`)\n" + "".join(
        f"    {p.name} : {p.annotation}\n        {p.doc}.\n" for p in PARAMETERS.values())
    return cls


@dataclass(frozen=True, kw_only=True)
@_with_rule_keys
class RopeConfig:
    """Parameters of one rotary position embedding (docs/rope.md#the-math, docs/extrapolation.md#the-math).

    Parameters
    ----------
    rope_type : str
        One of :data:`ROPE_TYPES` (:data:`refpos.rope.rules.RULES`: which keys each reads and requires).
    theta : float
        Base θ > 1 (HF ``rope_theta``): the frequencies θ^(−2j/d) decrease along the pairs.
    head_dim : int
        Head size ``D``.
    rotary_dim, partial_rotary_factor : int, float, optional
        Rotated channels ``d`` (even, ``2 ≤ d ≤ D``) or the fraction ``d/D``; give either (or both, if
        they agree). Default: all ``D`` channels.
    placement : {"first", "last", "proportional"}, optional
        Rotated channels at the start of the head (GPT-NeoX, Phi), at its end (DeepSeek MLA), or spread
        as zero-frequency pairs over the full table (rules whose table spans the head, ``proportional``).
    layout : {"half", "interleaved", "deinterleaved"}
        Pairs ``(j, j + d/2)`` (NeoX, HF Llama), ``(2j, 2j + 1)`` (GPT-J, Meta) or interleaved input
        written half-split (HF DeepSeek-V3).
    max_position_embeddings : int, optional
        Declared length ``L_max`` (dynamic NTK requires it; yarn and longrope derive ``factor`` from it).
    mrope_section : sequence of 3 int, optional
        M-RoPE (:mod:`refpos.rope.mrope`, any ``rope_type``): pairs reading the t, h, w positions,
        ``s_t + s_h + s_w = n_pairs``. ``None``: 1-D RoPE.
    mrope_interleaved : bool
        M-RoPE assignment: contiguous bands (Qwen2-VL, GLM-4.1V) or round-robin ``t h w …`` (Qwen3-VL).
    mrope_assignment : str, optional
        An M-RoPE assignment that ``mrope_interleaved`` cannot name (:data:`refpos.rope.mrope.ASSIGNMENTS`):
        ``"hw_alternating"`` (ERNIE-4.5-VL). ``"contiguous"`` and ``"interleaved"`` are accepted and stored as
        ``mrope_interleaved`` (this field is then ``None``). :attr:`mrope_scheme` names the assignment in use.
    angle_sign : {1, -1}
        The direction every pair turns: pair ``j`` at position ``p`` turns by ``s·p·ω_j``. ``1``
        for every RoPE but one whose code turns the other way: NanoChat's ``rotate_half`` returns
        ``cat(x2, -x1)`` where Llama's returns ``cat(-x2, x1)``, so that ``q·cos φ + rh(q)·sin φ`` turns each
        pair by ``−φ``.
    """

    rope_type: str = "default"
    theta: float = 10000.0
    head_dim: int
    rotary_dim: int | None = None
    partial_rotary_factor: float | None = None
    placement: str | None = None
    layout: str = "half"
    max_position_embeddings: int | None = None
    # the scaling rules' keys are declared here by _with_rule_keys (refpos.rope.rules.PARAMETERS)
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False
    mrope_assignment: str | None = None
    angle_sign: int = 1
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
        rule = rule_of(self.rope_type)
        self._set("theta", BASE.check("theta", self.theta))
        head_dim = check_int("head_dim", self.head_dim, minimum=2, maximum=MAX_HEAD_DIM)
        self._set("layout", check_choice("layout", self.layout, LAYOUTS))
        self._check_rule_keys(rule)
        self._resolve_rotary(rule, head_dim)
        if self.max_position_embeddings is not None:
            self._set("max_position_embeddings", check_int("max_position_embeddings", self.max_position_embeddings,
                                                           minimum=1, maximum=MAX_EXACT_POSITION))
        for name, reason in rule.required:
            if getattr(self, name) is None:
                raise ValueError(f"{name} is required for rope_type {rule.name!r}" + (f" ({reason})" if reason else ""))
        self._resolve_factor(rule)
        for name, value in rule.check(self).items():
            self._set(name, value)
        self._resolve_mrope()
        if isinstance(self.angle_sign, bool) or not isinstance(self.angle_sign, int) or self.angle_sign not in (1, -1):
            raise ValueError(f"angle_sign must be 1 or -1 (the direction every pair turns), got {self.angle_sign!r}")
        self._set("provenance", MappingProxyType(dict(self.provenance)))
        self._set("not_modelled", MappingProxyType(dict(self.not_modelled)))
        self._set("unused_keys", tuple(self.unused_keys))
        self._set("notes", tuple(self.notes))

    # --------------------------------------------------------------------------------- validation
    def _check_rule_keys(self, rule: RopeRule) -> None:
        """Keys of other rules stay at their defaults; the rule's own keys pass their :class:`Parameter` check."""
        for name, parameter in PARAMETERS.items():
            value = getattr(self, name)
            if name in rule.parameters:
                if value is not None or parameter.default is not None:
                    self._set(name, parameter.check(name, value))
            elif value is not None and not (value == parameter.default
                                            and isinstance(value, bool) == isinstance(parameter.default, bool)):
                raise ValueError(f"{name}={value!r} is not used by rope_type {rule.name!r}; leave it unset")

    def _resolve_rotary(self, rule: RopeRule, head_dim: int) -> None:
        prf = self.partial_rotary_factor
        if prf is not None:
            prf = check_float("partial_rotary_factor", prf, positive=True)
            if prf > 1:
                raise ValueError(f"partial_rotary_factor must be in (0, 1], got {prf}")
        rotary_dim = self.rotary_dim
        if rotary_dim is not None:
            rotary_dim = check_int("rotary_dim", rotary_dim, minimum=1)
        if prf is not None:
            from_prf = 2 * int(prf * head_dim // 2) if rule.spans_head else int(head_dim * prf)
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
        if rule.spans_head and head_dim % 2:
            raise ValueError(f"head_dim must be even for rope_type {rule.name!r}, got {head_dim}")
        if rotary_dim < rule.min_rotary_dim:
            raise ValueError(f"rotary_dim must be >= {rule.min_rotary_dim} for rope_type {rule.name!r}, got "
                             f"{rotary_dim}")
        self._set("rotary_dim", rotary_dim)
        self._set("partial_rotary_factor", rotary_dim / head_dim)  # normalised: equal configs compare equal
        placement = self.placement
        if placement is None:
            placement = "proportional" if rule.spans_head else "first"
        if isinstance(placement, str):
            placement = _PLACEMENT_ALIASES.get(placement, placement)
        placement = check_choice("placement", placement, PLACEMENTS)
        if (placement == "proportional") != rule.spans_head:
            raise ValueError(f"placement 'proportional' goes with a table that spans the head (rope_type "
                             f"'proportional') only, got placement={placement!r}, rope_type={rule.name!r}")
        self._set("placement", placement)

    def _resolve_mrope(self) -> None:
        """``mrope_section`` checked against the assignment; the assignment stored once: ``mrope_interleaved`` for
        the two it names, ``mrope_assignment`` for the others."""
        interleaved = check_bool("mrope_interleaved", self.mrope_interleaved)
        name = assignment_name(interleaved if self.mrope_assignment is None else self.mrope_assignment)
        if interleaved and name != "interleaved":
            raise ValueError(f"mrope_interleaved=True disagrees with mrope_assignment={name!r}; give one of them")
        self._set("mrope_section", check_sections(self.mrope_section, self.n_pairs, name))
        self._set("mrope_interleaved", name == "interleaved")
        self._set("mrope_assignment", None if name in ("contiguous", "interleaved") else name)

    def _resolve_factor(self, rule: RopeRule) -> None:
        """``factor`` by the rule's :class:`~refpos.rope.rules.FactorRule`: derived or defaulted when absent,
        then checked."""
        if rule.factor is None:
            return
        factor = self.factor
        if factor is None and rule.factor.from_lengths and self.max_position_embeddings is not None:
            factor = self.max_position_embeddings / self.original_max_position_embeddings
        if factor is None:
            factor = rule.factor.default
        if factor is None:
            if rule.factor.required:
                raise ValueError(f"factor is required for rope_type {rule.name!r}"
                                 + (" (or max_position_embeddings to derive it)" if rule.factor.from_lengths else ""))
            return
        factor = check_float("factor", factor, positive=True)
        if factor < 1 and rule.factor.at_least_one:
            raise ValueError(f"factor must be >= 1 for rope_type {rule.name!r}, got {factor}")
        self._set("factor", factor)

    # --------------------------------------------------------------------------------- derived
    @property
    def n_pairs(self) -> int:
        """Length of the frequency vector: ``d/2``, or ``head_dim/2`` when the table spans the head."""
        return self.head_dim // 2 if self.placement == "proportional" else self.rotary_dim // 2

    @property
    def mrope_scheme(self) -> str | None:
        """The M-RoPE assignment by name (:data:`refpos.rope.mrope.ASSIGNMENTS`); ``None`` for 1-D RoPE."""
        if self.mrope_section is None:
            return None
        return self.mrope_assignment or ("interleaved" if self.mrope_interleaved else "contiguous")

    @property
    def rotary_width(self) -> int:
        """Channels the rotation table spans: ``d``, or ``head_dim`` when the table spans the head."""
        return 2 * self.n_pairs

    def to_params(self) -> dict[str, Any]:
        """The adapter-contract dict, unset keys omitted (inverse of
        :func:`refpos.rope.params.rope_config_from_params`).

        The rotated size is given as ``rotary_dim`` only (``partial_rotary_factor`` is derivable, and
        ``int(D·(d/D))`` may round below ``d``); ``angle_sign`` only when it is ``-1``.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            if not f.compare or f.name == "partial_rotary_factor":
                continue
            value = getattr(self, f.name)
            if value is None or (f.name == "mrope_interleaved" and self.mrope_section is None) \
                    or (f.name == "angle_sign" and value == 1):
                continue  # unset; mrope_interleaved means nothing without sections (1-D RoPE); the usual direction
            key = "rope_theta" if f.name == "theta" else f.name
            out[key] = list(value) if isinstance(value, tuple) else value
        return out
