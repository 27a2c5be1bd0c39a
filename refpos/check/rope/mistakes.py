"""The RoPE mistakes of the catalogue as definitions: each one a wrong way to evaluate RoPE, one record per id.

A mistake is a change to one evaluation of RoPE, a :class:`RopeCall` (its config, positions, length,
frequencies ``ω``, attention factor ``A``, phase dtype, channels) — never its wrong output written again.
From one :class:`RopeMistake`:

* ``refpos check`` builds its mutants, the forms of the mistake for the checked call
  (:attr:`RopeMistake.variants`; :mod:`refpos.check.rope.diagnosis`, :mod:`refpos.check.rope.mrope`);
* the spec suite builds its mutant adapter, a port that makes the change on every call
  (:attr:`RopeMistake.port`; ``spec_tests/mutants/_base.py``);
* the diagnosis matrix (refpos/tests/test_diagnosis_matrix.py) builds its cases from the same variants, for
  every RoPE mistake of the catalogue.

Each mistake's text (description, example, docs section) is its table in ``refpos/data/mistakes.toml``; the
definitions of :data:`ROPE_MISTAKES` live in :mod:`refpos.check.rope.rope_mistakes`. To add one, add its table and
its :class:`RopeMistake`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from refpos.backend import to_numpy
from refpos.check.shared.arrays import np_ns

Channels = tuple[Any, Any, Any, Any]


@dataclasses.dataclass(frozen=True)
class RopeCall:
    """One evaluation of RoPE: what a candidate computes, right or wrong.

    ``positions`` ``(..., T)`` (``(3, ..., T)`` with M-RoPE); ``seq_len`` the ``L`` the frequencies were taken
    at (``None``: unknown); ``inv_freq``, ``attention_factor`` the ``(ω, A)`` it rotates with;
    ``angle_dtype`` the dtype of its phase path; ``pairs`` its channels ``(u_in, v_in, u_out, v_out)`` when
    they are not the layout's.
    """

    rope: Any
    positions: np.ndarray
    seq_len: int | None
    inv_freq: np.ndarray
    attention_factor: float
    angle_dtype: str = "float64"
    pairs: Channels | None = None

    @classmethod
    def of(cls, rope: Any, positions: Any, seq_len: int | None = None) -> RopeCall:
        """The reference's call: ``(ω, A)`` of ``rope`` at ``seq_len`` (``None``: ``max(positions) + 1``);
        positions validated as the reference does (M-RoPE: ``(T,)`` becomes t = h = w)."""
        from refpos.rope.mrope import rope_positions

        positions = np.asarray(to_numpy(rope_positions(positions, rope.mrope_section, xp=np_ns())), dtype=np.int64)
        if seq_len is None and positions.size:
            seq_len = int(positions.max()) + 1
        return cls(rope, positions, seq_len, *_frequencies(rope, seq_len))

    def but(self, **changes: Any) -> RopeCall:
        """This call with some of its fields changed (a variant)."""
        return dataclasses.replace(self, **changes)

    def with_rope(self, **changes: Any) -> RopeCall:
        """This call with a changed config, its ``(ω, A)`` taken from that config."""
        rope = dataclasses.replace(self.rope, **changes)
        inv_freq, factor = _frequencies(rope, self.seq_len)
        return self.but(rope=rope, inv_freq=inv_freq, attention_factor=factor)

    def at_length(self, seq_len: int) -> RopeCall:
        """This call with its ``(ω, A)`` taken at another length ``L``."""
        inv_freq, factor = _frequencies(self.rope, seq_len)
        return self.but(seq_len=seq_len, inv_freq=inv_freq, attention_factor=factor)

    @property
    def channels(self) -> Channels:
        """The channels ``(u_in, v_in, u_out, v_out)`` it reads and writes, as index lists."""
        from refpos.rope.forms import pair_channels

        return self.pairs if self.pairs is not None else pair_channels(self.rope)

    def run(self, x: np.ndarray) -> np.ndarray:
        """The call's output for ``x`` ``(..., T, D)`` (NumPy, in x's dtype)."""
        import refpos
        from refpos.rope.core import align_positions, prepare_inputs, rotate_pairs

        frequencies = (self.inv_freq, self.attention_factor)
        if self.angle_dtype == "float64" and self.pairs is None:
            return np.asarray(to_numpy(refpos.apply_rope(x, self.positions, self.rope, seq_len=self.seq_len,
                                                         frequencies=frequencies)))
        x, positions, single = prepare_inputs(x, self.positions, self.rope)
        out = rotate_pairs(x, align_positions(positions, x, self.rope), *frequencies, self.rope,
                           angle_dtype=self.angle_dtype, pairs=self.pairs)
        return np.asarray(out[0, :] if single else out)

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """``A·cos φ`` and ``A·sin φ`` ``(..., T, w)`` in the layout's order (as ``refpos.rope_cos_sin``)."""
        from refpos.pairs import place_pairs
        from refpos.rope.core import rope_pair_tables

        cos, sin = rope_pair_tables(self.positions, self.inv_freq, self.attention_factor, self.rope,
                                    angle_dtype=self.angle_dtype)
        return place_pairs(cos, cos, self.rope.layout), place_pairs(sin, sin, self.rope.layout)


def _frequencies(rope: Any, seq_len: int | None) -> tuple[np.ndarray, float]:
    from refpos.rope.scaling import rope_frequencies

    inv_freq, factor = rope_frequencies(rope, seq_len=seq_len, xp=np_ns())
    return np.asarray(to_numpy(inv_freq)), float(factor)


class Variant(NamedTuple):
    """One form of a mistake for one call: what it is (for the report), and the wrong call."""

    evidence: str
    call: RopeCall
    rows: np.ndarray | None = None  # where the variant exists (bool mask of the rows; None: everywhere)
    reverse: str | None = None  # the id refpos check names with truth and candidate exchanged (None: no such
    #                             direction): the variant's config taken as the truth, the reference as candidate


class Context(NamedTuple):
    """What a variant may need beyond the call: the rows' T-axis index, the range of all checked positions."""

    token_index: np.ndarray  # (..., T)
    min_position: int
    max_position: int


@dataclasses.dataclass(frozen=True)
class RopeMistake:
    """A RoPE mistake of the catalogue (``id``) as a change to a :class:`RopeCall`.

    ``variants(call, context)``: every form of the mistake for this call (the check's mutants, the matrix's
    cases); ``port(call)``: the call a port with the mistake makes instead of ``call`` (the spec suite's
    mutant), or ``None`` when the mistake has no form on every call. ``found_by``: how ``refpos check`` names
    it: ``"mutant"`` (it matches a variant), ``"precision"`` (within float32's tolerance only),
    ``"probe"`` (the frequency probe fits another θ) or ``"ratio"`` (a constant magnitude ratio).
    """

    id: str
    variants: Callable[[RopeCall, Context], list[Variant]]
    port: Callable[[RopeCall], RopeCall] | None = None
    found_by: str = "mutant"

