r"""The keys beside an MLA head geometry (``qk_nope_head_dim`` + ``qk_rope_head_dim``, DeepSeek's split) that a
resolution reads: the rope dict's ``partial_rotary_factor`` and transformers' ``per_layer_config`` widths.

An MLA attention rotates the last :math:`d_{rope}` = ``qk_rope_head_dim`` channels of each head. Some config
classes also write a fraction into the rope dict (Mistral-4's ``qk_rope_head_dim / (qk_nope_head_dim +
qk_rope_head_dim)``, Dots3-Note's ``qk_rope_head_dim / head_dim``), and the rope function builds its table from
it:

.. math:: d = \lfloor D \cdot \mathrm{prf} \rfloor, \qquad \omega_j = \theta^{-2j/d}, \quad j = 0, \dots, d/2 - 1,

with :math:`D` the config's ``head_dim`` (Mistral-4's config class sets it to :math:`d_{nope} + d_{rope}`). The
attention multiplies that table into the :math:`d_{rope}` rotated channels, so it runs only when :math:`d =
d_{rope}`, and then the frequencies are those of :math:`d_{rope}` whichever :math:`D` gave them: the fraction is
read and noted. A fraction that gives another width is reported as not modelled by name.

``per_layer_config`` (layer index → keys overriding the config's for that layer, transformers'
``HeterogeneousConfigMixin``) can give a layer type its own head widths (Dots3-Note's sliding layers): refpos
resolves one geometry per layer type from the top-level keys, so such an entry is reported as not modelled.
The resolver (:class:`refpos.models.hf_resolver.Resolver`) calls both at its head-geometry step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the head widths a per_layer_config entry may override
WIDTH_KEYS = ("head_dim", "qk_rope_head_dim", "qk_nope_head_dim")


def mla_fraction(r: Any, head: int, rot: int) -> None:
    """Read the rope dict's ``partial_rotary_factor`` of an MLA config when :math:`\\lfloor D \\cdot prf \\rfloor`
    is ``rot`` for :math:`D` = ``head`` (:math:`d_{nope} + d_{rope}`) or the config's ``head_dim``; else report it."""
    if r.rope.get("partial_rotary_factor") is None:
        return
    prf = r.from_rope("partial_rotary_factor")
    heads = [head] + ([r.cfg["head_dim"]] if isinstance(r.cfg.get("head_dim"), int) else [])
    numeric = not isinstance(prf, bool) and isinstance(prf, (int, float))
    fits = [d for d in heads if numeric and int(d * prf) == rot]
    if not fits:
        r.key_gaps[f"{r.rope_path}.partial_rotary_factor"] = (
            f"partial_rotary_factor={prf!r} gives tables of int(D·{prf!r}) channels with D in {sorted(set(heads))}, "
            f"not the qk_rope_head_dim={rot} channels resolved here")
        return
    if fits[0] != head:
        r.top("head_dim")
    r.notes.append(f"{r.rope_path}.partial_rotary_factor={prf!r} read: int({fits[0]}·{prf!r}) = {rot}, the "
                   "qk_rope_head_dim channels the attention rotates")


def per_layer_geometry(r: Any) -> None:
    """Report ``per_layer_config`` when an entry for a layer of the resolved type sets a head width."""
    entries, types = r.cfg.get("per_layer_config"), r.cfg.get("layer_types")
    if not isinstance(entries, Mapping) or not isinstance(types, list):
        return
    for index, entry in entries.items():
        i = int(index) if str(index).isdigit() else -1
        own = sorted(k for k in WIDTH_KEYS if isinstance(entry, Mapping) and k in entry)
        if 0 <= i < len(types) and types[i] == r.layer_type and own:
            r.key_gaps[r.prefix + "per_layer_config"] = (
                f"layer {i} ({r.layer_type}) sets its own {', '.join(own)}: transformers' per-layer overrides of "
                "the head geometry are not read")
            return


__all__ = ["WIDTH_KEYS", "mla_fraction", "per_layer_geometry"]
