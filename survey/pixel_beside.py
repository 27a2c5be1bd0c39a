"""What a forward on pixel, audio or feature inputs is fed beside its main input (:mod:`survey.pixels`): one
:class:`Beside` record per input, in :data:`BESIDE`, each saying why a forward needs it and making it for one try
(:class:`Try`: the forward's parameters, the config, the main input's shape, the size and dtype).

Every record feeds only a forward that takes what it makes (by name, or, for the resampling switch, a forward that
passes its keyword arguments on to a module that takes it): a forward that takes none of them is fed its main input
alone. Everything fed is seeded or constant, so two runs of the same try feed the same tensors.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from survey.pixel_inputs import frames_first, id_grid, image_grid_inputs, patch_ids, series_inputs, trajectory_inputs
from survey.pixel_records import (
    MASKS,
    MERGE_INPUTS,
    PADDING_MASKS,
    ROW_INPUTS,
    TILE_INPUTS,
    grid_input,
    patch_ids_input,
)
from survey.pixel_shapes import shaped_inputs
from survey.seeded import seeded_normal, seeded_uniform

#: the waveform samples per feature frame assumed where a forward takes chunk lengths in samples (16 kHz, 10 ms)
HOP = 160
#: the waveform samples per frame of a codec's semantic features (50 frames a second at 16 kHz)
CODEC_HOP = 320
#: the model types whose forward on pixel values reads a text beside them and fails without it (TVP: the text's
#: embedding is computed whatever the frames), fed :data:`BESIDE`'s ``input_ids``
TEXT_BESIDE = ("tvp",)
#: the encoder output a query transformer's cross-attention layers read (BLIP-2's Q-Former), fed beside its query
#: embeddings ``(1, rows, width)``: seeded, at the config's ``encoder_hidden_size``
ENCODER_ROWS = 8


@dataclass(frozen=True)
class Try:
    """One shape tried: the forward's parameters, the config, the main input's name and shape, the size
    (``native`` or ``resampled``) and dtype, the merge size, the grid of flattened patches where the forward takes
    one (:func:`survey.pixel_inputs.patch_grid`), and whether the forward takes the resampling switch."""

    params: Mapping[str, inspect.Parameter]
    config: Any
    input_name: str
    shape: tuple[int, ...]
    size: str = "native"
    dtype: Any = None
    merge: int = 1
    grid: tuple[int, ...] | None = None
    resample_flag: bool = False


@dataclass(frozen=True)
class Beside:
    """An input fed beside the main one: why a forward needs it, and ``feeds(try, fed so far)``, the keyword
    arguments it adds (``{}`` where the forward does not take them)."""

    why: str
    feeds: Callable[[Try, dict[str, Any]], dict[str, Any]]


def _ids(shape: tuple[int, ...], value: int) -> Any:
    import torch

    return torch.full(shape, value, dtype=torch.long)


def torch_tensor(values: Any) -> Any:
    import torch

    return torch.tensor(values, dtype=torch.long)


def _zeros(shape: tuple[int, ...], dtype: Any) -> Any:
    import torch

    return torch.zeros(shape, dtype=dtype)


def _where_taken(name: str, make: Callable[[Try], Any], required: bool = False, not_main: bool = False
                 ) -> Callable[[Try, dict[str, Any]], dict[str, Any]]:
    """``feeds`` of an input ``name`` made by ``make(try)`` where the forward takes it (and, with ``required``,
    has no default for it; with ``not_main``, takes it beside another main input)."""
    def feeds(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
        param = at.params.get(name)
        if param is None or (required and param.default is not inspect.Parameter.empty) or (
                not_main and name == at.input_name):
            return {}
        return {name: make(at)}
    return feeds


def _grid(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
    """Flattened patches' grid, and the merge size where the forward takes one (VideoLLaMA 3's)."""
    import torch

    name = grid_input(at.params)
    if name is None or at.grid is None:
        return {}
    return {name: torch.tensor([list(at.grid)], dtype=torch.long),
            **{merge: torch.tensor([at.merge], dtype=torch.long) for merge in MERGE_INPUTS if merge in at.params}}


def _patch_ids(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
    """Each patch's ``(x, y)`` id where the forward takes them (Gemma 4's tower): the grid of the try's size in
    raster order, the patches past it padding at ``(-1, -1)`` (:func:`survey.pixel_inputs.patch_ids`)."""
    import torch

    name = patch_ids_input(at.params)
    if name is None or len(at.shape) != 3:
        return {}
    h, w, padding = id_grid(at.config, at.size)
    if h * w + padding != at.shape[1]:
        return {}
    return {name: torch.from_numpy(patch_ids(h, w, padding))}


def masks(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
    """The masks fed beside an input of ``at.shape``: every frame (or pixel) real — ones for each of :data:`MASKS`
    the forward takes and each mask it requires, all False for a mask of padding (:data:`PADDING_MASKS`) — over
    the input's rows (:data:`ROW_INPUTS`, and features laid out frames first at a width only
    :func:`survey.pixel_sizes.extra_feature_widths` gives) or its last axis; a mask named for another input
    ``fed`` beside it (``input_features_mask`` beside a codec's waveform) over that input's rows."""
    import torch

    shape = at.shape
    frames_rows = at.input_name == "input_features" and frames_first(at.config, shape)
    rows = shape[1] if (at.input_name in ROW_INPUTS or frames_rows) and len(shape) == 3 else shape[-1]
    required = {name for name, param in at.params.items()
                if name.endswith("mask") and param.default is inspect.Parameter.empty}
    out = {}
    for name in sorted(required | {name for name in MASKS if name in at.params}):
        if name in fed:  # fed by its own record (a tiled tower's aspect_ratio_mask)
            continue
        owner = fed.get(name.removesuffix("_mask"))
        length = owner.shape[1] if owner is not None and name.removesuffix("_mask") != at.input_name else rows
        out[name] = torch.zeros((shape[0], length), dtype=torch.bool) if name in PADDING_MASKS else torch.ones(
            (shape[0], length), dtype=torch.long)
    return out


def _query_encoder(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
    if "encoder_hidden_states" not in at.params or at.input_name != "query_embeds":
        return {}
    return {"encoder_hidden_states": seeded_normal(9, 1, ENCODER_ROWS, at.config.encoder_hidden_size)}


def _prompts(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
    """A promptable segmenter's prompts (:data:`~survey.pixel_records.PROMPTS`), in pixels of the image fed: three
    seeded whole-pixel points ``(1, 1, 3, 2)`` and one box ``(1, 1, 4)`` (its corners ordered), where the forward
    takes them beside an image; the box fed too keeps a lone point's padding out of the prompts."""
    import torch

    if "input_points" not in at.params or at.input_name != "pixel_values" or len(at.shape) != 4:
        return {}
    size = torch.tensor([at.shape[-1], at.shape[-2]], dtype=torch.float64)  # (W, H): pixels are (x, y)
    points = torch.floor(seeded_uniform(11, 1, 1, 3, 2).double() * size)
    corners = torch.floor(seeded_uniform(12, 2, 2).double() * size).sort(dim=0).values  # (x0, y0) <= (x1, y1)
    out = {"input_points": points.to(at.dtype)}
    if "input_boxes" in at.params:
        out["input_boxes"] = corners.reshape(1, 1, 4).to(at.dtype)
    return out


def _tiles(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
    """A tiled tower's aspect-ratio ids and its mask of real tiles (:data:`~survey.pixel_records.TILE_INPUTS`),
    where the forward takes them beside tiles ``(B, images, tiles, C, H, W)``: every image the last id of the
    config's aspect ratios (:func:`aspect_ratio_id`), every tile real."""
    import torch

    name, mask = TILE_INPUTS
    if name not in at.params or len(at.shape) != 6:
        return {}
    out = {name: _ids(at.shape[:2], aspect_ratio_id(at.config))}
    if mask in at.params:
        out[mask] = torch.ones(at.shape[:3], dtype=torch.long)
    return out


def aspect_ratio_id(config: Any) -> int:
    """The id fed as every image's aspect ratio: the config's last (ids are 1 … the number of
    ``supported_aspect_ratios``; 0 is the padding image), 1 where the config lists none."""
    ratios = getattr(config, "supported_aspect_ratios", None)
    return len(ratios) if isinstance(ratios, (list, tuple)) and ratios else 1


def _resampling(at: Try, fed: dict[str, Any]) -> dict[str, Any]:
    return {"interpolate_pos_encoding": True} if at.size == "resampled" and at.resample_flag else {}


#: every input fed beside the main one, by the name it feeds (the first, where it feeds several), in the order fed
#: (a mask sized by another input comes after it)
BESIDE: dict[str, Beside] = {
    "grid_thw": Beside("a vision tower fed flattened patches takes their grid (Qwen2-VL's and the towers after it)",
                       _grid),
    "pixel_position_ids": Beside("a tower fed patches takes each one's (x, y) id (Gemma 4's; (-1, -1) marks the "
                                 "padding patches of the second size)", _patch_ids),
    "decoder_input_ids": Beside("an encoder-decoder's first decoder ids (ids 2 … 5: none fairseq's padding id 1)",
                                _where_taken("decoder_input_ids", lambda at: _ids((1, 4), 2) + _ids(
                                    (1, 4), 0).new_tensor([0, 1, 2, 3]))),
    "past_values_padding": Beside("a time series' padding (none: zeros)", _where_taken(
        "past_values_padding", lambda at: _ids(at.shape[:2], 0).to(at.dtype))),
    "freq": Beside("a time series' frequency class (0)", _where_taken("freq", lambda at: _ids((at.shape[0], 1), 0))),
    "feature_lens": Beside("the frame count of a single clip fed as (mel bins, frames)", _where_taken(
        "feature_lens", lambda at: _ids((1,), at.shape[-1]))),
    "input_ids": Beside(f"a video grounding model's query text beside its frames ({', '.join(TEXT_BESIDE)}: ids "
                        f"2 … 5, none a padding id)", lambda at, fed: _where_taken("input_ids", lambda at: _ids(
                            (at.shape[0], 4), 2) + _ids((1, 4), 0).new_tensor([0, 1, 2, 3]), not_main=True)(at, fed)
                        if getattr(at.config, "model_type", None) in TEXT_BESIDE else {}),
    "prompt_pixel_values": Beside("SegGPT's prompt: an image of the input's shape (zeros: an empty prompt)",
                                  _where_taken("prompt_pixel_values", lambda at: _zeros(at.shape, at.dtype))),
    "prompt_masks": Beside("SegGPT's prompt mask (zeros)", _where_taken(
        "prompt_masks", lambda at: _zeros(at.shape, at.dtype))),
    "num_patches": Beside("DeepSeek-OCR-2's encoder: its first half of rows are image patches (the rest its "
                          "queries)", _where_taken("num_patches", lambda at: at.shape[1] // 2)),
    "chunk_sample_lengths": Beside(f"Dots3's audio encoder: each chunk's waveform samples (its frames at a hop of "
                                   f"{HOP} samples)", _where_taken(
                                       "chunk_sample_lengths", lambda at: _ids((at.shape[0],), HOP * at.shape[-1]))),
    "task_inputs": Beside("OneFormer's task tokens (task_seq_len ids; 1, no pad id of its tokenizer)", _where_taken(
        "task_inputs", lambda at: _ids((at.shape[0], at.config.task_seq_len), 1), required=True, not_main=True)),
    "input_features": Beside(
        f"a codec's semantic features beside its waveform (X-Codec 2's and NeuCodec's wav2vec2-BERT: one frame of "
        f"stacked features per {CODEC_HOP} samples)", _where_taken("input_features", lambda at: seeded_normal(
            10, at.shape[0], at.shape[-1] // CODEC_HOP,
            at.config.semantic_model_config.feature_projection_input_dim), required=True, not_main=True)),
    "aspect_ratio_ids": Beside("a tiled tower's aspect-ratio id per image and its mask of real tiles (Llama 3.2 "
                               "Vision's)", _tiles),
    "image_sizes": Beside("an image tokenizer's (H, W) of each image fed (Emu3's VQ-VAE: required)", _where_taken(
        "image_sizes", lambda at: torch_tensor([list(at.shape[-2:])] * at.shape[0]), required=True, not_main=True)),
    "masks": Beside("every frame or pixel real: the masks a forward takes or requires", masks),
    "spatial_shapes": Beside("a tower fed patches takes its image's (h, w) patch grid, its masks marking the padding "
                             "patches after them (SigLIP 2's NaFlex tower)", lambda at, fed: shaped_inputs(
                                 at.params, at.grid, at.shape) if at.input_name == "pixel_values" else {}),
    "target_sizes": Beside("a NaViT-style tower's per-image patch grid (MiniCPM's)", lambda at, fed: image_grid_inputs(
        at.params, at.config, at.shape)),
    "past_time_features": Beside("a lagged forecaster's time features and horizon", lambda at, fed: series_inputs(
        at.params, at.config, at.shape)),
    "returns_to_go": Beside("a Decision Transformer's actions, returns to go and timesteps",
                            lambda at, fed: trajectory_inputs(at.params, at.config, at.shape)),
    "encoder_hidden_states": Beside(f"a query transformer's encoder output ({ENCODER_ROWS} seeded rows: BLIP-2's "
                                    "Q-Former)", _query_encoder),
    "input_points": Beside("a promptable segmenter (SAM) encodes its prompts' positions only where it is fed some: "
                           "seeded points and a box in pixels of the image", _prompts),
    "interpolate_pos_encoding": Beside("the resampled size asks the model to resample its position encoding",
                                       _resampling),
}


def beside(at: Try) -> dict[str, Any]:
    """Every input of :data:`BESIDE` a forward is fed beside its main input at one try."""
    fed: dict[str, Any] = {}
    for record in BESIDE.values():
        fed |= record.feeds(at, fed)
    return fed
