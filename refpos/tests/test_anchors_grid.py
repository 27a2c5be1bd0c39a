r"""refpos.encodings.grid against the functions of transformers 5.25 (and timm, torch) that resample position grids.

Every record of :data:`refpos.encodings.grid_variants.GRID_VARIANTS` is compared with at least one of its
model types' own function (``ANCHORS``), called with the attributes it reads (a module built from a small
config, or the unbound method on a namespace holding them), on a downscale, an upscale mixed with a
downscale, and an unchanged grid, in float64 and float32.

Tolerance. :func:`refpos.encodings.resample_bounds.resample_error_bound` derives the largest error of a
correct port from the computation (the source coordinate's roundings through the weights' slope, the
weights' evaluation and normalisation, the sums), for the dtype the function really resamples in: float32
for the records whose ``computes_in`` is float32 (they cast even a float64 table), else the run's dtype.
Rows that are copied (the extra tokens, an unchanged grid) compare bit for bit in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.encodings.grid import merge_block_order, resample_position_grids_padded, resample_position_sequence
from refpos.encodings.grid_mistakes import GridInputs, identify_grid
from refpos.encodings.grid_variants import GRID_VARIANTS, GridVariant
from refpos.encodings.resample_bounds import resample_error_bound

torch = pytest.importorskip("torch", reason="grid anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="grid anchors need transformers (pip install 'refpos[anchors]')")
F = torch.nn.functional

pytestmark = pytest.mark.anchors

DIM, PATCH = 8, 4
#: (source side M, target grid (h, w)): a downscale, an upscale with a downscale, the same grid
GRIDS = [(6, (4, 3)), (6, (9, 5)), (5, (5, 5))]
DTYPES = {"float64": (torch.float64, 2.0**-53), "float32": (torch.float32, 2.0**-24)}


def _t(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()


# --------------------------------------------------------------------------- anchors: table (n_extra + M², d)
# each: (table, grid (h, w), torch dtype, prefix tokens) -> transformers' resampled table as the record returns it
def _vit(table, grid, dtype, prefix):
    from transformers import ViTConfig
    from transformers.models.vit.modeling_vit import ViTEmbeddings

    side = math.isqrt(table.shape[0] - 1)
    emb = ViTEmbeddings(ViTConfig(image_size=side * PATCH, patch_size=PATCH, hidden_size=DIM, num_attention_heads=2))
    emb.position_embeddings.data = _t(table, dtype)[None]
    return emb.interpolate_pos_encoding(torch.zeros(1, 1 + grid[0] * grid[1], DIM, dtype=dtype), grid[0] * PATCH,
                                        grid[1] * PATCH)[0]


def _deit(table, grid, dtype, prefix):
    from transformers.models.deit.modeling_deit import DeiTEmbeddings

    me = SimpleNamespace(position_embeddings=_t(table, dtype)[None], patch_size=PATCH)
    return DeiTEmbeddings.interpolate_pos_encoding(me, torch.zeros(1, 2 + grid[0] * grid[1], DIM, dtype=dtype),
                                                   grid[0] * PATCH, grid[1] * PATCH)[0]


def _embedding_table(cls_path: str, prefix_rows: int) -> Callable:
    """CLIP's and SigLIP's ``interpolate_pos_encoding``: the table an ``nn.Embedding``, ``prefix_rows`` before the
    patches in the embeddings it is handed."""
    def anchor(table, grid, dtype, prefix):
        module, name = cls_path.rsplit(".", 1)
        cls = getattr(__import__(module, fromlist=[name]), name)
        embedding = torch.nn.Embedding(table.shape[0], DIM).to(dtype)
        embedding.weight.data = _t(table, dtype)
        me = SimpleNamespace(position_embedding=embedding, patch_size=PATCH,
                             position_ids=torch.arange(table.shape[0])[None])
        embeddings = torch.zeros(1, prefix_rows + grid[0] * grid[1], DIM, dtype=dtype)
        return cls.interpolate_pos_encoding(me, embeddings, grid[0] * PATCH, grid[1] * PATCH)[0]
    return anchor


def _timm(antialias: bool) -> Callable:
    def anchor(table, grid, dtype, prefix):
        layers = pytest.importorskip("timm.layers", reason="the timm anchor needs timm")
        return layers.resample_abs_pos_embed(_t(table, dtype)[None], list(grid), num_prefix_tokens=prefix,
                                             antialias=antialias)[0]
    anchor.computes_in = "float32"  # timm casts the table to float32 before resampling
    return anchor


def _vitdet(table, grid, dtype, prefix):
    from transformers.models.vitdet.modeling_vitdet import VitDetEmbeddings

    out = VitDetEmbeddings.get_absolute_positions(None, _t(table, dtype)[None], prefix == 1, grid[0], grid[1])
    return out.reshape(grid[0] * grid[1], DIM)


def _seggpt(table, grid, dtype, prefix):
    from transformers.models.seggpt.modeling_seggpt import SegGptEmbeddings

    me = SimpleNamespace(position_embeddings=_t(table, dtype)[None])
    return SegGptEmbeddings.interpolate_pos_encoding(me, grid[0], grid[1]).reshape(grid[0] * grid[1], DIM)


def _dinov2(table, grid, dtype, prefix):
    from transformers import Dinov2Config
    from transformers.models.dinov2.modeling_dinov2 import Dinov2Embeddings

    side = math.isqrt(table.shape[0] - 1)
    emb = Dinov2Embeddings(Dinov2Config(image_size=side * PATCH, patch_size=PATCH, hidden_size=DIM,
                                        num_attention_heads=2)).to(dtype)
    emb.position_embeddings.data = _t(table, dtype)[None]
    return emb.interpolate_pos_encoding(torch.zeros(1, 1 + grid[0] * grid[1], DIM, dtype=dtype), grid[0] * PATCH,
                                        grid[1] * PATCH)[0]


def _dinov2_registers(table, grid, dtype, prefix):
    from transformers import Dinov2WithRegistersConfig
    from transformers.models.dinov2_with_registers.modeling_dinov2_with_registers import (
        Dinov2WithRegistersEmbeddings,
    )

    side = math.isqrt(table.shape[0] - 1)
    emb = Dinov2WithRegistersEmbeddings(Dinov2WithRegistersConfig(image_size=side * PATCH, patch_size=PATCH,
                                                                  hidden_size=DIM, num_attention_heads=2)).to(dtype)
    emb.position_embeddings.data = _t(table, dtype)[None]
    return emb.interpolate_pos_encoding(torch.zeros(1, 1 + grid[0] * grid[1], DIM, dtype=dtype), grid[0] * PATCH,
                                        grid[1] * PATCH)[0]


def _dpt(table, grid, dtype, prefix):
    from transformers.models.dpt.modeling_dpt import DPTViTEmbeddings

    return DPTViTEmbeddings._resize_pos_embed(None, _t(table, dtype)[None], grid[0], grid[1], start_index=prefix)[0]


def _step3p7(table, grid, dtype, prefix):
    from transformers.models.step3p7.modeling_step3p7 import Step3p7VisionEmbeddings

    embedding = torch.nn.Embedding(table.shape[0], DIM).to(dtype)
    embedding.weight.data = _t(table, dtype)
    me = SimpleNamespace(position_embedding=embedding, patch_size=PATCH)
    return Step3p7VisionEmbeddings.interpolate_pos_encoding(me, torch.zeros(1, 1, DIM, dtype=dtype),
                                                            grid[0] * PATCH, grid[1] * PATCH)[0]


def _hunyuan(cls_path: str) -> Callable:
    def anchor(table, grid, dtype, prefix):
        module, name = cls_path.rsplit(".", 1)
        cls = getattr(__import__(module, fromlist=[name]), name)
        embedding = torch.nn.Embedding(table.shape[0], DIM).to(dtype)
        embedding.weight.data = _t(table, dtype)
        side = math.isqrt(table.shape[0] - 1)
        me = SimpleNamespace(position_embedding=embedding, position_edge=side, embed_dim=DIM,
                             config=SimpleNamespace(interpolate_mode="bilinear"))
        return cls.interpolate_pos_encoding(me, torch.zeros(1, 1, DIM, dtype=dtype), grid[0], grid[1])[0]
    return anchor


def _tipsv2(table, grid, dtype, prefix):
    from transformers.models.tipsv2.modeling_tipsv2 import Tipsv2VisionEmbeddings

    me = SimpleNamespace(position_embeddings=_t(table, dtype)[None], config=SimpleNamespace(patch_size=PATCH))
    return Tipsv2VisionEmbeddings.interpolate_pos_encoding(me, torch.zeros(1, 1 + grid[0] * grid[1], DIM, dtype=dtype),
                                                           grid[0] * PATCH, grid[1] * PATCH)[0]


def _vision_utils(mode: str, align_corners: bool, merge: int = 1, padding: str = "border",
                  transposed: bool = False) -> Callable:
    def anchor(table, grid, dtype, prefix):
        from transformers.vision_utils import get_vision_interpolation_indices_and_weights

        side = math.isqrt(table.shape[0])
        rows, cols = (grid[1], grid[0]) if transposed else grid
        index, weight = get_vision_interpolation_indices_and_weights(
            torch.tensor([[1, rows, cols]]), side, mode=mode, align_corners=align_corners, spatial_merge_size=merge,
            padding=padding)
        out = (_t(table, dtype)[index] * weight[:, :, None].to(dtype)).sum(1)
        if merge > 1:  # back to raster order: token t of the merge-block order is raster patch order[t]
            raster = torch.empty_like(out)
            raster[torch.tensor(merge_block_order((rows, cols), merge))] = out
            out = raster
        return out
    return anchor


def _grid_sample(cls_path: str, method: str) -> Callable:
    """GLM-4V's and GLM-Image's embeddings: ``grid_sample`` at each patch's centre (border padding)."""
    def anchor(table, grid, dtype, prefix):
        module, name = cls_path.rsplit(".", 1)
        cls = getattr(__import__(module, fromlist=[name]), name)
        embedding = torch.nn.Embedding(table.shape[0], DIM).to(dtype)
        embedding.weight.data = _t(table, dtype)
        me = SimpleNamespace(position_embedding=embedding, interpolated_method=method)
        h, w = grid
        rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        return cls.forward(me, torch.zeros(h * w, DIM, dtype=dtype), [h * w], torch.tensor([[1, h, w]]),
                           rows.reshape(-1), cols.reshape(-1))
    return anchor


