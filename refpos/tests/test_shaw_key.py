"""Shaw's key term over clipped frame distances (refpos.encodings.shaw_key): the rows and blocks against a loop over
the pairs, the block-wise form against each block computed alone at its local frames (Granite Speech's way), the
float32 bound held by a float32 computation and missed by each catalogued mistake, the mistakes named, bad
inputs refused by name, and the kind built from wav2vec2-BERT's and Granite Speech's configs."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.shaw_key import attended, shaw_key_rows, shaw_key_terms
from refpos.encodings.shaw_key_mistakes import SHAW_KEY_MISTAKES, ShawKeyInputs, identify_shaw_key
from refpos.models import model_positions


def _loop_rows(length, left, right, offset, sign):
    out = np.zeros((length, length), dtype=int)
    for i in range(length):
        for j in range(length):
            d = (j - i) if sign == "key_minus_query" else (i - j)
            out[i, j] = min(max(d, -left), right) + offset
    return out


@pytest.mark.parametrize("sign", ["key_minus_query", "query_minus_key"])
@pytest.mark.parametrize(("left", "right"), [(3, 1), (0, 2), (4, 4), (9, 9)])
def test_rows_are_the_clipped_distance_plus_the_offset(sign, left, right):
    assert np.array_equal(shaw_key_rows(7, left=left, right=right, offset=left + 1, sign=sign),
                          _loop_rows(7, left, right, left + 1, sign))


def test_the_two_signs_read_the_table_mirrored():
    a = shaw_key_rows(6, left=2, right=2, offset=2, sign="key_minus_query")
    b = shaw_key_rows(6, left=2, right=2, offset=2, sign="query_minus_key")
    assert np.array_equal(a, b.T) and not np.array_equal(a, b)


def test_blocks_attend_inside_and_the_last_block_is_partial():
    mask = attended(7, 3)
    blocks = [0, 0, 0, 1, 1, 1, 2]
    assert all(mask[i, j] == (blocks[i] == blocks[j]) for i in range(7) for j in range(7))
    assert attended(4, None).all() and np.array_equal(attended(4, 4), attended(4, None))


def _per_block(q, table, left, right, offset, sign, block):
    """Granite Speech's way: frames padded to whole blocks, each block alone at its local frames 0 … c − 1, the
    padded keys masked; the padded queries dropped."""
    heads, length, dim = q.shape
    count = -(-length // block)
    padded = np.zeros((heads, count * block, dim))
    padded[:, :length] = q
    out = np.full((heads, length, length), -np.inf)
    local = _loop_rows(block, left, right, offset, sign)
    for b in range(count):
        start = b * block
        terms = np.einsum("hid,ijd->hij", padded[:, start:start + block], table[local]) / np.sqrt(dim)
        real = min(block, length - start)
        out[:, start:start + real, start:start + real] = terms[:, :real, :real]
    return out


@pytest.mark.parametrize(("length", "block"), [(11, 4), (12, 4), (5, 8), (9, 1)])
def test_the_block_wise_terms_are_each_block_computed_alone(length, block):
    rng = np.random.default_rng(3)
    q, table = rng.standard_normal((2, length, 5)), rng.standard_normal((13, 5))
    got = shaw_key_terms(q, table, left=4, right=4, offset=6, sign="query_minus_key", block=block)
    want = _per_block(q, table, 4, 4, 6, "query_minus_key", block)
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    assert np.max(np.abs(got[finite] - want[finite])) < 1e-12


def test_terms_are_scaled_products_with_the_rows():
    rng = np.random.default_rng(4)
    q, table = rng.standard_normal((3, 6, 4)), rng.standard_normal((10, 4))
    got = shaw_key_terms(q, table, left=5, right=3, offset=5, sign="key_minus_query", scale=0.3)
    rows = _loop_rows(6, 5, 3, 5, "key_minus_query")
    want = 0.3 * np.array([[[q[h, i] @ table[rows[i, j]] for j in range(6)] for i in range(6)] for h in range(3)])
    assert np.max(np.abs(got - want)) < 1e-12


def _inputs(block=4, sign="query_minus_key", left=4, right=4, offset=6, rows=13, length=11, seed=5):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, length, 8)).astype(np.float32).astype(np.float64)
    table = rng.standard_normal((rows, 8)).astype(np.float32).astype(np.float64)
    return ShawKeyInputs(q, table, left, right, offset, sign, block)


def _float32_terms(inputs):
    """The terms as a float32 port computes them: the table scaled in float32, then float32 products."""
    q, table = inputs.q.astype(np.float32), inputs.table.astype(np.float32)
    rows = shaw_key_rows(inputs.length, left=inputs.left, right=inputs.right, offset=inputs.offset, sign=inputs.sign)
    scaled = table * np.float32(inputs.sigma)
    terms = np.einsum("hid,ijd->hij", q, scaled[rows]).astype(np.float64)
    return np.where(attended(inputs.length, inputs.block), terms, 0.0)


@pytest.mark.parametrize("inputs", [_inputs(), _inputs(None, "key_minus_query", 3, 2, 5, 10)])
def test_a_float32_port_is_within_the_bound_and_each_mistake_outside(inputs):
    reference, bound = inputs.reference()
    port = _float32_terms(inputs)
    assert np.all(np.abs(port - reference) <= bound)
    assert identify_shaw_key(port, inputs) is None
    shown = 0
    for mistake in SHAW_KEY_MISTAKES:
        wrong = mistake.compute(inputs)
        if wrong is None:
            continue
        shown += 1
        assert np.any(np.abs(wrong[0] - reference) > bound), mistake.name
        assert identify_shaw_key(wrong[0], inputs) == mistake.name
    assert shown >= 5


def test_a_clip_at_the_block_size_shows_no_clip_mistake():
    """Granite Speech's clip is its block size: two frames of a block are at most c − 1 apart, so no clip
    mistake changes a term, and none is tried."""
    inputs = _inputs()
    names = {m.name for m in SHAW_KEY_MISTAKES if m.compute(inputs) is not None}
    assert not names & {"clip_narrow", "clip_wide", "clip_swapped"}
    assert {"sign_flipped", "block_short", "block_long", "unblocked"} <= names


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"sign": "key-query"}, "sign"), ({"left": -1}, "left"), ({"right": 1.5}, "right"), ({"offset": -2}, "offset"),
    ({"block": 0}, "block"), ({"offset": 9}, "table has 13 rows")])
def test_bad_inputs_are_refused_by_name(kwargs, match):
    args = {"left": 4, "right": 4, "offset": 6, "sign": "query_minus_key", "block": 4} | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        shaw_key_terms(np.zeros((1, 5, 2)), np.zeros((13, 2)), **args)


def test_a_table_of_another_width_is_refused():
    with pytest.raises(ValueError, match="table"):
        shaw_key_terms(np.zeros((1, 5, 2)), np.zeros((13, 3)), left=1, right=1, offset=1, sign="key_minus_query")


W2V_BERT = {"model_type": "wav2vec2-bert", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
            "position_embeddings_type": "relative_key", "left_max_position_embeddings": 64,
            "right_max_position_embeddings": 8}
GRANITE = {"model_type": "granite_speech_encoder", "num_layers": 3, "num_heads": 2, "hidden_dim": 16, "dim_head": 8,
           "context_size": 200, "max_pos_emb": 512}


def test_the_kind_is_built_from_wav2vec2_bert_and_granite_speech():
    w2v = model_positions(W2V_BERT).stack("audio")
    assert [(r.sign, r.left, r.right, r.offset, r.rows, r.block, r.head_dim) for r in w2v] == \
        [("key_minus_query", 64, 8, 64, 73, None, 8)] * 2
    granite = model_positions(GRANITE).stack("audio")
    assert [(r.sign, r.left, r.right, r.offset, r.rows, r.block, r.head_dim) for r in granite] == \
        [("query_minus_key", 200, 200, 512, 1025, 200, 8)] * 3
    assert granite[0].reads == (("query", ("frames",)), ("key", ("frames",)))


SPEECHT5 = {"model_type": "speecht5", "encoder_layers": 2, "decoder_layers": 1, "encoder_attention_heads": 4,
            "decoder_attention_heads": 4, "hidden_size": 32, "encoder_max_relative_position": 160}


def test_speecht5_s_encoder_clips_one_short_above_and_its_decoder_has_no_positions():
    answer = model_positions(SPEECHT5)
    assert [(r.sign, r.left, r.right, r.offset, r.rows, r.block, r.head_dim) for r in answer.stack("encoder")] == \
        [("query_minus_key", 160, 159, 160, 320, None, 8)] * 2
    assert [r.kind for r in answer.stack("decoder")] == ["none"]


def test_right_less_is_a_non_negative_count():
    from refpos.models.kinds.shaw_key import ShawKeyFacts

    with pytest.raises(ValueError, match="right_less"):
        ShawKeyFacts(right_less=-1).check("example")
    with pytest.raises(ValueError, match="right_less"):
        ShawKeyFacts(right_less="1").check("example")
    with pytest.raises(ValueError, match="encoder_max_relative_position"):
        model_positions(SPEECHT5 | {"encoder_max_relative_position": 0})


def test_another_position_type_is_refused_by_name():
    layer = model_positions(W2V_BERT | {"position_embeddings_type": "rotary"}).stack("audio")[0]
    assert layer.kind == "refused" and "position_embeddings_type=rotary" in layer.reason


def test_a_clip_outside_the_table_is_refused():
    with pytest.raises(ValueError, match="max_pos_emb"):
        model_positions(GRANITE | {"max_pos_emb": 100})


def test_the_record_takes_a_table_of_its_shape():
    record = model_positions(GRANITE).stack("audio")[0]
    with pytest.raises(ValueError, match=r"\(1025, 8\)"):
        record.reference(np.zeros((2, 5, 8)), np.zeros((1024, 8)))
    terms = record.reference(np.ones((2, 5, 8)), np.ones((1025, 8)))
    assert terms.shape == (2, 5, 5) and np.allclose(terms, 8 / np.sqrt(8))


PHI4 = {"model_type": "phi4_multimodal_audio", "num_blocks": 2, "num_attention_heads": 4, "hidden_size": 32,
        "bias_max_distance": 1000, "bias_symmetric": False, "chunk_size": -1, "left_chunk": 18}


def test_phi4_s_bias_per_head_is_read_with_its_window_and_blocks_of_500():
    layers = model_positions(PHI4).stack("audio")
    assert [(r.term, r.sign, r.left, r.right, r.offset, r.rows, r.block, r.window, r.table_width) for r in layers] \
        == [("bias", "key_minus_query", 1000, 999, 1000, 2000, 500, (-1, 18), 4)] * 2
    with pytest.raises(ValueError, match=r"\(2000, 4\)"):
        layers[0].reference(np.zeros((4, 5, 8)), np.zeros((2000, 8)))
    symmetric = model_positions(PHI4 | {"bias_symmetric": True}).stack("audio")[0]
    assert symmetric.kind == "refused" and "bias_symmetric=true" in symmetric.reason
    with pytest.raises(ValueError, match="chunk_size"):
        model_positions(PHI4 | {"chunk_size": 0})


def test_the_bias_is_each_head_s_column_at_the_row_plus_the_window():
    from refpos.encodings.shaw_key_bias import shaw_bias_terms

    table = np.arange(12.0).reshape(6, 2)  # B[r, h] = 2r + h
    terms = shaw_bias_terms(table, 4, left=3, right=2, offset=3, sign="key_minus_query")
    rows = shaw_key_rows(4, left=3, right=2, offset=3, sign="key_minus_query")
    assert np.array_equal(terms, np.stack([2 * rows, 2 * rows + 1]))
    windowed = shaw_bias_terms(table, 4, left=3, right=2, offset=3, sign="key_minus_query", window=(2, 0))
    assert np.array_equal(windowed - terms, np.broadcast_to(np.kron(np.eye(2), np.ones((2, 2))), (2, 4, 4)))
    assert np.array_equal(shaw_bias_terms(table, 4, left=3, right=2, offset=3, sign="key_minus_query",
                                          window=(-1, 0)) - terms, np.ones((2, 4, 4)))


def test_the_window_is_each_block_s_own_and_nothing_across_blocks():
    from refpos.encodings.shaw_key_bias import streaming_window

    window = streaming_window(6, 2, 0, block=3)  # blocks of 3 frames, chunks of 2 counted in each block
    assert window.astype(int).tolist() == [[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0],
                                           [0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 1]]
    with pytest.raises(ValueError, match="chunk"):
        streaming_window(4, 0, 1)
    with pytest.raises(ValueError, match="left"):
        streaming_window(4, 2, -1)


def test_every_wrong_window_that_differs_is_named():
    from refpos.encodings.shaw_key_bias import wrong_windows

    assert sorted(wrong_windows(8, (-1, 3))) == ["window_dropped"]  # one chunk: only dropping it shows
    assert sorted(wrong_windows(8, (3, 1))) == ["chunk_long", "chunk_short", "left_fewer", "left_more",
                                                "window_dropped"]


def test_a_window_on_a_query_term_or_an_unknown_term_is_refused():
    from refpos.models.kinds.shaw_key import ShawKeyFacts

    with pytest.raises(ValueError, match=r"shaw_key\.chunk"):
        ShawKeyFacts(chunk="chunk_size", left_chunks="left_chunk").check("example")
    with pytest.raises(ValueError, match=r"shaw_key\.term"):
        ShawKeyFacts(term="value").check("example")
    with pytest.raises(ValueError, match=r"shaw_key\.block_frames"):
        ShawKeyFacts(block="context_size", block_frames=500).check("example")
