r"""TMRoPE: the position ids of the Qwen2.5-Omni and Qwen3-Omni thinkers (text, images, videos, audio).

:func:`refpos.models.mm_positions.mm_position_ids` calls :func:`tmrope_pieces` for these two families
(``style="tmrope"`` in :data:`refpos.models.mm_positions.MM_RULES`). Every piece of ids starts at
:math:`s = 1 + \max` (the ids of the piece before it; 0 for the first piece):

* text and audio of ``n`` tokens: :math:`s, s+1, \dots, s+n-1` on all three rows (an audio token is a fixed
  slice of time, so audio counts time by itself);
* an image or video grid :math:`(g_t, g_h, g_w)`, spatial merge ``k``: the cell :math:`(i_t, i_h, i_w)` of
  the LLM grid :math:`(g_t, g_h/k, g_w/k)` sits at :math:`(s + \tau_{i_t},\ s + i_h,\ s + i_w)` with the time

  .. math:: \tau_i = i \cdot \Delta, \qquad \Delta = \text{seconds\_per\_grid} \times
            \text{position\_id\_per\_seconds}\ \text{(video)}, \quad \Delta = \text{position\_id\_per\_seconds}
            \ \text{(image)} ;

  Qwen2.5-Omni keeps :math:`\lfloor \tau_i \rfloor`; Qwen3-Omni keeps :math:`\tau_i` as it is, so a
  fractional time gives fractional ids there, which refpos (integer positions) refuses, naming the
  setting.
* a video with its audio track (``Video(..., audio_tokens=n)``, ``use_audio_in_video``): the two streams
  start together after the start markers, video at :math:`(s' + \tau_{i_t}, s' + i_h, s' + i_w)`, audio at
  :math:`s' + 0, 1, \dots, n - 1`, and are interleaved by time:

  - **Qwen2.5-Omni** (:func:`chunk_bounds`): each stream is cut into chunks of
    :math:`c = \lfloor \text{position\_id\_per\_seconds} \times \text{seconds\_per\_chunk} \rfloor` time
    units; the tokens go video chunk 0, audio chunk 0, video chunk 1, audio chunk 1, … . The two start
    markers share one id :math:`s` (:math:`s' = s + 1`), and so do the two end markers.
  - **Qwen3-Omni**: the two streams are merged token by token by time, a video token first when the times
    are equal. The markers count up like text (:math:`s, s + 1`; :math:`s' = s + 2`).

  The end markers start after the largest id of the *last piece*: the last chunk (Qwen2.5-Omni) or the run
  of one stream that ends the merge (Qwen3-Omni), which need not hold the largest id of the video.

transformers computes the times in float32 (``arange(g_t) × seconds_per_grid × position_id_per_seconds``);
refpos forms :math:`i \cdot \Delta` in float64, so the two can differ where a time lies within float32
rounding of an integer (e.g. ``seconds_per_grid = 0.2`` at 25 ids per second: transformers places
Qwen3-Omni's fourth temporal patch at 15.000001).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from refpos.models.mm_spans import Audio, IdRule, Image, Text, Video, cell_times, text_ids, vision_ids
from refpos.validation import MAX_EXACT_POSITION, check_choice, check_int


def chunk_bounds(times: np.ndarray, per_chunk: int) -> list[tuple[int, int]]:
    r"""``(start, end)`` index ranges that cut a stream's times (nondecreasing, from 0) into chunks.

    The chunk counter ``c`` starts at 1; a token whose time reaches :math:`c \times \text{per\_chunk}` ends
    the current chunk before it and advances ``c`` by one (one cut per token, so a jump over several chunk
    lengths cuts at several consecutive tokens): transformers' ``get_chunked_index``.
    """
    bounds, start, counter = [], 0, 1
    for index, time in enumerate(times.tolist()):
        if time >= counter * per_chunk:
            bounds.append((start, index))
            start, counter = index, counter + 1
    bounds.append((start, len(times)))
    return bounds


def _times(n_t: int, delta: float, rule: IdRule, index: int, what: str) -> np.ndarray:
    r""":math:`\tau_i = i\,\Delta` for ``i < n_t``: floored (Qwen2.5-Omni) or required integral (Qwen3-Omni)."""
    times = cell_times(n_t, delta, index, what)  # τ_i = i Δ, float64
    assert rule.tmrope is not None
    if rule.tmrope.rounding == "floor":
        return np.floor(times).astype(np.int64)
    if not np.array_equal(times, np.floor(times)):
        raise ValueError(f"spans[{index}]: {what} gives fractional times {times[times != np.floor(times)][:3].tolist()}"
                         f" ({rule.family} keeps them, as fractional position ids); refpos positions are integers: "
                         f"choose seconds_per_grid and position_id_per_seconds whose product is an integer")
    return times.astype(np.int64)


def _grid_times(span: Image | Video, settings: dict[str, Any], rule: IdRule, index: int) -> np.ndarray:
    g_t = span.grid[0]
    if g_t == 1:
        return np.zeros(1, dtype=np.int64)
    per_second = settings["position_id_per_seconds"]
    if isinstance(span, Video):
        return _times(g_t, span.seconds_per_grid * per_second, rule, index,
                      f"seconds_per_grid={span.seconds_per_grid} × position_id_per_seconds={per_second}")
    return _times(g_t, per_second, rule, index, f"position_id_per_seconds={per_second}")


def _after(pieces: list[np.ndarray]) -> int:
    """``1 + max`` of the last piece's ids; 0 before the first piece."""
    return int(pieces[-1].max()) + 1 if pieces else 0


