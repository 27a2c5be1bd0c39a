"""A ``.npy`` file's data read block by block with explicit reads: a file truncated while it is read is an
error line, not a signal.

``refpos check`` compares candidates of gigabytes in bounded memory, block by block. A memory map would do
that too, but if the file shrinks while it is mapped (another process rewriting it, a network file system),
touching a page past its new end raises ``SIGBUS``, which kills the process with no message. :class:`NpyFile`
reads instead: each block is one or a few positioned reads (``os.pread``) at offsets computed from the
checked header, and a read that comes back short raises :class:`~refpos.golden.files.npy.NpyError` naming the
file and the bytes missing.

It offers what the check's blockwise code uses of an array: ``shape``, ``dtype``, ``ndim``, ``size``,
``reshape`` (a C-order file has every shape of its element count) and indexing, each index read from the
file as a NumPy array:

* basic indices, integers and slices of step 1, along the leading axes (``a[l0:l1, t0:t1]``,
  ``a[:, q0:, :]``): one read per run of consecutive elements;
* one 1-D integer array per leading axis, all of one length ``N`` (``a[lead_index, token_index]``): ``N``
  reads of the trailing block each.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from refpos.golden.files.npy import write_npy
>>> path = os.path.join(tempfile.mkdtemp(), "a.npy")
>>> _ = write_npy(path, np.arange(24.0).reshape(2, 3, 4))
>>> with open_npy(path) as a:
...     a.shape, a[1, 1:3].tolist(), a[np.array([0, 1]), np.array([2, 0])].tolist()
((2, 3, 4), [[16.0, 17.0, 18.0, 19.0], [20.0, 21.0, 22.0, 23.0]], [[8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]])
"""

from __future__ import annotations

import itertools
import math
import os
import weakref
from typing import Any

import numpy as np

from refpos.golden.files.npy import NpyError, NpyHeader, open_npy_header


class _Source:
    """The open file and where its data lie (shared by every reshaped view)."""

    def __init__(self, fd: int, name: str, header: NpyHeader) -> None:
        self.fd, self.name, self.header = fd, name, header
        self.close = weakref.finalize(self, os.close, fd)  # closed once: by close(), or when collected

    def read(self, start: int, count: int) -> np.ndarray:
        """Elements ``[start, start + count)`` of the data, in native byte order."""
        dtype = self.header.dtype
        out = np.empty(count, dtype=dtype)
        view = memoryview(out).cast("B")
        offset = self.header.offset + start * dtype.itemsize
        done = 0
        while done < len(view):
            try:
                n = os.preadv(self.fd, [view[done:]], offset + done)
            except OSError as exc:
                raise NpyError(f"{self.name}: cannot read ({exc.strerror or exc})") from None
            if n == 0:
                raise NpyError(f"{self.name}: truncated while read: {len(view) - done} bytes missing at byte "
                               f"{offset + done} (the file changed during the check)")
            done += n
        return out if dtype.isnative else out.astype(dtype.newbyteorder("="))