def _dinov2_offset(table, grid, dtype, prefix):
    """DINOv2's original ``interpolate_pos_encoding``: the table itself where a square image's patches number its
    rows (``npatch == N and w == h``), else the same torch call (scale factors (g + 0.1)/M, float32)."""
    side = math.isqrt(table.shape[0] - 1)
    if grid[0] * grid[1] == side * side and grid[0] == grid[1]:
        return _t(table, dtype)
    patches = _t(table[1:], torch.float32).reshape(1, side, side, DIM).permute(0, 3, 1, 2)
    factors = ((grid[0] + 0.1) / side, (grid[1] + 0.1) / side)
    out = F.interpolate(patches, mode="bicubic", scale_factor=factors).permute(0, 2, 3, 1).reshape(-1, DIM)
    return torch.cat([_t(table[:1], torch.float32), out]).to(dtype)


_dinov2_offset.casts_extra = True  # the original casts the whole table, the CLS row too, to float32


def _idefics(table, grid, dtype, prefix):
    """IDEFICS's tower: its own ``interpolate_pos_encoding`` on a square image of ``grid`` patches or not."""
    from transformers.models.idefics.configuration_idefics import IdeficsVisionConfig
    from transformers.models.idefics.vision import IdeficsVisionEmbeddings

    side = math.isqrt(table.shape[0] - 1)
    emb = IdeficsVisionEmbeddings(IdeficsVisionConfig(image_size=side * PATCH, patch_size=PATCH, embed_dim=DIM,
                                                      num_attention_heads=2)).to(dtype)
    emb.position_embedding.weight.data = _t(table, dtype)
    return emb.interpolate_pos_encoding(torch.zeros(1, 1 + grid[0] * grid[1], DIM, dtype=dtype), grid[0] * PATCH,
                                        grid[1] * PATCH)[0]


