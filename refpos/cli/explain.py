"""``refpos explain``: print the worked example step by step."""

from __future__ import annotations

import argparse

from refpos.pipeline.worked_example import explain_text


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``refpos explain`` (none)."""


def run(args: argparse.Namespace) -> int:
    """``refpos explain``: print the worked example."""
    print(explain_text())
    return 0
