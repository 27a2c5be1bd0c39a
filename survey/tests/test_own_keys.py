"""Which of a layer's keys are its tokens' when it attends over more keys than tokens (:func:`survey.seen.own_keys`),
and which of its queries where it runs more rows than tokens (:func:`survey.seen.own_queries`).

A cache keeps its past keys before the tokens'; a merged self- and cross-attention (T5Gemma 2's decoder) appends the
encoder's keys after them. Reading the wrong rows compares the encoder's keys with a rotation and grades a correct
claim wrong (T5Gemma 2's decoder was graded so on transformers 5.25): both placements are tested. VideoPrism's text
encoder runs a CLS token after the text: its query rows are left out the same way, and where the extra rows moved
with the positions, nothing tells which rows are the tokens'.
"""

from __future__ import annotations

import numpy as np

from survey.records import Call
from survey.seen import own_keys, own_queries

TOKENS, EXTRA, WIDTH = 4, 3, 8


def calls(tokens_first: bool) -> tuple[Call, Call]:
    """A run's call whose tokens' keys are rotated (they differ from run B's, whose rotation is the identity) and
    whose ``EXTRA`` other keys are the same in both runs, placed after the tokens' or before them."""
    rng = np.random.default_rng(0)
    own_b, other = rng.normal(size=(1, 1, TOKENS, WIDTH)), rng.normal(size=(1, 1, EXTRA, WIDTH))
    own_a = own_b[..., ::-1]  # any change of the tokens' keys: a rotation moves every row but position 0's
    calls = []
    for own in (own_a, own_b):
        key = np.concatenate([own, other] if tokens_first else [other, own], axis=-2)
        calls.append(Call("layer", None, own_b, key, None, {}, None))
    return calls[0], calls[1]


def test_merged_cross_attention_keys_come_first():
    call, ref = calls(tokens_first=True)
    assert own_keys(call, ref, TOKENS) == slice(0, TOKENS)


def test_cached_keys_come_before_the_tokens():
    call, ref = calls(tokens_first=False)
    assert own_keys(call, ref, TOKENS) == slice(EXTRA, EXTRA + TOKENS)


def test_no_extra_rows_or_unlike_shapes_keep_the_last_rows():
    call, ref = calls(tokens_first=True)
    shorter = Call("layer", None, ref.query, ref.key[..., :TOKENS, :], None, {}, None)
    assert own_keys(call, shorter, TOKENS) == slice(EXTRA, EXTRA + TOKENS)
    assert own_keys(shorter, shorter, TOKENS) == slice(0, TOKENS)


def as_queries(call: Call) -> Call:
    """The same rows as the call's queries (a CLS token is a query and a key)."""
    return Call(call.path, None, call.key, call.key, None, {}, None)


def test_a_cls_token_s_query_row_is_left_out_after_or_before_the_tokens():
    for tokens_first, rows in ((True, slice(0, TOKENS)), (False, slice(EXTRA, EXTRA + TOKENS))):
        call, ref = (as_queries(c) for c in calls(tokens_first))
        assert own_queries(call, ref, TOKENS) == rows


def test_extra_query_rows_that_moved_with_the_positions_tell_nothing():
    call, ref = (as_queries(c) for c in calls(tokens_first=True))
    moved = Call("layer", None, call.query + 1.0, call.key, None, {}, None)
    assert own_queries(moved, ref, TOKENS) is None
    assert own_queries(ref, Call("layer", None, ref.query[..., :TOKENS, :], ref.key, None, {}, None), TOKENS) is None
    just_tokens = Call("layer", None, ref.query[..., :TOKENS, :], ref.key, None, {}, None)
    assert own_queries(just_tokens, just_tokens, TOKENS) is None  # no extra rows: nothing to leave out
