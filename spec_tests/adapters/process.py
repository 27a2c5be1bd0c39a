r"""An adapter in another process, in any language: the spec suite's calls over stdin/stdout pipes.

Run the suite on a program (C, C++, Rust, JavaScript, or Python itself) that speaks the protocol::

    REFPOS_IMPL=spec_tests.adapters.process REFPOS_PROCESS="node my_adapter.js" \
        python -m pytest spec_tests --ignore=spec_tests/test_meta.py --ignore=spec_tests/test_meta_reporting.py

The protocol (version 1) is written out for the author of a program in
docs/write-an-adapter.md#adapters-in-other-languages-the-process-protocol: one JSON line per message, then the
``.npy`` arrays it names (:mod:`spec_tests.adapters._process_wire` reads them, every length bounded); a first
``__hello__`` request telling the contract's lists, answered with the program's ``INFO`` and functions; one
answer per contract call, a result or a typed error (``ValueError``, ``TypeError``, ``NotImplementedError``
keep their meaning). ``spec_tests/examples/c_adapter/`` is a program in C, ``onnxruntime_node/adapter.js`` one
in JavaScript.

What the proxy (:class:`ProcessImplementation`) promises a test run, whatever the program does:

* **a failure costs one call.** A program that dies (an abort, a segfault, an exit), does not answer within
  ``REFPOS_PROCESS_TIMEOUT`` seconds (default 120) or breaks the protocol fails that call with
  :class:`ImplementationCrashed` naming the cause (the signal or exit status, the time-out, or the line, size
  or dtype that broke the protocol: :class:`ProtocolBroken`) and the program's last stderr lines; its whole
  process group is killed (nothing it forked keeps running), and the next call starts it again and greets it
  with ``__hello__`` again;
* **a program that hangs is given up.** After ``REFPOS_PROCESS_MAX_TIMEOUTS`` consecutive time-outs
  (default 3) the proxy stops starting it: every later call is a skip that says why, so a program that never
  answers costs three time-outs, not one per test;
* **bounded reading.** A message line holds at most 16 MiB, a message's arrays at most 1 GiB
  (:mod:`spec_tests.adapters._process_wire`); stderr is read by a thread that keeps the last 200 lines of at most
  300 characters each.

``python -m spec_tests.adapters.process serve MODULE`` serves a Python adapter module over the protocol:
``spec_tests/adapters/ggml.py`` runs its ctypes calls into ggml that way, so that ggml's aborts stay in the
child. POSIX only (``select`` on pipes, process groups).
"""

from __future__ import annotations

import atexit
import inspect
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

from spec_tests.adapters._process_child import EXIT_GRACE, StderrTail, exited, kill_group, start_program
from spec_tests.adapters._process_wire import (
    ACCEPTED_DTYPES,
    SENT_DTYPES,
    Closed,
    PipeSource,
    ProtocolViolation,
    StreamSource,
    TimedOut,
    decode,
    encode,
    frame,
    read_message,
    write_all,
    write_message,
)

__all__ = ["ACCEPTED_DTYPES", "ERRORS", "PROTOCOL", "SENT_DTYPES", "ImplementationCrashed", "ImplementationError",
           "ImplementationGaveUp", "ProcessImplementation", "ProtocolBroken", "install_command", "node_program",
           "read_message", "serve", "write_message"]

PROTOCOL = 1
#: error types that keep their meaning across the pipe (the contract's three)
ERRORS: dict[str, type[Exception]] = {"ValueError": ValueError, "TypeError": TypeError,
                                      "NotImplementedError": NotImplementedError}


class ImplementationCrashed(RuntimeError):
    """The implementation's process died, did not answer in time, or broke the protocol during a call."""


class ProtocolBroken(ImplementationCrashed):
    """What the program wrote breaks the protocol (a stray line on stdout, a bad size, a dtype outside it)."""


class ImplementationError(RuntimeError):
    """The implementation answered a call with an error of a type outside the contract's three."""


