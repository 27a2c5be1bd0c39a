"""The progress bar of long commands: on a terminal only, never with --quiet, only after its delay."""

from __future__ import annotations

import io

from refpos.cli.progress import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_drawn_on_a_terminal_after_its_delay_and_its_line_is_ended():
    term = Terminal()
    with ProgressBar("refpos check rope", stream=term, delay=0.0) as bar:
        bar(50, 100)
        bar(100, 100)
    text = term.getvalue()
    assert "\r" in text and " 50.0%" in text and "100.0%" in text and text.endswith("\n")


def test_no_bar_when_quiet_not_a_terminal_or_quick():
    for stream, quiet, delay in ((Terminal(), True, 0.0), (io.StringIO(), False, 0.0), (Terminal(), False, 60.0)):
        with ProgressBar("x", stream=stream, quiet=quiet, delay=delay) as bar:
            bar(1, 2)
        assert stream.getvalue() == ""
