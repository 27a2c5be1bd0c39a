"""Array backends: NumPy (default), CuPy and array-api-strict.

refpos is written against the Python array API standard. Two rules decide which array library runs:

* A function that **takes arrays** computes in their namespace, found with
  ``array_api_compat.array_namespace``. Pass CuPy arrays and the work happens on the GPU.
* A function that **creates arrays from scratch** (tables, masks, slopes) takes ``xp=``; when it is
  ``None`` the current backend is used. The current backend is the one a ``with use_backend(...)``
  block chose in the running context; else the process default: ``"numpy"`` unless the environment
  variable ``REFPOS_BACKEND`` says otherwise or :func:`set_backend` changed it.

The choice of a ``with`` block is a context variable (:mod:`contextvars`): it holds in the thread (or
asyncio task) that entered the block and in the blocks refpos runs on its own threads for that call (they
run in a copy of the caller's context, :mod:`refpos.parallel`), and nowhere else, so two threads can use
two backends at once.

``array_api_strict`` is a deliberately minimal implementation of the standard. Running the spec suite on
it (``REFPOS_BACKEND=array_api_strict``) proves that no NumPy-only call hides in the code.

CuPy is imported only when it is asked for.

Examples
--------
>>> import refpos
>>> refpos.backend.backend_name()
'numpy'
>>> with refpos.use_backend("array_api_strict") as xp:
...     print(refpos.backend.backend_name(), xp.__name__)
array_api_strict array_api_strict
>>> refpos.backend.backend_name()
'numpy'
"""

from __future__ import annotations

import contextvars
import numbers
import os
from types import ModuleType
from typing import Any, TypeAlias

import array_api_compat
import numpy as np

BACKENDS = ("numpy", "cupy", "array_api_strict")

#: an array of any backend's namespace (NumPy, CuPy, array-api-strict): the one type refpos's signatures use for
#: arrays (the array API standard has no runtime array type to check against)
Array: TypeAlias = Any

__all__ = [
    "BACKENDS",
    "Array",
    "array_namespace",
    "backend_name",
    "device_of",
    "get_xp",
    "is_cupy_namespace",
    "is_numpy_namespace",
    "set_backend",
    "to_numpy",
    "use_backend",
]

_default: str | None = None  # the process default, resolved lazily so that REFPOS_BACKEND is read at first use
#: the backend a ``with use_backend(...)`` block chose in this context (None: the process default)
_chosen: contextvars.ContextVar[str | None] = contextvars.ContextVar("refpos_backend", default=None)


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
    """Name of the current backend: a ``with use_backend(...)`` block's in this context, else the process default
    (``REFPOS_BACKEND`` or ``"numpy"``, unless :func:`set_backend` changed it)."""
    chosen = _chosen.get()
    return chosen if chosen is not None else _process_default()


def _process_default() -> str:
    global _default
    if _default is None:
        env = os.environ.get("REFPOS_BACKEND", "numpy") or "numpy"
        try:
            _default = _check_backend_name(env)
        except ValueError as exc:
            raise ValueError(f"REFPOS_BACKEND: {exc}") from None
    return _default


def get_xp(xp: ModuleType | None = None) -> ModuleType:
    """The namespace to create arrays in: ``xp`` itself, or the current backend's namespace."""
    if xp is not None:
        if isinstance(xp, str):
            return _load_namespace(_check_backend_name(xp))
        return xp
    return _load_namespace(backend_name())


def set_backend(name: str) -> ModuleType:
    """Switch the process default backend and return its namespace.

    Every context without a ``with use_backend(...)`` block of its own uses it (a block's choice wins inside
    the block).

    Raises
    ------
    ValueError
        ``name`` is not one of ``"numpy"``, ``"cupy"``, ``"array_api_strict"``.
    ImportError, RuntimeError
        The backend's library is missing, or (CuPy) there is no usable GPU; nothing changes then.
    """
    global _default
    name = _check_backend_name(name)
    namespace = _load_namespace(name)  # fails before anything changes
    _default = name
    return namespace


class use_backend:
    """Switch the current backend for a ``with`` block: ``with use_backend("cupy") as xp: ...``.

    The choice holds in the context that entered the block (its thread or task, and the blocks refpos runs
    for it on its own threads), not in other threads. The backend is checked and loaded when the object is
    made (so a missing library fails at once), but nothing changes until ``__enter__``; ``__exit__`` restores
    the choice that held on entry. Making the object without ``with`` changes nothing: use
    :func:`set_backend` to switch the process default.

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
        self._tokens: list[contextvars.Token[str | None]] = []  # a stack: one object may be entered inside itself

    def __enter__(self) -> ModuleType:
        self._tokens.append(_chosen.set(self.name))
        return self.namespace

    def __exit__(self, *exc_info: object) -> None:
        _chosen.reset(self._tokens.pop())


def array_namespace(*arrays: Any) -> ModuleType:
    """The array API namespace of ``arrays`` (all must come from one library)."""
    return array_api_compat.array_namespace(*arrays)


def to_numpy(x: Any) -> np.ndarray:
    """Copy any supported array (NumPy, CuPy, array-api-strict, torch on the CPU) to a NumPy array; a Python number
    or a (nested) list or tuple of numbers becomes the NumPy array it spells.

    Raises
    ------
    TypeError
        ``x`` is none of these (a dict, a string, ``None``), or a list that NumPy can only hold as objects
        (ragged rows, integers beyond 64 bits, strings): the message names ``x``.
    """
    if isinstance(x, np.ndarray):
        return x
    if array_api_compat.is_cupy_array(x):
        return x.get()
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    if isinstance(x, (numbers.Number, np.generic, list, tuple)) and not isinstance(x, (str, bytes)):
        try:
            out = np.asarray(x)
        except (ValueError, OverflowError):  # ragged rows
            out = None
        if out is not None and out.dtype.kind in "biufc":
            return out
    raise TypeError(f"x must be an array (NumPy, CuPy, array-api-strict, torch) or numbers in a list, got "
                    f"{type(x).__name__}" + ("" if not isinstance(x, (list, tuple)) else
                                             " of values NumPy holds only as objects (ragged rows, integers beyond "
                                             "64 bits, strings)"))


def is_numpy_namespace(xp: ModuleType) -> bool:
    """True for NumPy (plain or wrapped by array-api-compat)."""
    return array_api_compat.is_numpy_namespace(xp)


def is_cupy_namespace(xp: ModuleType) -> bool:
    """True for CuPy (plain or wrapped by array-api-compat): the arrays live on a GPU."""
    return array_api_compat.is_cupy_namespace(xp)


def device_of(x: Any) -> Any:
    """The device an array lives on (``"cpu"`` for NumPy)."""
    return array_api_compat.device(x)
