"""The input shapes a vision, audio or feature model is fed (:mod:`survey.pixels`): its native size, and a size that
forces its position encoding to be resampled, each as a list of shapes tried in order (the first that runs is kept).

Read from the model's config, never from its type (but for the few rules :mod:`survey.pixel_sizes` keys by it):

* ``pixel_values``: ``(1, C, H, W)`` at the config's ``image_size`` (an int or a pair, else ``max_img_size``, the
  size TVP's visual prompter pads are learned for; half its height where a prompt image is stacked above it,
  :func:`survey.pixel_sizes.prompt_halved`; ``num_channels``, 3 where unstated), then a video ``(1, T, C, H, W)`` at
  ``num_frames`` (at most :data:`MAX_FRAMES`), then its frames as a batch ``(T, C, H, W)`` (X-CLIP's); the
  resampling size adds two patches to the height and four to the width (a grid that grows unevenly: axes swapped
  show), then, last, changes the clip's height alone (TimeSformer's layers read its width from the config; Hiera's
  a whole mask unit's pixels, :func:`survey.pixel_sizes.unit_step`), a model without an image size (a CNN) is fed
  64 and 96 pixels, or the sizes its config states its forward needs (:func:`survey.pixel_sizes.stated_sizes`: a
  detector's anchors for its queries), then, where its vision tower or backbone states one (:data:`NESTED_CONFIGS`),
  that tower's size; where it states ``max_num_tiles`` (Llama 3.2 Vision's tower), one image of that many tiles first;
* ``input_features``: ``(1, mel bins, frames)`` at ``2 · max_source_positions`` frames where the config states
  it (Whisper's encoder takes exactly that many), else whole chunks of ``2 · n_window`` frames where it states
  that (Qwen3-ASR's encoder), else 64 and 96 frames, then ``(1, frames, features)``, then
  ``(mel bins, frames)`` (Qwen-Omni's audio encoder takes its batch's frames concatenated, with their counts),
  for each width the config states (:data:`FEATURE_WIDTHS`), then one channel of the first,
  ``(1, 1, frames, mel bins)`` (CLAP's), then frames of four times the first width ``(1, frames, 4 · mel bins)``
  (Granite Speech 5's bins with their deltas, two frames stacked), then the widths of
  :func:`survey.pixel_sizes.extra_feature_widths`;
* ``input_values``: raw audio, ``(1, samples)`` with 4000 and 6400 samples, then ``(1, channels, samples)``, then
  two and three tokens' samples where the config states ``samples_per_token``, then,
  where the config states ``num_mel_bins`` and ``max_length``, a spectrogram ``(1, frames, bins)`` of that many
  frames and half as many (the Audio Spectrogram Transformer's);
* ``past_values``: a time series, ``(1, steps)`` then ``(1, steps, channels)`` at the config's
  ``context_length`` (PatchTST takes exactly that many; at most :data:`MAX_STEPS`) and at half of it, a lagged
  forecaster's ``max(lags_sequence)`` steps more (with its time features and horizon: :func:`series_inputs`);
* ``flattened_patches``: Pix2Struct's (and Kosmos-2.5's) patches, each row ``(row, column, C·p² pixels)``, on a
  4 × 4 and a 4 × 6 grid (:func:`number_patches`);
* ``pixel_values`` of a tower that takes each patch's ``(x, y)`` id (Gemma 4's ``pixel_position_ids``): patches
  ``(1, h·w + padding, C·p²)`` on a ``2k × 2k`` and a ``2k × 3k`` grid of its pooling kernel ``k``, the second
  followed by ``k²`` padding patches at ``(-1, -1)`` (:func:`id_grid`, :func:`patch_ids`);
* ``states``: a Decision Transformer's trajectory, ``(1, steps, state_dim)`` at 8 and 12 steps, with each step's
  action, return to go and timestep (:func:`trajectory_inputs`);
* ``latents``: a codec's continuous latents ``(1, hidden_size, frames)`` at 8 and 12 frames;
* ``pixel_values_videos``: the clip first, then the image shapes of ``pixel_values``; ``image`` and ``input`` (a
  VQ-GAN's, BridgeTower's tower) as ``pixel_values``; ``audio_mel`` and ``mel_spectrogram`` as ``input_features``;
* ``hidden_states`` without a grid, ``inputs``, ``context``, ``patch_embeds``, ``query_embeds`` (BLIP-2's
  Q-Former, with a seeded encoder output for its cross-attention), ``inputs_embeds`` (a tower,
  encoder or decoder fed embeddings, the last where it takes nothing else the survey feeds): ``(1, rows,
  width)`` then ``(1, width, rows)`` at 16 and 24 rows, for each width the config states
  (:data:`EMBEDDING_WIDTHS`), then as a feature map ``(1, width, h, w)`` of 4 × 4 and 4 × 6 cells
  (:data:`EMBEDDING_MAPS`), then raw audio and latent maps (:func:`survey.pixel_sizes.waveform_shapes`,
  :func:`survey.pixel_sizes.latent_maps`);
* ``hidden_states`` or ``pixel_values`` with ``grid_thw`` (a Qwen-VL-style vision tower fed flattened patches):
  one image of ``(t, h, w) = (1, 2k, 2k)`` patches, then ``(1, 2k, 3k)`` (``k`` the ``spatial_merge_size``: a
  non-square grid, axes swapped show; a clip of ``(2, 2k, 3k)`` where the tower's position ids carry the frame
  index, :func:`clip_frames`: the frame axis too then holds distinct indices), as
  ``(t·h·w, C·temporal_patch_size·patch_size²)`` rows (Muse's towers:
  ``patch_temporal``), then as ``(t·h·w, C, patch_size, patch_size)`` patches, then as one batch of them
  ``(1, t·h·w, C, patch_size, patch_size)`` (PaddleOCR-VL's tower) (:func:`patch_grid`).

A key the config does not hold is read from its encoder's sub-config (``encoder_config``, ``audio_config``,
``encoder``: the mel bins of an ASR model's encoder, the image size of a vision encoder–decoder's ViT).
"""

