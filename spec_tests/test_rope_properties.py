"""Spec: properties of RoPE that hold for every rope_type, both layouts and every partial placement.

A variant only changes the frequencies ω and the attention factor A (docs/rope.md#the-math), so with
``R_p = A·U_p``, ``U_p`` orthogonal:

* ⟨R_p q, R_m k⟩ depends only on p − m (at a fixed ``seq_len``: dynamic / longrope frequencies depend
  on it);
* ‖rotated span‖ = A·‖span‖, pass-through channels unchanged;
* R_p R_m = A·R_{p+m} (re-rotating a cached key by δ equals using position p + δ);
* R_0 = A·I on the rotated span;
* the layouts are conjugate by the fixed permutation P: apply_half(P·x) = P·apply_interleaved(x);
  deinterleaved = de-interleave(interleaved(x)); the matrix and complex forms equal apply_rope.

Tolerance: values computed from angles p·ω carry an angle error ∝ p·max ω·u (docs/conventions.md#tolerances),
so phase comparisons use ``assert_close(kind="phase")`` with the positions involved, scaled by the size
of the compared quantity (|q|·|k|·A² for logits). Pass-through channels are compared bit for bit in
float64 and as the input stored in the declared dtype otherwise (``kind="stored"``: half an ulp).
Where a test needs ω and A only for its tolerance or for the spec's A, an adapter without
``rope_frequencies`` (a frequency table inside a fused kernel) gets the reference's
(``rope_support.frequencies_or_reference``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from rope_support import frequencies_or_reference, layout_perm, rope_dicts, rotary_width, seeded, span_slices
from support import assert_close, assert_within, needs, require, sized_lists, tolerance

POSITIONS = st.integers(0, 70000)


@st.composite
def rope_and_vectors(draw, **kwargs):
    rope = draw(rope_dicts(**kwargs))
    x = seeded(draw, (2, rope["head_dim"]))
    return rope, x


def _inv_freq(impl, rope, seq_len):
    return frequencies_or_reference(impl, rope, seq_len)


@given(rope_and_vectors(layouts=("half", "interleaved", "deinterleaved")), POSITIONS, POSITIONS,
       st.integers(0, 30000), st.integers(1, 200000))
def test_logit_depends_only_on_the_relative_position(impl, case, p, m, shift, seq_len):
    rope, x = case
    seq_len = max(seq_len, max(p, m) + shift + 1)  # L covers every position (apply_rope refuses less)
    apply = require(impl, "apply_rope")
    q, k = x[:1], x[1:]

    def logit(pq, pk):
        return float((apply(q, np.array([pq]), rope, seq_len=seq_len) @ apply(k, np.array([pk]), rope,
                                                                              seq_len=seq_len).T)[0, 0])

    inv, a = _inv_freq(impl, rope, seq_len)
    top = max(p, m) + shift
    size = np.linalg.norm(q) * np.linalg.norm(k) * max(a, 1.0) ** 2
    assert_close(np.array([logit(p + shift, m + shift)]), np.array([logit(p, m)]), impl, "phase",
                 positions=np.array([2 * top]), inv_freq=inv, magnitude=size, what="shifted logit")


#: YaRN at factor 2 without mscale: A = 0.1·ln 2 + 1 = 1.0693, which a library that drops YaRN's attention factor
#: leaves at 1 (pinned, so that the divergence does not depend on what is drawn)
YARN_NO_MSCALE = {"rope_type": "yarn", "rope_theta": 1e4, "head_dim": 8, "layout": "half", "factor": 2.0,
                  "original_max_position_embeddings": 64}


@given(rope_and_vectors(), sized_lists(POSITIONS, 1, 4), st.integers(1, 200000))
@example(case=(YARN_NO_MSCALE, np.linspace(-1.0, 1.0, 16).reshape(2, 8)), positions=[5], seq_len=100)
def test_norm_is_multiplied_by_the_attention_factor(impl, case, positions, seq_len):
    rope, x = case
    seq_len = max(seq_len, max(positions) + 1)  # L covers every position (apply_rope refuses less)
    pos = np.array(positions)
    xs = np.repeat(x[:1], len(pos), axis=0)  # (T, D)
    y = require(impl, "apply_rope")(xs, pos, rope, seq_len=seq_len)
    _, a = _inv_freq(impl, rope, seq_len)
    span, _ = span_slices(rope)
    assert_within(np.linalg.norm(y[:, span], axis=-1), a * np.linalg.norm(xs[:, span], axis=-1),
                               **tolerance(impl))


@given(rope_and_vectors(layouts=("half", "interleaved", "deinterleaved")), st.integers(1, 200000))
def test_position_zero_is_the_identity_times_a(impl, case, seq_len):
    rope, x = case
    y = require(impl, "apply_rope")(x, np.zeros(2, dtype=np.int64), rope, seq_len=seq_len)
    _, a = _inv_freq(impl, rope, seq_len)
    span, _ = span_slices(rope)
    expected = a * x[:, span]
    if rope["layout"] == "deinterleaved":  # interleaved input written half-split
        expected = np.concatenate([expected[:, 0::2], expected[:, 1::2]], axis=-1)
    assert_within(y[:, span], expected, **tolerance(impl))


@given(rope_dicts(layouts=("half", "interleaved", "deinterleaved")), st.integers(0, 40000), st.integers(0, 40000),
       st.integers(1, 200000))
def test_rotations_compose(impl, rope, p, m, seq_len):
    seq_len = max(seq_len, p + m + 1)  # L covers every position (apply_rope refuses less)
    matrix = require(impl, "rope_rotation_matrix")
    mp, mm, mpm = (matrix(n, rope, seq_len=seq_len) for n in (p, m, p + m))
    inv, a = _inv_freq(impl, rope, seq_len)
    span, _ = span_slices(rope)
    if rope["layout"] == "deinterleaved":  # output order differs from input order: compose in pair order
        w = rotary_width(rope)
        perm = np.r_[np.arange(0, span.start), span.start + layout_perm(w), np.arange(span.stop, rope["head_dim"])]
        mp, mm, mpm = (mat[np.argsort(perm), :] for mat in (mp, mm, mpm))  # undo the output de-interleave
    composed = mp @ mm
    expected = mpm.copy()
    expected[span, span] *= a  # R_p R_m = A² U_{p+m} = A·R_{p+m} on the span; identity elsewhere
    assert_close(composed, expected, impl, "phase", positions=np.full(composed.shape[:-1], p + m), inv_freq=inv,
                 magnitude=max(a, 1.0) ** 2, what="R_p R_m")


@given(rope_and_vectors(partial=False), POSITIONS, st.integers(1, 200000))
def test_half_and_interleaved_are_conjugate_by_the_fixed_permutation(impl, case, p, seq_len):
    needs("rope_layouts", "half", "interleaved")
    rope, x = case
    seq_len = max(seq_len, p + 1)  # L covers every position (apply_rope refuses less)
    apply = require(impl, "apply_rope")
    perm = layout_perm(rope["head_dim"])
    if rope["rope_type"] == "proportional":  # zero-frequency pairs: still the same pairs after P
        perm = layout_perm(rope["head_dim"])
    half = apply(x[:, perm], np.array([p, p]), {**rope, "layout": "half"}, seq_len=seq_len)
    inter = apply(x, np.array([p, p]), {**rope, "layout": "interleaved"}, seq_len=seq_len)
    inv, a = _inv_freq(impl, rope, seq_len)
    assert_close(half, inter[:, perm], impl, "phase", positions=np.array([p, p]), inv_freq=inv,
                 magnitude=a * np.abs(x).max() * 2, what="apply_half(P x) vs P apply_interleaved(x)")


@given(rope_and_vectors(), POSITIONS, st.integers(1, 200000))
def test_deinterleaved_is_interleaved_written_half_split(impl, case, p, seq_len):
    needs("rope_layouts", "interleaved", "deinterleaved")
    rope, x = case
    seq_len = max(seq_len, p + 1)  # L covers every position (apply_rope refuses less)
    apply = require(impl, "apply_rope")
    inter = apply(x, np.array([p, p]), {**rope, "layout": "interleaved"}, seq_len=seq_len)
    deint = apply(x, np.array([p, p]), {**rope, "layout": "deinterleaved"}, seq_len=seq_len)
    span, _ = span_slices(rope)
    expected = inter.copy()
    expected[:, span] = np.concatenate([inter[:, span][:, 0::2], inter[:, span][:, 1::2]], axis=-1)
    assert_within(deint, expected, **tolerance(impl))


@given(rope_and_vectors(layouts=("half", "interleaved", "deinterleaved")), sized_lists(POSITIONS, 1,
                                                                                     3),
       st.integers(1, 200000))
@example(case=({"rope_type": "default", "rope_theta": 10000.0, "head_dim": 8, "rotary_dim": 4, "layout": "half"},
               np.linspace(-1.0, 1.0, 16).reshape(2, 8)), positions=[3, 70000], seq_len=1)  # channels 4-7 pass
def test_pass_through_channels_are_unchanged(impl, case, positions, seq_len):
    """Channels outside the rotated span come back as they went in: bit for bit in float64, and for a
    lower-precision adapter as the input stored in its dtype (within half an ulp)."""
    rope, x = case
    seq_len = max(seq_len, max(positions) + 1)  # L covers every position (apply_rope refuses less)
    pos = np.array(positions)
    xs = np.resize(x, (len(pos), rope["head_dim"]))
    y = require(impl, "apply_rope")(xs, pos, rope, seq_len=seq_len)
    _, passthrough = span_slices(rope)
    assert_close(y[:, passthrough], xs[:, passthrough], impl, "stored", what="pass-through channels")


@given(rope_and_vectors(), POSITIONS, st.integers(1, 200000))
def test_deinterleaved_and_interleaved_give_the_same_logits(impl, case, p, seq_len):
    """q and k receive the same permutation, so their dot products agree."""
    needs("rope_layouts", "interleaved", "deinterleaved")
    rope, x = case
    seq_len = max(seq_len, p + 1)  # L covers every position (apply_rope refuses less)
    apply = require(impl, "apply_rope")
    inter = apply(x, np.array([p, p]), {**rope, "layout": "interleaved"}, seq_len=seq_len)
    deint = apply(x, np.array([p, p]), {**rope, "layout": "deinterleaved"}, seq_len=seq_len)
    # dot products of two rotated vectors, each entry rounded by the value rule: 10× the dtype's rule
    assert_within(deint @ deint.T, inter @ inter.T,
                  rtol=10 * tolerance(impl)["rtol"], atol=10 * tolerance(impl)["atol"])


@given(rope_and_vectors(layouts=("half", "interleaved", "deinterleaved")), sized_lists(POSITIONS, 1,
                                                                                     3))
def test_matrix_and_complex_forms_equal_apply(impl, case, positions):
    rope, x = case
    apply, matrix, complex_form = require(impl, "apply_rope", "rope_rotation_matrix", "apply_rope_complex")
    pos = np.array(positions)
    xs = np.resize(x, (len(pos), rope["head_dim"]))
    seq_len = int(pos.max()) + 1
    y = apply(xs, pos, rope, seq_len=seq_len)
    inv, a = _inv_freq(impl, rope, seq_len)
    rule = {"positions": pos, "inv_freq": inv, "magnitude": max(a, 1.0) * 2 * np.abs(xs).max()}
    by_matrix = np.stack([matrix(int(p), rope, seq_len=seq_len) @ row for p, row in zip(pos, xs, strict=True)])
    assert_close(by_matrix, y, impl, "phase", what="matrix form", **rule)
    assert_close(complex_form(xs, pos, rope, seq_len=seq_len), y, impl, "phase", what="complex form", **rule)


@given(rope_dicts(), sized_lists(POSITIONS, 1, 4))
def test_cos_sin_tables_match_the_frequencies(impl, rope, positions):
    pos = np.array(positions)
    cos, sin = require(impl, "rope_cos_sin")(pos, rope)
    inv, a = _inv_freq(impl, rope, int(pos.max()) + 1)
    angles = pos[:, None] * inv[None, :]  # (T, m)
    if rope["layout"] == "interleaved":
        expected_cos, expected_sin = np.repeat(a * np.cos(angles), 2, -1), np.repeat(a * np.sin(angles), 2, -1)
    else:
        expected_cos, expected_sin = np.tile(a * np.cos(angles), 2), np.tile(a * np.sin(angles), 2)
    rule = {"positions": pos, "inv_freq": inv, "magnitude": max(a, 1.0)}
    assert_close(cos, expected_cos, impl, "phase", what="cos", **rule)
    assert_close(sin, expected_sin, impl, "phase", what="sin", **rule)


@given(rope_dicts(), st.integers(0, 5000))
def test_positions_broadcast_over_heads_and_batch(impl, rope, offset):
    apply = require(impl, "apply_rope")
    rng = np.random.default_rng(offset)
    x = rng.standard_normal((2, 3, 4, rope["head_dim"]))  # (B, H, T, D)
    pos = offset + np.array([[0, 1, 2, 3], [5, 6, 7, 8]])  # (B, T): HF position_ids
    y = apply(x, pos, rope, seq_len=offset + 9)
    inv, a = _inv_freq(impl, rope, offset + 9)
    for b in range(2):  # row b of x (H, T, D) at row b of the positions
        assert_close(y[b], apply(x[b], pos[b], rope, seq_len=offset + 9), impl, "phase",
                     positions=np.broadcast_to(pos[b], (3, 4)), inv_freq=inv,
                     magnitude=max(a, 1.0) * 2 * np.abs(x).max(), what=f"batch row {b}")


@given(rope_dicts(partial=False, head_dims=(4, 8, 16)), st.integers(1, 4), POSITIONS)
def test_meta_to_hf_weight_permutation_preserves_logits(impl, rope, n_heads, p):
    needs("rope_layouts", "half", "interleaved")
    permute = require(impl, "rope_permute_qk_heads")
    apply = require(impl, "apply_rope")
    d = rope["head_dim"]
    rng = np.random.default_rng(p)
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((5, n_heads * d))
    w_hf = permute(w, n_heads, to="half")
    np.testing.assert_array_equal(permute(w_hf, n_heads, to="interleaved"), w)  # inverse
    meta, hf = {**rope, "layout": "interleaved"}, {**rope, "layout": "half"}
    pos = p + np.arange(3)
    for h in range(n_heads):
        cols = slice(h * d, (h + 1) * d)
        y_meta = apply(x @ w[:, cols], pos, meta, seq_len=p + 3)
        y_hf = apply(x @ w_hf[:, cols], pos, hf, seq_len=p + 3)
        tol = tolerance(impl)  # two rotations of x @ w (a 5-term sum) in two layouts: 10× the dtype's rule
        assert_within(y_hf, y_meta[:, layout_perm(d)], rtol=10 * tol["rtol"], atol=10 * tol["atol"])


@given(rope_dicts(layouts=("half", "interleaved", "deinterleaved")), st.sampled_from([None, 2, 5000, 10**6]))
def test_frequency_probe_recovers_the_frequencies(impl, rope, seq_len):
    """docs/diagnosis.md: a unit vector in each pair at p = 1 turns by exactly ω_j (all ω ≤ 1 < π, so atan2
    returns it): apply_rope and rope_frequencies must describe the same rotation, pair by pair."""
    apply = require(impl, "apply_rope")
    inv, a = _inv_freq(impl, rope, seq_len)
    span, _ = span_slices(rope)
    m = rotary_width(rope) // 2
    j = np.arange(m)
    if rope["layout"] == "half":
        u_in = u_out = span.start + j
        v_out = span.start + m + j
    else:
        u_in = span.start + 2 * j
        u_out, v_out = (u_in, u_in + 1) if rope["layout"] == "interleaved" else (span.start + j, span.start + m + j)
    probes = np.zeros((m, rope["head_dim"]))
    probes[j, u_in] = 1.0  # row j: u_j = 1, everything else 0
    y = apply(probes, np.ones(m, dtype=np.int64), rope, seq_len=seq_len)
    angles = np.arctan2(y[j, v_out], y[j, u_out])
    assert_within(angles, inv, **tolerance(impl))
    assert_within(np.hypot(y[j, u_out], y[j, v_out]), a, **tolerance(impl))
