"""Anchors: the adapter's sinusoids, ALiBi slopes and T5 buckets against HF transformers (torch CPU).

Skipped where torch or transformers are absent. Tolerances (docs/conventions.md#tolerances): both sides
err. The adapter's side follows its ``INFO["dtype"]`` (the phase rule at the table's positions for
sinusoids, the value rule for slopes and biases); HF's side is added: its sinusoid tables are computed in
float64 by NumPy and stored in float32 (half an ulp, the "stored" rule), BLOOM's slopes and bias ``m·j``
are float32 powers and products (the float32 value rule, the bias row's scale ``m·(T_k − 1)``). Buckets
are integers, exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_close, cases, require

torch = pytest.importorskip("torch", reason="anchor cross-checks need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="anchor cross-checks need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors


@pytest.mark.parametrize(("dim", "n_pos"), cases("dim, n_pos", [(4, 512), (64, 512), (768, 96)]))
def test_distilbert_interleaved_sinusoid(impl, dim, n_pos):
    """HF DistilBERT ``create_sinusoidal_embeddings``: interleaved, paper spacing, first position 0."""
    from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings

    sinusoidal = require(impl, "sinusoidal")
    out = torch.empty(n_pos, dim)
    create_sinusoidal_embeddings(n_pos, dim, out)
    got = sinusoidal(np.arange(n_pos), dim, layout="interleaved", spacing="paper")
    assert_close(got, out.numpy().astype(np.float64), impl, "phase", positions=np.arange(n_pos),
                 anchor_dtype="float32", anchor_kind="stored", what="DistilBERT table")


@pytest.mark.parametrize(("dim", "n_pos"), cases("dim, n_pos", [(4, 512), (64, 512), (512, 96)]))
def test_marian_concatenated_sinusoid(impl, dim, n_pos):
    """HF Marian ``MarianSinusoidalPositionalEmbedding``: concatenated [sin | cos], paper spacing."""
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    sinusoidal = require(impl, "sinusoidal")
    table = MarianSinusoidalPositionalEmbedding(n_pos, dim).create_weight()
    got = sinusoidal(np.arange(n_pos), dim, layout="concat", spacing="paper")
    assert_close(got, table.numpy().astype(np.float64), impl, "phase", positions=np.arange(n_pos),
                 anchor_dtype="float32", anchor_kind="stored", what="Marian table")


def test_marian_differs_from_distilbert_by_the_layout_permutation(impl):
    """The same numbers in another channel order (docs/sinusoidal.md#where-the-anchors-differ): the permutation maps
    one onto the other."""
    from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    dim, n_pos = 16, 64
    inter = torch.empty(n_pos, dim)
    create_sinusoidal_embeddings(n_pos, dim, inter)
    concat = MarianSinusoidalPositionalEmbedding(n_pos, dim).create_weight()
    perm = np.concatenate([np.arange(0, dim, 2), np.arange(1, dim, 2)])
    np.testing.assert_array_equal(concat.numpy(), inter.numpy()[:, perm])
    assert np.abs(concat.numpy() - inter.numpy()).max() > 0.5


@pytest.mark.parametrize("n_heads", cases("n_heads", range(1, 65)))
def test_bloom_alibi_slopes_and_key_index_bias(impl, n_heads):
    """BLOOM ``build_alibi_tensor`` (float32): slopes, and its key-index bias ``m_h·j`` over 64 keys."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    slopes, bias = require(impl, "alibi_slopes", "alibi_bias")
    k_len = 64
    alibi = build_alibi_tensor(torch.ones(1, k_len, dtype=torch.long), n_heads, torch.float32)  # (H, 1, T)
    alibi = alibi.numpy().astype(np.float64)
    assert_close(slopes(n_heads), alibi[:, 0, 1], impl, anchor_dtype="float32", what="slopes")
    row_scale = alibi[:, 0, -1:]  # m_h·(T_k − 1): the row's natural magnitude, a floor where m_h·j is small
    assert_close(bias(n_heads, 1, k_len, form="key_index")[:, 0], alibi[:, 0], impl, scale=row_scale,
                 anchor_dtype="float32", what="key-index bias")


def _t5_grid(valid: bool):
    """The grid of T5 bucket arguments, the valid ones (max_distance beyond the exact range) or the others."""
    for bidirectional in (True, False):
        for num_buckets in (8, 16, 32, 33, 64, 128):
            if bidirectional and num_buckets % 2:
                continue
            for max_distance in (16, 20, 64, 128, 256, 1000, 4096):
                max_exact = num_buckets // 4 if bidirectional else num_buckets // 2
                if (max_distance > max_exact) == valid:
                    yield bidirectional, num_buckets, max_distance


def _relative_positions(max_distance: int) -> np.ndarray:
    return np.unique(np.concatenate([np.arange(-1000, 1001), np.arange(-max_distance - 50, max_distance + 51)]))


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"),
                         cases("bidirectional, num_buckets, max_distance", _t5_grid(valid=True)))
def test_t5_buckets_equal_hf(impl, bidirectional, num_buckets, max_distance):
    """HF ``T5Attention._relative_position_bucket`` over r ∈ [−1000, 1000] (and ±(max_distance + 50)), on the
    arguments HF computes correctly (a verbatim copy of HF's function passes every case)."""
    from transformers.models.t5.modeling_t5 import T5Attention

    bucket = require(impl, "t5_bucket")
    rel = _relative_positions(max_distance)
    expected = T5Attention._relative_position_bucket(
        torch.from_numpy(rel), bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    ).numpy()
    got = bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(("bidirectional", "num_buckets", "max_distance"),
                         cases("bidirectional, num_buckets, max_distance", _t5_grid(valid=False)))
def test_bad_bucket_ranges_that_hf_miscomputes_are_rejected(impl, bidirectional, num_buckets, max_distance):
    """max_distance not beyond the exact range: HF silently returns garbage buckets (the log of a ratio below
    1); the contract asks for a ValueError naming max_distance, which HF itself does not give."""
    bucket = require(impl, "t5_bucket")
    with pytest.raises(ValueError, match="max_distance"):
        bucket(_relative_positions(max_distance), bidirectional=bidirectional, num_buckets=num_buckets,
               max_distance=max_distance)
