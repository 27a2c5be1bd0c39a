"""The grid comparison on a clip fed as a batch of its frames (X-CLIP's tower: ``(F, C, H, W)``, each frame its own
sequence) — hand-made runs, no torch: every frame's rows graded against refpos's, one frame off graded wrong, and
the frames' rows read as one sequence no longer a grid of the image's aspect."""

from __future__ import annotations

import numpy as np

import refpos
from survey.pixel_kinds import compare_grid
from survey.pixel_kinds.grid import frames_as_batch
from survey.pixels import Capture, PixelRun, Site

XCLIP = {"model_type": "xclip_vision_model", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
         "intermediate_size": 8, "image_size": 32, "patch_size": 8, "num_frames": 3}
#: three frames: native 4 × 4, resampled 3 × 6
SHAPES = {"native": [3, 3, 32, 32], "resampled": [3, 3, 24, 48]}


def frame_run(record, table, off_frame: int | None = None) -> PixelRun:
    """An embedding site whose recorded difference is refpos's rows for every frame (frame ``off_frame`` shifted)."""
    captures = {}
    for name, shape in SHAPES.items():
        rows = np.asarray(record.reference(table, (shape[-2] // 8, shape[-1] // 8)))
        added = np.stack([rows + (0.5 if frame == off_frame else 0.0) for frame in range(shape[0])])
        captures[name] = Capture([added], [np.zeros_like(added)])
    site = Site("embeddings.position_embedding", "embeddings", True,
                {"embeddings.position_embedding.weight": table}, captures=captures)
    return PixelRun("XCLIPVisionModel", "pixel_values", SHAPES, [site], attention=["XCLIPAttention"], dtype="float64")


def test_every_frame_of_the_batch_is_compared():
    record = refpos.model_positions(XCLIP).stack("vision.input")[0]
    table = np.random.default_rng(37).standard_normal((record.table_rows, record.dim))
    outcome = compare_grid(record, frame_run(record, table), frame_run(record, table).sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 3 and outcome.survived == []
    wrong = frame_run(record, table, off_frame=2)
    assert compare_grid(record, wrong, wrong.sites).status == "wrong"


def test_frames_as_batch_only_where_the_output_holds_one_sequence_per_fed_frame():
    assert frames_as_batch(np.zeros((3, 17, 8)), [3, 3, 32, 32]) == 3
    assert frames_as_batch(np.zeros((1, 17, 8)), [1, 3, 32, 32]) == 1
    assert frames_as_batch(np.zeros((3, 17, 8)), [1, 3, 3, 32, 32]) == 1  # a video (1, T, C, H, W): one sequence
