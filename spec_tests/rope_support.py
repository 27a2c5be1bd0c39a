"""Helpers of the RoPE spec tests: hypothesis strategies of adapter-contract rope dicts and oracles.

A rope dict has the keys of a transformers v5 ``rope_parameters`` entry plus ``head_dim``,
``rotary_dim``, ``max_position_embeddings``, ``layout``, ``placement`` (the adapter contract). The
oracles here are written from the formulas of docs/rope.md and docs/extrapolation.md, independently of refpos.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from support import IMPL, IMPL_NAME, declared_constants, declared_support, size, size_from, supported_subset

from refpos.pairs import PARTIAL_PLACEMENTS, SAME_PAIRING_LAYOUTS
from refpos.rope.rules import ROPE_TYPES, RULES, DrawContext

#: the types transformers implements (each rule's record names transformers' function, where there is one)
HF_TYPES = tuple(name for name, rule in RULES.items() if rule.transformers)
THETAS = st.sampled_from([10000.0, 500000.0, 1000000.0, 150000.0]) | st.floats(50.0, 1e7)


@st.composite
def rope_dicts(
    draw: st.DrawFn,
    rope_types: tuple[str, ...] = ROPE_TYPES,
    *,
    layouts: tuple[str, ...] = SAME_PAIRING_LAYOUTS,
    partial: bool = True,
    factor_one: bool = False,
    head_dims: tuple[int, ...] = (4, 6, 8, 12, 16, 32),
) -> dict[str, Any]:
    """A valid rope dict of one of ``rope_types``; partial rotary (first / last) when ``partial``.

    The keys of the rule itself are drawn by its record (:attr:`refpos.rope.rules.RopeRule.draw`, the draw
    ``refpos.testing.strategies`` uses too), so every rule of :data:`refpos.rope.rules.RULES` is drawn.
    ``factor_one`` draws ``factor = 1`` (and whatever else makes the rule plain RoPE: unit LongRoPE lists, no
    explicit attention factor).
    """
    rope_types, layouts, placements = _declared(rope_types, layouts)
    rule = RULES[draw(st.sampled_from(rope_types))]
    head_dim = draw(size_from(head_dims))
    rotary_dim = head_dim
    rope: dict[str, Any] = {"rope_type": rule.name, "rope_theta": draw(THETAS), "head_dim": head_dim,
                            "layout": draw(st.sampled_from(layouts))}
    if rule.spans_head:  # a full-width table, zero frequencies past the rotated pairs
        rotary_dim = 2 * draw(size(1, head_dim // 2))
        rope["rotary_dim"] = rotary_dim
    elif partial and placements and draw(st.booleans()):
        rotary_dim = 2 * draw(size(rule.min_rotary_dim // 2, head_dim // 2))
        rope["rotary_dim"] = rotary_dim
        rope["placement"] = draw(st.sampled_from(placements))
    original = draw(st.sampled_from([64, 512, 2048, 4096, 8192]))
    factor = 1.0 if factor_one else draw(st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0, 40.0]) | st.floats(1.0, 64.0))
    rope.update(rule.draw(draw, st, DrawContext(rotary_dim, original, factor, factor_one)))  # the rule's own keys
    rope.update(declared_constants(rope["rope_type"]))  # what the library hard-codes (INFO["rope_constants"])
    return rope


def _declared(rope_types: tuple[str, ...], layouts: tuple[str, ...]
              ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The asked-for rope types and layouts, and the partial placements, that the adapter declares it
    supports (``INFO["rope_types"]`` etc., ``support.declared_support``); a skip when none is left."""
    types = supported_subset("rope_types", tuple(rope_types))
    kept_layouts = supported_subset("rope_layouts", tuple(layouts))
    placements = supported_subset("rope_placements", PARTIAL_PLACEMENTS)
    for key, wanted, kept in (("rope_types", rope_types, types), ("rope_layouts", layouts, kept_layouts)):
        if not kept:
            pytest.skip(f"{IMPL_NAME} declares INFO[{key!r}] = {declared_support()[key]}: none of {tuple(wanted)}")
    return types, kept_layouts, placements


def frequencies_or_reference(impl: Any, rope: dict[str, Any], seq_len: int | None) -> tuple[np.ndarray, float]:
    """``(ω, A)`` from the adapter's ``rope_frequencies``, or, where it provides none (its table lives
    inside a kernel), the reference's (``refpos.testing.adapter``): what tests that use ω only for a tolerance
    bound, and A as the spec's value, need."""
    frequencies = getattr(IMPL, "rope_frequencies", None)  # the module itself, not the skipping proxy
    if callable(frequencies):
        try:
            return frequencies(rope, seq_len=seq_len)
        except NotImplementedError:  # the table lives inside the kernel for this configuration
            pass
    from refpos.testing import adapter as reference

    inv, a = reference.rope_frequencies(rope, seq_len=seq_len)
    return np.asarray(inv, dtype=np.float64), float(a)


def seeded(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    """Standard-normal float64 array of ``shape`` from a drawn seed (shrinks by seed, not by value)."""
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal(shape)


def rotary_width(rope: dict[str, Any]) -> int:
    """Channels of the rotated span: head_dim when the rule's table spans the head (proportional), else
    rotary_dim (default head_dim)."""
    if RULES[rope["rope_type"]].spans_head:
        return rope["head_dim"]
    return rope.get("rotary_dim", rope["head_dim"])


def span_slices(rope: dict[str, Any]) -> tuple[slice, slice]:
    """(rotated span, pass-through) channel slices of the head."""
    w, full = rotary_width(rope), rope["head_dim"]
    if rope.get("placement") == "last":
        return slice(full - w, full), slice(0, full - w)
    return slice(0, w), slice(w, full)


def layout_perm(d: int) -> np.ndarray:
    """``perm[c·d/2 + j] = 2j + c`` (docs/rope.md#how-checkpoints-are-converted), written out here, independently of
    refpos."""
    return np.array([2 * j + c for c in (0, 1) for j in range(d // 2)], dtype=np.int64)


def base_inv(theta: float, d: int) -> np.ndarray:
    """docs/extrapolation.md#the-math ``base_inv``: ``θ ** (−arange(0, d, 2) / d)``."""
    return theta ** (-(np.arange(0, d, 2, dtype=np.float64) / d))


def yarn_bounds(theta: float, d: int, l0: float, beta_fast: float, beta_slow: float,
                truncate: bool) -> tuple[float, float]:
    """docs/extrapolation.md#yarn ``(lo, hi)`` after truncate and clamp."""
    def pair_at(n: float) -> float:
        return d * math.log(l0 / (2 * math.pi * n)) / (2 * math.log(theta))

    lo, hi = pair_at(beta_fast), pair_at(beta_slow)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    return max(lo, 0), min(hi, d - 1)


def model_configs() -> dict[str, Any]:
    """The real model configs with their HF 5.24.0-resolved values (``refpos/data/model_configs.json``; the
    list is in golden/README.md)."""
    import json
    from importlib import resources

    path = resources.files("refpos") / "data" / "model_configs.json"  # the package's, checkout or installed
    return json.loads(path.read_text(encoding="utf-8"))
