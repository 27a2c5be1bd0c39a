"""The ``refpos`` command.

Each subcommand lives in the module of its family, which provides ``configure_parser(parser)`` and
``run(args) -> int`` (the exit status). Exit status 2 means unusable input; a bad-input error prints one
line, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "explain": ("refpos.cli.explain", "print the worked example (我 愛 你) step by step"),
    "tolerance": ("refpos.cli.tolerance", "print the error a correct implementation in a dtype can show"),
    "golden": ("refpos.cli.golden", "generate, verify and list golden outputs; golden cases for any config.json"),
    "check": ("refpos.cli.check", "compare a candidate with the reference and name the mistake"),
    "bench": ("refpos.cli.bench", "time refpos beside the machine's floors (and torch, when installed)"),
    "plot": ("refpos.cli.plot", "draw the documentation's figures (--list names them)"),
    "rope": ("refpos.cli.rope", "resolve a config.json's RoPE: parameters, provenance, unused keys, frequencies"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="refpos", description="Reference positional encodings.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).configure_parser(command_parser)
        command_parser.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args))
    except (ValueError, TypeError, OSError) as exc:
        print(f"refpos {args.command}: error: {exc}", file=sys.stderr)
        return 2

