"""``refpos positions``, ``refpos golden model`` and ``refpos check --config`` for every layer kind, and the
refusal of a family the table does not know (exit 2, one line naming the model type and ``--assume``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import refpos
from refpos.cli import main
from refpos.golden.manifest import load_manifest

CONFIGS = {
    "falcon": {"model_type": "falcon", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
               "alibi": True},
    "mpt": {"model_type": "mpt", "n_layers": 1, "n_heads": 6, "d_model": 48},
    "t5": {"model_type": "t5", "num_layers": 2, "num_heads": 4, "d_model": 32, "relative_attention_num_buckets": 32},
    "opt": {"model_type": "opt", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
            "max_position_embeddings": 64},
    "whisper": {"model_type": "whisper", "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
                "decoder_attention_heads": 2, "d_model": 16, "max_source_positions": 1500,
                "max_target_positions": 448},
    "deberta": {"model_type": "deberta-v2", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 32,
                "relative_attention": True, "position_buckets": 256, "max_relative_positions": 512,
                "pos_att_type": ["p2c", "c2p"], "share_att_key": True, "position_biased_input": False},
    "llama4": {"model_type": "llama4_text", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
               "num_hidden_layers": 4, "rope_theta": 5e5, "max_position_embeddings": 8192},
    "unknown": {"model_type": "my_llm", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
                "rope_theta": 1e4},
}
UNKNOWN_LINE = ("model_type 'my_llm' is not in refpos's family table: its encoding, pair layout and which layers "
                "carry positions are unknown")


@pytest.fixture
def configs(tmp_path):
    paths = {}
    for name, config in CONFIGS.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(config), encoding="utf8")
    return paths


def test_positions_prints_every_stack_and_kind(configs, capsys):
    assert main(["positions", str(configs["whisper"])]) == 0
    out = capsys.readouterr().out
    assert "encoder layers 0-0: sinusoidal ×1" in out and "decoder layers 0-0: learned ×1" in out
    assert "complete: yes" in out and "spacing: 'tensor2tensor'" in out
    assert main(["positions", str(configs["llama4"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"] == ["decoder layers 0-3: rope ×3 (0, 1, 2), none+scale ×1"]
    assert data["layers"][3]["query_scale"]["rule"] == "llama4_temperature"


@pytest.mark.parametrize("argv", [
    ["positions", "{unknown}", "--strict"], ["golden", "model", "{unknown}", "--out", "{out}"],
    ["check", "rope", "--config", "{unknown}", "--input", "{x}", "--positions", "{p}", "--candidate", "{x}"],
])
def test_an_unknown_family_is_refused_with_one_line(configs, tmp_path, capsys, argv):
    np.save(tmp_path / "x.npy", np.zeros((3, 16)))
    np.save(tmp_path / "p.npy", np.arange(3))
    fill = {"unknown": configs["unknown"], "out": tmp_path / "g", "x": tmp_path / "x.npy", "p": tmp_path / "p.npy"}
    assert main([a.format(**fill) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("'my_llm' is not in refpos's family table" in err)
    assert "--assume" in err or "assume" in err
    assert not (tmp_path / "g").exists()  # nothing written


def test_stated_conventions_let_an_unknown_family_through(configs, tmp_path, capsys):
    assert main(["golden", "model", str(configs["unknown"]), "--out", str(tmp_path / "g"), "--assume",
                 "family=llama", "--no-certify"]) == 0
    manifest = load_manifest(tmp_path / "g")
    assert manifest["source"]["assume"] == {"family": "llama"}
    assert [c["id"].split("/")[-1] for c in manifest["cases"]] == ["frequencies", "cos-sin", "apply"]
    assert main(["golden", "verify", "--golden-dir", str(tmp_path / "g")]) == 0
    assert main(["positions", str(configs["unknown"]), "--assume", "colour=red"]) == 2
    assert "assume takes" in capsys.readouterr().err


@pytest.mark.parametrize("name, ids", [
    ("falcon", ["alibi/m/decoder"]), ("mpt", ["alibi/m/decoder"]), ("t5", ["t5/m/encoder", "t5/m/decoder"]),
    ("opt", ["learned/m/decoder"]), ("whisper", ["sinusoid/m/encoder", "learned/m/decoder"]),
    ("deberta", ["deberta/m/encoder"]),
])
def test_golden_model_writes_every_layer_kind_and_verifies(configs, tmp_path, name, ids):
    out = tmp_path / name
    assert main(["golden", "model", str(configs[name]), "--out", str(out), "--name", "m"]) == 0
    manifest = load_manifest(out)
    assert [c["id"] for c in manifest["cases"]] == ids
    assert main(["golden", "verify", "--golden-dir", str(out), "--certify"]) == 0


def test_golden_alibi_case_holds_the_family_rounding(configs, tmp_path):
    out = tmp_path / "falcon"
    assert main(["golden", "model", str(configs["falcon"]), "--out", str(out), "--name", "m", "--no-certify"]) == 0
    case = load_manifest(out)["cases"][0]
    assert case["parameters"]["record"]["dtype"] == "bfloat16" and case["parameters"]["record"]["before_scale"]
    exact = np.load(out / case["outputs"]["bias"]["file"])
    rounded = np.load(out / case["outputs"]["bias_as_computed"]["file"])
    assert np.abs(exact - rounded).max() > 0 and np.all(rounded == refpos.models.records.round_to(rounded, "bfloat16"))


def _save(tmp_path, name, array):
    np.save(tmp_path / name, array)
    return str(tmp_path / name)


def test_check_config_takes_every_kind_from_the_layer(configs, tmp_path, capsys):
    resolved = {name: refpos.model_positions(CONFIGS[name]) for name in ("falcon", "t5", "opt", "whisper")}
    keys = np.arange(6)
    bias = resolved["falcon"].layers[0].bias(cache_position=keys[2:], attention_mask=np.ones(6), rounded=False)
    assert main(["check", "alibi", "--config", str(configs["falcon"]), "--candidate",
                 _save(tmp_path, "b.npy", bias), "--q-len", "4", "--k-len", "6"]) == 0
    rel = keys[None, :] - keys[:4, None]
    buckets = resolved["t5"].stack("decoder")[0].buckets_at(keys[:4], keys)
    argv = ["check", "t5", "--config", str(configs["t5"]), "--relative", _save(tmp_path, "r.npy", rel),
            "--candidate", _save(tmp_path, "t.npy", buckets)]
    assert main([*argv, "--stack", "decoder"]) == 0 and main(argv) == 1  # the encoder is bidirectional
    positions = _save(tmp_path, "p.npy", keys)
    table = np.random.default_rng(0).standard_normal((66, 8))
    argv = ["check", "learned", "--config", str(configs["opt"]), "--positions", positions, "--table",
            _save(tmp_path, "tbl.npy", table)]
    assert main([*argv, "--candidate", _save(tmp_path, "ok.npy", table[keys + 2])]) == 0
    assert main([*argv, "--candidate", _save(tmp_path, "no.npy", table[keys])]) == 1  # the offset 2 forgotten
    sinusoid = resolved["whisper"].stack("encoder")[0].sinusoid(keys).astype(np.float32)
    assert main(["check", "sinusoid", "--config", str(configs["whisper"]), "--positions", positions, "--candidate",
                 _save(tmp_path, "s.npy", sinusoid)]) == 0
    rel = keys[:, None] - keys[None, :]  # DeBERTa's query − key
    buckets = np.asarray(refpos.encodings.deberta_log_buckets(rel, 256, 512))
    assert main(["check", "deberta", "--config", str(configs["deberta"]), "--relative",
                 _save(tmp_path, "dr.npy", rel), "--candidate", _save(tmp_path, "db.npy", buckets)]) == 0
    capsys.readouterr()
    assert main(["check", "t5", "--config", str(configs["falcon"]), "--relative", str(tmp_path / "r.npy"),
                 "--candidate", str(tmp_path / "t.npy")]) == 2
    assert "decoder layer 0 is alibi" in capsys.readouterr().err
