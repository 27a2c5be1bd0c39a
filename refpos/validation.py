"""Input validation shared by every module.

Every message names the parameter and says what is allowed. Nothing here clips, wraps or defaults a
bad value: it raises ``ValueError`` for a bad value and ``TypeError`` for a value of the wrong type.
"""

from __future__ import annotations

import math
import numbers
import os
import unicodedata
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from refpos.backend import array_namespace, get_xp


def check_choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """``value`` must be one of the strings in ``allowed``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {tuple(allowed)}; got {type(value).__name__}")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")
    return value


def check_bool(name: str, value: object) -> bool:
    """``value`` must be a bool (``True``/``False`` or a NumPy bool): a string such as ``"False"`` is not."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def shown_number(value: int | float) -> str:
    """A number as a message shows it: ``2**53`` for a large power of two, a number of more than 30 digits by
    its digit count, anything else as written."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value >= 2**16 and value & (value - 1) == 0:
            return f"2**{value.bit_length() - 1}"
        digits = len(str(abs(value))) if abs(value) < 10**4000 else None
        if digits is None or digits > 30:
            return f"an integer of {digits or 'more than 4000'} digits"
    return repr(value) if isinstance(value, float) else str(value)


def printable(text: str) -> str:
    r"""``text`` with every control or format character escaped (Unicode category ``C``: ``\x1b``, ``\n``,
    ``\u202e`` …), everything else as it is: what refpos prints of a string it did not write (a case id, a
    config key, a path), so that the string cannot move the cursor, clear the terminal or reorder the line."""
    return "".join(c if unicodedata.category(c)[0] != "C" else
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else
                    f"\\U{ord(c):08x}") for c in text)


def check_printable(name: str, text: str) -> str:
    """``text`` if it holds no control or format character (:func:`printable` leaves it unchanged); else a
    ``ValueError`` naming ``name`` and showing the text escaped."""
    if printable(text) != text:
        raise ValueError(f"{name} '{printable(text)}' holds control or format characters (shown escaped); an "
                         "identifier may not")
    return text


def shown_bytes(nbytes: float) -> str:
    """``8.80 TB``, ``64.0 GiB``-style sizes for messages (decimal units); a count beyond float64 (an integer of
    hundreds of digits) is "more than 1e308 bytes", never an OverflowError in the message that refuses it."""
    if isinstance(nbytes, int) and nbytes >= 10**308:
        return "more than 1e308 bytes"
    for unit, size in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} bytes"


def check_int(name: str, value: object, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` must be an integer (not a bool, not a float), within ``[minimum, maximum]`` when given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {shown_number(minimum)}, got {shown_number(value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {shown_number(maximum)}, got {shown_number(value)}")
    return value


#: the most heads, channels, widths or buckets a function makes (the command line allows as many)
MAX_WIDTH = 2**16


def check_table_shapes(tables: dict[str, tuple[Any, tuple[int, ...]]]) -> None:
    """A ``ValueError`` naming the first of ``{name: (table, shape)}`` whose shape is not the one a layer record
    states (a table that is None has none)."""
    for name, (table, shape) in tables.items():
        got = None if table is None else tuple(np.shape(table))
        if got != tuple(shape):
            raise ValueError(f"{name}: the record's table is {tuple(shape)}, got {got}")


def check_length(name: str, value: object, *, minimum: int = 0) -> int:
    """A length, a distance or a count of positions: an integer from ``minimum`` to 2**53 (the positions float64
    holds exactly, as the command line's lengths), refused by name above it before NumPy sees it (2**63 would
    wrap to an empty array, 10**30 overflow)."""
    return check_int(name, value, minimum=minimum, maximum=MAX_EXACT_POSITION)


def check_width(name: str, value: object, *, what: str, minimum: int = 1, bytes_each: int = 8) -> int:
    """A number of heads, channels or buckets: :func:`check_size` with the bound :data:`MAX_WIDTH`."""
    return check_size(name, value, maximum=MAX_WIDTH, bytes_each=bytes_each, what=what, minimum=minimum)


def physical_memory() -> int | None:
    """The machine's memory in bytes (``None`` where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_size(name: str, value: object, *, maximum: int, bytes_each: int, what: str, minimum: int = 1) -> int:
    """An integer count in ``[minimum, maximum]``; above ``maximum`` the ``ValueError`` names ``name`` and the
    memory the count would take (``value · bytes_each`` bytes of ``what``), before anything is allocated."""
    count = check_int(name, value, minimum=minimum)
    if count > maximum:
        raise ValueError(f"{name} must be at most {shown_number(maximum)}, got {shown_number(count)} (about "
                         f"{shown_bytes(count * bytes_each)} of {what})")
    return count


