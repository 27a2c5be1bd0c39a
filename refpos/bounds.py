"""What a number may be: one record per kind of parameter, shared by the API's checks and the command line's types.

A :class:`Bound` states the numbers a parameter allows (an ``int`` or a finite ``float``, a range, the reason
for its maximum). The API checks a Python value against it (:meth:`Bound.check`), and the command line's
argparse types (:class:`refpos.cli.options.Number`) parse typed text with it (:meth:`Bound.parse`), so both
refuse the same values with the same sentence::

    seq_len must be an integer from 1 to 2**53 + 1 (L = max(positions) + 1, positions up to 2**53), got 0
    refpos rope: error: argument --seq-len: must be an integer from 1 to 2**53 + 1 (…), got '0'

Typed numbers are ASCII only (:func:`parse_int`, :func:`parse_float`): Python's ``int()`` and ``float()`` also
take other scripts' digits (``'١٢'``), ``'1_000'`` and surrounding spaces, which refpos refuses.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from typing import Any

from refpos.validation import MAX_EXACT_POSITION, MAX_WIDTH, shown_number

#: an integer as a person types it: ASCII digits with an optional sign, nothing else (no ``_``, no spaces, no
#: other script's digits, which Python's ``int()`` would take)
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
#: a decimal number as typed: ASCII digits, an optional point and exponent (no ``nan``/``inf``/``_``)
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: the longest number text read (a longer one is refused before it is converted)
MAX_NUMBER_TEXT = 400


def shown_text(text: str) -> str:
    """A typed value as a message quotes it: ``repr`` (control characters escaped), cut after 24 characters when
    longer than 40."""
    return repr(text) if len(text) <= 40 else f"{text[:24]!r}… ({len(text)} characters)"


def parse_int(text: str) -> int:
    """The integer ``text`` spells in ASCII digits (optional sign); ``ValueError`` for anything else: Unicode digits
    (``'١٢'``), ``'1_000'``, spaces, ``'1.0'``, an empty string, more than :data:`MAX_NUMBER_TEXT` characters."""
    if not isinstance(text, str) or len(text) > MAX_NUMBER_TEXT or not _INTEGER_TEXT.fullmatch(text):
        raise ValueError(f"not an integer in ASCII digits: {shown_text(str(text))}")
    return int(text)


def parse_float(text: str) -> float:
    """The number ``text`` spells in ASCII (digits, point, exponent); ``ValueError`` otherwise (``'nan'``, ``'inf'``,
    Unicode digits, ``'1_0'``, spaces). The value may still overflow to ``inf``: :meth:`Bound.check` refuses it."""
    if not isinstance(text, str) or len(text) > MAX_NUMBER_TEXT or not _FLOAT_TEXT.fullmatch(text):
        raise ValueError(f"not a decimal number in ASCII: {shown_text(str(text))}")
    return float(text)


def bound_text(value: float) -> str:
    """A bound as a message writes it: ``2**53`` (``-2**53``) for a large power of two, the plain number
    otherwise."""
    if value < 0:
        return "-" + bound_text(-value)
    if isinstance(value, int) and value > 2**16 and (value - 1) & (value - 2) == 0:
        return f"2**{(value - 1).bit_length() - 1} + 1"
    if float(value).is_integer() and value >= 2**16 and math.log2(value).is_integer():
        return f"2**{int(math.log2(value))}"
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Bound:
    """The numbers a parameter allows: an ``int`` or a finite ``float`` within ``[minimum, maximum]``.

    One record serves the API and the command line alike, so both refuse the same values with the same
    sentence: :meth:`check` for a Python value (``seq_len must be an integer from 1 to 2**53 …, got 0``), and
    :class:`refpos.cli.options.Number`, the argparse type built on it, for the text a user types
    (``argument --seq-len: must be an integer from 1 to 2**53 …, got '0'``). ``above``: a float's exclusive
    lower bound instead of ``minimum``; ``even``: an even integer only; ``why``: the reason for the maximum.
    """

    kind: type
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    even: bool = False
    why: str = ""

    def __post_init__(self) -> None:
        if self.kind not in (int, float):
            raise TypeError(f"kind must be int or float, got {self.kind!r}")

    @property
    def allowed(self) -> str:
        """What the parameter allows, as the messages and the command line's help say it."""
        noun = ("an even integer" if self.even else "an integer") if self.kind is int else "a finite number"
        low = f"> {bound_text(self.above)}" if self.above is not None else (
            None if self.minimum is None else bound_text(self.minimum))
        high = None if self.maximum is None else bound_text(self.maximum)
        if self.above is not None:
            text = f"{noun} {low}" + (f" and <= {high}" if high else "")
        elif low is not None and high is not None:
            text = f"{noun} from {low} to {high}"
        elif low is not None:
            text = f"{noun} >= {low}"
        else:
            text = f"{noun} <= {high}" if high else noun
        return text + (f" ({self.why})" if self.why else "")

    def holds(self, value: float) -> bool:
        """Whether the number ``value`` (of the right kind, finite) lies within the bounds."""
        return not ((self.minimum is not None and value < self.minimum)
                    or (self.above is not None and value <= self.above)
                    or (self.maximum is not None and value > self.maximum) or (self.even and value % 2))

    def check(self, name: str, value: object) -> Any:
        """``value`` if it is allowed; a ``TypeError`` (not a number of the kind) or ``ValueError`` naming ``name``
        and :attr:`allowed` otherwise."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.kind is int else numbers.Real):
            raise TypeError(f"{name} must be {self.allowed}, got {type(value).__name__} {value!r}")
        if self.kind is int:
            number: float = int(value)  # type: ignore[arg-type]
        else:
            try:
                number = float(value)  # type: ignore[arg-type]
            except OverflowError:  # an int beyond float64
                number = math.inf
        if (self.kind is float and not math.isfinite(number)) or not self.holds(number):
            raise ValueError(f"{name} must be {self.allowed}, got {shown_number(value)}")  # type: ignore[arg-type]
        return number

    def parse(self, name: str, text: str) -> Any:
        """The value ``text`` spells (:func:`parse_int` / :func:`parse_float`), checked as :meth:`check` does;
        a ``ValueError`` naming ``name`` and quoting the text otherwise."""
        try:
            value = parse_int(text) if self.kind is int else parse_float(text)
            return self.check(name, value)
        except (ValueError, TypeError):
            raise ValueError(f"{name} must be {self.allowed}, got {shown_text(str(text))}") from None


#: why positions and lengths stop at 2**53
EXACT = "float64 holds every integer up to 2**53"


#: a position (0 allowed): the API's bound and the command line's
POSITION = Bound(int, minimum=0, maximum=MAX_EXACT_POSITION, why=EXACT)
#: a sequence length ``L`` (``seq_len``), a number of queries or keys, a largest position (at least 1)
LENGTH = Bound(int, minimum=1, maximum=MAX_EXACT_POSITION, why=EXACT)
#: a sequence length ``L`` a rule reads (``seq_len``): HF's ``max(position_ids) + 1``, so one more than the largest
#: position
SEQ_LEN = Bound(int, minimum=1, maximum=MAX_EXACT_POSITION + 1, why="L = max(positions) + 1, positions up to 2**53")
#: heads, head sizes, widths, bucket counts
WIDTH = Bound(int, minimum=1, maximum=MAX_WIDTH)
#: a width whose sign chooses a form (DeBERTa's ``position_buckets``: <= 0 for none)
SIGNED_WIDTH = Bound(int, minimum=-MAX_WIDTH, maximum=MAX_WIDTH)
#: a signed distance or range (a relative position, a shift; DeBERTa's -1 for "the model's length")
DISTANCE = Bound(int, minimum=-MAX_EXACT_POSITION, maximum=MAX_EXACT_POSITION, why=EXACT)
#: an even width (sin-cos or rotation pairs)
EVEN_WIDTH = Bound(int, minimum=2, maximum=MAX_WIDTH, even=True, why="sin-cos or rotation pairs")
#: a base (θ) of geometric frequencies: ``θ^(−2j/d)`` decreases with ``j`` only for ``θ > 1``
BASE = Bound(float, above=1.0)
