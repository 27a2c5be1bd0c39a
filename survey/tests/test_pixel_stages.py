"""The stages of a network whose attention has no positions (survey.pixel_stages): a small SegFormer run by the
survey records its attention cores in call order with the heads each states; refpos's stages judged against them
exact with every wrong stage answer caught, a wrong claim (depths, heads) graded wrong, and a run without cores
not certified."""

from __future__ import annotations

import dataclasses

import pytest

from survey.pixel_records import PixelRun
from survey.pixel_stages import claims, mismatch, mutants, stage_outcomes

CONFIG = {"model_type": "segformer", "num_encoder_blocks": 2, "depths": [1, 2], "hidden_sizes": [8, 16],
          "num_attention_heads": [1, 2], "sr_ratios": [2, 1], "patch_sizes": [7, 3], "strides": [4, 2],
          "mlp_ratios": [2, 2], "decoder_hidden_size": 8}
#: what the run of CONFIG records (the torch test below checks it)
CORES = [["block.0.0.attention", 1, 8], ["block.1.0.attention", 2, 8], ["block.1.1.attention", 2, 8]]


def _records(config):
    import refpos

    return list(refpos.model_positions(config).layers)


def _run(cores):
    return PixelRun("SegformerModel", "pixel_values", attention=["SegformerAttention"], cores=cores)


def test_the_right_stages_are_exact_and_every_wrong_one_caught():
    (outcome,) = stage_outcomes(_records(CONFIG), CONFIG, _run(CORES))
    assert outcome.status == "exact" and outcome.survived == []
    # a head more in each stage, stage 0's layer moved to stage 1, a layer more, a rotation
    assert outcome.tried == 5


@pytest.mark.parametrize("wrong", [{"depths": [2, 1]}, {"num_attention_heads": [1, 4]}, {"depths": [1, 3]},
                                   {"hidden_sizes": [8, 32]}])
def test_a_wrong_stage_claim_is_graded_wrong(wrong):
    config = CONFIG | wrong
    (outcome,) = stage_outcomes(_records(config), config, _run(CORES))
    assert outcome.status == "wrong", outcome


def test_each_mutant_is_a_different_claim_that_the_cores_refuse():
    from refpos.models.schedule import stages_of

    stages = stages_of(CONFIG)
    for name, claim in mutants(stages).items():
        assert claim != claims(stages), name
        assert mismatch(claim, CORES) is not None, name


def test_a_run_without_cores_is_not_certified():
    (outcome,) = stage_outcomes(_records(CONFIG), CONFIG, _run([]))
    assert outcome.status == "not reached" and "cannot observe the stages' attention" in outcome.cause


def test_cores_that_do_not_state_their_heads_leave_the_head_mutants_surviving():
    (outcome,) = stage_outcomes(_records(CONFIG), CONFIG, _run([[path, None, None] for path, _, _ in CORES]))
    assert outcome.status == "exact"
    assert "stage_0 with one head more" in outcome.survived and "one layer more in the last stage" not in \
        outcome.survived


def test_a_rotation_found_in_the_run_leaves_the_rotation_mutant_surviving():
    run = dataclasses.replace(_run(CORES), applied={"native": ["a call"]})
    (outcome,) = stage_outcomes(_records(CONFIG), CONFIG, run)
    assert outcome.survived == ["a rotation in the stages' layers"]


def test_a_small_segformer_run_records_its_cores_in_call_order():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import SegformerConfig, SegformerModel

    from survey.pixels import observe_pixels

    config = SegformerConfig(**{k: v for k, v in CONFIG.items() if k != "model_type"})
    torch.manual_seed(0)
    run = observe_pixels(SegformerModel(config), config)
    assert [core[1:] for core in run.cores] == [core[1:] for core in CORES]
    assert [core[0].split(".")[-1] for core in run.cores] == ["attention"] * 3
    (outcome,) = stage_outcomes(_records(CONFIG), CONFIG, run)
    assert outcome.status == "exact" and outcome.survived == []


def test_a_text_recogniser_is_run_with_its_head_where_its_neck_attends():
    transformers = pytest.importorskip("transformers")
    from survey.catalogue import model_class, pixel_class

    config = transformers.AutoConfig.for_model("pp_ocrv5_server_rec")
    assert model_class(config).__name__ == "PPOCRV5ServerRecModel"
    assert pixel_class(config).__name__ == "PPOCRV5ServerRecForTextRecognition"
    segformer = transformers.AutoConfig.for_model("segformer")
    assert pixel_class(segformer) is model_class(segformer)


def test_a_backbone_without_attention_is_told_from_attention_when_the_cores_are_the_stages():
    from refpos.models.records import NoAttention, NoPositions
    from survey.pixel_compare import whole_run

    records = [NoPositions("vision", 0, "stage_0"), NoPositions("vision", 1, "stage_0"),
               NoAttention("backbone", 0, None, mixer="conv")]
    run = _run(CORES[:2])
    assert whole_run(records, run, []).survived == []
    # a core the stages do not account for: the backbone answered as attention would find it
    assert whole_run(records, _run(CORES), []).survived == ["attention without positions"]


def test_a_core_that_states_no_heads_is_read_off_its_softmax():
    """A single-head core stating no head count (WavTokenizer's ``WavTokenizerVocosAttention``) scores ``(B, T, T)``:
    one head; the same core scoring two heads, ``(2B, T, T)``, shows two; a fused kernel calls no softmax, and its
    heads stay unknown."""
    torch = pytest.importorskip("torch")
    from survey.pixel_stages import watch_cores

    class OneAttention(torch.nn.Module):
        def __init__(self, heads):
            super().__init__()
            self.heads = heads

        def forward(self, x):  # x (B, T, C)
            b, t, c = x.shape
            q = x.reshape(b, t, self.heads, c // self.heads).transpose(1, 2).reshape(b * self.heads, t, -1)
            scores = torch.nn.functional.softmax(q @ q.transpose(1, 2), dim=-1)
            return (scores @ q).reshape(b, self.heads, t, -1).transpose(1, 2).reshape(b, t, c)

    class FusedAttention(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.scaled_dot_product_attention(x, x, x)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([OneAttention(1), OneAttention(2), FusedAttention()])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    model = Net()
    with watch_cores(model) as watch:
        model(torch.randn(3, 5, 8))
    assert [heads for _, heads, _ in watch.found()] == [1, 2, None]
