"""Array backends: NumPy (default), CuPy and array-api-strict.

refpos is written against the Python array API standard. Two rules decide which array library runs:

* A function that **takes arrays** computes in their namespace, found with
  ``array_api_compat.array_namespace``. Pass CuPy arrays and the work happens on the GPU.
* A function that **creates arrays from scratch** (tables, masks, slopes) takes ``xp=``; when it is
  ``None`` the current backend is used. The current backend is ``"numpy"`` unless the environment
  variable ``REFPOS_BACKEND`` says otherwise, :func:`set_backend` changed it, or a
  ``with use_backend(...)`` block is running.

``array_api_strict`` is a deliberately minimal implementation of the standard. Running the spec suite on
it (``REFPOS_BACKEND=array_api_strict``) proves that no NumPy-only call hides in the code.

CuPy is imported only when it is asked for.

Examples
--------
>>> import refpos
>>> refpos.backend_name()
'numpy'
>>> with refpos.use_backend("array_api_strict") as xp:
...     print(refpos.backend_name(), xp.__name__)
array_api_strict array_api_strict
>>> refpos.backend_name()
'numpy'
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, TypeAlias

import array_api_compat
import numpy as np

BACKENDS = ("numpy", "cupy", "array_api_strict")

#: an array of any backend's namespace (NumPy, CuPy, array-api-strict): the one type refpos's signatures use for
#: arrays (the array API standard has no runtime array type to check against)
Array: TypeAlias = Any

_current: str | None = None  # resolved lazily so that REFPOS_BACKEND is read at first use


def _check_backend_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"backend must be a str, one of {BACKENDS}; got {type(name).__name__}")
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    return name


def _load_namespace(name: str) -> ModuleType:
    """Import and return the array namespace of a backend, with a clear error when it cannot run."""
    if name == "numpy":
        return array_api_compat.array_namespace(np.empty(0))
    if name == "array_api_strict":
        try:
            import array_api_strict
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "backend 'array_api_strict' needs the array-api-strict package: "
                "pip install array-api-strict"
            ) from exc
        return array_api_strict
    # cupy
    try:
        import cupy
    except ImportError as exc:
        raise ImportError(
            "backend 'cupy' needs CuPy and an NVIDIA GPU: pip install 'refpos[cupy]'"
        ) from exc
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing or broken
        raise RuntimeError(f"backend 'cupy': CuPy is installed but no CUDA device is usable ({exc})") from exc
    if n_devices < 1:
        raise RuntimeError("backend 'cupy': CuPy is installed but no CUDA device was found")
    return array_api_compat.array_namespace(cupy.empty(0))


def backend_name() -> str:
    """Name of the current backend: ``REFPOS_BACKEND`` or ``"numpy"``, unless switched by set_backend or
    use_backend."""
    global _current
    if _current is None:
        env = os.environ.get("REFPOS_BACKEND", "numpy") or "numpy"
        try:
            _current = _check_backend_name(env)
        except ValueError as exc:
            raise ValueError(f"REFPOS_BACKEND: {exc}") from None
    return _current


def get_xp(xp: ModuleType | None = None) -> ModuleType:
    """The namespace to create arrays in: ``xp`` itself, or the current backend's namespace."""
    if xp is not None:
        if isinstance(xp, str):
            return _load_namespace(_check_backend_name(xp))
        return xp
    return _load_namespace(backend_name())


def set_backend(name: str) -> ModuleType:
    """Switch the current backend for the whole process and return its namespace.

    Raises
    ------
    ValueError
        ``name`` is not one of ``"numpy"``, ``"cupy"``, ``"array_api_strict"``.
    ImportError, RuntimeError
        The backend's library is missing, or (CuPy) there is no usable GPU; nothing changes then.
    """
    global _current
    name = _check_backend_name(name)
    namespace = _load_namespace(name)  # fails before anything changes
    _current = name
    return namespace


class use_backend:
    """Switch the current backend for a ``with`` block: ``with use_backend("cupy") as xp: ...``.

    The backend is checked and loaded when the object is made (so a missing library fails at once), but
    nothing changes until ``__enter__``; ``__exit__`` restores the backend that was current on entry.
    Making the object without ``with`` changes nothing: use :func:`set_backend` to switch for good.

    Raises
    ------
    ValueError
        ``name`` is not one of ``"numpy"``, ``"cupy"``, ``"array_api_strict"``.
    ImportError, RuntimeError
        The backend's library is missing, or (CuPy) there is no usable GPU.
    """

    def __init__(self, name: str) -> None:
        self.name = _check_backend_name(name)
        self.namespace = _load_namespace(self.name)  # fails before anything changes
        self._previous: list[str] = []  # a stack, so that one object can be entered again inside itself

    def __enter__(self) -> ModuleType:
        global _current
        self._previous.append(backend_name())
        _current = self.name
        return self.namespace

    def __exit__(self, *exc_info: object) -> None:
        global _current
        _current = self._previous.pop()


def array_namespace(*arrays: Any) -> ModuleType:
    """The array API namespace of ``arrays`` (all must come from one library)."""
    return array_api_compat.array_namespace(*arrays)


def to_numpy(x: Any) -> np.ndarray:
    """Copy any supported array (NumPy, CuPy, array-api-strict) to a NumPy array."""
    if isinstance(x, np.ndarray):
        return x
    if array_api_compat.is_cupy_array(x):
        return x.get()
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def is_numpy_namespace(xp: ModuleType) -> bool:
    """True for NumPy (plain or wrapped by array-api-compat)."""
    return array_api_compat.is_numpy_namespace(xp)


def is_cupy_namespace(xp: ModuleType) -> bool:
    """True for CuPy (plain or wrapped by array-api-compat): the arrays live on a GPU."""
    return array_api_compat.is_cupy_namespace(xp)


def device_of(x: Any) -> Any:
    """The device an array lives on (``"cpu"`` for NumPy)."""
    return array_api_compat.device(x)
