"""Image sizes a model's forward needs that the plain sizes of :mod:`survey.pixel_inputs` (64 and 96 pixels for a
model that states no image size) do not meet, each read from what its config states the forward computes with.

* a two-stage detector that keeps its ``num_queries`` best anchors of the feature maps at ``feat_strides`` (RT-DETR
  and the detectors built on its decoder: ``torch.topk`` over the anchors refuses more queries than anchors): the
  smallest square side ``n``, a multiple of the coarsest stride, whose maps hold at least ``num_queries`` anchors,

  .. math:: \\sum_l \\lceil n / s_l \\rceil^2 \\ge Q,

  the extra levels past the strides each halving the last map (:func:`anchor_count`); the resampling size keeps the
  height and grows the width by two of the coarsest cells, ``(n, n + 2 s_{max})`` (more anchors still, a grid
  that is not square); a detector on a backbone cut into windows (LW-DETR's and RF-DETR's ViTs) has its anchors
  one per patch of each projector level, and its side holds whole windows of patches (:func:`_strides`);
* a model fed a prompt image stacked above its input (SegGPT): each half the stated height (:func:`prompt_halved`);
* a model type whose code alone refuses the plain sizes (:data:`TYPED_SIZES`).

Audio: feature widths past those :mod:`survey.pixel_inputs` reads (:func:`extra_feature_widths`: frames stacked
into a row, bins a model type's code assumes, an ASR sub-config's), and raw audio fed to an encoder whose input
is named ``hidden_states`` (:func:`waveform_shapes`), and a latent map to a VQ model's encode
(:func:`latent_maps`). Each is tried only after every shape
:mod:`survey.pixel_inputs` tries, so a model that ran on those runs on them still.

:func:`stated_sizes` returns ``{"native": (H, W), "resampled": (H, W)}`` or None where no rule applies; the
module's rules read the config only, and apply only where it states every field they read.
"""

from __future__ import annotations

import math
from typing import Any

#: the largest side an anchor rule may choose (a config asking for more queries than this holds is left alone)
MAX_SIDE = 1024


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and v > 0 for v in value):
        return [int(v) for v in value]
    return None


def anchor_count(height: int, width: int, strides: list[float], levels: int) -> int:
    """The anchors of a two-stage detector's ``levels`` feature maps over an image of ``height × width``: one per
    cell of the map at each stride, ``⌈H/s⌉ · ⌈W/s⌉``, and past the strides (``levels > len(strides)``) maps of
    twice the last stride each (a stride-2 convolution of the last map)."""
    if height <= 0 or width <= 0 or not strides:
        raise ValueError(f"height, width, strides: positive sizes and at least one stride, not {height}, {width}, "
                         f"{strides}")
    all_strides = list(strides) + [strides[-1] * 2 ** (i + 1) for i in range(max(0, levels - len(strides)))]
    return sum(math.ceil(height / s) * math.ceil(width / s) for s in all_strides)


def _strides(config: Any) -> tuple[list[float], int, int] | None:
    """``(strides, levels, step)`` of a detector's anchor maps: its ``feat_strides`` (the extra levels past them
    counted by ``num_feature_levels``), else, on a backbone cut into windows (``num_windows_side`` or
    ``num_windows`` a side), the backbone's ``patch_size`` scaled by each of ``projector_scale_factors`` (``p / s``;
    one level of the patches where it states none); ``step`` the side an image is a multiple of (the coarsest
    stride, with whole windows of patches on a windowed backbone)."""
    strides = _ints(getattr(config, "feat_strides", None))
    if strides is not None:
        levels = getattr(config, "num_feature_levels", None)
        return strides, levels if isinstance(levels, int) and levels > 0 else len(strides), max(strides)
    backbone = getattr(config, "backbone_config", None)
    patch = getattr(backbone, "patch_size", None)
    windows = getattr(backbone, "num_windows_side", None) or getattr(backbone, "num_windows", None)
    if not (isinstance(patch, int) and patch > 0 and isinstance(windows, int) and windows > 0):
        return None
    scales = [s for s in getattr(config, "projector_scale_factors", None) or [1.0] if isinstance(s, (int, float))]
    scaled = [patch / s for s in scales if s > 0] or [float(patch)]
    return scaled, len(scaled), math.lcm(patch * windows, math.ceil(max(scaled)))


def query_sizes(config: Any) -> dict[str, tuple[int, int]] | None:
    """The native and resampling ``(H, W)`` of a detector selecting ``num_queries`` of the anchors of its feature
    maps (module docstring, :func:`_strides`), None where the config states no such pair."""
    queries, found = getattr(config, "num_queries", None), _strides(config)
    if not isinstance(queries, int) or queries <= 0 or found is None:
        return None
    strides, levels, step = found
    side = step
    while anchor_count(side, side, strides, levels) < queries:
        side += step
        if side > MAX_SIDE:
            return None
    return {"native": (side, side), "resampled": (side, side + 2 * step)}


