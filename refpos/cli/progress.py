"""A progress bar on stderr for long commands (``refpos check`` of gigabyte files).

Drawn only when stderr is a terminal and ``--quiet`` is not given, and only once the command has run for
:data:`DELAY` seconds: a check of a few megabytes never shows one. It rewrites one line (``\\r``) and
ends it when the work is done, so the result printed on stdout stays clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

#: seconds before the bar appears
DELAY = 2.0
WIDTH = 30


class ProgressBar:
    """``bar(done, total)`` after each block; ``bar.close()`` at the end (also as a context manager)."""

    def __init__(self, label: str, *, quiet: bool = False, stream: TextIO | None = None,
                 delay: float = DELAY) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.label = label
        self.enabled = not quiet and bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.delay = delay
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or time.monotonic() - self.start < self.delay:
            return
        fraction = done / total if total else 1.0
        filled = round(WIDTH * fraction)
        elapsed = time.monotonic() - self.start
        left = elapsed * (1 - fraction) / fraction if fraction > 0 else 0.0
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {100 * fraction:5.1f}% "
                          f"{elapsed:.0f} s, about {left:.0f} s left ")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """End the bar's line (nothing when it was never drawn)."""
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