class ImplementationGaveUp(RuntimeError):
    """The proxy stopped calling the program (consecutive time-outs); raised as a pytest skip under pytest."""


def _skip(reason: str) -> BaseException:
    """The exception that skips the running test with ``reason`` (outside pytest: :class:`ImplementationGaveUp`)."""
    try:
        import pytest
    except ImportError:
        return ImplementationGaveUp(reason)
    return pytest.skip.Exception(reason)


# ------------------------------------------------------------------------------------------- proxy
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
    """The implementation behind a command: started (and greeted) on first use, restarted after a failure."""

    def __init__(self, command: list[str], timeout: float = 120.0, cwd: str | None = None,
                 env: dict[str, str] | None = None, max_timeouts: int = 3) -> None:
        self.command, self.timeout, self.cwd, self.max_timeouts = command, timeout, cwd, max_timeouts
        self.program = shlex.join(command) if len(shlex.join(command)) <= 80 else shlex.join(command)[:77] + "…"
        self.env = None if env is None else {**os.environ, **env}  # added to the caller's environment
        self.signatures = _contract_signatures()
        self._proc: subprocess.Popen | None = None
        self._stdout: PipeSource | None = None
        self._stderr: StderrTail | None = None
        self._timeouts, self._gave_up = 0, ""
        self.starts = 0  # how many times the program was started (each greeted with __hello__)
        self.hello: dict[str, Any] = {}
        self._start("__hello__")

    # the child -----------------------------------------------------------------------------------
    def _start(self, name: str) -> None:
        """Start the program in a session (and process group) of its own and greet it: the ``__hello__``
        request, answered with the protocol, its INFO and its functions (the same at every start)."""
        try:
            proc = start_program(self.command, cwd=self.cwd, env=self.env)
        except OSError as exc:  # no such program, not executable
            raise ImplementationCrashed(f"{self.program} cannot be started: {exc}") from None
        self._proc, self._stderr = proc, StderrTail(proc.stderr)
        self._stdout = PipeSource(proc.stdout.fileno(), alive=lambda: not exited(proc))
        self.starts += 1
        values: list[bytes] = []
        args = encode({"functions": sorted(self.signatures), **contract_lists()}, values)
        label = "__hello__" if name == "__hello__" else f"__hello__ (a restart, before {name})"
        message, arrays = self._round_trip(label, frame({"call": "__hello__", "args": args}, values))
        hello = self._answer(label, message, arrays)
        problem = self._hello_problem(hello)
        if problem:
            raise self._fail(label, problem, violation=True)
        self.hello = self.hello or hello

    def _hello_problem(self, hello: Any) -> str:
        if not isinstance(hello, dict) or not isinstance(hello.get("info"), dict) \
                or not isinstance(hello.get("functions"), list):
            return f"__hello__ must answer {{'protocol', 'info': {{...}}, 'functions': [...]}}, got {hello!r:.80}"
        if hello.get("protocol") != PROTOCOL:
            return f"protocol {hello.get('protocol')!r}, this proxy speaks {PROTOCOL}"
        unknown = sorted(str(f) for f in set(map(str, hello["functions"])) - set(self.signatures))
        if unknown:
            return f"functions outside the contract: {unknown}"
        if self.hello and sorted(hello["functions"]) != sorted(self.hello["functions"]):
            return (f"restarted, it provides {sorted(hello['functions'])}, not the {sorted(self.hello['functions'])} "
                    "of its first start")
        return ""

    def _round_trip(self, label: str, request: bytes) -> tuple[dict[str, Any], list[Any]]:
        """Send ``request`` and read the answer, both by one deadline; each failure ends the program."""
        assert self._proc is not None and self._stdout is not None and self._stderr is not None
        deadline = time.monotonic() + self.timeout
        mark = self._stderr.mark()
        try:
            write_all(self._proc.stdin.fileno(), request, deadline, self._stdout.alive)
            self._stdout.deadline = deadline
            received = read_message(self._stdout)
            if received is None:
                raise Closed
        except TimedOut:
            self._timeouts += 1
            raise self._fail(label, f"did not answer within {self.timeout:g} s", mark, hung=True) from None
        except Closed:
            raise self._fail(label, "", mark) from None
        except ProtocolViolation as exc:
            raise self._fail(label, str(exc), mark, violation=True) from None
        return received

    def _fail(self, label: str, why: str, mark: int = 0, *, hung: bool = False,
              violation: bool = False) -> ImplementationCrashed:
        """End the program (its whole process group) and name why call ``label`` failed: ``why`` (a time-out, a
        protocol violation), or, for a program that closed its stdout, its exit status or signal; then the
        stderr lines it wrote during the call. The next call starts it again."""
        proc, tail = self._proc, self._stderr
        self._proc = self._stdout = None
        assert proc is not None and tail is not None
        if not (hung or violation) and not exited(proc, EXIT_GRACE):
            why = "closed its stdout but kept running: killed"
        kill_group(proc)  # before the program is reaped: its id still names only its own group
        code = proc.wait()
        if not why:
            why = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        elif violation:
            why = f"broke the process protocol: {why} (it was stopped)"
        lines = tail.since(mark, wait=2.0)
        text = f"{self.program} {why} during {label}(...)"
        if hung and self._timeouts >= self.max_timeouts:
            self._gave_up = (f"{self.program} did not answer {self._timeouts} calls in a row within "
                             f"{self.timeout:g} s each: the proxy gave up on it, its remaining calls are skipped")
            text += f"; {self._timeouts} time-outs in a row: its remaining calls are skipped"
        shown = lines if len(lines) <= 5 else [*lines[:2], "…", *lines[-3:]]  # the first lines name the cause
        text += f"; its stderr: {' | '.join(shown)}" if shown else ""
        return (ProtocolBroken if violation else ImplementationCrashed)(text)

    def _answer(self, label: str, message: dict[str, Any], arrays: list[Any]) -> Any:
        """The result of an answer, or its error raised as its type; a message that is neither breaks the
        protocol."""
        try:
            if "error" in message:
                error = message["error"]
                if not isinstance(error, dict):
                    raise ProtocolViolation(f"'error' must be an object {{'type', 'message'}}, got {error!r:.60}")
                kind = ERRORS.get(error.get("type"), ImplementationError)
                text = str(error.get("message", ""))
                raise kind(text if kind is not ImplementationError else f"{error.get('type')}: {text}")
            if "result" not in message:
                raise ProtocolViolation(f"an answer holds 'result' or 'error', got the keys {sorted(message)}")
            return decode(message["result"], arrays)
        except ProtocolViolation as exc:
            raise self._fail(label, str(exc), violation=True) from None

    def _call(self, name: str, args: dict[str, Any]) -> Any:
        if self._gave_up:
            raise _skip(self._gave_up)
        values: list[bytes] = []
        request = frame({"call": name, "args": encode(args, values)}, values)
        if self._proc is None or exited(self._proc):
            if self._proc is not None:  # it exited between two calls: no call of its failed
                kill_group(self._proc)
                self._proc.wait()
            self._start(name)
        message, arrays = self._round_trip(name, request)
        self._timeouts = 0  # an answer to a call (a greeting does not count): the time-outs are no longer in a row
        result = self._answer(name, message, arrays)
        return tuple(result) if isinstance(result, list) else result

    # the contract --------------------------------------------------------------------------------
    def function(self, name: str) -> Any:
        """The contract function ``name`` as a call to the process (every parameter sent by name)."""
        signature = self.signatures[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return self._call(name, dict(bound.arguments))

        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"{name} of {self.program} (spec_tests/adapters/process.py)"
        return call

    def install(self, namespace: dict[str, Any]) -> None:
        """Make the module of ``namespace`` the adapter: its ``INFO``, and a module ``__getattr__`` that
        gives the functions the process provides (any other name is missing, so its tests are skips); the
        program's process group is ended when the interpreter exits."""
        provided = set(self.hello["functions"])
        namespace["INFO"] = self.hello["info"]
        namespace["IMPLEMENTATION"] = self
        atexit.register(self.close)

        def __getattr__(name: str) -> Any:  # the module attribute hook of PEP 562
            if name in provided:
                return self.function(name)
            raise AttributeError(f"{self.program} does not provide {name}")

        namespace["__getattr__"] = __getattr__

    def close(self) -> None:
        """End of stdin (the program's cue to exit), then its process group is killed, whatever is left of it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.stdin.close()
        exited(proc, EXIT_GRACE)
        kill_group(proc)
        proc.wait()


def node_program(script: str, *args: str) -> list[str]:
    """The command running the JavaScript ``script`` of spec_tests/adapters/ with node (``REFPOS_NODE``, default
    ``node``; its modules from ``NODE_PATH``)."""
    return [os.environ.get("REFPOS_NODE", "node"), str(Path(__file__).resolve().parent / script), *args]


def install_command(namespace: dict[str, Any], command: list[str], env: dict[str, str] | None = None) -> None:
    """Make the module of ``namespace`` the adapter served by ``command``: what an adapter module for a program
    does at import. ``REFPOS_PROCESS_TIMEOUT``: seconds a call may take (default 120);
    ``REFPOS_PROCESS_MAX_TIMEOUTS``: consecutive time-outs before the proxy gives up (default 3)."""
    timeout = float(os.environ.get("REFPOS_PROCESS_TIMEOUT", "120"))
    tries = int(os.environ.get("REFPOS_PROCESS_MAX_TIMEOUTS", "3"))
    if not (timeout > 0 and tries >= 1):
        raise ValueError(f"REFPOS_PROCESS_TIMEOUT must be > 0 and REFPOS_PROCESS_MAX_TIMEOUTS >= 1, got {timeout}, "
                         f"{tries}")
    ProcessImplementation(command, timeout=timeout, env=env, max_timeouts=tries).install(namespace)


# ----------------------------------------------------------------------------------------- server
def serve(module_name: str, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Answer protocol requests with the functions of the Python adapter ``module_name`` until stdin ends."""
    import importlib

    source = StreamSource(stdin or sys.stdin.buffer)
    stdout = stdout or sys.stdout.buffer
    sys.stdout = sys.stderr  # a print in the adapter must not corrupt the protocol stream
    module = importlib.import_module(module_name)
    contract = _contract_signatures()
    functions = sorted(n for n in contract if callable(getattr(module, n, None)))
    while (received := read_message(source)) is not None:
        message, arrays = received
        name, values = message.get("call"), []
        try:
            if name == "__hello__":
                result = {"protocol": PROTOCOL, "info": getattr(module, "INFO", {}), "functions": functions}
            elif name in functions:
                result = getattr(module, name)(**decode(message["args"], arrays))
            else:
                raise NotImplementedError(f"{module_name} does not provide {name}")
            out = {"result": encode(result, values)}
        except Exception as exc:  # every error goes back to the caller, typed
            out, values = {"error": {"type": type(exc).__name__, "message": str(exc)}}, []
        write_message(stdout, out, values)


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "serve":
        print("usage: python -m spec_tests.adapters.process serve MODULE", file=sys.stderr)
        return 2
    try:
        serve(argv[1])
    except (ProtocolViolation, Closed) as exc:  # the request stream is not the protocol: nothing to answer
        print(f"spec_tests.adapters.process serve: {exc or 'the request stream ended inside a message'}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
elif os.environ.get("REFPOS_IMPL") == __name__:  # the adapter under test: the command of REFPOS_PROCESS
    if not os.environ.get("REFPOS_PROCESS"):
        raise ImportError("REFPOS_PROCESS must name the implementation's command, e.g. 'node adapter.js'")
    install_command(globals(), shlex.split(os.environ["REFPOS_PROCESS"]))
