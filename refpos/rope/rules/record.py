r"""What a scaling rule is: one :class:`RopeRule` record, the keys it reads, and the arithmetic it is
written against.

A rule maps ``(config, L) → (ω, A)`` (docs/extrapolation.md#the-math). Its record holds everything that
varies from one rule to the next, so that every consumer is derived from it instead of naming the rule:

* **keys**: the :class:`~refpos.rope.rules.parameters.Parameter` names it reads (they become fields of
  :class:`refpos.RopeConfig` and keys of the adapter contract; those with ``in_config`` are read from a
  model's rope dict), which of them are required, and how ``factor`` is checked or derived
  (:class:`FactorRule`);
* **validation** beyond each key's own check (:attr:`RopeRule.check`);
* **formulas**: the inverse frequencies and the attention factor, each written once against an
  :class:`Arithmetic`, so that the same lines give the float64 reference (:class:`Float64`) and the
  30-digit certificate (``refpos.golden.exact.certify``);
* **a Hypothesis draw** of valid keys (:attr:`RopeRule.draw`), shared by ``refpos.testing.strategies`` and
  the spec suite's strategies;
* **docs**: its anchor and the formulas of the docs table.

Writing a formula against an :class:`Arithmetic` is ordinary array code: ``ar.arange``, ``ar.where``,
``ar.log`` … and the arithmetic operators. Where the float64 bits matter (the vector tests pin HF's), the
formula keeps HF's order of operations; the exact arithmetic evaluates the same order at 30 digits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from refpos.backend import Array
from refpos.rope.rules.inverse import Changes, Fitted, invert_theta, no_bands
from refpos.rope.rules.parameters import PARAMETERS

#: a rope configuration as the formulas read it: a :class:`refpos.RopeConfig` (attribute access only)
Config = Any


class Arithmetic(Protocol):
    """The operations a rule's formula may use besides ``+ - * / **`` (see the module docstring)."""

    pi: Any

    def real(self, value: float | int) -> Any:
        """A float64 (or int) config value as an exact number of this arithmetic."""

    def decimal(self, text: str) -> Any:
        """A decimal constant of the formula (``"0.1"``): rounded to float64, or exact."""

    def log(self, value: Any) -> Any: ...

    def sqrt(self, value: Any) -> Any: ...

    def floor(self, value: Any) -> Any: ...

    def ceil(self, value: Any) -> Any: ...

    def arange(self, start: int, stop: int, step: int = 1) -> Any:
        """``start, start + step, … < stop`` as a vector of reals."""

    def vector(self, values: Sequence[float]) -> Any: ...

    def zeros(self, n: int) -> Any: ...

    def concat(self, parts: Sequence[Any]) -> Any: ...

    def exp_each(self, v: Any) -> Any:
        """Elementwise exponential of a vector."""

    def log_each(self, v: Any) -> Any:
        """Elementwise natural logarithm of a vector."""

    def clip(self, v: Any, low: float, high: float) -> Any: ...

    def where(self, condition: Any, a: Any, b: Any) -> Any: ...

    def any(self, condition: Any) -> bool: ...


class Float64:
    """The reference's arithmetic: float64 arrays of the namespace ``xp``, Python floats for scalars."""

    pi = math.pi

    def __init__(self, xp: ModuleType) -> None:
        self.xp = xp

    def real(self, value: float | int) -> float | int:
        return value

    def decimal(self, text: str) -> float:
        return float(text)

    def log(self, value: float) -> float:
        return math.log(value)

    def sqrt(self, value: float) -> float:
        return math.sqrt(value)

    def floor(self, value: float) -> int:
        return math.floor(value)

    def ceil(self, value: float) -> int:
        return math.ceil(value)

    def arange(self, start: int, stop: int, step: int = 1) -> Array:
        return self.xp.arange(start, stop, step, dtype=self.xp.float64)

    def vector(self, values: Sequence[float]) -> Array:
        return self.xp.asarray(values, dtype=self.xp.float64)

    def zeros(self, n: int) -> Array:
        return self.xp.zeros(n, dtype=self.xp.float64)

    def concat(self, parts: Sequence[Array]) -> Array:
        return self.xp.concat(list(parts))

    def exp_each(self, v: Array) -> Array:
        return self.xp.exp(v)

    def log_each(self, v: Array) -> Array:
        return self.xp.log(v)

    def clip(self, v: Array, low: float, high: float) -> Array:
        return self.xp.clip(v, low, high)

    def where(self, condition: Array, a: Array, b: Array) -> Array:
        return self.xp.where(condition, a, b)

    def any(self, condition: Array) -> bool:
        return bool(self.xp.any(condition))


@dataclass(frozen=True)
class FactorRule:
    """How a rule checks ``factor`` (the scale ``s``) and fills it in when it is absent.

    ``at_least_one``: ``s ≥ 1`` (else ``s > 0``). Absent: ``L_max / L_0`` when ``from_lengths`` and
    ``max_position_embeddings`` is given, else ``default``; still absent and ``required``: an error.
    """

    at_least_one: bool = True
    required: bool = True
    from_lengths: bool = False
    default: float | None = None


