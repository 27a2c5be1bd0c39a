"""The linearity probe of a table read at its owner's tensors (survey/pixel_kinds/base.py after_normalisation), on
hand-made runs (no torch): BART's encoder adds its learned table and then normalises (``layernorm_embedding``) in
its own forward, read at the first layer's input. There the table's effect is no table: the comparison says it is
not compared (the survey's limit), where without the probe it reported a difference. At a linear reading site the
right table is exact and a wrong one is still graded wrong; a run recorded without the doubled output is judged as
before."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from survey.pixel_kinds import COMPARISONS
from survey.pixel_kinds.base import after_normalisation
from survey.pixels import Capture, PixelRun, Site

RNG = np.random.default_rng(11)
DIM, ROWS, OFFSET = 8, 18, 2


def _record():
    answer = refpos.model_positions({"model_type": "bart", "d_model": DIM, "encoder_layers": 1, "decoder_layers": 1,
                                     "encoder_attention_heads": 2, "decoder_attention_heads": 2,
                                     "max_position_embeddings": ROWS - OFFSET, "vocab_size": 50})
    return next(r for r in answer.layers if r.stack == "encoder" and r.kind == "learned")


def _layer_norm(x: np.ndarray) -> np.ndarray:
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5)


def _run(read, table: np.ndarray, doubled: bool = True) -> PixelRun:
    """An encoder fed 12 embeddings whose first layer's input is ``read(x + rows OFFSET… of the table)``, recorded as
    run, with the table zeroed and (where ``doubled``) doubled."""
    x = RNG.standard_normal((1, 12, DIM))
    rows = table[OFFSET:OFFSET + 12][None]
    capture = Capture([read(x + rows)], [read(x)], module_in=x[..., -1], module_out=rows,
                      owner_doubled=[read(x + 2 * rows)] if doubled else [])
    site = Site("encoder.embed_positions", "encoder", True, {"encoder.embed_positions.weight": table.astype(
        np.float32)}, captures={"native": capture}, at="encoder: the first layer's input")
    return PixelRun("BartModel", "inputs_embeds", {"native": [1, 12, DIM]}, [site], attention=["BartAttention"],
                    dtype="float64")


TABLE = RNG.standard_normal((ROWS, DIM)).astype(np.float32).astype(np.float64)


def _judge(record, run):
    return COMPARISONS["learned"].judge(record, run, run.sites)


def test_a_table_read_after_a_normalisation_is_not_compared():
    run = _run(_layer_norm, TABLE)
    outcome = _judge(_record(), run)
    assert outcome.status == "not reached", outcome
    assert "not compared: the reading site (encoder: the first layer's input) is after a normalisation" in \
        outcome.cause
    assert outcome.sites == ("encoder.embed_positions",)


def test_without_the_probe_the_normalised_table_reads_as_a_difference():
    """The same run recorded without the doubled output (as before the probe): the difference is reported."""
    outcome = _judge(_record(), _run(_layer_norm, TABLE, doubled=False))
    assert outcome.status == "wrong" and "differs by" in outcome.cause


def test_at_a_linear_site_the_right_table_is_exact_and_a_wrong_one_is_wrong():
    record = _record()
    run = _run(lambda v: v, TABLE)
    assert after_normalisation(run.sites, run) is None
    outcome = _judge(record, run)
    assert outcome.status == "exact" and outcome.tried == 2 and outcome.survived == [], outcome
    assert _judge(dataclasses.replace(record, offset=0), run).status == "wrong"  # rows read from 0, not 2
    shifted = _run(lambda v: v, np.roll(TABLE, 1, axis=0))  # the model reads another row than its weight's
    shifted.sites[0].params = {"encoder.embed_positions.weight": TABLE.astype(np.float32)}
    assert _judge(record, shifted).status == "wrong"


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_a_linear_site_scaled_after_the_sum_stays_linear(scale):
    """A reading site that is linear but not the sum (a scale after it) passes the probe: the comparison, not the
    probe, then judges the rows (wrong at 0.5, where the rows read are half the table's)."""
    run = _run(lambda v: scale * v, TABLE)
    assert after_normalisation(run.sites, run) is None
    assert _judge(_record(), run).status == ("exact" if scale == 1.0 else "wrong")


def test_the_probe_reads_every_size_and_ignores_an_unrecorded_doubled_output():
    run = _run(lambda v: v, TABLE)
    normalised = _run(_layer_norm, TABLE).sites[0].captures["native"]
    run.sites[0].captures["resampled"] = normalised
    assert "at the resampled size" in after_normalisation(run.sites, run).cause
    run.sites[0].captures["resampled"] = dataclasses.replace(normalised, owner_doubled=[])
    assert after_normalisation(run.sites, run) is None


def _normalised(capture_rows: np.ndarray) -> Capture:
    """A capture whose owner adds ``capture_rows`` to seeded embeddings and normalises the sum, run as the model
    is, with the table zeroed and doubled."""
    x = RNG.standard_normal(capture_rows.shape)
    return Capture([_layer_norm(x + capture_rows)], [_layer_norm(x)], module_in=x[..., -1],
                   owner_doubled=[_layer_norm(x + 2 * capture_rows)])


def test_a_built_table_is_still_compared_where_its_rows_are_read_after_a_normalisation():
    """A table the model's code builds (a sin–cos grid, a sinusoid) whose rows are read after a normalisation: the
    rows not compared, the built table still is — not compared where it is right, wrong where it is not."""
    from survey.pixel_kinds import compare_sincos2d
    from survey.tests.test_pixel_audio import WHISPER, whisper_run
    from survey.tests.test_pixel_sincos2d import mae_run, sincos

    record = sincos()
    run = mae_run(record)
    site = run.sites[0]
    site.captures = {size: _normalised(c.owner_out[0].astype(np.float64)) for size, c in site.captures.items()}
    outcome = compare_sincos2d(record, run, run.sites)
    assert outcome.status == "not reached" and "after a normalisation" in outcome.cause, outcome
    built = site.initial["embeddings.position_embeddings"]
    half = built.shape[-1] // 2
    site.initial["embeddings.position_embeddings"] = np.concatenate([built[..., half:], built[..., :half]], axis=-1)
    assert compare_sincos2d(record, run, run.sites).status == "wrong"

    sinusoidal = next(r for r in refpos.model_positions(WHISPER).layers if r.kind == "sinusoidal")
    table = np.asarray(sinusoidal.sinusoid(np.arange(16)), dtype=np.float32)
    for built_table, status in ((table, "not reached"), (np.roll(table, 4, axis=1), "wrong")):
        audio = whisper_run(built_table)
        encoder = audio.sites[0]
        encoder.captures = {"native": _normalised(encoder.params["encoder.embed_positions.weight"][None].astype(
            np.float64))}
        outcome = COMPARISONS["sinusoidal"].judge(sinusoidal, audio, audio.sites)
        assert outcome.status == status and (status == "wrong" or "after a normalisation" in outcome.cause), outcome
