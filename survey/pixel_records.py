"""What a run of a vision, audio or feature model records (:mod:`survey.pixels`): its position sites
(:class:`Site`), what each recorded at each size (:class:`Capture`), the run as a whole (:class:`PixelRun`), the
names that find them, and what a record shows (:func:`additive`, :func:`unread`, :func:`observed_labels`).

Plain data: nothing here imports torch or runs a model, so a stored run is judged without either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from survey.records import Applied

#: a path component that names positions (a module or parameter); ``position_ids`` and other integer buffers are
#: indices, not weights, and are left out by their dtype; TimeSformer's learned time table is named ``time_embeddings``,
#: wav2vec2-BERT's table of clipped distances ``distance_embedding``
POSITION = re.compile(r"(^|_)(pos|position|positional|rel_pos|relative_position)s?(_|$|\d)|pos_embed|position_bias"
                      r"|relative_position|cpb_mlp|continuous_position|row_embedder|column_embedder|^time_embeddings$"
                      r"|^distance_embedding$")
#: the inputs a forward may take instead of token ids, in the order tried
INPUTS = ("pixel_values", "input_features", "input_values", "spectrogram", "audio_values", "past_values", "latents",
          "pixel_values_videos", "audio_mel", "mel_spectrogram", "image", "input", "hidden_states", "inputs",
          "context", "patch_embeds", "query_embeds", "inputs_embeds", "states", "flattened_patches")
#: inputs named for no modality (a model's generic ``inputs``): its encoder's named input is taken first
GENERIC_INPUTS = ("input", "inputs", "hidden_states")
#: the inputs that are embeddings (a network fed another's output: its positions may be added before them)
EMBEDDING_INPUTS = ("hidden_states", "inputs", "context", "patch_embeds", "query_embeds", "inputs_embeds")
#: the inputs that are images or clips (a vision tower's; the others are audio, features or embeddings)
IMAGE_INPUTS = ("pixel_values", "pixel_values_videos", "image", "input", "flattened_patches")
#: the key of an observation's ``stacks`` holding its :class:`PixelRun`
STACK = "pixels"
#: how the reason begins of a model type the token-id probe cannot run (:func:`survey.probe.probe`)
NO_TOKEN_IDS = "its forward takes no input_ids"
#: the masks of a feature or audio input that a forward may need (all ones: every frame is real); a mask a forward
#: requires (no default) is fed likewise, whatever its name
MASKS = ("input_features_mask", "feature_attention_mask")
#: the masks that mark padding rather than what is real (Gemma 3n's audio encoder: True where a frame is padded),
#: fed all False
PADDING_MASKS = ("audio_mel_mask",)
#: the inputs laid out ``(batch, rows, width)`` whose masks cover their rows (the others' cover their last axis)
ROW_INPUTS = ("audio_mel", "hidden_states", "inputs", "context", "patch_embeds", "query_embeds", "inputs_embeds",
              "states")
#: how the note begins of a row run on pixel, audio or feature inputs
RUN_NOTE = "run on its "
#: the largest tensor a capture keeps (elements): a larger one is left out, the capture saying so
MAX_ELEMENTS = 2_000_000
#: the std of the seeded draw that replaces a site's parameters
SITE_STD = 0.5
#: a module class that computes RoPE's cos and sin tables from position ids (transformers' ``…RotaryEmbedding``)
ROTARY = re.compile(r"Rotary(Positional)?Embedding")
#: the inputs of a vision tower fed flattened patches and their ``(t, h, w)`` grid
FLAT_PATCHES = ("hidden_states", "grid_thw")
#: the names a forward takes the ``(t, h, w)`` grid of its flattened patches by (beside ``hidden_states`` or
#: ``pixel_values``: Qwen2-VL's tower, and the towers written after it)
GRID_INPUTS = ("grid_thw", "image_grid_thw")
#: the per-image merge sizes a forward takes beside its grid (VideoLLaMA 3's tower)
MERGE_INPUTS = ("merge_sizes",)
#: the prompts a promptable segmenter's forward takes beside its image (SAM's), in pixels of the image: points
#: ``(B, point batch, points, 2)`` and boxes ``(B, boxes, 4)``, each an ``(x, y)`` pair or two
PROMPTS = ("input_points", "input_boxes")
#: the aspect-ratio id of each tiled image a forward takes beside its tiles ``(B, images, tiles, C, H, W)`` (Llama
#: 3.2 Vision's tower), with its mask of real tiles ``(B, images, tiles)``
TILE_INPUTS = ("aspect_ratio_ids", "aspect_ratio_mask")
#: the inputs fed beside the main one that the run keeps (:attr:`PixelRun.prompts`): the prompts, and the
#: aspect-ratio ids a tiled tower's positions are read at
KEPT = (*PROMPTS, TILE_INPUTS[0])


#: the names a forward takes each patch's ``(x, y)`` id by, beside patches ``(1, patches, C·p²)`` fed as its
#: ``pixel_values`` (Gemma 4's tower: ``(-1, -1)`` marks a padding patch)
PATCH_ID_INPUTS = ("pixel_position_ids",)


def patch_ids_input(params: Any) -> str | None:
    """The name under which a forward whose parameters are ``params`` takes its patches' ``(x, y)`` ids, or None."""
    return next((name for name in PATCH_ID_INPUTS if name in params), None)


