"""Observations kept on disk: transformers' side of the survey run once, judged again as often as refpos changes.

One file per model type, ``<dir>/<model_type>.npz``: every array of the :class:`survey.run.Observation` (its
probe's queries, keys, masks, tables) as an entry ``a0, a1, ...``, and the rest as JSON in the entry
``observation``: dataclasses by their name (only the survey's own, :data:`TYPES`), tuples, dicts with keys
that are not strings, and arrays by their entry. Read with ``allow_pickle=False``: nothing is unpickled, an
unknown type name is a ``ValueError``.

The directory also holds ``environment.json`` (the transformers and torch versions the observations were made
with); :func:`load_all` refuses a directory made with other versions.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from survey import pixels, probe, run, sequence_towers, towers, within_parts

#: the dataclasses an observation file may hold, by name
TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    probe.Probe, probe.Run, probe.Call, probe.Lookup, probe.Built, probe.Applied, probe.Case, run.Observation,
    run.Row, pixels.PixelRun, pixels.Site, pixels.Capture, pixels.PositionCall, towers.Tower,
    sequence_towers.SequenceRun, within_parts.PartRun)}
ENVIRONMENT = "environment.json"
#: how long the observations took: one entry per ``observe`` run (model types, seconds, processes)
TIMING = "timing.json"


def _encode(value: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(value, np.ndarray):
        arrays.append(value)
        return {"__array__": len(arrays) - 1}
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if TYPES.get(name) is not type(value):
            raise TypeError(f"survey.store cannot store a {name}")
        fields = {f.name: _encode(getattr(value, f.name), arrays) for f in dataclasses.fields(value)
                  if not (isinstance(value, run.Row) and f.name == "verdict")}
        return {"__type__": name, "fields": fields}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return [_encode(v, arrays) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in value):
            return {k: _encode(v, arrays) for k, v in value.items()}
        return {"__items__": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"__repr__": repr(value)}  # a config value JSON has no form for (a dtype): kept as text


def _decode(value: Any, arrays: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if "__array__" in value:
        return arrays[f"a{value['__array__']}"]
    if "__tuple__" in value:
        return tuple(_decode(v, arrays) for v in value["__tuple__"])
    if "__items__" in value:
        return {_decode(k, arrays): _decode(v, arrays) for k, v in value["__items__"]}
    if "__repr__" in value:
        return value["__repr__"]
    if "__type__" in value:
        cls = TYPES.get(value["__type__"])
        if cls is None:
            raise ValueError(f"observation file names a type the survey does not store: {value['__type__']!r}")
        return cls(**{k: _decode(v, arrays) for k, v in value["fields"].items()})
    return {k: _decode(v, arrays) for k, v in value.items()}


def to_bytes(observation: Any) -> bytes:
    """One observation as the bytes of its ``.npz`` file (what a worker sends back)."""
    arrays: list[np.ndarray] = []
    text = json.dumps(_encode(observation, arrays))
    buffer = io.BytesIO()
    np.savez(buffer, observation=np.array(text), **{f"a{i}": a for i, a in enumerate(arrays)})
    return buffer.getvalue()


def write_bytes(data: bytes, path: Path) -> None:
    """Write an observation's bytes (:func:`to_bytes`) to ``path``, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    partial.write_bytes(data)
    partial.replace(path)


def save(observation: Any, path: Path) -> None:
    """Write one observation to ``path`` (``.npz``)."""
    write_bytes(to_bytes(observation), path)


def load(path: Path) -> Any:
    """Read one observation written by :func:`save`."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files if name != "observation"}
        return _decode(json.loads(str(data["observation"])), arrays)


def path_of(directory: Path, model_type: str) -> Path:
    return directory / f"{model_type}.npz"


def write_environment(directory: Path, environment: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ENVIRONMENT).write_text(json.dumps(environment, indent=1), encoding="utf-8")


def check_environment(directory: Path, environment: dict[str, str]) -> None:
    """Raise ``SystemExit`` when ``directory``'s observations were made with other versions than ``environment``."""
    stored = json.loads((directory / ENVIRONMENT).read_text(encoding="utf-8"))
    differ = {k: (stored.get(k), v) for k, v in environment.items() if stored.get(k) != v}
    if differ:
        raise SystemExit(f"observations in {directory} were made with other versions: "
                         + ", ".join(f"{k} {a} (installed {b})" for k, (a, b) in differ.items()))


def add_timing(directory: Path, types: int, seconds: float, jobs: int) -> None:
    """Record one ``observe`` run's model types, wall-clock seconds and processes."""
    runs = timings(directory)
    runs.append({"types": types, "seconds": round(seconds), "jobs": jobs})
    (directory / TIMING).write_text(json.dumps(runs, indent=1), encoding="utf-8")


def timings(directory: Path) -> list[dict[str, int]]:
    """The ``observe`` runs recorded in ``directory`` (empty when none finished)."""
    path = directory / TIMING
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