def element_count(value: Any) -> int:
    """How many elements an array (its shape's product, nothing read) or a nested list holds."""
    shape = getattr(value, "shape", None)
    return math.prod(shape) if shape is not None else math.prod(np.shape(value))


def check_memory(what: str, nbytes: int, given: str) -> None:
    """``ValueError`` when an allocation of ``nbytes`` (what the arguments ``given`` ask for) exceeds the machine's
    memory: named and sized before anything is allocated, instead of a MemoryError or a machine that swaps."""
    total = physical_memory()
    if total is not None and nbytes > total:
        raise ValueError(f"{given} would allocate about {shown_bytes(nbytes)} for {what}, more than this machine's "
                         f"{shown_bytes(total)} of memory: ask for smaller sizes")


def check_float(
    name: str,
    value: object,
    *,
    positive: bool = False,
    minimum: float | None = None,
    allow_inf: bool = False,
) -> float:
    """``value`` must be a real number (not a bool), finite unless ``allow_inf``; optional bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an int beyond float64 (|x| >= 2**1024)
        raise ValueError(f"{name} must be a number float64 holds (|x| < 1.8e308), got {shown_number(value)}") from None
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be finite, got {value}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


#: the largest integer position float64 angles ``p·ω`` see exactly: float64 holds every integer up to 2**53
MAX_EXACT_POSITION = 2**53


def _has_bool(values: Any) -> bool:
    """Whether a nested list/tuple holds a bool anywhere (NumPy would turn ``[True, 2]`` into ints)."""
    if isinstance(values, (list, tuple)):
        return any(_has_bool(v) for v in values)
    return isinstance(values, (bool, np.bool_))


def as_positions(
    positions: Any,
    *,
    name: str = "positions",
    xp: ModuleType | None = None,
    allow_negative: bool = False,
    max_abs: int | None = MAX_EXACT_POSITION,
) -> Any:
    """Validate integer positions and return them as an int64 array of the right namespace.

    Python ints, lists of ints and integer arrays are accepted; floats and bools (also inside a list) are
    a ``TypeError`` (positions are integers, never floats); negative values are a ``ValueError`` unless
    ``allow_negative``; so are magnitudes above ``max_abs`` (default 2**53: float64 angles round larger
    positions; ``None``: any int64) and values int64 cannot hold (a uint64 ``2**64 − 1`` is not ``−1``).
    """
    if isinstance(positions, (bool, np.bool_)) or _has_bool(positions):
        raise TypeError(f"{name} must be integers, got bool")
    from_python = isinstance(positions, (numbers.Integral, list, tuple))
    if from_python:
        try:
            arr = np.asarray(positions)
        except (OverflowError, ValueError):
            raise ValueError(f"{name} must be integers that int64 holds (|p| < 2**63)") from None
        if arr.size and arr.dtype.kind not in "iu":
            if arr.dtype.kind == "O" and all(isinstance(v, numbers.Integral) for v in arr.ravel()):
                raise ValueError(f"{name} must be integers that int64 holds (|p| < 2**63)")
            raise TypeError(f"{name} must be integers, got values of dtype {arr.dtype}")
        source = arr
    else:
        array_of_kind(name, positions, "integral", "an int or an integer array", "an integer array")
        source = positions
    src_ns = array_namespace(source)
    size = math.prod(source.shape)
    # range checks on the values as they are (Python ints: exact for uint64), before any cast
    low = int(src_ns.min(source)) if size else 0
    high = int(src_ns.max(source)) if size else 0
    if high > 2**63 - 1:
        raise ValueError(f"{name} must be integers that int64 holds (< 2**63), got a maximum of {high}")
    if not allow_negative and low < 0:
        raise ValueError(f"{name} must be >= 0, got a minimum of {low}")
    if max_abs is not None and max(high, -low) > max_abs:
        raise ValueError(f"{name} must lie within ±{max_abs} (float64 angles p·ω are exact only for integer "
                         f"positions up to 2**53), got {low if -low > high else high}")
    if from_python:
        return get_xp(xp).asarray(source.astype(np.int64))
    return src_ns.astype(source, src_ns.int64)


def library_of(ns: ModuleType) -> str:
    """The array library of a namespace: ``numpy``, ``torch``, ``cupy``, ``array_api_strict``, …"""
    return ns.__name__.removeprefix("array_api_compat.").split(".")[0]


def same_library(name: str, value: Any, xp: ModuleType) -> None:
    """``TypeError`` naming ``name`` when the array ``value`` is not of ``xp``'s library (a torch tensor among
    NumPy arrays, or the reverse): refpos does not move arrays between libraries on its own. Python ints and
    lists (no library) pass."""
    if isinstance(value, (numbers.Number, list, tuple)):
        return
    try:
        mine = library_of(array_namespace(value))
    except TypeError:
        return  # not an array at all: the argument's own check names what is allowed
    theirs = library_of(xp)
    if mine != theirs:
        raise TypeError(f"{name} is an array of {mine}, the other inputs arrays of {theirs}: give every array from "
                        "one library (positions may also be a list of ints)")


def same_libraries(**arrays: Any) -> None:
    """``TypeError`` naming the first argument whose array is of another library than the first array given
    (:func:`same_library`); ``None``, Python numbers and lists pass, and what is not an array is left to the
    argument's own check."""
    xp = None
    for name, value in arrays.items():
        if value is None or isinstance(value, (numbers.Number, list, tuple)):
            continue
        try:
            namespace = array_namespace(value)
        except TypeError:
            continue
        if xp is None:
            xp = namespace
        else:
            same_library(name, value, xp)


