"""Mutant: llama3 band edges shifted — the wavelength taken as the period ``1/ω`` instead of ``2π/ω``,
so both band edges (``L_0/hf``, ``L_0/lf``) and the blend move by a factor 2π (docs/extrapolation.md#llama3,
spec_tests/test_rope_vectors.py;
docs/extrapolation.md#llama3, docs/conventions.md: MLX "freqs" are periods).

Caught by the Llama-3.1 / 3.2 frequencies of spec_tests/test_rope_vectors.py (pairs 29–34 blended, 35–63 divided by 8).
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "llama3_band_edges"))
