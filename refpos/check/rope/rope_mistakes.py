"""The definitions of the RoPE and M-RoPE mistakes of the catalogue (:data:`ROPE_MISTAKES`), each a change to a
:class:`~refpos.check.rope.mistakes.RopeCall` (see :mod:`refpos.check.rope.mistakes`).

Every variant is a parameter change of the reference: another layout, placement, base or length in the config;
other positions; other ``ω`` or ``A``; a float32 phase path; other channels; or a rule's formula with another
value of its own variant parameter (llama3's ``cycle``, log-space YaRN's ``blend``). The evidence strings are
what ``refpos check`` prints.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np

from refpos.check.rope.mistakes import Context, RopeCall, RopeMistake, Variant
from refpos.check.rope.problem import round_to
from refpos.check.shared.arrays import np_ns
from refpos.pairs import PARTIAL_PLACEMENTS
from refpos.rope.config import LAYOUTS, RopeConfig
from refpos.rope.rules import PLAIN, RULES, Float64
from refpos.rope.rules.llama3 import LLAMA3, llama3_inv_freq
from refpos.rope.rules.longrope import LONGROPE
from refpos.rope.rules.plain import base_inv_freq
from refpos.rope.rules.yarn import YARN_LOG, yarn_log_inv_freq

#: the other RoPE layout a port confuses a layout with (the deinterleaved layout reads like the interleaved one)
SWAPPED_LAYOUT = MappingProxyType({"half": "interleaved", "interleaved": "half"})


def _rotates_pairs_of_its_own(call: RopeCall) -> bool:
    """Whether the layout and the frequencies are the config's own to get wrong: not a table spanning the head."""
    return not RULES[call.rope.rope_type].spans_head


def _plain_frequencies(call: RopeCall) -> np.ndarray:
    return base_inv_freq(call.rope.theta, call.rope.rotary_dim, Float64(np_ns()))


