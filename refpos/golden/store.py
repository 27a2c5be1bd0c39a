"""Writing a golden directory: nothing escapes it, nothing whose bytes refpos did not write is removed, and a
run interrupted at any point leaves a directory that verifies (the old one or the new one).

``refpos golden generate --out DIR`` and ``refpos golden model … --out DIR`` hand :func:`replace_directory`
the new manifest (with every file at its *canonical* path, e.g. ``cases/<case id>/cos.npy``) and the bytes
of every file. What it does, in order:

1. **Open and lock the directory.** ``DIR`` is created if missing and opened once, its last component
   relative to its parent's descriptor with ``O_DIRECTORY | O_NOFOLLOW``: a symlink there, even one swapped in
   while the run starts, is refused, never followed. The run holds an exclusive lock on ``DIR``
   (:meth:`refpos.directory.Directory.lock`) until it ends; a second writer waits :data:`LOCK_WAIT_S` seconds,
   then refuses in one line, having changed nothing.
2. **Claim it.** A ``DIR`` that holds anything (but refpos's temporary files) and no refpos manifest is
   refused, whatever else it holds: a journal never makes a directory refpos's. So is a ``manifest.json``
   that is a symlink or not a valid refpos manifest, or one that lists a reserved name (:func:`check_entry`).
   A manifest written for another source (another model's ``golden model`` name, or ``golden generate``) is
   replaced only with ``force`` (``--force``). An empty ``DIR`` is claimed by a manifest with no cases before
   any other file is written, so that from then on a refpos manifest says whose the directory is.
3. **Finish an interrupted run.** The journal ``.refpos-journal.json`` (written before any golden file of a
   run) records, for every path the run may leave a file at, the sha256 of the bytes it writes there (and of
   the old bytes a staged file replaces, or a removed file holds). A path the manifest in force does not list
   is removed only where its bytes have one of those digests; a journal refpos cannot read as its own is
   refused, not overwritten.
4. **Plan.** A canonical file the old manifest lists with the same sha256, and which still holds those
   bytes, is kept as it is. A canonical path no manifest lists is written in place (nothing verifies
   against it yet). A canonical path the old manifest lists with other bytes cannot be overwritten while
   the old manifest still points there: its new bytes go to a *staging* path
   (``refpos-staging-<random>/<canonical path>``). A path that exists but that no refpos manifest lists, or
   whose bytes are not those its manifest records, is refused: refpos did not write it, and does not
   overwrite it.
5. **Journal** the files this run writes, then **write** them, each to a temporary file beside it that is
   renamed into place (:class:`refpos.directory.Directory`).
6. **Commit**: replace ``manifest.json`` (one rename: before it, the old manifest and its untouched files;
   after it, the new manifest). With staged files the committed manifest points at the staging paths; each
   staged file is then copied to its canonical path (renamed into place: the canonical files are no longer
   listed by the manifest in force), and a second manifest rename points at the canonical paths.
7. **Clean up**: remove the files the old manifest listed that the new one does not, each only if its bytes
   have the sha256 the old manifest records (one whose bytes differ is kept and named, a
   :class:`StoreWarning`), the staged copies, the directories that left empty, then the journal.

Every step that changes the disk passes the directory's ``hook`` first; refpos/tests/test_hostile_writes.py
raises from it at every step in turn and runs ``refpos golden verify`` on what is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import warnings
from typing import Any

from refpos.directory import TEMP_PREFIX, Directory, Hook, relative_parts
from refpos.golden.schema import FORMAT_VERSION, SchemaError, validate_manifest
from refpos.inputs import InputError, parse_json

MANIFEST = "manifest.json"
JOURNAL = ".refpos-journal.json"
#: names beginning so are refpos's own state (the journal, temporary files): never a golden file
STATE_PREFIX = ".refpos-"
STAGING_PREFIX = "refpos-staging-"
JOURNAL_FORMAT = "refpos-golden-journal"
#: how long a manifest or journal refpos reads back may be
MAX_MANIFEST_BYTES = 64 * 2**20
#: how long a second writer waits for the lock of a directory another run is writing, in seconds
LOCK_WAIT_S = 30.0
_SHA256 = re.compile(r"[0-9a-f]{64}")


class StoreError(ValueError):
    """A golden directory refpos will not write into (one line: the directory and how to proceed)."""


class StoreWarning(UserWarning):
    """A file refpos kept where it would have removed one of its own: its bytes are not those refpos wrote."""


def check_entry(rel: str) -> tuple[str, ...]:
    """The components of ``rel`` if it may name a file of a golden directory; :class:`InputError` otherwise.

    A plain relative path (:func:`refpos.directory.relative_parts`) that is none of refpos's own names:
    not ``manifest.json`` or the journal, and no component beginning ``.refpos-`` (the journal, temporary
    files); compared without case, as a case-insensitive file system would. A manifest listing one would
    have refpos remove its own state as a stale golden file.
    """
    parts = relative_parts(rel)
    names = [part.casefold() for part in parts]
    if names[0] in (MANIFEST, JOURNAL) or any(name.startswith(STATE_PREFIX) for name in names):
        raise InputError(f"path {rel!r} is reserved for refpos's own state ({MANIFEST}, {JOURNAL}, any "
                         f"{STATE_PREFIX}* name): it cannot be a golden file")
    return parts


def listed_files(manifest: dict[str, Any]) -> dict[str, str]:
    """``{file: sha256}`` of every file a manifest lists (case inputs and outputs, and ``files``)."""
    out: dict[str, str] = {}
    for case in manifest.get("cases", []):
        for kind in ("inputs", "outputs"):
            for entry in case.get(kind, {}).values():
                out[entry["file"]] = entry["sha256"]
    out.update(manifest.get("files", {}))
    return out


def owner(manifest: dict[str, Any]) -> str:
    """Whose goldens a manifest holds: ``golden generate``, or ``golden model <name>``."""
    source = manifest.get("source") or {"command": "generate"}
    if source.get("command") == "model":
        return f"golden model {source.get('name')!r}"
    return "golden generate"


def _relocated(manifest: dict[str, Any], where: dict[str, str]) -> dict[str, Any]:
    """``manifest`` with every file moved to ``where[file]`` (files not in ``where`` stay)."""
    def move(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (where.get(v, v) if k == "file" and isinstance(v, str) else move(v)) for k, v in value.items()}
        return [move(v) for v in value] if isinstance(value, list) else value

    moved = {**manifest, "cases": move(manifest["cases"])}
    if "files" in manifest:
        moved["files"] = {where.get(rel, rel): digest for rel, digest in manifest["files"].items()}
    return moved


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dump_json(value: Any, indent: int = 0) -> str:
    """JSON with one key per line but lists of numbers and strings on one line (a compact manifest)."""
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {dump_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [pad + dump_json(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _dump(manifest: dict[str, Any]) -> bytes:
    return (dump_json(manifest) + "\n").encode("utf8")


class _Writer:
    def __init__(self, directory: Directory, manifest: dict[str, Any], files: dict[str, bytes]) -> None:
        self.dir = directory
        self.manifest = manifest
        self.files = files
        self.digests = {rel: _sha256(data) for rel, data in files.items()}

    # ---------------------------------------------------------------------------------- reading
    def read_json(self, rel: str, what: str) -> tuple[Any, bytes]:
        """The JSON value of ``rel`` and the bytes it was read from."""
        data = self.dir.read_bytes(rel, what=what, max_bytes=MAX_MANIFEST_BYTES)
        try:
            return parse_json(data.decode("utf-8-sig"), self.dir.name(rel)), data
        except UnicodeDecodeError:
            raise InputError(f"{self.dir.name(rel)}: not UTF-8 text") from None

    def refused(self, rel: str, why: str) -> StoreError:
        return StoreError(f"{self.dir.name(rel)}: {why}; refpos did not write it and does not overwrite it: move it "
                          "away, or choose another --out directory")

    # ------------------------------------------------------------------------------- the steps
    def previous(self, force: bool) -> dict[str, Any] | None:
        """The manifest in force in the directory (``None``: an empty directory), or a refusal."""
        root = self.dir.path
        info = self.dir.lstat(MANIFEST)
        if info is None:
            leftovers = [n for n in self.dir.entries() if not n.startswith(TEMP_PREFIX)]
            if leftovers:
                raise StoreError(f"{root}: not empty ({len(leftovers)} entries, e.g. {sorted(leftovers)[0]!r}) and "
                                 "holds no refpos golden manifest: refpos writes goldens only into an empty directory "
                                 "or one it wrote; choose a new or empty --out directory")
            return None
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{self.dir.name(MANIFEST)}: is not a regular file (a symlink?); refpos writes only into "
                             "a directory whose manifest it wrote: choose a new or empty --out directory")
        try:
            old, _ = self.read_json(MANIFEST, "golden manifest")
            validate_manifest(old, FORMAT_VERSION)
            for rel in listed_files(old):
                check_entry(rel)
        except (InputError, SchemaError) as exc:
            raise StoreError(f"{self.dir.name(MANIFEST)}: not a refpos golden manifest refpos can replace ({exc}); "
                             "choose a new or empty --out directory") from None
        if owner(old) != owner(self.manifest) and not force:
            raise StoreError(f"{root} holds the goldens of {owner(old)}; this run writes those of "
                             f"{owner(self.manifest)}: pass --force to replace them, or choose another --out directory")
        return old

    def claim(self) -> dict[str, Any]:
        """Write, into an empty directory, a manifest of this run's source with no cases: the directory is
        refpos's before any golden file is in it."""
        empty = {key: value for key, value in self.manifest.items() if key != "files"}
        empty["cases"] = []
        self.dir.write_bytes(MANIFEST, _dump(empty))
        return empty

    def journal(self) -> tuple[dict[str, set[str]], bytes] | None:
        """An interrupted run's journal: path → the sha256 of the bytes it may have left there, and the
        journal's own bytes (``None``: no journal). One refpos cannot read as its own is refused."""
        info = self.dir.lstat(JOURNAL)
        if info is None:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise self.refused(JOURNAL, "is not a regular file where refpos keeps its journal")
        try:
            data, raw = self.read_json(JOURNAL, "journal")
        except InputError as exc:
            raise self.refused(JOURNAL, f"not a refpos journal ({exc})") from None
        files = data.get("files") if isinstance(data, dict) and data.get("format") == JOURNAL_FORMAT else None
        if not isinstance(files, dict) or not all(
                isinstance(digests, list) and all(isinstance(d, str) and _SHA256.fullmatch(d) for d in digests)
                for digests in files.values()):
            raise self.refused(JOURNAL, "not a refpos journal (a \"files\" object of path -> list of sha256)")
        try:
            for rel in files:
                check_entry(rel)
        except InputError as exc:
            raise self.refused(JOURNAL, f"not a refpos journal ({exc})") from None
        return {rel: set(digests) for rel, digests in files.items()}, raw

    def remove(self, rel: str, digests: set[str]) -> None:
        """Remove ``rel`` if its bytes are the ones refpos wrote there; else keep it, and say so."""
        if self.dir.remove_file(rel, digests):
            return
        try:
            present = self.dir.lstat(rel) is not None
        except InputError:
            present = True  # a symlink on the way: something of someone else's is there
        if present:
            warnings.warn(StoreWarning(f"{self.dir.name(rel)}: kept: its bytes are not the ones refpos recorded "
                                       "for it (sha256), so refpos did not write them"), stacklevel=2)

    def finish_interrupted(self, in_force: dict[str, str]) -> None:
        """Remove what an interrupted run wrote and the manifest in force does not list."""
        journal = self.journal()
        if journal is None:
            return
        entries, raw = journal
        for rel, digests in sorted(entries.items()):
            if rel not in in_force:
                self.remove(rel, digests)
        self.dir.remove_file(JOURNAL, {_sha256(raw)})

    def plan(self, old_files: dict[str, str]) -> dict[str, str]:
        """Where each new file is written (canonical path → path); files kept as they are left out."""
        staging = f"{STAGING_PREFIX}{secrets.token_hex(6)}"
        where: dict[str, str] = {}
        for rel, digest in self.digests.items():
            info = self.dir.lstat(rel)
            if rel not in old_files:
                if info is not None:
                    raise self.refused(rel, f"exists, and no refpos manifest of {self.dir.path} lists it")
                where[rel] = rel
                continue
            present = None if info is None else self.dir.sha256(rel)
            if info is not None and stat.S_ISLNK(info.st_mode):
                raise self.refused(rel, "is a symlink where the manifest lists a file")
            if info is not None and present not in (old_files[rel], digest):
                raise self.refused(rel, "holds other bytes than the sha256 the manifest records")
            if old_files[rel] != digest or present != digest:
                where[rel] = f"{staging}/{rel}"
        return where

    def journal_bytes(self, old_files: dict[str, str], where: dict[str, str]) -> bytes:
        """The journal of this run: every path it may leave a file at, with the sha256 of each bytes it may
        leave there (a new file; at a staged file's canonical path, the old bytes until the copy; the old bytes
        of a file the new manifest no longer lists)."""
        entries: dict[str, set[str]] = {}
        for rel, target in where.items():
            entries.setdefault(target, set()).add(self.digests[rel])
            entries.setdefault(rel, set()).add(self.digests[rel])
        for rel, digest in old_files.items():
            if rel not in self.files or rel in where:
                entries.setdefault(rel, set()).add(digest)
        files = {rel: sorted(digests) for rel, digests in sorted(entries.items())}
        return json.dumps({"format": JOURNAL_FORMAT, "files": files}).encode("utf8")

    def write(self, force: bool) -> None:
        for rel in self.files:
            check_entry(rel)
        with self.dir.lock(LOCK_WAIT_S):
            old = self.previous(force)
            old_files = listed_files(old if old is not None else self.claim())
            self.finish_interrupted(old_files)
            where = self.plan(old_files)
            journal = self.journal_bytes(old_files, where)
            self.dir.write_bytes(JOURNAL, journal)
            for rel, target in where.items():
                self.dir.write_bytes(target, self.files[rel])
            staged = {rel: target for rel, target in where.items() if target != rel}
            if staged:
                self.dir.write_bytes(MANIFEST, _dump(_relocated(self.manifest, staged)))
                for rel, target in staged.items():
                    self.dir.copy_file(target, rel)
            self.dir.write_bytes(MANIFEST, _dump(self.manifest))
            for rel, digest in old_files.items():
                if rel not in self.files:
                    self.remove(rel, {digest})
            for rel, target in staged.items():
                self.remove(target, {self.digests[rel]})
            self.dir.remove_file(JOURNAL, {_sha256(journal)})


def replace_directory(root: str | os.PathLike[str], manifest: dict[str, Any], files: dict[str, bytes], *,
                      force: bool = False, hook: Hook | None = None) -> None:
    """Make ``root`` hold ``manifest`` (``manifest.json``) and ``files`` (relative path → bytes): see the
    module docstring for what is refused, why an interruption leaves a verifying directory, and when a
    :class:`StoreWarning` names a file kept."""
    path = os.path.normpath(os.fspath(root))  # "out/" names the same entry as "out"
    try:
        with Directory(path, create=True, follow=False, hook=hook) as directory:
            _Writer(directory, manifest, files).write(force)
    except InputError as exc:
        raise StoreError(str(exc)) from None