def _video_with_audio(pieces: list[np.ndarray], span: Video, rule: IdRule, merge: int,
                      settings: dict[str, Any], times: np.ndarray) -> None:
    """Append the markers and the interleaved streams of a video with its audio track (module docstring)."""
    assert rule.tmrope is not None
    start = _after(pieces)
    shared = rule.tmrope.shared_markers  # Qwen2.5-Omni: both start markers at one id; Qwen3-Omni: consecutive
    pieces.append(np.full((3, 2), start, dtype=np.int64) if shared else text_ids(start, 2))
    first = start + (1 if shared else 2)  # s'
    video = vision_ids(first, span.grid, merge, times)  # (3, cells)
    audio = text_ids(first, span.audio_tokens or 0)  # (3, n)
    if rule.tmrope.interleave == "chunks":
        per_chunk_time = settings["position_id_per_seconds"] * settings["seconds_per_chunk"]
        if not per_chunk_time <= MAX_EXACT_POSITION:  # inf, or beyond any id
            raise ValueError(f"position_id_per_seconds × seconds_per_chunk = {per_chunk_time!r} time units per chunk: "
                             "must be finite and at most 2**53")
        per_chunk = int(per_chunk_time)
        if per_chunk < 1:
            raise ValueError(f"position_id_per_seconds × seconds_per_chunk = {per_chunk} time units per chunk: "
                             f"must be >= 1")
        video_chunks = chunk_bounds(video[0] - first, per_chunk)
        audio_chunks = chunk_bounds(audio[0] - first, per_chunk)
        for j in range(max(len(video_chunks), len(audio_chunks))):  # video chunk j, then audio chunk j
            for stream, chunks in ((video, video_chunks), (audio, audio_chunks)):
                if j < len(chunks):
                    last = stream[:, chunks[j][0]:chunks[j][1]]
                    pieces.append(last)
    else:
        merged = np.concatenate([video, audio], axis=1)  # (3, cells + n)
        order = np.argsort(merged[0], kind="stable")  # by time; a video token first on a tie
        is_audio = order >= video.shape[1]
        run = len(order)
        while run > 0 and is_audio[run - 1] == is_audio[-1]:
            run -= 1  # order[run:]: the run of one stream that ends the merge
        pieces.append(merged[:, order])
        last = merged[:, order[run:]]
    end = int(last.max()) + 1  # after the last piece, not necessarily after the largest id
    pieces.append(np.full((3, 2), end, dtype=np.int64) if shared else text_ids(end, 2))


def tmrope_pieces(spans: Sequence[Any], rule: IdRule, merge: int, settings: dict[str, Any]) -> list[np.ndarray]:
    """The ``(3, n)`` pieces of ids of an Omni family's spans, in sequence order (module docstring).

    An image, a video or an audio span must have text on both sides (its start and end markers) unless it is a
    video with its audio track, which holds its markers.
    """
    pieces: list[np.ndarray] = []
    for index, span in enumerate(spans):
        if isinstance(span, Text):
            pieces.append(text_ids(_after(pieces), span.length))
            continue
        if not (isinstance(span, Video) and span.audio_tokens is not None):
            for side, neighbour in (("before", index - 1), ("after", index + 1)):
                if not 0 <= neighbour < len(spans) or not isinstance(spans[neighbour], Text):
                    raise ValueError(f"spans[{index}]: a {rule.family} {type(span).__name__.lower()} needs text "
                                     f"{side} it (its {'start' if side == 'before' else 'end'} marker)")
        if isinstance(span, Audio):
            pieces.append(text_ids(_after(pieces), span.tokens))
            continue
        times = _grid_times(span, settings, rule, index)
        if isinstance(span, Video) and span.audio_tokens is not None:
            _video_with_audio(pieces, span, rule, merge, settings, times)
        else:
            assert isinstance(span, (Image, Video))
            pieces.append(vision_ids(_after(pieces), span.grid, merge, times))
    return pieces


#: family -> its audio encoder's length rule (audio_token_count): a convolution and a pooling, or windows
AUDIO_ENCODERS = {"qwen2_5_omni": "conv_pool", "qwen3_omni_moe": "windowed"}


def audio_token_count(frames: int, *, family: str, n_window: int = 50) -> int:
    r"""Audio tokens an Omni thinker's audio encoder makes of ``frames`` mel frames (``audio_seqlens``).

    Qwen2.5-Omni: a stride-2 convolution then a pooling of 2: :math:`n = \lfloor (\lfloor (L-1)/2 \rfloor + 1
    - 2) / 2 \rfloor + 1`. Qwen3-Omni: windows of :math:`2\,w` frames (``audio_config.n_window`` ``w``), 13
    tokens per full window and three stride-2 steps over the rest :math:`r = L \bmod 2w`:
    :math:`f = \lfloor (r-1)/2 \rfloor + 1`, :math:`n = \lfloor (\lfloor (f-1)/2 \rfloor + 1 - 1)/2 \rfloor + 1
    + 13 \lfloor L / 2w \rfloor` (``_get_feat_extract_output_lengths``).
    """
    encoder = AUDIO_ENCODERS[check_choice("family", family, tuple(AUDIO_ENCODERS))]
    frames = check_int("frames", frames, minimum=1)
    if encoder == "conv_pool":
        return ((frames - 1) // 2 + 1 - 2) // 2 + 1
    window = 2 * check_int("n_window", n_window, minimum=1)
    rest = frames % window
    after_first = (rest - 1) // 2 + 1
    return ((after_first - 1) // 2 + 1 - 1) // 2 + 1 + (frames // window) * 13
