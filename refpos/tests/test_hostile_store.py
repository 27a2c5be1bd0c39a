"""Hostile golden stores: no journal, manifest or second writer makes ``golden model|generate --out DIR``
remove a file whose bytes refpos did not write, nor write through a symlink swapped in for ``DIR``.

What the store promises (:mod:`refpos.golden.store`): the journal records the sha256 of every file a run
writes, and recovery removes only files whose bytes match it; a directory without a refpos manifest is
refused whatever a journal says; a manifest that lists ``manifest.json``, the journal or a ``.refpos-`` name is
refused in one line; a file an old manifest lists whose bytes differ from its sha256 is kept and named; ``DIR``
is opened with ``O_NOFOLLOW`` relative to its parent; a run holds an exclusive lock on ``DIR`` and a second
writer waits a bounded time, then refuses in one line. docs/security.md lists the groups.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from refpos.cli import main
from refpos.golden import manifest as golden
from refpos.golden import store
from refpos.golden.generate import model_source, verify
from refpos.golden.rope_cases import model_cases
from refpos.tests.hostile import MODEL, edit_manifest, write_model

OTHER_POSITIONS = [0, 5, 9]


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(MODEL), encoding="utf8")
    return path


def _model(tmp_path: Path, out: Path, *extra: str) -> int:
    return main(["golden", "model", str(_config(tmp_path)), "--out", str(out), "--no-certify", "--name", "toy",
                 *extra])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and not p.is_symlink()}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(out: Path, positions: list[int], hook=None) -> None:
    cases = model_cases(MODEL, "toy", positions=np.asarray(positions))
    golden.write_cases(out, cases, title="toy", certify=False, source=model_source(MODEL, "toy", positions, None),
                       hook=hook)


MINE = {"thesis.tex": b"\\documentclass{article} my thesis", "src/main.py": b"print('mine')\n"}


def _plant_mine(out: Path, files: dict[str, bytes] = MINE) -> None:
    for rel, data in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)


# ------------------------------------------------------------------------------ a journal cannot delete
@pytest.mark.parametrize("journal", ["names", "other sha256"])
def test_a_planted_journal_never_makes_a_directory_without_a_manifest_acceptable(journal, tmp_path, capsys):
    """A ``.refpos-journal.json`` listing a user's files made ``golden model`` accept the directory and delete
    them, exit 0."""
    out = tmp_path / "out"
    _plant_mine(out)
    files = list(MINE) if journal == "names" else {rel: [_sha(b"other bytes")] for rel in MINE}
    (out / store.JOURNAL).write_text(json.dumps({"format": store.JOURNAL_FORMAT, "files": files}), encoding="utf8")
    before = _tree(out)
    assert _model(tmp_path, out) == 2
    assert "no refpos golden manifest" in _one_line(capsys)
    assert _tree(out) == before


@pytest.mark.parametrize("journal", ["names", "other sha256"])
def test_a_planted_journal_beside_goldens_removes_nothing_whose_bytes_it_does_not_name(journal, tmp_path):
    """Beside valid goldens: a journal of names only (no sha256) is not one refpos reads, and is refused whole;
    one whose digests are not those of the files it names removes none of them (each is kept and named)."""
    out = write_model(tmp_path / "out")
    _plant_mine(out, {"mine.txt": b"mine", "cases/notes.tex": b"mine too"})
    names = ["mine.txt", "cases/notes.tex"]
    files = names if journal == "names" else {rel: [_sha(b"refpos wrote other bytes")] for rel in names}
    (out / store.JOURNAL).write_text(json.dumps({"format": store.JOURNAL_FORMAT, "files": files}), encoding="utf8")
    if journal == "names":
        with pytest.raises(store.StoreError, match="not a refpos journal"):
            _write(out, OTHER_POSITIONS)
    else:
        with pytest.warns(store.StoreWarning, match="kept") as kept:
            _write(out, OTHER_POSITIONS)
        assert sorted(str(w.message).split(":")[0] for w in kept) == [str(out / n) for n in sorted(names)]
        assert verify(out) == []
    assert (out / "mine.txt").read_bytes() == b"mine" and (out / "cases/notes.tex").read_bytes() == b"mine too"


def test_the_journal_records_the_sha256_of_every_file_a_run_writes(tmp_path):
    """Read back at the moment the first golden file is written: every path the run writes, each with the
    sha256 of the bytes it writes there."""
    out = write_model(tmp_path / "out")
    old = store.listed_files(golden.load_manifest(out))
    seen: dict = {}

    def hook(operation: str, path: str) -> None:
        if operation == "write" and path.endswith(".npy") and not seen:
            seen.update(json.loads((out / store.JOURNAL).read_text(encoding="utf8")))
    _write(out, OTHER_POSITIONS, hook=hook)
    manifest = golden.load_manifest(out)
    written = store.listed_files(manifest)
    assert seen["format"] == store.JOURNAL_FORMAT and isinstance(seen["files"], dict)
    changed = {rel: digest for rel, digest in written.items() if old.get(rel) != digest}
    assert changed and all(digest in seen["files"][rel] for rel, digest in changed.items())
    assert all(old[rel] in seen["files"][rel] for rel in changed if rel in old)  # the old bytes, until replaced
    staged = [rel for rel in seen["files"] if rel.startswith(store.STAGING_PREFIX)]
    assert staged and all(len(seen["files"][rel]) == 1 for rel in staged)  # the staged copies: new bytes only


# ----------------------------------------------------------------------------------- reserved names
@pytest.mark.parametrize("name", ["manifest.json", ".refpos-journal.json", ".refpos-tmp-0123", "MANIFEST.JSON",
                                  "cases/.refpos-tmp-0123/y.npy", ".refpos-lock"])
def test_a_manifest_listing_a_reserved_name_is_refused_in_one_line(name, tmp_path, capsys):
    """``files: {"manifest.json": …}``: regeneration deleted the manifest it had just written, exit 0,
    "complete: yes", and the directory no longer verified."""
    out = write_model(tmp_path / "out")
    edit_manifest(out, lambda m: m.setdefault("files", {}).update({name: _sha(b"x")}))
    before = _tree(out)
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 2
    err = _one_line(capsys)
    assert "reserved" in err and repr(name) in err, err
    with pytest.raises(golden.GoldenError, match="reserved"):
        golden.load_manifest(out)
    assert _model(tmp_path, out, "--positions", "0,5,9") == 2
    assert "reserved" in _one_line(capsys)
    assert _tree(out) == before


@pytest.mark.parametrize("name", ["manifest.json", ".refpos-journal.json", "cases/x/.refpos-tmp-1"])
def test_the_writer_refuses_to_write_a_reserved_name(name, tmp_path):
    cases = model_cases(MODEL, "toy", positions=np.asarray([0, 1]))
    with pytest.raises(ValueError, match="reserved"):
        golden.write_cases(tmp_path / "out", cases, title="toy", certify=False, extra_files={name: b"{}"})
    assert not (tmp_path / "out" / "cases").exists()


# ------------------------------------------------------------------------ bytes refpos did not write stay
def test_a_listed_file_whose_bytes_differ_from_its_sha256_is_kept_and_named(tmp_path, capsys):
    """A user's file an old manifest lists with another sha256 was deleted on regeneration."""
    out = tmp_path / "out"
    assert _model(tmp_path, out) == 0
    (out / "mine.txt").write_bytes(b"mine")
    edit_manifest(out, lambda m: m.setdefault("files", {}).update({"mine.txt": _sha(b"what refpos wrote")}))
    capsys.readouterr()
    assert _model(tmp_path, out, "--positions", "0,5,9") == 0
    err = capsys.readouterr().err
    assert (out / "mine.txt").read_bytes() == b"mine"
    assert err.count("\n") == 1 and "mine.txt" in err and "kept" in err, err
    assert verify(out) == []


