"""The grids of the packed towers (Qwen3-VL and its kin) against the towers transformers builds (anchors env).

A packed tower takes flat patches and their ``(t, h, w)`` grids and adds to each token its image's grid resampled
to ``(h, w)``, in merge-block order, once per frame (:meth:`refpos.models.kinds.grid.GridLayer.tokens`). Each row's
tower is built small, in float64, and fed two images of different grids, one of them a clip of two frames; what
its table adds is its first block's input minus the same input with the table zeroed (the addition is linear in
the table). Bound: the way's resampling bound at float32 (:func:`refpos.encodings.grid_mistakes.grid_tolerance`:
the model computes its coordinates and weights in float32, the way's ``computes_in``), the largest of the images'.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.encodings.grid import packed_position_rows
from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance
from refpos.models.families import FAMILY_ROWS

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import build  # noqa: E402  (after the importorskip of torch)

PACKED_ROWS = [row.model_type for row in FAMILY_ROWS if row.input is not None and row.input.encoding == "grid"
               and not row.unmodelled and row.input.facts_of("grid").packed]
#: two images: a clip of two frames of 4 × 6 patches, and an image of 6 × 4 (merge blocks of 2 divide both)
GRIDS = [[2, 4, 6], [1, 6, 4]]
SMALL = {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 32, "out_hidden_size": 32,
         "num_position_embeddings": 64, "spatial_merge_size": 2, "patch_size": 4, "temporal_patch_size": 2,
         "deepstack_visual_indexes": []}


def added_rows(model, table_name: str) -> np.ndarray:
    """What the tower's table adds to the tokens of :data:`GRIDS`: its first block's input, minus that input with
    the table zeroed."""
    config = model.config
    tokens = sum(t * h * w for t, h, w in GRIDS)
    width = config.in_channels * config.temporal_patch_size * config.patch_size ** 2
    patches = torch.randn(tokens, width, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    seen = []
    handle = model.blocks[0].register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((args[0] if args else kwargs["hidden_states"]).clone()),
        with_kwargs=True)
    table = dict(model.named_parameters())[table_name]
    with torch.no_grad():
        model(patches, grid_thw=torch.tensor(GRIDS))
        kept = table.clone()
        table.zero_()
        model(patches, grid_thw=torch.tensor(GRIDS))
        table.copy_(kept)
    handle.remove()
    return (seen[0] - seen[1]).numpy()


@pytest.mark.parametrize("model_type", PACKED_ROWS)
def test_the_packed_rows_are_the_tower_s(model_type):
    config = transformers.AutoConfig.for_model(model_type, **SMALL)
    (site,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "grid"]
    assert site.packed and site.merge == 2 and site.table_rows == 64
    model = build(config).to(torch.float64)
    name = next(n for n, p in model.named_parameters() if p.shape == (site.table_rows, site.dim))
    table = dict(model.named_parameters())[name].detach().numpy()
    observed = added_rows(model, name)
    expected = np.asarray(site.tokens(table, GRIDS))
    assert observed.shape == expected.shape
    bound = tolerance(site, table)
    assert np.max(np.abs(observed - expected)) <= bound
    raster = np.asarray(packed_position_rows(lambda hw: site.reference(table, hw), GRIDS, 1))
    assert np.max(np.abs(observed - raster)) > bound  # the order is seen


def tolerance(site, table: np.ndarray) -> float:
    """The way's float32 resampling bound, the largest over the images of :data:`GRIDS`."""
    return max(grid_tolerance(GridInputs(table, (h, w), site.variant, prefix_tokens=0, source_grid=site.grid))
               for _, h, w in GRIDS)


def test_the_packed_anchor_fails_on_raster_order():
    """The anchor's comparison tells the tower's merge-block order from raster order (the check can fail)."""
    table = np.random.default_rng(1).standard_normal((64, 8))
    config = transformers.AutoConfig.for_model("qwen3_vl_vision", **{**SMALL, "hidden_size": 8})
    (site,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "grid"]
    merged = np.asarray(site.tokens(table, GRIDS))
    raster = np.asarray(packed_position_rows(lambda hw: site.reference(table, hw), GRIDS, 1))
    assert np.max(np.abs(merged - raster)) > 0.1
