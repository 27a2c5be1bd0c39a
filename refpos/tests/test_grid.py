"""refpos.encodings.grid and its records: properties of resampled position grids, each shown failing on a wrong
way, and the registry asked for every piece (anchor, docs row, real model types).

Grids hold O(1) values; the resampled entries are sums of at most 16·d O(1) products in float64 (atol 1e-12).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.grid import (
    merge_block_order,
    packed_position_rows,
    patch_grid,
    resample_position_grid,
    resample_position_grids_padded,
    resample_position_sequence,
    resample_position_table,
)
from refpos.encodings.grid_variants import GRID_VARIANTS

ATOL = 1e-12
ROOT = Path(__file__).resolve().parents[2]
SIZE_FORM = [v for v in GRID_VARIANTS.values() if v.scale_factor_offset is None]
variants = st.sampled_from(sorted(GRID_VARIANTS))


def _table(rng, side, prefix=0, suffix=0, dim=3):
    return rng.standard_normal((prefix + side * side + suffix, dim))


# ------------------------------------------------------------------------- wrong ways the properties catch
def _cls_in_the_grid(table, grid, prefix=1, **options):
    """The grid read from the table's first M² rows (the CLS row taken as patch (0, 0)), the CLS row kept."""
    side = int(np.sqrt(table.shape[0] - prefix))
    patches = table[: side * side]
    out = to_numpy(resample_position_grid(patches.reshape(side, side, -1), grid, mode="bicubic"))
    return np.concatenate([table[:prefix], out.reshape(grid[0] * grid[1], -1)])


def _axes_swapped(table, grid, prefix=0, **options):
    """The size given as (w, h): the output grid laid out transposed."""
    return to_numpy(resample_position_table(table, grid[::-1], mode="bicubic", prefix_tokens=prefix))


# ------------------------------------------------------------------------- properties
@given(name=st.sampled_from([v.name for v in SIZE_FORM]), side=st.integers(1, 7), prefix=st.integers(0, 3),
       seed=st.integers(0, 2**16))
def test_the_same_grid_is_the_identity(name, side, prefix, seed):
    """Every size-form way returns the table unchanged at its own grid (transformers returns it early)."""
    variant = GRID_VARIANTS[name]
    table = _table(np.random.default_rng(seed), side, prefix)
    out = to_numpy(variant.resample(table, (side, side), prefix_tokens=prefix))
    expected = table if variant.keep_extra else table[prefix:]
    np.testing.assert_allclose(out, expected, atol=ATOL)


def test_the_offset_form_is_not_the_identity_for_bicubic():
    """The offset form (g + 0.1)/M steps by M/(M + 0.1) even at the table's own grid: not a copy (which is why
    DINOv2's original code and IDEFICS return the table there first: the records' native_as_is)."""
    table = _table(np.random.default_rng(0), 6, 1)
    way = dataclasses.replace(GRID_VARIANTS["dinov2_offset"], native_as_is=False)
    out = to_numpy(way.resample(table, (6, 6), prefix_tokens=1))
    assert out.shape == table.shape and not np.allclose(out, table, atol=1e-3)
    np.testing.assert_array_equal(out[0], table[0])
    np.testing.assert_array_equal(to_numpy(GRID_VARIANTS["dinov2_offset"].resample(table, (6, 6))), table)


@given(name=variants, side=st.integers(2, 7), h=st.integers(1, 12), w=st.integers(1, 12), prefix=st.integers(0, 3),
       suffix=st.integers(0, 2), seed=st.integers(0, 2**16))
def test_the_extra_rows_are_kept_apart_unchanged(name, side, h, w, prefix, suffix, seed):
    variant = GRID_VARIANTS[name]
    table = _table(np.random.default_rng(seed), side, prefix, suffix)
    out = to_numpy(variant.resample(table, (h, w), prefix_tokens=prefix, suffix_tokens=suffix))
    if not variant.keep_extra:
        assert out.shape == (h * w, 3)
        return
    assert out.shape == (prefix + h * w + suffix, 3)
    np.testing.assert_array_equal(out[:prefix], table[:prefix])
    np.testing.assert_array_equal(out[out.shape[0] - suffix:], table[table.shape[0] - suffix:])


def test_the_extra_rows_fail_when_the_cls_row_joins_the_grid():
    table = _table(np.random.default_rng(1), 4, 1)
    right = to_numpy(resample_position_table(table, (4, 4), mode="bicubic", prefix_tokens=1))
    assert not np.allclose(_cls_in_the_grid(table, (4, 4)), right, atol=1e-3)