def test_a_listed_file_refpos_would_overwrite_whose_bytes_differ_is_refused(tmp_path, capsys):
    """A golden file replaced by other bytes (the user's) at a path the next run writes: refused, kept."""
    out = tmp_path / "out"
    assert _model(tmp_path, out) == 0
    case_file = out / "cases/rope/toy/cos-sin/cos.npy"
    case_file.write_bytes(b"mine")
    capsys.readouterr()
    assert _model(tmp_path, out, "--positions", "0,5,9") == 2
    err = _one_line(capsys)
    assert "cos.npy" in err and "did not write" in err, err
    assert case_file.read_bytes() == b"mine"


def test_an_interrupted_first_run_leaves_a_directory_the_next_run_finishes(tmp_path):
    """Without a journal that makes a directory acceptable, the first run claims ``DIR`` with a manifest
    before it writes any golden file."""
    out = tmp_path / "out"

    def hook(operation: str, path: str) -> None:
        if operation == "rename" and path.endswith(".npy"):
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        _write(out, OTHER_POSITIONS, hook=hook)
    assert golden.load_manifest(out)["cases"] == []
    _write(out, OTHER_POSITIONS)
    assert verify(out) == [] and not [p for p in out.iterdir() if p.name.startswith(".refpos-")]


# ------------------------------------------------------------------------------------ --out is opened once
def test_out_swapped_for_a_symlink_just_before_it_is_opened_is_refused(tmp_path, monkeypatch, capsys):
    """The racer strikes between any look at ``DIR`` by its path and the open: ``DIR`` becomes a symlink to
    another directory. Nothing may be written there."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    real_open = os.open
    swapped = []

    def racer_open(path, flags, *args, dir_fd=None, **kwargs):
        names_out = os.fspath(path) in (str(out), out.name) and (dir_fd is not None or os.fspath(path) == str(out))
        if names_out and not swapped:
            swapped.append(path)
            out.rmdir()
            out.symlink_to(outside, target_is_directory=True)
        return real_open(path, flags, *args, dir_fd=dir_fd, **kwargs)
    monkeypatch.setattr(os, "open", racer_open)
    monkeypatch.setattr(os, "supports_dir_fd", os.supports_dir_fd | {racer_open})
    code = _model(tmp_path, out)
    monkeypatch.undo()
    assert swapped
    assert list(outside.iterdir()) == []
    assert code == 2 and "symlink" in _one_line(capsys)


RACER = """
import os, sys
out, aside, link, stop = sys.argv[1:]
while not os.path.exists(stop):  # out -> aside, link -> out, then back; a step refpos upset is skipped
    for source, target in ((out, aside), (link, out), (out, link), (aside, out)):
        if source == out and (target == link) != os.path.islink(out):
            continue  # only the symlink goes back to link, only the directory aside
        try:
            os.rename(source, target)
        except OSError:
            pass
