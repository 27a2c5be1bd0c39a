r"""Qwen's dynamic NTK: the NTK-aware base raised in steps of the length (docs/extrapolation.md#dynamic-ntk-steps).

Qwen-1's code (``QWenModel.get_ntk_alpha`` and ``RotaryEmbedding.update_rotary_pos_emb_cache`` in its
``modeling_qwen.py``) scales the base by an NTK factor :math:`\alpha` that depends on the length :math:`L` of the
sequence at its first pass (the prompt; the decoding steps keep it) and steps up each time :math:`L` doubles past
the training length :math:`L_0` (``seq_length``):

.. math::
    \theta' = \theta\,\alpha^{d/(d-2)}, \qquad
    \alpha(L) = \max\bigl(2^{\lceil \log_2 (L/L_0) \rceil + 1} - 1,\ 1\bigr)

so :math:`\alpha = 1` up to :math:`L_0`, 3 up to :math:`2L_0`, 7 up to :math:`4L_0`, … Unlike transformers'
``dynamic`` rule (:math:`\theta(sL/L_\text{max} - s + 1)^{d/(d-2)}`, continuous in :math:`L`), the base is constant
between the powers of two. refpos finds :math:`\lceil\log_2(L/L_0)\rceil` in integers (the smallest :math:`k`
with :math:`L_0 2^k \ge L`), so a ratio that is an exact power of two is never pushed to the next step by a
rounded logarithm.
"""

from __future__ import annotations

from typing import Any

from refpos.rope.rules.ntk import scaled_base
from refpos.rope.rules.plain import base_inv_freq
from refpos.rope.rules.record import Arithmetic, Config, DrawContext, RopeRule


def step_alpha(seq_len: int | None, original: int) -> int:
    r""":math:`\alpha(L) = \max(2^{\lceil\log_2(L/L_0)\rceil + 1} - 1, 1)`, exactly (``L = None``: 1).

    ``ceil(L / L0) ≤ 2**k`` holds exactly when ``L ≤ L0 · 2**k``, so the step is the bit length of
    ``ceil(L / L0) − 1``.

    See Also
    --------
    step_inv_freq : the frequencies at the stepped base.

    References
    ----------
    Qwen-1 ``modeling_qwen.py``: ``QWenModel.get_ntk_alpha``.
    """
    if seq_len is None or seq_len <= original:
        return 1
    steps = (-(-seq_len // original) - 1).bit_length()  # ⌈log2(L/L0)⌉ for L > L0
    return 2 ** (steps + 1) - 1


def step_inv_freq(rope: Config, seq_len: int | None, ar: Arithmetic) -> Any:
    r""":math:`\theta'^{-2j/d}` with :math:`\theta' = \theta\,\alpha(L)^{d/(d-2)}` (module docstring)."""
    alpha = step_alpha(seq_len, rope.original_max_position_embeddings)
    theta = scaled_base(ar.real(rope.theta), ar.real(alpha), rope.rotary_dim, ar)
    return base_inv_freq(theta, rope.rotary_dim, ar)


def draw_step(draw: Any, st: Any, ctx: DrawContext) -> dict[str, Any]:
    """A training length; at ``ctx.factor_one`` one past any length the suites draw, where every step is 1 (plain)."""
    return {"original_max_position_embeddings": 2**30 if ctx.factor_one else ctx.original}


DYNAMIC_STEP = RopeRule(
    name="dynamic_step", doc="docs/extrapolation.md#dynamic-ntk-steps",
    omega=r"$\theta'(L)^{-2j/d}$, $\theta' = \theta\,\alpha^{d/(d-2)}$, $\alpha = 2^{\lceil\log_2(L/L_0)\rceil+1}-1$",
    attention="1", source="Qwen-1 modeling_qwen.py (QWenModel.get_ntk_alpha, RotaryEmbedding.update_rotary_pos_emb_"
    "cache)", inv_freq=step_inv_freq, draw=draw_step, parameters=("original_max_position_embeddings",),
    required=(("original_max_position_embeddings", "the training length the steps count from (Qwen's "
               "seq_length)"),), min_rotary_dim=4,
    example={"original_max_position_embeddings": 2048},
)

__all__ = ["DYNAMIC_STEP", "step_alpha", "step_inv_freq"]
