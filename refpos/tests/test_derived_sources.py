"""The inputs read off the slot or the attention mask (``refpos.models.sources.derived``): each count by its
formula at a hole and at left padding, where the three mask counts part; bad names and missing inputs refused."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.models.sources import DERIVED, INPUTS, PARAMETERS, Given, derived

MASK = np.array([0, 0, 1, 1, 0, 1])  # left padding, then a hole


def test_each_mask_count_by_its_formula():
    """BLOOM's ``(Σm − 1)·m``, OPT's ``Σm·m − 1`` and π0's ``Σm − 1``: equal on the unmasked tokens, apart at the
    masked ones (0, −1, and the count so far less one)."""
    assert derived("mask_cumsum", None, MASK).tolist() == [0, 0, 0, 1, 0, 2]
    assert derived("mask_count", None, MASK).tolist() == [-1, -1, 0, 1, -1, 2]
    assert derived("mask_cumsum_minus_one", None, MASK).tolist() == [-1, -1, 0, 1, 1, 2]
    kept = MASK == 1
    counts = [derived(name, None, MASK)[kept] for name in ("mask_cumsum", "mask_count", "mask_cumsum_minus_one")]
    assert all(np.array_equal(c, counts[0]) for c in counts)


def test_the_slot_sources():
    slots = np.arange(3, 7)
    assert derived("cache_position", slots, None).tolist() == [3, 4, 5, 6]
    assert derived("key_index", slots, None).tolist() == [3, 4, 5, 6]
    assert derived("slot_plus_one", slots, None).tolist() == [4, 5, 6, 7]


def test_given_reads_through_the_same_formula():
    """:meth:`Given.read` gives :func:`derived`'s numbers for every input it derives, on the keys and (the last
    tokens) on the queries of a call with a cache."""
    given = Given.of(attention_mask=MASK, cache_position=[4, 5])
    for name in DERIVED:
        keys = given.read((name,), "key")
        expected = derived(name, np.arange(MASK.size), MASK)
        assert np.array_equal(keys, expected), name
        assert np.array_equal(given.read((name,), "query"), expected[-2:]), name


def test_every_derived_input_is_documented_and_has_its_parameter():
    assert set(DERIVED) <= set(INPUTS) and set(DERIVED) <= set(PARAMETERS)


@pytest.mark.parametrize(("name", "slots", "mask", "says"), [
    ("input_ids_cumsum", None, MASK, "name must be one of"),
    ("mask_count", np.arange(6), None, "attention mask"),
    ("slot_plus_one", None, MASK, "slots"),
])
def test_a_bad_name_or_a_missing_input_is_refused(name, slots, mask, says):
    with pytest.raises(ValueError, match=says):
        derived(name, slots, mask)
