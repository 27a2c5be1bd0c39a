r"""M-RoPE position ids ``(3, T)`` of a multimodal token sequence: text spans, images, videos.

A sequence is a list of spans, each :class:`Text`, :class:`Image` or :class:`Video`. Positions are
built left to right from a running start ``s`` (0 at the beginning), as transformers 5.24 does in
``get_rope_index`` of Qwen2-VL, Qwen2.5-VL, Qwen3-VL and GLM-4.1V
(``transformers/models/*/modeling_*.py``, ``get_rope_index`` and ``get_vision_position_ids``):

* **text** of ``n`` tokens: :math:`p_t = p_h = p_w = s, s+1, \dots, s+n-1`; then :math:`s \mathrel{+}= n`;
* **image or video** with patch grid :math:`(g_t, g_h, g_w)` and spatial merge ``k`` (the vision
  tower merges ``k × k`` patches into one token): the LLM grid is :math:`(g_t, g_h/k, g_w/k)`, one token
  per cell in row-major ``(t, h, w)`` order, at

  .. math:: p_t = s + \lfloor i_t\,\Delta \rfloor,\qquad p_h = s + i_h,\qquad p_w = s + i_w ,

  with the temporal spacing :math:`\Delta` = 1 for images and for Qwen2-VL videos; Qwen2.5-VL videos
  :math:`\Delta = \text{tokens\_per\_second} \times \text{seconds\_per\_grid}` (seconds between two
  temporal patches); then :math:`s \mathrel{+}= \max(g_h, g_w)/k`. The temporal extent does **not**
  advance ``s`` (transformers 5.24; transformers 4.x continued after the largest id instead).
* Qwen3-VL and GLM-4.1V place a video frame by frame: a video of :math:`g_t` temporal patches is
  :math:`g_t` grids :math:`(1, g_h, g_w)` one after the other (in their prompts timestamp text separates
  the frames; give it as :class:`Text` spans between one-frame :class:`Video` spans to reproduce a
  prompt exactly).

Example (Qwen2-VL, ``k = 2``): ``[Text(2), Image((1, 4, 6)), Text(2)]`` gives text 0, 1; a 2 × 3 image
grid at ``s = 2``, ``p_h ∈ {2, 3}``, ``p_w ∈ {2, 3, 4}``, ``p_t = 2``; then ``s = 2 + 3 = 5``: text 5, 6.

>>> mm_position_ids([Text(2), Image((1, 4, 6)), Text(2)], family="qwen2_vl").tolist()
[[0, 1, 2, 2, 2, 2, 2, 2, 5, 6], [0, 1, 2, 2, 2, 3, 3, 3, 5, 6], [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from refpos.backend import get_xp
from refpos.validation import check_choice, check_float, check_int

#: families whose get_rope_index this module reproduces
MM_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "glm4v")
#: families that place videos frame by frame
_FRAME_BY_FRAME = ("qwen3_vl", "glm4v")
#: the family that spaces video frames by tokens_per_second (the others do not read it)
TIMED_VIDEO_FAMILY = "qwen2_5_vl"


@dataclass(frozen=True)
class Text:
    """``length`` text tokens (``length ≥ 1``)."""

    length: int

    def __post_init__(self) -> None:
        check_int("Text.length", self.length, minimum=1)


def _check_grid(kind: str, grid: Any) -> tuple[int, int, int]:
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence) or len(grid) != 3:
        raise TypeError(f"{kind}.grid must be (t, h, w): three ints, patches before the spatial merge; got {grid!r}")
    for axis, value in zip("thw", grid, strict=True):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{kind}.grid {axis} must be an int, got {type(value).__name__} {value!r}")
        if value < 1:
            raise ValueError(f"{kind}.grid {axis} must be >= 1 (a grid size), got {value}")
    return tuple(int(v) for v in grid)  # type: ignore[return-value]


@dataclass(frozen=True)
class Image:
    """An image: its patch grid ``(t, h, w)`` as the vision tower sees it (``image_grid_thw``)."""

    grid: tuple[int, int, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", _check_grid("Image", self.grid))


@dataclass(frozen=True)
class Video:
    """A video: its patch grid ``(t, h, w)`` (``video_grid_thw``) and the seconds between two temporal
    patches (Qwen2.5-VL's ``second_per_grid_ts``; only Qwen2.5-VL reads it, default 1)."""

    grid: tuple[int, int, int]
    seconds_per_grid: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", _check_grid("Video", self.grid))
        object.__setattr__(self, "seconds_per_grid",
                           check_float("Video.seconds_per_grid", self.seconds_per_grid, minimum=0.0))


Span = Text | Image | Video


def _vision_ids(start: int, grid: tuple[int, int, int], merge: int, spacing: float) -> np.ndarray:
    r"""``(3, g_t·(g_h/k)·(g_w/k))`` ids of one grid: :math:`(s + \lfloor i_t\Delta\rfloor, s + i_h, s + i_w)`."""
    g_t, g_h, g_w = grid[0], grid[1] // merge, grid[2] // merge
    temporal = np.floor(np.arange(g_t, dtype=np.float64) * spacing).astype(np.int64)  # ⌊i_t Δ⌋, float64
    t_ids, h_ids, w_ids = np.meshgrid(temporal, np.arange(g_h), np.arange(g_w), indexing="ij")  # (g_t, g_h, g_w)
    return np.stack([t_ids.ravel(), h_ids.ravel(), w_ids.ravel()]) + start  # (3, cells), row-major t, h, w


def mm_position_ids(
    spans: Sequence[Span],
    *,
    family: str,
    spatial_merge_size: int = 2,
    tokens_per_second: float | None = None,
    xp: ModuleType | None = None,
) -> Any:
    """The ``(3, T)`` M-RoPE position ids (rows t, h, w) of a sequence of spans.

    Parameters
    ----------
    spans : sequence of :class:`Text`, :class:`Image`, :class:`Video`
    family : {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "glm4v"}
        Whose ``get_rope_index`` to follow (the module docstring lists the differences).
    spatial_merge_size : int
        ``k`` of the vision config (2 in every released model); grid ``h`` and ``w`` must be multiples.
    tokens_per_second : float, optional
        Qwen2.5-VL's ``vision_config.tokens_per_second`` (2 in the released models); required for a
        Qwen2.5-VL video, rejected for the other families (they do not read it).
    xp : namespace, optional
        Namespace of the result (default: the current backend).

    Returns
    -------
    int64 array ``(3, T)``, ``T`` = text tokens + one per merged vision cell.
    """
    family = check_choice("family", family, MM_FAMILIES)
    merge = check_int("spatial_merge_size", spatial_merge_size, minimum=1)
    if tokens_per_second is not None:
        if family != TIMED_VIDEO_FAMILY:
            raise ValueError(f"tokens_per_second is read by family 'qwen2_5_vl' only, not {family!r}")
        tokens_per_second = check_float("tokens_per_second", tokens_per_second, positive=True)
    if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence) or not spans:
        raise TypeError("spans must be a non-empty list of Text, Image and Video spans")
    start, pieces = 0, []
    for index, span in enumerate(spans):
        if isinstance(span, Text):
            pieces.append(np.broadcast_to(np.arange(span.length) + start, (3, span.length)))  # (3, n)
            start += span.length
            continue
        if not isinstance(span, (Image, Video)):
            raise TypeError(f"spans[{index}] must be Text, Image or Video, got {type(span).__name__}")
        g_t, g_h, g_w = span.grid
        if g_h % merge or g_w % merge:
            raise ValueError(f"spans[{index}]: grid (h, w) = ({g_h}, {g_w}) is not a multiple of "
                             f"spatial_merge_size={merge} (the vision tower merges {merge} × {merge} patches)")
        spacing = 1.0
        if isinstance(span, Video) and family == TIMED_VIDEO_FAMILY:
            if tokens_per_second is None:
                raise ValueError("a qwen2_5_vl video needs tokens_per_second (vision_config.tokens_per_second)")
            spacing = tokens_per_second * span.seconds_per_grid  # Δ between temporal patches
        frames = [(1, g_h, g_w)] * g_t if isinstance(span, Video) and family in _FRAME_BY_FRAME else [span.grid]
        for grid in frames:
            pieces.append(_vision_ids(start, grid, merge, spacing))
            start += max(g_h, g_w) // merge  # the temporal extent does not advance the start
    ids = np.concatenate(pieces, axis=1)  # (3, T)
    return get_xp(xp).asarray(ids.astype(np.int64))


def rope_delta(position_ids: Any) -> int:
    """``max(ids) + 1 − T``: what decoding adds to the token index to continue the sequence (HF ``rope_deltas``)."""
    ids = np.asarray(position_ids)
    if ids.ndim != 2 or ids.shape[0] != 3 or ids.shape[1] == 0:
        raise ValueError(f"position_ids must have shape (3, T) with T >= 1, got {ids.shape}")
    return int(ids.max()) + 1 - int(ids.shape[1])


def token_count(spans: Sequence[Span], *, spatial_merge_size: int = 2) -> int:
    """Tokens the spans occupy: text lengths plus ``g_t·g_h·g_w / k²`` per image or video."""
    merge = check_int("spatial_merge_size", spatial_merge_size, minimum=1)
    return sum(s.length if isinstance(s, Text) else math.prod(s.grid) // merge**2 for s in spans)
