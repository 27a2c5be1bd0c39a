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
from collections.abc import Callable

from refpos import bounds
from refpos.bounds import Bound, shown_text
from refpos.validation import MAX_EXACT_POSITION, physical_memory
from refpos.validation import MAX_WIDTH as API_MAX_WIDTH

#: the largest position or length: float64 angles p·ω are exact for integer positions up to 2**53
MAX_POSITION = MAX_EXACT_POSITION
#: the largest number of heads, head size, width or bucket count (the API's bound too)
MAX_WIDTH = API_MAX_WIDTH
#: the longest sequence a benchmark runs
MAX_BENCH_LENGTH = 2**20


class Number:
    """An argparse ``type``: an ``int`` (ASCII digits) or a finite ``float`` within a :class:`~refpos.bounds.Bound`.

    ``Number(int, minimum=1, maximum=2**16)`` states the range itself; :meth:`of` takes the API's record, so that
    the flag and the function's parameter refuse the same values with the same sentence. ``allowed`` is the
    sentence the message and the option's help use. Only ASCII digits are numbers: ``'١٢'`` (Arabic-Indic
    digits), ``'1_000'`` and ``' 5'``, which Python's ``int()`` takes, are refused.
    """

    numeric = True  # marks the converters of numeric options (the option-walking test finds them by it)

    def __init__(self, kind: type, *, minimum: float | None = None, maximum: float | None = None,
                 above: float | None = None, even: bool = False, why: str = "") -> None:
        self.bound = Bound(kind, minimum=minimum, maximum=maximum, above=above, even=even, why=why)
        self.kind, self.minimum, self.maximum, self.above, self.even, self.why = (
            kind, minimum, maximum, above, even, why)
        self.__name__ = kind.__name__  # argparse names a type in some messages by its __name__

    @classmethod
    def of(cls, bound: Bound) -> Number:
        """The argparse type of the API's ``bound``."""
        return cls(bound.kind, minimum=bound.minimum, maximum=bound.maximum, above=bound.above, even=bound.even,
                   why=bound.why)

    @property
    def allowed(self) -> str:
        return self.bound.allowed

    def __call__(self, text: str) -> int | float:
        try:
            return self.bound.parse("value", text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {self.allowed}, got {shown_text(text)}") from None

    def __repr__(self) -> str:
        return f"Number({self.allowed})"


EXACT = bounds.EXACT
#: a position (0 allowed)
POSITION = Number.of(bounds.POSITION)
#: a sequence length, a number of queries or keys, a largest position (at least 1)
LENGTH = Number.of(bounds.LENGTH)
#: a sequence length L that a rule reads (max(positions) + 1)
SEQ_LEN = Number.of(bounds.SEQ_LEN)
#: heads, head sizes, bucket counts
WIDTH = Number.of(bounds.WIDTH)
#: an even width (sin-cos or rotation pairs)
EVEN_WIDTH = Number.of(bounds.EVEN_WIDTH)
#: a benchmark's sequence length or block size
BENCH_LENGTH = Number(int, minimum=1, maximum=MAX_BENCH_LENGTH)
#: a count of repetitions or of files
COUNT = Number(int, minimum=1, maximum=1024)
#: a base of geometric frequencies
BASE = Number.of(bounds.BASE)
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