def _tvp(table, grid, dtype, prefix):
    """TVP resamples only along an axis longer than its table: targets of one side that is never shorter."""
    from transformers.models.tvp.modeling_tvp import TvpVisualInputEmbedding

    side = math.isqrt(table.shape[0])
    me = SimpleNamespace(max_grid_row_position_embeddings=side, max_grid_col_position_embeddings=side)
    positional = _t(table, dtype).reshape(1, side, side, DIM)
    return TvpVisualInputEmbedding.interpolate_pos_encoding(me, positional, grid[0], grid[1]).reshape(-1, DIM)


def _timesformer(table, grid, dtype, prefix):
    from transformers import TimesformerConfig
    from transformers.models.timesformer.modeling_timesformer import TimesformerEmbeddings

    side = math.isqrt(table.shape[0] - 1)
    config = TimesformerConfig(image_size=side * PATCH, patch_size=PATCH, num_channels=1, num_frames=1,
                               hidden_size=DIM, num_attention_heads=2, attention_type="space_only")
    emb = TimesformerEmbeddings(config).to(dtype).eval()
    for tensor in (emb.patch_embeddings.projection.weight, emb.patch_embeddings.projection.bias, emb.cls_token):
        tensor.data.zero_()  # the output is then the position table alone
    emb.position_embeddings.data = _t(table, dtype)[None]
    pixels = torch.zeros(1, 1, 1, grid[0] * PATCH, grid[1] * PATCH, dtype=dtype)
    return emb(pixels)[0]


