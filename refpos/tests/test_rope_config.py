"""RopeConfig construction, defaults, derived fields, the adapter-contract dict, and bad input naming its
parameter (rotary sizes, rope types, required keys, factor ranges, list lengths, betas, positions)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.rope import RopeConfig, apply_rope, mscale, rope_config_from_params, rope_cos_sin, rope_frequencies

YARN = dict(rope_type="yarn", head_dim=64, factor=40.0, original_max_position_embeddings=4096)


def test_minimal_config_and_anchor_defaults():
    rope = RopeConfig(rope_type="default", theta=10000.0, head_dim=64)
    assert (rope.rotary_dim, rope.partial_rotary_factor, rope.layout, rope.placement) == (64, 1.0, "half", "first")
    assert (rope.beta_fast, rope.beta_slow, rope.truncate, rope.factor) == (32.0, 1.0, True, None)
    assert RopeConfig(head_dim=64) == rope  # rope_type and theta default to the anchors'
    assert hash(rope) == hash(RopeConfig(head_dim=64))


def test_derived_fields():
    assert RopeConfig(head_dim=80, partial_rotary_factor=0.4).rotary_dim == 32  # int(80·0.4), HF
    assert RopeConfig(head_dim=256, rotary_dim=64).partial_rotary_factor == 0.25
    assert RopeConfig(head_dim=96, rotary_dim=24) == RopeConfig(head_dim=96, partial_rotary_factor=0.25)
    same = RopeConfig(head_dim=100, partial_rotary_factor=0.345)  # int(34.5) = 34 channels, HF's truncation
    assert same == RopeConfig(head_dim=100, rotary_dim=34) and same.partial_rotary_factor == 0.34
    assert dataclasses.replace(RopeConfig(head_dim=98, rotary_dim=6), theta=5e5).rotary_dim == 6  # 6/98·98 < 6
    prop = RopeConfig(rope_type="proportional", head_dim=512, partial_rotary_factor=0.25)
    assert (prop.rotary_dim, prop.placement, prop.factor, prop.n_pairs, prop.rotary_width) == (128, "proportional",
                                                                                              1.0, 256, 512)
    yarn = RopeConfig(rope_type="yarn", head_dim=128, original_max_position_embeddings=4096,
                      max_position_embeddings=65536)
    assert yarn.factor == 16.0  # HF: L_max / L_0 when factor is absent
    assert RopeConfig(head_dim=8, placement="tail", rotary_dim=4).placement == "last"  # "tail" is an alias


def test_metadata_is_not_part_of_equality():
    a = RopeConfig(head_dim=8, provenance={"theta": "config"}, unused_keys=("x",), notes=("n",))
    assert a == RopeConfig(head_dim=8) and a.provenance["theta"] == "config"
    with pytest.raises(TypeError):
        a.provenance["theta"] = "default"  # read-only view


@pytest.mark.parametrize("kwargs", [
    dict(rope_type="linear", head_dim=8, factor=4.0, layout="interleaved", rotary_dim=4, placement="last"),
    dict(YARN, mscale=1.0, mscale_all_dim=1.0, softmax_mscale=True, truncate=False, beta_fast=16.0),
    dict(rope_type="longrope", head_dim=4, original_max_position_embeddings=64, factor=2.0,
         short_factor=[1.0, 2.0], long_factor=[3.0, 4.0]),
    dict(rope_type="dynamic", head_dim=8, factor=2.0, max_position_embeddings=64, dynamic_rule="vllm_static"),
    dict(rope_type="proportional", head_dim=8, rotary_dim=4, factor=0.5),
])
def test_params_round_trip(kwargs):
    rope = RopeConfig(**kwargs)
    params = rope.to_params()
    assert "partial_rotary_factor" not in params and params["rotary_dim"] == rope.rotary_dim
    assert rope_config_from_params(params) == rope


def test_params_dict_contract():
    rope = rope_config_from_params({"rope_type": "llama3", "rope_theta": 5e5, "head_dim": 128, "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192, "mscale": None})
    assert rope.theta == 5e5 and rope.mscale is None
    with pytest.raises(ValueError, match=r"unknown keys.*'finetuned'"):
        rope_config_from_params({"head_dim": 8, "finetuned": True})
    with pytest.raises(ValueError, match="'theta'"):
        rope_config_from_params({"head_dim": 8, "theta": 1e4})  # the contract key is rope_theta
    with pytest.raises(ValueError, match="head_dim"):
        rope_config_from_params({"rope_type": "default"})
    with pytest.raises(TypeError, match="params"):
        rope_config_from_params([("head_dim", 8)])


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    (dict(head_dim=8, rotary_dim=5), ValueError, "rotary_dim"),
    (dict(head_dim=10, partial_rotary_factor=0.5), ValueError, "rotary_dim"),  # d = 5
    (dict(head_dim=9), ValueError, "rotary_dim"),  # odd full rotation
    (dict(head_dim=8, rotary_dim=10), ValueError, "rotary_dim"),
    (dict(head_dim=8, rotary_dim=4, partial_rotary_factor=0.25), ValueError, "partial_rotary_factor"),
    (dict(head_dim=8, partial_rotary_factor=1.5), ValueError, "partial_rotary_factor"),
    (dict(head_dim=8, partial_rotary_factor=0.0), ValueError, "partial_rotary_factor"),
    (dict(head_dim=8.0), TypeError, "head_dim"),
    (dict(head_dim=True), TypeError, "head_dim"),
    (dict(head_dim=1), ValueError, "head_dim"),
    (dict(head_dim=8, rope_type="ntk-by-parts"), ValueError, "rope_type"),
    (dict(head_dim=8, rope_type="su"), ValueError, "rope_type"),  # a config alias, not a refpos type
    (dict(head_dim=8, rope_type=None), TypeError, "rope_type"),
    (dict(head_dim=8, theta=0.0), ValueError, "theta"),
    (dict(head_dim=8, theta=-1e4), ValueError, "theta"),
    (dict(head_dim=8, theta=float("inf")), ValueError, "theta"),
    (dict(head_dim=8, theta="1e4"), TypeError, "theta"),
    (dict(head_dim=8, layout="neox"), ValueError, "layout"),
    (dict(head_dim=8, placement="middle"), ValueError, "placement"),
    (dict(head_dim=8, placement="proportional"), ValueError, "placement"),
    (dict(rope_type="yarn", head_dim=8, factor=4.0), ValueError, "original_max_position_embeddings"),
    (dict(rope_type="longrope", head_dim=8, short_factor=[1.0] * 4, long_factor=[1.0] * 4, factor=2.0),
     ValueError, "original_max_position_embeddings"),
    (dict(rope_type="llama3", head_dim=8, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0), ValueError,
     "original_max_position_embeddings"),
    (dict(rope_type="yarn", head_dim=8, original_max_position_embeddings=64), ValueError, "factor"),
    (dict(rope_type="linear", head_dim=8), ValueError, "factor"),
    (dict(rope_type="dynamic", head_dim=8, factor=2.0), ValueError, "max_position_embeddings"),
    (dict(rope_type="dynamic", head_dim=8, rotary_dim=2, factor=2.0, max_position_embeddings=64), ValueError,
     "rotary_dim"),
    *[(dict(rope_type=t, head_dim=8, factor=0.5, original_max_position_embeddings=64, max_position_embeddings=64,
            low_freq_factor=1.0, high_freq_factor=2.0) if t == "llama3" else
       dict(rope_type=t, head_dim=8, factor=0.5, max_position_embeddings=64) if t == "dynamic" else
       dict(rope_type=t, head_dim=8, factor=0.5, original_max_position_embeddings=64) if t == "yarn" else
       dict(rope_type=t, head_dim=8, factor=0.5), ValueError, "factor")
      for t in ("linear", "ntk", "dynamic", "yarn", "llama3")],
    (dict(rope_type="linear", head_dim=8, factor=-2.0), ValueError, "factor"),
    (dict(rope_type="proportional", head_dim=8, factor=0.0), ValueError, "factor"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, factor=2.0,
          short_factor=[1.0] * 3, long_factor=[1.0] * 4), ValueError, "short_factor"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, factor=2.0,
          short_factor=[1.0] * 4, long_factor=[1.0] * 5), ValueError, "long_factor"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, factor=2.0,
          short_factor=[1.0] * 4, long_factor="1111"), TypeError, "long_factor"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, factor=2.0,
          short_factor=[1.0, 1.0, -1.0, 1.0], long_factor=[1.0] * 4), ValueError, r"short_factor\[2\]"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, long_factor=[1.0] * 4,
          factor=2.0), ValueError, "short_factor"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, short_factor=[1.0] * 4,
          long_factor=[1.0] * 4), ValueError, "factor"),  # no factor, no L_max, no attention_factor
    (dict(YARN, beta_fast=1.0, beta_slow=32.0), ValueError, "beta_fast"),
    (dict(YARN, beta_fast=2.0, beta_slow=float("nan")), ValueError, "beta_slow"),  # equal betas are valid
    (dict(YARN, beta_slow=0.0), ValueError, "beta_slow"),
    (dict(YARN, attention_factor=0.0), ValueError, "attention_factor"),
    (dict(YARN, mscale=-1.0), ValueError, "mscale"),
    (dict(YARN, truncate=0), TypeError, "truncate"),
    (dict(YARN, theta=1.0), ValueError, "theta"),
    (dict(rope_type="llama3", head_dim=8, factor=8.0, original_max_position_embeddings=64, low_freq_factor=4.0,
          high_freq_factor=2.0), ValueError, "high_freq_factor"),  # equal factors are valid (Llama 4)
    (dict(rope_type="llama3", head_dim=8, factor=8.0, original_max_position_embeddings=64, low_freq_factor=1.0),
     ValueError, "high_freq_factor"),
    (dict(head_dim=8, factor=2.0), ValueError, "factor"),  # not used by default
    (dict(rope_type="linear", head_dim=8, factor=2.0, beta_fast=16.0), ValueError, "beta_fast"),
    (dict(rope_type="llama3", head_dim=8, factor=8.0, original_max_position_embeddings=64, low_freq_factor=1.0,
          high_freq_factor=4.0, attention_factor=1.2), ValueError, "attention_factor"),
    (dict(head_dim=8, original_max_position_embeddings=64), ValueError, "original_max_position_embeddings"),
    (dict(head_dim=8, softmax_mscale=True), ValueError, "softmax_mscale"),
    (dict(head_dim=8, dynamic_rule="vllm_static"), ValueError, "dynamic_rule"),
    (dict(rope_type="dynamic", head_dim=8, factor=2.0, max_position_embeddings=64, dynamic_rule="static"),
     ValueError, "dynamic_rule"),
    (dict(head_dim=8, max_position_embeddings=0), ValueError, "max_position_embeddings"),
    (dict(rope_type="longrope", head_dim=8, original_max_position_embeddings=1, factor=4.0,
          short_factor=[1.0] * 4, long_factor=[1.0] * 4), ValueError, "original_max_position_embeddings"),
])
def test_bad_config_names_the_parameter(kwargs, error, name):
    with pytest.raises(error, match=name):
        RopeConfig(**kwargs)


def test_factor_below_one_where_allowed():
    # LongRoPE's factor only sets A (s <= 1: A = 1); proportional divides ω by it (HF applies it as given)
    rope = RopeConfig(rope_type="longrope", head_dim=8, original_max_position_embeddings=64, factor=0.5,
                      short_factor=[1.0] * 4, long_factor=[1.0] * 4)
    assert rope_frequencies(rope)[1] == 1.0
    inv, _ = rope_frequencies(RopeConfig(rope_type="proportional", head_dim=8, factor=0.5))
    np.testing.assert_allclose(refpos.to_numpy(inv), [2.0, 0.2, 0.02, 0.002], rtol=1e-13)


@pytest.mark.parametrize(("positions", "error"), [
    ([-1, 0], ValueError), (np.array([0, -3]), ValueError), ([0.5, 1.0], TypeError),
    (np.array([1.0, 2.0]), TypeError), ([True, False], TypeError), ("0", TypeError),
])
def test_bad_positions_name_the_parameter(positions, error):
    rope = RopeConfig(head_dim=4)
    with pytest.raises(error, match="positions"):
        rope_cos_sin(positions, rope)
    with pytest.raises(error, match="positions"):
        apply_rope(np.ones((2, 4)), positions, rope)


def test_bad_apply_arguments():
    rope = RopeConfig(head_dim=4)
    with pytest.raises(ValueError, match="head_dim=4"):
        apply_rope(np.ones((2, 6)), [0, 1], rope)
    with pytest.raises(ValueError, match="T axis"):
        apply_rope(np.ones((3, 4)), [0, 1], rope)
    with pytest.raises(ValueError, match="one position"):
        apply_rope(np.ones(4), [0, 1], rope)
    with pytest.raises(TypeError, match="x"):
        apply_rope(np.ones((2, 4), dtype=np.int64), [0, 1], rope)
    with pytest.raises(ValueError, match="seq_len"):
        apply_rope(np.ones((2, 4)), [0, 1], rope, seq_len=-1)
    with pytest.raises(TypeError, match="seq_len"):
        rope_frequencies(rope, seq_len=2.0)
    with pytest.raises(TypeError, match="rope"):
        rope_frequencies({"rope_type": "default", "head_dim": 4})
    with pytest.raises(ValueError, match="frequencies"):
        apply_rope(np.ones((2, 4)), [0, 1], rope, frequencies=(np.ones(3), 1.0))


def test_mscale_rule():
    assert mscale(1.0) == 1.0 and mscale(0.5) == 1.0
    assert mscale(40.0, 1.0) == pytest.approx(1.3688879454113936, rel=1e-15)
    with pytest.raises(TypeError):
        mscale("40")