from __future__ import annotations

from typing import Any

from survey import pixel_sizes
from survey.pixel_records import EMBEDDING_INPUTS
from survey.seeded import seeded_normal

#: height and width of a model that states no image size, at the native and the resampling size
PLAIN_IMAGE = (64, 96)
#: frames of a feature input that states no length
PLAIN_FRAMES = (64, 96)
#: samples of a raw audio input
PLAIN_SAMPLES = (4000, 6400)
#: the most steps a time series is fed (a longer context is cut to this, a multiple of the usual patch lengths)
MAX_STEPS = 512
LATENT_FRAMES = (8, 12)  #: frames of a codec's latents
#: the patch grids ``(rows, columns)`` of Pix2Struct's numbered flattened patches at the native and the second size
PATCH_GRIDS = ((4, 4), (4, 6))
#: the steps of a Decision Transformer's trajectory at the native and the second size
TRAJECTORY_STEPS = (8, 12)
#: the sub-configs a key is looked up in when the config does not hold it
SUB_CONFIGS = ("encoder_config", "audio_config", "encoder")
#: the towers whose image size a model of towers is fed at, after the plain size (SAM's image encoder, ViTPose's
#: backbone: each refuses any other size)
NESTED_CONFIGS = ("vision_config", "backbone_config")
#: the widths an input of embeddings may have, in the order tried (a speech encoder's features, a latent's)
EMBEDDING_WIDTHS = ("input_dim", "input_size", "hidden_size", "d_model", "vae_dim", "latent_dim", "d_latents")
#: the keys a config states its feature width by (mel bins, or the frames stacked into one input row), each tried
FEATURE_WIDTHS = ("num_mel_bins", "feature_size", "input_feat_size", "n_mels", "num_features", "input_dim",
                  "feature_projection_input_dim")
#: the rows of an input of embeddings at the native and the resampling size
EMBEDDING_ROWS = (16, 24)
#: the same rows as a feature map ``(1, width, h, w)``, tried after the rows (a tower fed another network's map as
#: its patches: Unlimited-OCR's CLIP encoder, fed its SAM encoder's); the second grid is not square
EMBEDDING_MAPS = ((4, 4), (4, 6))
#: the most frames of a spectrogram fed as ``input_values`` (the Audio Spectrogram Transformer's ``max_length``)
MAX_SPECTROGRAM = 1024
MAX_FRAMES = 32  #: the most frames a video input is fed (a longer clip: 2 frames)
#: the frames of a flattened-patch tower's grid at the resampled size where its ids carry each patch's frame
CLIP_FRAMES = 2


