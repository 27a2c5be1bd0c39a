r"""refpos.encodings.grid_fixed against transformers 5.25: the tables added as they are, at the native grid (anchors
env).

For each row whose grid is fixed, its embedding module is built by transformers from a small config, its table
seeded, its patch projection (and its class, distillation and register tokens) zeroed, and fed an input of the
native size: what each token gains is then the table's reading alone, and must equal the record's reference
(:meth:`refpos.models.kinds.grid.GridLayer.reference`) — ViTPose's backbone its grid rows plus the first row
(:math:`P'_q = P_{1+q} + P_0`), AST its 2 + f·t rows on the grid a strided convolution cuts, EoMT-style towers their
grid behind the tokens that carry none, PVT a table per stage (the last with its class row). Sums of float64 rows:
within ``4u·max|P|``. Each catalogued wrong reading (:data:`refpos.encodings.grid_fixed.FIXED_MISTAKES`) lies outside
it, and a row naming the other way fails.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_fixed import FIXED_MISTAKES
from refpos.models import families
from refpos.models.kinds.grid_fixed import FIXED_WAYS

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import build, small_config  # noqa: E402  (after the importorskip of torch)

U = 2.0**-53
#: model type -> (config override, the embedding module's class name, the position parameter's path in it)
FIXED_ROWS = {
    "vitpose_backbone": ({"image_size": [32, 24], "patch_size": [8, 8]}, "VitPoseBackboneEmbeddings",
                         "position_embeddings"),
    "audio-spectrogram-transformer": ({"num_mel_bins": 40, "max_length": 64, "patch_size": 16, "frequency_stride": 6,
                                       "time_stride": 10}, "ASTEmbeddings", "position_embeddings"),
    "videomt": ({"image_size": 32, "patch_size": 8, "num_register_tokens": 2}, "VideomtEmbeddings",
                "position_embeddings.weight"),
    "aimv2_vision_model": ({"image_size": 32, "patch_size": 8}, "Aimv2VisionEmbeddings", "position_embedding.weight"),
    "eomt": ({"image_size": 32, "patch_size": 8}, "EomtEmbeddings", "position_embeddings.weight"),
}


def _site(model_type: str, override: dict) -> tuple[object, object]:
    config = small_config(model_type, **override)
    (site,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "grid"]
    return config, site


def _gained(model_type: str) -> tuple[np.ndarray, np.ndarray, object]:
    """The rows the tokens gain from the seeded table (module docstring), the table, and the record."""
    override, name, path = FIXED_ROWS[model_type]
    config, site = _site(model_type, override)
    module = next(m for m in build(config).modules() if type(m).__name__ == name)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for key, parameter in module.named_parameters():
            parameter.copy_(torch.from_numpy(rng.standard_normal(parameter.shape)) if key == path else
                            torch.ones_like(parameter) if "norm" in key else torch.zeros_like(parameter))
        table = dict(module.named_parameters())[path].detach().numpy().reshape(site.table_rows, -1)
        if model_type == "audio-spectrogram-transformer":
            fed = torch.randn(1, config.max_length, config.num_mel_bins, dtype=torch.float64)
        else:
            sizes = config.image_size if isinstance(config.image_size, list | tuple) else [config.image_size] * 2
            fed = torch.randn(1, 3, *sizes, dtype=torch.float64)
        out = module(fed)
    return out[0].numpy(), table, site


@pytest.mark.parametrize("model_type", sorted(FIXED_ROWS))
def test_fixed_tables_are_read_as_the_model_reads_them(model_type):
    observed, table, site = _gained(model_type)
    reference = np.asarray(site.reference(table, site.grid))
    if model_type in ("videomt", "eomt"):  # the class and register tokens, put before the patches, gain nothing
        assert np.all(observed[: observed.shape[0] - reference.shape[0]] == 0)
        observed = observed[observed.shape[0] - reference.shape[0]:]
    bound = 4 * U * float(np.abs(table).max())
    assert observed.shape == reference.shape
    assert float(np.abs(observed - reference).max()) <= bound
    for name, wrong in FIXED_MISTAKES.items():
        rows = wrong(table, site.grid, site.prefix, site.suffix, FIXED_WAYS[site.way])
        if rows is not None and np.shape(rows) == observed.shape:
            assert float(np.abs(observed - np.asarray(rows)).max()) > 100 * bound, name


def test_ast_grid_is_the_convolution_s():
    """AST's grid is (⌊(F − k)/s_f⌋ + 1, ⌊(T − k)/s_t⌋ + 1), its own get_shape's, and its class defaults give (12,
    101) from a config that states none of the keys."""
    from transformers.models.audio_spectrogram_transformer.modeling_audio_spectrogram_transformer import (
        ASTEmbeddings,
    )

    config, site = _site("audio-spectrogram-transformer", FIXED_ROWS["audio-spectrogram-transformer"][0])
    assert site.grid == tuple(ASTEmbeddings.get_shape(None, config)) == (5, 5)
    facts = families.FAMILIES["audio-spectrogram-transformer"].input.facts_of("grid")
    bare = {k: v for k, v in config.to_dict().items() if k not in (*facts.strides, facts.patch)}
    (default,) = [r for r in refpos.model_positions(bare) if r.kind == "grid"]
    defaults = transformers.AutoConfig.for_model("audio-spectrogram-transformer")
    assert default.grid == tuple(ASTEmbeddings.get_shape(None, defaults)) == (12, 101)


def test_vitpose_native_grid_is_the_pair_of_its_sizes():
    """ViTPose's image and patch sizes are pairs (rows, columns): the native grid (4, 3) of 32 × 24 pixels in 8 × 8
    patches; its class defaults (256, 192) and (16, 16) give (16, 12)."""
    config, site = _site("vitpose_backbone", FIXED_ROWS["vitpose_backbone"][0])
    assert (site.grid, site.prefix, site.table_rows) == ((4, 3), 1, 13)
    bare = {k: v for k, v in config.to_dict().items() if k not in ("image_size", "patch_size")}
    (default,) = [r for r in refpos.model_positions(bare) if r.kind == "grid"]
    assert default.grid == (16, 12)


def test_the_fixed_anchor_fails_on_a_wrong_way(monkeypatch):
    """ViTPose's row naming the plain fixed table (no first row added, a class row kept) fails the anchor."""
    row = families.FAMILIES["vitpose_backbone"]
    wrong = dataclasses.replace(row, input=dataclasses.replace(
        row.input, facts=(("grid", dataclasses.replace(row.input.facts_of("grid"), way="fixed")),)))
    monkeypatch.setitem(families.FAMILIES, "vitpose_backbone", wrong)
    with pytest.raises(AssertionError):
        test_fixed_tables_are_read_as_the_model_reads_them("vitpose_backbone")


