"""How each transformers model family resamples its learned position grid: one :class:`GridVariant` per way.

A record holds the choices :func:`refpos.encodings.grid.resample_position_table` takes (mode,
``align_corners``, antialias, size or offset-and-scale form, padding, axes, extra rows kept or left out),
the dtype the model resamples in, the model types of transformers 5.25 whose modeling files compute it,
and the function that does (file and name). docs/grid.md's table is this registry; the anchors
(refpos/tests/test_anchors_grid.py) compare every record against one of its model types' own function,
and a meta-test asks every record for its anchor and its docs row.

Model types are the directories of ``transformers/models/`` whose own modeling file holds the function; a
composite that builds the tower through ``AutoModel`` (LLaVA-style wrappers around CLIP or SigLIP) reads
its tower's record.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from refpos.backend import Array
from refpos.encodings.grid import resample_position_table

#: the fields of a way as the adapter contract passes it (a dict), and their values when left out
WAY_FIELDS = {"mode": None, "align_corners": False, "antialias": False, "scale_factor_offset": None,
              "padding": "border", "keep_extra": True, "axes": "hw", "read": "resample"}


@dataclasses.dataclass(frozen=True)
class GridVariant:
    """One way a family resamples its position grid (the arguments of ``resample_position_table``)."""

    name: str
    mode: str
    align_corners: bool
    antialias: bool
    #: None: the size form; δ: the scale factor (g + δ)/M (0.0: the plain scale-factor form)
    scale_factor_offset: float | None
    #: the extra rows (CLS, distillation, registers, detection tokens): returned around the grid, or left out
    keep_extra: bool
    #: "table": the table's own dtype; "float32": the model casts to float32 before resampling
    computes_in: str
    model_types: tuple[str, ...]
    source: str
    padding: str = "border"
    axes: str = "hw"
    note: str = ""
    #: "resample": by ``mode``; "buckets": rows gathered at bucketed fractional coordinates (NaViT);
    #: "square_crop": resampled to the square of the longer side, then cropped (RADIO)
    read: str = "resample"
    #: how images of several grids share a batch: "padded" (patch_attention_mask), "packed" (target_sizes), "" one
    batch: str = ""
    #: the code returns the table as it is where a square image's patches number the table's (its native grid),
    #: before the offset form would move it (DINOv2's original, IDEFICS)
    native_as_is: bool = False

    def resample(self, table: Array, grid: tuple[int, int], **extra: Any) -> Array:
        """:func:`~refpos.encodings.grid.resample_position_table` with this record's choices (``extra``:
        ``prefix_tokens``, ``suffix_tokens``, ``source_grid``); where :attr:`native_as_is`, the table itself (its
        grid rows alone where the extra rows are left out) at a square native grid."""
        if self.native_as_is and (rows := native_rows(table, grid, **extra)) is not None:
            return rows if self.keep_extra else rows[extra.get("prefix_tokens", 1):rows.shape[0] - extra.get(
                "suffix_tokens", 0), :]
        return resample_position_table(table, grid, mode=self.mode, align_corners=self.align_corners,
                                       antialias=self.antialias, scale_factor_offset=self.scale_factor_offset,
                                       padding=self.padding, keep_extra=self.keep_extra, axes=self.axes,
                                       read=self.read, **extra)


def native_rows(table: Array, grid: tuple[int, int], *, prefix_tokens: int = 1, suffix_tokens: int = 0,
                source_grid: tuple[int, int] | None = None) -> Array | None:
    """``table`` where ``grid`` is its square native grid (``source_grid``, else the square of its grid rows), else
    ``None``."""
    cells = getattr(table, "shape", (0,))[0] - prefix_tokens - suffix_tokens
    side = math.isqrt(max(cells, 0))
    source = (side, side) if source_grid is None else tuple(source_grid)
    native = source[0] == source[1] and source[0] * source[1] == cells
    return table if native and isinstance(grid, tuple | list) and tuple(grid) == source else None


_VIT_FAMILY = ("altclip", "beit", "blip", "blip_2", "bridgetower", "chinese_clip", "clip", "clipseg", "data2vec",
               "deit", "donut", "flava", "git", "granite_docling", "groupvit", "hiera", "ijepa", "instructblip",
               "instructblipvideo", "internvl", "janus", "kosmos2", "maskformer", "metaclip_2", "mlcd", "owlv2",
               "owlvit", "perceiver", "qianfan_ocr", "siglip", "swin", "swinv2", "vit",
               "vit_mae", "vit_msn", "vivit", "x_clip", "yolos", "sam2")

#: every way of transformers 5.25, by name
GRID_VARIANTS: dict[str, GridVariant] = {v.name: v for v in (
    GridVariant("bicubic", "bicubic", False, False, None, True, "table", _VIT_FAMILY,
                "models/vit/modeling_vit.py: ViTEmbeddings.interpolate_pos_encoding",
                note="the extra rows: CLS (DeiT: CLS and distillation; YOLOS: CLS before, detection tokens after, "
                     "a non-square source grid); SAM 2's Hiera adds a tiled window table afterwards "
                     "(refpos.encodings.grid_windowed)"),
    GridVariant("bicubic_grid_only", "bicubic", False, False, None, False, "table", ("seggpt", "vitdet", "lw_detr"),
                "models/vitdet/modeling_vitdet.py: VitDetEmbeddings.get_absolute_positions",
                note="the CLS row (where the table has one) is left out and the grid returned alone"),
    GridVariant("bicubic_float32", "bicubic", False, False, None, True, "float32", ("dinov2", "pixio"),
                "models/dinov2/modeling_dinov2.py: Dinov2Embeddings.interpolate_pos_encoding",
                note="transformers 5.25's DINOv2 uses the size form; its earlier releases and the original "
                     "code used the offset-and-scale form (record dinov2_offset)"),
    GridVariant("bicubic_antialias", "bicubic", False, True, None, True, "float32",
                ("dinov2_with_registers", "rf_detr", "unlimited_ocr", "deepseek_ocr2"),
                "models/dinov2_with_registers/modeling_dinov2_with_registers.py: "
                "Dinov2WithRegistersEmbeddings.interpolate_pos_encoding",
                note="DeepSeek-OCR 2's SAM-style grid has no extra rows"),
    GridVariant("bilinear", "bilinear", False, False, None, True, "table", ("dpt", "pvt", "step3p7"),
                "models/dpt/modeling_dpt.py: DPTViTEmbeddings._resize_pos_embed",
                note="PVT reshapes each stage's table to the stage's patch map and resamples it to that same size, "
                     "an identity: its row names the way fixed"),
    GridVariant("bilinear_grid_only_float32", "bilinear", False, False, None, False, "float32",
                ("hunyuan_vl", "paddleocr_vl", "inkling2", "glm_image"),
                "models/hunyuan_vl/modeling_hunyuan_vl.py: HunYuanVLVisionPatchEmbed.interpolate_pos_encoding",
                note="HunYuan-VL leaves its first row out (config interpolate_mode, default bilinear); PaddleOCR-VL "
                     "and Inkling2 gather through transformers' vision_utils; GLM-Image through grid_sample"),
    GridVariant("bilinear_antialias", "bilinear", False, True, None, True, "float32",
                ("tipsv2", "videoprism", "siglip2", "cosmos3_edge"),
                "models/tipsv2/modeling_tipsv2.py: Tipsv2VisionEmbeddings.interpolate_pos_encoding",
                note="SigLIP2 resizes per image and pads (resample_position_grids_padded); Cosmos3-Edge emits "
                     "merge blocks (merge_block_order); VideoPrism computes in the table's dtype"),
    GridVariant("bilinear_align_corners", "bilinear", True, False, None, False, "float32",
                ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen3_omni_moe", "qwen4_exp",
                 "cohere_compass"),
                "vision_utils.py: get_vision_interpolation_indices_and_weights (mode bilinear, align_corners True)",
                note="patch tokens in merge-block order (merge_block_order)"),
    GridVariant("bicubic_gather", "bicubic", False, False, None, False, "float32",
                ("kimi_k25", "ovis2_5", "glm4v", "glm4v_moe"),
                "vision_utils.py: get_vision_interpolation_indices_and_weights (mode bicubic)",
                note="GLM-4V samples the same points with grid_sample(bicubic, border); Ovis2.5 in merge blocks"),
    GridVariant("bilinear_zeros_transposed", "bilinear", False, False, None, False, "float32",
                ("muse_glimmer", "muse_spark"), "vision_utils.py: get_vision_interpolation_indices_and_weights "
                "(padding zeros), called with the grid (t, w, h)", padding="zeros", axes="wh",
                note="taps outside the table weigh 0 (grid_sample's zeros padding); patch (h, w) reads the table "
                     "at (w, h)"),
    GridVariant("dinov2_offset", "bicubic", False, False, 0.1, True, "float32", (),
                "facebookresearch/dinov2 dinov2/models/vision_transformer.py: DinoVisionTransformer."
                "interpolate_pos_encoding", note="no transformers 5.25 model type; torch hub's DINOv2 and "
                "transformers' releases before 5 (size (h + 0.1)/M, (w + 0.1)/M); the table itself at the square "
                "native grid", native_as_is=True),
    GridVariant("bicubic_offset", "bicubic", False, False, 0.1, True, "table", ("idefics",),
                "models/idefics/vision.py: IdeficsVisionEmbeddings.interpolate_pos_encoding",
                note="the table itself at the square native grid; only with interpolate_pos_encoding (another size "
                     "fails without it)", native_as_is=True),
    GridVariant("bilinear_offset_grid_only", "bilinear", False, False, 0.1, False, "float32", ("hy_v4_vl",),
                "models/hy_v4_vl/modeling_hy_v4_vl.py: HYV4VLVisionPatchEmbed.interpolate_pos_encoding",
                note="config interpolate_mode (default bilinear); the first row left out"),
    GridVariant("bicubic_scale_factor", "bicubic", False, False, 0.0, True, "table", ("tvp",),
                "models/tvp/modeling_tvp.py: TvpVisualInputEmbedding.interpolate_pos_encoding",
                note="only along an axis longer than the table, on the sum of row and column tables"),
    GridVariant("nearest", "nearest", False, False, None, True, "table", ("timesformer",),
                "models/timesformer/modeling_timesformer.py: TimesformerEmbeddings.forward"),
    GridVariant("buckets_padded", "nearest", False, False, None, False, "float32",
                ("idefics2", "idefics3", "smolvlm", "phi4_multimodal"),
                "models/idefics2/modeling_idefics2.py: Idefics2VisionEmbeddings.forward", read="buckets",
                batch="padded", note="fractions i·fl(1/n) clamped below 1 against torch.arange(1/M, 1, 1/M); each "
                "image's grid counted from its patch_attention_mask, its padding reading row 0; Phi-4-multimodal "
                "also defines a bicubic interpolate_pos_encoding its forward never calls"),
    GridVariant("buckets_packed", "nearest", False, False, None, False, "float32",
                ("minicpm_ocr", "minicpmv4_6", "minicpmv4_7"),
                "vision_utils.py: get_vision_nearest_position_ids", read="buckets", batch="packed",
                note="fractions fl(i/n); the images of target_sizes one after another in one sequence"),
    GridVariant("bilinear_square_crop", "bilinear", False, False, None, False, "float32", ("radio",),
                "models/radio/modeling_radio.py: RadioPatchEmbeddings._interpolate_position_embedding",
                read="square_crop", note="the table (max_img_size / patch_size a side) resampled to D × D, "
                "D = max(h, w), and cropped to h × w; its class and register tokens are another parameter, put "
                "in front after; packed images (image_grid_hw) each the same way"),
    GridVariant("tile", "nearest", False, False, None, False, "table", ("sam3",),
                "models/sam3/modeling_sam3.py: Sam3ViTEmbeddings._tile_position_embeddings", read="tile",
                note="the table (pretrain_image_size / patch_size a side) repeated over the image's grid and cut to "
                     "it: patch (i, j) reads row (i mod M, j mod M); its own size read as it is"),
)}