def _get(config: Any, *keys: str, default: Any = None) -> Any:
    for section in (config, *(getattr(config, name, None) for name in SUB_CONFIGS)):
        for key in keys:
            value = getattr(section, key, None) if section is not None else None
            if value is not None:
                return value
    return default


def _pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int) and value > 0:
        return value, value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    return None


def _image(config: Any) -> dict[str, list[tuple[int, ...]]]:
    channels = _get(config, "num_channels", "in_channels", "in_chans", default=3)
    channels = channels if isinstance(channels, int) and channels > 0 else 3
    size = _pair(_get(config, "image_size", "img_size", "input_size", "max_img_size"))
    size = pixel_sizes.prompt_halved(config, size)
    patch = _pair(_get(config, "patch_size", "patch_sizes"))
    if patch is None and isinstance(_get(config, "patch_sizes"), (list, tuple)):
        patch = _pair(_get(config, "patch_sizes")[0])
    patch = pixel_sizes.unit_step(config, patch)  # Hiera's tokens unrolled into mask units: whole units a side
    frames = _get(config, "num_frames", "frames_per_clip", default=2)
    frames = frames if isinstance(frames, int) and 0 < frames <= MAX_FRAMES else 2
    sizes = [_sizes(size, patch)] if size is not None else [pixel_sizes.stated_sizes(config) or _sizes(None, None)]
    nested = _pair(_nested(config, "image_size")) or _timm_size(_nested(config, "architecture"))
    if size is None and nested is not None:  # a model of towers: the plain size first, then its tower's own
        sizes.append(_sizes(nested, _pair(_nested(config, "patch_size"))))
    shapes = {key: [shape for pair in sizes for hw in [pair[key]]
                    for shape in ((1, channels, *hw), (1, frames, channels, *hw), (frames, channels, *hw))]
              for key in ("native", "resampled")}
    # a clip resampled along its height alone (TimeSformer's layers read the grid's width from the config)
    shapes["resampled"] += [(1, frames, channels, pair["resampled"][0], pair["native"][1]) for pair in sizes]
    tiles = _get(config, "max_num_tiles")
    if isinstance(tiles, int) and 0 < tiles <= MAX_FRAMES:  # one image of its tiles, tried first (Llama 3.2 Vision)
        for key in ("native", "resampled"):
            shapes[key] = [(1, 1, tiles, channels, *pair[key]) for pair in sizes] + shapes[key]
    return shapes


def _timm_size(architecture: Any) -> tuple[int, int] | None:
    """The ``(H, W)`` a timm tower's architecture is made for (timm's own default configuration of it: PE video's
    ``vit_pe_core_large_patch14_336`` takes 336 pixels and no other), None where timm or the name says none."""
    if not isinstance(architecture, str):
        return None
    try:
        import timm

        default = timm.get_pretrained_cfg(architecture)
    except Exception:  # timm not installed, or an architecture it does not know
        return None
    return None if default is None else _pair(tuple(default.input_size[1:]))


def _sizes(size: tuple[int, int] | None, patch: tuple[int, int] | None) -> dict[str, tuple[int, int]]:
    """The native and resampling ``(H, W)`` of an image of ``size`` in patches of ``patch`` (module docstring)."""
    if size is None:
        return {"native": (PLAIN_IMAGE[0],) * 2, "resampled": (PLAIN_IMAGE[1],) * 2}
    step = patch or (16, 16)
    shrunk = size[0] - 2 * step[0] if size[0] >= 4 * step[0] else size[0] + 2 * step[0]
    return {"native": size, "resampled": (shrunk, size[1] + 4 * step[1])}


def _nested(config: Any, key: str) -> Any:
    """``key`` of a model's vision tower or backbone (:data:`NESTED_CONFIGS`), else of its vision tower's backbone
    (SAM 2's Hiera), None where none states it."""
    towers = [getattr(config, name, None) for name in NESTED_CONFIGS]
    for section in [*towers, *(getattr(tower, name, None) for tower in towers for name in NESTED_CONFIGS)]:
        value = getattr(section, key, None) if section is not None else None
        if value is not None:
            return value
    return None


