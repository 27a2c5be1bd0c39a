r"""Top-level keys a checkpoint states beside the per-layer-type rope dict its config class reads.

A family whose rotary code takes each layer type's base and rotated fraction from ``rope_parameters[<type>]``
may ship checkpoints written for other code, which states the same facts at the top level under names of its own.
MiMo-V2-Flash's published ``config.json`` states ``rope_theta`` (the full-attention layers' base),
``swa_rope_theta`` (the sliding-window layers' base), one ``partial_rotary_factor`` for both and ``swa_head_dim``;
transformers' ``MiMoV2FlashConfig`` reads none of them (its ``rope_parameters`` default holds the same numbers:
θ = 5·10⁶ and 10⁴, fraction 0.334), while vLLM's ``mimo_v2`` reads exactly those keys. The family row names them
(``rope.restated``: key → ``<layer type>:<field>``, ``*`` for every type; :class:`~refpos.models.kinds.rope.RopeFacts`)
and :func:`check` compares each with what the resolution of a layer of that type found:

.. math::
    v_\text{key} = f_\text{type} \;\Rightarrow\; \text{the layer's answer stands};\qquad
    v_\text{key} \ne f_\text{type} \;\Rightarrow\; \text{the key is not modelled (the layer is refused)}

where :math:`f` is the resolved field: the base :math:`\theta`, the rotated fraction :math:`\rho` (the layer
rotates :math:`\lfloor d\,\rho\rfloor` of its :math:`d` channels) or the head width :math:`d`. Equal values are
one fact stated twice; unequal ones mean that code reading the key rotates differently from the class, and refpos
does not choose between them. On a layer of another type the key is read without effect.
"""

from __future__ import annotations

from typing import Any

#: the words each restated field is named by in a report
FIELD_WORDS = {"theta": "base θ", "partial_rotary_factor": "rotated fraction", "head_dim": "head width"}


def check(r: Any) -> None:
    """Read every key the family row's ``rope.restated`` names in the config of resolver ``r`` (a
    :class:`refpos.models.hf_resolver.Resolver`, after its theta and head steps): a note where it states the
    layer's resolved field (or a layer of another type), ``r.key_gaps`` where it states another value.

    Raises
    ------
    TypeError
        A restated key that is not a number.

    See Also
    --------
    refpos.models.kinds.rope.RopeFacts : the ``restated`` fact.
    refpos.models.position_keys.not_modelled_report : reports ``r.key_gaps``.
    """
    for key, target in r.facts.restated:
        if r.cfg.get(key) is None:
            continue
        value = r.top(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{r.prefix}{key} must be a number, got {type(value).__name__} {value!r}")
        layer_type, field = target.split(":")
        words = FIELD_WORDS[field]
        if not r.per_layer:
            r.key_gaps[r.prefix + key] = (f"{key}={value!r} states the {layer_type} layers' {words}, but the rope "
                                          "dict is not per layer type: not modelled")
        elif layer_type not in ("*", r.layer_type):
            r.notes.append(f"{key}={value!r} read, without effect on a {r.layer_type} layer: it states the "
                           f"{layer_type} layers' {words}")
        elif r.fields.get(field) is None:
            r.key_gaps[r.prefix + key] = (f"{key}={value!r} states the {words} of a layer whose resolution has none: "
                                          "not modelled")
        elif value == r.fields[field]:
            r.notes.append(f"{key}={value!r} states the {words} the class reads ({r.provenance.get(field)}) for "
                           f"a {r.layer_type} layer")
        else:
            r.key_gaps[r.prefix + key] = (
                f"{key}={value!r} differs from the {words} {r.fields[field]!r} the config class reads for a "
                f"{r.layer_type} layer ({r.provenance.get(field)}): code that reads {key} (vLLM's) rotates "
                "otherwise; not modelled")


__all__ = ["FIELD_WORDS", "check"]
