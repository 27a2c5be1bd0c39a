"""Golden outputs: strict .npy IO, the manifest, generate/verify/model, certification, tampering.

``test_committed_golden_verifies`` is the CI check of ``golden/``: every sha256, every case regenerated
on the current backend and compared within its float64 tolerance.
"""

from __future__ import annotations

import io
import json
import pickle
import shutil

import numpy as np
import pytest

from refpos.cli import main
from refpos.golden.cases.rope import layout_cases, model_cases, model_configs, probe_positions, slug
from refpos.golden.exact import entries
from refpos.golden.exact.certify import certificate, mp_attention_factor, mp_inv_freq
from refpos.golden.files import manifest as golden
from refpos.golden.files.npy import NpyError, npy_bytes, parse_npy, read_npy, write_npy
from refpos.golden.generate import verify

GOLDEN = golden.default_golden_dir()


# ----------------------------------------------------------------------------------------- .npy
@pytest.mark.parametrize("array", [np.arange(6.0).reshape(2, 3), np.array(2.5), np.zeros((0, 4)),
                                   np.array([True, False]), np.arange(5, dtype=np.int64)])
def test_npy_bytes_equal_numpy_save_and_roundtrip(array):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    assert npy_bytes(array) == buf.getvalue()
    back = parse_npy(npy_bytes(array))
    assert back.shape == array.shape and back.dtype == array.dtype and np.array_equal(back, array)


def test_npy_reader_converts_big_endian_and_fortran_is_rejected():
    buf = io.BytesIO()
    np.save(buf, np.arange(3, dtype=">f8"))
    assert parse_npy(buf.getvalue()).tolist() == [0.0, 1.0, 2.0]
    buf = io.BytesIO()
    np.save(buf, np.asfortranarray(np.arange(6.0).reshape(2, 3)))
    with pytest.raises(NpyError, match="Fortran"):
        parse_npy(buf.getvalue())


@pytest.mark.parametrize(("data", "message"), [
    (b"not an npy file at all", "magic"),
    (npy_bytes(np.arange(4.0))[:-3], "truncated .npy data"),
    (npy_bytes(np.arange(4.0))[:30], "truncated .npy header"),
    (npy_bytes(np.arange(4.0)) + b"\0", "unexpected bytes"),
    (npy_bytes(np.arange(4.0)).replace(b"'descr'", b"'dexcr'"), "corrupt .npy header"),
    (npy_bytes(np.arange(4.0)).replace(b"(4,)", b"(4,;"), "corrupt .npy header"),
])
def test_npy_reader_rejects_broken_files(data, message):
    with pytest.raises(NpyError, match=message):
        parse_npy(data, "x.npy")


def test_npy_reader_never_unpickles(tmp_path):
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(NpyError, match="never loaded"):
        parse_npy(buf.getvalue())
    path = tmp_path / "p.npy"
    path.write_bytes(pickle.dumps([1.0, 2.0]))
    with pytest.raises(NpyError, match=r"not a \.npy file"):
        read_npy(path)
    with pytest.raises(NpyError, match="no such file"):
        read_npy(tmp_path / "missing.npy")


def test_write_npy_returns_sha256(tmp_path):
    import hashlib

    digest = write_npy(tmp_path / "a" / "b.npy", np.ones(3))
    assert digest == hashlib.sha256((tmp_path / "a" / "b.npy").read_bytes()).hexdigest()


# ----------------------------------------------------------------------------------- comparison
def test_compare_formula_atol_per_row_nan_inf_and_integers():
    ref = np.array([[1.0, -np.inf], [np.nan, 2.0]])
    entry = {"atol_axis": -2, "float64": {"atol": [0.1, 0.0], "rtol": 0.0, "ulps": 0.0}}
    ok = entries.compare(np.array([[1.05, -np.inf], [np.nan, 2.0]]), ref, entry, "float64")
    assert ok["ok"]
    bad = entries.compare(np.array([[1.05, -np.inf], [np.nan, 2.0 + 1e-12]]), ref, entry, "float64")
    assert not bad["ok"] and bad["worst_index"] == (1, 1)
    assert not entries.compare(np.array([[1.0, 0.0], [np.nan, 2.0]]), ref, entry, "float64")["ok"]
    ints = entries.tolerance_integer()
    assert entries.compare(np.array([1, 2]), np.array([1, 2]), ints, "float32")["ok"]
    assert not entries.compare(np.array([1, 3]), np.array([1, 2]), ints, "float32")["ok"]
    assert not entries.compare(np.array([1.5, 2.0]), np.array([1, 2]), ints, "float32")["ok"]
    with pytest.raises(ValueError, match="shape"):
        entries.compare(np.ones(3), np.ones(2), ints, "float64")


