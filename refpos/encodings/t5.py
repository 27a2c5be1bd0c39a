r"""T5 relative position bias (Raffel et al. 2020, §2.1).

See docs/relative.md#t5 and docs/diagnosis.md. Logits are ``q·kᵀ + bias[h, bucket(rel)]`` with
**no** ``1/√d`` scale (HF ``T5Attention`` uses scaling 1.0: the factor lives in the initialisation of
``W_q``). ``rel = memory − query = k_pos − q_pos``: negative = the key lies in the past.

Bucket layout (32 buckets, max_distance 128). Causal: distances 0–15 exact, 16 log-spaced buckets up
to 128, every future key in bucket 0. Bidirectional: the past (rel ≤ 0) uses buckets 0–15 (0–7 exact),
the future buckets 16–31 (bucket 16 is never produced).
"""

from __future__ import annotations

import math

from refpos.backend import Array, array_namespace
from refpos.encoding import Encoding
from refpos.encodings.distance import relative_positions
from refpos.validation import (
    MAX_EXACT_POSITION,
    MAX_WIDTH,
    as_positions,
    check_bool,
    check_int,
    floating_array,
    same_libraries,
)


def check_bucket_args(bidirectional: object, num_buckets: object, max_distance: object) -> tuple[int, int]:
    """Validate and return ``(buckets per direction, max_exact)``."""
    check_bool("bidirectional", bidirectional)
    num_buckets = check_int("num_buckets", num_buckets, minimum=4 if bidirectional else 2, maximum=MAX_WIDTH)
    if bidirectional and num_buckets % 2:
        raise ValueError(f"num_buckets must be even when bidirectional (half per direction), got {num_buckets}")
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    max_distance = check_int("max_distance", max_distance, minimum=1, maximum=MAX_EXACT_POSITION)
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must exceed the exact range max_exact={max_exact} "
            f"(num_buckets//{4 if bidirectional else 2}), got {max_distance}"
        )
    return per_direction, max_exact


def t5_bucket(
    relative_position: Array,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Array:
    r"""T5's bucket of each relative position ``rel = k_pos − q_pos`` (int64, same shape).

    Parameters
    ----------
    relative_position : int or int array
        Memory minus query; negative = the key lies in the past.
    bidirectional : bool
        Encoder self-attention (True); decoder self-attention (False).
    num_buckets : int
        Even and ≥ 4 when bidirectional, ≥ 2 otherwise.
    max_distance : int
        Distances from here on share the last bucket; must exceed ``max_exact``.

    Notes
    -----
    With ``nb`` buckets per direction (``num_buckets/2`` bidirectional, else ``num_buckets``),
    ``e = nb // 2`` exact buckets, and ``n`` the distance (``|rel|`` bidirectional,
    ``max(−rel, 0)`` causal):

    .. math::
        b(n) = \begin{cases} n & n < e \\
        \min\!\left(e + \operatorname{trunc}\!\left(\frac{\ln(n/e)}{\ln(\text{max\_distance}/e)}\,
        (nb - e)\right),\; nb - 1\right) & n \ge e \end{cases}

    plus ``nb`` for future keys (``rel > 0``) when bidirectional. ``trunc`` is torch's ``.to(long)``.

    Examples
    --------
    >>> t5_bucket([-20, -1, 0, 1, 20]).tolist()
    [10, 1, 0, 17, 26]
    >>> t5_bucket([-20, 0, 5], bidirectional=False).tolist()
    [17, 0, 0]
    """
    per_direction, max_exact = check_bucket_args(bidirectional, num_buckets, max_distance)
    rel = as_positions(relative_position, name="relative_position", allow_negative=True, max_abs=None)
    xp = array_namespace(rel)
    # distances from max_distance on share the last bucket (b(n) >= nb - 1 there), so clamping |rel| to
    # max_distance changes no bucket and keeps abs(-2**63) from overflowing int64
    rel = xp.minimum(xp.maximum(rel, xp.full_like(rel, -max_distance)), xp.full_like(rel, max_distance))
    if bidirectional:
        offset = xp.astype(rel > 0, xp.int64) * per_direction  # future keys use the upper half
        n = xp.abs(rel)
    else:
        offset = xp.zeros_like(rel)
        n = -xp.minimum(rel, xp.zeros_like(rel))  # future keys collapse to n = 0
    n_float = xp.astype(xp.maximum(n, xp.ones_like(n)), xp.float64)  # log(0) guard: n < e is exact anyway
    log_part = xp.log(n_float / max_exact) / math.log(max_distance / max_exact) * (per_direction - max_exact)
    large = max_exact + xp.astype(xp.trunc(log_part), xp.int64)
    large = xp.minimum(large, xp.full_like(large, per_direction - 1))
    return offset + xp.where(n < max_exact, n, large)


def t5_bias(table: Array, q_positions: Array, k_positions: Array, *, bidirectional: bool = True,
            max_distance: int = 128) -> Array:
    r"""The T5 bias ``table[bucket(k_pos − q_pos)]``, shape ``(..., H, Tq, Tk)``.

    ``table`` is the ``(num_buckets, H)`` embedding (HF ``relative_attention_bias.weight``); positions are
    ``(T,)`` or ``(B, T)``. With a cache of ``P`` tokens the queries sit at ``P + arange(Tq)``.

    Notes
    -----
    .. math:: B_{hij} = \text{table}\left[b(p^k_j - p^q_i),\, h\right]
    """
    same_libraries(table=table, q_positions=q_positions, k_positions=k_positions)
    table = floating_array(table, name="table")
    xp = array_namespace(table)
    if table.ndim != 2:
        raise ValueError(f"table must be a matrix (num_buckets, n_heads), got shape {tuple(table.shape)}")
    rel = relative_positions(as_positions(q_positions, name="q_positions", xp=xp),
                             as_positions(k_positions, name="k_positions", xp=xp))  # (..., Tq, Tk)
    buckets = t5_bucket(rel, bidirectional=bidirectional, num_buckets=table.shape[0], max_distance=max_distance)
    rows = xp.take(table, xp.reshape(buckets, (-1,)), axis=0)  # (N, H)
    rows = xp.reshape(rows, (*buckets.shape, table.shape[1]))  # (..., Tq, Tk, H)
    return xp.moveaxis(rows, -1, -3)  # (..., H, Tq, Tk)


class T5(Encoding):
    """T5's bucketed relative bias; the logits are **not** scaled (``softmax_scale`` is 1).

    ``bidirectional=False`` is decoder self-attention (use it with ``causal=True``).
    """

    name = "t5"

    def __init__(self, table: Array, *, bidirectional: bool = True, max_distance: int = 128) -> None:
        self.table = floating_array(table, name="table")
        if self.table.ndim != 2:
            raise ValueError(f"table must be a matrix (num_buckets, n_heads), got shape {tuple(self.table.shape)}")
        check_bucket_args(bidirectional, self.table.shape[0], max_distance)
        self.bidirectional = bidirectional
        self.max_distance = max_distance

    def bias(self, q_positions: Array, k_positions: Array, n_heads: int) -> Array:
        if self.table.shape[1] != n_heads:
            raise ValueError(f"table has {self.table.shape[1]} heads but the layer has n_heads={n_heads}")
        return t5_bias(self.table, q_positions, k_positions, bidirectional=self.bidirectional,
                       max_distance=self.max_distance)

    def softmax_scale(self, head_dim: int) -> float:
        return 1.0

    def __repr__(self) -> str:
        return (f"T5(table of shape {tuple(self.table.shape)}, bidirectional={self.bidirectional}, "
                f"max_distance={self.max_distance})")