def grid_input(params: Any) -> str | None:
    """The name under which a forward whose parameters are ``params`` takes the grid of flattened patches, or
    None where it takes none (it is then fed whole images)."""
    return next((name for name in GRID_INPUTS if name in params), None)
#: module-level functions that rotate a query and key (a vision tower's ``apply_rotary_pos_emb_vision``, Llama 4's
#: ``vision_apply_rotary_emb``, Gemma 4's ``apply_multidimensional_rope``)
APPLY = re.compile(r"\w*apply_rotary\w*|\w*apply_\w*rope\w*")
#: the rotary apply calls kept per size: the first call of each function and query shape (the first layer's, and the
#: first of a later layer whose tokens differ: SAM 3's global layers after its windowed ones, EoMT's query layers),
#: at most this many; a call given no tensor by position (an inner call handed its tensors by keyword) is not kept
KEPT_CALLS = 4
#: the calls kept per site and size of the modules computing with its bare tensors alone (:class:`PositionCall`;
#: SAM's are three: the image grid, the points, the box)
POSITION_CALLS = 8


class NotRun(Exception):
    """The model cannot be run generically on pixel, audio or feature inputs (the message says why)."""


@dataclass
class PositionCall:
    """One call of a module that computes with a site's bare tensors and holds nothing else (SAM's
    ``SamPositionalEmbedding``, its matrix ``G`` a bare parameter): the module's path, its first floating input
    and its output (:func:`survey.pixel_capture.position_modules`)."""

    module: str
    input: np.ndarray
    output: np.ndarray


@dataclass
class Capture:
    """One site at one input size: the owner's output tensors as run and with the site zeroed, and the site
    module's first input and output, as run and zeroed (empty where it is a bare parameter)."""

    owner_out: list[np.ndarray] = field(default_factory=list)
    owner_zeroed: list[np.ndarray] = field(default_factory=list)
    module_in: np.ndarray | None = None
    module_out: np.ndarray | None = None
    module_zeroed: np.ndarray | None = None
    #: the owner's first output tensor with the site's parameters doubled: whether the owner's tensors are linear
    #: in the site (:func:`survey.pixel_kinds.base.after_normalisation`); empty where not recorded
    owner_doubled: list[np.ndarray] = field(default_factory=list)
    #: the first site of an attention module: the logits its softmax is fed with the key projection zero and every
    #: query ``query``, at query rows ``logit_rows`` (:mod:`survey.pixel_logits`)
    logits: np.ndarray | None = None
    logit_rows: np.ndarray | None = None
    query: np.ndarray | None = None
    #: what that forward raised, where it did not run with the projections replaced (empty where it ran)
    logits_raised: str = ""
    #: every call, in order, of the modules that compute with the site's bare tensors alone (:class:`PositionCall`)
    calls: list[PositionCall] = field(default_factory=list)