@dataclass(frozen=True)
class DrawContext:
    """What both strategy modules draw before a rule's own keys: the rule draws around these."""

    rotary_dim: int  # the rotated channels d
    original: int  # a pre-training length L_0 drawn for the rules that have one
    factor: float  # a scale s >= 1 (1.0 when factor_one)
    factor_one: bool  # the rule at s = 1 (and whatever else makes it plain RoPE)


def unit_attention_factor(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    """``A = 1``: the rule changes only the frequencies."""
    return ar.real(1.0)


def no_check(rope: Config) -> Mapping[str, Any]:
    """No validation beyond the keys' own."""
    return {}


@dataclass(frozen=True)
class RopeRule:
    """One scaling rule (``rope_type``): its keys, validation, formulas, Hypothesis draw and docs.

    Parameters
    ----------
    name : str
        The ``rope_type`` (transformers' name where transformers has the rule).
    doc : str
        The docs section that states the rule (``docs/<page>.md#<anchor>``).
    omega, attention : str
        The rule's ω and A for the docs table (Markdown with ``$…$`` math).
    source : str
        Where the rule is defined: the paper, or the public implementation it was read from.
    parameters : tuple of str
        The :data:`~refpos.rope.rules.PARAMETERS` it reads (other keys must stay at their defaults).
    required : tuple of str
        Keys (its own or common ones such as ``max_position_embeddings``) that must be set, each with the
        reason shown when it is missing.
    factor : FactorRule or None
        How ``factor`` is checked and derived (``None``: the rule has no factor).
    inv_freq : callable ``(rope, seq_len, ar) -> vector``
        The inverse frequencies, ``(n_pairs,)``.
    attention_factor : callable ``(rope, seq_len, ar) -> scalar``
        The magnitude ``A``.
    draw : callable ``(draw, st, ctx) -> dict``
        The rule's keys of a valid contract dict, drawn with Hypothesis (``st`` is
        ``hypothesis.strategies``; refpos itself does not import Hypothesis); ``ctx`` a :class:`DrawContext`.
        With ``ctx.factor_one`` the drawn rule must be plain RoPE.
    check : callable ``rope -> mapping``
        Validation across keys, after each key's own; returns normalised values to store.
    transformers : str or None
        transformers' function for the same rule (``modeling_rope_utils``), ``None`` when transformers
        has none.
    min_rotary_dim : int
        The smallest rotated size the formula is defined for (``d/(d − 2)`` needs 4).
    spans_head : bool
        The table spans the whole head, with zero frequencies past the rotated pairs (Gemma 4's
        proportional RoPE): placement ``"proportional"``.
    aliases : tuple of str
        Other ``rope_type`` values that configs use for this rule.
    example : mapping
        The keys of one valid configuration of the rule (besides ``head_dim``): the registry's tests build it,
        drop each required key from it, and evaluate it in both arithmetics.
    implied : callable ``rope_dict -> (keys, note)`` or None
        refpos's own keys that a model's rope dict of this type implies without stating them (vLLM's
        ``"ntk"``: the form follows from ``mixed_b``), and the resolver's note saying so.
    invert : callable ``fitted -> iterator of changes``
        The formula run backwards (:mod:`refpos.rope.rules.inverse`): key values computed from fitted
        frequencies, each a proposal ``refpos check`` keeps only if the formula reproduces them (default: the
        base alone).
    bands : callable ``(rope, seq_len) -> list of str``
        The part of the rule each pair falls in, as ``refpos check`` groups wrong pairs (default: none).
    """

    name: str
    doc: str
    omega: str
    attention: str
    source: str
    inv_freq: Callable[[Config, int | None, Arithmetic], Any]
    draw: Callable[[Any, ModuleType, DrawContext], dict[str, Any]]
    parameters: tuple[str, ...] = ()
    required: tuple[tuple[str, str], ...] = ()
    factor: FactorRule | None = None
    attention_factor: Callable[[Config, int | None, Arithmetic], Any] = unit_attention_factor
    check: Callable[[Config], Mapping[str, Any]] = no_check
    transformers: str | None = None
    min_rotary_dim: int = 2
    spans_head: bool = False
    aliases: tuple[str, ...] = ()
    example: Mapping[str, Any] = field(default_factory=dict)
    implied: Callable[[Mapping[str, Any]], tuple[dict[str, Any], str]] | None = None
    invert: Callable[[Fitted], Iterator[Changes]] = invert_theta
    bands: Callable[[Config, int | None], list[str]] = no_bands

    @property
    def config_keys(self) -> frozenset[str]:
        """The keys of a model's rope dict this rule reads (besides ``rope_type`` and ``rope_theta``)."""
        return frozenset(p for p in self.parameters if PARAMETERS[p].in_config)
