"""The stage rows (the family table's ``stages`` column, refpos.models.stages), against the networks transformers
builds (anchors env).

For each row, the anchor builds the network from a small config of its class and reads its attention modules in
order: they are as many as refpos's ``none`` layers, and the modules of stage :math:`s` hold that stage's heads;
the network holds no parameter or buffer named for positions. The same reading fails on a wrong stage answer
(the depths or the heads of a config changed), so the anchor tells the stages apart. An attention core of a stage
without key reduction is equivariant to its tokens reordered (no position inside it), within the bound of sums
taken in another order, and is not once a table is added to its input.
"""

from __future__ import annotations

import pytest

import refpos
from refpos.models.schedule import stages_of

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import attention_modules, build, heads_of, position_tables  # noqa: E402

MIX = {"num_encoder_blocks": 2, "depths": [1, 2], "hidden_sizes": [8, 16], "num_attention_heads": [1, 2],
       "sr_ratios": [2, 1], "patch_sizes": [7, 3], "strides": [4, 2], "mlp_ratios": [2, 2]}
TWO = {"patch_sizes": [7, 3], "patch_stride": [4, 2], "patch_padding": [2, 1], "mlp_ratio": [2.0, 2.0],
       "attention_drop_rate": [0.0, 0.0], "drop_rate": [0.0, 0.0], "drop_path_rate": [0.0, 0.0],
       "qkv_bias": [True, True], "cls_token": [False, True], "qkv_projection_method": ["dw_bn", "dw_bn"],
       "kernel_qkv": [3, 3], "padding_kv": [1, 1], "stride_kv": [2, 2], "padding_q": [1, 1], "stride_q": [1, 1]}
#: model type -> a small config of its class (every per-stage list of the same length)
CONFIGS = {
    "segformer": MIX | {"decoder_hidden_size": 8},
    "glpn": MIX | {"decoder_hidden_size": 8},
    "pvt_v2": MIX,
    "cvt": TWO | {"depth": [1, 2], "num_heads": [1, 2], "embed_dim": [8, 16]},
    "mobilevit": {"hidden_sizes": [8, 12, 16], "num_attention_heads": 2, "neck_hidden_sizes": [8, 8, 8, 8, 8, 8, 16]},
    "idefics2_perceiver": {"hidden_size": 16, "resampler_depth": 2, "resampler_n_heads": 2, "resampler_head_dim": 8,
                           "num_key_value_heads": 1, "resampler_n_latents": 4},
}


def _config(model_type: str, **override):
    return transformers.AutoConfig.for_model(model_type, **(CONFIGS[model_type] | override))


def _heads(model) -> list[int | None]:
    return [heads_of(module) for _, module in attention_modules(model, outside=())]


def _claimed(config: dict) -> list[int]:
    return [stage.heads for stage in stages_of(config) for _ in range(stage.layers)]


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_the_stages_are_the_networks_attention_layers(model_type):
    config = _config(model_type)
    answer = refpos.model_positions(config.to_dict())
    assert answer.complete and {r.kind for r in answer.layers} == {"none"}
    model = build(config)
    assert _heads(model) == _claimed(config.to_dict()), model_type
    assert len(answer.layers) == len(_heads(model))
    assert not position_tables(model), model_type


@pytest.mark.parametrize(("model_type", "wrong"), [("segformer", {"depths": [2, 1]}), ("cvt", {"num_heads": [1, 4]}),
                                                  ("mobilevit", {"num_attention_heads": 4}),
                                                  ("idefics2_perceiver", {"resampler_depth": 3})])
def test_a_wrong_stage_answer_does_not_read_as_the_network(model_type, wrong):
    model = build(_config(model_type))
    assert _heads(model) != _claimed(_config(model_type).to_dict() | wrong)


def _reordered_gap(attention, hidden, order, table=None):
    """The largest difference between the core's output on reordered tokens and its output reordered, and the
    bound of the same sums taken in another order: :math:`2 N u \\max|y|` per output (N keys, u float64's unit
    roundoff; each output is a convex combination of N value rows)."""
    given = hidden if table is None else hidden + table
    moved = hidden[:, order] if table is None else hidden[:, order] + table
    with torch.no_grad():
        out = attention(given, 2, 2)[0]
        out_moved = attention(moved, 2, 2)[0]
    gap = (out_moved - out[:, order]).abs().max().item()
    return gap, 2 * hidden.shape[1] * 2.0**-53 * out.abs().max().item()


def test_an_unreduced_stage_attention_sees_no_position():
    model = build(_config("segformer"))
    # stage 1 has sr_ratios 1: its keys are its tokens, not a strided convolution of the patch map
    (attention,) = [m for n, m in attention_modules(model, outside=()) if ".1.blocks.0." in n + "."]
    assert attention.sequence_reduction_ratio == 1
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(1, 4, 16, generator=generator, dtype=torch.float64)
    order = torch.tensor([2, 0, 3, 1])
    gap, bound = _reordered_gap(attention, hidden, order)
    assert gap <= bound, (gap, bound)
    table = torch.randn(1, 4, 16, generator=generator, dtype=torch.float64)  # a wrong answer: a table added first
    wrong, _ = _reordered_gap(attention, hidden, order, table)
    assert wrong > 1e6 * bound, (wrong, bound)


@pytest.mark.parametrize(("model_type", "name"), [("pp_ocrv5_server_rec", "PPOCRV5ServerRecForTextRecognition"),
                                                  ("pp_ocrv6_small_rec", "PPOCRV6SmallRecForTextRecognition"),
                                                  ("pp_ocrv5_mobile_rec", "PPOCRV5MobileRecForTextRecognition")])
def test_a_text_recogniser_s_neck_is_its_only_attention(model_type, name):
    """The SVTR neck is built inside the recognition head (…ForTextRecognition), not in the base model; its depth
    blocks are the model's only attention, of num_attention_heads heads, and nothing is named for positions."""
    config = transformers.AutoConfig.for_model(model_type, hidden_size=16, depth=3, num_attention_heads=2)
    model = getattr(transformers, name)(config)
    found = attention_modules(model, outside=())
    assert [n.split(".")[:2] for n, _ in found] == [["head", "encoder"]] * 3
    assert [heads_of(m) for _, m in found] == _claimed(config.to_dict()) == [2, 2, 2]
    assert _claimed(config.to_dict() | {"depth": 2}) != [heads_of(m) for _, m in found]
    assert not position_tables(model)
