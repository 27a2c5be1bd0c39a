"""IDEFICS's vision tower (``idefics/vision.py``, built by IdeficsModel, by no model class of its own) against the
record refpos resolves for its config (anchors env): the table of a CLS row and the ``(image_size / patch_size)²``
grid, ``embed_dim`` wide; its layers and heads; the bicubic call at scale factors ``(g + 0.1)/M`` in the table's dtype
only with ``interpolate_pos_encoding``; the table itself added where a square image's patches number its rows; and
the rows every token gains at another size equal to the record's ``bicubic_offset`` way (float64: within the
bicubic bound; the catalogued ``grid_offset_missing`` outside it)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from refpos.encodings.grid_mistakes import GridInputs, grid_tolerance, identify_grid

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import heads_of, interpolate_calls  # noqa: E402  (after the importorskip of torch)

CONFIG = {"embed_dim": 16, "image_size": 28, "patch_size": 7, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 16}


def _tower():
    from transformers.models.idefics.configuration_idefics import IdeficsVisionConfig
    from transformers.models.idefics.vision import IdeficsVisionTransformer

    config = IdeficsVisionConfig(**CONFIG)
    (site,) = [r for r in refpos.model_positions({"model_type": "idefics_vision", **CONFIG}) if r.kind == "grid"]
    return IdeficsVisionTransformer(config).to(torch.float64).eval(), site


def _gained(tower, size: tuple[int, int], **flag) -> np.ndarray:
    """The rows the embeddings' tokens gain from the table at ``size`` pixels (the output minus the output with the
    table zeroed: the addition is linear in it)."""
    embeddings = tower.embeddings
    pixels = torch.randn(1, 3, *size, dtype=torch.float64)
    with torch.no_grad():
        out = embeddings(pixels, **flag)
        saved = embeddings.position_embedding.weight.clone()
        embeddings.position_embedding.weight.zero_()
        zeroed = embeddings(pixels, **flag)
        embeddings.position_embedding.weight.copy_(saved)
    return (out - zeroed)[0].numpy()


def test_the_record_is_the_tower_s():
    tower, site = _tower()
    table = tower.embeddings.position_embedding.weight
    assert (site.way, site.grid, site.prefix, site.dim) == ("bicubic_offset", (4, 4), 1, 16)
    assert tuple(table.shape) == (site.table_rows, site.dim)
    layers = [m for m in tower.modules() if type(m).__name__ == "IdeficsVisionAttention"]
    assert [heads_of(m) for m in layers] == [2, 2] and len(layers) == len(refpos.model_positions(
        {"model_type": "idefics_vision", **CONFIG}).stack("vision"))
    with interpolate_calls() as calls, pytest.raises(ValueError, match="interpolate_pos_encoding"):
        tower(torch.randn(1, 3, 35, 42, dtype=torch.float64))
    assert not calls
    with interpolate_calls() as calls:
        tower(torch.randn(1, 3, 35, 42, dtype=torch.float64), interpolate_pos_encoding=True)
    (call,) = calls
    assert (call["mode"], call["align_corners"], call["antialias"], call["size"]) == ("bicubic", False, False, None)
    assert call["scale_factor"] == pytest.approx(((5 + 0.1) / 4, (6 + 0.1) / 4)) and call["dtype"] == "float64"


@pytest.mark.parametrize(("size", "grid"), [((28, 28), (4, 4)), ((35, 42), (5, 6)), ((21, 35), (3, 5)),
                                            ((42, 42), (6, 6))])
def test_the_rows_the_tokens_gain_are_the_record_s(size, grid):
    tower, site = _tower()
    table = tower.embeddings.position_embedding.weight.detach().numpy()
    observed = _gained(tower, size, interpolate_pos_encoding=True)
    reference = np.asarray(site.reference(table, grid))
    inputs = GridInputs(table, grid, site.variant, prefix_tokens=1, source_grid=site.grid)
    bound = grid_tolerance(inputs, "float64") + 4 * 2.0**-53 * float(np.abs(observed).max())
    assert observed.shape == reference.shape
    assert float(np.abs(observed - reference).max()) <= bound
    if grid == site.grid:  # the table itself: the offset form, which the code does not run there, lies outside
        moved = np.asarray(dataclasses.replace(site.variant, native_as_is=False).resample(table, grid, prefix_tokens=1))
        assert float(np.abs(observed - moved).max()) > 10 * bound
    else:  # the catalogued mistake of the offset form lies outside the bound, and nothing is named for the tower
        missing = np.asarray(GridInputs(table, grid, site.variant, prefix_tokens=1).resample(scale_factor_offset=None))
        assert float(np.abs(observed - missing).max()) > 10 * bound
        assert identify_grid(observed, inputs) is None