#: a small PVT: four stages on a 32-pixel image (tables of 8, 4, 2 and 1 patches a side, the last with its class row)
PVT = {"image_size": 32, "num_encoder_blocks": 4, "depths": [1, 1, 1, 1], "hidden_sizes": [8, 16, 24, 32],
       "num_attention_heads": [1, 2, 2, 4], "patch_sizes": [4, 2, 2, 2], "strides": [4, 2, 2, 2],
       "sequence_reduction_ratios": [4, 2, 1, 1], "mlp_ratios": [1, 1, 1, 1]}


def test_pvt_stage_tables_are_the_model_s():
    """Each stage's patch embedding adds its own table as it is (its bilinear resampling to the same size an
    identity): the records' grids, widths and class rows are the modules', and what each stage's tokens gain at the
    native size is the record's reference exactly."""
    config, positions = small_config("pvt", **PVT), None
    positions = refpos.model_positions(config.to_dict())
    sites = [r for r in positions if r.kind == "grid"]
    model = build(config)
    stages = [m for m in model.modules() if type(m).__name__ == "PvtPatchEmbeddings"]
    assert [(s.grid, s.prefix, s.dim, s.table_rows) for s in sites] == [
        ((8, 8), 0, 8, 64), ((4, 4), 0, 16, 16), ((2, 2), 0, 24, 4), ((1, 1), 1, 32, 2)]
    assert [tuple(m.position_embeddings.shape[1:]) for m in stages] == [(s.table_rows, s.dim) for s in sites]
    assert len(positions.stack("vision")) == sum(PVT["depths"])
    rng = np.random.default_rng(1)
    side = 32
    for s, (module, site) in enumerate(zip(stages, sites, strict=True)):
        with torch.no_grad():
            for key, parameter in module.named_parameters():
                parameter.copy_(torch.from_numpy(rng.standard_normal(parameter.shape)) if key == "position_embeddings"
                                else torch.zeros_like(parameter))
            channels = 3 if s == 0 else PVT["hidden_sizes"][s - 1]
            out, h, w = module(torch.randn(1, channels, side, side, dtype=torch.float64))
        table = module.position_embeddings.detach().numpy()[0]
        assert (h, w) == site.grid
        np.testing.assert_array_equal(out[0].numpy(), np.asarray(site.reference(table, site.grid)))
        side = h
