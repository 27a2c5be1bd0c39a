"""One directory opened once, and every file beneath it reached through that directory's descriptor.

A golden directory may come from anywhere, and ``--out DIR`` may name a directory someone else prepared.
Resolving a path once (``realpath``) and opening it later leaves a window in which a component can be
swapped for a symlink; so refpos never opens a golden file by its path. :class:`Directory` opens the
directory itself once, then walks every relative path one component at a time, each opened relative to the
descriptor of its parent with ``O_NOFOLLOW``:

* a symlink anywhere on the way is refused (the kernel refuses to follow it: ``ELOOP``), whatever it points
  to, and a ``..`` component is refused before anything is opened, so nothing outside the directory is
  ever reached;
* a file is opened without blocking and checked with ``fstat`` on the open descriptor: a FIFO, a device, a
  socket or a directory is refused before a byte is read;
* writes go to a fresh temporary file in the target's own directory (``O_CREAT | O_EXCL | O_NOFOLLOW``),
  are flushed to disk, then renamed over the target (``os.replace``: the target is either the old file or
  the new one, never a mix, and a symlink at the target is replaced, not followed) or, where nothing may be
  replaced, hard-linked to its name (``link`` fails if the name exists: nothing appearing meanwhile is
  overwritten); directories are created one component at a time, likewise;
* a file is removed only if its bytes, read through a descriptor opened without following a symlink, have
  a sha256 the caller names (the bytes refpos wrote there), and the name still leads to that same file;
* a directory opened to be written into (``follow=False``) has its own last component opened relative to
  its parent's descriptor with ``O_DIRECTORY | O_NOFOLLOW``: a symlink swapped in for it at any moment is
  refused, never followed; :meth:`Directory.lock` takes an exclusive lock on it for a whole run.

:func:`refpos.outputs.write_file`, the one writer of every file refpos writes outside a golden directory
(figures, position ids), opens the file's directory with :class:`Directory` and writes the file as above.

Every refusal is an :class:`~refpos.inputs.InputError` (a ``ValueError``) with one line naming the path.
``hook(operation, path)``, when given, is called before every change on disk (``"write"``, ``"rename"``,
``"link"``, ``"unlink"``, ``"rmdir"``, ``"mkdir"``): the tests raise from it to interrupt a writer at each
step (refpos/tests/test_hostile_writes.py).
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from refpos.inputs import CLOEXEC, READ_FLAGS, InputError, read_open_file, regular_file

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | CLOEXEC
_READ_FLAGS = READ_FLAGS | _NOFOLLOW
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | CLOEXEC
#: the prefix of refpos's temporary files (a fresh random name each time, created exclusively)
TEMP_PREFIX = ".refpos-tmp-"

Hook = Callable[[str, str], None]


class MissingFile(InputError):
    """The file (or a directory on its way) does not exist."""


def relative_parts(rel: str) -> tuple[str, ...]:
    """The components of a relative path inside a directory; :class:`InputError` for anything else.

    Refused: an empty path, an absolute one (``/…``, or a drive ``C:…``), a backslash or NUL byte, and any
    ``.``, ``..`` or empty component (``a//b``): a path names one file in one way.
    """
    if not isinstance(rel, str) or not rel:
        raise InputError(f"the path must be a non-empty relative path, got {rel!r}")
    if "\x00" in rel or "\\" in rel:
        raise InputError(f"path {rel!r} holds a NUL byte or a backslash (use '/' between parts)")
    if rel.startswith("/") or (len(rel) > 1 and rel[1] == ":" and rel[0].isascii() and rel[0].isalpha()):
        raise InputError(f"path {rel!r} is absolute")
    parts = tuple(rel.split("/"))
    if any(p in ("", ".", "..") for p in parts):
        raise InputError(f"path {rel!r} has an empty, '.' or '..' component")
    return parts


def _open_path(path: str, *, create: bool) -> int:
    """The directory ``path`` opened by its path, symlinks followed (made first with ``create``)."""
    if create:
        try:
            os.makedirs(path, exist_ok=True)
        except FileExistsError:
            raise InputError(f"{path}: exists and is not a directory") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot create the directory ({exc.strerror or exc})") from None
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{path}: no such directory") from None
    except NotADirectoryError:
        raise InputError(f"{path}: not a directory") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open the directory ({exc.strerror or exc})") from None


class Directory:
    """A directory opened once (``path`` itself may be reached through symlinks, it is the caller's
    choice); everything beneath it through its descriptor, never through a symlink.

    ``create``: the directory (and its parents) are made if missing. ``follow=False``: the last component of
    ``path`` is not followed either: it is opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a
    symlink there (put there before or during the call) is refused; the parents are the caller's choice.
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False, follow: bool = True,
                 hook: Hook | None = None) -> None:
        self.path = os.fspath(path)
        self.hook = hook
        self.fd = -1
        if not hasattr(os, "O_NOFOLLOW") or os.open not in os.supports_dir_fd:  # pragma: no cover - not POSIX
            raise InputError(f"{self.path}: this system cannot open files relative to a directory without "
                             "following symlinks; refpos reads and writes golden directories only where it can")
        parent, last = os.path.split(os.path.normpath(self.path))
        if follow or last in ("", os.curdir, os.pardir):  # "." and ".." are never symlinks
            self.fd = _open_path(self.path, create=create)
            return
        parent_fd = _open_path(parent or os.curdir, create=create)
        try:
            self.fd = self._open_dir(parent_fd, last, self.path, create=create)
        finally:
            os.close(parent_fd)

    def __enter__(self) -> Directory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def name(self, rel: str) -> str:
        """``rel`` as the user sees it: the directory's path joined with it."""
        return os.path.join(self.path, rel)

    # ------------------------------------------------------------------------------- walking
    def _open_dir(self, parent: int, part: str, shown: str, *, create: bool) -> int:
        for attempt in (0, 1):
            try:
                return os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create or attempt:
                    raise MissingFile(f"{shown}: no such directory") from None
                self._change("mkdir", shown)
                try:
                    os.mkdir(part, 0o777, dir_fd=parent)
                except FileExistsError:
                    pass  # made meanwhile: open it (still without following a symlink)
                except OSError as exc:
                    raise InputError(f"{shown}: cannot create the directory ({exc.strerror or exc})") from None
            except OSError as exc:
                raise InputError(self._refusal(parent, part, shown, exc, "directory")) from None
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def parent(self, rel: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """``(descriptor of rel's directory, rel's last component)``, every component reached without
        following a symlink (``create``: missing directories are made)."""
        parts = relative_parts(rel)
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts[:-1]):
                child = self._open_dir(fd, part, self.name("/".join(parts[: i + 1])), create=create)
                os.close(fd)
                fd = child
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _refusal(self, parent: int, part: str, shown: str, exc: OSError, what: str) -> str:
        """The one-line reason an open of ``part`` failed: a symlink, not a directory, permissions, …"""
        try:
            mode = os.stat(part, dir_fd=parent, follow_symlinks=False).st_mode
        except OSError:
            mode = None
        if mode is not None and stat.S_ISLNK(mode) and shown == self.path:
            return (f"{shown}: is a symlink; refpos writes into a directory only without following a link (give "
                    "the directory it points to)")
        if mode is not None and stat.S_ISLNK(mode):
            return (f"{shown}: is a symlink; refpos never follows a symlink inside a golden directory (a "
                    "symlink could lead outside it)")
        if exc.errno == errno.ENOTDIR or (mode is not None and what == "directory" and not stat.S_ISDIR(mode)):
            return f"{shown}: is not a directory"
        return f"{shown}: cannot open ({exc.strerror or exc})"

    def lstat(self, rel: str) -> os.stat_result | None:
        """``lstat`` of ``rel`` (a symlink is reported as one, not followed); ``None`` when it is missing."""
        try:
            with self.parent(rel) as (fd, last):
                return os.stat(last, dir_fd=fd, follow_symlinks=False)
        except (MissingFile, FileNotFoundError):
            return None

    def entries(self) -> list[str]:
        """The names in the directory itself (``.`` and ``..`` left out)."""
        return os.listdir(self.fd)

    # ------------------------------------------------------------------------------- reading
    def open_file(self, rel: str, *, what: str = "file") -> BinaryIO:
        """``rel`` opened for reading if it is a regular file reached without a symlink; else InputError."""
        shown = self.name(rel)
        with self.parent(rel) as (parent, last):
            try:
                fd = os.open(last, _READ_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                raise MissingFile(f"{shown}: missing (no such file)") from None
            except OSError as exc:
                raise InputError(self._refusal(parent, last, shown, exc, what)) from None
        return regular_file(fd, shown, what)

    def read_bytes(self, rel: str, *, what: str = "file", max_bytes: int) -> bytes:
        """The bytes of the regular file ``rel`` (at most ``max_bytes``), read once from one descriptor."""
        with self.open_file(rel, what=what) as fh:
            return read_open_file(fh, self.name(rel), what=what, max_bytes=max_bytes)

    # ------------------------------------------------------------------------------- writing
    def _change(self, operation: str, shown: str) -> None:
        if self.hook is not None:
            self.hook(operation, shown)

    def write_bytes(self, rel: str, data: bytes, *, replace: bool = True) -> None:
        """Write ``data`` to ``rel``: a fresh temporary file beside it, flushed, then renamed over it
        (``replace=False``: linked to its name, which refuses a file that exists, even one made meanwhile)."""
        shown = self.name(rel)
        with self.parent(rel, create=True) as (parent, last):
            temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
            self._change("write", shown)
            try:
                fd = os.open(temp, _CREATE_FLAGS, 0o666, dir_fd=parent)
            except OSError as exc:
                raise InputError(f"{shown}: cannot create a file beside it ({exc.strerror or exc})") from None
            linked = False
            try:
                try:
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                        fh.flush()
                        os.fsync(fh.fileno())
                except OSError as exc:
                    raise InputError(f"{shown}: cannot write ({exc.strerror or exc})") from None
                self._change("rename", shown)
                linked = not replace and self._link_new(parent, temp, last, shown)
                if not linked:
                    self._replace(parent, temp, last, shown)
            except BaseException:
                self._discard(parent, temp)
                raise
            if linked:  # the file has its name; the temporary one goes
                self._discard(parent, temp)

    def _link_new(self, parent: int, temp: str, last: str, shown: str) -> bool:
        """Give ``temp`` the name ``last`` if that name is free (``link`` never replaces); ``False`` where the
        file system has no hard links (the caller renames instead, having looked once more that it is free)."""
        try:
            os.link(temp, last, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
            return True
        except OSError as exc:
            if isinstance(exc, FileExistsError) or _lstat(parent, last) is not None:
                raise InputError(f"{shown}: exists (made while refpos wrote it); refpos does not replace a file "
                                 "unless asked (--force)") from None
            return False

    def _replace(self, parent: int, temp: str, last: str, shown: str) -> None:
        try:
            os.replace(temp, last, src_dir_fd=parent, dst_dir_fd=parent)
        except IsADirectoryError:
            raise InputError(f"{shown}: is a directory; refpos replaces only files") from None
        except OSError as exc:
            raise InputError(f"{shown}: cannot rename into place ({exc.strerror or exc})") from None

    @staticmethod
    def _discard(parent: int, temp: str) -> None:
        try:
            os.unlink(temp, dir_fd=parent)
        except OSError:
            pass

    def copy_file(self, source: str, target: str) -> None:
        """``target`` becomes a file with the bytes of ``source`` (a hard link renamed into place; a copy
        where the file system has no hard links)."""
        shown = self.name(target)
        with self.parent(source) as (src_parent, src_last), self.parent(target, create=True) as (parent, last):
            temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
            self._change("link", shown)
            try:
                os.link(src_last, temp, src_dir_fd=src_parent, dst_dir_fd=parent, follow_symlinks=False)
            except OSError:
                with self.open_file(source) as fh:
                    data = fh.read()
                self.write_bytes(target, data)
                return
            try:
                self._change("rename", shown)
                self._replace(parent, temp, last, shown)
            except BaseException:
                self._discard(parent, temp)
                raise

    def sha256(self, rel: str) -> str | None:
        """The sha256 of the regular file ``rel`` (no symlink followed); ``None`` if there is none there."""
        try:
            with self.open_file(rel) as fh:
                return _sha256(fh)
        except (InputError, OSError):
            return None

    def remove_file(self, rel: str, digests: Collection[str]) -> bool:
        """Remove ``rel`` if it is a regular file whose bytes have a sha256 of ``digests`` (the bytes refpos
        wrote there) and its name still leads to the file those bytes were read from; then remove the
        directories on its way that this left empty. Whether it was removed: anything else is left alone."""
        shown = self.name(rel)
        try:
            with self.parent(rel) as (parent, last):
                try:
                    fh = regular_file(os.open(last, _READ_FLAGS, dir_fd=parent), shown)
                except (InputError, OSError):
                    return False  # missing, a symlink, not a regular file: nothing refpos wrote lies there
                with fh:
                    read = os.fstat(fh.fileno())
                    if _sha256(fh) not in digests or not _same_file(_lstat(parent, last), read):
                        return False
                    self._change("unlink", shown)
                    os.unlink(last, dir_fd=parent)
        except InputError:
            return False  # a symlink or a file on the way
        parts = relative_parts(rel)
        for depth in range(len(parts) - 1, 0, -1):  # the emptied directories, deepest first
            if not self._remove_empty_dir("/".join(parts[:depth])):
                break
        return True

    @contextmanager
    def lock(self, wait_s: float) -> Iterator[None]:
        """An exclusive lock on this directory (``flock`` on its descriptor, released when the block ends or
        the process dies) for the ``with`` block; a lock another run holds is waited for at most ``wait_s``
        seconds, then :class:`InputError`."""
        import fcntl  # POSIX, like the rest of this class

        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise InputError(f"{self.path}: another refpos run is writing into it (waited {wait_s:g} s "
                                     "for its lock); run again when that one has finished") from None
                time.sleep(0.05)
            except OSError as exc:
                raise InputError(f"{self.path}: cannot lock the directory ({exc.strerror or exc})") from None
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _remove_empty_dir(self, rel: str) -> bool:
        with self.parent(rel) as (parent, last):
            try:
                if self._listing(parent, last):
                    return False
                self._change("rmdir", self.name(rel))
                os.rmdir(last, dir_fd=parent)
            except OSError:
                return False
        return True

    @staticmethod
    def _listing(parent: int, last: str) -> list[str]:
        fd = os.open(last, _DIRECTORY_FLAGS, dir_fd=parent)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)


def _lstat(parent: int, last: str) -> os.stat_result | None:
    try:
        return os.stat(last, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None


def _same_file(a: os.stat_result | None, b: os.stat_result) -> bool:
    return a is not None and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _sha256(fh: BinaryIO) -> str:
    digest = hashlib.sha256()
    while block := fh.read(2**20):
        digest.update(block)
    return digest.hexdigest()

