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


def test_a_fairseq_sinusoid_zeroes_its_padding_row():
    """M2M100's, XGLM's and Kosmos-2's tables hold zeros in the padding token's row: a padding token (and an id
    passed equal to it) reads zeros; every other row is the sinusoid."""
    from refpos.encodings.sinusoidal import sinusoidal

    plain = refpos.to_numpy(sinusoidal([-1, 0, 3], 8, offset=2, spacing="tensor2tensor", layout="concat"))
    zeroed = refpos.to_numpy(sinusoidal([-1, 0, 3], 8, offset=2, spacing="tensor2tensor", layout="concat",
                                        padding_row=1))
    np.testing.assert_array_equal(zeroed[0], np.zeros(8))
    np.testing.assert_array_equal(zeroed[1:], plain[1:])
    m2m = {"model_type": "m2m_100", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
           "decoder_attention_heads": 2, "d_model": 8, "max_position_embeddings": 16, "pad_token_id": 1}
    layer = refpos.model_positions(m2m).layers[0]
    assert layer.padding_row == 1
    np.testing.assert_array_equal(layer.sinusoid(np.array([-1]))[0], np.zeros(8))


@pytest.mark.anchors
def test_fairseq_tables_read_ids_and_padding_as_transformers_does():
    """Kosmos-2's text model given ids (the padding token's among them) and M2M100's encoder given left-padded
    input ids: the sinusoid each adds is refpos's at the rows it reads, the padding row zero."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model("kosmos_2_text_model", embed_dim=16, layers=1, attention_heads=2, ffn_dim=16,
                                  vocab_size=64, max_position_embeddings=64, pad_token_id=1)
    from transformers.models.kosmos2.modeling_kosmos2 import Kosmos2TextModel

    model = Kosmos2TextModel(config).eval()
    seen = []
    model.model.embed_positions.register_forward_hook(lambda m, a, out: seen.append(out.double().numpy()))
    ids = torch.tensor([[0, 1, 2, 5, 9]])
    with torch.no_grad():
        model(input_ids=torch.tensor([[5, 6, 7, 8, 9]]), position_ids=ids)
    layer = next(r for r in refpos.model_positions(config.to_dict()).layers if r.kind == "sinusoidal")
    rows = layer.rows(positions=ids.numpy()).reshape(-1)
    np.testing.assert_allclose(layer.sinusoid(rows - layer.offset), seen[-1][0], rtol=0, atol=16 * 2.0**-24 * 4)
    assert np.all(seen[-1][0][1] == 0)  # id 1, the padding row

    m2m = AutoConfig.for_model("m2m_100", encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, d_model=16, encoder_ffn_dim=16, decoder_ffn_dim=16,
                               vocab_size=64, max_position_embeddings=32, pad_token_id=1)
    encoder = AutoModel.from_config(m2m).eval().encoder
    seen.clear()
    encoder.embed_positions.register_forward_hook(lambda m, a, out: seen.append(out.double().numpy()))
    input_ids = torch.tensor([[1, 1, 5, 6, 7]])
    with torch.no_grad():
        encoder(input_ids=input_ids)
    layer = refpos.model_positions(m2m.to_dict()).stack("encoder")[0]
    positions = layer.rows(input_ids=input_ids.numpy()).reshape(-1) - layer.offset
    np.testing.assert_allclose(layer.sinusoid(positions), seen[-1][0], rtol=0, atol=16 * 2.0**-24 * 4)


@pytest.mark.anchors
def test_fsmt_counts_its_input_ids_and_then_adds_the_cache():
    """FSMT's encoder given left-padded input ids: its table is read at the count of the non-padding ids (the
    padding at its zero row), not at the slot. After a cache of 3 tokens (the decoder's step) the cache's length is
    added to every token, the padding token's too, which M2M100's count keeps at the zero row."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model("fsmt", langs=["en", "de"], src_vocab_size=64, tgt_vocab_size=64, d_model=16,
                                  encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                  decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
                                  max_position_embeddings=32, pad_token_id=1)
    encoder = AutoModel.from_config(config).eval().encoder
    seen = []
    encoder.embed_positions.register_forward_hook(lambda m, a, out: seen.append(out.double().numpy()))
    input_ids = torch.tensor([[1, 1, 5, 6, 7]])
    with torch.no_grad():
        encoder(input_ids=input_ids)
    layer = refpos.model_positions(config.to_dict()).stack("encoder")[0]
    rows = layer.rows(input_ids=input_ids.numpy()).reshape(-1)
    assert rows.tolist() == [1, 1, 2, 3, 4]
    np.testing.assert_allclose(layer.sinusoid(rows - layer.offset), seen[-1][0], rtol=0, atol=16 * 2.0**-24 * 4)
    step = torch.tensor([[7, 1]])  # a token, then the padding token, after 3 cached
    with torch.no_grad():
        after = encoder.embed_positions(step, cache_length=3).double().numpy()[0]
    rows = layer.rows(input_ids=step.numpy(), cache_position=np.array([3, 4])).reshape(-1)
    assert rows.tolist() == [5, 4]  # the padding token at padding_idx + 3: M2M100's count reads row 1
    np.testing.assert_allclose(layer.sinusoid(rows - layer.offset), after, rtol=0, atol=16 * 2.0**-24 * 8)
