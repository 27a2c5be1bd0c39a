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
    # a video (1, T, C, H, W): its frames run as a batch of images where the output holds T sequences (VidEoMT),
    # else one sequence
    assert frames_as_batch(np.zeros((3, 17, 8)), [1, 3, 3, 32, 32]) == 3
    assert frames_as_batch(np.zeros((2, 17, 8)), [1, 3, 3, 32, 32]) == 1
    assert frames_as_batch(np.zeros((3, 17, 8)), [1, 3, 3, 32, 32], "tubelets") == 1


VIDEOPRISM = {"model_type": "videoprism_vision_model", "num_spatial_layers": 2, "num_temporal_layers": 1,
              "num_attention_heads": 2, "hidden_size": 8, "intermediate_size": 8, "image_size": 32,
              "tubelet_size": [1, 8, 8], "num_frames": 4}
#: a video of 4 frames: native 4 × 4 patches, resampled 3 × 6
VIDEO = {"native": [1, 4, 3, 32, 32], "resampled": [1, 4, 3, 24, 48]}


def video_runs(spatial, temporal, grid_table, frame_table, wrong_frames: bool = False) -> list[PixelRun]:
    """VideoPrism's two sites: the spatial embeddings' output ``(F, h·w, d)`` (each frame its grid's rows), the
    temporal embeddings' ``(h·w, F, d)`` (each patch the frame table's rows, reversed where ``wrong_frames``)."""
    grid_caps, frame_caps = {}, {}
    for name, shape in VIDEO.items():
        grid = (shape[-2] // 8, shape[-1] // 8)
        rows = np.asarray(spatial.reference(grid_table, grid))
        frames = np.asarray(temporal.reference(frame_table, (shape[1], 1)))
        frames = frames[::-1] if wrong_frames else frames
        grid_caps[name] = Capture([np.stack([rows] * shape[1])], [np.zeros((shape[1], *rows.shape))])
        frame_caps[name] = Capture([np.stack([frames] * rows.shape[0])], [np.zeros((rows.shape[0], *frames.shape))])
    sites = [Site("spatial_embeddings.position_embeddings", "spatial_embeddings", True,
                  {"spatial_embeddings.position_embeddings": grid_table[None]}, captures=grid_caps),
             Site("temporal_embeddings.position_embeddings", "temporal_embeddings", True,
                  {"temporal_embeddings.position_embeddings": frame_table[None]}, captures=frame_caps)]
    return PixelRun("VideoPrismVisionModel", "pixel_values_videos", VIDEO, sites, attention=["VideoPrismAttention"],
                    dtype="float64")


def test_the_factorised_tables_are_each_compared_and_a_wrong_frame_table_graded_wrong():
    positions = refpos.model_positions(VIDEOPRISM)
    spatial, temporal = positions.stack("spatial.input")[0], positions.stack("temporal.input")[0]
    rng = np.random.default_rng(7)
    grid_table, frame_table = rng.standard_normal((16, 8)), rng.standard_normal((4, 8))
    run = video_runs(spatial, temporal, grid_table, frame_table)
    for record in (spatial, temporal):
        outcome = compare_grid(record, run, run.sites)
        assert outcome.status == "exact", outcome.cause
        assert outcome.survived == []
    wrong = video_runs(spatial, temporal, grid_table, frame_table, wrong_frames=True)
    assert compare_grid(temporal, wrong, wrong.sites).status == "wrong"
    assert compare_grid(spatial, wrong, wrong.sites).status == "exact"
