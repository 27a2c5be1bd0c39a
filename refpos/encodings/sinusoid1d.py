r"""1-D sinusoids of audio and time-series models, where they differ from the text sinusoid
(docs/sinusoid1d.md#the-math).

The frequencies and the two layouts are those of :mod:`refpos.encodings.sinusoidal` (``paper``:
``ω_k = base^(−2k/d)``; ``tensor2tensor``: ``ω_k = exp(−k·ln(base)/(d/2 − 1))``, Whisper's
``log_timescale_increment``; ``interleaved`` and ``concat``). What audio and time-series models add:

* the **order of a pair** — Musicgen writes ``[cos | sin]`` (``first="cos"``);
* **signed positions** — the relative tables of conformers read the distances ``L−1, …, 0, …, −(L−1)``
  (:func:`relative_positions`); ``sin`` is odd and ``cos`` even, so row ``−r`` is row ``r`` with its sines negated;
* **an amplitude** — Canary divides by ``√d``, SpeechT5 multiplies by a learned ``α``;
* **a frequency factor** — TimesFM's ``min_timescale`` multiplies every ω (its base is ``max/min``);
* **positions from a padding mask** — fairseq's ``make_positions`` (Speech2Text, SpeechT5): valid steps count
  from ``padding_idx + 1``, padded steps read the zero row ``padding_idx`` (:func:`padded_sinusoid`);
* **a standardised table** — PatchTST: ``(P − mean P)/(10·std P)`` over the whole table (:func:`standardized`).

Which model uses which is :data:`refpos.encodings.sinusoid1d_variants.SINUSOID_1D_VARIANTS`.
"""

from __future__ import annotations

from typing import Any

from refpos.backend import Array, array_namespace, get_xp
from refpos.encodings.sinusoidal import SPACINGS, sinusoidal_frequencies
from refpos.pairs import SINUSOID_LAYOUTS, place_pairs
from refpos.validation import (
    MAX_WIDTH,
    as_positions,
    check_choice,
    check_float,
    check_int,
    check_memory,
    check_size,
    element_count,
    floating_array,
)

#: which of the pair comes first: ``"sin"`` (every model but Musicgen) or ``"cos"``
FIRSTS = ("sin", "cos")
LAYOUTS = SINUSOID_LAYOUTS


def sinusoid_1d(positions: Array, dim: int, *, spacing: str, layout: str, first: str = "sin", base: float = 10000.0,
                frequency_scale: float = 1.0, amplitude: float = 1.0, xp: Any = None) -> Array:
    r"""The sinusoid of (possibly negative) integer positions: shape ``(*positions.shape, dim)``.

    Parameters
    ----------
    positions : int or int array
        Any integers: absolute positions, or the signed distances of a relative table.
    dim : int
        Even width.
    spacing : {"paper", "tensor2tensor"}
        :func:`refpos.encodings.sinusoidal.sinusoidal_frequencies`.
    layout : {"interleaved", "concat"}
    first : {"sin", "cos"}
        Which of the pair takes the pair's first channel (``"cos"``: Musicgen's ``[cos | sin]``).
    base : float
    frequency_scale : float
        Multiplies every ω (TimesFM's ``min_timescale``; 1 elsewhere).
    amplitude : float
        Multiplies the table (Canary ``1/√d``, SpeechT5's ``α``; 1 elsewhere).
    xp : namespace, optional
        Where a list of positions is created.

    Notes
    -----
    .. math::
        (u_k, v_k) = a\,(\sin p\,s\,\omega_k,\ \cos p\,s\,\omega_k) \quad (\text{first} = \sin), \qquad
        a\,(\cos p\,s\,\omega_k,\ \sin p\,s\,\omega_k) \quad (\text{first} = \cos)

    placed as pair ``k`` of ``layout``; the angle is ``p·(s·ω_k)`` in float64.

    See Also
    --------
    refpos.encodings.sinusoidal.sinusoidal : non-negative positions, first = sin, no amplitude.
    relative_positions, padded_sinusoid, standardized

    References
    ----------
    .. [1] Radford et al., "Robust Speech Recognition via Large-Scale Weak Supervision" (Whisper), 2022;
       transformers ``models/whisper/modeling_whisper.py``, ``sinusoids``.
    .. [2] transformers ``models/musicgen/modeling_musicgen.py``, ``MusicgenSinusoidalPositionalEmbedding``;
       ``models/canary/modeling_canary.py``, ``CanaryPositionalEmbedding``.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(sinusoid_1d([1, -1], 4, spacing="paper", layout="interleaved"), 4).tolist()
    [[0.8415, 0.5403, 0.01, 1.0], [-0.8415, 0.5403, -0.01, 1.0]]
    >>> sinusoid_1d([0], 4, spacing="paper", layout="concat", first="cos").tolist()
    [[1.0, 1.0, 0.0, 0.0]]
    """
    dim = check_size("dim", dim, maximum=MAX_WIDTH, bytes_each=8, what="float64 per position")
    if dim % 2:
        raise ValueError(f"dim must be even (dim/2 sin-cos pairs), got {dim}")
    check_choice("spacing", spacing, SPACINGS)
    check_choice("layout", layout, LAYOUTS)
    check_choice("first", first, FIRSTS)
    frequency_scale = check_float("frequency_scale", frequency_scale, positive=True)
    amplitude = check_float("amplitude", amplitude)
    count = element_count(positions)
    check_memory("the sinusoid table and its angles, float64", 2 * count * dim * 8, f"{count} positions of dim {dim}")
    positions = as_positions(positions, xp=xp, allow_negative=True)
    ns = array_namespace(positions)
    omega = frequency_scale * sinusoidal_frequencies(dim, base=base, spacing=spacing, xp=ns)  # (d/2,)
    angles = ns.astype(positions, ns.float64)[..., None] * omega  # (..., d/2)
    sin, cos = amplitude * ns.sin(angles), amplitude * ns.cos(angles)
    return place_pairs(sin, cos, layout) if first == "sin" else place_pairs(cos, sin, layout)


