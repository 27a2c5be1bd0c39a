r"""Query scales: a multiplier of the query that depends on its position, one record per rule.

Some families multiply the query by a factor :math:`s(p)` of its position :math:`p` after the rotation (or
in place of it). Since :math:`(s\,q)\cdot k = s\,(q \cdot k)`, the factor is a per-query temperature of the
logits: the pipeline passes it to :func:`refpos.attention` as ``temperature`` (step 4 of
:mod:`refpos.core.attention`), through the :meth:`refpos.Encoding.temperature` hook.

Each rule is one :class:`QueryScaleRule` of :data:`QUERY_SCALES`, the one registry: its formula, the config
keys it reads (top level or rope dict, with their defaults), the layers it applies to and the transformers
code it was read from. The family table names a family's rule (``query_scale`` column); the layer resolver
(:mod:`refpos.models.layers`) reads it through :meth:`QueryScaleRule.read`, and the not-modelled report
(:mod:`refpos.models.position_keys`) lists the keys of every rule a resolution did not honour, so a rule's
keys are written here and nowhere else.

=========================  ===========  ================================================================
rule                       layers       :math:`s(p)`
=========================  ===========  ================================================================
``llama4_temperature``     without      :math:`1 + a \ln(1 + \lfloor (p + 1) / f \rfloor)`, ``a`` = ``attn_scale``
                           RoPE         (0.1), ``f`` = ``floor_scale`` (8192), when ``attn_temperature_tuning``;
                                        :math:`p` is the token's slot (``arange(T) + past_seen_tokens``),
                                        never the position id
``llama_4_scaling_beta``   every        :math:`1 + \beta \ln(1 + \lfloor p / L_0 \rfloor)`, ``β`` and ``L_0`` from
                                        the rope dict; :math:`p` the position id
``beam_scalable_softmax``  without      :math:`(1 + (p + 1) / 2048)^{0.1}` (scalable softmax; no config key);
                           RoPE         :math:`p` the position id
``qwen_logn``              every        :math:`\log_{L_0}(p + 1)` for :math:`p + 1 > L_0`, else 1; ``L_0`` =
                                        ``seq_length`` (2048), when ``use_logn_attn`` (Qwen-1; its table ends at
                                        :math:`p = 32766`); :math:`p` the token's slot
=========================  ===========  ================================================================

Examples
--------
>>> rule = QUERY_SCALES["llama_4_scaling_beta"]
>>> scale = rule.read({}, {"llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 16384})
>>> scale.params, [round(float(s), 6) for s in scale([0, 16383, 16384, 49152])]
((('beta', 0.1), ('original_max_position_embeddings', 16384.0)), [1.0, 1.0, 1.069315, 1.138629])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.validation import check_float, check_int

#: which layers of a family a rule applies to
APPLIES = ("without_rope", "every")


@dataclass(frozen=True)
class ScaleKey:
    """One config key a rule reads: where (``"top"``: the config, ``"rope"``: the rope dict), its name, its
    default (``None``: required once the rule applies) and the parameter it becomes."""

    place: str
    key: str
    param: str
    default: float | None = None
    kind: str = "float"  # "float" or "int" (validated as such)
    #: the key is the rule's own (False: a length other rules read too, not reported as the rule's)
    own: bool = True


@dataclass(frozen=True)
class QueryScale:
    """A resolved query scale: its rule and parameters; ``scale(positions)`` is :math:`s(p)` in float64."""

    rule: str
    params: tuple[tuple[str, float], ...]

    def __call__(self, positions: Any) -> np.ndarray:
        """:math:`s(p)` for integer positions ``p >= 0`` (any shape), float64."""
        p = np.asarray(positions)
        if p.dtype.kind not in "iu":
            raise TypeError(f"positions must be integers, got dtype {p.dtype}")
        if p.size and p.min() < 0:
            raise ValueError(f"positions must be >= 0, got {int(p.min())}")
        return QUERY_SCALES[self.rule].formula(p.astype(np.float64), dict(self.params))

    @property
    def reads(self) -> tuple[str, ...]:
        """The inputs its rule reads ``p`` from (:attr:`QueryScaleRule.reads`)."""
        return QUERY_SCALES[self.rule].reads

    def as_dict(self) -> dict[str, Any]:
        """``{"rule": …, <param>: value, …}`` (JSON-ready)."""
        return {"rule": self.rule, **dict(self.params)}


@dataclass(frozen=True)
class QueryScaleRule:
    """One query-scale rule (see the module docstring's table)."""

    name: str
    #: :math:`s(p)` as LaTeX, for the docs and the ``refpos positions`` output
    latex: str
    applies: str
    keys: tuple[ScaleKey, ...]
    #: ``(p float64, params) -> s(p)``: the formula, elementwise
    formula: Callable[[np.ndarray, dict[str, float]], np.ndarray]
    source: str
    #: the inputs of the forward ``p`` is read from, in order of precedence (:mod:`refpos.models.sources`): the
    #: position ids (else the slot), or the token's slot alone (Llama 4's ``arange(T) + past_seen_tokens``)
    reads: tuple[str, ...]
    #: a top-level key that switches the rule off when false (``None``: always on where it applies)
    switch: str | None = None

    def key_names(self, place: str) -> tuple[str, ...]:
        """The keys the rule reads at ``place`` (``"top"`` or ``"rope"``), its switch included."""
        names = [k.key for k in self.keys if k.place == place]
        return tuple(names + ([self.switch] if self.switch and place == "top" else []))

    def read(self, cfg: Mapping[str, Any], rope_dict: Mapping[str, Any], *,
             rotates: bool = True) -> QueryScale | None:
        """The rule's scale for a layer of ``cfg`` (``rotates``: the layer has RoPE), or ``None`` when the
        rule does not apply there or is switched off."""
        if (self.applies == "without_rope" and rotates) or (
                self.switch and not switch_on(self.switch, cfg.get(self.switch, True))):
            return None
        def value_of(k: ScaleKey) -> Any:
            return (rope_dict if k.place == "rope" else cfg).get(k.key)

        required = [k for k in self.keys if k.default is None]
        if required and value_of(required[0]) is None:
            return None  # the rule's own key is absent: this model has no scale
        missing = [k.key for k in required if value_of(k) is None]
        if missing:
            where = "the rope dict" if required[0].place == "rope" else "the config"
            raise ValueError(f"{required[0].key} needs {missing[0]} in {where} (query scale {self.name})")
        params = []
        for k in self.keys:
            value = k.default if value_of(k) is None else value_of(k)
            value = float(check_int(k.key, value, minimum=1)) if k.kind == "int" else check_float(
                k.key, value, positive=k.param == "floor_scale")
            params.append((k.param, value))
        return QueryScale(self.name, tuple(params))


def switch_on(name: str, value: Any) -> bool:
    """A rule's switch: a bool, or (Llama-4-Scout's base config ships ``attn_temperature_tuning: 4``, which
    transformers 4.51 read by its truth value) a non-negative int read the same way."""
    if isinstance(value, bool) or (isinstance(value, int) and value >= 0):
        return bool(value)
    raise TypeError(f"{name} must be a bool (or a non-negative int, read as true unless 0), got {value!r}")


def _llama4_temperature(p: np.ndarray, c: dict[str, float]) -> np.ndarray:
    """:math:`1 + a \\ln(1 + \\lfloor (p + 1) / f \\rfloor)`."""
    return 1.0 + c["attn_scale"] * np.log1p(np.floor((p + 1.0) / c["floor_scale"]))


def _beam_scalable_softmax(p: np.ndarray, c: dict[str, float]) -> np.ndarray:
    r""":math:`(1 + (p + 1) / 2048)^{0.1}`, as :math:`\exp(0.1 \ln(1 + (p + 1)/2048))`."""
    return np.exp(0.1 * np.log1p((p + 1.0) / 2048.0))


def _qwen_logn(p: np.ndarray, c: dict[str, float]) -> np.ndarray:
    r""":math:`\log_{L_0}(p + 1) = \ln(p + 1) / \ln L_0` past the training length (:math:`p + 1 > L_0`), else 1."""
    length = c["seq_length"]
    return np.where(p + 1.0 > length, np.log1p(p) / np.log(length), 1.0)


def _llama_4_scaling_beta(p: np.ndarray, c: dict[str, float]) -> np.ndarray:
    """:math:`1 + \\beta \\ln(1 + \\lfloor p / L_0 \\rfloor)`."""
    return 1.0 + c["beta"] * np.log1p(np.floor(p / c["original_max_position_embeddings"]))


#: every query-scale rule, by name (the one registry)
QUERY_SCALES: dict[str, QueryScaleRule] = {rule.name: rule for rule in (
    QueryScaleRule(
        "llama4_temperature", r"1 + a \ln(1 + \lfloor (p + 1) / f \rfloor)", "without_rope",
        (ScaleKey("top", "attn_scale", "attn_scale", 0.1), ScaleKey("top", "floor_scale", "floor_scale", 8192.0)),
        _llama4_temperature, "llama4/modeling_llama4.py: Llama4TextAttention.forward", ("cache_position",),
        switch="attn_temperature_tuning"),
    QueryScaleRule(
        "llama_4_scaling_beta", r"1 + \beta \ln(1 + \lfloor p / L_0 \rfloor)", "every",
        (ScaleKey("rope", "llama_4_scaling_beta", "beta"),
         ScaleKey("rope", "original_max_position_embeddings", "original_max_position_embeddings", kind="int")),
        _llama_4_scaling_beta, "ministral3/modeling_ministral3.py: get_llama_4_attn_scale, Ministral3Attention.forward",
        ("position_ids", "cache_position")),
    QueryScaleRule(
        "qwen_logn", r"\log_{L_0}(p + 1)\ (p + 1 > L_0;\ 1\ \text{otherwise})", "every",
        (ScaleKey("top", "seq_length", "seq_length", 2048.0, kind="int", own=False),), _qwen_logn,
        "github:alibaba/MNN/transformers/llm/export/llm_models/Qwen-1_8B/modeling_qwen.py: QWenAttention.forward",
        ("cache_position",), switch="use_logn_attn"),  # logn_tensor[key_size − T : key_size]: the token's slot
    QueryScaleRule(
        "beam_scalable_softmax", r"(1 + (p + 1) / 2048)^{0.1}", "without_rope", (), _beam_scalable_softmax,
        "beam/modeling_beam.py: compute_attention_scaling, BeamModel.forward", ("position_ids", "cache_position")),
)}


def _shared(rule: QueryScaleRule) -> set[str]:
    return {k.key for k in rule.keys if not k.own}


def scale_key_effects() -> tuple[dict[str, str], dict[str, str]]:
    """``(top-level key -> effect, rope-dict key -> effect)`` of every rule's keys, for the not-modelled
    report: a key of a rule the resolution did not honour is reported with this effect."""
    top: dict[str, str] = {}
    rope: dict[str, str] = {}
    for rule in QUERY_SCALES.values():
        effect = f"position-dependent query scale {rule.latex} ({rule.name})"
        top.update(dict.fromkeys((k for k in rule.key_names("top") if k not in _shared(rule)), effect))
        # original_max_position_embeddings is the rope dict's length before anything else: not the rule's own
        rope.update({k: effect for k in rule.key_names("rope") if k != "original_max_position_embeddings"})
    return top, rope


__all__ = ["APPLIES", "QUERY_SCALES", "QueryScale", "QueryScaleRule", "ScaleKey", "scale_key_effects", "switch_on"]
