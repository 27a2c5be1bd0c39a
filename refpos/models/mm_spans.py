"""The spans of a multimodal token sequence (text, image, video, audio), the ids of one piece, and the record of
a family's placing rule.

:func:`refpos.models.mm_positions.mm_position_ids` places a list of these spans
(docs/mrope.md#position-ids-of-a-multimodal-sequence).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.bounds import Bound
from refpos.validation import MAX_EXACT_POSITION, check_float, shown_bytes

#: the most tokens a layout may hold, 4,194,304: well above the context of released M-RoPE models, and its ``(3, T)``
#: int64 ids take 100 MB; a count, a grid or a layout beyond it is refused before anything is allocated
MAX_TOKENS = 2**22
#: the most pieces of ids a layout is built from (a span each, a frame each of a video placed frame by frame)
MAX_PIECES = 2**16
#: a token count (text, audio) or a grid's patch count along one axis
TOKENS = Bound(int, minimum=1, maximum=MAX_TOKENS, why="the most tokens a layout holds")


def check_token_total(total: int, what: str) -> int:
    """``total`` tokens if at most :data:`MAX_TOKENS`; else a ``ValueError`` naming ``what`` and the memory the ids
    would take (``24·T`` bytes of ``(3, T)`` int64), before any is allocated."""
    if total > MAX_TOKENS:
        raise ValueError(f"{what} hold {total} tokens, more than the {MAX_TOKENS} (2**22) a layout may hold "
                         f"(about {shown_bytes(24 * total)} of (3, T) int64 ids)")
    return total


def cell_times(n_t: int, delta: float, index: int, what: str) -> np.ndarray:
    r"""The float64 times :math:`\tau_i = i\,\Delta` of ``n_t`` temporal cells, once the largest,
    :math:`(n_t - 1)\,\Delta`, is known to be finite and at most 2**53: a spacing that overflows (``1e308``
    seconds between frames) is refused by ``what`` (the settings whose product ``Δ`` is) instead of cast to
    ``−2**63``."""
    largest = (n_t - 1) * delta if n_t > 1 else 0.0
    if not (math.isfinite(delta) and largest <= MAX_EXACT_POSITION):
        raise ValueError(f"spans[{index}]: {what} = {delta!r} places temporal patch {n_t - 1} at {largest!r}: position "
                         "ids must be finite and at most 2**53 (float64 angles p·ω are exact only up to there)")
    return np.arange(n_t, dtype=np.float64) * delta


@dataclass(frozen=True)
class TimeRule:
    """How an Omni family places time (:mod:`refpos.models.mm_omni`): ``rounding`` of a frame's time
    (``"floor"``, or ``"exact"``: a fractional time is kept, which refpos refuses), how a video interleaves with
    its audio track (``"chunks"`` or ``"by_time"``, token by token) and whether its two start markers, and its
    two end markers, share one id (``shared_markers``) or count up like text."""

    rounding: str
    interleave: str
    shared_markers: bool


@dataclass(frozen=True)
class IdRule:
    """How one family's ``get_rope_index`` places the spans (one record per family of :data:`MM_RULES`).

    ``tmrope``: ``None`` for a running start, else how the family places time (after the largest id; audio;
    :mod:`refpos.models.mm_omni`). ``frames``: ``"together"`` or ``"one_by_one"`` (a video as one-frame grids).
    ``spacing``: the keyword that spaces a video's temporal patches (``None``: 1 apart). ``temporal_merge``:
    a video's temporal patches are merged ``temporal_merge_size`` at a time. ``reads``: the keyword arguments
    of :func:`mm_position_ids` the family reads.
    """

    family: str
    source: str
    frames: str = "together"
    spacing: str | None = None
    temporal_merge: bool = False
    reads: tuple[str, ...] = ()
    tmrope: TimeRule | None = None


@dataclass(frozen=True)
class Text:
    """``length`` text tokens (``length ≥ 1``); markers such as ``<|vision_start|>`` are text."""

    length: int

    def __post_init__(self) -> None:
        TOKENS.check("Text.length", self.length)


def _check_grid(kind: str, grid: Any) -> tuple[int, int, int]:
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence) or len(grid) != 3:
        raise TypeError(f"{kind}.grid must be (t, h, w): three ints, patches before the spatial merge; got {grid!r}")
    for axis, value in zip("thw", grid, strict=True):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{kind}.grid {axis} must be an int, got {type(value).__name__} {value!r}")
        TOKENS.check(f"{kind}.grid {axis}", value)
    return tuple(int(v) for v in grid)  # type: ignore[return-value]


@dataclass(frozen=True)
class Image:
    """An image: its patch grid ``(t, h, w)`` as the vision tower sees it (``image_grid_thw``)."""

    grid: tuple[int, int, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", _check_grid("Image", self.grid))


@dataclass(frozen=True)
class Video:
    """A video: its patch grid ``(t, h, w)`` (``video_grid_thw``), the seconds between two temporal patches
    (``second_per_grid_ts`` / ``second_per_grids``; read by Qwen2.5-VL and the Omni families, default 1) and, for
    a video with its audio track (Omni's ``use_audio_in_video``), ``audio_tokens``: the audio encoder's token
    count. Such a video occupies its video and audio tokens plus four markers (start of vision and of audio
    before, end of audio and of vision after)."""

    grid: tuple[int, int, int]
    seconds_per_grid: float = 1.0
    audio_tokens: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", _check_grid("Video", self.grid))
        object.__setattr__(self, "seconds_per_grid",
                           check_float("Video.seconds_per_grid", self.seconds_per_grid, minimum=0.0))
        if self.audio_tokens is not None:
            TOKENS.check("Video.audio_tokens", self.audio_tokens)


@dataclass(frozen=True)
class Audio:
    """``tokens`` audio tokens, as the audio encoder outputs them (:func:`refpos.models.mm_omni.audio_token_count`
    from the feature frames); Omni families only."""

    tokens: int

    def __post_init__(self) -> None:
        TOKENS.check("Audio.tokens", self.tokens)


Span = Text | Image | Video | Audio


def vision_ids(start: int, grid: tuple[int, int, int], merge: int, times: np.ndarray) -> np.ndarray:
    r"""``(3, n_t·(g_h/k)·(g_w/k))`` ids of one grid: :math:`(s + \text{time}_{i_t}, s + i_h, s + i_w)`, row-major.

    ``times`` holds the integer time of each temporal cell (``n_t`` of them).
    """
    g_h, g_w = grid[1] // merge, grid[2] // merge
    t_ids, h_ids, w_ids = np.meshgrid(times, np.arange(g_h), np.arange(g_w), indexing="ij")  # (n_t, g_h, g_w)
    return np.stack([t_ids.ravel(), h_ids.ravel(), w_ids.ravel()]).astype(np.int64) + start  # (3, cells)


def text_ids(start: int, length: int) -> np.ndarray:
    """``(3, length)`` ids ``start, start + 1, …`` on all three rows."""
    return np.broadcast_to(np.arange(length, dtype=np.int64) + start, (3, length))


