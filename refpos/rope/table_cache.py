r"""RoPE's float64 tables computed once per set of positions: a bounded cache, keyed by exact bytes.

Every call of :func:`refpos.apply_rope` and :func:`refpos.rope_cos_sin` needs the per-pair tables

.. math:: C_{p,j} = A\cos(p\,\omega_j), \qquad S_{p,j} = A\sin(p\,\omega_j)

(:func:`refpos.rope.core.rope_pair_tables`: float64 angles, one ``cos`` and one ``sin`` per position and pair).
They are the most expensive part of a rotation (NumPy's float64 ``cos`` and ``sin`` cost far more per value than
the products), and a model applies the same positions to every layer, batch and head group. This module keeps
the tables of the positions seen last and hands them back instead of computing them again.

**What a table depends on, and so the key.** The tables are a function of the positions (values, dtype,
shape), of ``ω`` (values, dtype), of ``A``, of the M-RoPE sections and their assignment and of the direction of
the angles (``angle_sign``), evaluated in one
array library on one device. The key holds each of these **exactly**, with the function computing them
(:func:`refpos.rope.core.rope_pair_tables`): the bytes of the positions and of ``ω``, the 8 bytes of ``A`` as a
float64 (so ``-0.0``, ``0.0`` and every NaN payload differ), the shapes, dtypes, sections, direction, the backend's name
and the device. Python's dictionary compares whole keys on a hash
match, so two inputs that differ in one byte never share an entry. Nothing else of a
:class:`~refpos.rope.config.RopeConfig` (layout, placement, head size) reaches the tables; the dtype of x
does not either: the callers cast and lay out the float64 tables themselves.

**Bounded.** Each backend has its own cache (host memory and a GPU's memory are different budgets), capped
at ``REFPOS_TABLE_CACHE`` MiB (default :data:`DEFAULT_CAP_MIB`; ``0`` turns caching off). The bytes counted
are the tables' and the key's; the least recently used entries leave first, and a table larger than the cap
is computed and not kept.

**Never changed by a caller.** NumPy tables are stored read-only (a view of them cannot be made writeable
either); the fast forms read them and :func:`refpos.rope_cos_sin` returns new arrays laid out from them, so a
caller that writes into what it was given never changes what the next caller gets.

**Threads.** One lock guards each cache's entries; the tables are computed outside it (on refpos's threads,
:mod:`refpos.parallel`, for large NumPy tables). Two threads missing the same key at once both compute it and
store equal tables.
"""

from __future__ import annotations

import math
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace, device_of, is_cupy_namespace, is_numpy_namespace, to_numpy
from refpos.parallel import run_blocks, threads_for
from refpos.rope.config import RopeConfig

#: ``(positions, inv_freq, attention_factor, rope) -> (cos, sin)``: :func:`refpos.rope.core.rope_pair_tables`
TablesOf = Callable[[Array, Array, float, RopeConfig], tuple[Array, Array]]

#: the cap of each backend's cache when ``REFPOS_TABLE_CACHE`` is unset, in MiB: the tables of 2**20 positions
#: of a 128-wide head (64 pairs: 2 × 2**26 float64 values … 1 GiB) do not fit, those of 131072 (128 MiB) do
DEFAULT_CAP_MIB = 256

#: values per block, at most, when a NumPy table is computed in blocks of rows on threads
_BLOCK_VALUES = 2**20


def cache_cap() -> int:
    """The cap of each backend's cache in bytes: ``REFPOS_TABLE_CACHE`` MiB, or :data:`DEFAULT_CAP_MIB`.

    Raises
    ------
    ValueError
        ``REFPOS_TABLE_CACHE`` is set but is not a non-negative integer (``0``: no cache).
    """
    env = os.environ.get("REFPOS_TABLE_CACHE", "").strip()
    if not env:
        return DEFAULT_CAP_MIB * 2**20
    if not env.isdigit():
        raise ValueError(f"REFPOS_TABLE_CACHE must be a non-negative integer (MiB; 0 turns the cache off), got "
                         f"{env!r}")
    return int(env) * 2**20


class TableCache:
    """Tables by key, least recently used first out, at most ``cap`` bytes (tables and keys) held.

    Thread-safe: every read and change of the entries holds one lock.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[Hashable, tuple[tuple[Array, ...], int]] = OrderedDict()
        self._lock = threading.Lock()
        self._held = 0

    @property
    def held_bytes(self) -> int:
        """Bytes of the tables and keys held now."""
        return self._held

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> tuple[Array, ...] | None:
        """The tables stored under ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, tables: tuple[Array, ...], nbytes: int, cap: int) -> None:
        """Store ``tables`` (``nbytes`` with the key) and drop the least recently used entries until at most
        ``cap`` bytes are held; tables larger than ``cap`` are not stored."""
        if nbytes > cap:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._held -= old[1]
            while self._entries and self._held + nbytes > cap:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._held -= dropped
            self._entries[key] = (tables, nbytes)
            self._held += nbytes

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._held = 0


_caches: dict[str, TableCache] = {}
_caches_lock = threading.Lock()


