r"""Softmax, masks and scaled dot-product attention (MHA, GQA, MQA), readable and exact.

The order of operations is the anchors' (docs/conventions.md#scale-order):

.. code-block:: text

    1  s = q·kᵀ (+ qk_terms)          dot-product position terms (Shaw, Transformer-XL, CoPE)
    2  s = s + b   if bias_scaled     bias before the scale (the worked example, Falcon's ALiBi)
    3  s = scale·s                    scale = d^-1/2 by default; T5: 1
    4  s = t_i·s                      optional per-query temperature (log-n scaling)
    5  s = c·tanh(s/c)                optional softcap (Gemma-2: c = 50)
    6  s = s + b   otherwise          additive position bias after the scale (ALiBi, T5, KERPLE, ...)
    7  s = where(allowed, s, -inf)    boolean mask, True = may attend
    8  p = softmax(s)                 a fully masked row follows ``fully_masked``
    9  o = p·v (+ value_terms(p))     Shaw's a^V

NaN in any input propagates to the outputs it touches; it is never replaced.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.core.softmax import FULLY_MASKED, check_mask, softmax
from refpos.core.tiled import along, tiled_attention
from refpos.validation import check_bool, check_broadcasts_to, check_choice, check_float, real_floating_namespace


def _check_qkv(q: Array, k: Array, v: Array) -> tuple[Any, int]:
    """Validate shapes of q ``(..., Hq, Tq, d)``, k ``(..., Hkv, Tk, d)``, v ``(..., Hkv, Tk, dv)``."""
    try:
        xp = array_namespace(q, k, v)
    except TypeError as exc:
        raise TypeError(f"q, k and v must be arrays of one array library ({exc})") from None
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.ndim < 3:
            raise ValueError(f"{name} must have shape (..., heads, time, dim), got {tuple(a.shape)}")
        if not xp.isdtype(a.dtype, "real floating"):
            raise TypeError(f"{name} must be a real floating array, got dtype {a.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"head dims differ: q has {q.shape[-1]}, k has {k.shape[-1]}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must agree on (..., heads, time)")
    if q.shape[:-3] != k.shape[:-3]:
        raise ValueError(f"batch shapes differ: q has {tuple(q.shape[:-3])}, k has {tuple(k.shape[:-3])}")
    h_q, h_kv = q.shape[-3], k.shape[-3]
    if h_q < 1 or h_kv < 1:
        raise ValueError(f"q and k need at least one head each (axis -3), got {h_q} query and {h_kv} key/value heads")
    if q.shape[-1] < 1:
        raise ValueError(f"q and k need a head dim of at least 1 (last axis), got {q.shape[-1]}")
    if h_q % h_kv:
        raise ValueError(f"the {h_q} query heads are not a multiple of the {h_kv} key/value heads")
    return xp, h_q // h_kv


def _check_additive(name: str, term: Array | None, shape: tuple[int, ...], xp: Any) -> None:
    if term is None:
        return
    if real_floating_namespace(name, term).__name__ != xp.__name__:
        raise TypeError(f"{name} must come from the same array library as q")
    check_broadcasts_to(name, term, shape, what=f"the logits {shape}")


def grouped_scores(q: Array, k: Array, n_rep: int) -> Array:
    """q·kᵀ for every query head, without copying K: ``(..., Hq, Tq, Tk)``.

    Query head ``h`` uses key head ``h // n_rep`` (HF ``repeat_kv``), realised by viewing the query
    heads as ``(Hkv, n_rep)`` and broadcasting each key head over its group.
    """
    xp = array_namespace(q, k)
    *lead, h_q, t_q, d = q.shape
    h_kv = h_q // n_rep
    q_grouped = xp.reshape(q, (*lead, h_kv, n_rep, t_q, d))  # (..., Hkv, n_rep, Tq, d)
    k_grouped = xp.expand_dims(k, axis=-3)  # (..., Hkv, 1, Tk, d)
    s = xp.matmul(q_grouped, xp.matrix_transpose(k_grouped))  # (..., Hkv, n_rep, Tq, Tk)
    return xp.reshape(s, (*lead, h_q, t_q, k.shape[-2]))  # (..., Hq, Tq, Tk)


def grouped_values(p: Array, v: Array, n_rep: int) -> Array:
    """p·v for every query head: p ``(..., Hq, Tq, Tk)``, v ``(..., Hkv, Tk, dv)`` -> ``(..., Hq, Tq, dv)``."""
    xp = array_namespace(p, v)
    *lead, h_q, t_q, t_k = p.shape
    p_grouped = xp.reshape(p, (*lead, h_q // n_rep, n_rep, t_q, t_k))  # (..., Hkv, n_rep, Tq, Tk)
    o = xp.matmul(p_grouped, xp.expand_dims(v, axis=-3))  # (..., Hkv, n_rep, Tq, dv)
    return xp.reshape(o, (*lead, h_q, t_q, v.shape[-1]))  # (..., Hq, Tq, dv)


def _resolve_scale(scale: float | None, head_dim: int) -> float:
    if scale is None:
        return head_dim**-0.5
    return check_float("scale", scale, positive=True)


@dataclass(frozen=True)
class AttentionSteps:
    """The validated arguments of steps 1-9 (module docstring), as :func:`attention_steps` returns them.

    ``n_rep`` query heads share each key/value head; ``t_q`` and ``t_k`` are the full query and key
    lengths (a tile of rows or keys keeps them, to place its causal mask).
    """

    n_rep: int
    t_q: int
    t_k: int
    scale: float
    causal: bool = False
    bias: Array | None = None
    mask: Array | None = None
    softcap: float | None = None
    bias_scaled: bool = False
    qk_terms: Array | None = None
    temperature: Array | None = None
    value_terms: Callable[[Array], Array] | None = None
    fully_masked: str = "zeros"


def attention_steps(
    q: Array, k: Array, v: Array, *, bias: Any = None, mask: Any = None, causal: bool = False,
    scale: float | None = None, softcap: float | None = None, bias_scaled: bool = False,
    qk_terms: Array | None = None, temperature: Array | None = None,
    value_terms: Callable[[Array], Array] | None = None, fully_masked: str = "zeros",
    block_terms: bool = False,
) -> AttentionSteps:
    """Check every argument of :func:`attention` (and of :func:`refpos.core.chunked_attention`) once.

    ``block_terms=True`` lets ``bias`` and ``mask`` be functions of a block's query and key indices
    (checked when called); otherwise they must be arrays that broadcast to the logits without
    enlarging them.
    """
    xp, n_rep = _check_qkv(q, k, v)
    causal = check_bool("causal", causal)
    bias_scaled = check_bool("bias_scaled", bias_scaled)
    check_choice("fully_masked", fully_masked, FULLY_MASKED)
    *lead, h_q, t_q, d = q.shape
    t_k = k.shape[-2]
    logits_shape = (*lead, h_q, t_q, t_k)
    if not (block_terms and callable(bias)):
        _check_additive("bias", bias, logits_shape, xp)
    if mask is not None and not (block_terms and callable(mask)):
        check_mask(mask, logits_shape, xp)
    _check_additive("qk_terms", qk_terms, logits_shape, xp)
    if temperature is not None:
        _check_additive("temperature", temperature[..., None], logits_shape, xp)
    if value_terms is not None and not callable(value_terms):
        raise TypeError(f"value_terms must be a function of the weights, got {type(value_terms).__name__}")
    if causal and t_q > t_k:
        raise ValueError(f"causal attention needs q_len <= k_len, got q_len={t_q}, k_len={t_k}")
    if softcap is not None:
        softcap = check_float("softcap", softcap, positive=True)
    return AttentionSteps(n_rep=n_rep, t_q=t_q, t_k=t_k, scale=_resolve_scale(scale, d), causal=causal, bias=bias,
                          mask=mask, softcap=softcap, bias_scaled=bias_scaled, qk_terms=qk_terms,
                          temperature=temperature, value_terms=value_terms, fully_masked=fully_masked)


def attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    bias: Array | None = None,
    mask: Array | None = None,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    return_weights: bool = False,
    bias_scaled: bool = False,
    qk_terms: Array | None = None,
    temperature: Array | None = None,
    value_terms: Callable[[Array], Array] | None = None,
    fully_masked: str = "zeros",
    trace: dict[str, Array] | None = None,
) -> Array | tuple[Array, Array]:
    r"""Scaled dot-product attention with bias, mask, causal mask, softcap and grouped-query heads.

    Parameters
    ----------
    q : array ``(..., Hq, Tq, d)``
    k : array ``(..., Hkv, Tk, d)``
    v : array ``(..., Hkv, Tk, dv)``
        ``Hq`` must be a multiple of ``Hkv`` (grouped-query / multi-query attention): query head ``h``
        uses key/value head ``h // (Hq / Hkv)``.
    bias : array, optional
        Additive logit bias broadcastable to ``(..., Hq, Tq, Tk)``.
    mask : bool array, optional
        Broadcastable to ``(..., Hq, Tq, Tk)``; ``True`` = may attend.
    causal : bool
        Also apply :func:`causal_mask` (queries aligned to the end of the keys).
    scale : float, optional
        Softmax scale; default ``d ** -0.5``. T5 uses 1.
    softcap : float, optional
        ``c`` of ``c·tanh(s/c)`` (Gemma-2: 50).
    return_weights : bool
        Also return the attention weights ``(..., Hq, Tq, Tk)``.
    bias_scaled : bool
        Add ``bias`` before the scale (the worked example's order; Falcon's ALiBi) instead of after it.
    qk_terms : array, optional
        Terms added to q·kᵀ before scaling, broadcastable to the logits (Shaw a^K, Transformer-XL).
    temperature : array, optional
        Per-query factor ``(..., Tq)`` applied after the scale (log-n scaling).
    value_terms : callable, optional
        ``f(weights) -> (..., Hq, Tq, dv)`` added to the output (Shaw a^V).
    fully_masked : {"zeros", "nan"}
        Output rows of queries that may attend to nothing.
    trace : dict, optional
        If given, every intermediate is stored in it by name: ``S``, ``B``, ``S+B``, ``scaled``,
        ``scaled+B``, ``logits``, ``allowed``, ``A``, ``O``.

    Returns
    -------
    out : array ``(..., Hq, Tq, dv)``, and the weights when ``return_weights``.

    Notes
    -----
    .. math::
        \mathrm{Attn}(Q, K, V) = \operatorname{softmax}\!\left(c \tanh\frac{t \cdot \mathrm{scale}\,
        (QK^\top + B_{\text{before}})}{c} + B_{\text{after}} + M\right) V

    with :math:`M_{ij} = 0` where attention is allowed and :math:`-\infty` elsewhere.
    """
    steps = attention_steps(q, k, v, bias=bias, mask=mask, causal=causal, scale=scale, softcap=softcap,
                            bias_scaled=bias_scaled, qk_terms=qk_terms, temperature=temperature,
                            value_terms=value_terms, fully_masked=fully_masked)
    return_weights = check_bool("return_weights", return_weights)
    if trace is None and not return_weights and value_terms is None:  # nothing kept whole: the same steps
        return _fast_form(q, k, v, steps)                              # on tiles (refpos.core.tiled)
    o, p = attend_rows(q, k, v, steps, rows=slice(0, steps.t_q), record=trace)
    return (o, p) if return_weights else o


def _fast_form(q: Array, k: Array, v: Array, steps: AttentionSteps) -> Array:
    return tiled_attention(q, k, v, steps, attend_rows)  # each tile runs the readable attend_rows


def attend_rows(q: Array, k: Array, v: Array, steps: AttentionSteps, *, rows: slice,
                record: dict[str, Array] | None = None) -> tuple[Array, Array]:
    """Steps 1-9 of the module docstring for the query rows ``rows``.

    ``q`` holds just those rows (possibly of one key/value head's query heads only); ``k`` and ``v`` may
    hold only the first keys, when the others are masked in every one of these rows. The terms in
    ``steps`` arrive already cut to these heads (and keys). ``record`` receives every intermediate.
    """
    xp = array_namespace(q)
    own_scores = record is None  # nothing is kept: the scores are this function's own temporaries
    record = {} if record is None else record
    t_q, t_k, n_rep, scale, softcap = steps.t_q, steps.t_k, steps.n_rep, steps.scale, steps.softcap
    bias, mask, qk_terms = (along(term, -2, rows, t_q) for term in (steps.bias, steps.mask, steps.qk_terms))
    temperature = along(steps.temperature, -1, rows, t_q)  # (..., Tq): its last axis is the query axis

    # 1. content scores (+ dot-product position terms)
    s = grouped_scores(q, k, n_rep)  # (..., Hq, rows, Tk)
    if qk_terms is not None:
        s = s + qk_terms
    record["S"] = s
    if bias is not None:
        record["B"] = bias
    # 2. bias before the scale (the worked example's order)
    if bias is not None and steps.bias_scaled:
        s = s + bias
        record["S+B"] = s
    # 3. scale
    s = s * scale
    record["scaled"] = s
    # 4. per-query temperature
    if temperature is not None:
        s = s * temperature[..., None]
    # 5. softcap
    if softcap is not None:
        s = softcap * xp.tanh(s / softcap)
    # 6. bias after the scale (ALiBi, T5, ...)
    if bias is not None and not steps.bias_scaled:
        s = s + bias
        record["scaled+B"] = s
    record["logits"] = s
    # 7. mask (causal: query row i sits at key position t_k - t_q + i)
    allowed = mask
    if steps.causal:
        q_pos = xp.arange(rows.start, rows.stop, dtype=xp.int64) + (t_k - t_q)
        cm = xp.arange(k.shape[-2], dtype=xp.int64)[None, :] <= q_pos[:, None]  # (rows, keys)
        allowed = cm if allowed is None else (allowed & cm)
    if allowed is not None:
        record["allowed"] = allowed
    # 8. softmax
    p = softmax(s, mask=allowed, fully_masked=steps.fully_masked, overwrite=own_scores)
    record["A"] = p
    # 9. weighted values
    o = grouped_values(p, v, n_rep)  # (..., Hq, rows, dv)
    if k.shape[-2] == 0 and steps.fully_masked == "nan":  # no keys at all: every row is fully masked
        o = xp.full_like(o, math.nan)
    if steps.value_terms is not None:
        o = o + steps.value_terms(p)
    record["O"] = o
    return o, p
