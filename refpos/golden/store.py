"""Writing a golden directory: nothing escapes it, nothing refpos did not write is removed, and a run
interrupted at any point leaves a directory that verifies (the old one or the new one).

``refpos golden generate --out DIR`` and ``refpos golden model … --out DIR`` hand :func:`replace_directory`
the new manifest (with every file at its *canonical* path, e.g. ``cases/<case id>/cos.npy``) and the bytes
of every file. What it does, in order:

1. **Claim the directory.** ``DIR`` is created if missing; a symlink as ``DIR`` itself is refused. A
   ``DIR`` that holds anything but no refpos manifest is refused (refpos would otherwise mix its files with
   someone else's); so is a ``manifest.json`` that is a symlink or not a valid refpos manifest. A manifest
   written for another source (another model's ``golden model`` name, or ``golden generate``) is replaced
   only with ``force`` (``--force``).
2. **Finish an interrupted run.** The journal ``.refpos-journal.json`` (written before any file of a run)
   lists every file that run may create, overwrite or remove; those the manifest in force does not list are
   removed (they are refpos's, and nothing verifies against them).
3. **Plan.** A canonical file the old manifest lists with the same sha256, and which still holds those
   bytes, is kept as it is. A canonical path no manifest lists is written in place (nothing verifies
   against it yet). A canonical path the old manifest lists with other bytes cannot be overwritten while
   the old manifest still points there: its new bytes go to a *staging* path
   (``.refpos-staging-<random>/<canonical path>``). A canonical path that exists but that no refpos
   manifest or journal lists is refused: it is not refpos's to overwrite.
4. **Journal** the files this run creates, then **write** them, each to a temporary file beside it that
   is renamed into place (:class:`refpos.directory.Directory`).
5. **Commit**: replace ``manifest.json`` (one rename: before it, the old manifest and its untouched files;
   after it, the new manifest). With staged files the committed manifest points at the staging paths; each
   staged file is then copied to its canonical path (renamed into place: the canonical files are no longer
   listed by the manifest in force), and a second manifest rename points at the canonical paths.
6. **Clean up**: remove the files the old manifest listed that the new one does not, the staged copies,
   the directories that left empty, then the journal.

Every step that changes the disk passes the directory's ``hook`` first; refpos/tests/test_hostile_writes.py
raises from it at every step in turn and runs ``refpos golden verify`` on what is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from collections.abc import Iterable
from typing import Any

from refpos.directory import TEMP_PREFIX, Directory, Hook, relative_parts
from refpos.golden.schema import FORMAT_VERSION, SchemaError, validate_manifest
from refpos.inputs import InputError, parse_json

MANIFEST = "manifest.json"
JOURNAL = ".refpos-journal.json"
STAGING_PREFIX = ".refpos-staging-"
JOURNAL_FORMAT = "refpos-golden-journal"
#: how long a manifest or journal refpos reads back may be
MAX_MANIFEST_BYTES = 64 * 2**20


class StoreError(ValueError):
    """A golden directory refpos will not write into (one line: the directory and how to proceed)."""


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

    # ---------------------------------------------------------------------------------- reading
    def read_json(self, rel: str, what: str) -> Any:
        data = self.dir.read_bytes(rel, what=what, max_bytes=MAX_MANIFEST_BYTES)
        try:
            return parse_json(data.decode("utf-8-sig"), self.dir.name(rel))
        except UnicodeDecodeError:
            raise InputError(f"{self.dir.name(rel)}: not UTF-8 text") from None

    def sha256_of(self, rel: str) -> str | None:
        """The sha256 of the regular file at ``rel`` (no symlink followed), ``None`` if there is none."""
        try:
            with self.dir.open_file(rel) as fh:
                digest = hashlib.sha256()
                while block := fh.read(2**20):
                    digest.update(block)
                return digest.hexdigest()
        except InputError:
            return None

    # ------------------------------------------------------------------------------- the steps
    def previous(self, force: bool) -> dict[str, Any] | None:
        """The manifest in force in the directory (``None``: an empty directory), or a refusal."""
        root = self.dir.path
        info = self.dir.lstat(MANIFEST)
        if info is None:
            leftovers = [n for n in self.dir.entries()
                         if n != JOURNAL and not n.startswith((STAGING_PREFIX, TEMP_PREFIX))]
            if leftovers and not self.journal_lists(leftovers):
                raise StoreError(f"{root}: not empty ({len(leftovers)} entries, e.g. {sorted(leftovers)[0]!r}) and "
                                 "holds no refpos golden manifest: refpos writes goldens only into an empty directory "
                                 "or one it wrote; choose a new or empty --out directory")
            return None
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{self.dir.name(MANIFEST)}: is not a regular file (a symlink?); refpos writes only into "
                             "a directory whose manifest it wrote: choose a new or empty --out directory")
        try:
            old = self.read_json(MANIFEST, "golden manifest")
            validate_manifest(old, FORMAT_VERSION)
            for rel in listed_files(old):
                relative_parts(rel)
        except (InputError, SchemaError) as exc:
            raise StoreError(f"{self.dir.name(MANIFEST)}: not a refpos golden manifest refpos can replace ({exc}); "
                             "choose a new or empty --out directory") from None
        if owner(old) != owner(self.manifest) and not force:
            raise StoreError(f"{root} holds the goldens of {owner(old)}; this run writes those of "
                             f"{owner(self.manifest)}: pass --force to replace them, or choose another --out directory")
        return old

    def journal_lists(self, names: Iterable[str]) -> bool:
        """Whether every top-level entry in ``names`` is on the way to a file the journal lists."""
        journal = self.journal()
        tops = {rel.split("/")[0] for rel in journal}
        return bool(journal) and all(n in tops for n in names)

    def journal(self) -> list[str]:
        """The files an interrupted run may have created (empty: no journal, or an unusable one)."""
        info = self.dir.lstat(JOURNAL)
        if info is None or not stat.S_ISREG(info.st_mode):
            return []
        try:
            data = self.read_json(JOURNAL, "journal")
        except InputError:
            return []
        files = data.get("files") if isinstance(data, dict) and data.get("format") == JOURNAL_FORMAT else None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            return []
        usable = []
        for rel in files:
            try:
                relative_parts(rel)
            except InputError:
                continue
            usable.append(rel)
        return usable

    def finish_interrupted(self, in_force: dict[str, str]) -> None:
        """Remove what an interrupted run created and the manifest in force does not list."""
        for rel in self.journal():
            if rel not in in_force:
                self.dir.remove_file(rel)
        self.dir.remove_file(JOURNAL)

    def plan(self, old_files: dict[str, str]) -> dict[str, str]:
        """Where each new file is written (canonical path → path); files kept as they are left out."""
        staging = f"{STAGING_PREFIX}{secrets.token_hex(6)}"
        where: dict[str, str] = {}
        for rel, data in self.files.items():
            relative_parts(rel)
            digest = hashlib.sha256(data).hexdigest()
            if rel in old_files:
                if old_files[rel] != digest or self.sha256_of(rel) != digest:
                    where[rel] = f"{staging}/{rel}"
                continue
            info = self.dir.lstat(rel)
            if info is not None:
                raise StoreError(f"{self.dir.name(rel)}: exists, and no refpos manifest of {self.dir.path} lists it: "
                                 "refpos does not overwrite it (move it away, or choose another --out directory)")
            where[rel] = rel
        return where

    def write(self, force: bool) -> None:
        old = self.previous(force)
        old_files = listed_files(old) if old is not None else {}
        self.finish_interrupted(old_files)
        where = self.plan(old_files)
        touched = sorted({*where.values(), *where, *old_files})  # created, overwritten or removed by this run
        self.dir.write_bytes(JOURNAL, json.dumps({"format": JOURNAL_FORMAT, "files": touched}).encode("utf8"))
        for rel, target in where.items():
            self.dir.write_bytes(target, self.files[rel])
        staged = {rel: target for rel, target in where.items() if target != rel}
        if staged:
            self.dir.write_bytes(MANIFEST, _dump(_relocated(self.manifest, staged)))
            for rel, target in staged.items():
                self.dir.copy_file(target, rel)
        self.dir.write_bytes(MANIFEST, _dump(self.manifest))
        for rel in [*old_files, *staged.values()]:
            if rel not in self.files:
                self.dir.remove_file(rel)
        self.dir.remove_file(JOURNAL)


def replace_directory(root: str | os.PathLike[str], manifest: dict[str, Any], files: dict[str, bytes], *,
                      force: bool = False, hook: Hook | None = None) -> None:
    """Make ``root`` hold ``manifest`` (``manifest.json``) and ``files`` (relative path → bytes): see the
    module docstring for what is refused and why an interruption leaves a verifying directory."""
    path = os.path.normpath(os.fspath(root))  # "out/" names the same entry as "out"
    if os.path.islink(path):
        raise StoreError(f"{path}: is a symlink; give the directory it points to as --out")
    try:
        with Directory(path, create=True, hook=hook) as directory:
            _Writer(directory, manifest, files).write(force)
    except InputError as exc:
        raise StoreError(str(exc)) from None
