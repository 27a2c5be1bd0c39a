"""Hostile output directories: ``refpos golden model|generate --out DIR`` cannot be turned against its owner.

Every file under ``--out`` goes to a temporary file beside it and is renamed into place, never through a
symlink; refpos removes only what a previous refpos manifest (or its journal) in that directory lists,
refuses a non-empty directory without a refpos manifest, and replaces another model's goldens only with
``--force``; a run interrupted at any step leaves a directory that verifies, the old one or the new one
(:mod:`refpos.golden.store`). docs/security.md lists the groups.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from refpos.cli import main
from refpos.golden import manifest as golden
from refpos.golden.generate import verify

CONFIG = {"model_type": "llama", "rope_theta": 10000.0, "head_dim": 8, "hidden_size": 32, "num_attention_heads": 4,
          "max_position_embeddings": 64}
#: a second config of the same model whose case set differs (a per-layer config: more, other cases)
PER_LAYER = {"model_type": "gemma3_text", "head_dim": 8, "hidden_size": 32, "num_attention_heads": 4,
             "num_hidden_layers": 2, "max_position_embeddings": 64, "sliding_window": 16,
             "layer_types": ["sliding_attention", "full_attention"],
             "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}


def _config(tmp_path: Path, config: dict, name: str = "cfg.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config), encoding="utf8")
    return path


def _model(tmp_path: Path, out: Path, *extra: str, config: dict = CONFIG) -> int:
    return main(["golden", "model", str(_config(tmp_path, config)), "--out", str(out), "--no-certify",
                 "--name", "toy", *extra])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _listed(root: Path) -> set[str]:
    """The files a golden directory's manifest lists."""
    return {e["file"] for c in golden.load_manifest(root)["cases"] for e in [*c["inputs"].values(),
                                                                              *c["outputs"].values()]}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------- never through a symlink
@pytest.mark.parametrize("where", ["manifest.json", "a case file", "a case directory"])
def test_a_write_never_follows_a_symlink_out_of_the_directory(where, tmp_path, capsys):
    out = tmp_path / "out"
    assert _model(tmp_path, out) == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("precious", encoding="utf8")
    if where == "manifest.json":
        (out / "manifest.json").unlink()
        (out / "manifest.json").symlink_to(outside / "precious.txt")
    elif where == "a case file":
        target = out / "cases/rope/toy/cos-sin/cos.npy"
        target.unlink()
        target.symlink_to(outside / "precious.txt")
    else:
        case = out / "cases/rope/toy/cos-sin"
        for f in case.iterdir():
            (outside / f.name).write_bytes(f.read_bytes())
            f.unlink()
        case.rmdir()
        case.symlink_to(outside, target_is_directory=True)
    before = _tree(outside)
    capsys.readouterr()
    code = _model(tmp_path, out, "--positions", "0,5,9")  # every file changes: each is rewritten
    assert _tree(outside) == before  # nothing outside written, replaced or removed
    if code == 0:  # a symlinked case file is replaced by a file (the rename replaces the link itself)
        assert not (out / "cases/rope/toy/cos-sin/cos.npy").is_symlink()
        assert verify(out) == []
    else:
        assert "symlink" in _one_line(capsys)


# ------------------------------------------------------------------------ only what refpos wrote is removed
def test_a_directory_without_a_refpos_manifest_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "cases").mkdir(parents=True)
    (out / "cases" / "notes.txt").write_text("mine", encoding="utf8")
    (out / "inputs").mkdir()
    (out / "inputs" / "data.npy").write_bytes(b"mine")
    before = _tree(out)
    assert _model(tmp_path, out) == 2
    err = _one_line(capsys)
    assert "not empty" in err and "no refpos golden manifest" in err and "--out" in err
    assert _tree(out) == before


def test_regenerating_removes_only_the_files_the_old_manifest_lists(tmp_path):
    out = tmp_path / "out"
    assert _model(tmp_path, out) == 0
    (out / "cases/rope/toy/notes.txt").write_text("mine", encoding="utf8")
    (out / "README.md").write_text("mine", encoding="utf8")
    (out / "inputs/keep.npy").write_bytes(b"mine")
    old = _listed(out)
    assert _model(tmp_path, out, "--positions", "0,5,9", config=PER_LAYER) == 0
    assert (out / "cases/rope/toy/notes.txt").read_text(encoding="utf8") == "mine"
    assert (out / "README.md").read_text(encoding="utf8") == "mine"
    assert (out / "inputs/keep.npy").read_bytes() == b"mine"
    assert verify(out) == []
    stale = old - _listed(out)
    assert stale and not any((out / f).exists() for f in stale)
    leftovers = {p.name for p in out.iterdir()} - {"manifest.json", "cases", "inputs", "README.md"}
    assert not leftovers, leftovers  # no journal, staging directory or temporary file left


def test_a_file_in_the_way_that_no_manifest_lists_is_not_overwritten(tmp_path, capsys):
    out = tmp_path / "out"
    assert _model(tmp_path, out) == 0
    capsys.readouterr()
    mine = out / "cases/rope/toy/full_attention/frequencies/inv_freq.npy"  # a path the next run writes
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"mine")
    assert _model(tmp_path, out, config=PER_LAYER) == 2
    assert "exists, and no refpos manifest" in _one_line(capsys)
    assert mine.read_bytes() == b"mine" and verify(out) == []