def cache_for(xp: Any) -> TableCache:
    """The cache of the array library ``xp`` (one per backend, created on first use; NumPy and CuPy are one
    backend whether or not array-api-compat wraps them)."""
    name = _library_name(xp)
    with _caches_lock:
        return _caches.setdefault(name, TableCache())


def clear_caches() -> None:
    """Empty every backend's cache (the memory goes back with the last reference to a table)."""
    with _caches_lock:
        caches = list(_caches.values())
    for cache in caches:
        cache.clear()


def _library_name(xp: Any) -> str:
    if is_numpy_namespace(xp):
        return "numpy"
    return "cupy" if is_cupy_namespace(xp) else xp.__name__


def table_key(tables_of: TablesOf, positions: Array, inv_freq: Array, attention_factor: float,
              rope: RopeConfig) -> tuple[Any, ...]:
    """The function and everything it reads, exactly: the bytes of the positions and of ``ω``, ``A``'s 8 bytes,
    shapes, dtypes, the M-RoPE sections and assignment, the direction of the angles, the library and the device."""
    xp = array_namespace(positions)
    host_positions, host_inv = np.asarray(to_numpy(positions)), np.asarray(to_numpy(inv_freq))
    return (tables_of, _library_name(xp), str(device_of(positions)),
            host_positions.dtype.str, host_positions.shape, host_positions.tobytes(),
            host_inv.dtype.str, host_inv.shape, host_inv.tobytes(),
            struct.pack("<d", float(attention_factor)), rope.mrope_section, rope.mrope_scheme, rope.angle_sign)


def _key_bytes(key: tuple[Any, ...]) -> int:
    """The key's own size: its byte strings and a fixed allowance for the tuple and its small fields."""
    return sum(len(part) for part in key if isinstance(part, bytes)) + 512


def cached_pair_tables(tables_of: TablesOf, positions: Array, inv_freq: Array, attention_factor: float,
                       rope: RopeConfig) -> tuple[Array, Array]:
    """``tables_of(positions, inv_freq, attention_factor, rope)`` (:func:`refpos.rope.core.rope_pair_tables`:
    ``(…, T, m)`` float64), from the cache when these exact positions, ``ω``, ``A`` and sections were seen
    before; computed (:func:`compute_pair_tables`) and stored, within the cap, otherwise.

    NumPy tables come back read-only; write into a copy.

    See Also
    --------
    refpos.rope.core.rope_pair_tables : the tables themselves
    refpos.rope.core.rope_cos_sin : the public tables, laid out from these
    """
    cap = cache_cap()
    if 2 * math.prod(_token_shape(positions, rope)) * inv_freq.shape[0] * 8 > cap:  # off, or tables over the cap
        return compute_pair_tables(tables_of, positions, inv_freq, attention_factor, rope)  # no key, nothing kept
    key = table_key(tables_of, positions, inv_freq, attention_factor, rope)
    cache = cache_for(array_namespace(positions))
    tables = cache.get(key)
    if tables is None:
        cos, sin = compute_pair_tables(tables_of, positions, inv_freq, attention_factor, rope)
        if isinstance(cos, np.ndarray):
            cos.setflags(write=False)
            sin.setflags(write=False)
        tables = (cos, sin)
        cache.put(key, tables, _table_bytes(cos) + _table_bytes(sin) + _key_bytes(key), cap)
    cos, sin = tables
    return cos[...], sin[...]  # views: a NumPy view of a read-only array cannot be made writeable


def _token_shape(positions: Array, rope: RopeConfig) -> tuple[int, ...]:
    """``(..., T)``: the positions' shape, without M-RoPE's leading row of axes."""
    return tuple(positions.shape if rope.mrope_section is None else positions.shape[1:])


def _table_bytes(table: Array) -> int:
    return math.prod(table.shape) * array_namespace(table).finfo(table.dtype).bits // 8  # float tables


def compute_pair_tables(tables_of: TablesOf, positions: Array, inv_freq: Array, attention_factor: float,
                        rope: RopeConfig) -> tuple[Array, Array]:
    """``tables_of`` at every position; large NumPy tables are computed in blocks of rows on refpos's threads
    (the values are elementwise, so every block gives the bits the whole would)."""
    xp = array_namespace(positions)
    tokens = _token_shape(positions, rope)  # (..., T)
    m, t = inv_freq.shape[0], tokens[-1] if tokens else 1
    values = math.prod(tokens) * m
    if not is_numpy_namespace(xp) or threads_for(values) == 1 or t < 2:
        return tables_of(positions, inv_freq, attention_factor, rope)
    cos, sin = np.empty((*tokens, m)), np.empty((*tokens, m))
    rows = -(-t // max(threads_for(values), -(-values // _BLOCK_VALUES)))  # a block per thread, or more

    def block(rows: slice) -> None:
        cos[..., rows, :], sin[..., rows, :] = tables_of(positions[..., rows], inv_freq, attention_factor, rope)

    run_blocks([partial(block, slice(t0, min(t0 + rows, t))) for t0 in range(0, t, rows)], numpy=True, work=values)
    return cos, sin
