"""Strict ``.npy`` reading and deterministic writing for golden files and ``refpos check``.

Golden arrays are ``.npy`` version 1.0, little-endian, C order, never pickled: a 10-byte preamble
(``\\x93NUMPY``, version 1 0, header length as little-endian uint16), an ASCII header dict padded with
spaces to a multiple of 64 bytes and ending in ``\\n``, then the raw data. :func:`read_npy` accepts only
that (plus big-endian and version 2/3 headers, which it converts) and raises :class:`NpyError` — a
``ValueError`` with a one-line message — for anything else: a wrong magic string, a truncated or
oversized payload, an object (pickled) dtype, Fortran order, a malformed header.

Examples
--------
>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "a.npy")
>>> digest = write_npy(path, np.arange(3.0))
>>> read_npy(path).tolist()
[0.0, 1.0, 2.0]
"""

from __future__ import annotations

import ast
import hashlib
import math
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from refpos import inputs
from refpos.inputs import InputError, open_regular

MAGIC = b"\x93NUMPY"
#: dtypes a golden file or a candidate may hold (descr without byte order -> kind)
ALLOWED_KINDS = "fiub"  # float, signed int, unsigned int, bool; never object, void, string


class NpyError(InputError):
    """An unusable ``.npy`` file (message names the file and the reason, one line)."""


def npy_bytes(array: Any) -> bytes:
    """The exact bytes of ``array`` as a version 1.0, little-endian, C-order ``.npy`` file."""
    a = np.asarray(array)
    if a.dtype.kind not in ALLOWED_KINDS:
        raise TypeError(f"array dtype {a.dtype} cannot be written (numeric and bool only, never pickled)")
    a = a.astype(a.dtype.newbyteorder("<"), order="C", copy=True)  # keeps 0-d (ascontiguousarray does not)
    descr = a.dtype.str  # e.g. '<f8', '|b1'
    shape = repr(tuple(int(n) for n in a.shape))  # "()", "(3,)", "(2, 3)" as numpy writes them
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    total = len(MAGIC) + 2 + 2 + len(header) + 1
    header = header + " " * ((64 - total % 64) % 64) + "\n"
    return MAGIC + b"\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1") + a.tobytes(order="C")


def write_npy(path: str | os.PathLike[str], array: Any, *, force: bool = False) -> str:
    """Write ``array`` to ``path`` (parents created) and return the sha256 hex digest of the file; written by
    :func:`refpos.outputs.write_file` (never through a symlink; an existing file replaced only with ``force``)."""
    from refpos.outputs import write_file

    data = npy_bytes(array)
    write_file(path, data, force=force)
    return hashlib.sha256(data).hexdigest()


def _open(path: str | os.PathLike[str]) -> BinaryIO:
    """:func:`refpos.inputs.open_regular` with its refusals as :class:`NpyError`."""
    try:
        return open_regular(path, what=".npy file")
    except InputError as exc:
        raise NpyError(str(exc)) from None


