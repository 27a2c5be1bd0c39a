"""Public hypothesis strategies for testing positional encodings: yours or refpos's.

Every strategy draws valid inputs of the adapter contract (``spec_tests/README.md``): NumPy arrays,
integer positions, RoPE configurations as plain dicts with the keys of a transformers v5
``rope_parameters`` entry plus ``head_dim``, ``partial_rotary_factor``, ``max_position_embeddings``
and ``layout``. Import it in your own tests (it needs ``hypothesis``; ``refpos`` itself does not):

>>> from hypothesis import given
>>> from refpos.testing import strategies as rst
>>> @given(rst.rope_configs(rope_types=("default",)))
... def test_my_frequencies(rope):
...     assert rope["head_dim"] % 2 == 0
>>> test_my_frequencies()

Array values are drawn as a seed and expanded with ``numpy.random.default_rng(seed)``: fast, reproducible,
standard-normal entries (scaled by ``scale``). Shrinking then moves the seed and the shapes, not values.

See ``docs/strategies.md`` for a complete example of a user testing their own RoPE with them.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from refpos.pairs import SAME_PAIRING_LAYOUTS
from refpos.rope.config import LAYOUTS as ROPE_LAYOUTS
from refpos.rope.rules import ROPE_TYPES as ALL_ROPE_TYPES
from refpos.rope.rules import RULES, DrawContext
from refpos.validation import check_int

__all__ = [
    "ALL_LAYOUTS",
    "LAYOUTS",
    "ROPE_TYPES",
    "AttentionShape",
    "alibi_heads",
    "attention_inputs",
    "attention_shapes",
    "head_dims",
    "positions",
    "relative_positions",
    "rope_configs",
    "rope_inputs",
    "seeded_normal",
    "t5_parameters",
]

#: every ``rope_type`` :func:`rope_configs` can draw: every rule of :data:`refpos.rope.rules.RULES`
#: (docs/extrapolation.md#the-rules), each drawn by its record
ROPE_TYPES = ALL_ROPE_TYPES
#: RoPE memory layouts drawn by default (docs/conventions.md#pair-layouts); ``"deinterleaved"`` (HF DeepSeek-V3)
#: on request
LAYOUTS = SAME_PAIRING_LAYOUTS
#: every RoPE layout (:data:`refpos.rope.config.LAYOUTS`)
ALL_LAYOUTS = ROPE_LAYOUTS


def _check_subset(name: str, values: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    values = (values,) if isinstance(values, str) else tuple(values)
    if not values:
        raise ValueError(f"{name} must name at least one of {allowed}")
    for value in values:
        if value not in allowed:
            raise ValueError(f"{name} must be drawn from {allowed}, got {value!r}")
    return values


def _check_range(lo_name: str, lo: int, hi_name: str, hi: int, minimum: int) -> None:
    check_int(lo_name, lo, minimum=minimum)
    check_int(hi_name, hi, minimum=minimum)
    if lo > hi:
        raise ValueError(f"{lo_name} must be <= {hi_name}, got {lo} > {hi}")


# ------------------------------------------------------------------------------- shapes and positions
def head_dims(min_dim: int = 2, max_dim: int = 256, *, even: bool = True) -> st.SearchStrategy[int]:
    """Head sizes in ``[min_dim, max_dim]``; even by default (RoPE needs pairs)."""
    _check_range("min_dim", min_dim, "max_dim", max_dim, 1)
    if even:
        lo, hi = (min_dim + 1) // 2, max_dim // 2
        if lo > hi:
            raise ValueError(f"no even head size in [{min_dim}, {max_dim}]")
        return st.integers(lo, hi).map(lambda half: 2 * half)
    return st.integers(min_dim, max_dim)


def positions(
    *,
    max_position: int = 2**17,
    min_size: int = 1,
    max_size: int = 16,
    unique: bool = False,
    sort: bool = False,
) -> st.SearchStrategy[np.ndarray]:
    """1-D int64 arrays of positions in ``[0, max_position]``.

    Boundary positions of docs/conventions.md#probe-positions (0, 1, 255–257, 2047–2049, 8191–8192, 65536 + k, 131071)
    are drawn with extra weight, so that bf16/fp16 position aliasing and length switches show up.
    """
    check_int("max_position", max_position, minimum=0)
    _check_range("min_size", min_size, "max_size", max_size, 0)
    if unique and max_size > max_position + 1:
        raise ValueError(f"max_size must be <= max_position + 1 for unique positions, got {max_size}")
    probes = [p for p in (0, 1, 2, 7, 255, 256, 257, 2047, 2048, 2049, 8191, 8192, 65536, 65537, 131071)
              if p <= max_position]
    element = st.one_of(st.sampled_from(probes), st.integers(0, max_position))
    lists = st.lists(element, min_size=min_size, max_size=max_size, unique=unique)
    return lists.map(lambda xs: np.asarray(sorted(xs) if sort else xs, dtype=np.int64))


def relative_positions(
    *, max_distance: int = 512, min_size: int = 1, max_size: int = 32
) -> st.SearchStrategy[np.ndarray]:
    """1-D int64 arrays of signed relative positions ``k − q`` in ``[−max_distance, max_distance]``."""
    check_int("max_distance", max_distance, minimum=0)
    _check_range("min_size", min_size, "max_size", max_size, 0)
    element = st.integers(-max_distance, max_distance)
    return st.lists(element, min_size=min_size, max_size=max_size).map(
        lambda xs: np.asarray(xs, dtype=np.int64)
    )


def seeded_normal(shape: tuple[int, ...], scale: float = 1.0) -> st.SearchStrategy[np.ndarray]:
    """float64 arrays of ``shape`` with N(0, scale²) entries, drawn as a seed."""
    if scale <= 0 or not math.isfinite(scale):
        raise ValueError(f"scale must be a positive finite float, got {scale!r}")
    shape = tuple(check_int("shape", n, minimum=0) for n in shape)
    return st.integers(0, 2**32 - 1).map(lambda seed: scale * np.random.default_rng(seed).standard_normal(shape))


class AttentionShape(NamedTuple):
    """Sizes of one attention call: q (B, H, Tq, D), k (B, Hkv, Tk, D), v (B, Hkv, Tk, Dv)."""

    batch: int
    n_heads: int
    n_kv_heads: int
    q_len: int
    k_len: int
    head_dim: int
    value_dim: int


def attention_shapes(
    *,
    max_batch: int = 2,
    max_kv_heads: int = 3,
    max_group: int = 3,
    max_len: int = 8,
    head_dim: st.SearchStrategy[int] | None = None,
    same_len: bool = False,
) -> st.SearchStrategy[AttentionShape]:
    """:class:`AttentionShape` with GQA groups (``n_heads = n_kv_heads · group``) and ``q_len ≤ k_len``."""
    for name, value in (("max_batch", max_batch), ("max_kv_heads", max_kv_heads),
                        ("max_group", max_group), ("max_len", max_len)):
        check_int(name, value, minimum=1)
    return _attention_shapes(max_batch, max_kv_heads, max_group, max_len, head_dim, same_len)


@st.composite
def _attention_shapes(
    draw: st.DrawFn,
    max_batch: int,
    max_kv_heads: int,
    max_group: int,
    max_len: int,
    head_dim: st.SearchStrategy[int] | None,
    same_len: bool,
) -> AttentionShape:
    batch = draw(st.integers(1, max_batch))
    n_kv = draw(st.integers(1, max_kv_heads))
    group = draw(st.integers(1, max_group))
    k_len = draw(st.integers(1, max_len))
    q_len = k_len if same_len else draw(st.integers(1, k_len))
    d = draw(head_dim if head_dim is not None else st.sampled_from([1, 2, 4, 8]))
    d_v = draw(st.sampled_from([d, 3]))
    return AttentionShape(batch, n_kv * group, n_kv, q_len, k_len, d, d_v)


@st.composite
def attention_inputs(
    draw: st.DrawFn,
    shapes: st.SearchStrategy[AttentionShape] | None = None,
    *,
    scale: float = 1.0,
    with_bias: bool = False,
    with_mask: bool = False,
) -> dict[str, Any]:
    """``{"q", "k", "v"}`` (plus ``"bias"`` (B, H, Tq, Tk) and ``"mask"`` when asked) as NumPy arrays.

    The mask is boolean, ``True`` = may attend, and keeps the diagonal-aligned key of every query so no
    row is fully masked (test that policy separately).
    """
    shape = draw(shapes if shapes is not None else attention_shapes())
    b, h, h_kv, t_q, t_k, d, d_v = shape
    out: dict[str, Any] = {
        "q": draw(seeded_normal((b, h, t_q, d), scale)),
        "k": draw(seeded_normal((b, h_kv, t_k, d), scale)),
        "v": draw(seeded_normal((b, h_kv, t_k, d_v))),
        "shape": shape,
    }
    if with_bias:
        out["bias"] = draw(seeded_normal((b, h, t_q, t_k)))
    if with_mask:
        seed = draw(st.integers(0, 2**32 - 1))
        mask = np.random.default_rng(seed).random((b, 1, t_q, t_k)) < 0.7
        rows = np.arange(t_q)
        mask[..., rows, rows + (t_k - t_q)] = True  # (B, 1, Tq, Tk): one key per query always allowed
        out["mask"] = mask
    return out


# ------------------------------------------------------------------------------------------ RoPE
def _theta() -> st.SearchStrategy[float]:
    return st.sampled_from([10000.0, 500000.0, 1000000.0, 150000.0]) | st.floats(100.0, 1e7)


def rope_configs(
    rope_types: tuple[str, ...] | str = ROPE_TYPES,
    *,
    head_dim: st.SearchStrategy[int] | None = None,
    layouts: tuple[str, ...] | str = LAYOUTS,
    partial: bool = False,
) -> st.SearchStrategy[dict[str, Any]]:
    """RoPE configurations as adapter dicts, one of ``rope_types`` (all of :data:`ROPE_TYPES` by default).

    Keys: ``rope_type``, ``rope_theta``, ``head_dim``, ``partial_rotary_factor``,
    ``max_position_embeddings``, ``layout`` and the keys the type needs (docs/extrapolation.md#the-rules), drawn
    by the rule's record (:attr:`refpos.rope.rules.RopeRule.draw`, the draw the spec suite uses too): e.g.
    ``factor``; ``original_max_position_embeddings`` (yarn, llama3, longrope); ``beta_fast``/``beta_slow`` and
    sometimes ``truncate``/``attention_factor``/``mscale``+``mscale_all_dim`` (yarn);
    ``low_freq_factor``/``high_freq_factor`` (llama3, high > low); ``short_factor``/``long_factor``
    lists of length d/2 (longrope). ``partial=True`` also draws ``partial_rotary_factor < 1``
    (head placement, d = int(D·prf) kept even); a rule whose table spans the head (``proportional``) always
    has one.
    """
    return _rope_configs(_check_subset("rope_types", rope_types, ROPE_TYPES), head_dim,
                         _check_subset("layouts", layouts, ALL_LAYOUTS), partial)


@st.composite
def _rope_configs(
    draw: st.DrawFn,
    rope_types: tuple[str, ...],
    head_dim: st.SearchStrategy[int] | None,
    layouts: tuple[str, ...],
    partial: bool,
) -> dict[str, Any]:
    rope_type = draw(st.sampled_from(rope_types))
    rule = RULES[rope_type]
    dim = draw(head_dim if head_dim is not None else head_dims(4, 128))
    if dim % 2 or dim < 2:
        raise ValueError(f"head_dim strategy must draw even sizes >= 2, drew {dim}")
    prf = 1.0
    min_rotary = rule.min_rotary_dim  # e.g. the NTK exponent d/(d - 2) needs d >= 4
    assume(dim >= min_rotary)
    if partial or rule.spans_head:
        candidates = [f for f in (0.25, 0.5, 0.75) if int(dim * f) % 2 == 0 and int(dim * f) >= min_rotary]
        if rule.spans_head:
            candidates = [f for f in candidates if int(f * dim // 2) >= 1] or [1.0]
        prf = draw(st.sampled_from([*candidates, 1.0])) if candidates else 1.0
    original = draw(st.sampled_from([2048, 4096, 8192]))
    config: dict[str, Any] = {
        "rope_type": rope_type,
        "rope_theta": draw(_theta()),
        "head_dim": dim,
        "partial_rotary_factor": prf,
        "max_position_embeddings": original,
        "layout": draw(st.sampled_from(layouts)),
    }
    factor = draw(st.sampled_from([1.0, 2.0, 4.0, 8.0, 32.0]) | st.floats(1.0, 64.0))
    config.update(rule.draw(draw, st, DrawContext(int(dim * prf), original, factor, factor_one=False)))
    return config


def rope_inputs(
    configs: st.SearchStrategy[dict[str, Any]] | None = None,
    *,
    max_heads: int = 3,
    max_len: int = 8,
    max_position: int = 2**16,
) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray, dict[str, Any]]]:
    """``(x, positions, rope)``: x (H, T, head_dim) float64, positions (T,) int64, a RoPE dict."""
    check_int("max_heads", max_heads, minimum=1)
    check_int("max_len", max_len, minimum=1)
    return _rope_inputs(configs if configs is not None else rope_configs(), max_heads,
                        positions(max_position=max_position, max_size=max_len))


@st.composite
def _rope_inputs(
    draw: st.DrawFn,
    configs: st.SearchStrategy[dict[str, Any]],
    max_heads: int,
    position_strategy: st.SearchStrategy[np.ndarray],
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    rope = draw(configs)
    pos = draw(position_strategy)
    x = draw(seeded_normal((draw(st.integers(1, max_heads)), len(pos), rope["head_dim"])))
    return x, pos, rope


# ------------------------------------------------------------------------------------ ALiBi, T5
def alibi_heads(max_heads: int = 128) -> st.SearchStrategy[int]:
    """ALiBi head counts in ``[1, max_heads]``, powers of two and not (the recurrence branch)."""
    check_int("max_heads", max_heads, minimum=1)
    common = [n for n in (1, 2, 3, 6, 8, 12, 16, 20, 32, 40, 64, 96, 112) if n <= max_heads]
    return st.sampled_from(common) | st.integers(1, max_heads)


def t5_parameters(*, max_buckets: int = 128) -> st.SearchStrategy[dict[str, Any]]:
    """``{"bidirectional", "num_buckets", "max_distance"}`` valid for T5 buckets (docs/relative.md#t5).

    ``num_buckets`` is even (a multiple of 4 when bidirectional) and ``max_distance`` exceeds the exact
    range ``num_buckets // 2`` (``// 4`` bidirectional), as the bucket formula requires.
    """
    return _t5_parameters(check_int("max_buckets", max_buckets, minimum=8))


@st.composite
def _t5_parameters(draw: st.DrawFn, max_buckets: int) -> dict[str, Any]:
    bidirectional = draw(st.booleans())
    step = 4 if bidirectional else 2
    num_buckets = step * draw(st.integers(2, max_buckets // step))
    exact = num_buckets // (4 if bidirectional else 2)
    max_distance = draw(st.sampled_from([128, 4096]) | st.integers(exact + 1, 8 * num_buckets + 64))
    max_distance = max(max_distance, exact + 1)
    return {"bidirectional": bidirectional, "num_buckets": num_buckets, "max_distance": max_distance}
