"""The public hypothesis strategies draw only valid inputs, and reject bad arguments by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.testing import adapter
from refpos.testing import strategies as rst


@given(rst.rope_configs())
def test_rope_configs_are_consistent(rope):
    assert rope["rope_type"] in rst.ROPE_TYPES
    assert rope["layout"] in rst.LAYOUTS  # deinterleaved only on request
    d = int(rope["head_dim"] * rope["partial_rotary_factor"])
    assert rope["head_dim"] % 2 == 0 and d % 2 == 0 and d >= 2
    assert rope["rope_theta"] > 1
    if rope["rope_type"] in ("yarn", "llama3", "longrope"):
        assert rope["original_max_position_embeddings"] <= rope["max_position_embeddings"]
    if rope["rope_type"] == "llama3":
        assert rope["high_freq_factor"] > rope["low_freq_factor"]
    if rope["rope_type"] == "longrope":
        assert len(rope["short_factor"]) == len(rope["long_factor"]) == d // 2
    if "factor" in rope:
        assert rope["factor"] >= 1


def test_one_list_of_rope_types_and_layouts():
    from refpos.rope.config import LAYOUTS, ROPE_TYPES

    assert rst.ROPE_TYPES is ROPE_TYPES and "ntk" in rst.ROPE_TYPES  # one tuple, every type refpos computes
    assert rst.ALL_LAYOUTS is LAYOUTS and set(rst.LAYOUTS) <= set(LAYOUTS)


@pytest.mark.parametrize("rope_type", rst.ROPE_TYPES)
def test_every_rope_type_is_drawn_and_accepted(rope_type):
    @given(rst.rope_configs(rope_types=(rope_type,), partial=True))
    def drawn(rope):
        assert rope["rope_type"] == rope_type
        inv_freq, attention_factor = adapter.rope_frequencies(rope, seq_len=None)
        assert np.all(np.isfinite(inv_freq)) and attention_factor > 0

    drawn()


@given(rst.rope_configs(layouts=rst.ALL_LAYOUTS, partial=True), st.sampled_from([None, 1, 4097, 100_000]))
def test_the_reference_accepts_every_drawn_rope_config(rope, seq_len):
    rope_frequencies = getattr(adapter, "rope_frequencies", None)
    if rope_frequencies is None:
        pytest.skip("refpos.testing.adapter has no rope_frequencies yet")
    inv_freq, attention_factor = rope_frequencies(rope, seq_len=seq_len)
    assert np.all(np.isfinite(inv_freq)) and np.isfinite(attention_factor) and attention_factor > 0


@given(rst.positions(max_position=300, max_size=10, unique=True, sort=True))
def test_positions_are_sorted_unique_int64_in_range(pos):
    assert pos.dtype == np.int64 and 1 <= pos.size <= 10
    assert pos.min() >= 0 and pos.max() <= 300
    assert np.all(np.diff(pos) > 0)


@given(rst.attention_inputs(with_bias=True, with_mask=True))
def test_attention_inputs_have_matching_shapes_and_no_fully_masked_row(inputs):
    b, h, h_kv, t_q, t_k, d, d_v = inputs["shape"]
    assert inputs["q"].shape == (b, h, t_q, d) and h % h_kv == 0
    assert inputs["k"].shape == (b, h_kv, t_k, d) and inputs["v"].shape == (b, h_kv, t_k, d_v)
    assert inputs["bias"].shape == (b, h, t_q, t_k)
    assert inputs["mask"].dtype == bool and inputs["mask"].any(axis=-1).all()


@given(rst.t5_parameters())
def test_t5_parameters_leave_a_log_range(params):
    exact = params["num_buckets"] // (4 if params["bidirectional"] else 2)
    assert params["max_distance"] > exact >= 1


@given(rst.alibi_heads(40), rst.head_dims(3, 9), rst.relative_positions(max_distance=5))
def test_small_strategies_stay_in_range(n_heads, d, rel):
    assert 1 <= n_heads <= 40 and d in (4, 6, 8)
    assert np.abs(rel).max() <= 5


@pytest.mark.parametrize(
    ("factory", "kwargs", "name"),
    [
        (rst.rope_configs, {"rope_types": ("ntk-by-magic",)}, "rope_types"),
        (rst.rope_configs, {"layouts": ()}, "layouts"),
        (rst.positions, {"max_position": -1}, "max_position"),
        (rst.positions, {"min_size": 5, "max_size": 2}, "min_size"),
        (rst.positions, {"max_position": 3, "max_size": 9, "unique": True}, "max_size"),
        (rst.head_dims, {"min_dim": 5, "max_dim": 5}, "even head size"),
        (rst.seeded_normal, {"shape": (2,), "scale": 0.0}, "scale"),
        (rst.t5_parameters, {"max_buckets": 4}, "max_buckets"),
        (rst.alibi_heads, {"max_heads": 0}, "max_heads"),
    ],
)
def test_bad_arguments_are_rejected_by_name(factory, kwargs, name):
    with pytest.raises(ValueError, match=name):
        factory(**kwargs)
