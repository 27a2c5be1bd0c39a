"""Hostile values at the public API: a named ValueError/TypeError, or the answer the math defines.

Each case below was silently accepted, or raised an error that named nothing (ZeroDivisionError, NumPy's
"zero-size array to reduction"), before the checks it exercises; docs/security.md lists the groups.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos

ROPE = refpos.RopeConfig(head_dim=8)
INV_FREQ, FACTOR = refpos.rope_frequencies(ROPE)
Q = np.linspace(-1.0, 1.0, 2 * 3 * 4).reshape(1, 2, 3, 4)  # (B, H, Tq, d)
K = np.linspace(1.0, -1.0, 2 * 5 * 4).reshape(1, 2, 5, 4)  # (B, H, Tk, d)

#: (id, call, exception type, a word the message must hold: the parameter's name)
RAISES = [
    ("apply_rope: positions (H, T) would add an axis to x (1, H, T, D)",
     lambda: refpos.apply_rope(np.ones((1, 2, 3, 8)), np.zeros((2, 3), dtype=np.int64), ROPE), ValueError,
     "positions"),
    ("apply_rope_complex: the same shape mismatch",
     lambda: refpos.rope.apply_rope_complex(np.ones((1, 2, 3, 8)), np.zeros((2, 3), dtype=np.int64), ROPE), ValueError,
     "positions"),
    ("apply_rope: positions (3, T) against x (2, T, D)",
     lambda: refpos.apply_rope(np.ones((2, 3, 8)), np.zeros((3, 3), dtype=np.int64), ROPE), ValueError, "positions"),
    ("frequencies with the attention factor 'nan' (a string)",
     lambda: refpos.apply_rope(np.ones((1, 8)), [0], ROPE, frequencies=(INV_FREQ, "nan")), TypeError,
     "attention factor"),
    ("frequencies with a NaN attention factor",
     lambda: refpos.apply_rope(np.ones((1, 8)), [0], ROPE, frequencies=(INV_FREQ, float("nan"))), ValueError,
     "attention factor"),
    ("frequencies with a negative attention factor",
     lambda: refpos.apply_rope(np.ones((1, 8)), [0], ROPE, frequencies=(INV_FREQ, -1.0)), ValueError,
     "attention factor"),
    ("frequencies with NaN inverse frequencies",
     lambda: refpos.rope_cos_sin([0], ROPE, frequencies=(INV_FREQ * np.nan, 1.0)), ValueError, "inv_freq"),
    ("frequencies that are not a pair",
     lambda: refpos.rope_cos_sin([0], ROPE, frequencies=INV_FREQ), TypeError, "frequencies"),
    ("positions: a list with a bool among ints", lambda: refpos.apply_rope(np.ones((2, 8)), [True, 1], ROPE),
     TypeError, "positions"),
    ("positions: a list of bools", lambda: refpos.rope_cos_sin([True, False], ROPE), TypeError, "positions"),
    ("positions: a bool array", lambda: refpos.rope_cos_sin(np.array([True]), ROPE), TypeError, "positions"),
    ("positions: 2**53 + 1 (float64 angles would round it)",
     lambda: refpos.apply_rope(np.ones((1, 8)), [2**53 + 1], ROPE), ValueError, "positions"),
    ("positions: an int64 array at 2**60", lambda: refpos.rope_cos_sin(np.array([2**60]), ROPE), ValueError,
     "positions"),
    ("positions: uint64 2**64 - 1 (not 'a minimum of -1')",
     lambda: refpos.rope_cos_sin(np.array([2**64 - 1], dtype=np.uint64), ROPE), ValueError, "int64 holds"),
    ("positions: the Python int 2**64 - 1 in a list", lambda: refpos.rope_cos_sin([2**64 - 1], ROPE), ValueError,
     "int64 holds"),
    ("positions: 2**70 (beyond any NumPy integer)", lambda: refpos.rope_cos_sin([2**70], ROPE), ValueError,
     "int64 holds"),
    ("softmax: integer logits", lambda: refpos.core.softmax.softmax(np.array([1, 2, 3])), TypeError, "logits"),
    ("softmax: complex logits", lambda: refpos.core.softmax.softmax(np.array([1 + 1j, 2.0])), TypeError, "logits"),
    ("softmax: a list", lambda: refpos.core.softmax.softmax([1.0, 2.0]), TypeError, "logits"),
    ("softmax: axis out of range", lambda: refpos.core.softmax.softmax(np.ones((2, 3)), axis=2), ValueError, "axis"),
    ("attention: bias_scaled='False' (a string, truthy)", lambda: refpos.attention(Q, K, K, bias_scaled="False"),
     TypeError, "bias_scaled"),
    ("attention: return_weights='no'", lambda: refpos.attention(Q, K, K, return_weights="no"), TypeError,
     "return_weights"),
    ("attention: causal=1", lambda: refpos.attention(Q, K, K, causal=1), TypeError, "causal"),
    ("chunked_attention: bias_scaled='False'", lambda: refpos.core.chunked_attention(Q, K, K, bias_scaled="False"),
     TypeError, "bias_scaled"),
    ("attention: 0 key/value heads", lambda: refpos.attention(Q, K[:, :0], K[:, :0]), ValueError, "heads"),
    ("attention: 0 query heads", lambda: refpos.attention(Q[:, :0], K, K), ValueError, "heads"),
    ("chunked_attention: 0 key/value heads", lambda: refpos.core.chunked_attention(Q, K[:, :0], K[:, :0]), ValueError,
     "heads"),
    ("attention: head dim 0", lambda: refpos.attention(Q[..., :0], K[..., :0], K), ValueError, "head dim"),
    ("chunked_attention: head dim 0", lambda: refpos.core.chunked_attention(Q[..., :0], K[..., :0], K), ValueError,
     "head dim"),
    ("t5_bucket: bidirectional='yes'", lambda: refpos.encodings.t5_bucket([1], bidirectional="yes"), TypeError,
     "bidirectional"),
    ("worked_example: with_bias='False'", lambda: refpos.worked_example(with_bias="False"), TypeError, "with_bias"),
]


@pytest.mark.parametrize(("call", "error", "word"), [c[1:] for c in RAISES], ids=[c[0] for c in RAISES])
def test_hostile_value_is_refused_by_name(call, error, word):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) in (ValueError, TypeError) or issubclass(type(info.value), (ValueError, TypeError))
    assert word in str(info.value)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("rel", [-2**63, -2**62, 2**63 - 1, -(2**53) - 1])
def test_t5_bucket_far_distances_share_the_last_bucket(rel, bidirectional):
    """``abs(-2**63)`` overflows int64; the math puts every distance >= max_distance in the last bucket."""
    far = refpos.encodings.t5_bucket(np.array([rel]), bidirectional=bidirectional)
    at_max = refpos.encodings.t5_bucket(np.array([128 if rel > 0 else -128]), bidirectional=bidirectional)
    assert far.tolist() == at_max.tolist()
    assert 0 <= int(far[0]) < 32


def test_t5_bucket_lists_of_huge_ints_are_refused_by_name():
    with pytest.raises(ValueError, match="relative_position"):
        refpos.encodings.t5_bucket([2**64])


@pytest.mark.parametrize("fully_masked", ["zeros", "nan"])
@pytest.mark.parametrize("causal", [False])
def test_attention_without_keys_follows_the_fully_masked_policy_as_chunked_does(fully_masked, causal):
    """No key at all: every query row is fully masked; both attention forms give the policy's rows."""
    k0 = K[..., :0, :]
    dense = np.asarray(refpos.attention(Q, k0, k0, fully_masked=fully_masked, causal=causal))
    chunked = np.asarray(refpos.core.chunked_attention(Q, k0, k0, fully_masked=fully_masked, causal=causal))
    fill = 0.0 if fully_masked == "zeros" else np.nan
    assert dense.shape == chunked.shape == (1, 2, 3, 4)
    np.testing.assert_array_equal(dense, np.full(dense.shape, fill))
    np.testing.assert_array_equal(chunked, dense)
    o, w = refpos.attention(Q, k0, k0, fully_masked=fully_masked, return_weights=True)
    assert np.asarray(w).shape == (1, 2, 3, 0)
    np.testing.assert_array_equal(np.asarray(o), dense)


def test_softmax_over_an_empty_axis_is_empty():
    assert refpos.core.softmax.softmax(np.ones((3, 0))).shape == (3, 0)


def test_positions_within_2_53_still_work():
    """The bound is exactly 2**53: the largest position float64 holds with all its neighbours."""
    cos, _ = refpos.rope_cos_sin(np.array([2**53]), ROPE)
    assert np.isfinite(np.asarray(cos)).all()
    assert refpos.apply_rope(np.ones((1, 2, 3, 8)), np.zeros((1, 3), dtype=np.int64), ROPE).shape == (1, 2, 3, 8)
