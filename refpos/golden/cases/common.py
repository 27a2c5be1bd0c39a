"""What every golden case builder shares: the seeded random inputs of a case, its arrays as NumPy, its ``call``.

Each builder (one module of this package per case family, :mod:`refpos.golden.registry`) returns
:class:`refpos.golden.files.manifest.Case` objects computed by the reference on the current backend (converted to
NumPy for writing). Inputs come from ``numpy.random.default_rng(seed)`` with a seed derived from the case id
(:func:`rng_for`), so ``refpos golden generate`` is deterministic. A case's ``call`` (in ``parameters``) says how
an adapter reproduces it: ``function(*args)`` returns the outputs in order (:func:`call`,
:mod:`spec_tests.test_golden`).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np

from refpos.backend import get_xp, to_numpy


def rng_for(case_id: str) -> np.random.Generator:
    """The deterministic random generator of a case (seeded by the crc32 of its id)."""
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def to_np(x: Any) -> np.ndarray:
    """``x`` (any backend) as a NumPy array: what the golden files store."""
    return np.asarray(to_numpy(x))


def as_xp(a: Any) -> Any:
    """``a`` as an array of the current backend: what a case hands to the function it calls."""
    return get_xp().asarray(np.asarray(a))


#: rows of a per-model case's probe positions (docs/conventions.md#probe-positions)
N_PROBES = 32


def slug(name: str) -> str:
    """A file-system-safe case name: ``meta-llama/Llama-3.1-8B`` → ``meta-llama--Llama-3.1-8B``."""
    s = name.replace("/", "--")
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")
    return s


def probe_positions(max_position: int, original: int | None, seed_name: str) -> np.ndarray:
    """The probe positions (docs/conventions.md#probe-positions) below ``max_position``, then 32 seeded rows."""
    orig = original or max_position
    wanted = [0, 1, 2, 3, 7, 8, 255, 256, 257, 2047, 2048, 2049, orig - 1, orig, orig + 1, 2 * orig,
              8191, 8192, 32767, 32768, 65536, 65537, 66047, 66048, 131071, max_position - 1]
    probes = sorted({p for p in wanted if 0 <= p < max_position})[: N_PROBES - 4]
    rng = rng_for("probe/" + seed_name)
    block = N_PROBES - len(probes)
    start = int(rng.integers(0, max(max_position - block, 1)))
    return np.array(probes + list(range(start, start + block)), dtype=np.int64)


class In(str):
    """Marks a positional call argument taken from the case's input array of that name."""


class Param(str):
    """Marks a positional call argument taken from the case's ``parameters`` entry of that name."""


def call(function: str, returns: list[str], *args: Any) -> dict[str, Any]:
    """The ``call`` entry: adapter ``function(*args)`` returns the outputs named ``returns`` (in order).

    Arguments are positional, in the order of the adapter contract; each is ``{"input": name}`` (an
    input array of the case), ``{"param": name}`` (an entry of the case's parameters, e.g. the ``rope``
    dict) or ``{"value": v}`` (a JSON value).
    """
    spec = [{"input": str(a)} if isinstance(a, In) else {"param": str(a)} if isinstance(a, Param)
            else {"value": a} for a in args]
    return {"function": function, "args": spec, "returns": returns}


__all__ = ["N_PROBES", "In", "Param", "as_xp", "call", "probe_positions", "rng_for", "slug", "to_np"]
