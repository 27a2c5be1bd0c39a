"""The numeric options of the ``refpos`` verbs: one typed converter per kind of number, with its range.

Every numeric option of every verb has a :class:`Number` as its argparse ``type``: an integer or a finite
float within a stated range. argparse turns a value outside it into one line naming the flag and what is
allowed (``refpos check: error: argument --q-len: must be an integer from 1 to 2**53 …, got '-1'``),
exit status 2, before the verb runs; nothing is clipped, wrapped or taken as empty.

Options that must agree with each other (``--q-len <= --k-len`` where the queries are the last of the
keys) are checked by a *constraint*: ``require(parser, check)`` registers ``check(args) -> str | None``,
run on the parsed arguments of that parser; a message is the same one-line usage error, exit 2.

The maxima, and why each is needed:

* positions and lengths: :data:`MAX_POSITION` = 2**53: float64 holds every integer up to it, so the
  angles ``p·ω`` of larger positions would be those of rounded positions (and 10**30 overflows int64);
* heads, head sizes, widths, buckets: :data:`MAX_WIDTH` = 2**16 (a request above it is a typo, and its
  tables would not fit in memory with any length);
* benchmark sizes: :data:`MAX_BENCH_LENGTH` = 2**20 tokens; the arrays a suite allocates are estimated
  from all its options together and refused when larger than the machine's memory (:func:`memory_bytes`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from refpos.validation import MAX_EXACT_POSITION, physical_memory
from refpos.validation import MAX_WIDTH as API_MAX_WIDTH

#: the largest position or length: float64 angles p·ω are exact for integer positions up to 2**53
MAX_POSITION = MAX_EXACT_POSITION
#: the largest number of heads, head size, width or bucket count (the API's bound too)
MAX_WIDTH = API_MAX_WIDTH
#: the longest sequence a benchmark runs
MAX_BENCH_LENGTH = 2**20


def _bound_text(value: float) -> str:
    """``2**53`` for a large power of two, the plain number otherwise."""
    if float(value).is_integer() and value >= 2**16 and math.log2(value).is_integer():
        return f"2**{int(math.log2(value))}"
    return f"{value:g}" if isinstance(value, float) else str(value)


class Number:
    """An argparse ``type``: an ``int`` (decimal digits) or a finite ``float`` within ``[minimum, maximum]``.

    ``above``: a float's exclusive lower bound instead of ``minimum``; ``even``: an even integer only;
    ``why``: the reason for the maximum, shown in the message. ``allowed`` is the sentence the message
    and the option's help use.
    """

    numeric = True  # marks the converters of numeric options (the option-walking test finds them by it)

    def __init__(self, kind: type, *, minimum: float | None = None, maximum: float | None = None,
                 above: float | None = None, even: bool = False, why: str = "") -> None:
        if kind not in (int, float):
            raise TypeError(f"kind must be int or float, got {kind!r}")
        self.kind, self.minimum, self.maximum, self.above, self.even, self.why = (
            kind, minimum, maximum, above, even, why)
        self.__name__ = kind.__name__  # argparse names a type in some messages by its __name__

    @property
    def allowed(self) -> str:
        noun = ("an even integer" if self.even else "an integer") if self.kind is int else "a finite number"
        low = f"> {_bound_text(self.above)}" if self.above is not None else (
            None if self.minimum is None else _bound_text(self.minimum))
        high = None if self.maximum is None else _bound_text(self.maximum)
        if self.above is not None:
            text = f"{noun} {low}" + (f" and <= {high}" if high else "")
        elif low is not None and high is not None:
            text = f"{noun} from {low} to {high}"
        elif low is not None:
            text = f"{noun} >= {low}"
        else:
            text = f"{noun} <= {high}" if high else noun
        return text + (f" ({self.why})" if self.why else "")

    def __call__(self, text: str) -> int | float:
        shown = repr(text) if len(text) <= 40 else f"{text[:24]!r}… ({len(text)} characters)"
        refusal = argparse.ArgumentTypeError(f"must be {self.allowed}, got {shown}")
        try:
            value = self.kind(text)
        except (ValueError, OverflowError):  # not a number: '', 'abc', int('1.5'), a 5000-digit literal
            raise refusal from None
        if self.kind is float and not math.isfinite(value):
            raise refusal
        if ((self.minimum is not None and value < self.minimum) or (self.above is not None and value <= self.above)
                or (self.maximum is not None and value > self.maximum) or (self.even and value % 2)):
            raise refusal
        return value

    def __repr__(self) -> str:
        return f"Number({self.allowed})"


EXACT = "float64 holds every integer up to 2**53"
#: a position (0 allowed)
POSITION = Number(int, minimum=0, maximum=MAX_POSITION, why=EXACT)
#: a sequence length, a number of queries or keys, a largest position (at least 1)
LENGTH = Number(int, minimum=1, maximum=MAX_POSITION, why=EXACT)
#: heads, head sizes, bucket counts
WIDTH = Number(int, minimum=1, maximum=MAX_WIDTH)
#: an even width (sin-cos or rotation pairs)
EVEN_WIDTH = Number(int, minimum=2, maximum=MAX_WIDTH, even=True, why="sin-cos or rotation pairs")
#: a benchmark's sequence length or block size
BENCH_LENGTH = Number(int, minimum=1, maximum=MAX_BENCH_LENGTH)
#: a count of repetitions or of files
COUNT = Number(int, minimum=1, maximum=1024)
#: a base of geometric frequencies
BASE = Number(float, above=1.0)
#: a memory budget in GiB
GIB = Number(float, minimum=0.0, maximum=float(2**20))
#: figure resolution (the pixels, and the memory, grow with its square)
DPI = Number(int, minimum=1, maximum=1200, why="the figure's memory grows with dpi squared")


def help_with(number: Number, text: str = "") -> str:
    """An option's help followed by what it allows (``%`` escaped for argparse)."""
    return (f"{text}; " if text else "") + number.allowed.replace("%", "%%")


Constraint = Callable[[argparse.Namespace], "str | None"]


def require(parser: argparse.ArgumentParser, check: Constraint) -> None:
    """Run ``check(args)`` on this parser's parsed arguments; a message it returns is a usage error (exit 2)."""
    constraints = getattr(parser, "constraints", None)
    if constraints is None:
        raise TypeError("require() needs a refpos.cli.Parser (its constraints run after parsing)")
    constraints.append(check)


def memory_bytes(what: str, need: int, flags: str) -> str | None:
    """A refusal when ``need`` bytes (what the options ``flags`` ask for) exceed the machine's memory."""
    total = physical_memory()
    if total is None or need <= total:
        return None
    return (f"{flags} ask for at least {need / 2**30:.3g} GiB of {what}, more than the machine's "
            f"{total / 2**30:.3g} GiB: ask for smaller sizes")
