"""Fuzzing the golden store with concurrent writers and planted state: no file whose bytes refpos did not
write is ever removed or changed.

One Hypothesis property, derandomized (one fixed sequence of examples, the same in CI and on every machine)
with a fixed number of examples and a deadline per example: a directory starts empty or holding the goldens of
one model; a user's files are put in it (at the top, in ``cases/``, inside a case's directory, at a path the
next run writes, over a golden file), and state files are planted (a journal of names only, a journal naming
the user's files with digests of other bytes, a journal naming the manifest, a manifest listing the user's
files with other sha256s, a manifest listing a reserved name); then one to three writers (threads: other
models, other positions, with and without ``--force``) write into it at once. Afterwards:

* every file of the user's holds its bytes (``manifest.json`` and the journal are refpos's own names: a
  planted one may be replaced);
* each writer finished, or refused with one line;
* when one finished, the directory verifies (the last writer's goldens), with no journal left.

A meta test shows the property failing on a store that removes what a journal names whatever its bytes.
docs/security.md lists the groups.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from refpos.directory import Directory
from refpos.golden import manifest as golden
from refpos.golden import store
from refpos.golden.generate import model_source, verify
from refpos.golden.rope_cases import model_cases
from refpos.tests.hostile import MODEL

FUZZ = settings(max_examples=30, deadline=timedelta(seconds=20), derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
POSITIONS = ([0, 1, 7, 40], [0, 5, 9])
pytestmark = pytest.mark.filterwarnings("ignore::refpos.golden.store.StoreWarning")  # a file kept: expected here
USER_FILES = ("mine.txt", "cases/notes.txt", "cases/rope/toy/apply/notes.txt", "cases/rope/toy/apply/y.npy",
              "inputs/data.npy")
PLANTS = ("journal of names", "journal of other digests", "journal naming the manifest",
          "manifest listing the user's files", "manifest listing a reserved name")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mine(rel: str) -> bytes:
    return f"mine: {rel}".encode()  # bytes refpos never writes


def _write(root: Path, name: str, positions: list[int], force: bool) -> None:
    cases = model_cases(MODEL, name, positions=np.asarray(positions))
    golden.write_cases(root, cases, title=name, certify=False, source=model_source(MODEL, name, positions, None),
                       force=force)


def _plant(out: Path, plant: str, user: list[str]) -> None:
    if plant.startswith("journal"):
        if plant == "journal of names":
            files: object = user
        elif plant == "journal of other digests":
            files = {rel: [_sha(b"other bytes")] for rel in user}
        else:
            manifest = out / store.MANIFEST
            files = {store.MANIFEST: [_sha(manifest.read_bytes()) if manifest.is_file() else _sha(b"")]}
        (out / store.JOURNAL).write_text(json.dumps({"format": store.JOURNAL_FORMAT, "files": files}),
                                         encoding="utf8")
        return
    path = out / store.MANIFEST
    manifest = json.loads(path.read_text(encoding="utf8")) if path.is_file() else {
        "format": "refpos-golden", "format_version": 1, "title": "planted", "cases": [],
        "source": model_source(MODEL, "toy", None, None)}
    listed = {rel: _sha(b"other bytes") for rel in user} if plant == "manifest listing the user's files" else \
        {store.MANIFEST: _sha(b"x")}
    manifest.setdefault("files", {}).update(listed)
    path.write_text(json.dumps(manifest), encoding="utf8")


def store_contract(start: str | None, user: list[str], plants: list[str], writers: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        if start is not None:
            _write(out, start, POSITIONS[0], False)
        for rel in user:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(_mine(rel))
        for plant in plants:
            _plant(out, plant, user)
        outcomes: dict[int, str] = {}

        def run(i: int, name: str, positions: list[int], force: bool) -> None:
            try:
                _write(out, name, positions, force)
                outcomes[i] = "written"
            except ValueError as exc:
                assert "\n" not in str(exc), exc
                outcomes[i] = "refused"
        threads = [threading.Thread(target=run, args=(i, *writer)) for i, writer in enumerate(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(outcomes) == len(writers), "a writer did not finish"
        for rel in user:
            kept = (out / rel).read_bytes() if (out / rel).is_file() else None
            assert kept == _mine(rel), (rel, start, plants, writers, outcomes)
        if "written" in outcomes.values():
            assert verify(out) == [], (start, plants, writers)
            assert not (out / store.JOURNAL).exists()


@FUZZ
@given(st.sampled_from([None, "toy", "other"]),
       st.lists(st.sampled_from(USER_FILES), max_size=3, unique=True),
       st.lists(st.sampled_from(PLANTS), max_size=2, unique=True),
       st.lists(st.tuples(st.sampled_from(["toy", "other"]), st.sampled_from(POSITIONS), st.booleans()),
                min_size=1, max_size=3))
@example(None, ["mine.txt", "cases/notes.txt"], ["journal of names"], [("toy", POSITIONS[0], False)])
@example("toy", ["mine.txt"], ["journal of other digests"], [("toy", POSITIONS[1], False)] * 2)
@example("toy", ["mine.txt"], ["manifest listing the user's files"], [("toy", POSITIONS[1], False)])
@example("toy", [], ["manifest listing a reserved name"], [("toy", POSITIONS[1], True)])
@example(None, [], [], [("toy", POSITIONS[0], False), ("toy", POSITIONS[1], False), ("other", POSITIONS[0], True)])
def test_no_writer_nor_planted_state_removes_or_changes_a_file_refpos_did_not_write(start, user, plants, writers):
    original = os.fsync
    os.fsync = lambda fd: None  # durability is not what is tested here; many times faster
    try:
        store_contract(start, user, plants, writers)
    finally:
        os.fsync = original


# -------------------------------------------------------------------------------------- meta test
def test_the_property_fails_when_a_journal_removes_whatever_bytes_it_names(monkeypatch):
    """A store whose removals do not compare bytes (a journal or a manifest then deletes what it names)."""
    real = Directory.remove_file

    def any_bytes(self, rel, digests):
        digest = self.sha256(rel)
        return real(self, rel, {digest} if digest is not None else set())
    monkeypatch.setattr(Directory, "remove_file", any_bytes)
    with pytest.raises((AssertionError, ExceptionGroup)):
        test_no_writer_nor_planted_state_removes_or_changes_a_file_refpos_did_not_write()
