r"""The keys a family's own code reads in place of transformers' names: the steps of a resolution that honour them.

A model whose code ships with its checkpoint names its position keys as it likes: Qwen's ``rotary_emb_base``,
Phi-3-small's ``rope_embedding_base``, StableLM-epoch's ``rope_pct``, ChatGLM's ``kv_channels``, ``seq_length``
and ``rope_ratio``, Qwen's ``use_dynamic_ntk``. Its family row says which key holds what (the ``rope`` facts
``theta_key``, ``fraction_key``, ``head_dim_key``, ``length_key``, ``ratio_key`` with ``ratio_acts`` or
``ratio_names``, ``rule_key`` with ``rule``: :class:`refpos.models.kinds.rope.RopeFacts`); the resolver
(:class:`refpos.models.hf_resolver.Resolver`) calls these functions at its steps, so that each key a row names is
read where its transformers counterpart would be, and recorded as read only by the step that honours it.

A ratio key scales the rotation one of three ways (:data:`refpos.models.kinds.rope.RATIO_ACTS`):

.. math::
    \text{base:}\ \theta' = r\,\theta, \qquad
    \text{divide:}\ \omega_j\,p \to \omega_j\,p / r, \qquad
    \text{multiply:}\ \omega_j\,p \to \omega_j\,p\,r

Dividing the positions by :math:`r` is position interpolation with factor :math:`s = r` (rope type ``linear``,
:math:`\omega'_j = \omega_j / s`); multiplying them is the same rule with :math:`s = 1/r`. At :math:`r = 1` the
three agree and the key changes nothing. One key may mean different things in the code of different releases of
one family (``rope_ratio`` divides the positions in ChatGLM2-6B-32k's ``modeling_chatglm.py`` and multiplies the
base in ChatGLM3's and GLM-4's): ``ratio_names`` then chooses by the checkpoint's name in ``_name_or_path``, as
TensorRT-LLM's ``ChatGLMConfig.from_hugging_face`` does, and a config whose name says none of them is not
modelled (unless :math:`r = 1`).
"""

from __future__ import annotations

from typing import Any

from refpos.rope.rules import PLAIN
from refpos.validation import check_bool, check_float, check_int


def switched_rule(r: Any, rope_type: str) -> str:
    """The ``rope_type`` after the family's ``rule_key`` and ``ratio_key`` (positions divided or multiplied):
    ``rope_type`` itself, the rule the key switches on, or ``"linear"`` with its factor in ``r.rope_rule``."""
    facts, prefix = r.facts, r.prefix
    if facts.rule_key is not None:
        given = r.cfg.get(facts.rule_key)
        on = check_bool(prefix + facts.rule_key, r.top(facts.rule_key) if given is not None else facts.rule_absent)
        if on and rope_type != PLAIN:
            r.key_gaps[prefix + facts.rule_key] = (f"{facts.rule_key}=true switches on {facts.rule!r} where the rope "
                                                   f"dict asks for {rope_type!r}: both at once are not modelled")
        elif on:
            r.notes.append(f"{r.model_type}: {facts.rule_key} switches on rope type {facts.rule!r}"
                           + ("" if given is not None else " (the config class's default)"))
            rope_type = facts.rule
    r.ratio = ratio_of(r)
    if r.ratio is None or r.ratio[1] == "base":
        return rope_type
    value, acts = r.ratio
    factor = value if acts == "divide" else 1.0 / value  # p / r is ω / r: interpolation by s = r
    key = prefix + facts.ratio_key
    if rope_type != PLAIN:
        r.key_gaps[key] = f"{facts.ratio_key}={value:g} scales the positions of a {rope_type!r} rope: not modelled"
    elif factor < 1:
        r.key_gaps[key] = (f"{facts.ratio_key}={value:g} stretches the positions by {1 / factor:g} (interpolation "
                           "needs a factor >= 1): not modelled")
    else:
        r.notes.append(f"{r.model_type}: {facts.ratio_key}={value:g} {'divides' if acts == 'divide' else 'multiplies'} "
                       f"the positions: rope type 'linear', factor {factor:g}")
        r.rope_rule["factor"] = factor
        rope_type = "linear"
    return rope_type