def _buckets(model_type: str) -> Callable:
    def anchor(table, grid, dtype, prefix):
        from refpos.tests.test_anchors_grid_buckets import run

        return torch.from_numpy(run(model_type, table, [grid], dtype).reshape(-1, DIM))
    return anchor


def _radio(table, grid, dtype, prefix):
    from transformers import RadioConfig
    from transformers.models.radio.modeling_radio import RadioPatchEmbeddings

    side = math.isqrt(table.shape[0])
    config = RadioConfig(max_img_size=side * PATCH, patch_size=PATCH, hidden_size=DIM, num_attention_heads=2)
    emb = RadioPatchEmbeddings(config).to(dtype)
    emb.position_embedding.data = _t(table, dtype)[None]
    return emb._interpolate_position_embedding(grid, dtype)[0]


def _sam3(table, grid, dtype, prefix):
    from transformers import Sam3ViTConfig
    from transformers.models.sam3.modeling_sam3 import Sam3ViTEmbeddings

    side = math.isqrt(table.shape[0])
    config = Sam3ViTConfig(hidden_size=DIM, patch_size=PATCH, pretrain_image_size=side * PATCH,
                           image_size=side * PATCH, num_attention_heads=2)
    emb = Sam3ViTEmbeddings(config).to(dtype)
    return emb._tile_position_embeddings(_t(table, dtype)[None], *grid)[0]


#: grids without a tie (gcd(M, n) = 1 along each axis: refpos/tests/test_anchors_grid_buckets.py holds the ties)
UNTIED = [(7, (5, 3)), (7, (10, 4)), (5, (7, 9))]

