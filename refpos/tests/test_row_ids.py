"""RoBERTa's position ids are its table's rows (``row_ids``): the model counts the ids it builds from
``padding_idx + 1``, so an id passed indexes the table as it is. refpos reads them so in a record's rows, in the
attention pipeline, and refuses to read them without the padding token."""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.models.sources import INPUTS, PARAMETERS, Given

ROBERTA = {"model_type": "roberta", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8,
           "max_position_embeddings": 40, "pad_token_id": 1}
OPT = {"model_type": "opt", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8, "ffn_dim": 8,
       "max_position_embeddings": 40, "word_embed_proj_dim": 8}


def test_row_ids_are_the_ids_less_the_padding_token_plus_one():
    given = Given.of(positions=[2, 3, 9])
    assert given.read(("row_ids",), "query", padding_idx=1).tolist() == [0, 1, 7]
    with pytest.raises(ValueError, match="padding_idx"):
        given.read(("row_ids",), "query")
    assert "row_ids" in INPUTS and PARAMETERS["row_ids"] == "positions"


def test_roberta_reads_an_id_passed_as_its_row_and_opt_adds_its_offset():
    """The same ids: RoBERTa reads rows 2, 3, 9; OPT reads them two rows on. Without ids RoBERTa counts the
    non-padding input ids from padding_idx + 1, as before."""
    roberta, opt = (refpos.model_positions(c).layers[0] for c in (ROBERTA, OPT))
    assert roberta.source("rows") == ("row_ids", "input_ids_cumsum")
    assert roberta.rows(positions=[2, 3, 9]).tolist() == [2, 3, 9]
    assert opt.rows(positions=[2, 3, 9]).tolist() == [4, 5, 11]
    assert roberta.rows(input_ids=[[1, 1, 5, 6]]).tolist() == [[1, 1, 2, 3]]


def test_the_pipeline_adds_the_rows_roberta_reads():
    """``refpos.self_attention`` with RoBERTa's record and its ids: the table rows added are the ids' own rows, with
    no padding_idx passed (the record's offset is the count's start)."""
    layer = refpos.model_positions(ROBERTA).layers[0]
    rng = np.random.default_rng(0)
    table = rng.standard_normal((layer.table_size, 8))
    weights = refpos.AttentionWeights(*(rng.standard_normal((8, 8)) for _ in range(3)), n_heads=2)
    ids = np.array([2, 3, 9])
    _, trace = refpos.self_attention(rng.standard_normal((3, 8)), weights, encoding=layer.encoding(table=table),
                                     positions=ids)
    np.testing.assert_array_equal(refpos.to_numpy(trace["P"]).reshape(3, 8), table[ids])
