"""Mutant: llama3 band edges shifted — the wavelength taken as the period ``1/ω`` instead of ``2π/ω``,
so both band edges (``L_0/hf``, ``L_0/lf``) and the blend move by a factor 2π (docs/extrapolation.md#llama3,
spec_tests/test_rope_vectors.py;
docs/extrapolation.md#llama3, docs/conventions.md: MLX "freqs" are periods).

Caught by the Llama-3.1 / 3.2 frequencies of spec_tests/test_rope_vectors.py (pairs 29–34 blended, 35–63 divided by 8).
"""

from __future__ import annotations

from spec_tests.mutants._base import inherit_patched, module

_scaling = module("refpos.rope.scaling")


def _shifted_llama3_inv(rope, xp):
    w = _scaling.base_inv_freq(rope.theta, rope.rotary_dim, xp)
    s, l0 = rope.factor, rope.original_max_position_embeddings
    low, high = rope.low_freq_factor, rope.high_freq_factor
    wavelen = 1 / w  # the mistake: a period, not 2π/ω
    g = (l0 / wavelen - low) / (high - low)
    mid = (wavelen >= l0 / high) & (wavelen <= l0 / low)
    return xp.where(wavelen > l0 / low, w / s, xp.where(mid, (1 - g) * w / s + g * w, w))


globals().update(inherit_patched(__name__, "llama3_band_edges",
                                 (_scaling, "_llama3_inv", _shifted_llama3_inv)))