def _scaled(call: RopeCall) -> bool:
    """A scaling rule whose frequencies have plain RoPE's shape (the unscaled and double-scaled forms exist)."""
    return call.rope.rope_type != PLAIN and _rotates_pairs_of_its_own(call) and call.inv_freq.shape == (
        call.rope.rotary_dim // 2,)


# ---------------------------------------------------------------------------------------------- config
def layout_swap(call: RopeCall, ctx: Context) -> list[Variant]:
    if not _rotates_pairs_of_its_own(call):
        return []
    return [Variant(f"equals the reference computed with the {layout!r} layout instead of {call.rope.layout!r} (the "
                    "channel permutation P of docs/conventions.md#pair-layouts; exact at position 0)",
                    call.with_rope(layout=layout), reverse="layout_swap")
            for layout in LAYOUTS if layout != call.rope.layout]


def default_theta(call: RopeCall, ctx: Context) -> list[Variant]:
    if call.rope.theta == 10000.0 or not _rotates_pairs_of_its_own(call):
        return []
    return [Variant(f"equals the reference with rope_theta = 10000 instead of {call.rope.theta:g} (the config's base "
                    "was not read and a default filled in)", call.with_rope(theta=10000.0),
                    reverse="wrong_theta" if call.rope.rope_type == PLAIN else None)]


def wrong_theta(call: RopeCall, ctx: Context) -> list[Variant]:
    """Another base where the config says 10000 (the frequency probe names it; plain RoPE only)."""
    if call.rope.theta != 10000.0 or call.rope.rope_type != PLAIN:
        return []
    return [Variant("the base 500000 where the config says 10000", call.with_rope(theta=500000.0),
                    reverse="default_theta")]


def partial_rotary_placement(call: RopeCall, ctx: Context) -> list[Variant]:
    from refpos.pairs import pair_channels

    rope = call.rope
    head_dim, d = rope.head_dim, rope.rotary_dim
    if not _rotates_pairs_of_its_own(call) or (d == head_dim and rope.placement == "first"):
        return []
    out = []
    full_w = base_inv_freq(rope.theta, head_dim, Float64(np_ns()))
    if d < head_dim:
        full = RopeConfig(theta=rope.theta, head_dim=head_dim, layout=rope.layout)  # every channel, plain ω
        out.append(Variant(f"equals full-width RoPE over all {head_dim} channels (ω from θ^(−2j/{head_dim})): the "
                           f"partial rotary factor ({d} of {head_dim}) was ignored",
                           call.but(rope=full, inv_freq=full_w)))
        out.append(Variant(f"equals the reference with the exponent denominator head_dim = {head_dim} instead of "
                           f"rotary_dim = {d} (ω_j = θ^(−2j/{head_dim}))", call.but(inv_freq=full_w[: d // 2])))
        if rope.layout == "half" and rope.placement == "first":  # (i, i + D/2), as a full-width rotation pairs them
            partner = tuple(channels[: d // 2] for channels in pair_channels("half", head_dim))
            out.append(Variant(f"equals rotation of the pairs (i, i + {head_dim // 2}) (half of the head) instead of "
                               f"(i, i + {d // 2}) (half of the rotary span): the wrong partner",
                               call.but(pairs=partner)))
    for placement in PARTIAL_PLACEMENTS:
        if placement != rope.placement:
            side = "first (head)" if placement == "first" else "last (tail, DeepSeek MLA)"
            out.append(Variant(f"equals the reference with the rotated channels placed {side} instead of "
                               f"{rope.placement}", call.with_rope(placement=placement),
                               reverse="partial_rotary_placement"))
    return out


# ---------------------------------------------------------------------------------------------- positions
def position_offset(call: RopeCall, ctx: Context) -> list[Variant]:
    out = []
    for delta in (d for d in range(-8, 9) if d):
        exists = call.positions + delta >= 0  # the shifted reference exists from p = −δ on
        if exists.any():
            where = "" if exists.all() else f", compared from position {-delta} on"
            out.append(Variant(f"equals the reference at positions p {delta:+d}{where} (rotated q/k shifted; logits "
                               "hide it unless q and k offsets differ)",
                               call.but(positions=np.maximum(call.positions + delta, 0)),
                               rows=None if exists.all() else exists))
    if ctx.min_position > 0:
        out.append(Variant(f"equals the reference at positions p − {ctx.min_position}: the offset was dropped "
                           "(positions restarted at 0, e.g. a decode step without its cache offset)",
                           call.but(positions=call.positions - ctx.min_position)))
    if not np.array_equal(ctx.token_index, call.positions):
        out.append(Variant("equals the reference at the token indices 0 … T−1 instead of the given positions "
                           "(position ids ignored: left padding, cache offset)", call.but(positions=ctx.token_index)))
    return out


def bf16_angles(call: RopeCall, ctx: Context) -> list[Variant]:
    out = []
    for name in ("bfloat16", "float16"):
        out.append(Variant(f"equals the reference with inv_freq rounded to {name} (a buffer downcast by "
                           "model.to(dtype) or inv_freq.to(x.dtype)): O(1) phase errors by p ≈ 1000",
                           call.but(inv_freq=round_to(call.inv_freq, name))))
        rounded = round_to(call.positions, name)
        if ctx.max_position > 256 and np.all(np.isfinite(rounded)):
            out.append(Variant(f"equals the reference with positions rounded to {name} (positions cast to the "
                               "activation dtype: 257 → 256, 2049 → 2048)",
                               call.but(positions=rounded.astype(np.int64))))
    return out


def float32_angles(call: RopeCall, ctx: Context) -> list[Variant]:
    if call.rope.mrope_section is not None:
        return []
    return [Variant("p, ω and p·ω held in float32 (a float32 phase path)", call.but(angle_dtype="float32"))]


# ---------------------------------------------------------------------------------------------- frequencies, A
def unscaled_frequencies(call: RopeCall, ctx: Context) -> list[Variant]:
    if not _scaled(call):
        return []
    kind, plain = call.rope.rope_type, _plain_frequencies(call)
    out = [Variant(f"equals plain RoPE (θ = {call.rope.theta:g}, no {kind} scaling) with A = 1: the rope_scaling "
                   "block was parsed but never applied", call.but(inv_freq=plain, attention_factor=1.0))]
    if call.attention_factor != 1.0:
        out.append(Variant(f"equals plain-RoPE frequencies with the attention factor A = {call.attention_factor:.10g} "
                           f"kept: the {kind} frequencies were not applied", call.but(inv_freq=plain)))
    return out


def double_scaled_frequencies(call: RopeCall, ctx: Context) -> list[Variant]:
    if not _scaled(call):
        return []
    plain = _plain_frequencies(call)
    with np.errstate(divide="ignore", invalid="ignore"):
        twice = np.where(plain > 0, call.inv_freq**2 / plain, 0.0)
    return [Variant(f"equals the reference with the {call.rope.rope_type} ratio ω'/ω applied twice (e.g. positions "
                    "divided and inv_freq divided, or freq_factors on top of scaled frequencies)",
                    call.but(inv_freq=twice))]


def missing_attention_factor(call: RopeCall, ctx: Context) -> list[Variant]:
    a = call.attention_factor
    if a == 1.0:
        return []
    return [Variant(f"equals the reference with A = 1 instead of {a:.10g}: every rotated channel is 1/A = {1 / a:.6f} "
                    "of the reference (logits × 1/A²)", call.but(attention_factor=1.0))]


def squared_attention_factor(call: RopeCall, ctx: Context) -> list[Variant]:
    a = call.attention_factor
    if a == 1.0:
        return []
    return [Variant(f"equals the reference with A² = {a**2:.10g}: the port multiplied HF's final attention_factor by "
                    "its own mscale (logits × A⁴ instead of A²)", call.but(attention_factor=a**2))]


def attention_factor_mismatch(call: RopeCall, ctx: Context) -> list[Variant]:
    """Another magnitude rule (a constant ratio ∉ {1, A, 1/A}; ``refpos check`` measures the ratio)."""
    return [Variant(f"A × {ratio:.4g}", call.but(attention_factor=call.attention_factor * ratio))
            for ratio in (1.1, 1 / 1.1)]


# ---------------------------------------------------------------------------------------------- one rule's own
def longrope_factor_swap(call: RopeCall, ctx: Context) -> list[Variant]:
    if RULES[call.rope.rope_type] is not LONGROPE or call.seq_len is None:
        return []
    orig = call.rope.original_max_position_embeddings
    other_len, branch = (orig, "short") if call.seq_len > orig else (orig + 1, "long")
    covers = other_len > ctx.max_position  # a reference at that L exists only where L covers every position
    return [Variant(f"equals the reference computed with the {branch} factors (seq_len {other_len}); HF uses long "
                    f"factors iff seq_len > {orig}, here seq_len = {call.seq_len}", call.at_length(other_len),
                    reverse="longrope_factor_swap" if covers else None)]


def yarn_truncation(call: RopeCall, ctx: Context) -> list[Variant]:
    if "truncate" not in RULES[call.rope.rope_type].parameters or not call.rope.truncate:
        return []
    return [Variant("equals the reference with YaRN's ramp bounds kept unfloored/unceiled although truncate is true",
                    call.with_rope(truncate=False))]


def llama3_band_edges(call: RopeCall, ctx: Context) -> list[Variant]:
    if RULES[call.rope.rope_type] is not LLAMA3:
        return []
    shifted = llama3_inv_freq(call.rope, call.seq_len, Float64(np_ns()), cycle=1.0)
    return [Variant("equals the reference with llama3's wavelengths taken as the period 1/ω instead of 2π/ω (both "
                    "band edges moved by 2π)", call.but(inv_freq=shifted))]


def yarn_log_linear_blend(call: RopeCall, ctx: Context) -> list[Variant]:
    if RULES[call.rope.rope_type] is not YARN_LOG:
        return []
    linear = yarn_log_inv_freq(call.rope, call.seq_len, Float64(np_ns()), blend="linear")
    return [Variant("equals the reference with the kept and interpolated frequencies blended linearly (YaRN's "
                    "arithmetic mean) instead of in log space (Grok's geometric mean)", call.but(inv_freq=linear))]


# ---------------------------------------------------------------------------------------------- M-RoPE
def mrope_1d_positions(call: RopeCall, ctx: Context) -> list[Variant]:
    if call.rope.mrope_section is None:
        return []
    rows = (("t row", call.positions[0]), ("h row", call.positions[1]), ("w row", call.positions[2]),
            ("token index 0 … T−1", ctx.token_index))
    return [Variant(f"equals plain RoPE at the {name} for every pair: the image tokens got 1-D positions (each pair "
                    "must read its own axis)", call.but(positions=np.stack([row] * 3))) for name, row in rows]


def mrope_section_order(call: RopeCall, ctx: Context) -> list[Variant]:
    from refpos.rope.mrope import check_sections

    rope, out = call.rope, []
    if rope.mrope_section is None:
        return []
    seen = {rope.mrope_section}
    for order in itertools.permutations(range(3)):
        sections = tuple(rope.mrope_section[i] for i in order)
        if sections in seen:
            continue
        seen.add(sections)
        try:
            check_sections(sections, rope.n_pairs, rope.mrope_scheme)
        except ValueError:
            continue
        names = "".join("thw"[i] for i in order)
        out.append(Variant(f"equals M-RoPE with the sections in the order {names} ({list(sections)} instead of "
                           f"{list(rope.mrope_section)})", call.with_rope(mrope_section=sections)))
    return out


def mrope_assignment(call: RopeCall, ctx: Context) -> list[Variant]:
    from refpos.rope.mrope import ASSIGNMENTS

    rope, out = call.rope, []
    if rope.mrope_section is None:
        return []
    for name in ASSIGNMENTS:
        if name == rope.mrope_scheme:
            continue
        try:
            other = call.with_rope(mrope_assignment=name, mrope_interleaved=False)
        except ValueError:
            continue
        out.append(Variant(f"equals M-RoPE with the {name} assignment instead of the {rope.mrope_scheme} one "
                           "(which frequency reads which axis, docs/mrope.md#the-math)", other))
    return out


# ---------------------------------------------------------------------------------------------- ports
def _first(variants: list[Variant], call: RopeCall) -> RopeCall:
    """The first variant's call (a port makes the mistake the first way the definition lists), or ``call``."""
    return variants[0].call if variants else call


def _port(definition: Callable[[RopeCall, Context], list[Variant]]) -> Callable[[RopeCall], RopeCall]:
    """The port of a definition: its first variant on every call (positions as given, no offset to drop)."""
    def port(call: RopeCall) -> RopeCall:
        tokens = call.positions[0] if call.rope.mrope_section is not None else call.positions
        return _first(definition(call, Context(tokens, 0, 0)), call)

    return port


def _swapped_layout(call: RopeCall) -> RopeCall:
    layout = SWAPPED_LAYOUT.get(call.rope.layout)
    return call if layout is None else call.with_rope(layout=layout)


def _section_order_reversed(call: RopeCall) -> RopeCall:
    rope = call.rope
    if rope.mrope_section is None or rope.mrope_scheme != "contiguous":
        return call
    return call.with_rope(mrope_section=tuple(reversed(rope.mrope_section)))


def _mistakes(*items: RopeMistake) -> Mapping[str, RopeMistake]:
    return MappingProxyType({m.id: m for m in items})


#: catalogue id -> definition: every RoPE and M-RoPE mistake of refpos/data/mistakes.toml that is a change to a call
ROPE_MISTAKES: Mapping[str, RopeMistake] = _mistakes(
    RopeMistake("layout_swap", layout_swap, _swapped_layout),
    RopeMistake("position_offset", position_offset, lambda call: call.but(positions=call.positions + 1)),
    RopeMistake("float32_angles", float32_angles, _port(float32_angles), found_by="precision"),
    RopeMistake("bf16_angles", bf16_angles, _port(bf16_angles)),
    RopeMistake("default_theta", default_theta, _port(default_theta)),
    RopeMistake("wrong_theta", wrong_theta, found_by="probe"),
    RopeMistake("unscaled_frequencies", unscaled_frequencies, _port(unscaled_frequencies)),
    RopeMistake("double_scaled_frequencies", double_scaled_frequencies, _port(double_scaled_frequencies)),
    RopeMistake("missing_attention_factor", missing_attention_factor, _port(missing_attention_factor)),
    RopeMistake("squared_attention_factor", squared_attention_factor, _port(squared_attention_factor)),
    RopeMistake("attention_factor_mismatch", attention_factor_mismatch, found_by="ratio"),
    RopeMistake("longrope_factor_swap", longrope_factor_swap, _port(longrope_factor_swap)),
    RopeMistake("partial_rotary_placement", partial_rotary_placement, _port(partial_rotary_placement)),
    RopeMistake("yarn_truncation", yarn_truncation, _port(yarn_truncation)),
    RopeMistake("llama3_band_edges", llama3_band_edges, _port(llama3_band_edges)),
    RopeMistake("yarn_log_linear_blend", yarn_log_linear_blend, _port(yarn_log_linear_blend)),
    RopeMistake("mrope_1d_positions", mrope_1d_positions, _port(mrope_1d_positions)),
    RopeMistake("mrope_section_order", mrope_section_order, _section_order_reversed),
    RopeMistake("mrope_assignment", mrope_assignment, _port(mrope_assignment)),
)
