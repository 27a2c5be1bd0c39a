r"""Which channels form a pair: the one statement of every pair layout in refpos.

A rotation (RoPE) and a sinusoid both treat a span of ``w = 2m`` channels as ``m`` pairs
``(u_j, v_j)``. There are two ways to place pair ``j`` in the span, the two **pairings**:

=================  =====================  ==========================================================
pairing            channels of pair ``j``  used by
=================  =====================  ==========================================================
``split``          ``(j, j + m)``          RoPE ``half`` (NeoX, HF Llama), the sinusoid's ``concat``
``interleaved``    ``(2j, 2j + 1)``        RoPE ``interleaved`` (GPT-J, Meta), the sinusoid's
                                           ``interleaved``
=================  =====================  ==========================================================

A **layout** says which pairing a pair is read from and which it is written to (:data:`LAYOUTS`,
data, not branches): RoPE ``half`` and ``interleaved`` read and write the same pairing,
``deinterleaved`` (HF DeepSeek-V3) reads interleaved pairs and writes them split; a sinusoid writes
``(sin, cos)`` of frequency ``j`` as pair ``j`` (``interleaved``: ``sin`` on even channels; ``concat``:
``[sin … | cos …]``).

A **placement** says where the span sits in a head of ``D`` channels (:func:`span_bounds`): ``first``
``[0, w)``, ``last`` ``[D − w, D)`` (DeepSeek MLA), ``proportional`` all of ``[0, D)`` (Gemma 4: the
table spans the head, frequencies past the rotated pairs are zero).

Everything else derives from :data:`LAYOUTS` and :func:`pairing_slices`: the slices the rotation reads
and writes (:func:`pair_slices`), their channel lists (:func:`pair_channels`), per-pair values placed in
a layout's order (:func:`place_pairs`) and read back (:func:`split_pairs`), and the channel permutation
between two layouts (:func:`layout_permutation`).

Examples
--------
>>> pair_channels("half", 4)
([0, 1], [2, 3], [0, 1], [2, 3])
>>> pair_channels("deinterleaved", 4, start=2)
([2, 4], [3, 5], [2, 3], [4, 5])
>>> layout_permutation(8, "interleaved", "half").tolist()
[0, 2, 4, 6, 1, 3, 5, 7]
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.validation import check_choice, check_int

#: the two ways to place pair j in a span of 2m channels
PAIRINGS = ("split", "interleaved")

#: layout -> (pairing pairs are read from, pairing they are written to); RoPE and sinusoid layouts
LAYOUTS = MappingProxyType({
    "half": ("split", "split"),
    "interleaved": ("interleaved", "interleaved"),
    "deinterleaved": ("interleaved", "split"),
    "concat": ("split", "split"),
})
#: the RoPE layouts (the order is the one :class:`refpos.RopeConfig` documents)
ROPE_LAYOUTS = ("half", "interleaved", "deinterleaved")
#: the RoPE layouts that write pairs where they read them (the two conventions checkpoints come in; the
#: strategies draw these by default)
SAME_PAIRING_LAYOUTS = tuple(layout for layout in ROPE_LAYOUTS if LAYOUTS[layout][0] == LAYOUTS[layout][1])
#: the sinusoid layouts: where sin and cos of frequency j go
SINUSOID_LAYOUTS = ("interleaved", "concat")
#: where the rotated channels of a partial rotary sit in a head: its start or its end
PARTIAL_PLACEMENTS = ("first", "last")
#: where the rotated span sits in a head: a partial placement, or the whole head (a table that spans it)
PLACEMENTS = (*PARTIAL_PLACEMENTS, "proportional")


def _check_width(width: int) -> int:
    width = check_int("width", width, minimum=0)
    if width % 2:
        raise ValueError(f"width must be even (pairs of channels), got {width}")
    return width


def pairing_slices(pairing: str, width: int, start: int = 0) -> tuple[slice, slice]:
    """Slices ``(u, v)`` of the span ``[start, start + width)``: ``u[j], v[j]`` are pair ``j``'s channels.

    ``split``: ``(j, j + m)``; ``interleaved``: ``(2j, 2j + 1)``, ``m = width / 2``.
    """
    check_choice("pairing", pairing, PAIRINGS)
    width = _check_width(width)
    start = check_int("start", start, minimum=0)
    m, stop = width // 2, start + width
    if pairing == "split":
        return slice(start, start + m), slice(start + m, stop)
    return slice(start, stop, 2), slice(start + 1, stop, 2)


def pair_slices(layout: str, width: int, start: int = 0) -> tuple[slice, slice, slice, slice]:
    """``(u_in, v_in, u_out, v_out)``: where ``layout`` reads pair ``j`` and where it writes it.

    >>> pair_slices("deinterleaved", 4)
    (slice(0, 4, 2), slice(1, 4, 2), slice(0, 2, None), slice(2, 4, None))
    """
    read, write = LAYOUTS[check_choice("layout", layout, tuple(LAYOUTS))]
    return (*pairing_slices(read, width, start), *pairing_slices(write, width, start))


def pair_channels(layout: str, width: int, start: int = 0) -> tuple[list[int], list[int], list[int], list[int]]:
    """:func:`pair_slices` as channel lists: pair ``j`` reads ``u_in[j], v_in[j]``, writes ``u_out[j], v_out[j]``."""
    stop = start + _check_width(width)
    u_in, v_in, u_out, v_out = (list(range(stop))[s] for s in pair_slices(layout, width, start))
    return u_in, v_in, u_out, v_out


def span_bounds(head_dim: int, width: int, placement: str) -> tuple[int, int]:
    """``[start, stop)`` of a span of ``width`` channels in a head of ``head_dim`` by ``placement``.

    ``proportional`` spans a full-width table, so ``width`` must be ``head_dim`` there.
    """
    check_choice("placement", placement, PLACEMENTS)
    head_dim = check_int("head_dim", head_dim, minimum=0)
    width = _check_width(width)
    if width > head_dim or (placement == "proportional" and width != head_dim):
        raise ValueError(f"a {placement!r} span of {width} channels does not fit a head of {head_dim}")
    return (head_dim - width, head_dim) if placement == "last" else (0, width)


def place_pairs(first: Array, second: Array, layout: str) -> Array:
    """Per-pair values ``(..., m)`` written where ``layout`` writes pair ``j``'s ``u`` and ``v``: ``(..., 2m)``.

    ``split``: ``[f_0 … f_{m-1}, s_0 … s_{m-1}]``; ``interleaved``: ``[f_0, s_0, f_1, s_1, …]``.
    """
    _, written = LAYOUTS[check_choice("layout", layout, tuple(LAYOUTS))]
    xp = array_namespace(first, second)
    shape = xp.broadcast_shapes(first.shape, second.shape)  # (..., m)
    out = xp.empty((*shape[:-1], 2 * shape[-1]), dtype=xp.result_type(first, second))  # (..., 2m)
    u, v = pairing_slices(written, 2 * shape[-1])
    out[..., u] = first
    out[..., v] = second
    return out


def split_pairs(span: Array, layout: str, *, side: str = "read") -> tuple[Array, Array]:
    """``(u, v)`` ``(..., m)`` of a span ``(..., 2m)``: pair ``j`` as ``layout`` reads (or writes) it."""
    check_choice("side", side, ("read", "written"))
    read, written = LAYOUTS[check_choice("layout", layout, tuple(LAYOUTS))]
    u, v = pairing_slices(read if side == "read" else written, span.shape[-1])
    return span[..., u], span[..., v]


def layout_permutation(width: int, source: str, target: str, *, xp: Any = None) -> Array:
    """Index ``perm`` (int64, ``(width,)``) with ``x_target = x_source[..., perm]``: the same pairs moved.

    Pair ``j``'s ``u`` and ``v`` go from where ``source`` writes them to where ``target`` writes them.
    ``interleaved`` -> ``half`` (or ``concat``) is ``perm[c·m + j] = 2j + c``: Meta -> HF q/k rows.
    """
    width = _check_width(width)
    if width == 0:
        raise ValueError("width must be >= 2 for a permutation of pairs")
    _, _, src_u, src_v = pair_channels(source, width)
    _, _, dst_u, dst_v = pair_channels(target, width)
    perm = [0] * width
    for dst, src in zip(dst_u + dst_v, src_u + src_v, strict=True):
        perm[dst] = src
    xp = get_xp(xp)
    return xp.asarray(perm, dtype=xp.int64)
