"""The worked example (docs/relative.md#the-worked-example), exact float64 values and the explain text."""

from __future__ import annotations

import numpy as np

import refpos
from refpos.backend import to_numpy
from refpos.cli import main

# the correctly rounded values of steps 6-8 (docs/relative.md#the-worked-example)
A_2DP = [[0.51, 0.31, 0.19], [0.27, 0.45, 0.27], [0.10, 0.16, 0.74]]
OUT_2DP = [[1.00, 1.19, 0.81, 1.00], [1.00, 1.27, 0.73, 1.00], [1.00, 1.74, 0.26, 1.00]]
A_EXACT = [
    [0.506480391055654, 0.3071958857184984, 0.1863237232258476],
    [0.274068619061197, 0.45186276187760605, 0.274068619061197],
    [0.09962364806231833, 0.16425162762508783, 0.7361247243125939],
]


def np_(a):
    return np.asarray(to_numpy(a))


def test_every_intermediate_matches_the_spec():
    t = refpos.worked_example()
    assert np_(t["X+P"]).tolist() == [[1, 1, 1, 1], [1, 1, 1, 1], [1, 2, 0, 1]]
    assert np_(t["S"][0, ...]).tolist() == [[4, 4, 4], [4, 4, 4], [4, 4, 6]]
    assert np_(t["B"][0, ...]).tolist() == [[0, -1, -2], [-1, 0, -1], [-2, -1, 0]]
    assert np_(t["S+B"][0, ...]).tolist() == [[4, 3, 2], [3, 4, 3], [2, 3, 6]]
    assert np_(t["scaled"][0, ...]).tolist() == [[2.0, 1.5, 1.0], [1.5, 2.0, 1.5], [1.0, 1.5, 3.0]]
    # float64 re-derivation of exp/sum/divide: a few ulps (rtol 1e-15 as the spec says)
    np.testing.assert_allclose(np_(t["A"][0, ...]), A_EXACT, rtol=1e-15, atol=0)
    assert np.round(np_(t["A"][0, ...]), 2).tolist() == A_2DP
    assert np.round(np_(t["out"]), 2).tolist() == OUT_2DP


def test_without_bias_rows_are_uniform_where_the_words_coincide():
    t = refpos.worked_example(with_bias=False)
    a = np_(t["A"][0, ...])
    np.testing.assert_allclose(a[0], [1 / 3] * 3, rtol=1e-15)
    np.testing.assert_allclose(a[2], [0.21194155761708544, 0.21194155761708544, 0.5761168847658291], rtol=1e-15)


def test_bias_before_the_scale_equals_half_the_bias_after_it(xp):
    t = refpos.worked_example()
    q = t["Q"]
    before = refpos.attention(q, q, q, bias=refpos.encodings.distance_bias([0, 1, 2], [0, 1, 2]), bias_scaled=True)
    after = refpos.attention(q, q, q, bias=refpos.encodings.distance_bias([0, 1, 2], [0, 1, 2], alpha=0.5))
    np.testing.assert_allclose(np_(before), np_(after), rtol=1e-15, atol=1e-15)


def test_explain_prints_the_exact_rounding_and_the_story_slips(capsys):
    assert main(["explain"]) == 0
    text = capsys.readouterr().out
    for row in ("[0.51, 0.31, 0.19]", "[0.27, 0.45, 0.27]", "[0.10, 0.16, 0.74]",
                "[1.00, 1.19, 0.81, 1.00]", "[1.00, 1.27, 0.73, 1.00]", "[1.00, 1.74, 0.26, 1.00]"):
        assert row in text
    assert "the story prints 0.18" in text and "the story prints 0.46" in text
    assert "1.18 / 0.82" in text
    assert "not the sinusoidal table" in text
