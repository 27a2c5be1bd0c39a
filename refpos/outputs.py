"""Every file refpos writes outside a golden directory, written by one writer: :func:`write_file`.

``refpos plot --out FILE`` and ``--all --out-dir DIR``, ``refpos plot --config … --out FILE``, ``refpos check
--plot FILE`` and ``refpos positions --out FILE.npy`` name a file that may already exist, or that someone may
have replaced by a symlink to a file elsewhere. Each goes through :func:`write_file`:

* the file's directory is opened once (made if missing; it may be reached through symlinks, which is the
  user's choice of where to write) and everything else happens through its descriptor
  (:class:`refpos.directory.Directory`);
* the bytes go to a fresh temporary file beside the target, created with ``O_CREAT | O_EXCL | O_NOFOLLOW``,
  flushed to disk, then given the target's name: a reader never sees half a file;
* a symlink at the target is refused, with ``--force`` too: it is never followed and never replaced; so is
  anything but a regular file (a directory, a FIFO);
* an existing file is refused unless ``--force``: refpos does not tell its own files from yours, so it
  replaces none without being asked. Without ``--force`` the name is given by a hard link, which fails if
  the name exists, so a file that appears between the look and the write is not overwritten either.

:func:`check_output` makes the same look first, so that a command refuses before its work, not after it.
docs/security.md states the promises; refpos/tests/test_hostile_outputs.py tries each output against them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from refpos.directory import Directory
from refpos.inputs import KINDS, InputError


def refusal_of_existing(info: os.stat_result | None, *, force: bool) -> str | None:
    """Why a file may not be written where ``info`` (``lstat``, ``None``: nothing there) says something is:
    a symlink always (refpos never writes through one, nor replaces one), anything but a regular file
    always, a regular file unless ``force``. ``None``: it may be written."""
    if info is None:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "is a symlink; refpos never writes through a link, nor replaces one"
    if not stat.S_ISREG(info.st_mode):
        return f"is {KINDS.get(stat.S_IFMT(info.st_mode), 'not a regular file')}; refpos writes only files"
    return None if force else "exists; refpos does not replace a file unless asked (--force)"


def check_output(path: str | os.PathLike[str], *, force: bool = False) -> None:
    """:class:`InputError` if :func:`write_file` would refuse what lies at ``path`` now (it looks again when
    it writes)."""
    try:
        info = os.lstat(path)
    except OSError:
        return  # nothing there, or nothing to look at: write_file says which
    why = refusal_of_existing(info, force=force)
    if why is not None:
        raise InputError(f"{os.fspath(path)}: {why}")


def write_file(path: str | os.PathLike[str], data: bytes, *, force: bool = False) -> Path:
    """Write ``data`` to the file ``path`` (see the module docstring); ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    InputError
        ``path`` names a directory, holds a symlink or anything but a regular file, holds a file and
        ``force`` is false, or cannot be written (one line naming ``path`` and the reason).
    """
    name = os.fspath(path)
    folder, last = os.path.split(name)
    if last in ("", os.curdir, os.pardir):
        raise InputError(f"{name}: names a directory; give a file name")
    with Directory(folder or os.curdir, create=True) as directory:
        why = refusal_of_existing(directory.lstat(last), force=force)
        if why is not None:
            raise InputError(f"{name}: {why}")
        directory.write_bytes(last, data, replace=force)
    return Path(name)
