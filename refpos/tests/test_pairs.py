"""refpos.pairs: the one statement of which channels form a pair, and that every layout use derives from it.

The rules are checked from their formulas (split: ``(j, j + m)``, interleaved: ``(2j, 2j + 1)``); the
last test replaces the split pairing by a wrong one (read as interleaved) and shows that RoPE, its channel
lists, its permutations, the sinusoid and the golden certificate's pair index all follow it.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos import pairs
from refpos.rope.config import LAYOUTS as ROPE_CONFIG_LAYOUTS
from refpos.rope.config import PLACEMENTS as ROPE_CONFIG_PLACEMENTS
from refpos.rope.config import RopeConfig
from refpos.rope.forms import pair_channels as rope_pair_channels


def _formula(pairing: str, width: int, start: int) -> tuple[list[int], list[int]]:
    m = width // 2
    if pairing == "split":
        return [start + j for j in range(m)], [start + m + j for j in range(m)]
    return [start + 2 * j for j in range(m)], [start + 2 * j + 1 for j in range(m)]


@pytest.mark.parametrize("layout", list(pairs.LAYOUTS))
@pytest.mark.parametrize(("width", "start"), [(2, 0), (8, 0), (6, 2), (16, 5)])
def test_layouts_read_and_write_the_stated_pairings(layout, width, start):
    read, written = pairs.LAYOUTS[layout]
    u_in, v_in, u_out, v_out = pairs.pair_channels(layout, width, start)
    assert (u_in, v_in) == _formula(read, width, start)
    assert (u_out, v_out) == _formula(written, width, start)
    span = list(range(start, start + width))
    assert sorted(u_in + v_in) == span and sorted(u_out + v_out) == span  # each channel in one pair


def test_the_layout_table():
    assert pairs.LAYOUTS["half"] == pairs.LAYOUTS["concat"] == ("split", "split")
    assert pairs.LAYOUTS["interleaved"] == ("interleaved", "interleaved")
    assert pairs.LAYOUTS["deinterleaved"] == ("interleaved", "split")
    assert ROPE_CONFIG_LAYOUTS is pairs.ROPE_LAYOUTS and ROPE_CONFIG_PLACEMENTS is pairs.PLACEMENTS
    assert refpos.encodings.sinusoidal.LAYOUTS is pairs.SINUSOID_LAYOUTS


@pytest.mark.parametrize("layout", list(pairs.LAYOUTS))
def test_place_and_split_are_inverse(layout):
    rng = np.random.default_rng(0)
    first, second = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    placed = pairs.place_pairs(first, second, layout)  # (3, 8)
    u_out, v_out = pairs.pair_channels(layout, 8)[2:]
    assert np.array_equal(placed[:, u_out], first) and np.array_equal(placed[:, v_out], second)
    got = pairs.split_pairs(placed, layout, side="written")
    assert np.array_equal(got[0], first) and np.array_equal(got[1], second)


@pytest.mark.parametrize("source", list(pairs.LAYOUTS))
@pytest.mark.parametrize("target", list(pairs.LAYOUTS))
def test_layout_permutation_moves_each_pair(source, target):
    rng = np.random.default_rng(1)
    first, second = rng.standard_normal(5), rng.standard_normal(5)
    perm = pairs.layout_permutation(10, source, target)
    assert np.array_equal(pairs.place_pairs(first, second, source)[perm], pairs.place_pairs(first, second, target))


def test_meta_to_hf_permutation_is_the_formula():
    d, m = 8, 4
    expected = [0] * d
    for c in (0, 1):
        for j in range(m):
            expected[c * m + j] = 2 * j + c  # perm[c·m + j] = 2j + c
    assert refpos.to_numpy(refpos.rope.interleaved_to_half_permutation(d)).tolist() == expected
    inverse = refpos.to_numpy(refpos.rope.half_to_interleaved_permutation(d))
    assert np.array_equal(np.asarray(expected)[inverse], np.arange(d))
    # the deprecated sinusoid name is the same permutation (concat places pairs as half does)
    assert np.array_equal(refpos.to_numpy(refpos.encodings.interleaved_to_concat_permutation(d)), expected)


@pytest.mark.parametrize(("placement", "width", "bounds"), [("first", 4, (0, 4)), ("last", 4, (6, 10)),
                                                          ("proportional", 10, (0, 10)), ("first", 10, (0, 10))])
def test_span_bounds(placement, width, bounds):
    assert pairs.span_bounds(10, width, placement) == bounds


@pytest.mark.parametrize(("call", "match"), [
    (lambda: pairs.pair_slices("sideways", 4), "layout"),
    (lambda: pairs.pair_slices("half", 5), "even"),
    (lambda: pairs.pairing_slices("diagonal", 4), "pairing"),
    (lambda: pairs.span_bounds(8, 10, "first"), "does not fit"),
    (lambda: pairs.span_bounds(8, 4, "proportional"), "does not fit"),
    (lambda: pairs.span_bounds(8, 4, "middle"), "placement"),
    (lambda: pairs.split_pairs(np.ones(4), "half", side="both"), "side"),
    (lambda: pairs.layout_permutation(0, "half", "interleaved"), "width"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("layout", pairs.ROPE_LAYOUTS)
@pytest.mark.parametrize(("rotary_dim", "placement"), [(8, "first"), (4, "first"), (4, "last")])
def test_rope_channels_are_the_helpers(layout, rotary_dim, placement):
    rope = RopeConfig(head_dim=8, rotary_dim=rotary_dim, layout=layout, placement=placement)
    start, _ = pairs.span_bounds(8, rotary_dim, placement)
    assert rope_pair_channels(rope) == pairs.pair_channels(layout, rotary_dim, start)


def _split_read_as_interleaved(pairing, width, start=0):
    """A wrong convention: the ``split`` pairing read as ``interleaved`` (the layout swap of the catalogue)."""
    return _ORIGINAL_PAIRING("interleaved", width, start)


_ORIGINAL_PAIRING = pairs.pairing_slices


def _layout_uses() -> dict[str, object]:
    """Every derived use of the pair layout, on one small head (D = 8, position 3)."""
    from refpos.golden.exact.certify import pair_index

    rope = RopeConfig(head_dim=8)
    x = np.arange(1.0, 9.0)[None, :] / 8  # (T=1, D=8)
    return {
        "x": x,
        "apply_rope": refpos.apply_rope(x, [3], rope),
        "apply_rope_complex": refpos.rope.apply_rope_complex(x, [3], rope),
        "pair_channels": rope_pair_channels(rope),
        "pair_index": pair_index(rope.to_params()),
        "permutation": refpos.rope.interleaved_to_half_permutation(8),
        "sinusoid concat": refpos.encodings.sinusoidal.sinusoidal([3], 8, layout="concat"),
        "rotation matrix": refpos.rope.rope_rotation_matrix(3, rope),
    }


def test_every_layout_use_follows_the_one_helper(monkeypatch):
    before = _layout_uses()
    monkeypatch.setattr(pairs, "pairing_slices", _split_read_as_interleaved)
    after = _layout_uses()
    x = before.pop("x")
    unchanged = [name for name in before if np.array_equal(np.asarray(before[name]), np.asarray(after[name]))]
    assert not unchanged, f"these do not derive their pairs from refpos.pairs: {unchanged}"
    # and the forms still agree with each other under the changed convention
    # float64 O(1) values of two evaluations of one rotation: a few ulps apart (1e-15)
    host = {name: refpos.to_numpy(value) for name, value in after.items()}
    np.testing.assert_allclose(host["apply_rope"], host["apply_rope_complex"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(host["apply_rope"][0], host["rotation matrix"] @ refpos.to_numpy(x)[0], rtol=0,
                               atol=1e-15)
