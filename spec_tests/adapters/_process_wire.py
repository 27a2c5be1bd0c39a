r"""The frames of the process protocol (spec_tests/adapters/process.py), read with every length bounded.

A message is one line of JSON (UTF-8, ``\n``-terminated) followed by the ``.npy`` arrays its ``"arrays"`` list
sizes (docs/write-an-adapter.md#adapters-in-other-languages-the-process-protocol). Whatever a program writes, the
reader holds at most :data:`MAX_LINE_BYTES` of a line and :data:`MAX_MESSAGE_BYTES` of arrays: a line without a
newline, a size of 2⁵⁰ bytes, a negative size, an array of a dtype outside :data:`ACCEPTED_DTYPES` or an ``.npy``
header that does not match its bytes is a :class:`ProtocolViolation` naming it, raised before anything that
size is allocated.

Two sources feed :func:`read_message`: :class:`StreamSource` (a blocking stream: the serving side, reading the
proxy's requests) and :class:`PipeSource` (a pipe's descriptor read with ``select`` against a deadline: the
proxy, reading a program's answers, which may never come).
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import time
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol

import numpy as np

#: dtypes the proxy sends, and those it accepts back
SENT_DTYPES = ("<f8", "<f4", "<i8", "|b1")
ACCEPTED_DTYPES = ("<f8", "<f4", "<f2", "<i8", "<i4", "|b1")
#: the longest JSON line of a message (its arrays travel as .npy frames, not in the line)
MAX_LINE_BYTES = 16 * 2**20
#: the most bytes of arrays one message may carry, all its arrays together
MAX_MESSAGE_BYTES = 2**30
#: the most arrays one message may carry
MAX_ARRAYS = 1024
#: how much of a refused line a message quotes
QUOTED = 80


class ProtocolViolation(Exception):
    """What a program wrote breaks the protocol: the message says what (the line, the size, the dtype)."""


class TimedOut(Exception):
    """The deadline passed before the bytes came."""


class Closed(Exception):
    """The stream ended (the program closed its stdout, or exited)."""


def quoted(data: bytes) -> str:
    """The first :data:`QUOTED` bytes of ``data`` as Python writes bytes (control characters escaped)."""
    return repr(bytes(data[:QUOTED])) + (f"… ({len(data)} bytes)" if len(data) > QUOTED else "")


class Source(Protocol):
    def line(self, limit: int) -> bytes:
        """The next line with its ``\\n``, at most ``limit`` bytes before it; ``b""`` at a clean end."""

    def exact(self, size: int) -> bytes:
        """The next ``size`` bytes."""


class StreamSource:
    """A blocking binary stream (stdin of the serving program)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def line(self, limit: int) -> bytes:
        data = self.stream.readline(limit + 1)
        if len(data) > limit and not data.endswith(b"\n"):
            raise ProtocolViolation(f"a line of more than {limit} bytes without a newline: {quoted(data)}")
        if data and not data.endswith(b"\n"):
            raise Closed(f"the stream ended inside a line: {quoted(data)}")
        return data

    def exact(self, size: int) -> bytes:
        data = self.stream.read(size)
        if len(data) != size:
            raise Closed(f"the stream ended after {len(data)} of the {size} bytes of an array")
        return data


#: seconds between two looks at whether the writer is still alive while its pipe is silent
POLL = 0.1


class PipeSource:
    """The read end of a pipe, read with ``select`` so that no read waits past ``deadline`` (``time.monotonic``);
    bytes read past a message stay for the next one. ``alive()`` is asked while the pipe is silent: a writer that
    has exited ends the stream even when a process it forked still holds the pipe open."""

    def __init__(self, fd: int, alive: Callable[[], bool] = lambda: True) -> None:
        self.fd, self.buffer, self.deadline, self.alive = fd, bytearray(), math.inf, alive

    def _fill(self) -> None:
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimedOut
            ready, _, _ = select.select([self.fd], [], [], min(left, POLL))
            if ready:
                break
            if not self.alive():
                raise Closed
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            raise Closed
        self.buffer += chunk

    def line(self, limit: int) -> bytes:
        scanned = 0  # the bytes already searched for the newline
        while (end := self.buffer.find(b"\n", scanned, limit + 1)) < 0:
            scanned = len(self.buffer)
            if len(self.buffer) > limit:
                raise ProtocolViolation(f"a line of more than {limit} bytes without a newline: "
                                        f"{quoted(self.buffer)}")
            try:
                self._fill()
            except Closed:
                if self.buffer:
                    raise Closed(f"the stream ended inside a line: {quoted(self.buffer)}") from None
                return b""
        data = bytes(self.buffer[:end + 1])
        del self.buffer[:end + 1]
        return data

    def exact(self, size: int) -> bytes:
        while len(self.buffer) < size:
            try:
                self._fill()
            except Closed:
                raise Closed(f"the stream ended after {len(self.buffer)} of the {size} bytes of an array") from None
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