def _feature_widths(config: Any) -> list[int]:
    widths = [_get(config, key) for key in FEATURE_WIDTHS]
    return list(dict.fromkeys(w for w in widths if isinstance(w, int) and 0 < w <= 8192)) or [80]


def frames_first(config: Any, shape: tuple[int, ...]) -> bool:
    """Whether features of ``shape`` are ``(1, frames, width)`` at a width of
    :func:`survey.pixel_sizes.extra_feature_widths` (their mask then covers the frames, ``shape[1]``)."""
    return len(shape) == 3 and shape[-1] in pixel_sizes.extra_feature_widths(config, _feature_widths(config))


def _features(config: Any) -> dict[str, list[tuple[int, ...]]]:
    widths = _feature_widths(config)
    stated, window = _get(config, "max_source_positions"), _get(config, "n_window")
    if isinstance(stated, int) and 0 < stated <= 4096:
        frames = (2 * stated, stated)
    elif isinstance(window, int) and 0 < window <= 512:  # chunks of 2·n_window frames (Qwen3-ASR's encoder)
        frames = (4 * window, 2 * window)
    else:
        frames = PLAIN_FRAMES
    extra = pixel_sizes.extra_feature_widths(config, widths)
    return {key: [shape for bins in widths for shape in ((1, bins, n), (1, n, bins), (bins, n))] + [
        (1, 1, n, widths[0]), (1, n, 4 * widths[0])] + [shape for w in extra for shape in ((1, w, n), (1, n, w))]
        for key, n in zip(("native", "resampled"), frames, strict=True)}


