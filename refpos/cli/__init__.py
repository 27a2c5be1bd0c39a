"""The ``refpos`` command, and its one error policy.

Each subcommand lives in a module of this package, which provides ``configure_parser(parser)`` and
``run(args) -> int`` (the exit status: 0 success, 1 a check or verification that failed). Errors follow
one policy, applied here:

* **exit 2, one line** — a usage or input problem: a bad argument (named by argparse), a file that cannot
  be read or is refused (named), a value refpos refuses (``ValueError``/``TypeError`` naming the
  parameter), an optional dependency that is missing, a request larger than the memory available;
* **exit 3, one line** — anything else is a bug in refpos: the message names the exception and asks for
  a report; ``refpos --debug …`` prints the traceback as well.

* **exit 141, nothing printed** — the reader of stdout went away (``refpos golden list | head``): the shell's
  status of a program a closed pipe ends (128 + SIGPIPE), in every verb, without a "Broken pipe" line.

Nothing else reaches the user: no traceback without ``--debug``. docs/security.md describes the policy.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "explain": ("refpos.cli.explain", "print the worked example (我 愛 你) step by step"),
    "tolerance": ("refpos.cli.tolerance", "print the error a correct implementation in a dtype can show"),
    "golden": ("refpos.cli.golden", "generate, verify and list golden outputs; golden cases for any config.json"),
    "check": ("refpos.cli.check", "compare a candidate with the reference and name the mistake"),
    "bench": ("refpos.cli.bench", "time refpos beside the machine's floors (and torch, when installed)"),
    "plot": ("refpos.cli.plot", "draw the documentation's figures (--list names them), or a model's RoPE (--config)"),
    "rope": ("refpos.cli.rope", "resolve a config.json's RoPE: parameters, provenance, unused keys, frequencies"),
    "suite": ("refpos.cli.suite", "run the spec suite on an implementation (pytest options pass through)"),
    "positions": ("refpos.cli.positions", "what every layer of every stack of a config.json does with positions"),
}

#: exit status of a usage or input problem, and of a bug in refpos
EXIT_INPUT, EXIT_BUG = 2, 3
#: exit status when stdout's reader has gone (128 + SIGPIPE, as the shell reports a program a closed pipe ended)
EXIT_PIPE = 141
REPORT = "this is a bug in refpos: please report it with the command line (rerun with --debug for the traceback)"


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``refpos check: error: argument --q-len: …`` and exit 2.

    ``constraints``: checks of options that must agree (:func:`refpos.cli.options.require`), run on the
    parsed arguments; a message one returns is an error like any other.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.constraints: list[Callable[[argparse.Namespace], str | None]] = []

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        for check in self.constraints:
            message = check(parsed)
            if message:
                self.error(message)
        return parsed, rest

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="refpos", description="Reference positional encodings.")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an internal error")
    parser.add_argument("--version", action=PrintVersion, help="print the version and where the suite and goldens are")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).configure_parser(command_parser)
        command_parser.set_defaults(_module=module)
    return parser


class PrintVersion(argparse.Action):
    """``--version``: print :func:`version_line` as it is (argparse's own action wraps it to the terminal)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        print(version_line())
        parser.exit(0)


def version_line() -> str:
    """``refpos 0.1.0 (suite and goldens: FOLDER)``: the version, and where ``refpos suite`` and
    ``refpos golden verify`` read from (the checkout's folders or the installed package's)."""
    import refpos
    from refpos.installed import suite_root

    try:
        where = f"suite and goldens: {suite_root()}"
    except FileNotFoundError:
        where = "installed without the suite and goldens"
    return f"refpos {refpos.__version__} ({where})"


class OutputClosed(BaseException):
    """stdout's reader has gone. A ``BaseException``, like ``KeyboardInterrupt``: no verb's handler of input
    errors (``OSError`` included) takes it for a refusal of its input."""


class _Stdout:
    """``sys.stdout`` while a command runs: a write or flush that meets a closed pipe raises :class:`OutputClosed`
    instead of ``BrokenPipeError``; everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise OutputClosed from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise OutputClosed from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _end_quietly(stream: Any) -> int:
    """After stdout's reader has gone: point the descriptor at /dev/null, so that the interpreter's last flush of
    what is still buffered cannot fail either, and return :data:`EXIT_PIPE`."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): nothing to redirect
        return EXIT_PIPE
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)
    return EXIT_PIPE


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run ``refpos`` with ``argv``; the exit status (a usage error's 2 and ``--help``'s 0 are returned too, and
    :data:`EXIT_PIPE` when stdout's reader went away)."""
    stdout = sys.stdout
    sys.stdout = _Stdout(stdout)
    try:
        code = _main(argv)
        sys.stdout.flush()  # what is still buffered meets a closed pipe here, not in the interpreter's last flush
        return code
    except OutputClosed:
        return _end_quietly(stdout)
    finally:
        sys.stdout = stdout


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "pass_through", False):  # only ``refpos suite`` hands arguments on
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse has printed its one line (or the help)
        return exc.code if isinstance(exc.code, int) else EXIT_INPUT
    args.extra = extra
    name = f"refpos {args.command}"
    try:
        module = importlib.import_module(args._module)
        from refpos.models.families import UnknownFamilyWarning

        with warnings.catch_warnings():  # a warning is one line on stderr, like an error
            warnings.simplefilter("default", UnknownFamilyWarning)  # the user asked for this resolution: say it
            warnings.showwarning = lambda message, *_: print(f"{name}: warning: {message}", file=sys.stderr)
            return int(module.run(args))
    except (ValueError, TypeError, OSError) as exc:  # a named refusal of an input (files: OSError)
        code, message, error = EXIT_INPUT, _first_line(exc), exc
    except ImportError as exc:  # an optional dependency (matplotlib, torch, cupy)
        code, message, error = EXIT_INPUT, f"{_first_line(exc)} (an optional dependency is missing)", exc
    except MemoryError as exc:
        code, message, error = EXIT_INPUT, "not enough memory for this request: ask for smaller sizes", exc
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # everything else is refpos's fault
        code, message, error = EXIT_BUG, f"internal error ({type(exc).__name__}: {_first_line(exc)}); {REPORT}", exc
    if args.debug:
        traceback.print_exception(error)
    from refpos.validation import printable

    print(f"{name}: error: {printable(message)}", file=sys.stderr)
    return code