@given(name=st.sampled_from([v.name for v in SIZE_FORM if v.mode != "nearest"]), side=st.integers(2, 6),
       h=st.integers(1, 9), w=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_transposing_the_table_transposes_the_grid(name, side, h, w, seed):
    """Resampling ``Gᵀ`` to ``(w, h)`` gives ``R(G)ᵀ``: the two axes follow the same rule."""
    variant = GRID_VARIANTS[name]
    grid = np.random.default_rng(seed).standard_normal((side, side, 2))
    options = {"mode": variant.mode, "align_corners": variant.align_corners, "antialias": variant.antialias,
               "padding": variant.padding}
    direct = to_numpy(resample_position_grid(grid, (h, w), **options))
    transposed = to_numpy(resample_position_grid(grid.transpose(1, 0, 2), (w, h), **options))
    np.testing.assert_allclose(transposed.transpose(1, 0, 2), direct, atol=ATOL)


def test_raster_order_fails_with_the_axes_swapped():
    table = _table(np.random.default_rng(2), 4)
    right = to_numpy(resample_position_table(table, (3, 6), mode="bicubic"))
    wrong = _axes_swapped(table, (3, 6))
    assert wrong.shape == right.shape and not np.allclose(wrong, right, atol=1e-3)


@given(name=variants, side=st.integers(2, 6), h=st.integers(1, 10), w=st.integers(1, 10), value=st.floats(-3, 3))
def test_a_constant_grid_stays_constant(name, side, h, w, value):
    variant = GRID_VARIANTS[name]
    if variant.padding == "zeros":  # taps outside the table weigh 0: a constant fades at the border
        return
    table = np.full((1 + side * side, 2), value)
    out = to_numpy(variant.resample(table, (h, w), prefix_tokens=1))
    np.testing.assert_allclose(out, value, atol=ATOL)


def test_zeros_padding_fades_a_constant_at_the_border():
    out = to_numpy(GRID_VARIANTS["bilinear_zeros_transposed"].resample(np.ones((16, 1)), (8, 8)))
    assert out.min() < 1.0 - 0.1 and np.isclose(out.max(), 1.0)


def test_merge_block_order_is_a_permutation_and_the_padded_resize_pads_with_the_first_row():
    order = merge_block_order((4, 6), 2)
    assert sorted(order) == list(range(24)) and order[:4] == [0, 1, 6, 7]
    grid = np.random.default_rng(3).standard_normal((5, 5, 2))
    out = to_numpy(resample_position_grids_padded(grid, [(2, 3), (4, 4)], 17))
    assert out.shape == (2, 17, 2)
    np.testing.assert_array_equal(out[0, 6:], np.broadcast_to(out[0, :1], (11, 2)))
    flat = to_numpy(resample_position_grid(grid, (4, 4), mode="bilinear", antialias=True)).reshape(16, 2)
    np.testing.assert_allclose(out[1, :16], flat, atol=ATOL)


@given(length=st.integers(1, 12), mode=st.sampled_from(["linear", "nearest", "bilinear", "bicubic"]))
def test_a_sequence_resampled_to_its_own_length_is_unchanged(length, mode):
    table = np.random.default_rng(length).standard_normal((1 + length, 2))
    out = to_numpy(resample_position_sequence(table, length, mode=mode, prefix_tokens=1))
    np.testing.assert_allclose(out, table, atol=ATOL)


def test_patch_grid():
    assert patch_grid(224, 224, 16) == (14, 14) and patch_grid(518, 392, (14, 14)) == (37, 28)


# ------------------------------------------------------------------------- the registry asked for every piece
def test_every_record_has_a_docs_row():
    """(Each record's model types are checked against transformers' models/ in the anchors.)"""
    page = (ROOT / "docs" / "grid.md").read_text(encoding="utf-8")
    for variant in GRID_VARIANTS.values():
        assert f"`{variant.name}`" in page, f"docs/grid.md has no row for {variant.name}"
        for model_type in variant.model_types:
            assert re.fullmatch(r"[a-z0-9_]+", model_type), model_type
        assert variant.source and variant.computes_in in ("table", "float32")
        assert variant.mode in ("nearest", "bilinear", "bicubic") and variant.axes in ("hw", "wh")


def test_no_model_type_is_in_two_records():
    seen: dict[str, str] = {}
    for variant in GRID_VARIANTS.values():
        for model_type in variant.model_types:
            assert model_type not in seen, f"{model_type} in {seen.get(model_type)} and {variant.name}"
            seen[model_type] = variant.name


@pytest.mark.parametrize(("call", "name"), [
    (lambda: resample_position_table(np.zeros((10, 2)), (3, 3), mode="bicubic", prefix_tokens=-1), "prefix_tokens"),
    (lambda: resample_position_table(np.zeros((11, 2)), (3, 3), mode="bicubic"), "source_grid"),
    (lambda: resample_position_table(np.zeros((10, 2)), (3, 3), mode="bicubic", prefix_tokens=1,
                                     source_grid=(2, 3)), "source_grid"),
    (lambda: resample_position_table(np.zeros((10, 2)), (3, 0), mode="bicubic", prefix_tokens=1), "grid"),
    (lambda: resample_position_table(np.zeros((10, 2)), (3, 3), mode="bicubic", axes="yx"), "axes"),
    (lambda: resample_position_table(np.zeros(10), (3, 3), mode="bicubic"), "table"),
    (lambda: resample_position_grid(np.zeros((11, 11, 1)), (15, 15), mode="bicubic", scale_factor_offset=0.0),
     "floor"),
    (lambda: resample_position_sequence(np.zeros((3, 2)), 0, mode="linear"), "length"),
    (lambda: merge_block_order((3, 4), 2), "merge"),
    (lambda: resample_position_grids_padded(np.zeros((3, 3, 1)), [(4, 4)], 8), "max_length"),
    (lambda: patch_grid(10, 10, 16), "patch"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


@pytest.mark.parametrize("name", sorted(GRID_VARIANTS))
def test_every_way_runs_on_the_current_backend(xp, name):
    """The array path of every way on the backend of the run (array_api_strict in tox's portability run)."""
    table = np.random.default_rng(5).standard_normal((1 + 25, 3))
    on_backend = to_numpy(GRID_VARIANTS[name].resample(xp.asarray(table), (3, 7), prefix_tokens=1))
    np.testing.assert_allclose(on_backend, to_numpy(GRID_VARIANTS[name].resample(table, (3, 7), prefix_tokens=1)),
                               atol=ATOL)


@given(side=st.integers(1, 7), h=st.integers(1, 9), w=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_a_square_crop_is_the_corner_of_the_longer_sides_square(side, h, w, seed):
    """RADIO's way: the grid at (h, w) is the first h rows and w columns of the grid at (D, D), D = max(h, w), so
    a patch reads the same place at every aspect; resampling straight to (h, w) (a wrong way) is not."""
    table = _table(np.random.default_rng(seed), side)
    crop = to_numpy(GRID_VARIANTS["bilinear_square_crop"].resample(table, (h, w)))
    d = max(h, w)
    square = to_numpy(resample_position_table(table, (d, d), mode="bilinear")).reshape(d, d, -1)
    np.testing.assert_allclose(crop, square[:h, :w].reshape(h * w, -1), rtol=0, atol=ATOL)
    stretched = to_numpy(resample_position_table(table, (h, w), mode="bilinear"))
    if h != w and side > 1:
        assert not np.allclose(stretched, crop, rtol=0, atol=ATOL)


# --- packed towers: flat patches of (t, h, w) grids (Qwen3-VL's kin) -----------------------------------------------

PACKED = {"model_type": "qwen3_vl_vision", "depth": 1, "hidden_size": 8, "num_heads": 2,
          "num_position_embeddings": 64, "spatial_merge_size": 2, "patch_size": 16}


def test_packed_rows_are_each_frame_s_grid_in_merge_block_order():
    import refpos
    from refpos.encodings.grid import merge_block_order

    site = refpos.model_positions(PACKED).stack("vision.input")[0]
    table = np.random.default_rng(7).standard_normal((64, 8))
    rows = np.asarray(site.tokens(table, [[2, 4, 6], [1, 2, 2]]))
    clip = np.asarray(site.reference(table, (4, 6)))[merge_block_order((4, 6), 2)]
    image = np.asarray(site.reference(table, (2, 2)))
    np.testing.assert_array_equal(rows, np.concatenate([clip, clip, image]))
    assert site.params()["token_order"] == "merge blocks of 2 × 2"


@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4))
def test_packed_rows_of_one_frame_in_raster_order_are_the_resampled_grid(t, h, w):
    table = np.arange(h * w * 2, dtype=np.float64).reshape(h * w, 2)
    rows = packed_position_rows(lambda hw: table, [[t, h, w]], 1)
    np.testing.assert_array_equal(rows, np.tile(table, (t, 1)))


@pytest.mark.parametrize(("grids", "merge", "message"), [
    ([], 1, "grids must be a non-empty"), ([[1, 4]], 1, r"grids\[0\] must be \(t, h, w\)"),
    ([[0, 4, 4]], 1, r"grids\[0\]\[0\] must be >= 1"), ([[1, 3, 4]], 2, "does not divide into merge"),
    ([[1, 4, 4]], 0, "merge must be >= 1")])
def test_packed_rows_refuse_bad_grids_by_name(grids, merge, message):
    with pytest.raises((TypeError, ValueError), match=message):
        packed_position_rows(lambda hw: np.zeros((hw[0] * hw[1], 2)), grids, merge)


def test_an_image_grid_is_not_asked_for_packed_rows():
    import refpos

    site = refpos.model_positions({"model_type": "vit", "num_hidden_layers": 1, "num_attention_heads": 2,
                                   "hidden_size": 8, "image_size": 32, "patch_size": 8}).stack("vision.input")[0]
    with pytest.raises(ValueError, match=r"grids: the vision\.input grid is added to one image's patches"):
        site.tokens(np.zeros((17, 8)), [[1, 4, 4]])


def test_a_tower_modelled_for_images_only_refuses_a_clip_by_name():
    import refpos

    config = {"model_type": "glm_image_vision", "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
              "image_size": 32, "patch_size": 4}
    site = refpos.model_positions(config).stack("vision.input")[0]
    assert not site.clips and site.params()["frames"] == "images only (t = 1)"
    assert np.asarray(site.tokens(np.zeros((64, 8)), [[1, 2, 3]])).shape == (6, 8)
    with pytest.raises(ValueError, match=r"grids: the vision.input tower reads a clip's frames otherwise"):
        site.tokens(np.zeros((64, 8)), [[2, 2, 3]])


def test_a_mode_the_row_does_not_model_is_reported_by_its_key():
    import refpos

    config = {"model_type": "hunyuan_vl_vision", "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
              "max_image_size": 32, "patch_size": 4}
    assert refpos.model_positions(config).not_modelled == {}
    refused = refpos.model_positions({**config, "interpolate_mode": "bicubic"}).not_modelled
    assert "interpolate_mode" in refused and "resamples bilinear" in refused["interpolate_mode"]


def test_a_clip_s_frames_add_their_sinusoid_where_the_tower_says_so():
    """Kimi K2.5: frame f of a clip adds the sinusoid of f (sin then cos; frame 0 adds cos 0 = 1 in its second half),
    an image none; a clip longer than the frame table is refused by name."""
    import refpos

    config = {"model_type": "kimi_k25_vision", "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
              "pos_emb_height": 4, "pos_emb_width": 4, "pos_emb_time": 3}
    site = refpos.model_positions(config).stack("vision.input")[0]
    table = np.random.default_rng(5).standard_normal((16, 8))
    image = np.asarray(site.tokens(table, [[1, 2, 3]]))
    clip = np.asarray(site.tokens(table, [[3, 2, 3]]))
    for f in range(3):
        np.testing.assert_allclose(clip[6 * f:6 * f + 6] - image, np.tile(sinusoid_row(f), (6, 1)), atol=1e-15)
    assert sinusoid_row(0)[4:].tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="frame sinusoid covers 3 frames"):
        site.tokens(table, [[4, 2, 3]])


def sinusoid_row(f: int) -> np.ndarray:
    from refpos.encodings.sinusoidal import sinusoidal

    return np.asarray(sinusoidal([f], 8, layout="concat"))[0]


@pytest.mark.parametrize(("facts", "named"), [
    ({"merge": "spatial_merge_size"}, "grid.merge"), ({"frames": "pos_emb_time"}, "grid.frames"),
    ({"class_row": "cls_position_embedding"}, "grid.class_row"),
    ({"packed": True, "clips": False, "frames": "pos_emb_time"}, "grid.frames")])
def test_packed_grid_facts_outside_a_packed_tower_are_refused_by_name(facts, named):
    """merge, frames and class_row belong to a packed tower (frames to one that takes clips): a row stating them
    otherwise is refused naming the fact."""
    from refpos.models.kinds.grid import GridFacts

    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        GridFacts(way="bilinear_align_corners", prefix=0, **facts).check("row")


def test_a_packed_tower_with_extra_rows_kept_is_refused_by_name(monkeypatch):
    """A packed tower lays out grid rows only: a way that keeps a CLS row around the grid is refused naming
    grid.packed, where its rows would sit between the images."""
    import dataclasses

    import refpos
    from refpos.models import families

    row = families.FAMILIES["cosmos3_edge_vision"]
    facts = dataclasses.replace(row.input.facts_of("grid"), way="bicubic", prefix=1, positions=None,
                                positions_default=None, defaults=(32, 8))
    monkeypatch.setitem(families.FAMILIES, "cosmos3_edge_vision",
                        dataclasses.replace(row, input=dataclasses.replace(row.input, facts=(("grid", facts),))))
    with pytest.raises(ValueError, match=r"grid\.packed takes a way that leaves the extra rows out"):
        refpos.model_positions({"model_type": "cosmos3_edge_vision", "num_hidden_layers": 1, "hidden_size": 8,
                                "num_attention_heads": 2, "image_size": 32, "patch_size": 8})
