r"""Stateful dynamic-NTK RoPE: transformers' growth and reset of ``inv_freq`` across forward calls.

The stateless rule (:func:`refpos.rope.scaling.dynamic_theta`) gives the base at one length. HF keeps
state in its rotary module (docs/extrapolation.md#dynamic-ntk, HF 5.24.0 ``dynamic_rope_update``): it starts with
``cached = L_max`` and plain frequencies ``ω₀``; every forward, with ``L = max(position_ids) + 1``,

.. code-block:: text

    old = cached
    if L > old:                    ω = dynamic(L);  cached = L          # growth
    if L < L_max and old > L_max:  ω = ω₀;          cached = L_max      # reset (strict <)

so ``ω`` depends on the call history. Keys already in a KV cache keep the base they were rotated with
(HF #25104); this helper tracks only the frequencies.

Example (docs/extrapolation.md#dynamic-ntk table; ``factor = 2``, ``L_max = 4096``, ``d = 128``, θ = 1e4):

>>> from refpos.rope.config import RopeConfig
>>> state = DynamicNTKState(RopeConfig(rope_type="dynamic", head_dim=128, factor=2.0,
...                                    max_position_embeddings=4096))
>>> for n in (10, 8192, 6000, 4096, 4095, 5000, 9000, 100):
...     _ = state.update(n)
...     print(n, state.cached_len, round(state.theta_used, 6))
10 4096 10000.0
8192 8192 30527.736749
6000 8192 30527.736749
4096 8192 30527.736749
4095 4096 10000.0
5000 5000 14497.95742
9000 9000 34610.262047
100 4096 10000.0
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from refpos.backend import Array, get_xp
from refpos.rope.config import RopeConfig
from refpos.rope.core import apply_rope, seq_len_of
from refpos.rope.rules import RULES
from refpos.rope.rules.ntk import DYNAMIC
from refpos.rope.scaling import check_rope_config, dynamic_theta, rope_frequencies
from refpos.validation import as_positions, check_int


class DynamicNTKState:
    """The dynamic-NTK frequencies of one HF rotary module across calls (see the module docstring).

    Parameters
    ----------
    rope : RopeConfig
        ``rope_type="dynamic"`` with ``dynamic_rule="hf"`` (vLLM's static rule has no state).
    xp : namespace, optional
        Namespace of the frequency arrays (default: the current backend).

    Attributes
    ----------
    cached_len : int
        HF's ``max_seq_len_cached``.
    length_used : int or None
        The ``L`` the current frequencies were computed at (``None``: plain ``ω₀``).
    inv_freq : array ``(d/2,)``
        The current frequencies.
    """

    def __init__(self, rope: RopeConfig, *, xp: ModuleType | None = None) -> None:
        rope = check_rope_config(rope)
        if RULES[rope.rope_type] is not DYNAMIC or rope.dynamic_rule != "hf":
            raise ValueError("DynamicNTKState needs rope_type='dynamic' with dynamic_rule='hf', got "
                             f"rope_type={rope.rope_type!r}, dynamic_rule={rope.dynamic_rule!r}")
        self.rope = rope
        self.xp = get_xp(xp)
        self._original, _ = rope_frequencies(rope, seq_len=None, xp=self.xp)
        self.reset()

    @property
    def original_len(self) -> int:
        """``L_max`` (HF ``original_max_seq_len``)."""
        return self.rope.max_position_embeddings

    def reset(self) -> None:
        """Back to the freshly built module: ``cached = L_max``, plain frequencies."""
        self.cached_len = self.original_len
        self.length_used: int | None = None
        self.inv_freq = self._original

    @property
    def theta_used(self) -> float:
        """The base θ' of the current frequencies."""
        return dynamic_theta(self.rope, self.length_used)

    def update(self, seq_len: int) -> Array:
        """One forward call with ``L = seq_len``: apply growth / reset, return the frequencies it uses."""
        seq_len = check_int("seq_len", seq_len, minimum=0)
        old = self.cached_len
        if seq_len > old:  # growth
            self.inv_freq, _ = rope_frequencies(self.rope, seq_len=seq_len, xp=self.xp)
            self.cached_len, self.length_used = seq_len, seq_len
        if seq_len < self.original_len and old > self.original_len:  # reset, strict <
            self.reset()
        return self.inv_freq

    def apply(self, x: Array, positions: Any) -> Array:
        """One forward call: ``update(max(positions) + 1)``, then rotate ``x`` with those frequencies."""
        positions = as_positions(positions, xp=self.xp)
        seq_len = seq_len_of(positions)
        inv_freq = self.update(0 if seq_len is None else seq_len)
        return apply_rope(x, positions, self.rope, frequencies=(inv_freq, 1.0))

    def __repr__(self) -> str:
        return f"DynamicNTKState(cached_len={self.cached_len}, length_used={self.length_used})"
