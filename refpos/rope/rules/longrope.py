r"""LongRoPE (docs/extrapolation.md#longrope; Phi-3 "su"): per-pair divisors, one list for short inputs and one
for long ones, and an attention factor from the scale.

.. math::
    \omega'_j = \frac{1}{\Lambda_j\, \theta^{2j/d}}, \quad
    \Lambda = \begin{cases} \text{long\_factor} & L > L_0 \\ \text{short\_factor} & L \le L_0 \end{cases},
    \qquad A = \sqrt{1 + \frac{\ln s}{\ln L_0}} \;(s > 1), \quad 1 \;(s \le 1)

``L`` unknown (``None``, HF at initialisation) or 0 is short. ``short_mscale`` / ``long_mscale``
(Phi-3.5-MoE, transformers' ``PhimoeRotaryEmbedding.forward``) replace ``A`` on either side.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from refpos.rope.rules.inverse import Changes, Fitted, invert_theta
from refpos.rope.rules.record import Arithmetic, Config, DrawContext, FactorRule, RopeRule


def uses_long_factors(rope: Config, seq_len: int | None) -> bool:
    """Whether ``L > L_0`` (strict: ``L = L_0`` is short; ``None`` and 0 are short)."""
    return bool(seq_len) and seq_len > rope.original_max_position_embeddings


def longrope_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    d = rope.rotary_dim
    ext = ar.vector(rope.long_factor if uses_long_factors(rope, seq_len) else rope.short_factor)  # (d/2,)
    return 1 / (ext * ar.real(rope.theta) ** (ar.arange(0, d, 2) / d))


def longrope_attention_factor(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    if rope.short_mscale is not None:
        return ar.real(rope.long_mscale if uses_long_factors(rope, seq_len) else rope.short_mscale)
    if rope.attention_factor is not None:
        return ar.real(rope.attention_factor)
    s = ar.real(rope.factor)
    if s <= 1:
        return ar.real(1.0)
    return ar.sqrt(1 + ar.log(s) / ar.log(ar.real(rope.original_max_position_embeddings)))


def check_longrope(rope: Config) -> Mapping[str, Any]:
    if rope.factor is None and rope.attention_factor is None:
        raise ValueError("longrope needs factor, max_position_embeddings (factor = L_max / L_0) or attention_factor")
    if rope.attention_factor is None and rope.factor is not None and rope.factor > 1 \
            and rope.original_max_position_embeddings < 2:
        raise ValueError("original_max_position_embeddings must be >= 2 for longrope's attention factor "
                         "sqrt(1 + ln s / ln L_0)")
    pairs = rope.rotary_dim // 2
    for name in ("short_factor", "long_factor"):
        if len(getattr(rope, name)) != pairs:
            raise ValueError(f"{name} must have rotary_dim/2 = {pairs} entries, got {len(getattr(rope, name))}")
    given = [name for name in ("short_mscale", "long_mscale") if getattr(rope, name) is not None]
    if len(given) == 1:
        raise ValueError(f"{given[0]} is given without its partner: give short_mscale and long_mscale together")
    return {}


def invert_longrope(fitted: Fitted) -> Iterator[Changes]:
    r"""The other branch's length, or the divisors :math:`\hat\Lambda_j = \theta^{-2j/d}/\hat\omega_j` of the
    branch in use, or ``θ``."""
    rope, long = fitted.rope, uses_long_factors(fitted.rope, fitted.seq_len)
    orig = rope.original_max_position_embeddings
    yield {"seq_len": orig if long else orig + 1}
    if fitted.use.all():
        with np.errstate(invalid="ignore", divide="ignore"):
            divisors = fitted.plain() / fitted.omega
        yield {"long_factor" if long else "short_factor": tuple(float(v) for v in divisors)}
    yield from invert_theta(fitted)


def longrope_bands(rope: Config, seq_len: int | None) -> list[str]:
    """The factor list in use (pair ``j`` reads its entry ``j``)."""
    return ["long_factor[j]" if uses_long_factors(rope, seq_len) else "short_factor[j]"] * rope.n_pairs


def draw_longrope(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    pairs = ctx.rotary_dim // 2
    keys: dict[str, Any] = {"original_max_position_embeddings": ctx.original}
    if ctx.factor_one:
        keys.update(factor=1.0, short_factor=[1.0] * pairs, long_factor=[1.0] * pairs)
        return keys
    grid = st.floats(1.0, 64.0)
    keys.update(short_factor=draw(st.lists(grid, min_size=pairs, max_size=pairs)),
                long_factor=draw(st.lists(grid, min_size=pairs, max_size=pairs)),
                max_position_embeddings=ctx.original * draw(st.sampled_from([1, 2, 32])))
    return keys


LONGROPE = RopeRule(
    name="longrope", doc="docs/extrapolation.md#longrope", omega=r"$1/(\Lambda_j\theta^{2j/d})$",
    attention=r"$\sqrt{1 + \ln s / \ln L_0}$, or explicit", source="Ding et al. 2024 (LongRoPE); Phi-3",
    inv_freq=longrope_inv_freq, attention_factor=longrope_attention_factor, draw=draw_longrope,
    parameters=("factor", "original_max_position_embeddings", "attention_factor", "short_factor", "long_factor",
                "short_mscale", "long_mscale"),
    required=(("original_max_position_embeddings", ""), ("short_factor", "a list of rotary_dim/2 numbers"),
              ("long_factor", "a list of rotary_dim/2 numbers")),
    factor=FactorRule(at_least_one=False, required=False, from_lengths=True), check=check_longrope,
    transformers="_compute_longrope_parameters", aliases=("su",),
    example={"rotary_dim": 8, "original_max_position_embeddings": 4096, "max_position_embeddings": 131072,
             "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [1.0, 4.0, 16.0, 32.0]},
    invert=invert_longrope, bands=longrope_bands,
)
