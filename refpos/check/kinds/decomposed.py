"""``refpos check decomposed``: attention logits plus SAM's decomposed relative positions, from a call of
``add_decomposed_rel_pos``, against :mod:`refpos.encodings.decomposed`, the mistake named by
:func:`~refpos.encodings.decomposed_mistakes.identify_decomposed` from the candidate's terms (docs/decomposed.md#
mistakes).

The tolerance is the float32 bound of the terms (:func:`refpos.encodings.decomposed_mistakes.decomposed_tolerance`)
plus the rounding of the sum ``attn + terms`` in float32, ``u·|logits|``; the candidate's terms are the candidate
minus ``attn`` (exact in float64 for float32 values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck
from refpos.encodings.decomposed_mistakes import (
    DECOMPOSED_MISTAKES,
    UNIT_ROUNDOFF,
    UNRECOGNISED,
    DecomposedInputs,
    decomposed_tolerance,
    identify_decomposed,
)


@dataclass(frozen=True)
class DecomposedLogits:
    """The logits ``attn`` ``(..., q_h·q_w, k_h·k_w)`` the terms of ``terms`` are added to."""

    attn: np.ndarray
    terms: DecomposedInputs

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        """``attn + terms`` and its tolerance (module docstring)."""
        logits = self.attn + self.terms.terms()
        return logits, decomposed_tolerance(self.terms) + UNIT_ROUNDOFF["float32"] * np.abs(logits)


def add_decomposed_rel_pos(attn: Any, q: Any, rel_pos_h: Any, rel_pos_w: Any, q_size: list[int], k_size: list[int]
                           ) -> DecomposedLogits:
    """The inputs of an ``add_decomposed_rel_pos`` call."""
    as_float = [np.asarray(a, dtype=np.float64) for a in (attn, q, rel_pos_h, rel_pos_w)]
    terms = DecomposedInputs(*as_float[1:], tuple(q_size), tuple(k_size))
    if as_float[0].shape != terms.terms().shape:
        raise ValueError(f"attn must be the logits {terms.terms().shape}, got {as_float[0].shape}")
    return DecomposedLogits(as_float[0], terms)


def _identify(candidate: np.ndarray, inputs: DecomposedLogits) -> str | None:
    name = identify_decomposed(candidate - inputs.attn, inputs.terms)
    return None if name == UNRECOGNISED else name


def _wrong(inputs: DecomposedLogits, name: str) -> np.ndarray | None:
    mistake = DECOMPOSED_MISTAKES[name]
    return inputs.attn + mistake.compute(inputs.terms) if mistake.applies(inputs.terms) else None


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """A 27-row table (pretrained on 14-patch windows) read by 6 × 6 queries against 6 × 6 keys (the axes can be
    swapped) and by 6 × 4 queries against 3 × 8 keys (the q/k ratio matters)."""
    rng = np.random.default_rng(11)
    calls = []
    for q_size, k_size in (((6, 6), (6, 6)), ((6, 4), (3, 8))):
        n_q, n_k = q_size[0] * q_size[1], k_size[0] * k_size[1]
        calls.append(("add_decomposed_rel_pos", {
            "attn": rng.standard_normal((2, n_q, n_k)), "q": rng.standard_normal((2, n_q, 5)),
            "rel_pos_h": rng.standard_normal((27, 5)), "rel_pos_w": rng.standard_normal((27, 5)),
            "q_size": list(q_size), "k_size": list(k_size)}))
    return calls


DECOMPOSED_CHECK = KindCheck(
    kind="decomposed", calls=(add_decomposed_rel_pos,), reference=DecomposedLogits.reference, identify=_identify,
    mistakes={name: m.description for name, m in DECOMPOSED_MISTAKES.items()}, wrong=_wrong, examples=_examples)

__all__ = ["DECOMPOSED_CHECK", "DecomposedLogits", "add_decomposed_rel_pos"]