def sha256_file(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> str:
    """sha256 hex digest of a regular file's bytes (read in blocks; at most ``max_bytes``, default the
    ``.npy`` cap plus a header)."""
    limit = (inputs.max_npy_bytes() + MAX_HEADER_BYTES + 12) if max_bytes is None else max_bytes
    digest, total = hashlib.sha256(), 0
    with _open(path) as fh:
        while block := fh.read(2**20):
            total += len(block)
            if total > limit:
                raise NpyError(f"{os.fspath(path)}: more than the {limit} bytes refpos reads for a .npy file")
            digest.update(block)
    return digest.hexdigest()


def read_npy_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular ``.npy`` file, read once (at most the ``.npy`` cap plus a header), so that
    its sha256 and :func:`parse_npy` see the same bytes."""
    limit = inputs.max_npy_bytes() + MAX_HEADER_BYTES + 12
    try:
        return inputs.read_bytes(path, what=".npy file", max_bytes=limit)
    except InputError as exc:
        raise NpyError(str(exc)) from None


#: the longest header accepted (NumPy's own reader refuses more than 10000 bytes by default)
MAX_HEADER_BYTES = 65536


@dataclass(frozen=True)
class NpyHeader:
    """A checked ``.npy`` header: the data start at byte ``offset`` and hold ``nbytes`` bytes."""

    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    count: int
    nbytes: int


def _preamble(data: bytes, name: str) -> tuple[int, int, int]:
    """``(major version, header length, header start)`` from the first 12 bytes."""
    if len(data) < 10 or not data.startswith(MAGIC):
        raise NpyError(f"{name}: not a .npy file (missing the \\x93NUMPY magic string)")
    major = data[6]
    if major == 1:
        hlen, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3):
        if len(data) < 12:
            raise NpyError(f"{name}: truncated .npy header")
        hlen, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise NpyError(f"{name}: unsupported .npy format version {major}")
    if hlen > MAX_HEADER_BYTES:
        raise NpyError(f"{name}: .npy header of {hlen} bytes, more than the {MAX_HEADER_BYTES} refpos reads")
    return major, hlen, start


def element_count(shape: tuple[int, ...]) -> int:
    """The number of elements of ``shape``, exactly: a Python int never wraps around, where a 64-bit product
    of ``(2**32, 2**32)`` is 0."""
    return math.prod(shape)


def parse_header(data: bytes, name: str = "array", *, data_bytes: int,
                 max_bytes: int | None = None) -> NpyHeader:
    """Check the header at the start of ``data`` (preamble and header dict, nothing more needed) against the
    ``data_bytes`` that follow it in the file: dtype, order, shape, element count and byte size are all
    checked *before* anything is allocated for the data."""
    major, hlen, start = _preamble(data, name)
    max_bytes = _cap(max_bytes)
    if len(data) < start + hlen:
        raise NpyError(f"{name}: truncated .npy header ({len(data)} bytes, header needs {start + hlen})")
    try:
        header = ast.literal_eval(data[start:start + hlen].decode("latin1" if major < 3 else "utf8"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError, TypeError):
        raise NpyError(f"{name}: corrupt .npy header") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise NpyError(f"{name}: corrupt .npy header (needs exactly descr, fortran_order, shape)")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(descr, str):
        raise NpyError(f"{name}: structured dtypes are not accepted (descr {descr!r})")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        raise NpyError(f"{name}: unknown dtype {descr!r}") from None
    if dtype.kind not in ALLOWED_KINDS or dtype.hasobject or dtype.shape or dtype.itemsize == 0:
        raise NpyError(f"{name}: dtype {descr!r} is not accepted (numeric or bool only; pickled/object "
                       "arrays are never loaded)")
    if fortran is not False:
        raise NpyError(f"{name}: Fortran-order arrays are not accepted (write C order)")
    if not isinstance(shape, tuple) or not all(type(n) is int and 0 <= n < 2**63 for n in shape):
        raise NpyError(f"{name}: corrupt .npy shape {shape!r} (needs a tuple of integers >= 0)")
    count = element_count(shape)
    nbytes = count * dtype.itemsize
    if nbytes > max_bytes:
        raise NpyError(f"{name}: shape {shape} of {dtype} is {nbytes} bytes, more than the {max_bytes} refpos "
                       "reads for a .npy file")
    if data_bytes < nbytes:
        raise NpyError(f"{name}: truncated .npy data ({data_bytes} of {nbytes} bytes for shape {shape})")
    if data_bytes > nbytes:
        raise NpyError(f"{name}: {data_bytes - nbytes} unexpected bytes after the .npy data")
    return NpyHeader(dtype=dtype, shape=shape, offset=start + hlen, count=count, nbytes=nbytes)


def _cap(max_bytes: int | None) -> int:
    """``max_bytes``, or the cap of :mod:`refpos.inputs` as it is now (:func:`refpos.inputs.max_npy_bytes`)."""
    return inputs.max_npy_bytes() if max_bytes is None else max_bytes


def _array(payload: bytes, header: NpyHeader) -> np.ndarray:
    array = np.frombuffer(payload, dtype=header.dtype, count=header.count).reshape(header.shape)  # (header shape)
    return array.astype(header.dtype.newbyteorder("="), order="C", copy=True)


def parse_npy(data: bytes, name: str = "array", *, max_bytes: int | None = None) -> np.ndarray:
    """Parse the bytes of a ``.npy`` file strictly (see the module docstring); never unpickles."""
    _, hlen, start = _preamble(data, name)
    header = parse_header(data, name, data_bytes=max(len(data) - start - hlen, 0), max_bytes=max_bytes)
    return _array(data[header.offset:], header)


def _read_header(fh: BinaryIO, name: str, file_size: int, max_bytes: int) -> NpyHeader:
    head = fh.read(12)
    _, hlen, start = _preamble(head, name)
    head += fh.read(max(start + hlen - len(head), 0))  # hlen <= MAX_HEADER_BYTES: a bounded read
    return parse_header(head, name, data_bytes=max(file_size - start - hlen, 0), max_bytes=max_bytes)


def open_npy_header(path: str | os.PathLike[str]) -> tuple[int, NpyHeader]:
    """A descriptor of the regular ``.npy`` file ``path`` (the caller closes it) and its checked header, with
    no cap on the data's size: nothing of the data is read here (:mod:`refpos.golden.npy_file` reads it)."""
    name = os.fspath(path)
    with _open(name) as fh:
        header = _read_header(fh, name, os.fstat(fh.fileno()).st_size, 2**63)
        return os.dup(fh.fileno()), header


def read_npy_header(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> NpyHeader:
    """The checked header of a ``.npy`` file (for memory-mapped or streamed reading of its data)."""
    name = os.fspath(path)
    with _open(name) as fh:
        return _read_header(fh, name, os.fstat(fh.fileno()).st_size, max_bytes)


def read_npy(path: str | os.PathLike[str], *, max_bytes: int | None = None, mmap: bool = False) -> np.ndarray:
    """Read a ``.npy`` file strictly; :class:`NpyError` (one line) for anything unusable.

    Only a regular file is opened (a FIFO or a device is refused before reading); its header is checked
    against the file's size and ``max_bytes`` before the data are read. ``mmap=True``: the data are
    memory-mapped read-only (``np.memmap`` at the checked header's offset, in the file's byte order)
    instead of read: a file of gigabytes costs no memory until it is read; the cap does not apply to a map.
    A map dies by ``SIGBUS`` when the file is truncated while mapped: ``refpos check`` reads its files with
    explicit reads instead (:func:`refpos.golden.npy_file.open_npy`).
    """
    name = os.fspath(path)
    if mmap:
        header = read_npy_header(path, max_bytes=2**63)
        if header.count == 0:
            return np.empty(header.shape, dtype=header.dtype)
        return np.memmap(path, dtype=header.dtype, mode="r", offset=header.offset, shape=header.shape)
    with _open(name) as fh:
        header = _read_header(fh, name, os.fstat(fh.fileno()).st_size, max_bytes)
        try:
            payload = fh.read(header.nbytes)
        except OSError as exc:
            raise NpyError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if len(payload) != header.nbytes:
        raise NpyError(f"{name}: truncated .npy data ({len(payload)} of {header.nbytes} bytes; the file changed "
                       "while read)")
    return _array(payload, header)
