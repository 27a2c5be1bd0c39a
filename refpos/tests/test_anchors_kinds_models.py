"""The window-bias and convolutional-position layers model_positions builds, against the modules transformers builds
from the same config (anchors env).

For each family row of the two kinds, a small config of its class is resolved by refpos and instantiated by
transformers; the records must be the model's: one window-bias record per attention module that holds a
relative-position table (Swin's ``relative_position_index``, Swin v2's ``relative_coords_table``, BEiT's
``relative_position_bias``), in order, with its head count and window; one convolutional-position record per
encoder, with the convolution's kernel, groups and stride. Integers: exact.
"""

from __future__ import annotations

import pytest

import refpos
from refpos.models.families import FAMILY_ROWS

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

#: Swin's classes alias num_attention_heads to num_heads: the two geometries are kept apart
SWIN = {"embed_dim": 16, "depths": [2, 1], "num_heads": [2, 4], "window_size": 4, "image_size": 32, "patch_size": 4}
BEIT = {"image_size": 32, "patch_size": 4, "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
        "intermediate_size": 16, "use_relative_position_bias": True}
WINDOW_ROWS = [row.model_type for row in FAMILY_ROWS if "bias_table" in row.encodings]
CONV_ROWS = [row.model_type for row in FAMILY_ROWS if row.input is not None
             and row.input.encoding == "conv_position" and not row.unmodelled]


def _window_modules(model):
    """The attention modules holding a relative-position table, in the model's order: (heads, window, own)."""
    found = []
    for _, module in model.named_modules():
        if not hasattr(module, "relative_position_index"):
            continue
        heads = (module.num_attention_heads if hasattr(module, "num_attention_heads")
                 else module.relative_position_bias_table.shape[-1])  # Swin's bias module holds the table alone
        window = module.window_size
        window = tuple(window) if isinstance(window, (tuple, list)) else (window, window)
        found.append((heads, window))
    return found


@pytest.mark.parametrize("model_type", WINDOW_ROWS)
def test_window_bias_records_are_the_model_s(model_type):
    beit = model_type in ("beit", "data2vec-vision")
    config = transformers.AutoConfig.for_model(model_type, **(BEIT if beit else SWIN))
    records = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "bias_table"]
    model = transformers.AutoModel.from_config(config)
    if beit:  # the table lives in a module of its own per layer
        tables = [m for m in model.modules() if type(m).__name__.endswith("RelativePositionBias")]
        assert len(records) == len(tables) == config.num_hidden_layers
        assert {r.window for r in records} == {tuple(tables[0].window_size)}
        assert {r.n_heads for r in records} == {config.num_attention_heads}
        return
    modules = _window_modules(model)
    assert [(r.n_heads, r.window) for r in records] == modules


def test_the_window_anchor_fails_on_a_wrong_head_count(monkeypatch):
    """With the per-stage heads read one stage off, the anchor above fails."""
    from refpos.models.kinds import bias_table

    real = bias_table._per_stage
    monkeypatch.setattr(bias_table, "_per_stage", lambda stack, key, n: real(stack, key, n)[::-1])
    with pytest.raises(AssertionError):
        test_window_bias_records_are_the_model_s("swin")


@pytest.mark.parametrize("model_type", CONV_ROWS)
def test_conv_position_record_is_the_model_s(model_type):
    small = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
             "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4, "conv_dim": [32], "conv_kernel": [3],
             "conv_stride": [2]}
    config = transformers.AutoConfig.for_model(model_type, **small)
    (record,) = [r for r in refpos.model_positions(config.to_dict()) if r.kind == "conv_position"]
    model = transformers.AutoModel.from_config(config)
    convs = [m for name, m in model.named_modules()  # OmniASR names its module encode_positions
             if ("pos_conv_embed" in name or "encode_positions" in name) and isinstance(m, torch.nn.Conv1d)]
    assert convs, f"{model_type}: no positional convolution in the model"
    assert len(convs) == record.layers
    conv = convs[0]
    assert (conv.kernel_size[0], conv.groups, conv.stride[0]) == (record.kernel, record.groups, record.stride)