def write_all(fd: int, data: bytes, deadline: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Write ``data`` to the non-blocking descriptor ``fd`` by ``deadline``; :class:`TimedOut` or
    :class:`Closed` (the reader has gone, or ``alive()`` says it has exited) otherwise."""
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimedOut
        _, ready, _ = select.select([], [fd], [], min(left, POLL))
        if not ready:
            if not alive():
                raise Closed
            continue
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            raise Closed from None


# ------------------------------------------------------------------------------------------ messages
def frame(message: dict[str, Any], values: list[bytes]) -> bytes:
    """One message's bytes: the JSON line (with the arrays' sizes), then the arrays."""
    line = json.dumps({**message, "arrays": [len(v) for v in values]}, allow_nan=False)
    return b"".join([line.encode() + b"\n", *values])


def _sizes(message: dict[str, Any]) -> list[int]:
    sizes = message.get("arrays", [])
    if not isinstance(sizes, list) or len(sizes) > MAX_ARRAYS:
        raise ProtocolViolation(f"'arrays' must be a list of at most {MAX_ARRAYS} sizes in bytes, got "
                                f"{quoted(json.dumps(sizes).encode())}")
    for size in sizes:
        if type(size) is not int or size < 0:
            raise ProtocolViolation(f"an array size must be a whole number of bytes >= 0, got {size!r}")
    if sum(sizes) > MAX_MESSAGE_BYTES:
        raise ProtocolViolation(f"the arrays of one message hold {sum(sizes)} bytes, more than the "
                                f"{MAX_MESSAGE_BYTES} the protocol reads (sizes {sizes[:8]})")
    return sizes


def parse_npy(data: bytes, index: int) -> np.ndarray:
    """Array ``index`` of a message from its ``.npy`` bytes: version 1.0, a dtype of :data:`ACCEPTED_DTYPES`,
    C order, a shape whose bytes are exactly the rest of the frame (checked before the copy)."""
    where = f"array {index}"
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version != (1, 0):
            raise ProtocolViolation(f"{where}: .npy format version {version}, the protocol writes 1.0")
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
    except ProtocolViolation:
        raise
    except (ValueError, TypeError, SyntaxError) as exc:  # not .npy bytes, or a header NumPy cannot read
        raise ProtocolViolation(f"{where} is not an .npy frame ({exc}): {quoted(data)}") from None
    if dtype.str not in ACCEPTED_DTYPES:
        raise ProtocolViolation(f"{where} has dtype {dtype.str}: the protocol's arrays are {list(ACCEPTED_DTYPES)}")
    if fortran:
        raise ProtocolViolation(f"{where} is in Fortran order: the protocol's arrays are C order")
    body = len(data) - stream.tell()
    if math.prod(shape) * dtype.itemsize != body:
        raise ProtocolViolation(f"{where}: shape {shape} of {dtype.str} needs {math.prod(shape) * dtype.itemsize} "
                                f"bytes, the frame has {body}")
    return np.frombuffer(data, dtype=dtype, offset=stream.tell()).reshape(shape).copy()


def read_message(source: Source | BinaryIO) -> tuple[dict[str, Any], list[np.ndarray]] | None:
    """The next message and its arrays; ``None`` at a clean end of the stream (between messages).

    Raises :class:`ProtocolViolation` (what was read breaks the protocol), :class:`Closed` (the stream ended
    inside a message) and, from a :class:`PipeSource`, :class:`TimedOut`.
    """
    if not isinstance(source, (StreamSource, PipeSource)):
        source = StreamSource(source)  # type: ignore[arg-type]
    line = source.line(MAX_LINE_BYTES)
    if not line:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError is a ValueError), or nested too deep
        raise ProtocolViolation(f"a line on stdout that is not a protocol message (stdout carries only the "
                                f"protocol's messages; write anything else to stderr): {quoted(line)}") from None
    if not isinstance(message, dict):
        raise ProtocolViolation(f"a JSON line that is not a message object: {quoted(line)}")
    arrays = [parse_npy(source.exact(size), i) for i, size in enumerate(_sizes(message))]
    return message, arrays


def write_message(stream: BinaryIO, message: dict[str, Any], values: list[bytes]) -> None:
    """One message on a blocking stream (the serving side)."""
    stream.write(frame(message, values))
    stream.flush()


# ---------------------------------------------------------------------------------------- values
def encode(value: Any, arrays: list[bytes]) -> Any:
    """``value`` as JSON-ready data, its arrays appended to ``arrays`` as ``.npy`` bytes."""
    if isinstance(value, np.ndarray):
        return _encode_array(value, arrays)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": str(value)}
    if isinstance(value, dict):
        return {str(k): encode(v, arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v, arrays) for v in value]
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"cannot send a {type(value).__name__} over the process protocol")


def _encode_array(array: np.ndarray, arrays: list[bytes]) -> dict[str, int]:
    if array.dtype == np.float16 or (array.dtype.kind == "f" and array.dtype.itemsize < 4):
        array = array.astype("<f4")
    elif array.dtype.kind in "iu":
        array = array.astype("<i8")
    elif array.dtype.kind == "f" and array.dtype.str not in SENT_DTYPES:
        array = array.astype("<f8")
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.ascontiguousarray(array), version=(1, 0), allow_pickle=False)
    arrays.append(buffer.getvalue())
    return {"$array": len(arrays) - 1}


def decode(value: Any, arrays: list[np.ndarray]) -> Any:
    """``value`` with its ``{"$array": i}`` and ``{"$float": ...}`` references resolved; a reference to no array
    or an unknown float is a :class:`ProtocolViolation`."""
    if isinstance(value, dict):
        if set(value) == {"$array"}:
            index = value["$array"]
            if type(index) is not int or not 0 <= index < len(arrays):
                raise ProtocolViolation(f"{{'$array': {index!r}}} names no array of the message ({len(arrays)} sent)")
            return arrays[index]
        if set(value) == {"$float"}:
            if value["$float"] not in ("nan", "inf", "-inf"):
                raise ProtocolViolation(f"{{'$float': {value['$float']!r}}}: the protocol writes 'nan', 'inf' or "
                                        "'-inf'")
            return float(value["$float"])
        return {k: decode(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, arrays) for v in value]
    return value