def _values(config: Any) -> dict[str, list[tuple[int, ...]]]:
    channels = _get(config, "audio_channels", "num_channels", default=1)
    channels = channels if isinstance(channels, int) and 0 < channels <= 8 else 1
    shapes = {key: [(1, n), (1, channels, n)] for key, n in zip(("native", "resampled"), PLAIN_SAMPLES, strict=True)}
    per_token = _get(config, "samples_per_token")
    if isinstance(per_token, int) and 0 < per_token <= 16000:  # a whole number of tokens (Muse Spark's audio)
        shapes["native"].append((1, 2 * per_token))
        shapes["resampled"].append((1, 3 * per_token))
    bins, frames = _get(config, "num_mel_bins"), _get(config, "max_length")
    if isinstance(bins, int) and isinstance(frames, int) and 0 < frames <= MAX_SPECTROGRAM:  # a spectrogram
        shapes["native"].append((1, frames, bins))
        shapes["resampled"].append((1, frames // 2, bins))
    return shapes


def _series(config: Any) -> dict[str, list[tuple[int, ...]]]:
    steps = _get(config, "context_length", default=MAX_STEPS)
    steps = steps if isinstance(steps, int) and 0 < steps <= MAX_STEPS else MAX_STEPS
    lags = _get(config, "lags_sequence")
    if lags:  # a lagged forecaster reads max(lags) steps before its context
        steps += max(lags)
    channels = _get(config, "num_input_channels", "input_size", default=1)
    channels = channels if isinstance(channels, int) and 0 < channels <= 8 else 1
    return {key: [(1, n), (1, n, channels)] for key, n in zip(("native", "resampled"), (steps, steps // 2),
                                                              strict=True)}


def _trajectory(config: Any) -> dict[str, list[tuple[int, ...]]]:
    width = _get(config, "state_dim", default=1)
    return {key: [(1, n, width)] for key, n in zip(("native", "resampled"), TRAJECTORY_STEPS, strict=True)}


def _latents(config: Any) -> dict[str, list[tuple[int, ...]]]:
    width = _get(config, "hidden_size", default=32)
    return {key: [(1, width, n)] for key, n in zip(("native", "resampled"), LATENT_FRAMES, strict=True)}


def merge_size(config: Any) -> int:
    """The ``k × k`` blocks a vision tower merges its patches in (``spatial_merge_size``; 1 where unstated)."""
    merge = _get(config, "spatial_merge_size", "merge_size", default=1)
    return merge if isinstance(merge, int) and 0 < merge <= 8 else 1


def clip_frames(model: Any) -> int:
    """The frames ``t`` of the grid a flattened-patch tower is fed at the resampled size: :data:`CLIP_FRAMES` where
    one of its modules sets transformers' ``include_temporal`` (its vision position ids carry each patch's frame
    index, ``vision_utils.get_vision_position_ids``: MiniMax-M3-VL's tower), so that the frame axis holds distinct
    indices too; else 1 (an image)."""
    return CLIP_FRAMES if any(getattr(m, "include_temporal", False) is True for m in model.modules()) else 1


def patch_grid(config: Any, size: str, frames: int = 1) -> tuple[int, int, int]:
    """The ``(t, h, w)`` patch grid of a flattened-patch tower at ``size`` (``native`` or ``resampled``): whole
    merge blocks of ``spatial_merge_size`` (1 where unstated), the resampled grid wider than it is high and
    ``frames`` frames long (:func:`clip_frames`), the native one a single frame."""
    merge = merge_size(config)
    return (1, 2 * merge, 2 * merge) if size == "native" else (frames, 2 * merge, 3 * merge)


def id_grid(config: Any, size: str) -> tuple[int, int, int]:
    """``(h, w, padding)`` of the patches fed with ``(x, y)`` ids (:data:`~survey.pixel_records.PATCH_ID_INPUTS`) at
    ``size``: whole pooling blocks of ``pooling_kernel_size`` ``k`` (1 where unstated), the resampled grid wider than
    it is high and followed by ``k²`` padding patches (a whole pooled token)."""
    k = _get(config, "pooling_kernel_size", default=1)
    k = k if isinstance(k, int) and 0 < k <= 8 else 1
    return (2 * k, 2 * k, 0) if size == "native" else (2 * k, 3 * k, k * k)


def patch_ids(h: int, w: int, padding: int) -> Any:
    """The ``(1, h·w + padding, 2)`` ids fed beside such patches: each patch's ``(x, y)`` = (column, row) in raster
    order, then ``padding`` patches at ``(-1, -1)``."""
    import numpy as np

    y, x = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    ids = np.stack([x.ravel(), y.ravel()], axis=1)
    return np.concatenate([ids, np.full((padding, 2), -1)])[None].astype(np.int64)


def _id_patches(config: Any) -> dict[str, list[tuple[int, ...]]]:
    channels = _get(config, "num_channels", "in_channels", default=3)
    patch = _pair(_get(config, "patch_size", default=16)) or (16, 16)
    return {size: [(1, h * w + padding, channels * patch[0] * patch[1])] for size in ("native", "resampled")
            for h, w, padding in [id_grid(config, size)]}


def _flat_patches(config: Any, frames: int = 1) -> dict[str, list[tuple[int, ...]]]:
    channels = _get(config, "in_channels", "in_chans", "num_channels", default=3)
    temporal = _get(config, "temporal_patch_size", "patch_temporal", default=1)
    patch = _pair(_get(config, "patch_size", default=14)) or (14, 14)
    width = channels * temporal * patch[0] * patch[1]
    return {size: [(t * h * w, width), (t * h * w, channels, *patch), (1, t * h * w, channels, *patch)]
            for size in ("native", "resampled") for t, h, w in [patch_grid(config, size, frames)]}


def _embeddings(config: Any) -> dict[str, list[tuple[int, ...]]]:
    widths = [_get(config, key) for key in EMBEDDING_WIDTHS]
    widths = list(dict.fromkeys(w for w in widths if isinstance(w, int) and 0 < w <= 8192)) or [32]
    waves, maps = pixel_sizes.waveform_shapes(config), pixel_sizes.latent_maps(config)
    return {key: [shape for width in widths for shape in ((1, n, width), (1, width, n))]
            + [(1, width, *cells) for width in widths] + waves[key] + maps[key]
            for key, n, cells in zip(("native", "resampled"), EMBEDDING_ROWS, EMBEDDING_MAPS, strict=True)}


def candidates(input_name: str, config: Any, flat: bool = False, ids: bool = False, frames: int = 1
               ) -> dict[str, list[tuple[int, ...]]]:
    """``{"native": shapes, "resampled": shapes}`` to try for ``input_name`` (module docstring); ``flat``: the
    forward takes a grid beside it, so its images are flattened patches (``frames`` of them at the resampled size,
    :func:`clip_frames`); ``ids``: it takes each patch's ``(x, y)`` id beside it, so its images are patches
    ``(1, patches, C·p²)`` (:func:`id_grid`)."""
    if flat:
        return _flat_patches(config, frames)
    if ids:
        return _id_patches(config)
    if input_name == "pixel_values_videos":  # a clip first
        return {size: sorted(shapes, key=lambda shape: len(shape) != 5) for size, shapes in _image(config).items()}
    if input_name in ("pixel_values", "image", "input"):
        return _image(config)
    if input_name in EMBEDDING_INPUTS:
        return _embeddings(config)
    if input_name in ("input_features", "spectrogram", "audio_mel", "mel_spectrogram"):
        return _features(config)
    if input_name == "past_values":
        return _series(config)
    if input_name == "states":
        return _trajectory(config)
    if input_name == "flattened_patches":
        return _numbered_patches(config)
    if input_name == "latents":
        return _latents(config)
    return _values(config)


def series_inputs(params: Any, config: Any, shape: tuple[int, ...]) -> dict[str, Any]:
    """The inputs a lagged forecaster (Time Series Transformer, Informer, Autoformer) takes beside ``past_values``
    of ``shape`` ``(1, steps)``: each step's ``num_time_features`` time features (zeros), and the horizon its
    decoder runs over, ``prediction_length`` seeded future values with their time features; ``{}`` for any other
    forward."""
    import torch

    if "past_time_features" not in params or len(shape) != 2:
        return {}
    features = _get(config, "num_time_features", default=0)
    inputs = {"past_time_features": torch.zeros((1, shape[1], features))}
    horizon = _get(config, "prediction_length")
    if horizon and "future_values" in params:
        inputs["future_values"] = seeded_normal(7, 1, horizon)
        inputs["future_time_features"] = torch.zeros((1, horizon, features))
    return inputs


def _numbered_patches(config: Any) -> dict[str, list[tuple[int, ...]]]:
    width = 2 + _get(config, "patch_embed_hidden_size", default=768)
    return {key: [(1, rows * cols, width)] for key, (rows, cols) in zip(("native", "resampled"), PATCH_GRIDS,
                                                                         strict=True)}


def number_patches(patches: Any) -> Any:
    """Pix2Struct's flattened patches ``(1, rows · cols, 2 + C·p²)`` (:data:`PATCH_GRIDS`) with each patch's row and
    column, counted from 1 (0 is padding), in its first two entries: the positions its tables read."""
    import torch

    count = patches.shape[1]
    rows, cols = next((r, c) for r, c in PATCH_GRIDS if r * c == count)
    numbered = patches.clone()
    numbered[0, :, 0] = torch.arange(rows).repeat_interleave(cols) + 1
    numbered[0, :, 1] = torch.arange(cols).repeat(rows) + 1
    return numbered


def trajectory_inputs(params: Any, config: Any, shape: tuple[int, ...]) -> dict[str, Any]:
    """The inputs a Decision Transformer takes beside its ``states`` of ``shape`` ``(1, steps, state_dim)``: each
    step's action (``act_dim`` seeded values), return to go (one) and timestep (``0 … steps - 1``); ``{}`` for any
    other forward."""
    import torch

    if "returns_to_go" not in params or len(shape) != 3:
        return {}
    steps = shape[1]
    seeded = torch.Generator().manual_seed(8)
    return {"actions": torch.randn((1, steps, _get(config, "act_dim", default=1)), generator=seeded),
            "returns_to_go": torch.randn((1, steps, 1), generator=seeded),
            "timesteps": torch.arange(steps)[None]}


def image_grid_inputs(params: Any, config: Any, shape: tuple[int, ...]) -> dict[str, Any]:
    """The per-image sizes a NaViT-style forward takes beside ``pixel_values`` of ``shape`` ``(1, C, H, W)``: the
    image's patch grid ``(H // p, W // p)`` as ``target_sizes`` (MiniCPM's vision towers, whose forward cannot run
    without it); ``{}`` for any other forward (a ``patch_attention_mask`` left out is all ones: the whole image)."""
    import torch

    patch = _pair(_get(config, "patch_size"))
    if "target_sizes" not in params or patch is None or len(shape) != 4:
        return {}
    return {"target_sizes": torch.tensor([[shape[2] // patch[0], shape[3] // patch[1]]])}
