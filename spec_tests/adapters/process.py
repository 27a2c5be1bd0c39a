r"""An adapter in another process, in any language: the spec suite's calls over stdin/stdout pipes.

Run the suite on a program (C, C++, Rust, JavaScript, or Python itself) that speaks the protocol below::

    REFPOS_IMPL=spec_tests.adapters.process REFPOS_PROCESS="node my_adapter.js" \
        python -m pytest spec_tests --ignore=spec_tests/test_meta.py --ignore=spec_tests/test_meta_reporting.py

``REFPOS_PROCESS`` is the command (split as a shell would, no shell run); ``REFPOS_PROCESS_TIMEOUT`` the
seconds one call may take (default 120). The program is started once per pytest process (each xdist
worker has its own) and answers one request per contract call. When it dies during a call (an abort on a
failed assert, a segfault, an exit) or does not answer in time, that call raises
:class:`ImplementationCrashed`, naming the call, the signal or exit status and the last lines the
program wrote to stderr: the test fails with that message, and the next call starts the program again.
So a native library that aborts costs one test, not the run.

The protocol (version 1)
------------------------
Every message, either way, is one line of JSON (UTF-8, ending in ``\n``) followed by the arrays it names,
each an ``.npy`` file (format version 1.0, little-endian, C order) written byte for byte; the JSON's
``"arrays"`` lists their sizes in bytes, in order. Inside the JSON, ``{"$array": i}`` stands for the i-th
array and ``{"$float": "nan" | "inf" | "-inf"}`` for a float JSON cannot write. Array dtypes: ``<f8``,
``<f4``, ``<i8``, ``|b1`` (the suite's arrays; an answer may use any of ``<f8 <f4 <f2 <i8 <i4 |b1``).

1. The proxy's first request is ``{"call": "__hello__", "args": {"functions": [...], "rope_keys": [...],
   "rope_types": [...], "layouts": [...], "placements": [...]}, "arrays": []}``: the contract's functions
   and lists, which grow with refpos, so that a program need not copy them (a key outside ``rope_keys`` is
   bad input) and can serve what the contract of this checkout names. The answer is
   ``{"result": {"protocol": 1, "info": INFO, "functions": [names]}, "arrays": []}``: the adapter's
   ``INFO`` (spec_tests/README.md) and the contract functions it provides (the others are skips).
2. A contract call is ``{"call": NAME, "args": {parameter: value, ...}, "arrays": [sizes]}``: every
   parameter by its name in the contract (spec_tests/README.md), defaults filled in, arrays as refs.
3. The answer is ``{"result": VALUE, "arrays": [sizes]}`` (a tuple as a JSON list) or
   ``{"error": {"type": "ValueError" | "TypeError" | "NotImplementedError" | other, "message": "..."},
   "arrays": []}``; the three named types are raised as themselves (bad input, unsupported
   configuration), any other as :class:`ImplementationError`.
4. End of stdin means exit. stderr is free for the program's own messages.

``python -m spec_tests.adapters.process serve MODULE`` serves a Python adapter module over the protocol:
``spec_tests/adapters/ggml.py`` runs its ctypes calls into ggml that way, so that ggml's aborts stay in
the child. A program in another language: ``spec_tests/adapters/onnxruntime_node/adapter.js``.
"""

from __future__ import annotations

import inspect
import io
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

PROTOCOL = 1
#: dtypes the proxy sends, and those it accepts back
SENT_DTYPES = ("<f8", "<f4", "<i8", "|b1")
ACCEPTED_DTYPES = ("<f8", "<f4", "<f2", "<i8", "<i4", "|b1")
#: error types that keep their meaning across the pipe (the contract's three)
ERRORS: dict[str, type[Exception]] = {"ValueError": ValueError, "TypeError": TypeError,
                                      "NotImplementedError": NotImplementedError}


class ImplementationCrashed(RuntimeError):
    """The implementation's process died, or did not answer in time, during a call."""


class ImplementationError(RuntimeError):
    """The implementation answered a call with an error of a type outside the contract's three."""


# --------------------------------------------------------------------------------------- framing
def _encode(value: Any, arrays: list[bytes]) -> Any:
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
        return {str(k): _encode(v, arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, arrays) for v in value]
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