"""


def test_a_racer_swapping_out_for_a_symlink_never_gets_goldens_written_outside(tmp_path):
    """Another process swaps ``DIR`` for a symlink to another directory and back, as fast as it can, while
    runs write into ``DIR``: every run writes into ``DIR`` or refuses; none writes a byte through the symlink."""
    out, outside, config = tmp_path / "out", tmp_path / "outside", _config(tmp_path)
    outside.mkdir()
    out.mkdir()
    aside, link, stop = tmp_path / "aside", tmp_path / "link", tmp_path / "stop"
    link.symlink_to(outside, target_is_directory=True)
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(out), str(aside), str(link), str(stop)])
    codes = []
    try:
        for last in range(1, 13):
            codes.append(main(["golden", "model", str(config), "--out", str(out), "--no-certify", "--name", "toy",
                               "--positions", f"0,{last}"]))
    finally:
        stop.touch()
        racer.wait(20)
    assert list(outside.iterdir()) == [], codes
    assert set(codes) <= {0, 2}


# ----------------------------------------------------------------------------------- one writer at a time
def test_a_second_writer_waits_a_bounded_time_then_refuses_in_one_line(tmp_path, monkeypatch, capsys):
    """Another run holds ``DIR``'s lock (here: the test): ``golden model`` waits, then refuses; it deletes
    and writes nothing."""
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.3, raising=False)
    out = write_model(tmp_path / "out")
    before = _tree(out)
    held = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert _model(tmp_path, out, "--positions", "0,5,9") == 2
    finally:
        os.close(held)
    err = _one_line(capsys)
    assert "another refpos run" in err and str(out) in err, err
    assert _tree(out) == before


def test_two_writers_on_one_new_directory_leave_one_that_verifies(tmp_path, monkeypatch):
    """The second writer starts while the first is between two steps: without a lock it deleted what the first
    wrote, and the first finished with a directory that did not verify."""
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.3, raising=False)
    out = tmp_path / "out"
    second: dict = {}

    def run_second() -> None:
        try:
            _write(out, [0, 2])
        except ValueError as exc:
            second["refused"] = str(exc)

    def hook(operation: str, path: str) -> None:
        if operation == "rename" and path.endswith(".npy") and not second:
            thread = threading.Thread(target=run_second)
            thread.start()
            thread.join(20)
            second.setdefault("finished", True)
    _write(out, OTHER_POSITIONS, hook=hook)
    assert "another refpos run" in second.get("refused", ""), second
    assert verify(out) == []
    assert golden.load_manifest(out)["source"]["positions"] == OTHER_POSITIONS
