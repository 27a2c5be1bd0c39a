r"""DeBERTa's disentangled relative attention (He et al. 2021; transformers' ``DebertaV2``, ``Deberta``).

See docs/deberta.md. A table ``R`` of ``2k`` relative embeddings (``k`` the attention span) is projected to
position keys ``K_r`` and position queries ``Q_r``; each (query ``i``, key ``j``) pair reads row
``idx_ij`` of them, and the logits gain a content-to-position (c2p) and a position-to-content (p2c) term:

.. math::
    \mathrm{logits}_{ij} = \frac{q_i\cdot k_j \;+\; q_i\cdot K_{r}[\mathrm{idx}_{ij}]
        \;+\; k_j\cdot Q_{r}[\mathrm{idx}_{ij}]}{\sqrt{d\,(1 + n)}},
    \qquad \mathrm{idx}_{ij} = \operatorname{clip}\big(b(p_i - p_j) + k,\; 0,\; 2k - 1\big)

with ``n`` the number of terms in ``pos_att_type`` and ``b`` the log buckets (DeBERTa-v2/v3,
:func:`deberta_log_buckets`) or the identity (DeBERTa-v1, and v2 without ``position_buckets``).
DeBERTa's relative position is **query minus key**, the opposite of refpos's ``rel = key − query``
(:func:`refpos.encodings.relative_positions`); both terms read the same row ``idx_ij``.

The parameters carry the names of the config keys they come from (``config.json`` of a DeBERTa model):
``position_buckets``, ``max_relative_positions``, ``max_position_embeddings``, ``pos_att_type``,
``share_att_key``, ``relative_attention``, ``position_biased_input``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from refpos.backend import array_namespace
from refpos.bounds import DISTANCE, LENGTH, SIGNED_WIDTH, WIDTH
from refpos.encoding import Encoding
from refpos.encodings.deberta_terms import DEBERTA_FORMS, deberta_c2p_terms, deberta_p2c_terms
from refpos.encodings.learned import learned_lookup
from refpos.validation import as_positions, check_bool, check_choice, floating_array, same_libraries

Array = Any

#: the disentangled terms transformers implements (the original code's "p2p" is not one of them)
POS_ATT_TYPES = ("c2p", "p2c")


def deberta_pos_att_type(pos_att_type: str | Sequence[str] | None) -> tuple[str, ...]:
    """The config's ``pos_att_type`` as a tuple of distinct terms from ``("c2p", "p2c")``.

    A string is split at ``|``, stripped and lower-cased (``"c2p|p2c"``, DeBERTa-v1's config form, as
    transformers' config classes read it); ``None`` is no term. Any other entry, or a repeated one, is a
    ``ValueError``: the scale counts the entries, so an entry refpos does not compute cannot be dropped.
    """
    if pos_att_type is None:
        return ()
    if isinstance(pos_att_type, str):
        pos_att_type = [part.strip().lower() for part in pos_att_type.split("|")] if pos_att_type.strip() else []
    if not isinstance(pos_att_type, Sequence) or not all(isinstance(t, str) for t in pos_att_type):
        raise TypeError(f"pos_att_type must be None, a str such as 'c2p|p2c' or a list of str, got {pos_att_type!r}")
    terms = tuple(pos_att_type)
    for term in terms:
        check_choice("pos_att_type", term, POS_ATT_TYPES)
    if len(set(terms)) != len(terms):
        raise ValueError(f"pos_att_type must not repeat a term, got {list(terms)}")
    return terms


def deberta_softmax_scale(head_dim: int, pos_att_type: str | Sequence[str] | None) -> float:
    r"""The factor multiplying every logit: :math:`1/\sqrt{d\,(1 + n)}`, ``n`` the number of terms."""
    return 1.0 / math.sqrt(WIDTH.check("head_dim", head_dim) * (1 + len(deberta_pos_att_type(pos_att_type))))


def deberta_attention_span(position_buckets: int, max_relative_positions: int,
                           max_position_embeddings: int | None = None) -> tuple[int, int]:
    """``(k, m)``: the attention span ``k`` (half the rows of ``R``) and the relative range ``m``.

    ``m = max_relative_positions``, or ``max_position_embeddings`` where the config's value is below 1
    (its default -1). ``k = position_buckets`` when it is positive (log buckets), else ``m``.
    ``position_buckets`` is ``<= 0`` (no buckets) or ``>= 2``; with buckets, ``m`` must exceed
    ``position_buckets // 2 + 1`` (the log of :func:`deberta_log_buckets` is taken of ``(m − 1)/mid``).
    """
    buckets = SIGNED_WIDTH.check("position_buckets", position_buckets)  # <= 0: no buckets
    if buckets == 1:
        raise ValueError("position_buckets must be <= 0 (no buckets) or >= 2 (mid = position_buckets // 2 "
                         "must be positive), got 1")
    m = DISTANCE.check("max_relative_positions", max_relative_positions)  # < 1: max_position_embeddings
    if m < 1:
        if max_position_embeddings is None:
            raise ValueError(f"max_relative_positions={m} (< 1) stands for max_position_embeddings, "
                             "which was not given")
        m = LENGTH.check("max_position_embeddings", max_position_embeddings)
    if buckets > 0 and m <= buckets // 2 + 1:
        raise ValueError(f"max_relative_positions (or max_position_embeddings in its place) must exceed "
                         f"position_buckets // 2 + 1 = {buckets // 2 + 1}, got {m}")
    return (buckets if buckets > 0 else m), m


def deberta_log_buckets(relative: Array, position_buckets: int, max_relative_positions: int) -> Array:
    r"""DeBERTa-v2's log bucket of each relative position ``δ`` (int64, same shape).

    ``relative`` holds ``δ = p_query − p_key`` (DeBERTa's sign; ``b`` is odd, ``b(−δ) = −b(δ)``, so the
    sign only matters where the bucket is used, :func:`deberta_relative_index`). ``position_buckets`` and
    ``max_relative_positions`` are the config's (``max_relative_positions`` already resolved, ``>= 1``: see
    :func:`deberta_attention_span`). Positions within ``mid = position_buckets // 2`` keep their own
    bucket; beyond, buckets grow with ``log |δ|`` and reach ``±(2·mid − 1)`` at ``|δ| = m − 1``, and keep
    growing past it (the index clips them).

    Notes
    -----
    .. math::
        b(\delta) = \begin{cases} \delta & |\delta| \le \mathrm{mid} \\
        \operatorname{sign}(\delta)\left(\mathrm{mid} + \left\lceil \frac{\ln(|\delta|/\mathrm{mid})}
        {\ln((m - 1)/\mathrm{mid})}\,(\mathrm{mid} - 1) \right\rceil\right) & |\delta| > \mathrm{mid}
        \end{cases}

    Examples
    --------
    >>> deberta_log_buckets([-600, -511, -200, -129, -128, -1, 0, 5, 128, 129, 200, 511, 600], 256, 512).tolist()
    [-270, -255, -169, -129, -128, -1, 0, 5, 128, 129, 169, 255, 270]
    """
    _, m = deberta_attention_span(position_buckets, max_relative_positions)
    if position_buckets < 2:
        raise ValueError(f"position_buckets must be >= 2 for log buckets, got {position_buckets}")
    delta = as_positions(relative, name="relative", allow_negative=True)  # |δ| <= 2**53: exact as float64
    xp = array_namespace(delta)
    mid = position_buckets // 2
    magnitude = xp.abs(delta)
    far = xp.astype(xp.maximum(magnitude, xp.full_like(magnitude, mid)), xp.float64)  # log(0) guard: near is exact
    # both logarithms by one function (at |δ| = m − 1 their ratio is then exactly 1), in the anchor's order
    log_part = xp.ceil(xp.log(far / mid) / xp.log(xp.full_like(far, (m - 1) / mid)) * (mid - 1))
    far_bucket = xp.sign(delta) * (mid + xp.astype(log_part, xp.int64))
    return xp.where(magnitude <= mid, delta, far_bucket)


def deberta_relative_index(q_positions: Array, k_positions: Array, *, position_buckets: int,
                           max_relative_positions: int, max_position_embeddings: int | None = None) -> Array:
    r"""The row of ``K_r`` and ``Q_r`` each (query, key) pair reads, int64 ``(..., Tq, Tk)`` in ``[0, 2k)``.

    Positions are ``(T,)`` or ``(B, T)``. Without buckets (``position_buckets <= 0``; DeBERTa-v1) ``b`` is
    the identity, so the index is ``clip(p_i − p_j, −m, m − 1) + m``.

    Notes
    -----
    .. math:: \mathrm{idx}_{ij} = \operatorname{clip}\big(b(p^q_i - p^k_j) + k,\; 0,\; 2k - 1\big)
    """
    same_libraries(q_positions=q_positions, k_positions=k_positions)
    span, m = deberta_attention_span(position_buckets, max_relative_positions, max_position_embeddings)
    q_positions = as_positions(q_positions, name="q_positions")
    k_positions = as_positions(k_positions, name="k_positions", xp=array_namespace(q_positions))
    delta = q_positions[..., :, None] - k_positions[..., None, :]  # (..., Tq, Tk): query minus key
    bucket = deberta_log_buckets(delta, position_buckets, m) if position_buckets > 0 else delta
    xp = array_namespace(bucket)
    return xp.clip(bucket + span, 0, 2 * span - 1)


def deberta_position_projection(rel_embeddings: Array, weight: Array, bias: Array | None = None, *,
                                n_heads: int) -> Array:
    r"""Position keys or queries per head, ``(H, 2k, d)``: ``R W + b`` split into ``n_heads`` heads.

    ``rel_embeddings`` ``R`` is ``(2k, hidden)`` (the encoder's ``rel_embeddings``, after its LayerNorm when
    ``norm_rel_ebd`` asks for one), ``weight`` ``(hidden, H·d)`` (``x @ W`` orientation: a torch
    ``Linear.weight`` transposed), ``bias`` ``(H·d,)`` or ``None``.
    """
    same_libraries(rel_embeddings=rel_embeddings, weight=weight, bias=bias)
    table = floating_array(rel_embeddings, name="rel_embeddings")
    weight = floating_array(weight, name="weight")
    xp = array_namespace(table)
    n_heads = WIDTH.check("n_heads", n_heads)
    if table.ndim != 2 or weight.ndim != 2 or weight.shape[0] != table.shape[1] or weight.shape[1] % n_heads:
        raise ValueError(f"weight must have shape (hidden, n_heads·d) = ({table.shape[-1]}, {n_heads}·d) for "
                         f"rel_embeddings of shape {tuple(table.shape)}, got {tuple(weight.shape)}")
    projected = table @ weight  # (2k, H·d)
    if bias is not None:
        bias = floating_array(bias, name="bias")
        if tuple(bias.shape) != (weight.shape[1],):
            raise ValueError(f"bias must have shape ({weight.shape[1]},), got {tuple(bias.shape)}")
        projected = projected + bias
    heads = xp.reshape(projected, (table.shape[0], n_heads, weight.shape[1] // n_heads))  # (2k, H, d)
    return xp.moveaxis(heads, 1, 0)  # (H, 2k, d)


def _terms(q: Array, k: Array, pos_key: Array | None, pos_query: Array | None, index: Array,
           terms: tuple[str, ...], form: str) -> Array | None:
    """``c2p + p2c`` (the terms named in ``terms``), unscaled; ``None`` for no term."""
    parts = []
    if "c2p" in terms:
        parts.append(deberta_c2p_terms(q, pos_key, index, form=form))
    if "p2c" in terms:
        parts.append(deberta_p2c_terms(k, pos_query, index, form=form))
    return sum(parts[1:], parts[0]) if parts else None


def deberta_attention_logits(
    q: Array, k: Array, pos_key: Array | None, pos_query: Array | None, q_positions: Array, k_positions: Array, *,
    pos_att_type: str | Sequence[str] | None, position_buckets: int, max_relative_positions: int,
    max_position_embeddings: int | None = None, form: str = "gather",
) -> Array:
    r"""The scaled logits of a DeBERTa attention layer, ``(..., H, Tq, Tk)`` (before mask and softmax).

    ``q`` ``(..., H, Tq, d)``, ``k`` ``(..., H, Tk, d)``; ``pos_key`` and ``pos_query`` ``(H, 2k, d)``
    (:func:`deberta_position_projection`), each given exactly when its term is in ``pos_att_type``.

    Notes
    -----
    .. math::
        \mathrm{logits}_{ij} = \frac{q_i\cdot k_j + [\mathrm{c2p}]\, q_i\cdot K_r[\mathrm{idx}_{ij}]
        + [\mathrm{p2c}]\, k_j\cdot Q_r[\mathrm{idx}_{ij}]}{\sqrt{d\,(1 + |\mathrm{pos\_att\_type}|)}}
    """
    same_libraries(q=q, k=k, pos_key=pos_key, pos_query=pos_query, q_positions=q_positions, k_positions=k_positions)
    q, k = floating_array(q, name="q"), floating_array(k, name="k")
    terms = deberta_pos_att_type(pos_att_type)
    for name, table, term in (("pos_key", pos_key, "c2p"), ("pos_query", pos_query, "p2c")):
        if (table is None) == (term in terms):
            raise ValueError(f"{name} must be given exactly when pos_att_type contains {term!r} "
                             f"(pos_att_type={list(terms)})")
    if k.shape[-3] != q.shape[-3]:
        raise ValueError(f"k must have the heads of q ({q.shape[-3]}), got {k.shape[-3]}: DeBERTa has no GQA")
    xp = array_namespace(q)
    index = deberta_relative_index(q_positions, k_positions, position_buckets=position_buckets,
                                   max_relative_positions=max_relative_positions,
                                   max_position_embeddings=max_position_embeddings)
    scores = xp.matmul(q, xp.matrix_transpose(k))  # (..., H, Tq, Tk)
    extra = _terms(q, k, pos_key, pos_query, index, terms, form)
    if extra is not None:
        scores = scores + extra
    return scores * deberta_softmax_scale(q.shape[-1], terms)


def _projection(name: str, value: Any) -> tuple[Array, Array | None] | None:
    """A ``(weight, bias)`` pair (``bias`` may be ``None``), or ``None``."""
    if value is not None and (not isinstance(value, tuple | list) or len(value) != 2):
        raise TypeError(f"{name} must be a (weight, bias) pair (bias may be None), got {type(value).__name__}")
    return None if value is None else (floating_array(value[0], name=f"{name} weight"),
                                       None if value[1] is None else floating_array(value[1], name=f"{name} bias"))


class DeBERTa(Encoding):
    """DeBERTa's disentangled attention as a pipeline encoding: ``qk_terms`` adds c2p and p2c, the softmax
    scale is ``(d·(1 + n))^-1/2``, ``embed`` adds the absolute table when ``position_biased_input``.

    Each parameter is one config key of transformers' ``DebertaV2`` (and v1 ``Deberta``), by its own name —
    ``pos_att_type`` (a list, or v1's ``"c2p|p2c"``), ``position_buckets`` (absent: -1, no buckets),
    ``max_relative_positions`` (absent: -1, meaning ``max_position_embeddings``, read only then),
    ``share_att_key`` (absent: False), ``relative_attention``, ``position_biased_input`` (absent: True) —
    or one checkpoint tensor:

    * ``rel_embeddings``: ``encoder.rel_embeddings.weight`` ``(2k, hidden)``, through ``encoder.LayerNorm``
      when ``norm_rel_ebd`` contains ``layer_norm``;
    * ``key_proj``, ``query_proj``: ``attention.self.key_proj`` / ``query_proj`` (``share_att_key`` only);
    * ``pos_key_proj``: ``attention.self.pos_key_proj`` (v1: ``pos_proj``, no bias);
    * ``pos_query_proj``: ``attention.self.pos_query_proj`` (v1: ``pos_q_proj``);
    * ``position_embeddings``: ``embeddings.position_embeddings.weight`` ``(max_position_embeddings, hidden)``.

    Projections are ``(weight, bias)`` pairs with ``weight`` ``(hidden, H·d)`` (a torch ``Linear.weight``
    transposed) and ``bias`` ``(H·d,)`` or ``None``. With ``share_att_key`` the position keys and queries
    come from the layer's own ``key_proj`` and ``query_proj``; otherwise from ``pos_key_proj`` (c2p) and
    ``pos_query_proj`` (p2c). Every projection a term needs must be given, and none that no term uses.
    ``relative_attention=False`` keeps the scale ``(d·(1 + n))^-1/2`` of ``pos_att_type`` and adds no term.
    """

    name = "deberta"

    def __init__(
        self, rel_embeddings: Array | None = None, *, pos_att_type: str | Sequence[str] | None,
        position_buckets: int, max_relative_positions: int, position_biased_input: bool,
        max_position_embeddings: int | None = None, share_att_key: bool = False, relative_attention: bool = True,
        key_proj: Any = None, query_proj: Any = None, pos_key_proj: Any = None, pos_query_proj: Any = None,
        position_embeddings: Array | None = None, form: str = "gather",
    ) -> None:
        self.terms = deberta_pos_att_type(pos_att_type)
        self.relative_attention = check_bool("relative_attention", relative_attention)
        self.share_att_key = check_bool("share_att_key", share_att_key)
        self.position_biased_input = check_bool("position_biased_input", position_biased_input)
        self.form = check_choice("form", form, DEBERTA_FORMS)
        self.span, self.m = deberta_attention_span(position_buckets, max_relative_positions, max_position_embeddings)
        self.position_buckets, self.max_relative_positions = position_buckets, max_relative_positions
        self.max_position_embeddings = max_position_embeddings
        given = {"key_proj": key_proj, "query_proj": query_proj, "pos_key_proj": pos_key_proj,
                 "pos_query_proj": pos_query_proj}
        keys, queries = ("key_proj", "query_proj") if self.share_att_key else ("pos_key_proj", "pos_query_proj")
        needed = {keys: "c2p" in self.terms, queries: "p2c" in self.terms} if self.relative_attention else {}
        for name, value in given.items():
            if (value is not None) != needed.get(name, False):
                raise ValueError(f"{name} must be {'given' if needed.get(name) else 'None'} with share_att_key="
                                 f"{self.share_att_key}, relative_attention={self.relative_attention}, "
                                 f"pos_att_type={list(self.terms)}")
        self.key_proj, self.query_proj = _projection(keys, given[keys]), _projection(queries, given[queries])
        self.rel_embeddings = None
        if (rel_embeddings is not None) != self.relative_attention:
            raise ValueError(f"rel_embeddings must be given exactly when relative_attention is True "
                             f"(relative_attention={self.relative_attention})")
        if rel_embeddings is not None:
            self.rel_embeddings = floating_array(rel_embeddings, name="rel_embeddings")
            if self.rel_embeddings.ndim != 2 or self.rel_embeddings.shape[0] != 2 * self.span:
                raise ValueError(f"rel_embeddings must have shape (2k, hidden) = ({2 * self.span}, hidden), "
                                 f"got {tuple(self.rel_embeddings.shape)}")
        if (position_embeddings is not None) != self.position_biased_input:
            raise ValueError("position_embeddings must be given exactly when position_biased_input is True")
        self.position_embeddings = None if position_embeddings is None else floating_array(
            position_embeddings, name="position_embeddings")

    def embed(self, positions: Array, d_model: int, xp: Any) -> Array | None:
        if self.position_embeddings is None:
            return None
        if self.position_embeddings.shape[-1] != d_model:
            raise ValueError(f"position_embeddings has width {self.position_embeddings.shape[-1]} but the layer "
                             f"has d_model={d_model} (a model with embed_proj adds it before the projection)")
        return learned_lookup(self.position_embeddings, positions)

    def qk_terms(self, q: Array, k: Array, q_positions: Array, k_positions: Array) -> Array | None:
        if not self.relative_attention or not self.terms:
            return None
        n_heads = q.shape[-3]
        if k.shape[-3] != n_heads:
            raise ValueError(f"k must have the heads of q ({n_heads}), got {k.shape[-3]}: DeBERTa has no GQA")
        pos_key, pos_query = (None if proj is None else deberta_position_projection(
            self.rel_embeddings, *proj, n_heads=n_heads) for proj in (self.key_proj, self.query_proj))  # (H, 2k, d)
        index = deberta_relative_index(q_positions, k_positions, position_buckets=self.position_buckets,
                                       max_relative_positions=self.max_relative_positions,
                                       max_position_embeddings=self.max_position_embeddings)
        return _terms(q, k, pos_key, pos_query, index, self.terms, self.form)

    def softmax_scale(self, head_dim: int) -> float:
        return deberta_softmax_scale(head_dim, self.terms)

    def __repr__(self) -> str:
        return (f"DeBERTa(pos_att_type={list(self.terms)}, span={self.span}, position_buckets="
                f"{self.position_buckets}, max_relative_positions={self.m}, share_att_key={self.share_att_key}, "
                f"relative_attention={self.relative_attention}, position_biased_input={self.position_biased_input})")