#: record -> (model type or library, anchor, prefix tokens, grids the anchor takes)
ANCHORS: dict[str, list[tuple[str, Callable, int, list]]] = {
    "bicubic": [("vit", _vit, 1, GRIDS), ("deit", _deit, 2, GRIDS),
                ("clip", _embedding_table("transformers.models.clip.modeling_clip.CLIPVisionEmbeddings", 1), 1, GRIDS),
                ("siglip", _embedding_table("transformers.models.siglip.modeling_siglip.SiglipVisionEmbeddings", 0), 0,
                 GRIDS),
                ("timm antialias=False", _timm(False), 1, GRIDS)],
    "bicubic_grid_only": [("vitdet", _vitdet, 1, GRIDS), ("seggpt", _seggpt, 1, GRIDS)],
    "bicubic_float32": [("dinov2", _dinov2, 1, GRIDS)],
    "bicubic_antialias": [("dinov2_with_registers", _dinov2_registers, 1, GRIDS),
                          ("unlimited_ocr", _embedding_table(
                              "transformers.models.unlimited_ocr.modeling_unlimited_ocr.UnlimitedOcrVisionEmbeddings",
                              1), 1, GRIDS),
                          ("timm resample_abs_pos_embed", _timm(True), 1, GRIDS)],
    "bilinear": [("dpt", _dpt, 1, GRIDS), ("step3p7", _step3p7, 0, GRIDS)],
    "bilinear_grid_only_float32": [
        ("hunyuan_vl", _hunyuan("transformers.models.hunyuan_vl.modeling_hunyuan_vl.HunYuanVLVisionPatchEmbed"), 1,
         GRIDS),
        ("paddleocr_vl", _vision_utils("bilinear", False), 0, GRIDS),
        ("glm_image", _grid_sample("transformers.models.glm_image.modeling_glm_image.GlmImageVisionEmbeddings",
                                   "bilinear"), 0, GRIDS)],
    "bilinear_antialias": [("tipsv2", _tipsv2, 1, GRIDS)],
    "bilinear_align_corners": [("qwen3_vl", _vision_utils("bilinear", True, merge=1), 0, GRIDS),
                               ("qwen3_vl merge 2", _vision_utils("bilinear", True, merge=2), 0,
                                [(6, (4, 2)), (5, (8, 6))])],
    "bicubic_gather": [("kimi_k25", _vision_utils("bicubic", False), 0, GRIDS),
                       ("glm4v", _grid_sample("transformers.models.glm4v.modeling_glm4v.Glm4vVisionEmbeddings",
                                              "bicubic"), 0, GRIDS)],
    "bilinear_zeros_transposed": [("muse_glimmer", _vision_utils("bilinear", False, padding="zeros",
                                                                 transposed=True), 0, GRIDS)],
    "dinov2_offset": [("torch F.interpolate(scale_factor=(g + 0.1)/M)", _dinov2_offset, 1, GRIDS)],
    "bicubic_offset": [("idefics", _idefics, 1, [*GRIDS, (5, (6, 6)), (5, (4, 6))])],
    "bilinear_offset_grid_only": [
        ("hy_v4_vl", _hunyuan("transformers.models.hy_v4_vl.modeling_hy_v4_vl.HYV4VLVisionPatchEmbed"), 1, GRIDS)],
    "bicubic_scale_factor": [("tvp", _tvp, 0, [(4, (7, 9)), (5, (5, 8))])],
    "nearest": [("timesformer", _timesformer, 1, GRIDS)],
    "buckets_padded": [(t, _buckets(t), 0, UNTIED) for t in ("idefics2", "idefics3", "smolvlm", "phi4_multimodal")],
    "bilinear_square_crop": [("radio", _radio, 0, [*GRIDS, (6, (3, 8)), (4, (4, 2))])],
    "buckets_packed": [(t, _buckets(t), 0, UNTIED) for t in ("minicpm_ocr", "minicpmv4_6", "minicpmv4_7")],
    "tile": [("sam3", _sam3, 0, [*GRIDS, (3, (7, 5)), (4, (4, 9))])],
}

CASES = [(name, label, anchor, prefix, side, grid, dtype) for name, rows in ANCHORS.items()
         for label, anchor, prefix, grids in rows for side, grid in grids for dtype in DTYPES]


def _bound(variant: GridVariant, side: int, grid: tuple[int, int], u: float, magnitude: float) -> float:
    target = grid[::-1] if variant.axes == "wh" else grid
    target = (max(target),) * 2 if variant.read == "square_crop" else target
    factors = None if variant.scale_factor_offset is None else \
        [(g + variant.scale_factor_offset) / side for g in target]
    return resample_error_bound([side, side], list(target), mode=variant.mode, unit_roundoff=u, magnitude=magnitude,
                                align_corners=variant.align_corners, antialias=variant.antialias,
                                scale_factors=factors, padding=variant.padding)