@dataclass
class Site:
    """A position site: its path, its owner's path, whether it is a module, its parameters (stored, float32) and
    one capture per input size (``native``, ``resampled``)."""

    path: str
    owner: str
    is_module: bool
    params: dict[str, np.ndarray] = field(default_factory=dict)
    #: the parameters as the model's code initialised them, before the seeded draw (a sinusoid table's values)
    initial: dict[str, np.ndarray] = field(default_factory=dict)
    captures: dict[str, Capture] = field(default_factory=dict)
    #: where the owner's tensors were taken when not at its output (a bare table added in the owner's forward)
    at: str = ""


@dataclass
class PixelRun:
    """One vision, audio or feature model run: the input it takes, the shape fed at each size, its position sites,
    its attention modules' class names, and why a size was not run (``skipped``)."""

    model_class: str
    input_name: str
    shapes: dict[str, list[int]] = field(default_factory=dict)
    sites: list[Site] = field(default_factory=list)
    attention: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: whether the resampled size that ran was fed ``interpolate_pos_encoding=True``
    resample_flag: bool = False
    #: the dtype the model ran in (``float64`` where its code runs in it)
    dtype: str = "float32"
    #: position modules the forward never reads (:func:`unread`), left out of :attr:`sites`
    unread: list[str] = field(default_factory=list)
    #: the rotary modules (:data:`ROTARY`), each a :class:`Site` whose capture at a size holds the position ids of
    #: its first call (``module_in``, as float64) and its cos and sin tables stacked (``module_out``, ``(2, …)``)
    rotary: list[Site] = field(default_factory=list)
    #: per size, the first calls of the model's rotary apply functions (:func:`rotations`)
    applied: dict[str, list[Applied]] = field(default_factory=dict)
    #: per size, the ``(t, h, w)`` grid a flattened-patch tower was fed with its ``hidden_states``
    grids: dict[str, list[int]] = field(default_factory=dict)
    #: the ``k × k`` blocks the model's config merges patches in (``spatial_merge_size``, 1 where unstated)
    merge: int = 1
    #: per size, the inputs fed beside the main input that the run keeps (:data:`KEPT`: SAM's points and boxes, in
    #: pixels; a tiled tower's aspect-ratio ids), by name
    prompts: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    #: per size, each attention module's states and projection inputs at its first call, by path
    #: (:func:`survey.pixel_query_key.capture_query_key`): what its query, key and value gained
    query_key: dict[str, dict[str, dict[str, np.ndarray]]] = field(default_factory=dict)
    #: the attention cores the forward called (:mod:`survey.pixel_stages`), in the order of their first call:
    #: ``[path, heads, head width]``, each count as the module states it (None where it states none)
    cores: list[list[Any]] = field(default_factory=list)


def additive(site: Site) -> bool:
    """Whether a site's owner output is captured (as run and with the site zeroed): a site outside attention,
    whose owner is an embedding rather than an attention module (a bias inside attention is not added to the
    owner's output)."""
    return not any(word in part.lower() for part in site.owner.split(".") for word in ("attn", "attention"))


def unread(site: Site) -> bool:
    """Whether a position module is no part of the forward: never called at any size, and the owner's tensors
    exactly the same with its weights zeroed (wav2vec2-Conformer's ``pos_conv_embed``, built and never called)."""
    def same(c: Capture) -> bool:
        return (c.module_in is None and c.module_out is None and bool(c.owner_out)
                and len(c.owner_out) == len(c.owner_zeroed)
                and all(np.array_equal(a, b) for a, b in zip(c.owner_out, c.owner_zeroed, strict=True)))
    return site.is_module and additive(site) and bool(site.captures) and all(map(same, site.captures.values()))


def observed_labels(record: PixelRun) -> list[str]:
    """What the run showed, for the table's encoding column: the kinds of sites it found (a table added to the
    stack's input, a position module, a table inside attention), ``none`` (attention, no site) or ``no attention``."""
    labels = []
    for site in record.sites:
        fed = any(c.module_in is not None for c in site.captures.values())
        label = ("table at the input" if additive(site) and not fed else
                 "position module" if additive(site) else "position table in attention")
        if label not in labels:
            labels.append(label)
    return labels or (["none"] if record.attention else ["no attention"])
