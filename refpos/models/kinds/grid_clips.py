r"""The video towers' clips of the grid kind (TimeSformer, ViViT, VideoPrism's factorised stacks): their native grid
and clip fields read from the config (:func:`clip_fields`), and the rows a clip's tokens gain (:func:`clip_rows`;
the formulas are :mod:`refpos.encodings.grid_clips`, docs/grid.md#video-clips-timesformer-vivit)."""

from __future__ import annotations

from typing import Any

from refpos.backend import Array
from refpos.encodings.grid import patch_grid
from refpos.encodings.grid_clips import FACTORISED, patch_major_rows
from refpos.models.view import ConfigView
from refpos.validation import check_int


def clip_fields(view: ConfigView, facts: Any, not_modelled: dict[str, str]) -> tuple[tuple[int, int] | None,
                                                                                    dict[str, Any]]:
    """The native grid where the clip's facts fix it (ViViT and VideoPrism's frame grid: ``image_size`` in the
    tubelet's last two sides; VideoPrism's frame table: ``(clip_frames, 1)``; else ``None``) and the record's clip
    fields (``clip``, ``depth`` and ``stride``, or ``time``); what the config sets that refpos does not model is
    added to ``not_modelled`` by key."""
    if not facts.clip:
        return None, {}
    frames = view.int(facts.clip_frames, facts.clip_frames_default, minimum=1)
    if facts.no_time is not None and str(view.value(facts.no_time[0], None)) == facts.no_time[1]:
        not_modelled[view.name(facts.no_time[0])] = (
            f"{facts.no_time[1]!r}: the frames run as a batch of their own sequences, without the time table "
            "(refpos models the clip as one sequence)")
    if facts.clip == "frame_table":  # N rows along the frames, read as a grid of N × 1
        return (frames, 1), {"clip": facts.clip}
    if facts.clip == "patch_major":
        return None, {"clip": facts.clip, "time": frames}
    tubelet = view.value(facts.tubelet, facts.tubelet_default)
    if not isinstance(tubelet, list | tuple) or len(tubelet) != 3:
        raise ValueError(f"{view.name(facts.tubelet)} must be (frames, height, width), got {tubelet!r}")
    stride, ph, pw = (check_int(view.name(facts.tubelet), v, minimum=1) for v in tubelet)
    image = view.value(facts.image, (facts.defaults or (None,))[0])
    pair = list(image) if isinstance(image, list | tuple) else [image, image]
    if len(pair) != 2:
        raise ValueError(f"{view.name(facts.image)} must be an int or a pair (rows, columns), got {image!r}")
    grid = patch_grid(*(check_int(view.name(facts.image), v, minimum=1) for v in pair), (ph, pw))
    if facts.clip == "frame_grid":
        if stride != 1:
            not_modelled[view.name(facts.tubelet)] = (
                f"tubelets {stride} frames deep: the temporal stack reads the clip's frames, which its code then "
                "cannot lay out (refpos models tubelets one frame deep)")
        return grid, {"clip": facts.clip}
    if frames % stride:
        not_modelled[view.name(facts.clip_frames)] = (
            f"{frames} frames in tubelets of {stride}: the table's tubelet frames are counted {frames // stride}, "
            f"and a clip of {frames} frames gives another count")
    return grid, {"clip": facts.clip, "depth": max(1, frames // stride), "stride": stride}


def clip_params(layer: Any) -> dict[str, Any]:
    """The clip's entries of :meth:`refpos.models.kinds.grid.GridLayer.params` (none for an image's grid)."""
    if layer.clip == "tubelets":
        return {"clip": layer.clip, "tubelet_frames": layer.depth, "tubelet_depth": layer.stride}
    if layer.clip == "patch_major":
        return {"clip": layer.clip, "time_table_rows": layer.time, "time_resampled": "nearest to the frames"}
    if layer.clip in FACTORISED:
        return {"clip": layer.clip, "sequences": "each frame's patches" if layer.clip == "frame_grid" else
                "each patch's frames, the table a grid of N × 1 read at (F, 1)"}
    return {}


def clip_rows(layer: Any, table: Array, grid: tuple[int, int], frames: int, time_table: Array | None = None) -> Array:
    r"""The rows :meth:`refpos.models.kinds.grid.GridLayer.clip_rows` answers (that method's docstring).

    ``"tubelets"``: the table as ``layer.reference`` reads it (the native grid, or one tubelet frame resampled).
    ``"patch_major"``: the grid ``G'`` is the table's rows as they are where ``h·w = M_h·M_w`` (the code resamples
    only when the count differs), else ``layer.reference``'s; then

    .. math:: P_0 = c, \qquad P_{1 + pF + f} = G'_p + T_{\lfloor f N / F \rfloor}
    """
    if not layer.clip:
        raise ValueError(f"frames: the {layer.stack} grid is added to an image's patches, not to a clip's: "
                         "call reference")
    frames = check_int("frames", frames, minimum=1)
    if layer.clip in FACTORISED:  # the rows each frame's patches, or each patch's frames, gain
        return layer.reference(table, grid if layer.clip == "frame_grid" else (frames, 1))
    if layer.clip == "tubelets":
        if frames != layer.depth * layer.stride:
            raise ValueError(f"frames: the {layer.stack} table holds {layer.depth} tubelet frames of {layer.stride} "
                             f"frames each, and its code adds it to clips of {layer.depth * layer.stride} frames "
                             f"only, got {frames}")
        return layer.reference(table, grid)
    shape = None if time_table is None else tuple(getattr(time_table, "shape", ()))
    if bool(layer.time) != (time_table is not None) or (shape is not None and shape != (layer.time, layer.dim)):
        raise ValueError(f"time_table: the {layer.stack} clip reads a time table of shape ({layer.time}, "
                         f"{layer.dim}) exactly when it has one, got {shape}")
    full = layer.reference(table, layer.grid)  # the shape check
    h, w = check_int("grid[0]", grid[0], minimum=1), check_int("grid[1]", grid[1], minimum=1)
    same_count = h * w == layer.grid[0] * layer.grid[1]
    spatial = full[layer.prefix:, :] if same_count else layer.reference(table, (h, w))[layer.prefix:, :]
    return patch_major_rows(full[0, :], spatial, frames, time_table)  # P_{1 + pF + f} = G'_p + T'_f