@pytest.mark.parametrize(("name", "label", "anchor", "prefix", "side", "grid", "dtype"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[4]}to{c[5][0]}x{c[5][1]}-{c[6]}" for c in CASES])
def test_variant_equals_its_anchor(name, label, anchor, prefix, side, grid, dtype):
    variant = GRID_VARIANTS[name]
    torch_dtype, u = DTYPES[dtype]
    if "float32" in (variant.computes_in, getattr(anchor, "computes_in", None)):
        u = 2.0**-24
    table = np.random.default_rng(side * 100 + grid[0]).standard_normal((prefix + side * side, DIM))
    stored = _np(_t(table, torch_dtype))  # the table as the library holds it
    theirs = _np(anchor(table, grid, torch_dtype, prefix))
    ours = np.asarray(variant.resample(stored, grid, prefix_tokens=prefix))
    assert theirs.shape == ours.shape
    bound = _bound(variant, side, grid, u, float(np.abs(stored).max())) + u * float(np.abs(ours).max())
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound, err_msg=f"{name} against {label}")
    if dtype == "float32":  # the library's float32 output is a correct port: the identifier names nothing
        assert identify_grid(theirs, GridInputs(stored, grid, variant, prefix_tokens=prefix)) is None
    if variant.keep_extra and prefix:  # copied rows: bit for bit (float32-rounded where the anchor casts them)
        casts = getattr(anchor, "casts_extra", False) and not (variant.native_as_is and grid == (side, side))
        extra = _np(_t(stored[:prefix], torch.float32)) if casts else stored[:prefix]
        np.testing.assert_array_equal(theirs[:prefix], extra)


def test_every_variant_has_an_anchor():
    assert set(ANCHORS) == set(GRID_VARIANTS)


@pytest.mark.parametrize("name", list(GRID_VARIANTS))
def test_every_model_type_of_a_record_resamples_in_its_modeling_file(name):
    """Each model type has a modeling file that resamples (interpolate, grid_sample, the vision_utils gather or
    its own weights)."""
    import transformers

    models = Path(transformers.__file__).parent / "models"
    words = ("interpolate(", "grid_sample(", "get_vision_interpolation_indices_and_weights(", "support = scale",
             "bucketize(", "get_vision_nearest_position_ids(")
    for model_type in GRID_VARIANTS[name].model_types:
        files = [*(models / model_type).glob("modeling_*.py"), *(models / model_type).glob("vision.py")]
        assert files, f"{model_type}: no modeling file in transformers {transformers.__version__}"
        assert any(word in f.read_text(encoding="utf-8") for f in files for word in words), model_type


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_yolos_keeps_cls_and_detection_tokens_around_a_non_square_grid(dtype):
    from transformers import YolosConfig
    from transformers.models.yolos.modeling_yolos import InterpolateInitialPositionEmbeddings

    torch_dtype, u = DTYPES[dtype]
    config = YolosConfig(image_size=[5 * PATCH, 7 * PATCH], patch_size=PATCH, num_detection_tokens=3, hidden_size=DIM)
    table = np.random.default_rng(7).standard_normal((1 + 35 + 3, DIM))
    stored = _np(_t(table, torch_dtype))
    theirs = _np(InterpolateInitialPositionEmbeddings(config)(_t(table, torch_dtype)[None], (9 * PATCH, 4 * PATCH))[0])
    ours = np.asarray(GRID_VARIANTS["bicubic"].resample(stored, (9, 4), prefix_tokens=1, suffix_tokens=3,
                                                        source_grid=(5, 7)))
    bound = resample_error_bound([5, 7], [9, 4], mode="bicubic", unit_roundoff=u, magnitude=float(np.abs(stored).max()))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound + u * float(np.abs(ours).max()))
    np.testing.assert_array_equal(theirs[-3:], stored[-3:])