# -------------------------------------------------------------------- another model's goldens
def test_another_models_goldens_are_replaced_only_with_force(tmp_path, capsys):
    out = tmp_path / "out"
    assert _model(tmp_path, out) == 0
    before = _tree(out)
    capsys.readouterr()
    assert main(["golden", "model", str(_config(tmp_path, CONFIG)), "--out", str(out), "--no-certify",
                 "--name", "other"]) == 2
    err = _one_line(capsys)
    assert "golden model 'toy'" in err and "golden model 'other'" in err and "--force" in err
    assert _tree(out) == before
    assert main(["golden", "generate", "--out", str(out), "--no-certify"]) == 2
    assert "--force" in _one_line(capsys) and _tree(out) == before
    assert main(["golden", "model", str(_config(tmp_path, CONFIG)), "--out", str(out), "--no-certify",
                 "--name", "other", "--force"]) == 0
    assert {c["id"].split("/")[1] for c in golden.load_manifest(out)["cases"]} == {"other"}
    assert verify(out) == [] and not (out / "cases/rope/toy").exists()


@pytest.mark.parametrize(("extra", "expected"), [
    ({"_name_or_path": "meta-llama/Llama-3.1-8B"}, "meta-llama--Llama-3.1-8B"),
    ({"architectures": ["LlamaForCausalLM"]}, "LlamaForCausalLM"),
    ({}, "my-model")])
def test_cases_are_named_after_the_model_not_the_file(extra, expected, tmp_path, monkeypatch):
    """``config.json`` in the current directory used to name every case ``rope/config/…``."""
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({**CONFIG, **extra}), encoding="utf8")
    monkeypatch.chdir(model_dir)
    assert main(["golden", "model", "config.json", "--out", str(tmp_path / "out"), "--no-certify"]) == 0
    ids = [c["id"] for c in golden.load_manifest(tmp_path / "out")["cases"]]
    assert ids and all(i.startswith(f"rope/{expected}/") for i in ids), ids


@pytest.mark.parametrize("name", ["..", ".", "", "/", "..."])
def test_a_name_that_is_no_directory_name_is_refused_before_writing(name, tmp_path, capsys):
    """``--name ..`` wrote a directory its own ``verify`` refused."""
    out = tmp_path / "out"
    assert main(["golden", "model", str(_config(tmp_path, CONFIG)), "--out", str(out), "--no-certify",
                 "--name", name]) == 2
    assert "--name" in _one_line(capsys)
    assert not out.exists()


# ------------------------------------------------------------------------------------ errors name the path
def test_a_write_error_names_the_file(tmp_path):
    """A full disk (here: a file-size limit, the same failed write) is one line naming the file."""
    config = _config(tmp_path, CONFIG)
    script = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
              "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000)); from refpos.cli import main; "
              f"sys.exit(main(['golden', 'model', {str(config)!r}, '--out', {str(tmp_path / 'out')!r}, "
              "'--no-certify', '--name', 'toy']))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert str(tmp_path / "out") in run.stderr and ".npy" in run.stderr and "File too large" in run.stderr


# --------------------------------------------------------------------------- interrupted at every step
class Interrupted(Exception):
    pass


def _interrupting(at: int):
    steps = []

    def hook(operation: str, path: str) -> None:
        steps.append((operation, path))
        if len(steps) == at:
            raise Interrupted(f"step {at}: {operation} {path}")
    return hook, steps


def _write(out: Path, config: dict, positions, hook=None) -> None:
    import numpy as np

    from refpos.golden.generate import model_source
    from refpos.golden.rope_cases import model_cases

    cases = model_cases(config, "toy", positions=None if positions is None else np.asarray(positions))
    golden.write_cases(out, cases, title="toy", certify=False, source=model_source(config, "toy", positions, None),
                       hook=hook)


@pytest.mark.parametrize(("old", "new"), [
    (None, (CONFIG, [0, 1, 2])),  # the first run into a new directory
    ((CONFIG, [0, 1, 2]), (CONFIG, [0, 5, 9])),  # every file changes: staged, then copied into place
    ((CONFIG, [0, 1, 2]), (PER_LAYER, [0, 1, 2])),  # other cases: new files written, old ones removed
])
def test_a_run_interrupted_at_any_step_leaves_a_directory_that_verifies(old, new, tmp_path, monkeypatch):
    """Raise at the k-th change on disk, for every k: what is left verifies, and is the old directory or
    the new one; the next run then completes and leaves nothing behind. (``fsync``, which makes each step
    durable against a power cut, is skipped here: an exception cuts the run at the same steps, 20 times
    faster.)"""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    sources = {}
    for label, spec in (("old", old), ("new", new)):
        if spec is not None:
            _write(tmp_path / label, *spec)
            sources[label] = golden.load_manifest(tmp_path / label)["source"]
    at = 1
    while True:
        out = tmp_path / f"run-{at}"
        if old is not None:
            shutil.copytree(tmp_path / "old", out)
        hook, steps = _interrupting(at)
        try:
            _write(out, *new, hook=hook)
        except Interrupted:
            pass
        else:
            assert at == len(steps) + 1
            break
        claimed = (out / "manifest.json").exists() and not golden.load_manifest(out)["cases"]
        if (out / "manifest.json").exists() and not claimed:
            assert verify(out) == [], (at, steps[-1])
            assert golden.load_manifest(out)["source"] in sources.values(), (at, steps[-1])
        else:  # the first run: nothing yet, or the directory claimed by a manifest without cases
            assert old is None, (at, steps[-1])
        _write(out, *new)  # the next run finishes the job, and leaves exactly the new directory
        assert _tree(out) == _tree(tmp_path / "new"), (at, steps[-1])
        shutil.rmtree(out)
        at += 1
    assert at > 10  # every kind of step was interrupted: writes, renames, the manifest, removals
    kinds = {op for op, _ in steps}
    assert {"write", "rename"} <= kinds and (old is None or "unlink" in kinds)
