r"""GLM's 2-D positions: two RoPEs side by side in every head, one per position axis (docs/rope.md#glm-2-d-positions).

GLM (Du et al. 2022) fills a masked span autoregressively and gives each token two ids: its *position* (its place
in the context; every token of the span being generated takes the place of the mask token) and its *block
position* (0 over the context, 1, 2, … inside the span). ChatGLM-6B's ``modeling_chatglm.py``
(``SelfAttention.forward`` with ``position_encoding_2d``) splits each head of :math:`D` channels in two halves and
rotates the first half by the position and the second by the block position, each half a RoPE of its own over
:math:`D/2` channels, half-split pairs, base θ:

.. math::
    \operatorname{rope2d}(x)_{p, b} = \bigl[\,R_p\, x_{0:D/2} \;;\; R_b\, x_{D/2:D}\,\bigr], \qquad
    \omega_j = \theta^{-2j/(D/2)},\ j = 0 \dots D/4 - 1

The two halves share their frequencies (both tables are built over :math:`D/2`): unlike M-RoPE, whose axes split
one table of :math:`D/2` frequencies between them, each axis here sees every frequency.

Examples
--------
>>> import numpy as np
>>> from refpos.rope.config import RopeConfig
>>> ids = glm_position_ids(context=3, length=5)
>>> ids.tolist()
[[0, 1, 2, 2, 2], [0, 0, 0, 1, 2]]
>>> half = RopeConfig(head_dim=4)
>>> x = np.ones((5, 8))
>>> out = apply_rope_2d(x, ids, half)
>>> bool(np.allclose(out[:, :4], apply_rope(x[:, :4], ids[0], half)))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace
from refpos.rope.config import RopeConfig
from refpos.rope.core import apply_rope
from refpos.validation import check_int

#: the two position axes, in the order of the channels they rotate
GLM_AXES = ("position_ids", "block_position_ids")


def apply_rope_2d(x: Array, positions: Any, rope: RopeConfig, *, seq_len: int | None = None) -> Array:
    r"""Rotate ``x`` ``(..., T, D)`` by GLM's two position axes (module docstring).

    Parameters
    ----------
    x : float array ``(..., T, D)``
    positions : int array ``(2, ..., T)``
        Row 0 the positions, row 1 the block positions (:func:`glm_position_ids`).
    rope : RopeConfig
        The RoPE of one half: ``head_dim`` must be ``D/2``.
    seq_len : int, optional
        ``L`` for the rules that depend on it (as :func:`refpos.apply_rope`).

    Returns
    -------
    array like ``x``: ``[R_p x[..., :D/2], R_b x[..., D/2:]]``.

    See Also
    --------
    refpos.apply_rope : each half's rotation.
    glm_position_ids : the two axes of a context and the span generated after it.

    References
    ----------
    Du et al. 2022, "GLM: General Language Model Pretraining with Autoregressive Blank Infilling" (2-D positional
    encoding); ChatGLM-6B ``modeling_chatglm.py``: ``SelfAttention.forward``, ``apply_rotary_pos_emb_index``.
    """
    xp = array_namespace(x)
    width = x.shape[-1]
    if width != 2 * rope.head_dim:
        raise ValueError(f"x has head size {width}; a 2-D RoPE of halves of rope.head_dim={rope.head_dim} needs "
                         f"{2 * rope.head_dim}")
    positions = xp.asarray(positions)
    if positions.ndim < 1 or positions.shape[0] != 2:
        raise ValueError(f"positions must hold the two axes {GLM_AXES} in its first dimension, got shape "
                         f"{tuple(positions.shape)}")
    half = rope.head_dim
    first = apply_rope(x[..., :half], positions[0, ...], rope, seq_len=seq_len)
    second = apply_rope(x[..., half:], positions[1, ...], rope, seq_len=seq_len)
    return xp.concat([first, second], axis=-1)


def glm_position_ids(context: int, length: int, mask_position: int | None = None) -> np.ndarray:
    r"""GLM's two axes ``(2, length)`` for a context of ``context`` tokens followed by the span generated in place
    of the mask: positions ``0 … context − 1`` then ``mask_position`` (default: the context's last token, where
    ChatGLM-6B's prompt ends with its ``[gMASK]`` and bos tokens), block positions 0 over the context then
    ``1, 2, …`` (ChatGLM-6B's ``get_position_ids``).

    See Also
    --------
    apply_rope_2d : rotates a query or key by these two axes.

    References
    ----------
    ChatGLM-6B ``modeling_chatglm.py``: ``get_position_ids``.
    """
    context = check_int("context", context, minimum=1)
    length = check_int("length", length, minimum=context)
    mask = context - 1 if mask_position is None else check_int("mask_position", mask_position, minimum=0)
    if mask >= context:
        raise ValueError(f"mask_position must be a place in the context (< {context}), got {mask}")
    positions = np.concatenate([np.arange(context), np.full(length - context, mask)])
    blocks = np.concatenate([np.zeros(context, dtype=np.int64), np.arange(1, length - context + 1)])
    return np.stack([positions, blocks]).astype(np.int64)


__all__ = ["GLM_AXES", "apply_rope_2d", "glm_position_ids"]
