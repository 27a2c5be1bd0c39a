"""The rows a position table is read at in every case (survey/table_rows.py), on hand-made runs (no torch): OPT's
mask count is exact and π0's count, BLOOM's and the slot are told apart on the cases without ids; RoBERTa's ids
passed are read as rows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from refpos.models.sources import derived
from survey import cases
from survey.claims import LayerClaim
from survey.records import Lookup, Run
from survey.table_rows import case_rows

TABLE = "decoder.embed_positions.weight"


def probe_reading(rows_of):
    """A probe whose every case looked ``TABLE`` up at ``rows_of(case)``."""
    made = cases.cases_for({}, np.arange(8), True)
    for case in made:
        rows = rows_of(case)
        case.run = Run(lookups=[Lookup(TABLE, rows[None, :], 64, np.zeros((1, rows.size, 2)), True)])
    return SimpleNamespace(a=Run(), cases=made, positions=np.arange(8), position_ids_taken=True)


def opt_rows(case):
    """OPT's model: the ids passed plus 2, else the mask count ``Σm·m − 1`` plus 2."""
    if case.position_ids is not None:
        return case.position_ids[-(case.queries or case.slots.size):] + 2
    mask = np.ones(case.slots.size, dtype=np.int64) if case.attention_mask is None else case.attention_mask
    return derived("mask_count", None, mask) + 2


def claim(*source):
    return LayerClaim("decoder", -1, "learned", reads={"rows": source}, params={"offset": 2})


def test_opt_s_mask_count_is_exact_and_the_other_counts_are_not():
    probe = probe_reading(opt_rows)
    assert case_rows(claim("position_ids", "mask_count"), probe, TABLE, 2).status == "exact"
    for other in ("mask_cumsum", "mask_cumsum_minus_one", "cache_position"):
        found = case_rows(claim("position_ids", other), probe, TABLE, 2)
        assert found is not None and found.status == "mismatch", other
    pi0 = case_rows(claim("position_ids", "mask_cumsum_minus_one"), probe, TABLE, 2)
    assert pi0.cause.startswith("masked inside, no ids")  # left padding alone puts both at −1


def test_without_the_case_with_a_hole_pi0_s_count_passes_for_opt_s():
    """The case the hole adds is what tells them apart: left out, π0's count survives."""
    probe = probe_reading(opt_rows)
    probe.cases = [c for c in probe.cases if c.name != "masked inside, no ids"]
    assert case_rows(claim("position_ids", "mask_cumsum_minus_one"), probe, TABLE, 2).status == "exact"


def test_roberta_s_ids_passed_are_its_rows():
    """RoBERTa reads an id passed as its row, and counts from padding_idx + 1 (the slot plus 2, unpadded) when
    it builds them: refpos's ``row_ids`` is exact; the ids plus the offset are two rows off."""
    def roberta_rows(case):
        if case.position_ids is not None:
            return case.position_ids[-(case.queries or case.slots.size):]
        return case.slots[-(case.queries or case.slots.size):] + 2

    probe = probe_reading(roberta_rows)
    assert case_rows(claim("row_ids", "cache_position"), probe, TABLE, 2).status == "exact"
    wrong = case_rows(claim("position_ids", "cache_position"), probe, TABLE, 2)
    assert wrong is not None and "transformers reads rows" in wrong.cause