def ratio_of(r: Any) -> tuple[float, str] | None:
    """``(r, what it scales)`` of the family's ratio key, or ``None`` when it is absent, 1, or of unknown meaning
    (then ``r.key_gaps`` names it)."""
    facts = r.facts
    if facts.ratio_key is None or not r.has(facts.ratio_key):
        return None
    value = check_float(r.prefix + facts.ratio_key, r.top(facts.ratio_key), positive=True)
    if value == 1.0:
        return None  # every meaning agrees: θ, p and ω unchanged
    acts, name = facts.ratio_acts, r.cfg.get("_name_or_path")
    if facts.ratio_names and isinstance(name, str):
        r.top("_name_or_path")
        acts = next((a for n, a in facts.ratio_names if n in name.lower().replace("_", "-")), acts)
    if acts is None:
        meanings = ", ".join(f"{n}: {a}" for n, a in facts.ratio_names)
        r.key_gaps[r.prefix + facts.ratio_key] = (
            f"{facts.ratio_key}={value:g}: its meaning depends on the release of {r.model_type}'s code ({meanings}), "
            f"and _name_or_path ({name!r}) names none of them")
        return None
    return value, acts


def _own(r: Any, key: str | None, field: str, read: Any) -> bool:
    """Set ``field`` from the family's own ``key`` when the config has it (``True``), checked by ``read(name,
    value)``; ``False`` (nothing read) when the row names no key or the config lacks it."""
    if key is None or not r.has(key):
        return False
    r.set(field, read(r.prefix + key, r.top(key)), "config")
    return True


def own_theta(r: Any) -> bool:
    """The base from the family's ``theta_key`` (:func:`_own`)."""
    return _own(r, r.facts.theta_key, "theta", lambda name, value: check_float(name, value, positive=True))


def default_theta(r: Any) -> float:
    """The base of a config that states none, as its class's ``default_theta``: the row's ``rope.theta``; on a
    per-layer-type rope dict's sliding layers ``rope.local_theta``; in Gemma 3's legacy form what
    :meth:`~refpos.models.hf_resolver.Resolver._legacy_per_layer` set (``r.theta_fallback``); else 10000."""
    if not r.top_theta_applies:  # the legacy form's sliding layers: their key's default
        return r.theta_fallback
    if r.per_layer and r.layer_type == "sliding_attention" and r.facts.local_theta is not None:
        return r.facts.local_theta
    return r.facts.theta or r.theta_fallback


def scaled_theta(r: Any) -> None:
    """Multiply the resolved base by the family's ratio when it scales the base (``θ' = r θ``)."""
    if r.ratio is not None and r.ratio[1] == "base":
        value = r.ratio[0]
        r.notes.append(f"{r.model_type}: {r.facts.ratio_key}={value:g} multiplies the base: "
                       f"{r.fields['theta']:g} × {value:g}")
        r.set("theta", r.fields["theta"] * value, "derived")


def own_head_dim(r: Any) -> bool:
    """The head size from the family's ``head_dim_key`` (:func:`_own`)."""
    return _own(r, r.facts.head_dim_key, "head_dim", lambda name, value: check_int(name, value, minimum=2))


def own_fraction(r: Any) -> bool:
    """The rotated fraction from the family's ``fraction_key`` (:func:`_own`)."""
    return _own(r, r.facts.fraction_key, "partial_rotary_factor",
                lambda name, value: check_float(name, value, positive=True))


def length_keys(r: Any) -> tuple[str, ...]:
    """The keys that may hold the declared length, the family's ``length_key`` first."""
    own = (r.facts.length_key,) if r.facts.length_key is not None else ()
    return (*own, "max_position_embeddings", "n_positions")


__all__ = ["default_theta", "length_keys", "own_fraction", "own_head_dim", "own_theta", "ratio_of", "scaled_theta",
           "switched_rule"]