def relative_positions(left: int, right: int, *, xp: Any = None) -> Array:
    r"""The signed distances of a relative table, from ``left`` down to ``−right``: shape ``(left + right + 1,)``.

    ESPnet's conformers (Wav2Vec2-Conformer, Parakeet, FastSpeech2-Conformer, …) use ``left = right = L − 1``
    for ``L`` keys; Gemma 3n's audio encoder ``left = context_left − 1``, ``right = context_right``; Gemma 4's
    ``left = context_size // 2``, ``right = 0``.

    Examples
    --------
    >>> relative_positions(2, 2).tolist()
    [2, 1, 0, -1, -2]
    """
    xp = get_xp(xp)
    left = check_int("left", left, minimum=0, maximum=2**31)
    right = check_int("right", right, minimum=0, maximum=2**31)
    return xp.arange(left, -right - 1, -1, dtype=xp.int64)


def padded_positions(mask: Array, padding_idx: int, *, past: int = 0) -> Array:
    r"""fairseq's ``make_positions`` from a step mask ``(..., T)`` (1 = a real step): int64 of the mask's shape.

    Notes
    -----
    .. math:: p_t = \text{padding\_idx} + m_t\,\Bigl(\text{past} + \sum_{t' \le t} m_{t'}\Bigr)

    so real steps count ``padding_idx + 1, padding_idx + 2, …`` (skipping padded steps, wherever they are) and
    padded steps read ``padding_idx``. Speech2Text's encoder builds the mask from the attention mask.
    """
    xp = array_namespace(mask)
    if not (xp.isdtype(mask.dtype, "bool") or xp.isdtype(mask.dtype, "integral")) or mask.ndim < 1:
        raise TypeError(f"mask must be a bool or 0/1 integer array (..., T), got dtype {mask.dtype}")
    if not xp.isdtype(mask.dtype, "bool") and mask.size and bool(xp.any((mask != 0) & (mask != 1))):
        raise ValueError("mask must hold only 0 and 1 (1: a real step)")
    padding_idx = check_int("padding_idx", padding_idx, minimum=0, maximum=2**31)
    past = check_int("past", past, minimum=0, maximum=2**31)
    m = xp.astype(mask, xp.int64)
    return padding_idx + (xp.cumulative_sum(m, axis=-1) + past) * m


def padded_sinusoid(mask: Array, dim: int, padding_idx: int, *, past: int = 0, spacing: str = "tensor2tensor",
                    layout: str = "concat") -> Array:
    r"""The fairseq table read at :func:`padded_positions`, its row ``padding_idx`` zero: ``(..., T, dim)``.

    The defaults are the only form transformers uses (Speech2Text and SpeechT5: ``tensor2tensor`` spacing,
    ``concat`` layout, sines first).

    References
    ----------
    .. [1] transformers ``models/speech_to_text/modeling_speech_to_text.py``,
       ``Speech2TextSinusoidalPositionalEmbedding`` (``get_embedding``: ``emb[padding_idx, :] = 0``).
    """
    positions = padded_positions(mask, padding_idx, past=past)  # (..., T)
    xp = array_namespace(positions)
    table = sinusoid_1d(positions, dim, spacing=spacing, layout=layout)  # (..., T, d)
    return xp.where((positions == padding_idx)[..., None], xp.zeros_like(table), table)


def standardized(table: Array) -> Array:
    r"""PatchTST's standardised table: ``(P − mean P) / (10·std P)`` over every entry, ``std`` unbiased.

    Notes
    -----
    .. math:: \bar P = \frac{1}{N}\sum P, \qquad \sigma = \sqrt{\frac{1}{N - 1}\sum (P - \bar P)^2},
        \qquad P' = \frac{P - \bar P}{10\,\sigma}

    ``N`` counts every entry of the table (rows times channels), as ``torch.Tensor.std()`` does.

    References
    ----------
    .. [1] transformers ``models/patchtst/modeling_patchtst.py``, ``PatchTSTPositionalEncoding._init_pe``.
    """
    table = floating_array(table, name="table")
    xp = array_namespace(table)
    if table.size < 2:
        raise ValueError(f"table must hold at least 2 entries to standardise, got {table.size}")
    centred = table - xp.mean(table)
    sigma = xp.sqrt(xp.sum(centred * centred) / (table.size - 1))
    if not float(sigma) > 0.0:
        raise ValueError("table is constant: its standard deviation is 0")
    return centred / (10.0 * sigma)
