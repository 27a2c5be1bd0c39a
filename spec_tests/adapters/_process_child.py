"""The program behind the process protocol as a process: started in a session of its own, its stderr's last lines
kept by a thread, and ended with its whole process group (spec_tests/adapters/process.py).

A program started by :func:`start_program` leads its own session, so its process group holds it and whatever it
forks; :func:`kill_group` ends them all, and is called before the program is reaped (:func:`exited` looks
without reaping), while its process id can name no other group. POSIX only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from typing import BinaryIO

#: seconds a program has to exit after its stdout closed (or its stdin did, at the end), before it is killed
EXIT_GRACE = 5.0
#: stderr lines kept per program, and the characters kept of each
STDERR_LINES, STDERR_CHARS = 200, 300


def start_program(command: list[str], *, cwd: str | None, env: dict[str, str] | None) -> subprocess.Popen:
    """``command`` with pipes for its three streams, in a new session (its own process group); its stdin is
    non-blocking (a request is written with a deadline)."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=env, start_new_session=True)
    os.set_blocking(proc.stdin.fileno(), False)
    return proc


def exited(proc: subprocess.Popen, wait: float = 0.0) -> bool:
    """Whether the process has exited, waiting up to ``wait`` seconds; it is not reaped (its id keeps naming
    its process group until :meth:`subprocess.Popen.wait`)."""
    end = time.monotonic() + wait
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the program's process group (it leads its own session): the program and whatever it forked."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is empty
        pass


class StderrTail:
    """The lines a program writes to stderr, read by a thread of their own: the last :data:`STDERR_LINES`,
    each cut to :data:`STDERR_CHARS` characters (a line without end cannot grow either). Each line has a serial
    number, so that a call sees the lines written since it began (:meth:`since`)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.lines: deque[tuple[int, str]] = deque(maxlen=STDERR_LINES)
        self.count, self._partial, self._lock = 0, bytearray(), threading.Lock()
        self._stream = stream  # held open while the thread reads it
        self._thread = threading.Thread(target=self._read, args=(stream.fileno(),), daemon=True)
        self._thread.start()

    def _add(self, raw: bytes) -> None:
        text = raw.decode(errors="replace").rstrip()
        with self._lock:
            self.lines.append((self.count, text[:STDERR_CHARS] + ("…" if len(text) > STDERR_CHARS else "")))
            self.count += 1

    def _read(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 1 << 16):
                self._partial += chunk
                *complete, rest = bytes(self._partial).split(b"\n")
                for raw in complete:
                    self._add(raw)
                self._partial = bytearray(rest[:4 * STDERR_CHARS])  # the start of a long line is what names it
        except OSError:  # the pipe was closed under the thread (the process object was collected)
            pass
        if self._partial:
            self._add(bytes(self._partial))

    def mark(self) -> int:
        with self._lock:
            return self.count

    def since(self, mark: int, wait: float) -> list[str]:
        """The non-empty lines from ``mark`` on, once the stream has ended (waiting at most ``wait`` seconds
        for the end: a program's last lines are read before they are shown)."""
        self._thread.join(wait)
        with self._lock:
            return [text for serial, text in self.lines if serial >= mark and text.strip()]
