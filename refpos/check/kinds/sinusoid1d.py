"""``refpos check sinusoid1d``: a 1-D audio or time-series sinusoid from a call of ``sinusoid_1d`` (positions of any
sign, every variant's keywords), ``padded_sinusoid`` (fairseq's, of a step mask) or ``sinusoid1d_variant`` (a
named variant's table: refpos's own call, for the relative and standardised variants), against
:mod:`refpos.encodings.sinusoid1d` within the bound of a float32 port per row
(:meth:`refpos.encodings.sinusoid1d_mistakes.Sinusoid1dInputs.reference`), the mistake named by
:func:`~refpos.encodings.sinusoid1d_mistakes.identify_sinusoid1d` (docs/sinusoid1d.md#mistakes).

A ``sinusoid_1d`` call is a variant of its own: a :class:`~refpos.encodings.sinusoid1d_variants.SinusoidVariant`
that fixes no keyword, every keyword the call's; ``padded_sinusoid`` is the variant ``fairseq_padded``.
"""

from __future__ import annotations

from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.sinusoid1d_mistakes import SINUSOID1D_MISTAKES, Sinusoid1dInputs, identify_sinusoid1d
from refpos.encodings.sinusoid1d_variants import SinusoidVariant

#: the keywords of a ``sinusoid_1d`` call beside the positions, width and amplitude
_KEYWORDS = ("spacing", "layout", "first", "base", "frequency_scale")
#: a ``sinusoid_1d`` call: given positions, a given amplitude, every keyword the call's
CALL = SinusoidVariant("a call of sinusoid_1d", MappingProxyType({}), "given", "given", "the call's positions", (),
                       "refpos check", "the call's own keywords",
                       config_keys=MappingProxyType({k: (k, None) for k in _KEYWORDS}))


def sinusoid_1d(positions: Any, dim: int, spacing: str, layout: str, first: str = "sin", base: float = 10000.0,
                frequency_scale: float = 1.0, amplitude: float = 1.0) -> Sinusoid1dInputs:
    """The inputs of a ``sinusoid_1d`` call (integer positions, of any sign)."""
    positions = np.asarray(positions)
    if positions.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers, got {positions.dtype}")
    return Sinusoid1dInputs(CALL, dim, {"positions": positions, "spacing": spacing, "layout": layout,
                                        "first": first, "base": base, "frequency_scale": frequency_scale,
                                        "amplitude": amplitude})


def padded_sinusoid(mask: Any, dim: int, padding_idx: int, past: int = 0) -> Sinusoid1dInputs:
    """The inputs of a ``padded_sinusoid`` call (fairseq's variant)."""
    return Sinusoid1dInputs("fairseq_padded", dim, {"mask": np.asarray(mask, dtype=bool), "padding_idx": padding_idx,
                                                     "past": past})


def sinusoid1d_variant(variant: str, dim: int, **inputs: Any) -> Sinusoid1dInputs:
    """The inputs of a named variant's table (:meth:`~refpos.encodings.sinusoid1d_variants.SinusoidVariant.build`:
    ``positions=``, ``left=, right=`` or ``mask=, padding_idx=``, and the keywords its config sets), for the
    variants no contract function computes: relative distances (ESPnet, Gemma 4's audio), PatchTST's standardised
    table."""
    arrays = {k: np.asarray(v, dtype=bool if k == "mask" else None) for k, v in inputs.items()
              if k in ("positions", "mask")}
    return Sinusoid1dInputs(variant, dim, {**inputs, **arrays})


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Canary-like tables (amplitude 1/√16, concatenated), TimesFM's ω times 2 of base 2500, a padded batch of
    fairseq's, ESPnet's relative distances and PatchTST's standardised table."""
    mask = np.ones((2, 12), dtype=bool)
    mask[0, 9:] = False
    mask[1, :3] = False
    positions = np.arange(40)
    return [("sinusoid_1d", {"positions": positions, "dim": 16, "spacing": "paper", "layout": "concat",
                             "amplitude": 0.25}),
            ("sinusoid_1d", {"positions": positions, "dim": 16, "spacing": "tensor2tensor", "layout": "concat",
                             "base": 2500.0, "frequency_scale": 2.0}),
            ("padded_sinusoid", {"mask": mask, "dim": 16, "padding_idx": 1}),
            ("sinusoid1d_variant", {"variant": "espnet_relative", "dim": 16, "left": 7, "right": 7}),
            ("sinusoid1d_variant", {"variant": "patchtst", "dim": 16, "positions": positions})]


SINUSOID1D_CHECK = KindCheck(
    kind="sinusoid1d", calls=(sinusoid_1d, padded_sinusoid, sinusoid1d_variant), reference=Sinusoid1dInputs.reference,
    identify=identify_sinusoid1d, mistakes={m.name: m.description for m in SINUSOID1D_MISTAKES},
    wrong=partial(mistake_output, SINUSOID1D_MISTAKES), examples=_examples)

__all__ = ["CALL", "SINUSOID1D_CHECK", "padded_sinusoid", "sinusoid1d_variant", "sinusoid_1d"]