class NpyFile:
    """The data of a ``.npy`` file in the shape ``shape``, read on indexing (see the module docstring)."""

    def __init__(self, source: _Source, shape: tuple[int, ...]) -> None:
        self._source = source
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(source.header.dtype).newbyteorder("=")

    # ------------------------------------------------------------------------------- what an array has
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def name(self) -> str:
        return self._source.name

    def reshape(self, *shape: Any) -> NpyFile:
        """The same data in another C-order shape (one ``-1`` allowed), as ``ndarray.reshape``."""
        if len(shape) == 1 and isinstance(shape[0], tuple):
            shape = shape[0]
        dims = [int(n) for n in shape]
        if dims.count(-1) == 1:
            known = math.prod(n for n in dims if n != -1)
            dims[dims.index(-1)] = self.size // known if known else 0
        if math.prod(dims) != self.size or any(n < 0 for n in dims):
            raise ValueError(f"cannot reshape {self.name} of shape {self.shape} into {tuple(shape)}")
        return NpyFile(self._source, tuple(dims))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = self._source.read(0, self.size).reshape(self.shape)
        return data if dtype is None else data.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> NpyFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NpyFile({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    # ------------------------------------------------------------------------------------- indexing
    def __getitem__(self, key: Any) -> np.ndarray:
        keys = list(key) if isinstance(key, tuple) else [key]
        if any(k is Ellipsis for k in keys):
            i = keys.index(Ellipsis)
            keys[i:i + 1] = [slice(None)] * (self.ndim - len(keys) + 1)
        if len(keys) > self.ndim:
            raise IndexError(f"too many indices for {self.name} of shape {self.shape}")
        keys += [slice(None)] * (self.ndim - len(keys))
        if any(isinstance(k, (np.ndarray, list)) for k in keys):
            return self._take(keys)
        return self._basic(keys)

    def _strides(self) -> list[int]:
        """Elements between neighbours along each axis (C order)."""
        return [math.prod(self.shape[i + 1:]) for i in range(self.ndim)]

    def _basic(self, keys: list[Any]) -> np.ndarray:
        if self.ndim == 0:
            return self._source.read(0, 1).reshape(())
        ranges: list[range] = []
        squeeze = []
        for axis, (k, n) in enumerate(zip(keys, self.shape, strict=True)):
            if isinstance(k, (int, np.integer)):
                i = int(k) + (n if k < 0 else 0)
                if not 0 <= i < n:
                    raise IndexError(f"index {int(k)} is out of bounds for axis {axis} of {self.name} (size {n})")
                ranges.append(range(i, i + 1))
                squeeze.append(axis)
            elif isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step != 1:
                    raise IndexError(f"{self.name}: only slices of step 1 are read block by block")
                ranges.append(range(start, max(start, stop)))
            else:
                raise IndexError(f"{self.name}: unsupported index {k!r}")
        # the last axis not taken whole: everything after it is contiguous, one read per index before it
        partial = [a for a in range(self.ndim) if len(ranges[a]) != self.shape[a]]
        last = partial[-1] if partial else 0
        strides = self._strides()
        run = len(ranges[last]) * strides[last]
        out_shape = tuple(len(r) for r in ranges)
        if math.prod(out_shape) == 0:
            return np.empty(out_shape, dtype=self.dtype).squeeze(axis=tuple(squeeze))
        pieces = []
        for lead in itertools.product(*ranges[:last]):
            start = sum(i * s for i, s in zip(lead, strides, strict=False)) + ranges[last].start * strides[last]
            pieces.append(self._source.read(start, run))
        data = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
        return data.reshape(out_shape).squeeze(axis=tuple(squeeze))

    def _take(self, keys: list[Any]) -> np.ndarray:
        arrays = [np.asarray(k) for k in keys if isinstance(k, (np.ndarray, list))]
        lead = len(arrays)
        if keys[:lead] != [k for k in keys if isinstance(k, (np.ndarray, list))] or \
                any(not (isinstance(k, slice) and k == slice(None)) for k in keys[lead:]):
            raise IndexError(f"{self.name}: integer arrays are read only on the leading axes, the rest whole")
        if any(a.ndim != 1 or a.dtype.kind not in "iu" or a.shape != arrays[0].shape for a in arrays):
            raise IndexError(f"{self.name}: the index arrays must be 1-D integer arrays of one length")
        strides = self._strides()
        block = strides[lead - 1]  # elements of one trailing block
        for axis, a in enumerate(arrays):
            if a.size and (a.min() < 0 or a.max() >= self.shape[axis]):
                raise IndexError(f"index out of bounds for axis {axis} of {self.name} (size {self.shape[axis]})")
        starts = sum(a.astype(np.int64) * strides[axis] for axis, a in enumerate(arrays))
        out = np.empty((arrays[0].size, block), dtype=self.dtype)
        for row, start in enumerate(np.atleast_1d(starts)):
            out[row] = self._source.read(int(start), block)
        return out.reshape(arrays[0].size, *self.shape[lead:])


def open_npy(path: str | os.PathLike[str]) -> NpyFile:
    """Open a ``.npy`` file for block reads: its header checked as :func:`refpos.golden.files.npy.read_npy` checks it
    (against the file's size; no cap, nothing read yet), the descriptor kept open until :meth:`NpyFile.close`
    (or the object is collected)."""
    fd, header = open_npy_header(path)
    return NpyFile(_Source(fd, os.fspath(path), header), header.shape)