def test_value_tolerance_entry_ulps_for_bf16():
    entry = entries.tolerance_value(np.array([1.0]))
    # bf16: 2 ulps of the reference: 2·2^-7 at 1 passes, 3 ulps fail
    assert entries.compare(np.array([1.0 + 2 * 2.0**-7]), np.array([1.0]), entry, "bfloat16")["ok"]
    assert not entries.compare(np.array([1.0 + 3 * 2.0**-7]), np.array([1.0]), entry, "bfloat16")["ok"]


@pytest.mark.parametrize(("value", "expected"), [(1.23456e-13, 1.24e-13), (1e-4, 1e-4), (4.77e-7, 4.77e-7),
                                                 (0.015625, 0.0157), (999.5, 1000.0), (0.0, 0.0)])
def test_round_up_never_tightens(value, expected):
    assert entries.round_up(value) == expected
    assert entries.round_up(value) >= value


# ------------------------------------------------------------------------------------ committed
def test_committed_golden_verifies():
    assert verify(GOLDEN) == []


def test_committed_manifest_is_complete():
    manifest = golden.load_manifest(GOLDEN)
    families = {c["family"] for c in manifest["cases"]}
    assert {"rope", "sinusoid", "alibi", "t5", "shaw", "txl", "kerple", "fire", "xpos", "sandwich", "cope",
            "worked_example", "scenario"} <= families
    ids = {c["id"] for c in manifest["cases"]}
    for name in model_configs():
        assert f"rope/{slug(name)}/apply" in ids or f"rope/{slug(name)}/full_attention/apply" in ids, name
    for case in manifest["cases"]:
        for entry in case["outputs"].values():
            assert set(entries.tol.DTYPES) <= set(entry["tolerance"])
            if entry["certified"] is not None:
                assert entry["certified"]["within_float64_tolerance"], case["id"]
    certified = [c for c in manifest["cases"] if c["certified_max_error_ulps"] is not None]
    assert len(certified) > 90
    size = sum(f.stat().st_size for f in GOLDEN.rglob("*") if f.is_file())
    # 6.10 MB with the family configs and the DeBERTa cases, 6.17 MB with the vision-RoPE, local-attention and
    # query-scale cases, 7.15 MB with the cases of the seven vision and audio kinds (60 cases, the largest Swin v2's
    # bias of a 10 × 10 window, 240 kB)
    assert size < 7_300_000, f"golden/ holds {size} bytes"


