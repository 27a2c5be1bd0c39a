"""What every mutant shares: the reference adapter's functions, and a way to break exactly one thing.

A RoPE mutant is one line, ``globals().update(rope_mutant(__name__, "mistake_id"))``: the reference adapter
whose RoPE functions make the change of the mistake's definition on every call (the ``port`` of
:data:`refpos.check.rope.rope_mistakes.ROPE_MISTAKES`, the same definition ``refpos check`` builds its mutants
from). Another mutant starts with ``globals().update(inherit(__name__, "mistake_id"))`` — every public
function of :mod:`refpos.testing.adapter` and an ``INFO`` that names the mistake by its id in the catalogue of
known mistakes (:mod:`refpos.check.shared.catalogue`, the ids ``refpos check`` prints) — then redefines the one
function (or the one helper, via :func:`patched`) that carries its mistake. An id that is not catalogued is
a ``KeyError`` on import.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from refpos.check.shared.catalogue import BY_ID, known
from refpos.testing import adapter as reference


def module(name: str) -> ModuleType:
    """A refpos module by name (``refpos.attention`` is also a function in ``refpos/__init__``)."""
    return importlib.import_module(name)


def inherit(name: str, mistake: str) -> dict[str, Any]:
    """The reference adapter's public functions plus an INFO naming the mutant and its mistake (a catalogue id)."""
    entry = BY_ID[known(mistake)]
    names = {
        key: value
        for key, value in vars(reference).items()
        if not key.startswith("_") and callable(value) and getattr(value, "__module__", None) == reference.__name__
    }
    names["INFO"] = {**reference.INFO, "name": name.rsplit(".", 1)[-1], "mutant_of": "refpos.testing.adapter",
                     "mistake": entry.id, "mistake_description": entry.description}
    return names


def inherit_patched(name: str, mistake: str, *patches: tuple[ModuleType, str, Any]) -> dict[str, Any]:
    """:func:`inherit` (``mistake``: a catalogue id), with every function run while the
    ``(module, attribute, replacement)`` patches hold.

    The reference's helper carrying the mistake is replaced only for the duration of an adapter call, so
    every adapter function that reaches it (directly or not) shows the mistake, and nothing else changes.
    """
    names = inherit(name, mistake)
    for key, func in list(names.items()):
        if key != "INFO":
            names[key] = _under(func, patches)
    return names


def _under(func: Any, patches: tuple[tuple[ModuleType, str, Any], ...]) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as stack:
            for module, attribute, replacement in patches:
                stack.enter_context(patched(module, attribute, replacement))
            return func(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def patched(module: ModuleType, attribute: str, replacement: Any) -> Iterator[None]:
    """Temporarily replace ``module.attribute`` (one helper of the reference) for one call."""
    original = getattr(module, attribute)
    setattr(module, attribute, replacement)
    try:
        yield
    finally:
        setattr(module, attribute, original)


def rope_mutant(name: str, mistake: str) -> dict[str, Any]:
    """The reference adapter with the RoPE mistake ``mistake`` (a catalogue id with a definition in
    :data:`refpos.check.rope.rope_mistakes.ROPE_MISTAKES`) made on every call of its RoPE functions."""
    import numpy as np

    import refpos
    from refpos.check.rope.mistakes import RopeCall
    from refpos.check.rope.rope_mistakes import ROPE_MISTAKES

    port = ROPE_MISTAKES[known(mistake)].port
    names = inherit(name, mistake)

    def wrong(rope: dict, positions: Any, seq_len: int | None) -> RopeCall:
        return port(RopeCall.of(refpos.rope_config_from_params(rope), positions, seq_len))

    def rope_frequencies(rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, float]:
        call = wrong(rope, np.zeros(0, dtype=np.int64), seq_len)  # no positions: L as given
        return call.inv_freq, call.attention_factor

    def rope_cos_sin(positions: Any, rope: dict, seq_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return wrong(rope, positions, seq_len).tables()

    def apply_rope(x: Any, positions: Any, rope: dict, seq_len: int | None = None) -> np.ndarray:
        return wrong(rope, positions, seq_len).run(np.asarray(x, dtype=np.float64))

    def rope_rotation_matrix(position: Any, rope: dict, seq_len: int | None = None) -> np.ndarray:
        head_dim = int(rope["head_dim"])
        per_channel = np.repeat(np.asarray(position)[..., None], head_dim, axis=-1)  # (D,) or (3, D): one token each
        return apply_rope(np.eye(head_dim), per_channel, rope, seq_len).T  # column c: the rotation of e_c

    def rope_attention_logits(q: Any, k: Any, q_positions: Any, k_positions: Any, rope: dict,
                              seq_len: int | None = None) -> np.ndarray:
        if seq_len is None:
            seq_len = int(max(np.max(q_positions, initial=0), np.max(k_positions, initial=0))) + 1
        q_rot, k_rot = apply_rope(q, q_positions, rope, seq_len), apply_rope(k, k_positions, rope, seq_len)
        scale = refpos.rope.Rope(refpos.rope_config_from_params(rope), seq_len=seq_len).softmax_scale(q_rot.shape[-1])
        return q_rot @ np.swapaxes(k_rot, -1, -2) * scale

    names.update(rope_frequencies=rope_frequencies, rope_cos_sin=rope_cos_sin, apply_rope=apply_rope,
                 apply_rope_complex=apply_rope, rope_rotation_matrix=rope_rotation_matrix,
                 rope_attention_logits=rope_attention_logits)
    return names
