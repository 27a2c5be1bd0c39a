"""``refpos golden model --max-position``: probes of a long-context extension, in bounded memory."""

from __future__ import annotations

import json

import numpy as np

from refpos.cli import main
from refpos.golden.files.manifest import load_manifest
from refpos.golden.files.npy import read_npy


def test_golden_model_probes_up_to_max_position_and_verifies(tmp_path, capsys):
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0,
              "max_position_embeddings": 8192}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf8")
    out = tmp_path / "g"
    assert main(["golden", "model", str(tmp_path / "config.json"), "--out", str(out), "--max-position", "1048576",
                 "--no-certify"]) == 0
    manifest = load_manifest(out)
    apply = next(c for c in manifest["cases"] if c["id"].endswith("/apply"))
    positions = read_npy(out / apply["inputs"]["positions"]["file"])
    assert positions.size == 32 and int(positions.max()) == 1048575  # 32 rows whatever the length
    assert manifest["source"]["max_position"] == 1048576
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 0  # regenerated with the same probes
    assert main(["golden", "model", str(tmp_path / "config.json"), "--out", str(out), "--max-position", "0"]) == 2
    capsys.readouterr()
    default = tmp_path / "d"
    assert main(["golden", "model", str(tmp_path / "config.json"), "--out", str(default), "--no-certify"]) == 0
    case = next(c for c in load_manifest(default)["cases"] if c["id"].endswith("/apply"))
    assert int(np.max(read_npy(default / case["inputs"]["positions"]["file"]))) == 8191


def test_max_position_reaches_the_layer_kind_cases_too():
    """``max_position`` moves the probes of every case of a model, the per-layer-kind queries included
    (SmolLM3: every 4th layer without RoPE, declared length 65536)."""
    from refpos.golden.cases.rope import model_cases, model_configs

    name = "HuggingFaceTB/SmolLM3-3B"
    cases = model_cases(model_configs()[name]["config"], name, max_position=1048576)
    layer_cases = [c for c in cases if "/layers/" in c.id]
    assert layer_cases and all(int(np.max(c.inputs["positions"])) == 1048575 for c in layer_cases)
    assert int(np.max(next(c for c in cases if c.id.endswith("/apply")).inputs["positions"])) == 1048575
