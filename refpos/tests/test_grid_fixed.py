"""refpos.encodings.grid_fixed and the fixed ways of the grid kind: the readings, the strided grid, the records the
rows build, the bad inputs named, and the survey's wrong readings told apart."""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_fixed import FIXED_MISTAKES, fixed_position_rows, strided_grid
from refpos.models.kinds.grid import GridFacts

RNG = np.random.default_rng(3)


def test_first_row_added_is_each_patch_plus_the_first_row():
    table = RNG.standard_normal((1 + 12, 5))
    rows = np.asarray(fixed_position_rows(table, (4, 3), source_grid=(4, 3), prefix_tokens=1,
                                          read="first_row_added"))
    assert rows.shape == (12, 5)
    for q in range(12):
        assert np.array_equal(rows[q], table[1 + q] + table[0])


def test_as_is_returns_the_table():
    table = RNG.standard_normal((2 + 6, 3))
    assert np.array_equal(fixed_position_rows(table, (2, 3), source_grid=(2, 3), prefix_tokens=2), table)


def test_a_wrong_reading_fails_the_comparison():
    """The test above would fail on a reading that leaves the first row out (the answer it tells apart)."""
    table = RNG.standard_normal((1 + 4, 2))
    right = np.asarray(fixed_position_rows(table, (2, 2), source_grid=(2, 2), prefix_tokens=1,
                                           read="first_row_added"))
    for name, wrong in FIXED_MISTAKES.items():
        rows = wrong(table, (2, 2), 1, 0, "first_row_added")
        if rows is not None:
            assert not np.allclose(np.asarray(rows), right), name


@pytest.mark.parametrize(("lengths", "kernel", "strides", "grid"), [
    ((128, 1024), 16, (10, 10), (12, 101)), ((40, 64), 16, (6, 10), (5, 5)), ((16, 16), 16, (3, 7), (1, 1))])
def test_strided_grid_counts_the_kernel_s_places(lengths, kernel, strides, grid):
    assert strided_grid(lengths, kernel, strides) == grid
    # the places a kernel starts at: 0, s, 2s, … while it fits
    assert tuple(len(range(0, n - kernel + 1, s)) for n, s in zip(lengths, strides, strict=True)) == grid


@pytest.mark.parametrize(("call", "match"), [
    (lambda: fixed_position_rows(np.zeros((5, 2)), (3, 2), source_grid=(2, 2), prefix_tokens=1), "native grid"),
    (lambda: fixed_position_rows(np.zeros((6, 2)), (2, 2), source_grid=(2, 2), prefix_tokens=1), "table"),
    (lambda: fixed_position_rows(np.zeros((6, 2)), (2, 2), source_grid=(2, 2), prefix_tokens=2,
                                 read="first_row_added"), "prefix_tokens"),
    (lambda: fixed_position_rows(np.zeros((4, 2)), (2, 2), source_grid=(2, 2), read="resample"), "read"),
    (lambda: strided_grid((8, 64), 16, (10, 10)), "lengths"),
    (lambda: strided_grid((64, 64), 16, (0, 10)), "strides"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_rows_build_the_fixed_records():
    vitpose = refpos.model_positions({"model_type": "vitpose_backbone", "num_hidden_layers": 2, "hidden_size": 8,
                                      "num_attention_heads": 2, "image_size": [32, 24], "patch_size": [8, 8]})
    (site,) = vitpose.stack("vision.input")
    assert (site.way, site.grid, site.prefix, site.table_rows) == ("fixed_first_row", (4, 3), 1, 13)
    assert site.params()["first_row"].startswith("added")
    ast = refpos.model_positions({"model_type": "audio-spectrogram-transformer", "num_hidden_layers": 2,
                                  "hidden_size": 8, "num_attention_heads": 2})
    (site,) = ast.stack("audio.input")
    assert (site.way, site.grid, site.prefix, site.table_rows) == ("fixed", (12, 101), 2, 2 + 12 * 101)
    with pytest.raises(ValueError, match="native grid"):
        site.reference(np.zeros((site.table_rows, 8)), (12, 100))


def test_aimv2_native_is_refused_by_name():
    config = {"model_type": "aimv2_vision_model", "num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2}
    assert [r.kind for r in refpos.model_positions(config)] == ["grid", "none", "none"]
    native = refpos.model_positions({**config, "is_native": True})
    assert {r.kind for r in native} == {"refused"} and "is_native" in native.not_modelled


@pytest.mark.parametrize("facts", [{"way": "fixed_first_row", "prefix": 2},
                                   {"way": "bicubic", "strides": ["a", "b", "c", "d"]},
                                   {"way": "fixed", "strides": ["a", "b", "c"]}])
def test_facts_out_of_their_rule_are_refused(facts):
    with pytest.raises(ValueError):
        GridFacts(**facts).check("row")


PVT = {"model_type": "pvt", "num_encoder_blocks": 4, "depths": [2, 1, 1, 1], "num_attention_heads": [1, 2, 5, 8],
       "hidden_sizes": [8, 16, 40, 64], "patch_sizes": [4, 2, 2, 2], "image_size": 224}


def test_pvt_adds_a_table_per_stage():
    positions = refpos.model_positions(PVT)
    sites = positions.stack("vision.input")
    assert [(s.index, s.grid, s.prefix, s.dim) for s in sites] == [
        (0, (56, 56), 0, 8), (1, (28, 28), 0, 16), (2, (14, 14), 0, 40), (3, (7, 7), 1, 64)]
    assert [r.layer_type for r in positions.stack("vision")] == ["stage_0", "stage_0", "stage_1", "stage_2",
                                                                 "stage_3"]


@pytest.mark.parametrize(("override", "match"), [({"patch_sizes": [4, 2]}, "patch_sizes"),
                                                 ({"image_size": 8}, "image_size")])
def test_pvt_stage_tables_refuse_what_they_cannot_hold(override, match):
    with pytest.raises(ValueError, match=match):
        refpos.model_positions({**PVT, **override})


def test_an_offset_way_returns_its_table_at_the_square_native_grid():
    """IDEFICS (and DINOv2's original code) return the table itself where a square image's patches number its rows;
    the offset form alone (the record without native_as_is) would move every row there."""
    import dataclasses

    from refpos.encodings.grid_variants import GRID_VARIANTS

    table = RNG.standard_normal((1 + 25, 4))
    for name in ("bicubic_offset", "dinov2_offset"):
        way = GRID_VARIANTS[name]
        assert np.array_equal(way.resample(table, (5, 5), prefix_tokens=1), table)
        moved = np.asarray(dataclasses.replace(way, native_as_is=False).resample(table, (5, 5), prefix_tokens=1))
        assert np.abs(moved - table).max() > 1e-3
        assert way.resample(table, (6, 6), prefix_tokens=1).shape == (37, 4)
