"""The fits of the other families (refpos/check/tables/): ALiBi slopes and bias form, T5 and DeBERTa bucket
maps and the keys that reproduce them, sinusoid frequencies/pairing/offset/spacing, a learned table's offset."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refpos
from refpos.check.tables.alibi import check_alibi, fit_alibi, naive_slopes
from refpos.check.tables.deberta import check_deberta, fit_deberta
from refpos.check.tables.learned import fit_learned
from refpos.check.tables.sinusoid import check_sinusoid, fit_sinusoid
from refpos.check.tables.t5 import check_t5, fit_t5


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), scale=st.floats(0.1, 10.0), form=st.sampled_from(["causal", "symmetric", "key_index"]))
def test_alibi_bias_slopes_and_form_are_recovered(n, scale, form):
    slopes = np.asarray(refpos.encodings.alibi_slopes(n, xp="numpy")) * scale
    q, k = np.arange(5, 9), np.arange(9)
    bias = np.asarray(refpos.encodings.alibi_bias_from_positions(slopes, q, k, form=form))
    found = fit_alibi(bias, slopes / scale, 1e-12, q_positions=q, k_positions=k)
    assert found["fitted"]["form"] == form
    np.testing.assert_allclose([h["slope_fitted"] for h in found["heads"]], slopes, rtol=1e-12)
    assert all(h["ok"] for h in found["heads"]) == (scale == 1.0)


def test_alibi_slopes_name_their_sequence():
    found = check_alibi(naive_slopes(12), 12)
    assert found["fitted"]["geometric"]["log2_ratio"] == pytest.approx(-8 / 12)
    assert found["fitted"]["reference_geometric"] is None  # 12 heads: two interleaved groups
    assert found["wrong_heads"] == [[0, 11]]


T5_CASES = [  # (the candidate's keys, its sign, the changes the fit reports)
    ({"bidirectional": False}, 1, {"bidirectional": [True, False]}),
    ({"num_buckets": 64}, 1, {"num_buckets": [32, 64]}),
    ({"max_distance": 256}, 1, {"max_distance": [128, 256]}),
    ({}, -1, {"sign": ["memory − query", "negated"]}),
]


@pytest.mark.parametrize(("keys", "sign", "changed"), T5_CASES)
def test_t5_bucket_map_keys_are_recovered(keys, sign, changed):
    rel = np.arange(-400, 401)
    candidate = np.asarray(refpos.encodings.t5_bucket(sign * rel, **keys))
    found = fit_t5(candidate, rel, bidirectional=True, num_buckets=32, max_distance=128)
    assert found["changed"] == changed
    assert check_t5(candidate, rel)["bucket_map"]["changed"] == changed


def test_a_bucket_map_that_is_not_a_function_is_named():
    rel = np.array([[1, 1], [2, 2]])
    found = fit_t5(np.array([[1, 2], [3, 3]]), rel, bidirectional=True, num_buckets=32, max_distance=128)
    assert found["keys"] is None and found["ambiguous"] == [1]


def test_deberta_bucket_map_keys_are_recovered():
    rel = np.arange(-700, 701)
    candidate = np.asarray(refpos.encodings.deberta_log_buckets(rel, 128, 512))
    found = check_deberta(candidate, rel, position_buckets=256, max_relative_positions=512)["bucket_map"]
    assert found["changed"] == {"position_buckets": [256, 128]}
    assert fit_deberta(candidate, rel, position_buckets=128, max_relative_positions=512)["differ"] == 0


@pytest.mark.parametrize(("kwargs", "layout", "offset", "changed"), [
    ({"spacing": "tensor2tensor"}, "interleaved", 0, {"spacing": ["paper", "tensor2tensor"]}),
    ({"layout": "concat"}, "concat", 0, {}),
    ({"offset": 2}, "interleaved", 2, {}),
    ({"base": 500.0}, "interleaved", 0, {"base": [10000.0, 500.0]}),
])
def test_sinusoid_frequencies_pairing_offset_and_rule(kwargs, layout, offset, changed):
    positions = np.arange(0, 64)
    table = np.asarray(refpos.encodings.sinusoidal.sinusoidal(positions, 32, **kwargs))
    found = check_sinusoid(table, positions, dim=32)
    assert found["fitted"]["layout"] == layout and found["fitted"]["position_offset"] == offset
    got = found["fitted"]["rule_changed"]
    assert set(got) == set(changed)
    for key, (was, now) in changed.items():
        assert got[key][0] == was
        assert got[key][1] == (now if isinstance(now, str) else pytest.approx(now))


def test_sinusoid_fit_reads_cos_plus_i_sin():
    """Meta: the fit takes cos + i·sin as e^{ipω}; with sin and cos exchanged every pair turns backwards."""
    positions = np.arange(16)
    table = np.asarray(refpos.encodings.sinusoidal.sinusoidal(positions, 8))
    swapped = table.reshape(16, 4, 2)[..., ::-1].reshape(16, 8)
    zeros = np.zeros(8)
    found = fit_sinusoid(swapped, positions, dim=8, base=1e4, layout="interleaved", spacing="paper",
                         dtype="float64", channel_error=zeros, channel_ratio=zeros)
    assert all(p["omega_fitted"] < 0 for p in found["pairs"][:3])


def test_learned_row_offset():
    table = np.random.default_rng(0).standard_normal((50, 8))
    rows = np.arange(10, 20)
    assert fit_learned(table[rows + 2], table, rows, 0.0)["row_offset"] == 2
    assert fit_learned(table[rows[::-1]], table, rows, 0.0)["row_offset"] is None
    assert "equal no row" in fit_learned(table[rows] + 1.0, table, rows, 0.0)["reason"]


def test_check_learned_names_the_rows_read(tmp_path, capsys):
    """OPT reads row p + 2 of its table: a port that forgets the offset reads rows 2 before (refpos check learned
    --config, the layer's offset from the family table)."""
    import json

    from refpos.cli import main

    config = {"model_type": "opt", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
              "max_position_embeddings": 64}
    (tmp_path / "opt.json").write_text(json.dumps(config), encoding="utf8")
    table = np.random.default_rng(0).standard_normal((66, 8))
    for name, array in (("p", np.arange(6)), ("t", table), ("y", table[np.arange(6)])):
        np.save(tmp_path / f"{name}.npy", array)
    argv = ["check", "learned", "--config", str(tmp_path / "opt.json"), "--positions", str(tmp_path / "p.npy"),
            "--table", str(tmp_path / "t.npy"), "--candidate", str(tmp_path / "y.npy")]
    assert main([*argv, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["rows_read"]["row_offset"] == -2
    assert main(argv) == 1
    assert "every candidate row is the table row -2 from the one the layer reads" in capsys.readouterr().out
