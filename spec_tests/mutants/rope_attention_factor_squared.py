"""Mutant: the RoPE attention factor applied twice — cos and sin carry A² (a port multiplying HF's final
``attention_factor`` by its own mscale; docs/extrapolation.md#yarn, docs/diagnosis.md), and the port reports
the A² it uses.

Caught by the A and the apply/logit numbers of spec_tests/test_rope_vectors.py for YaRN (the properties hold
for the A² it reports).
"""

from __future__ import annotations

from spec_tests.mutants._base import rope_mutant

globals().update(rope_mutant(__name__, "squared_attention_factor"))
