"""The vision, audio and feature side of the survey judged on hand-made runs (no torch): each kind's comparison
grades refpos's answer exact on what refpos itself computes, a deliberately wrong claim wrong, and every
catalogued mistake of the kind's ``refpos check`` target as a wrong answer the observation tells apart."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from survey import pixel_compare, run, store
from survey.pixel_kinds import COMPARISONS, compare_bias_table, compare_conv_position, compare_grid
from survey.pixels import Capture, PixelRun, Site, observed_labels

RNG = np.random.default_rng(37)
VIT = {"model_type": "vit", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8, "image_size": 32,
       "patch_size": 8}


def records(config):
    return list(refpos.model_positions(config).layers)


def grid_run(record, shapes=((1, 3, 32, 32), (1, 3, 48, 64)), table=None):
    """A ViT embedding site whose recorded difference is refpos's own resampled table, as float32."""
    table = RNG.standard_normal((record.table_rows, record.dim)) if table is None else table
    captures = {}
    for name, shape in zip(("native", "resampled"), shapes, strict=True):
        grid = (shape[-2] // 8, shape[-1] // 8)
        added = np.asarray(record.reference(table, grid), dtype=np.float32)[None]
        captures[name] = Capture([added], [np.zeros_like(added)])
    site = Site("embeddings.position_embeddings", "embeddings", False,
                {"embeddings.position_embeddings": table[None].astype(np.float32)}, captures=captures)
    return PixelRun("ViTModel", "pixel_values", {n: list(s) for n, s in zip(("native", "resampled"), shapes,
                                                                             strict=True)},
                    [site], attention=["ViTAttention"])


def test_a_grid_is_exact_and_each_catalogued_mistake_is_told_apart():
    grid = records(VIT)[0]
    outcome = compare_grid(grid, grid_run(grid), grid_run(grid).sites)
    assert outcome.status == "exact", outcome.cause
    assert outcome.tried >= 5 and outcome.survived == []  # bilinear, align_corners, antialias, CLS, axes, offset


@pytest.mark.parametrize("wrong", [{"way": "bilinear"}, {"prefix": 0}, {"way": "bicubic_float32"}])
def test_a_wrong_grid_claim_is_graded_wrong(wrong):
    grid = records(VIT)[0]
    observed = grid_run(grid)
    claim = dataclasses.replace(grid, **({"way": wrong["way"]} if "way" in wrong else wrong))
    if "prefix" in wrong:  # a table without its CLS row: the site's table no longer has the claimed size
        claim = dataclasses.replace(claim, dim=grid.dim)
    outcome = compare_grid(claim, observed, observed.sites)
    assert outcome.status in ("wrong", "exact")
    if wrong == {"way": "bicubic_float32"}:  # the same resampling computed in float32: a correct port
        assert outcome.status == "exact"
    else:
        assert outcome.status == "wrong", outcome


def test_only_the_native_size_cannot_tell_a_resampling_mistake():
    grid = records(VIT)[0]
    observed = grid_run(grid, shapes=((1, 3, 32, 32), (1, 3, 32, 32)))
    outcome = compare_grid(grid, observed, observed.sites)
    assert outcome.status == "exact" and "grid_bilinear_for_bicubic" in outcome.survived


def conv_run(record, x, weights):
    from refpos.encodings.conv_position_mistakes import ConvPositionInputs

    v, g, bias = weights
    e = ConvPositionInputs("weight_norm", x, (v,), (bias,), record.groups, record.activation,
                           weight_g=g).reference() - x
    site = Site("encoder.pos_conv_embed", "encoder", True, {
        "encoder.pos_conv_embed.conv.bias": bias, "encoder.pos_conv_embed.conv.parametrizations.weight.original0":
        g.reshape(1, 1, -1), "encoder.pos_conv_embed.conv.parametrizations.weight.original1": v},
        captures={"native": Capture(module_in=x.astype(np.float32), module_out=e.astype(np.float32))})
    return PixelRun("Wav2Vec2Model", "input_values", {"native": [1, 400]}, [site], attention=["Wav2Vec2Attention"])


def test_a_convolutional_position_is_exact_and_a_wrong_claim_is_not():
    config = {"model_type": "wav2vec2", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
              "num_conv_pos_embeddings": 4, "num_conv_pos_embedding_groups": 2}
    record = records(config)[0]
    weights = (RNG.standard_normal((8, 4, 4)), RNG.uniform(0.5, 1.5, 4), 0.1 * RNG.standard_normal(8))
    observed = conv_run(record, RNG.standard_normal((1, 12, 8)), weights)
    outcome = compare_conv_position(record, observed, observed.sites)
    assert outcome.status == "exact" and outcome.tried >= 5 and outcome.survived == [], outcome
    for wrong in ({"groups": 1}, {"activation": "gelu_new"}, {"kernel": 3, "groups": 4}):
        claim = dataclasses.replace(record, **wrong)
        assert COMPARISONS["conv_position"].judge(claim, observed, observed.sites).status == "wrong", wrong


def test_a_window_bias_is_exact_and_the_index_off_by_one_is_told_apart():
    from refpos.encodings.bias_table_mistakes import BiasTableInputs

    config = {"model_type": "swin", "depths": [1], "num_heads": [2], "embed_dim": 8, "window_size": 3,
              "image_size": 24, "patch_size": 4}
    record = next(r for r in records(config) if r.kind == "bias_table")
    table = RNG.standard_normal((25, 2))
    bias = BiasTableInputs("swin", record.window, table=table).reference()
    site = Site("encoder.layers.0.blocks.0.attention.relative_position_bias", "encoder.layers.0.blocks.0.attention",
                True, {"relative_position_bias_table": table.astype(np.float32)},
                captures={"native": Capture(module_out=bias[None].astype(np.float32))})
    observed = PixelRun("SwinModel", "pixel_values", {"native": [1, 3, 24, 24]}, [site], attention=["SwinAttention"])
    outcome = compare_bias_table(record, observed, observed.sites)
    assert outcome.status == "exact" and outcome.survived == [], outcome
    assert outcome.tried >= 3
    wrong = compare_bias_table(dataclasses.replace(record, form="beit"), observed, observed.sites)
    assert wrong.status == "wrong"


def test_a_model_without_positions():
    cnn = PixelRun("ConvNextModel", "pixel_values", {"native": [1, 3, 64, 64], "resampled": [1, 3, 96, 96]})
    claims = [type("NoAttention", (), {"kind": "no_attention", "stack": "vision", "index": 0})()]
    outcomes = pixel_compare.judge_records(claims, cnn)
    assert [o.status for o in outcomes] == ["exact"] and outcomes[0].tried == 2 and not outcomes[0].survived
    with_attention = dataclasses.replace(cnn, attention=["SomeAttention"])
    assert pixel_compare.judge_records(claims, with_attention)[-1].status == "wrong"
    grid = records(VIT)[0]
    vit = grid_run(grid)  # a ViT whose table refpos's answer leaves out: wrong
    assert pixel_compare.judge_records([r for r in records(VIT) if r.kind == "none"], vit)[-1].status == "wrong"


def test_a_pixel_observation_is_judged_and_stored_as_written(tmp_path):
    grid = records(VIT)[0]
    seen = run.Observation(VIT, None, run.Row("vit", "not reached"), stacks={"pixels": grid_run(grid)})
    path = store.path_of(tmp_path, "vit")
    store.save(seen, path)
    back = store.load(path)
    assert back.stacks["pixels"].sites[0].captures["resampled"].owner_out[0].shape == (1, 1 + 6 * 8, 8)
    row = run.judge(back)
    assert row.status == "exact" and row.observed == ["table at the input"], row.cause
    assert observed_labels(dataclasses.replace(back.stacks["pixels"], sites=[], attention=[])) == ["no attention"]


def test_every_comparison_names_what_it_observes():
    assert set(COMPARISONS) >= {"grid", "conv_position", "bias_table"}
    assert all(c.observed for c in COMPARISONS.values())


def test_the_page_counts_the_vision_and_audio_rows_per_kind():
    from survey import pixel_table, table

    def row(name, status, claimed, note="run on its pixel_values (M): native [1, 3, 8, 8]", cause=""):
        return {"model_type": name, "status": status, "claimed": claimed, "notes": [note], "cause": cause,
                "observed": ["none"], "layers": "", "max_error": None, "file": ""}

    rows = [row("a", "exact", ["grid", "none"]), row("b", "exact", ["grid", "none"]), row("c", "wrong", ["grid"]),
            row("d", "exact", ["no_attention"]), row("e", "refused", ["refused"]),
            row("f", "not reached", [], note="x", cause="transformers not run: its forward takes no input_ids (x)"),
            row("g", "exact", ["rope"], note="a text model")]
    lines = pixel_table.section(rows, table.STATUSES, "5.25.0")
    assert "| grid | 2 | 0 | 1 | 0 | 0 | 3 |" in lines and "| no_attention | 1 | 0 | 0 | 0 | 0 | 1 |" in lines
    assert "| not answered | 0 | 1 | 0 | 0 | 1 | 2 |" in lines and not any(line.startswith("| rope") for line in lines)
    assert pixel_table.section([rows[-1]], table.STATUSES, "5.25.0") == []


def table_run(table, rows, at_dim):
    """An audio or video embedding site that adds rows ``0 … rows − 1`` of ``table``."""
    added = table[:rows][None].astype(np.float32)
    site = Site("embed_positions", "", True, {"embed_positions.weight": table.astype(np.float32)},
                captures={"native": Capture([added], [np.zeros_like(added)])}, at=": the first layer's input")
    return PixelRun("AudioEncoder", "input_features", {"native": [1, 8, 2 * rows]}, [site], attention=["Attention"])


def test_a_learned_table_is_read_from_its_first_row_and_a_shifted_claim_is_wrong():
    config = {"model_type": "qwen2_audio_encoder", "encoder_layers": 1, "encoder_attention_heads": 2, "d_model": 8,
              "max_source_positions": 16, "num_mel_bins": 8}
    record = records(config)[0]
    observed = table_run(RNG.standard_normal((16, 8)), 10, 8)
    outcome = COMPARISONS["learned"].judge(record, observed, observed.sites)
    assert outcome.status == "exact" and outcome.tried == 2 and not outcome.survived  # rows from -1 and 1
    for wrong in ({"offset": 1}, {"dim": 4}):
        assert COMPARISONS["learned"].judge(dataclasses.replace(record, **wrong), observed,
                                            observed.sites).status == "wrong", wrong


def test_a_sinusoid_table_is_the_variants_and_its_catalogued_mistakes_are_told_apart():
    config = {"model_type": "videomae", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
              "image_size": 32, "patch_size": 16, "num_frames": 4, "tubelet_size": 2}
    record = records(config)[0]
    table = np.asarray(record.reference(positions=np.arange(8)), dtype=np.float64)
    observed = table_run(table, 8, 8)
    outcome = COMPARISONS["sinusoid1d"].judge(record, observed, observed.sites)
    assert outcome.status == "exact" and outcome.tried >= 2 and not outcome.survived, outcome
    wrong = table.reshape(8, 4, 2)[..., ::-1].reshape(8, 8)  # sin and cos of each pair swapped
    swapped = table_run(wrong, 8, 8)
    assert COMPARISONS["sinusoid1d"].judge(record, swapped, swapped.sites).status == "wrong"


def test_a_pixel_run_that_fails_keeps_its_reason_in_the_notes(monkeypatch):
    """A model type refpos refuses has its row's cause replaced by the refusal; why its pixel run failed must stay
    in the notes (it once read only "its forward takes no input_ids")."""
    from survey import pixels

    def fails(config0, max_parameters):
        raise pixels.NotRun("no geometry built and ran on its inputs (tiny: the model's own error)")

    monkeypatch.setattr(pixels, "build_pixels", fails)
    first = f"transformers not run: {pixels.NO_TOKEN_IDS} (pixel_values, ...)"
    row = run.Row("a_vision_model", "not reached", cause=first, notes=[first])
    assert pixels.observe_row(object(), row, 1) is None
    assert row.notes == ["transformers not run: no geometry built and ran on its inputs (tiny: the model's own error)"]
    assert row.cause == row.notes[0]


def test_the_inputs_of_towers_fed_flat_patches_and_models_of_towers():
    """A forward taking a grid beside ``pixel_values`` is fed flattened patches (the rows, the patches, then a batch
    of them), under whichever name it takes the grid by; a model of towers without an image size of its own is fed
    the plain size and then its tower's (SAM's model refuses any other); a clip is also fed as a batch of its frames
    (X-CLIP's)."""
    from types import SimpleNamespace

    from survey.pixel_inputs import candidates
    from survey.pixel_records import grid_input

    assert grid_input({"pixel_values": 0, "grid_thw": 0}) == "grid_thw"
    assert grid_input({"pixel_values": 0, "image_grid_thw": 0}) == "image_grid_thw"
    assert grid_input({"pixel_values": 0}) is None
    tower = SimpleNamespace(in_channels=3, temporal_patch_size=2, patch_size=14, spatial_merge_size=2)
    flat = candidates("pixel_values", tower, flat=True)
    assert flat["native"] == [(16, 3 * 2 * 14 * 14), (16, 3, 14, 14), (1, 16, 3, 14, 14)]
    assert flat["resampled"][0] == (24, 1176)
    model = SimpleNamespace(vision_config=SimpleNamespace(image_size=256, patch_size=16))
    native = candidates("pixel_values", model)["native"]
    assert native[0] == (1, 3, 64, 64) and (1, 3, 256, 256) in native[3:]
    clip = SimpleNamespace(image_size=32, patch_size=16, num_frames=8)
    assert (8, 3, 32, 32) in candidates("pixel_values", clip)["native"]
    hiera = SimpleNamespace(vision_config=SimpleNamespace(backbone_config=SimpleNamespace(image_size=[256, 256])))
    assert (1, 3, 256, 256) in candidates("pixel_values", hiera)["native"]  # SAM 2: its tower's backbone's size


def test_the_inputs_of_clips_spectrograms_embeddings_and_their_masks():
    """A clip's input is fed a clip first; an input of embeddings ``(1, rows, width)`` for each width the config
    states; a mask the forward requires is fed over the input's rows, all ones, and a mask of padding all False."""
    pytest.importorskip("torch", reason="builds torch tensors: pip install torch")
    import inspect
    from types import SimpleNamespace

    from survey import pixel_beside
    from survey.pixel_beside import Try
    from survey.pixel_inputs import candidates

    clip = SimpleNamespace(image_size=32, patch_size=16, num_frames=4)
    assert candidates("pixel_values_videos", clip)["native"][0] == (1, 4, 3, 32, 32)
    for name in ("hidden_states", "inputs_embeds", "context", "query_embeds"):
        assert candidates(name, SimpleNamespace(input_dim=80, hidden_size=64))["native"][:3] == [
            (1, 16, 80), (1, 80, 16), (1, 16, 64)]

    def forward(audio_mel, audio_mel_mask, mask, optional_mask=None):
        """A forward requiring two masks, one of padding."""

    masks = pixel_beside.masks(Try(inspect.signature(forward).parameters, None, "audio_mel", (1, 16, 80)), {})
    assert sorted(masks) == ["audio_mel_mask", "mask"]
    assert masks["mask"].shape == (1, 16) and bool(masks["mask"].all())
    assert masks["audio_mel_mask"].shape == (1, 16) and not bool(masks["audio_mel_mask"].any())
    import torch

    def codec(input_values, input_features, input_features_mask=None):
        """A codec's forward: its waveform, and features of another length beside it."""

    features = {"input_features": torch.zeros((1, 20, 160))}
    masks = pixel_beside.masks(Try(inspect.signature(codec).parameters, None, "input_values", (1, 6400)), features)
    assert masks["input_features_mask"].shape == (1, 20)  # over the features' frames, not the samples


def test_a_site_missing_from_a_run_fed_embeddings_is_not_reached():
    """A run fed embeddings (a head fed its backbone's features) may lack a table added before them: its absence
    is not reached there, and wrong where the model was fed its pixels."""
    from survey.pixel_kinds.base import absent

    fed_pixels = PixelRun("Model", "pixel_values")
    fed_features = PixelRun("Head", "hidden_states")
    assert absent(fed_pixels, "no position table").status == "wrong"
    assert absent(fed_features, "no position table").status == "not reached"


def test_a_lagged_forecaster_is_fed_its_lags_time_features_and_horizon():
    """A lagged forecaster reads ``max(lags_sequence)`` steps before its context, takes each step's time features
    and runs its decoder over ``prediction_length`` future values; any other forward is fed none of these."""
    pytest.importorskip("torch", reason="builds torch tensors: pip install torch")
    import inspect
    from types import SimpleNamespace

    from survey.pixel_inputs import candidates, series_inputs

    config = SimpleNamespace(context_length=24, lags_sequence=[1, 2, 7], num_time_features=2, prediction_length=24)
    assert candidates("past_values", config)["native"][0] == (1, 31)

    def forecaster(past_values, past_time_features, past_observed_mask, future_values=None,
                   future_time_features=None):
        """A forecaster's forward."""

    def patch_model(past_values, past_observed_mask=None):
        """PatchTST's forward: no time features."""

    fed = series_inputs(inspect.signature(forecaster).parameters, config, (1, 31))
    assert fed["past_time_features"].shape == (1, 31, 2)
    assert fed["future_values"].shape == (1, 24) and fed["future_time_features"].shape == (1, 24, 2)
    assert series_inputs(inspect.signature(patch_model).parameters, config, (1, 31)) == {}


def test_a_decision_transformer_is_fed_a_trajectory():
    """A Decision Transformer's ``states`` come with each step's action, return to go and timestep, at the
    config's state and action widths; any other forward is fed none of these."""
    pytest.importorskip("torch", reason="builds torch tensors: pip install torch")
    import inspect
    from types import SimpleNamespace

    from survey.pixel_inputs import candidates, trajectory_inputs

    config = SimpleNamespace(state_dim=17, act_dim=4)
    assert candidates("states", config)["native"] == [(1, 8, 17)]

    def forward(states=None, actions=None, rewards=None, returns_to_go=None, timesteps=None, attention_mask=None):
        """A Decision Transformer's forward."""

    fed = trajectory_inputs(inspect.signature(forward).parameters, config, (1, 8, 17))
    assert fed["actions"].shape == (1, 8, 4) and fed["returns_to_go"].shape == (1, 8, 1)
    assert fed["timesteps"].tolist() == [list(range(8))]
    assert trajectory_inputs(inspect.signature(lambda states: None).parameters, config, (1, 8, 17)) == {}


def test_features_are_fed_at_every_width_the_config_states():
    """An audio encoder's features are tried at each width its config states (mel bins first, then the frames it
    stacks into one row: wav2vec2-BERT's 160), then as one channel of the first (CLAP's ``(1, 1, frames, bins)``),
    then at four times the first width (Granite Speech 5's bins with deltas, two frames stacked: ``(1, frames, 4 ·
    bins)``); embeddings also at the ``input_size`` a config states (Phi-4-MM's audio encoder)."""
    from types import SimpleNamespace

    from survey.pixel_inputs import candidates

    stacked = candidates("input_features", SimpleNamespace(num_mel_bins=80, feature_projection_input_dim=160))
    assert stacked["native"][:4] == [(1, 80, 64), (1, 64, 80), (80, 64), (1, 160, 64)]
    assert stacked["native"][-2:] == [(1, 1, 64, 80), (1, 64, 320)]
    assert (1, 16, 80) in candidates("hidden_states", SimpleNamespace(input_size=80, hidden_size=64))["native"]


def test_a_timm_tower_is_fed_the_size_its_architecture_is_made_for():
    """A vision tower built by timm states no image size in its config, only its architecture: timm's default
    configuration of that architecture gives it (PE video's tower takes 336 pixels and no other)."""
    pytest.importorskip("timm", reason="reads timm's default configurations: pip install timm")
    from types import SimpleNamespace

    from survey.pixel_inputs import candidates

    video = SimpleNamespace(vision_config=SimpleNamespace(architecture="vit_pe_core_large_patch14_336"))
    assert (1, 3, 336, 336) in candidates("pixel_values", video)["native"]
    unknown = SimpleNamespace(vision_config=SimpleNamespace(architecture="no_such_architecture"))
    assert all(shape[-1] == 64 for shape in candidates("pixel_values", unknown)["native"])


def test_audio_of_whole_tokens_and_the_task_tokens_a_config_states():
    """An audio encoder taking whole tokens of samples (Muse Spark's, ``samples_per_token``) is fed two and three
    tokens' worth; a forward taking task tokens (OneFormer's) is fed ``task_seq_len`` of them."""
    pytest.importorskip("torch", reason="builds torch tensors: pip install torch")
    import inspect
    from types import SimpleNamespace

    from survey.pixel_beside import Try, beside
    from survey.pixel_inputs import candidates

    audio = candidates("input_values", SimpleNamespace(samples_per_token=1920))
    assert (1, 3840) in audio["native"] and (1, 5760) in audio["resampled"]
    def forward(pixel_values, task_inputs):
        """OneFormer's: its image and its task tokens."""

    at = Try(inspect.signature(forward).parameters, SimpleNamespace(task_seq_len=77), "pixel_values", (1, 3, 64, 64))
    tokens = beside(at)["task_inputs"]
    assert tuple(tokens.shape) == (1, 77)


def test_flattened_patches_carry_their_row_and_column():
    """Pix2Struct's flattened patches carry each patch's row and column, counted from 1, in their first two
    entries (its learned row and column tables read them); the pixels follow."""
    pytest.importorskip("torch", reason="builds torch tensors: pip install torch")
    import torch

    from survey.pixel_inputs import candidates, number_patches

    shapes = candidates("flattened_patches", object())
    assert shapes["native"] == [(1, 16, 770)] and shapes["resampled"] == [(1, 24, 770)]
    patches = number_patches(torch.zeros((1, 24, 770)))
    assert patches[0, :7, 0].tolist() == [1, 1, 1, 1, 1, 1, 2] and patches[0, :7, 1].tolist() == [1, 2, 3, 4, 5, 6, 1]
    assert patches[0, -1, :2].tolist() == [4, 6] and not patches[..., 2:].any()


def test_the_counts_an_encoder_takes_beside_its_input():
    """DeepSeek-OCR-2's encoder is told how many of its rows are image patches (half), Dots3's audio encoder each
    chunk's samples (its frames at a hop of 160)."""
    pytest.importorskip("torch", reason="builds torch tensors: pip install torch")
    import inspect

    from survey.pixel_beside import HOP, Try, beside

    def forward(hidden_states, num_patches, chunk_sample_lengths):
        """Both counts beside the input."""

    fed = beside(Try(inspect.signature(forward).parameters, None, "hidden_states", (1, 16, 512)))
    assert fed["num_patches"] == 8
    fed = beside(Try(inspect.signature(forward).parameters, None, "hidden_states", (1, 128, 64)))
    assert fed["chunk_sample_lengths"].tolist() == [64 * HOP]


def test_a_codec_is_fed_semantic_features_beside_its_waveform():
    """X-Codec 2 and NeuCodec read a wav2vec2-BERT's stacked features beside the waveform: one frame per 320
    samples, at the width the semantic model's config states."""
    pytest.importorskip("torch", reason="builds torch tensors: pip install torch")
    import inspect
    from types import SimpleNamespace

    from survey.pixel_beside import Try, beside

    def codec(input_values, input_features):
        """A codec's forward: its waveform and its semantic features."""

    config = SimpleNamespace(semantic_model_config=SimpleNamespace(feature_projection_input_dim=160))
    features = beside(Try(inspect.signature(codec).parameters, config, "input_values", (1, 6400)))["input_features"]
    assert tuple(features.shape) == (1, 20, 160)
