"""Mutant: RoPE layout swapped — half-split (NeoX) pairs where interleaved (GPT-J) pairs are asked, and
back (docs/conventions.md#pair-layouts, docs/diagnosis.md: ``impl(x, p) = Pᵀ·ref(P·x, p)``; exact at p = 0).

Norms, relative invariance and composition still hold: only tests that pin the layout (spec_tests/test_rope_vectors.py
vectors, the Meta ↔ HF permutation) can see it.
"""

from __future__ import annotations

from typing import Any

from spec_tests.mutants._base import inherit

globals().update(inherit(__name__, "layout_swap"))
_reference = dict(globals())

SWAP = {"half": "interleaved", "interleaved": "half"}


def _swapped(rope: dict) -> dict:
    layout = rope.get("layout", "half")
    return {**rope, "layout": SWAP.get(layout, layout)}


def _wrap(name: str) -> Any:
    func = _reference[name]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "rope" in kwargs:
            kwargs["rope"] = _swapped(kwargs["rope"])
        else:
            args = tuple(_swapped(a) if isinstance(a, dict) else a for a in args)
        return func(*args, **kwargs)

    wrapper.__name__ = name
    return wrapper


for _name in ("rope_cos_sin", "apply_rope", "apply_rope_complex", "rope_rotation_matrix", "rope_attention_logits"):
    if _name in _reference:
        globals()[_name] = _wrap(_name)