def array_of_kind(name: str, x: Any, kind: str, allowed: str, allowed_array: str | None = None) -> ModuleType:
    """The array namespace of ``x``, which must be an array of the array-API dtype ``kind`` (``"integral"``,
    ``"real floating"``, ...). The ``TypeError`` otherwise says ``{name} must be {allowed}`` (for an array of
    another dtype: ``{allowed_array}``, default the same words)."""
    try:
        ns = array_namespace(x)
    except TypeError:
        raise TypeError(f"{name} must be {allowed}, got {type(x).__name__}") from None
    if not ns.isdtype(x.dtype, kind):
        raise TypeError(f"{name} must be {allowed_array or allowed}, got dtype {x.dtype}")
    return ns


def real_floating_namespace(name: str, x: Any) -> ModuleType:
    """The array namespace of ``x``, which must be a real floating array (float64, float32, ...)."""
    return array_of_kind(name, x, "real floating", "a real floating array (float64, float32, ...)")


def floating_array(x: Any, *, name: str, xp: ModuleType | None = None) -> Any:
    """``x`` as a floating array of its own namespace (lists become float64 in ``xp``).

    Floating arrays keep their dtype (float32 stays float32: lower precision is an input option for
    studying error). Integer and bool arrays are rejected rather than silently converted.
    """
    if isinstance(x, (list, tuple, numbers.Real)) and not isinstance(x, bool):
        arr = np.asarray(x, dtype=np.float64)
        return get_xp(xp).asarray(arr)
    real_floating_namespace(name, x)
    return x


def check_broadcasts_to(name: str, value: Any, shape: tuple[int, ...], *, what: str) -> None:
    """``value`` broadcasts *to* ``shape``: it may not add axes to it or enlarge any (``what`` names ``shape``).

    Used for every term that joins a fixed shape: positions against ``x``, biases and masks against the
    attention logits.
    """
    try:
        out = tuple(array_namespace(value).broadcast_shapes(tuple(shape), tuple(value.shape)))
    except ValueError:
        out = None
    if out != tuple(shape):
        raise ValueError(f"{name} of shape {tuple(value.shape)} does not broadcast to {what} (it may not add axes "
                         "to it or enlarge any)")


def real_scalar(value: Any) -> Any:
    """A 0-d real array as a float (as ``rope_frequencies`` may return one); anything else unchanged."""
    try:
        ns = array_namespace(value)
    except TypeError:
        return value
    if value.ndim == 0 and ns.isdtype(value.dtype, ("real floating", "integral")):
        return float(value)
    return value


def check_frequencies(frequencies: Any, n_pairs: int, xp: ModuleType) -> tuple[Any, float]:
    """A ``(inv_freq, attention_factor)`` pair: ``(n_pairs,)`` finite floats and a real factor > 0."""
    if not isinstance(frequencies, (tuple, list)) or len(frequencies) != 2:
        raise TypeError(f"frequencies must be a pair (inv_freq, attention_factor), got {type(frequencies).__name__}")
    inv_freq, factor = frequencies
    inv_freq = floating_array(inv_freq, name="frequencies[0]", xp=xp)
    if tuple(inv_freq.shape) != (n_pairs,):
        raise ValueError(f"frequencies[0] must have shape ({n_pairs},), got {tuple(inv_freq.shape)}")
    ns = array_namespace(inv_freq)
    if not bool(ns.all(ns.isfinite(inv_freq))):
        raise ValueError("frequencies[0] (inv_freq) must be finite")
    return inv_freq, check_float("frequencies[1] (the attention factor)", real_scalar(factor), positive=True)


#: the former name of :func:`floating_array` (it never converted float32 to float64); kept for callers
float64_array = floating_array
