"""``refpos check grid`` on what transformers 5.25 computes in float32 for the grid's other forms: TimeSformer's and
ViViT's clip rows, YOLOS's tables between the layers, SAM 2's Hiera windowed grid. Each module's float32 output
passes the check's call (its bound is a float32 port's), and the output with one catalogued mistake made on it is
named by that mistake.

The modules are built as their anchors build them (refpos/tests/test_anchors_video_grid.py,
test_anchors_grid_mid.py, test_anchors_grid_windowed.py): seeded tables, the projection and CLS token zeroed.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.check.kinds import check_kind
from refpos.check.kinds.grid import GRID_CHECK

torch = pytest.importorskip("torch", reason="grid anchors need torch (pip install 'refpos[anchors]')")
transformers = pytest.importorskip("transformers", reason="grid anchors need transformers")
pytestmark = pytest.mark.anchors

PATCH = 4


def _checked(function: str, arguments: dict, theirs: np.ndarray, mistake: str) -> float:
    """The module's output passes; the mistake's output (from the same inputs) is named; the output's error over
    the bound."""
    result = check_kind("grid", function, arguments, theirs.astype(np.float32))
    assert result["ok"] and result["diagnosis"] == [], result
    wrong = GRID_CHECK.wrong(GRID_CHECK.inputs(function, arguments), mistake)
    assert [d["id"] for d in check_kind("grid", function, arguments, wrong)["diagnosis"]] == [mistake]
    return result["max_ratio"]


@pytest.mark.parametrize(("grid", "frames", "mistake"), [((3, 6), 4, "grid_clip_bicubic_for_nearest"),
                                                        ((5, 3), 6, "grid_clip_time_linear_for_nearest"),
                                                        ((2, 8), 3, "grid_clip_frame_major")])
def test_timesformer_clip_passes(grid, frames, mistake):
    from refpos.tests.test_anchors_video_grid import _np, _timesformer

    _, emb, table, time = _timesformer(4, 4, torch.float32)
    with torch.no_grad():
        theirs = _np(emb(torch.zeros(1, frames, 1, grid[0] * PATCH, grid[1] * PATCH))[0])
    arguments = {"table": table, "time_table": time, "grid": list(grid), "frames": frames,
                 "way": {"mode": "nearest"}, "layout": "patch_major"}
    assert _checked("clip_position_rows", arguments, theirs, mistake) <= 1.0


@pytest.mark.parametrize(("grid", "frames", "mistake"), [((4, 4), 4, "grid_clip_tubelets_patch_major"),
                                                        ((3, 5), 2, "grid_bilinear_for_bicubic")])
def test_vivit_clip_passes(grid, frames, mistake):
    from refpos.tests.test_anchors_video_grid import _np, _vivit

    _, emb, table = _vivit(4, frames, torch.float32)
    with torch.no_grad():
        theirs = _np(emb(torch.zeros(1, frames, 1, grid[0] * PATCH, grid[1] * PATCH),
                         interpolate_pos_encoding=grid != (4, 4))[0])
    arguments = {"table": table, "grid": list(grid), "frames": frames, "way": {"mode": "bicubic"},
                 "layout": "tubelets", "tubelet": 2}
    assert _checked("clip_position_rows", arguments, theirs, mistake) <= 1.0


def test_yolos_mid_tables_pass():
    from refpos.tests.test_anchors_grid_mid import _yolos

    _, encoder, tables = _yolos(torch.float32)
    with torch.no_grad():
        theirs = encoder.interpolation((9 * PATCH, 4 * PATCH))[:, 0].to(torch.float64).numpy()
    arguments = {"tables": tables, "grid": [9, 4], "way": {"mode": "bicubic"}, "prefix_tokens": 1,
                 "suffix_tokens": 3, "source_grid": [5, 7]}
    assert _checked("mid_position_tables", arguments, theirs, "grid_mid_tables_reversed") <= 1.0


@pytest.mark.parametrize(("grid", "window", "cells"), [((32, 48), 8, (7, 7)), ((24, 16), 4, (5, 9))])
def test_hiera_windowed_grid_passes(grid, window, cells):
    from refpos.tests.test_anchors_grid_windowed import _model, _theirs

    model, background, window_rows = _model(window, cells, "float32")
    arguments = {"background": background, "window": window_rows, "grid": list(grid), "source_grid": list(cells),
                 "window_side": window}
    assert _checked("windowed_position_grid", arguments, _theirs(model, grid), "grid_window_transposed") <= 1.0