def test_tampered_golden_fails_verify_with_the_case_id(tmp_path, capsys):
    copy = tmp_path / "golden"
    shutil.copytree(GOLDEN, copy)
    manifest = golden.load_manifest(copy)
    case = next(c for c in manifest["cases"] if c["id"] == "alibi/slopes-n12")
    path = copy / case["outputs"]["slopes"]["file"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # one bit of one slope
    path.write_bytes(bytes(data))
    t5_case = next(c for c in manifest["cases"] if c["id"] == "t5/bucket-causal-32-128")
    (copy / t5_case["inputs"]["rel"]["file"]).unlink()
    assert main(["golden", "verify", "--golden-dir", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH alibi/slopes-n12: output slopes: sha256 mismatch" in out
    assert "MISMATCH t5/bucket-causal-32-128: input rel: missing file" in out


def test_unusable_golden_dir_exits_2(tmp_path, capsys):
    assert main(["golden", "verify", "--golden-dir", str(tmp_path)]) == 2
    assert "no golden manifest" in capsys.readouterr().err
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf8")
    assert main(["golden", "verify", "--golden-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------- generate, model
def test_write_cases_is_deterministic(tmp_path):
    cases = layout_cases()
    golden.write_cases(tmp_path / "a", cases, title="t")
    golden.write_cases(tmp_path / "b", layout_cases(), title="t")
    for f in (tmp_path / "a").rglob("*"):
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes(), f


def test_golden_model_for_any_config(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(model_configs()["microsoft/Phi-3.5-mini-instruct"]["config"]), encoding="utf8")
    out = tmp_path / "phi"
    assert main(["golden", "model", str(config), "--out", str(out), "--positions", "0,1,4095,4096,4097"]) == 0
    manifest = golden.load_manifest(out)
    ids = [c["id"] for c in manifest["cases"]]
    assert ids == [f"rope/{tmp_path.name}/{k}" for k in ("frequencies", "cos-sin", "apply")]
    apply_case = manifest["cases"][2]
    assert apply_case["parameters"]["seq_len"] == 4098  # HF: max(position) + 1 -> long factors
    assert apply_case["outputs"]["y"]["certified"]["within_float64_tolerance"]
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 0
    capsys.readouterr()
    # tamper with the positions: sha256 mismatch names the case
    pos_file = out / apply_case["inputs"]["positions"]["file"]
    pos_file.write_bytes(npy_bytes(np.array([0, 1, 4095, 4096, 4098])))
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 1
    assert f"MISMATCH rope/{tmp_path.name}/apply" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["--positions", "0,x"], "comma-separated integers"),
    (["--positions", "-1"], ">= 0"),
])
def test_golden_model_bad_positions_exit_2(tmp_path, capsys, args, message):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(model_configs()["meta-llama/Llama-2-7b-hf"]["config"]), encoding="utf8")
    assert main(["golden", "model", str(config), "--out", str(tmp_path / "o"), *args]) == 2
    assert message in capsys.readouterr().err


def test_golden_model_unresolvable_config_exit_2(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "rope_scaling": {"rope_type": "yarn"}}), encoding="utf8")
    assert main(["golden", "model", str(config), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refpos golden model: error:") and err.count("\n") == 1
    assert main(["golden", "model", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o")]) == 2


def test_probe_positions_cover_the_boundaries():
    p = probe_positions(131072, 8192, "x").tolist()
    assert len(p) == 32
    for q in (0, 1, 256, 257, 2048, 2049, 8191, 8192, 8193, 65536, 66048, 131071):
        assert q in p
    assert max(probe_positions(2048, None, "y")) == 2047


# ------------------------------------------------------------------------------- certification
def test_certificates_of_known_values():
    from refpos.golden.cases.tables import alibi_cases, t5_cases

    slopes = next(c for c in alibi_cases() if c.id == "alibi/slopes-n112").outputs["slopes"]
    cert = certificate(slopes.array, slopes.certify, slopes.tolerance)
    assert 30 < cert["max_error_ulps"] < 40  # the recurrence vs the closed form: 38 ulps (docs/alibi.md#the-math)
    buckets = next(c for c in t5_cases() if c.id == "t5/bucket-bidirectional-32-128").outputs["buckets"]
    assert certificate(buckets.array, buckets.certify)["max_abs_error"] == 0
    wrong = certificate(slopes.array * (1 + 1e-12), slopes.certify, slopes.tolerance)
    assert not wrong["within_float64_tolerance"]


def test_mpmath_frequencies_match_rope_md_vectors():
    llama31 = {"rope_type": "llama3", "rope_theta": 500000.0, "head_dim": 128, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    w = mp_inv_freq(llama31)
    assert float(w[1]) == pytest.approx(0.8146172338565447, rel=1e-15)
    assert float(w[63]) == pytest.approx(3.068925988914511e-07, rel=1e-15)
    phi = model_cases(model_configs()["microsoft/Phi-3.5-mini-instruct"]["config"], "phi")[0]
    params = phi.parameters["rope"]
    assert float(mp_attention_factor(params)) == pytest.approx(1.1902380714238083, rel=1e-15)
    assert float(mp_inv_freq(params, 4097)[0]) == pytest.approx(0.9259258891329368, rel=1e-15)


def test_an_input_and_an_output_of_one_name_are_refused():
    """Both would be ``cases/<id>/<name>.npy``: the output's bytes would replace the input's, and the manifest
    would name a file whose bytes are not the input's sha256."""
    case = golden.Case("x/y", "x", None, "an input and an output both named table", {}, {"table": np.zeros(2)},
                       {"table": golden.Output(np.ones(2), entries.tolerance_value(np.ones(2)))})
    with pytest.raises(ValueError, match="two different arrays of one name"):
        golden.case_entry(case, {})


def test_a_2d_rope_with_its_axes_swapped_fails_its_case():
    """GLM's rotation turned by the block position in the first half and the position in the second (the axes
    exchanged) is outside the rope-2d case's float32 tolerance; the case's own output is inside it."""
    from refpos.golden.cases.layers import rope_2d_cases
    from refpos.rope.params import rope_config_from_params
    from refpos.rope.two_d import apply_rope_2d

    case = rope_2d_cases()[0]
    rope, out = rope_config_from_params(case.parameters["rope"]), case.outputs["y"]
    swapped = np.asarray(apply_rope_2d(case.inputs["x"], case.inputs["positions"][::-1], rope))
    right = np.asarray(apply_rope_2d(case.inputs["x"], case.inputs["positions"], rope), dtype=np.float32)
    assert entries.compare(right, out.array, out.tolerance, "float32")["ok"]
    assert not entries.compare(swapped, out.array, out.tolerance, "float32")["ok"]
