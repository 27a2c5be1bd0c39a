r"""Softmax with an explicit fully-masked-row policy, and the causal and sliding-window masks.

Masks are boolean, ``True`` = may attend; the attention core turns them into ``-inf`` logits.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace, get_xp
from refpos.validation import (
    check_bool,
    check_broadcasts_to,
    check_choice,
    check_int,
    check_length,
    check_memory,
    real_floating_namespace,
)

FULLY_MASKED = ("zeros", "nan")


def check_mask(mask: Array, shape: tuple[int, ...], xp: Any, name: str = "mask") -> Array:
    try:
        mask_xp = array_namespace(mask)
    except TypeError:
        raise TypeError(f"{name} must be a boolean array (True = may attend), got {type(mask).__name__}") from None
    if mask_xp is not xp and mask_xp.__name__ != xp.__name__:
        raise TypeError(f"{name} must come from the same array library as the logits")
    if mask.dtype != xp.bool:
        raise TypeError(f"{name} must be a boolean array (True = may attend), got dtype {mask.dtype}")
    check_broadcasts_to(name, mask, shape, what=f"the logits {shape}")
    return mask


def softmax(logits: Array, *, axis: int = -1, mask: Array | None = None, fully_masked: str = "zeros",
            overwrite: bool = False) -> Array:
    r"""Numerically stable softmax with an explicit policy for fully masked rows.

    Parameters
    ----------
    logits : array
        Real floating array.
    axis : int
        The axis to normalise over.
    mask : bool array, optional
        Broadcastable to ``logits``; ``True`` = may attend. Masked entries get probability 0.
    fully_masked : {"zeros", "nan"}
        What a row with no allowed entry becomes: all zeros (as a "safe softmax"), or all NaN.
    overwrite : bool
        ``logits`` is the caller's own temporary: with NumPy, mask, shift and exponentiate it in its own
        memory (the same numbers, no full-size temporaries; the result is ``logits``' memory).

    Notes
    -----
    .. math:: \operatorname{softmax}(s)_j = \frac{e^{s_j - m}}{\sum_k e^{s_k - m}}, \qquad m = \max_k s_k

    Subtracting the row maximum ``m`` changes nothing mathematically and keeps ``exp`` from
    overflowing. A row is *fully masked* when every entry is ``-inf``; its maximum is then replaced by
    0 so that no ``(-inf) - (-inf)`` appears. NaN logits give NaN rows (never zeros).

    Examples
    --------
    >>> import numpy as np
    >>> softmax(np.array([1000.0, 1000.0])).tolist()
    [0.5, 0.5]
    >>> softmax(np.array([[1.0, 2.0]]), mask=np.array([[False, False]])).tolist()
    [[0.0, 0.0]]
    """
    xp = real_floating_namespace("logits", logits)
    check_choice("fully_masked", fully_masked, FULLY_MASKED)
    check_int("axis", axis)
    overwrite = check_bool("overwrite", overwrite)
    if not -logits.ndim <= axis < max(logits.ndim, 1):
        raise ValueError(f"axis must lie in [-{logits.ndim}, {logits.ndim}) for logits of shape {tuple(logits.shape)}, "
                         f"got {axis}")
    if logits.shape[axis] == 0:  # nothing to normalise over: every row is fully masked (and empty)
        return xp.zeros_like(logits)
    in_place = overwrite and isinstance(logits, np.ndarray) and logits.flags.writeable
    if mask is not None:
        check_mask(mask, tuple(logits.shape), xp)
        if in_place:
            np.copyto(logits, -math.inf, where=np.logical_not(mask))
        else:
            logits = xp.where(mask, logits, -math.inf)
    row_max = xp.max(logits, axis=axis, keepdims=True)
    dead = row_max == -math.inf  # every entry masked
    safe_max = xp.where(xp.isfinite(row_max), row_max, xp.zeros_like(row_max))
    if in_place:
        e = np.exp(np.subtract(logits, safe_max, out=logits), out=logits)
    else:
        e = xp.exp(logits - safe_max)
    z = xp.sum(e, axis=axis, keepdims=True)
    if not bool(xp.any(dead)):
        e /= z  # in place: e is this function's own temporary
        return e
    z = xp.where(dead, xp.ones_like(z), z)  # no 0/0 in dead rows
    p = e / z
    fill = 0.0 if fully_masked == "zeros" else math.nan
    return xp.where(dead, xp.full_like(p, fill), p)


def causal_mask(q_len: int, k_len: int, *, xp: Any = None) -> Array:
    """Causal mask ``(q_len, k_len)``, queries aligned to the *end* of the keys.

    Query ``i`` sits at position ``k_len - q_len + i`` and may attend to keys ``j <= k_len - q_len + i``
    (a decode step with a cache of ``k_len - q_len`` tokens, as in HF and Transformer-XL).
    """
    xp = get_xp(xp)
    q_len = check_length("q_len", q_len)
    k_len = check_length("k_len", k_len)
    if q_len > k_len:
        raise ValueError(f"causal attention needs q_len <= k_len, got q_len={q_len}, k_len={k_len}")
    check_memory("a (q_len, k_len) mask and its comparisons", 3 * q_len * k_len + 16 * k_len,
                 f"q_len={q_len}, k_len={k_len}")
    q_pos = xp.arange(k_len - q_len, k_len, dtype=xp.int64)
    k_pos = xp.arange(k_len, dtype=xp.int64)
    return k_pos[None, :] <= q_pos[:, None]


def chunked_causal_mask(q_len: int, k_len: int, chunk: int, *, xp: Any = None) -> Array:
    r"""Causal chunked-local mask (Llama 4's ``attention_chunk_size``): key ``j`` is visible to the query at
    position ``i`` when :math:`j \le i` and :math:`\lfloor j/C \rfloor = \lfloor i/C \rfloor`, with end-aligned
    queries (query ``t`` at position ``k_len − q_len + t``)."""
    xp = get_xp(xp)
    chunk = check_length("chunk", chunk, minimum=1)
    causal = causal_mask(q_len, k_len, xp=xp)
    q_pos = xp.arange(k_len - q_len, k_len, dtype=xp.int64)
    k_pos = xp.arange(k_len, dtype=xp.int64)
    return causal & ((q_pos[:, None] // chunk) == (k_pos[None, :] // chunk))


def sliding_window_mask(q_len: int, k_len: int, window: int, *, xp: Any = None) -> Array:
    """Causal sliding-window mask: ``0 <= i - j < window`` with end-aligned queries."""
    xp = get_xp(xp)
    window = check_length("window", window, minimum=1)
    causal = causal_mask(q_len, k_len, xp=xp)
    q_pos = xp.arange(k_len - q_len, k_len, dtype=xp.int64)
    k_pos = xp.arange(k_len, dtype=xp.int64)
    return causal & ((q_pos[:, None] - k_pos[None, :]) < window)