def test_a_sinusoid_in_every_case_is_compared_and_a_shifted_one_is_not_exact():
    """A sinusoid computed by a module (``positional``): refpos's at the case's rows is exact within the float32
    bound (the model's output rounded to float32); the same sinusoid one row on, or with the padding row not
    zeroed where the model zeroes it, is a mismatch."""
    from refpos.encodings.sinusoidal import sinusoidal
    from survey.table_rows import case_sinusoid

    def table(rows, padding_row=None):
        return np.asarray(sinusoidal(rows - 2, 8, offset=2, spacing="tensor2tensor", layout="concat",
                                     padding_row=padding_row, xp=np), dtype=np.float32)

    def probe_adding(shift=0, padding_row=None):
        made = cases.cases_for({}, np.arange(8), True)
        for case in made:
            rows = opt_rows(case) + shift
            case.run = Run(positional={"embed_positions": table(rows, padding_row)[None]})
        return SimpleNamespace(a=Run(), cases=made, positions=np.arange(8), position_ids_taken=True)

    def sinusoid_claim(padding_row=None):
        return LayerClaim("decoder", -1, "sinusoidal", reads={"rows": ("position_ids", "mask_count")},
                          params={"offset": 2, "sinusoid": lambda p: sinusoid(p, padding_row)})

    def sinusoid(p, padding_row):
        return sinusoidal(np.asarray(p), 8, offset=2, spacing="tensor2tensor", layout="concat",
                          padding_row=padding_row, xp=np)

    assert case_sinusoid(sinusoid_claim(), probe_adding(), True).status == "exact"
    assert case_sinusoid(sinusoid_claim(), probe_adding(shift=1), True).status == "mismatch"
    zeroed = probe_adding(padding_row=1)  # OPT's padding reads row 1
    assert case_sinusoid(sinusoid_claim(padding_row=1), zeroed, True).status == "exact"
    assert case_sinusoid(sinusoid_claim(), zeroed, True).status == "mismatch"


def test_a_case_whose_inputs_do_not_state_the_source_is_named():
    """A claim reading the count of the input ids, on cases whose tokens are not known: no case is compared, and
    the result says so rather than passing in silence."""
    probe = probe_reading(lambda case: case.slots[-(case.queries or case.slots.size):] + 2)
    found = case_rows(claim("input_ids_cumsum",), probe, TABLE, 2)
    assert found.status == "exact"
    assert found.cause.startswith("table rows not compared in ids up to 131071, packed, left padded")
    for case in probe.cases:
        case.input_ids = np.full(case.slots.size, 9)
    assert case_rows(claim("input_ids_cumsum",), probe, TABLE, 2).cause == ""


@pytest.mark.parametrize("config", [
    {"model_type": "roberta", "pad_token_id": 1, "max_position_embeddings": 40000},
    {"model_type": "opt", "max_position_embeddings": 40000},
    {"model_type": "bert", "max_position_embeddings": 40000},
    {"model_type": "biogpt", "max_position_embeddings": 40000},
    {"model_type": "m2m_100", "pad_token_id": 1, "max_position_embeddings": 40000},
    {"model_type": "fsmt", "pad_token_id": 1, "max_position_embeddings": 40000, "langs": ["en", "de"]},
], ids=lambda config: config["model_type"])
def test_the_rows_the_survey_expects_are_refpos_s_own(config):
    """The survey reads a claim's rows itself (its mutants change what the claim reads); on every case, with the
    padding token among the tokens, they are the rows refpos's own record reads (``AbsoluteLayer.rows``)."""
    import refpos
    from survey import adaptor
    from survey.seen import Seen
    from survey.sources import inputs_of
    from survey.table_rows import expected_rows

    config = {"num_hidden_layers": 1, "encoder_layers": 1, "decoder_layers": 1, "hidden_size": 16, "d_model": 16,
              "num_attention_heads": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2, **config}
    claims = [c for c in adaptor.resolve(config).layers if c.kind in ("learned", "sinusoidal")]
    records = {r.stack: r for r in refpos.model_positions(config).layers if r.kind in ("learned", "sinusoidal")}
    assert claims and records
    compared = 0
    for case in cases.cases_for(config, np.array([0, 1, 2, 5, 17, 100, 999, 4001]), True):
        if case.name.startswith(("decoding at slot", "ids up to")):  # ids past the table: the model errs too
            continue
        queries = case.queries or case.slots.size
        case.input_ids = np.array([1, 7, 1, 9, 9, 1, 8, 6] * 2)[: case.slots.size]  # decoding: a padding step
        if case.padding_token is not None:
            case.input_ids[:cases.PADDING] = case.padding_token
        seen = Seen(case.name, None, inputs_of(case, None), case)
        for claim in claims:
            record = records[claim.stack]
            survey_rows = expected_rows(claim, seen, record.offset)
            ids = None if case.position_ids is None else case.position_ids[-queries:]
            refpos_rows = record.rows(ids, cache_position=case.slots[-queries:], attention_mask=case.attention_mask,
                                      input_ids=case.input_ids[-queries:])
            assert survey_rows.tolist() == np.asarray(refpos_rows).reshape(-1).tolist(), (case.name, claim.stack)
            compared += 1
    assert compared >= 6