def stated_sizes(config: Any) -> dict[str, tuple[int, int]] | None:
    """The sizes a rule of this module gives ``config`` (module docstring), None where none applies."""
    return query_sizes(config) or _typed_sizes(config)


#: ``(native, resampled)`` ``(H, W)`` of a model type whose forward refuses the plain sizes for a reason of its code
#: alone: PP-OCRv5's mobile recogniser pools its backbone's last map (stride 32) by ``(3, 2)``, which must keep a row,
#: so its image is at least 96 pixels high (64 pools to none)
TYPED_SIZES = {"pp_ocrv5_mobile_rec": ((96, 96), (96, 160))}


def _typed_sizes(config: Any) -> dict[str, tuple[int, int]] | None:
    sizes = TYPED_SIZES.get(getattr(config, "model_type", None))
    return None if sizes is None else dict(zip(("native", "resampled"), sizes, strict=True))


def unit_step(config: Any, patch: tuple[int, int] | None) -> tuple[int, int] | None:
    """The pixels a size grows by, a side: a whole mask unit's, ``masked_unit_size · patch_stride``, where the config
    states both (Hiera unrolls its tokens into mask units); ``patch`` otherwise."""
    units, stride = _ints(getattr(config, "masked_unit_size", None)), _ints(getattr(config, "patch_stride", None))
    if units is None or stride is None or len(units) != 2 or len(stride) != 2:
        return patch
    return units[0] * stride[0], units[1] * stride[1]


def prompt_halved(config: Any, size: tuple[int, int] | None) -> tuple[int, int] | None:
    """The ``(H, W)`` of each image a model fed a prompt image stacked above its input (:data:`PROMPT_STACKED`:
    SegGPT's ``image_size`` is the two stacked) is fed: half the stated height; ``size`` for any other model."""
    if size is None or getattr(config, "model_type", None) not in PROMPT_STACKED:
        return size
    return size[0] // 2, size[1]


#: the model types whose forward stacks a prompt image of the input's size above it, along the height, into an
#: image of the config's ``image_size`` (SegGPT's ``SegGptEmbeddings``: the prompt above the input)
PROMPT_STACKED = ("seggpt",)
#: mel bins of an audio encoder whose config states none, by model type, with why (Gemma 4's subsampling
#: projection reads its width as ``subsampling_conv_channels[0] // 4`` frequency rows: its 128 bins after two
#: halvings)
STATED_BINS = {"gemma4_audio": 128}
#: the sub-configs of an audio model whose mel bins it is fed at, where the config itself states none (Nemotron
#: 3.5 Transcribe's ASR encoder)
BIN_CONFIGS = ("asr_config",)


def extra_feature_widths(config: Any, widths: list[int]) -> list[int]:
    """Feature widths tried after ``widths`` (those :mod:`survey.pixel_inputs` reads): the frames a config stacks
    into one row (``num_stacked_frames`` times each width: Fun-ASR's low-frame-rate features), the bins of
    :data:`STATED_BINS`, and those a sub-config of :data:`BIN_CONFIGS` states."""
    stacked = getattr(config, "num_stacked_frames", None)
    extra = [stacked * w for w in widths] if isinstance(stacked, int) and 1 < stacked <= 16 else []
    extra += [STATED_BINS[config.model_type]] if getattr(config, "model_type", None) in STATED_BINS else []
    extra += [bins for name in BIN_CONFIGS for bins in [getattr(getattr(config, name, None), "num_mel_bins", None)]
              if isinstance(bins, int) and 0 < bins <= 8192]
    return [w for w in dict.fromkeys(extra) if w not in widths]


def waveform_shapes(config: Any) -> dict[str, list[tuple[int, ...]]]:
    """The raw audio ``(1, channels, samples)`` fed to a convolutional audio encoder whose main input is named
    ``hidden_states`` (VibeVoice's acoustic tokenizer), where its config states ``channels`` and the
    ``downsampling_ratios`` its convolutions stride by: two and three frames of their product of samples; empty
    lists for any other config."""
    channels, ratios = getattr(config, "channels", None), _ints(getattr(config, "downsampling_ratios", None))
    if not (isinstance(channels, int) and 0 < channels <= 8 and ratios is not None):
        return {"native": [], "resampled": []}
    hop = math.prod(ratios)
    return {"native": [(1, channels, 2 * hop)], "resampled": [(1, channels, 3 * hop)]}


def latent_maps(config: Any) -> dict[str, list[tuple[int, ...]]]:
    """A latent map ``(1, latent_channels, h, w)`` of 4 × 4 and 4 × 6 cells fed to a VQ model whose ``encode``
    takes its encoder's latents (GLM-Image's ``GlmImageVQVAE``, whose width the config states only as
    ``latent_channels``); empty lists for a config stating none."""
    width = getattr(config, "latent_channels", None)
    if not (isinstance(width, int) and 0 < width <= 8192):
        return {"native": [], "resampled": []}
    return {"native": [(1, width, 4, 4)], "resampled": [(1, width, 4, 6)]}