@pytest.mark.parametrize("sizes", [[(4, 6), (7, 3), (2, 2)], [(12, 1), (5, 5)]])
def test_siglip2_per_image_resize(sizes):
    from transformers.models.siglip2.modeling_siglip2 import Siglip2VisionEmbeddings

    grid = np.random.default_rng(3).standard_normal((6, 6, DIM))
    max_length = max(h * w for h, w in sizes) + 3
    theirs = _np(Siglip2VisionEmbeddings.resize_positional_embeddings(_t(grid, torch.float32), torch.tensor(sizes),
                                                                      max_length))
    ours = np.asarray(resample_position_grids_padded(_np(_t(grid, torch.float32)), sizes, max_length))
    bound = max(resample_error_bound([6, 6], list(s), mode="bilinear", antialias=True, unit_roundoff=2.0**-24,
                                     magnitude=float(np.abs(grid).max())) for s in sizes)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=2 * bound)


def test_cosmos3_edge_merge_blocks_repeated_over_frames():
    from transformers.models.cosmos3_edge.modeling_cosmos3_edge import Cosmos3EdgeVisionEmbeddings

    grid = np.random.default_rng(4).standard_normal((6, 6, DIM))
    theirs = _np(Cosmos3EdgeVisionEmbeddings.resize_positional_embeddings(_t(grid, torch.float32),
                                                                          torch.tensor([[2, 4, 6]]), 2))
    flat = np.asarray(GRID_VARIANTS["bilinear_antialias"].resample(grid.reshape(36, DIM), (4, 6)))
    ours = np.concatenate([flat[merge_block_order((4, 6), 2)]] * 2)
    bound = resample_error_bound([6, 6], [4, 6], mode="bilinear", antialias=True, unit_roundoff=2.0**-24,
                                 magnitude=float(np.abs(grid).max()))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)


# --------------------------------------------------------------------------- 1-D tables
@pytest.mark.parametrize("length", [5, 11, 8])
def test_vit_mae_decoder_resamples_the_sequence_bicubic(length):
    from transformers.models.vit_mae.modeling_vit_mae import ViTMAEDecoder

    table = np.random.default_rng(length).standard_normal((1 + 8, DIM))
    me = SimpleNamespace(decoder_pos_embed=_t(table, torch.float64)[None])
    theirs = _np(ViTMAEDecoder.interpolate_pos_encoding(me, torch.zeros(1, 1 + length, DIM, dtype=torch.float64))[0])
    ours = np.asarray(resample_position_sequence(table, length, mode="bicubic", prefix_tokens=1))
    bound = resample_error_bound([8], [length], mode="bicubic", unit_roundoff=2.0**-53,
                                 magnitude=float(np.abs(table).max()))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)


@pytest.mark.parametrize("length", [3, 13])
def test_videoprism_temporal_table_antialiased_bilinear(length):
    from transformers.models.videoprism.modeling_videoprism import VideoPrismTemporalEmbeddings

    table = np.random.default_rng(length).standard_normal((8, DIM))
    me = SimpleNamespace(position_embeddings=_t(table, torch.float64)[None])
    theirs = _np(VideoPrismTemporalEmbeddings.interpolate_pos_encoding(
        me, torch.zeros(1, length, DIM, dtype=torch.float64))[0])
    ours = np.asarray(resample_position_sequence(table, length, mode="bilinear", antialias=True))
    bound = resample_error_bound([8], [length], mode="bilinear", antialias=True, unit_roundoff=2.0**-53,
                                 magnitude=float(np.abs(table).max()))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)


@pytest.mark.parametrize("length", [3, 8, 13])
def test_timesformer_time_table_nearest(length):
    """TimeSformer's time table (``F.interpolate(mode="nearest")`` inline in its forward): torch's call."""
    table = np.random.default_rng(length).standard_normal((8, DIM))
    theirs = _np(F.interpolate(_t(table, torch.float64).T[None], size=length, mode="nearest")[0].T)
    ours = np.asarray(resample_position_sequence(table, length, mode="nearest"))
    np.testing.assert_array_equal(theirs, ours)
