"""Stages of their own geometry (refpos.models.stages, the family table's ``stages`` column): each stage's layers
answered ``none`` with the stage's layer type, its heads and widths from the config's lists (or what the code
fixes), and every config that does not state them refused by name."""

from __future__ import annotations

import pytest

import refpos
from refpos.models.families import family_of, read_row
from refpos.models.schedule import stages_of
from refpos.models.stages import read_stages, stage_plan, stage_types

SEGFORMER = {"model_type": "segformer", "num_encoder_blocks": 3, "depths": [1, 2, 3, 9],
             "hidden_sizes": [8, 16, 24, 99], "num_attention_heads": [1, 2, 3, 99], "sr_ratios": [4, 2, 1, 1]}


def test_segformer_resolves_each_stage_layers_heads_and_width():
    answer = refpos.model_positions(SEGFORMER)
    layers = answer.stack("vision")
    # num_encoder_blocks = 3: the fourth entries are never read (SegformerEncoder loops over the blocks)
    assert [r.kind for r in layers] == ["none"] * 6
    assert [r.layer_type for r in layers] == ["stage_0", "stage_1", "stage_1", "stage_2", "stage_2", "stage_2"]
    assert not answer.not_modelled
    assert [(s.first, s.layers, s.heads, s.head_dim, s.width) for s in stages_of(SEGFORMER)] == [
        (0, 1, 1, 8, 8), (1, 2, 2, 8, 16), (3, 3, 3, 8, 24)]
    assert "stage_1: layers 1-2, 2 heads of 8 (width 16)" in answer.notes[0]


@pytest.mark.parametrize("model_type", ["segformer", "glpn", "pvt_v2"])
def test_the_mix_transformers_read_the_same_keys(model_type):
    config = SEGFORMER | {"model_type": model_type}
    assert [r.layer_type for r in refpos.model_positions(config).stack("vision")][-1] == "stage_2"


def test_cvt_counts_its_stages_by_its_lists():
    config = {"model_type": "cvt", "depth": [1, 2], "num_heads": [1, 3], "embed_dim": [8, 24]}
    assert stage_types(stages_of(config)) == ["stage_0", "stage_1", "stage_1"]
    with pytest.raises(ValueError, match=r"differ in length: depth \(2\), num_heads \(3\)"):
        stages_of(config | {"num_heads": [1, 3, 6]})


def test_mobilevit_blocks_are_fixed_by_the_code_and_share_their_heads():
    config = {"model_type": "mobilevit", "hidden_sizes": [12, 16, 20], "num_attention_heads": 4}
    stages = stages_of(config)
    assert [(s.layers, s.heads, s.head_dim) for s in stages] == [(2, 4, 3), (4, 4, 4), (3, 4, 5)]
    assert len(refpos.model_positions(config).stack("vision")) == 9
    with pytest.raises(ValueError, match=r"hidden_sizes \(10\) is not a multiple of num_attention_heads \(4\)"):
        stages_of(config | {"hidden_sizes": [12, 10, 20]})


def test_a_perceiver_states_its_head_width_apart_from_its_width():
    config = {"model_type": "idefics2_perceiver", "resampler_depth": 3, "resampler_n_heads": 16,
              "resampler_head_dim": 96, "hidden_size": 256}
    (stage,) = stages_of(config)
    assert (stage.layers, stage.heads, stage.head_dim, stage.width) == (3, 16, 96, 256)


def test_a_config_without_a_stage_key_is_refused_by_name():
    for key in ("depths", "num_attention_heads", "hidden_sizes", "num_encoder_blocks"):
        config = {k: v for k, v in SEGFORMER.items() if k != key}
        with pytest.raises(ValueError, match=key):
            refpos.model_positions(config)
    with pytest.raises(ValueError, match=r"depths has 2 entries for num_encoder_blocks=3"):
        stages_of(SEGFORMER | {"depths": [1, 2]})
    with pytest.raises(TypeError, match=r"num_attention_heads\[1\] must be an int"):
        stages_of(SEGFORMER | {"num_attention_heads": [1, 2.0, 3]})
    with pytest.raises(ValueError, match=r"num_attention_heads\[0\] must be >= 1"):
        stages_of(SEGFORMER | {"num_attention_heads": [0, 2, 3]})


def test_a_wrong_stage_table_is_refused():
    with pytest.raises(ValueError, match="lacks \\['widths'\\]"):
        read_stages("row", {"layers": "depths", "heads": "num_attention_heads"})
    with pytest.raises(ValueError, match="unknown facts \\['depth'\\]"):
        read_stages("row", {"layers": "a", "heads": "b", "widths": "c", "depth": "d"})
    with pytest.raises(ValueError, match=r"stages\.heads must be a config key or the value the code fixes"):
        read_stages("row", {"layers": "a", "heads": [2, 0], "widths": "c"})
    with pytest.raises(ValueError, match=r"stages\.count names the config key"):
        read_stages("row", {"layers": "a", "heads": "b", "widths": "c", "count": 3})
    with pytest.raises(ValueError, match="column stages"):
        read_row("x", {"source": "segformer/modeling_segformer.py: SegformerAttention.forward", "encoding": "none",
                       "count": "blocks_per_stage", "stages": {"layers": "a", "heads": "b", "widths": "c"}})


def test_the_stage_rule_and_plan_agree_without_a_family():
    rule = read_stages("row", {"layers": [2, 1], "heads": 2, "widths": "w"})
    plan = stage_plan({"w": [4, 8]}, rule)
    assert [(s.first, s.layers, s.head_dim) for s in plan] == [(0, 2, 2), (2, 1, 4)]
    assert rule.keys == ("w",)
    assert family_of("segformer").stages is not None and stages_of({"model_type": "llama"}) == ()
    with pytest.raises(TypeError, match="config must be a mapping"):
        stages_of([("model_type", "segformer")])  # type: ignore[arg-type]


HIERA = {"model_type": "hiera", "depths": [1, 2, 1], "num_heads": [1, 2, 4], "embed_dim": 8,
         "embed_dim_multiplier": 2.0, "image_size": [32, 32], "patch_stride": [4, 4], "hidden_size": 32}


def test_hiera_widths_grow_geometrically():
    """Stage s is int(embed_dim · embed_dim_multiplier^s) wide (HieraEncoder.__init__); hidden_size (the last
    stage's width, which the config class sets itself) is not read for them, nor for the grid's width."""
    answer = refpos.model_positions(HIERA)
    assert [(s.layers, s.heads, s.head_dim, s.width) for s in stages_of(HIERA)] == [
        (1, 1, 8, 8), (2, 2, 8, 16), (1, 4, 8, 32)]
    assert [r.layer_type for r in answer.stack("vision")] == ["stage_0", "stage_1", "stage_1", "stage_2"]
    (grid,) = answer.stack("vision.input")
    assert (grid.grid, grid.prefix, grid.dim, grid.way) == ((8, 8), 0, 8, "bicubic")
    assert [s.width for s in stages_of(HIERA | {"embed_dim_multiplier": 1.5, "num_heads": [1, 2, 2]})] == [8, 12, 18]
    rule = read_stages("row", {"layers": "d", "heads": "h", "widths": {"base": "e", "factor": "m"}})
    assert rule.keys == ("d", "h", "e", "m")
    with pytest.raises(ValueError, match="embed_dim_multiplier"):
        stages_of({k: v for k, v in HIERA.items() if k != "embed_dim_multiplier"})
    with pytest.raises(ValueError, match=r"stages\.widths"):
        read_stages("row", {"layers": "d", "heads": "h", "widths": {"base": "e"}})
