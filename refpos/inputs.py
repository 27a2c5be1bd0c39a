"""Reading files refpos did not write: regular files only, bounded sizes, strict JSON.

Every file refpos reads on a user's behalf (a config.json, a golden manifest, a ``.npy`` input or
candidate) goes through this module:

* :func:`open_regular` opens without blocking and refuses anything but a regular file *before reading a
  byte*: a FIFO would block forever, ``/dev/zero`` never ends, a directory is not a file;
* :func:`read_bytes` refuses a file larger than its cap (checked on the size the file reports and again
  on what is actually read, so a file that grows or lies about its size is still bounded);
* :func:`parse_json` refuses nesting deeper than :data:`MAX_JSON_DEPTH` (Python's parser would raise
  ``RecursionError``) and duplicate keys in one object (the parser would keep the last one silently);
* every refusal is an :class:`InputError`, a ``ValueError`` whose one-line message names the file.

What is promised, and how it is tested: docs/security.md.

Examples
--------
>>> parse_json('{"a": [1, {"b": 2}]}', "example.json")
{'a': [1, {'b': 2}]}
>>> parse_json('{"a": 1, "a": 2}', "example.json")
Traceback (most recent call last):
...
refpos.inputs.InputError: example.json: duplicate key 'a' in one JSON object (a parser would keep the last one)
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, BinaryIO

import numpy as np

#: a descriptor refpos opens is not inherited by the programs it starts (where the system has the flag)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: how refpos opens a file to read it: never blocking on a FIFO, binary on Windows
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | CLOEXEC | getattr(os, "O_BINARY", 0)

#: the largest JSON file read (config.json files are kilobytes, the committed golden manifest 0.5 MB)
MAX_JSON_BYTES = 64 * 2**20
#: the deepest JSON nesting accepted (configs nest 3-4 levels, manifests 7)
MAX_JSON_DEPTH = 64
#: the largest ``.npy`` payload read into memory by default (8 GiB); ``REFPOS_MAX_NPY_BYTES`` overrides it
#: (:func:`max_npy_bytes`)
MAX_NPY_BYTES = 8 * 2**30
#: the environment variable that overrides :data:`MAX_NPY_BYTES`, read each time the cap is used
NPY_CAP_VARIABLE = "REFPOS_MAX_NPY_BYTES"

KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


class InputError(ValueError):
    """A file refpos refuses to read, or cannot parse (one line, naming the file)."""


def max_npy_bytes() -> int:
    """The largest ``.npy`` payload refpos reads into memory: ``REFPOS_MAX_NPY_BYTES`` when it is set (read
    now, not when refpos was imported), else :data:`MAX_NPY_BYTES`.

    A value that is not a whole number of bytes of at least 1 (``abc``, ``-1``, ``1e9``, an empty string)
    is an :class:`InputError` naming the variable, not a cap that refuses every file.
    """
    text = os.environ.get(NPY_CAP_VARIABLE)
    if text is None:
        return MAX_NPY_BYTES
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) < 1:  # ASCII digits: int() takes '١٢' too
        shown = repr(text) if len(text) <= 40 else f"{text[:24]!r}… ({len(text)} characters)"
        raise InputError(f"{NPY_CAP_VARIABLE} must be a whole number of bytes >= 1 (the largest .npy payload "
                         f"refpos reads; unset: {MAX_NPY_BYTES}), got {shown}")
    return int(value)


def open_regular(path: str | os.PathLike[str], *, what: str = "file") -> BinaryIO:
    """Open ``path`` for binary reading if it is a regular file (symlinks followed); else :class:`InputError`.

    The file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor: opening a
    FIFO this way returns at once instead of waiting for a writer, and the check and the read see the
    same file.
    """
    name = os.fspath(path)
    flags = READ_FLAGS
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise InputError(f"{name}: cannot read, no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory, not a {what}") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot open the {what} ({exc.strerror or exc})") from None
    return regular_file(fd, name, what)


def regular_file(fd: int, name: str, what: str = "file") -> BinaryIO:
    """The open descriptor ``fd`` as a binary file if ``fstat`` says it is a regular file; else it is closed
    and :class:`InputError` names what it is (a FIFO, a device, a socket, a directory)."""
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise InputError(f"{name}: is {kind}; refpos reads a {what} only from a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], *, what: str = "file", max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes (else :class:`InputError`)."""
    name = os.fspath(path)
    with open_regular(name, what=what) as fh:
        return read_open_file(fh, name, what=what, max_bytes=max_bytes)


def read_open_file(fh: BinaryIO, name: str, *, what: str = "file", max_bytes: int) -> bytes:
    """The bytes of an open regular file, at most ``max_bytes`` (checked on the size ``fstat`` reports and
    again on what is read: a file that grows while read is still bounded)."""
    size = os.fstat(fh.fileno()).st_size
    if size > max_bytes:
        raise InputError(f"{name}: {size} bytes, more than the {max_bytes} refpos reads for a {what}")
    chunks, total = [], 0
    try:
        while chunk := fh.read(min(max(size, 2**16), max_bytes + 1 - total)):  # bounded, however it grows
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise InputError(f"{name}: more than the {max_bytes} bytes refpos reads for a {what}")
    except OSError as exc:
        raise InputError(f"{name}: cannot read the {what} ({exc.strerror or exc})") from None
    return b"".join(chunks)


def read_text(path: str | os.PathLike[str], *, what: str = "file", max_bytes: int | None = None) -> str:
    """A UTF-8 text file (a byte-order mark is allowed), bounded as :func:`read_bytes` (default
    :data:`MAX_JSON_BYTES`)."""
    data = read_bytes(path, what=what, max_bytes=MAX_JSON_BYTES if max_bytes is None else max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{os.fspath(path)}: not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})") \
            from None


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in JSON text, strings left out (linear time, no recursion)."""
    bare = _JSON_STRING.sub("", text).encode("utf-8", "replace")
    codes = np.frombuffer(bare, dtype=np.uint8)
    steps = (np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
             - np.isin(codes, (ord("]"), ord("}"))).astype(np.int64))
    return int(np.cumsum(steps).max()) if steps.size else 0


def _unique_keys(name: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise InputError(f"{name}: duplicate key {key!r} in one JSON object (a parser would keep the "
                                 "last one)")
            out[key] = value
        return out
    return hook


def parse_json(text: str, name: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text strictly: nesting at most ``max_depth``, no duplicate keys; :class:`InputError` else.

    ``NaN`` and ``Infinity`` (which Python's parser accepts) are left to the schema of what is read: a
    config's or a manifest's validation refuses non-finite numbers where they mean nothing.
    """
    depth = json_depth(text)
    if depth > max_depth:
        raise InputError(f"{name}: JSON nested {depth} levels deep, more than the {max_depth} refpos reads")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys(name))
    except InputError:
        raise
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: not valid JSON ({exc})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer literal beyond Python's 4300 digits
        raise InputError(f"{name}: unusable JSON ({str(exc).splitlines()[0]})") from None


def load_json(path: str | os.PathLike[str], *, what: str = "JSON file", max_bytes: int | None = None,
              max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Read and parse a JSON file: :func:`read_text` then :func:`parse_json`."""
    return parse_json(read_text(path, what=what, max_bytes=max_bytes), os.fspath(path), max_depth=max_depth)