def _decode(value: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$array"}:
            return arrays[value["$array"]]
        if set(value) == {"$float"}:
            return float(value["$float"])
        return {k: _decode(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    return value


def write_message(stream: BinaryIO, message: dict[str, Any], values: list[bytes]) -> None:
    """One message: the JSON line (with the arrays' sizes), then the arrays."""
    line = json.dumps({**message, "arrays": [len(v) for v in values]}, allow_nan=False)
    stream.write(line.encode() + b"\n")
    for value in values:
        stream.write(value)
    stream.flush()


def read_message(stream: BinaryIO) -> tuple[dict[str, Any], list[np.ndarray]] | None:
    """The next message and its arrays; ``None`` at end of stream."""
    line = stream.readline()
    if not line:
        return None
    message = json.loads(line)
    arrays = []
    for size in message.get("arrays", []):
        data = stream.read(size)
        if len(data) != size:
            return None  # the writer died inside the message
        array = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
        if array.dtype.str not in ACCEPTED_DTYPES:
            raise ImplementationError(f"array of dtype {array.dtype.str}: the protocol has {ACCEPTED_DTYPES}")
        arrays.append(array)
    return message, arrays


# ------------------------------------------------------------------------------------------ proxy
def _contract_signatures() -> dict[str, inspect.Signature]:
    """Each contract function's signature, from the reference adapter (its parameters name the wire's args):
    its own public functions and those it re-exports from its sibling modules (refpos.testing.adapter_*)."""
    import refpos.testing.adapter as reference

    return {name: inspect.signature(fn) for name, fn in vars(reference).items()
            if inspect.isfunction(fn) and not name.startswith("_")
            and (fn.__module__ == reference.__name__ or fn.__module__.startswith(f"{reference.__name__}_"))}


def contract_lists() -> dict[str, list[str]]:
    """The contract's lists a program is told in the ``__hello__`` request (spec_tests/README.md)."""
    from refpos.rope.config import LAYOUTS, PLACEMENTS, ROPE_TYPES
    from spec_tests.adapters._contract import ROPE_KEYS

    return {"rope_keys": sorted(ROPE_KEYS), "rope_types": list(ROPE_TYPES), "layouts": list(LAYOUTS),
            "placements": list(PLACEMENTS)}


class ProcessImplementation:
    """The implementation behind a command: started on first use, restarted after it dies."""

    def __init__(self, command: list[str], timeout: float = 120.0, cwd: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.command, self.timeout, self.cwd = command, timeout, cwd
        self.env = None if env is None else {**os.environ, **env}  # added to the caller's environment
        self.signatures = _contract_signatures()
        self._proc: subprocess.Popen | None = None
        self._stderr: deque[str] = deque(maxlen=200)  # the lines the child wrote during the current call
        self.hello = self._call("__hello__", {"functions": sorted(self.signatures), **contract_lists()})
        unknown = sorted(set(self.hello.get("functions", [])) - set(self.signatures))
        if self.hello.get("protocol") != PROTOCOL or unknown:
            raise ImplementationError(f"{self.command[0]}: protocol {self.hello.get('protocol')!r} (want {PROTOCOL}), "
                                      f"functions outside the contract: {unknown}")

    # the child -----------------------------------------------------------------------------------
    def _start(self) -> subprocess.Popen:
        proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=self.cwd, env=self.env)
        self._stderr.clear()
        threading.Thread(target=self._drain, args=(proc.stderr, self._stderr), daemon=True).start()
        return proc

    @staticmethod
    def _drain(stream: BinaryIO, keep: deque[str]) -> None:
        for raw in iter(stream.readline, b""):
            keep.append(raw.decode(errors="replace").rstrip())

    def _crashed(self, name: str, why: str, *, hung: bool = False) -> ImplementationCrashed:
        """The failure of call ``name``: the process is ended (killed if ``hung``) and forgotten, so that the
        next call starts a fresh one; the message names the signal or exit status and the stderr tail."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if hung:
                proc.kill()  # its end is ours, not a finding
            try:
                code = proc.wait(timeout=10)  # the pipe closes a moment before the process is gone
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
                why = f"{why} (closed its stdout, still running: killed)"
            if not hung and code < 0:
                why = f"killed by {signal.Signals(-code).name}"
            elif not hung:
                why = f"exited with status {code}"
        lines = [line for line in self._stderr if line.strip()]
        shown = lines if len(lines) <= 5 else [*lines[:2], "…", *lines[-2:]]  # the first lines name the cause
        return ImplementationCrashed(f"{self.command[0]} {why} during {name}(...)"
                                     + (f"; its stderr: {' | '.join(shown)}" if shown else ""))

    def _call(self, name: str, args: dict[str, Any]) -> Any:
        if self._proc is None:
            self._proc = self._start()
        proc, values = self._proc, []
        self._stderr.clear()
        request = {"call": name, "args": _encode(args, values)}
        reply: list[Any] = []
        worker = threading.Thread(target=self._exchange, args=(proc, request, values, reply), daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise self._crashed(name, f"did not answer within {self.timeout:g} s", hung=True)
        if not reply or reply[0] is None:
            raise self._crashed(name, "closed its stdout")
        message, arrays = reply[0]
        if "error" in message:
            error = message["error"]
            kind = ERRORS.get(error.get("type"), ImplementationError)
            text = error.get("message", "")
            raise kind(text if kind is not ImplementationError else f"{error.get('type')}: {text}")
        result = _decode(message["result"], arrays)
        return tuple(result) if isinstance(result, list) and name != "__hello__" else result

    @staticmethod
    def _exchange(proc: subprocess.Popen, request: dict, values: list[bytes], reply: list) -> None:
        try:
            write_message(proc.stdin, request, values)
            reply.append(read_message(proc.stdout))
        except (BrokenPipeError, OSError, ValueError):
            reply.append(None)

    # the contract --------------------------------------------------------------------------------
    def function(self, name: str) -> Any:
        """The contract function ``name`` as a call to the process (every parameter sent by name)."""
        signature = self.signatures[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return self._call(name, dict(bound.arguments))

        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"{name} of {' '.join(self.command)} (spec_tests/adapters/process.py)"
        return call

    def install(self, namespace: dict[str, Any]) -> None:
        """Make the module of ``namespace`` the adapter: its ``INFO``, and a module ``__getattr__`` that
        gives the functions the process provides (any other name is missing, so its tests are skips)."""
        provided = set(self.hello["functions"])
        namespace["INFO"] = self.hello["info"]
        namespace["IMPLEMENTATION"] = self

        def __getattr__(name: str) -> Any:  # the module attribute hook of PEP 562
            if name in provided:
                return self.function(name)
            raise AttributeError(f"{' '.join(self.command)} does not provide {name}")

        namespace["__getattr__"] = __getattr__

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait(timeout=10)
            self._proc = None


def node_program(script: str, *args: str) -> list[str]:
    """The command running the JavaScript ``script`` of spec_tests/adapters/ with node (``REFPOS_NODE``, default
    ``node``; its modules from ``NODE_PATH``)."""
    return [os.environ.get("REFPOS_NODE", "node"), str(Path(__file__).resolve().parent / script), *args]


def install_command(namespace: dict[str, Any], command: list[str], env: dict[str, str] | None = None) -> None:
    """Make the module of ``namespace`` the adapter served by ``command`` (``REFPOS_PROCESS_TIMEOUT`` seconds a
    call, default 120): what an adapter module for a program does at import."""
    timeout = float(os.environ.get("REFPOS_PROCESS_TIMEOUT", "120"))
    ProcessImplementation(command, timeout=timeout, env=env).install(namespace)


# ----------------------------------------------------------------------------------------- server
def serve(module_name: str, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Answer protocol requests with the functions of the Python adapter ``module_name`` until stdin ends."""
    import importlib

    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    sys.stdout = sys.stderr  # a print in the adapter must not corrupt the protocol stream
    module = importlib.import_module(module_name)
    contract = _contract_signatures()
    functions = sorted(n for n in contract if callable(getattr(module, n, None)))
    while (received := read_message(stdin)) is not None:
        message, arrays = received
        name, values = message["call"], []
        try:
            if name == "__hello__":
                result = {"protocol": PROTOCOL, "info": getattr(module, "INFO", {}), "functions": functions}
            elif name in functions:
                result = getattr(module, name)(**_decode(message["args"], arrays))
            else:
                raise NotImplementedError(f"{module_name} does not provide {name}")
            out = {"result": _encode(result, values)}
        except Exception as exc:  # every error goes back to the caller, typed
            out, values = {"error": {"type": type(exc).__name__, "message": str(exc)}}, []
        write_message(stdout, out, values)


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "serve":
        print("usage: python -m spec_tests.adapters.process serve MODULE", file=sys.stderr)
        return 2
    serve(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
elif os.environ.get("REFPOS_IMPL") == __name__:  # the adapter under test: the command of REFPOS_PROCESS
    if not os.environ.get("REFPOS_PROCESS"):
        raise ImportError("REFPOS_PROCESS must name the implementation's command, e.g. 'node adapter.js'")
    install_command(globals(), shlex.split(os.environ["REFPOS_PROCESS"]))
