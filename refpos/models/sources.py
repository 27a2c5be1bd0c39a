r"""Where a layer's positions come from: the inputs a model's forward is given, and what each layer reads of them.

A transformers forward is given up to four things about where its tokens are, and builds the others when they
are missing: the **position ids** (``position_ids``; built from the token's slot when none are passed), the
**slot** of each token in the sequence (``cache_position``: its index plus the tokens already cached), the
**attention mask** (0/1 over every key, padding 0) and the **input ids**. A layer's code reads one of them, or
something built from one of them (:data:`INPUTS`): RoPE turns by the position ids; Llama 4's NoPE layers scale
the query by the token's slot (``arange(T) + past_seen_tokens``), whatever the ids say; Falcon's and BLOOM's
ALiBi multiply each key's slope by the running count of the mask's ones; MPT's by the key's index; T5 buckets
the query's slot against the key's index; OPT's learned table is read at the mask's running count and RoBERTa's
at the input ids' (unless position ids are passed, which RoBERTa reads as the table's rows: ``row_ids``);
PaliGemma, given no ids, turns each token by its slot plus one (``slot_plus_one``: its positions are 1-indexed),
which is all ColPali, whose forward takes no ids, ever does.
These differ as soon as the ids are not the slots (packed sequences, gapped or offset ids), a batch is left-padded,
or a cache holds earlier tokens.

Every layer record says what it reads (``record.reads``: use → *source*, the inputs it reads in order of
precedence, as the model's code falls back from one to the next), and its methods take the inputs by name.
A **source** is a tuple of :data:`INPUTS` keys; the first one the call gives is read:

=====================  ================================================  ====================================
use                    what it positions                                 e.g.
=====================  ================================================  ====================================
``rotation``           the angle of the query's and key's rotation       RoPE: ``("position_ids",
                                                                         "cache_position")``; ColPali's
                                                                         PaliGemma: ``("slot_plus_one",)``
``scale``              the query's position-dependent scale              Llama 4: ``("cache_position",)``
``query``, ``key``     the query's and the key's position in a bias      T5: ``("cache_position",)``,
                                                                         ``("key_index",)``
``rows``               the table row (or sinusoid) added to the input    OPT: ``("position_ids",
                                                                         "mask_count")``
=====================  ================================================  ====================================

**Nothing stands in for another input.** A call that gives none of a source's inputs is refused, naming the
parameters the layer reads — position ids are never used as slots, nor as the mask's count — except a call that
gives no input at all: that is a fresh sequence of its tokens (no cache, no padding, ids = slots = 0 … T−1), and
every input is what transformers builds for it. The slot is also known from the attention mask, whose length
counts the cached tokens: the call's tokens are the last ``T`` of its ``T_k`` keys.

Examples
--------
>>> given = Given.of(positions=[0, 1, 2, 3, 4, 32767])
>>> given.read(("position_ids",), "query").tolist()
[0, 1, 2, 3, 4, 32767]
>>> given.read(("cache_position",), "query", who="layer 3")
Traceback (most recent call last):
...
ValueError: layer 3 reads the token's slot in the sequence (cache_position=); the call gives positions= only: ...
>>> Given.of(positions=[0, 1, 2, 3, 4, 32767], attention_mask=[1] * 6).read(("cache_position",), "query").tolist()
[0, 1, 2, 3, 4, 5]
>>> Given.of(attention_mask=[0, 0, 1, 1, 1]).read(("mask_cumsum",), "key").tolist()
[0, 0, 0, 1, 2]
>>> Given.of(attention_mask=[0, 0, 1, 1, 1]).read(("mask_count",), "key").tolist()  # OPT's: padding at -1
[-1, -1, 0, 1, 2]
>>> Given.of(attention_mask=[0, 1, 0, 1, 1]).read(("mask_cumsum_minus_one",), "key").tolist()  # π0's prefix
[-1, 0, 0, 1, 2]
>>> Given.of(cache_position=[3, 4]).read(("position_ids", "slot_plus_one"), "query").tolist()
[4, 5]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.validation import as_positions

#: the inputs a layer may read (a record's ``reads`` names them; :data:`PARAMETERS` says which argument gives each)
INPUTS = {
    "position_ids": "the position ids passed to the model (or built from the sequence when none are passed)",
    "decoder_position_ids": "the decoder's position ids in an encoder–decoder model (decoder_position_ids; the "
                            "position ids the model is given are the encoder's)",
    "block_position_ids": "GLM's second position axis: 0 over the context, 1, 2, … over the span generated after it",
    "cache_position": "the token's slot in the sequence (its index, plus the tokens already cached)",
    "slot_plus_one": "the token's slot plus one: 1-indexed positions (PaliGemma builds its ids so when none are "
                     "passed)",
    "mask_cumsum": "the running count of the attention mask's ones before each token, 0 at padding: (Σm − 1)·m",
    "mask_count": "the running count of the attention mask's ones before each token, −1 at padding: Σm·m − 1 "
                  "(OPT's ids)",
    "mask_cumsum_minus_one": "the running count of the attention mask's ones less one, padding counted alike: Σm − 1 "
                             "(π0's and π0.5's prefix ids: −1 at left padding, the count so far at a hole)",
    "input_ids_cumsum": "the running count of the non-padding token ids (RoBERTa's positions)",
    "input_ids_cumsum_plus_cache": "the running count of the non-padding token ids, the cached tokens' number then "
                                   "added to every token, padding included (FSMT's positions: after a cache, a "
                                   "padding token is past the padding row)",
    "row_ids": "the position ids passed, read as the table's rows: the model counts the ids it builds from "
               "padding_idx + 1 (RoBERTa's, ESM's, Kosmos-2's), so an id passed is the row itself (position = id − "
               "padding_idx − 1)",
    "key_index": "the key's index in the sequence, whatever the position ids say",
    "image_grid": "the patch grid of each image (rows and columns of patches)",
    "video_grid": "the patch grid of each video (frames, rows and columns)",
    "window": "the token's place inside its attention window",
    "frames": "the audio or feature frames, in order",
    "points": "the coordinates of the points or boxes given as prompts",
    "pixel_mask": "the mask of valid pixels (padding excluded)",
    "patch_indices": "the row and column index each patch carries (Pix2Struct's first two values of a flattened "
                     "patch, Gemma 4's (x, y) position ids)",
    "aspect_ratio_ids": "the aspect-ratio id of each tiled image: which layout of tiles it was cut into",
    "bbox": "each token's bounding box (x0, y0, x1, y1) on the page, in the layout model's integer coordinates",
}
#: what a layer's positions serve (the keys of a record's ``reads``)
USES = {
    "rotation": "the angle of the query's and key's rotation",
    "block": "the angle of a two-axis rotation's second half (GLM's block positions)",
    "scale": "the query's position-dependent scale",
    "query": "the query's position in a bias",
    "key": "the key's position in a bias",
    "rows": "the table row (or sinusoid) added to the input",
}
#: input -> the argument of a record's methods and of refpos.self_attention that gives it (None: derived from the
#: number of keys)
PARAMETERS = {"position_ids": "positions", "decoder_position_ids": "positions", "cache_position": "cache_position",
              "slot_plus_one": "cache_position", "mask_cumsum": "attention_mask", "mask_count": "attention_mask",
              "mask_cumsum_minus_one": "attention_mask",
              "input_ids_cumsum": "input_ids", "input_ids_cumsum_plus_cache": "input_ids", "row_ids": "positions",
              "key_index": None}
#: the inputs counted off the input ids (:func:`counted_ids`)
COUNTS = ("input_ids_cumsum", "input_ids_cumsum_plus_cache")
#: the source of a plain :class:`refpos.Encoding` (one not built from a layer record): the positions passed
PLAIN = ("position_ids",)

Source = tuple[str, ...]
#: what a relative bias of the query's slot against the key's index reads (T5's ``compute_bias``:
#: ``arange(query_length) + past_seen_tokens`` against ``arange(key_length)``; DeBERTa's
#: ``build_relative_position``: ``arange`` of the query and of the key)
SLOT_AGAINST_INDEX: tuple[tuple[str, Source], ...] = (("query", ("cache_position",)), ("key", ("key_index",)))


#: the inputs computed from the token's slot or from the attention mask alone (:func:`derived`)
DERIVED = ("cache_position", "mask_cumsum", "mask_count", "mask_cumsum_minus_one", "key_index", "slot_plus_one")


def derived(name: str, slots: np.ndarray | None, attention_mask: np.ndarray | None) -> np.ndarray:
    r"""The positions input ``name`` of :data:`DERIVED` gives, from the tokens' slots ``s`` or the attention mask
    ``m`` (0/1, last axis the keys):

    .. math::

        \text{cache\_position} = \text{key\_index} = s, \qquad \text{slot\_plus\_one} = s + 1,

        \text{mask\_cumsum} = (c - 1)\,m, \qquad \text{mask\_count} = c\,m - 1, \qquad
        \text{mask\_cumsum\_minus\_one} = c - 1, \qquad c_j = \sum_{i \le j} m_i.

    The three counts agree on an unpadded sequence and differ at a masked token: BLOOM's reads 0 there, OPT's −1,
    π0's the count so far less one. The one formula of each, for :meth:`Given.read` and for the survey's probes.

    See Also
    --------
    Given.read : the positions a layer reads off one call's inputs, through this formula.

    References
    ----------
    docs/families.md, "Where positions come from": each input, and the models that read it.

    Examples
    --------
    >>> derived("mask_count", None, np.array([0, 1, 0, 1])).tolist()
    [-1, 0, -1, 1]
    >>> derived("mask_cumsum_minus_one", None, np.array([0, 1, 0, 1])).tolist()
    [-1, 0, 0, 1]
    """
    if name in ("cache_position", "key_index", "slot_plus_one"):
        if slots is None:
            raise ValueError(f"{name} reads the tokens' slots; none given")
        return slots + (1 if name == "slot_plus_one" else 0)
    if name not in DERIVED:
        raise ValueError(f"name must be one of {DERIVED}, got {name!r}")
    if attention_mask is None:
        raise ValueError(f"{name} reads the attention mask; none given")
    mask = attention_mask
    count = np.cumsum(mask, axis=-1)
    if name == "mask_cumsum":
        return (count - 1) * mask
    if name == "mask_count":
        return count * mask - 1
    return count - 1


def counted_ids(input_ids: np.ndarray, padding_idx: int, past: int = 0, name: str = "input_ids_cumsum") -> np.ndarray:
    r"""The positions input ``name`` of :data:`COUNTS` gives a call's tokens: each non-padding token counted from 0
    after the ``past`` tokens already cached. ``input_ids_cumsum`` puts a padding token at −1 (so that, plus the
    table's offset ``padding_idx + 1``, it reads the padding row); ``input_ids_cumsum_plus_cache`` (FSMT's) adds
    ``past`` to every token, a padding token too:

    .. math::  \text{input\_ids\_cumsum}: \; p_j = \Big(\textstyle\sum_{i \le j} k_i + \text{past}\Big)\,k_j
               - 1, \qquad \text{plus\_cache}: \; p_j = \Big(\textstyle\sum_{i \le j} k_i\Big)\,k_j - 1
               + \text{past}, \qquad k_i = [\text{id}_i \ne \text{padding\_idx}].

    They agree wherever nothing is cached or no token is padding. The one formula of each, for
    :meth:`Given.read` and for the survey's probes.

    See Also
    --------
    derived : the inputs counted from the slots or from the attention mask.

    References
    ----------
    docs/families.md, "Where positions come from": each input, and the models that read it.

    Examples
    --------
    >>> counted_ids(np.array([1, 5, 7, 1, 9]), padding_idx=1).tolist()
    [-1, 0, 1, -1, 2]
    >>> counted_ids(np.array([7, 1]), padding_idx=1, past=4).tolist()
    [4, -1]
    >>> counted_ids(np.array([7, 1]), padding_idx=1, past=4, name="input_ids_cumsum_plus_cache").tolist()
    [4, 3]
    """
    if name not in COUNTS:
        raise ValueError(f"name must be one of {COUNTS}, got {name!r}")
    kept = (np.asarray(input_ids) != padding_idx).astype(np.int64)
    if name == "input_ids_cumsum_plus_cache":
        return np.cumsum(kept, axis=-1) * kept - 1 + past
    return (np.cumsum(kept, axis=-1) + past) * kept - 1


def check_reads(where: str, reads: Mapping[str, Source]) -> dict[str, Source]:
    """``reads`` as a dict of use → source, each use of :data:`USES` and each input of :data:`INPUTS`."""
    out = {}
    for use, source in reads.items():
        if use not in USES or not source or any(name not in INPUTS for name in source):
            raise ValueError(f"{where}: reads maps uses {tuple(USES)} to inputs of {tuple(INPUTS)}, got "
                             f"{use!r}: {source!r}")
        out[use] = tuple(source)
    return out


def shown(source: Source) -> str:
    """A source as ``refpos positions`` prints it: ``position_ids (else cache_position)``."""
    return source[0] + "".join(f" (else {name})" for name in source[1:])


def _ints(name: str, value: Any, ndims: tuple[int, ...]) -> np.ndarray:
    arr = np.asarray(to_numpy(as_positions(to_numpy(value) if not isinstance(value, list) else value, name=name,
                                           xp=np)), dtype=np.int64)
    if arr.ndim not in ndims:
        raise ValueError(f"{name} must have {' or '.join(f'{n} axes' for n in ndims)}, got shape {arr.shape}")
    return arr


@dataclass(frozen=True)
class Given:
    """The inputs of one call (module docstring), checked, and the token counts they imply.

    ``positions`` ``(T,)`` or ``(B, T)`` (or M-RoPE's ``(3, T)``, ``(3, B, T)``); ``cache_position`` ``(T,)``;
    ``attention_mask`` ``(T_k,)`` or ``(B, T_k)`` of 0/1 over every key (the cached ones first); ``input_ids``
    ``(T,)`` or ``(B, T)`` with ``padding_idx`` the padding token. ``length``: the call's tokens ``T``; ``keys``:
    ``T_k`` (the attention mask's length, else the last slot + 1, else ``T``).
    """

    positions: Any = None
    cache_position: np.ndarray | None = None
    attention_mask: np.ndarray | None = None
    input_ids: np.ndarray | None = None
    length: int = 0
    keys: int = 0

    @classmethod
    def of(cls, *, positions: Any = None, cache_position: Any = None, attention_mask: Any = None,
           input_ids: Any = None, length: int | None = None) -> Given:
        """Check the inputs of a call (``length``: the token count when the caller knows it, as the pipeline
        does from its input) and derive the counts."""
        if isinstance(positions, (list, tuple)):
            positions = _ints("positions", positions, (1, 2, 3))
        elif isinstance(positions, np.ndarray):
            _ints("positions", positions, (1, 2, 3))  # checked; the caller's array is kept (its namespace)
        slots = None if cache_position is None else _ints("cache_position", cache_position, (1,))
        mask = None if attention_mask is None else _mask(attention_mask)
        ids = None if input_ids is None else _ints("input_ids", input_ids, (1, 2))
        lengths = {name: int(np.shape(to_numpy(value))[-1]) for name, value in
                   (("positions", positions), ("cache_position", slots), ("input_ids", ids)) if value is not None}
        if length is not None:
            lengths = {"the input": length, **lengths}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"the inputs disagree on the number of tokens: {lengths}")
        t = next(iter(lengths.values()), None)
        if mask is not None:
            t = mask.shape[-1] if t is None else t
            if mask.shape[-1] < t:
                raise ValueError(f"attention_mask has {mask.shape[-1]} keys, fewer than the call's {t} tokens")
            if slots is not None and slots.size and int(slots[-1]) + 1 != mask.shape[-1]:
                raise ValueError(f"attention_mask covers {mask.shape[-1]} keys but cache_position ends at slot "
                                 f"{int(slots[-1])}: the mask spans every slot up to the last token's")
        if t is None:
            raise ValueError("give the call's tokens: positions=, cache_position=, attention_mask= or input_ids=")
        keys = mask.shape[-1] if mask is not None else (int(slots[-1]) + 1 if slots is not None and slots.size
                                                         else t)
        if keys < t:
            raise ValueError(f"cache_position ends at slot {keys - 1}, before the call's {t} tokens fit")
        return cls(positions, slots, mask, ids, t, keys)

    @property
    def fresh(self) -> bool:
        """True when the call gives no input: a fresh sequence (no cache, no padding, ids = slots)."""
        return all(v is None for v in (self.positions, self.cache_position, self.attention_mask, self.input_ids))

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one value per query: ``(T,)``, or ``(B, T)`` when an input has a batch axis."""
        for value in (self.positions, self.input_ids, self.attention_mask):
            if value is not None and np.ndim(to_numpy(value)) == 2:
                return (int(np.shape(to_numpy(value))[0]), self.length)
        return (self.length,)

    @property
    def past(self) -> int:
        """The tokens already cached: ``T_k − T``."""
        return self.keys - self.length

    def given(self) -> list[str]:
        """The parameters the call gives."""
        return [name for name in ("positions", "cache_position", "attention_mask", "input_ids")
                if getattr(self, name) is not None]

    def read(self, source: Source, side: str, *, who: str = "this layer", padding_idx: int | None = None) -> Any:
        """The positions ``source`` reads for the queries (``side="query"``: the call's ``T`` tokens) or the
        keys (``"key"``: all ``T_k``); a ``ValueError`` naming the parameters when the call gives none of its
        inputs (module docstring)."""
        for name in source:
            value = self._input(name, side, padding_idx)
            if value is not None:
                return value
        if self.fresh:  # transformers' own inputs for a fresh sequence: ids = slots (PaliGemma's: slots + 1)
            first = 1 if source[-1] == "slot_plus_one" else 0
            start = self.keys - (self.length if side == "query" else self.keys)
            return np.arange(start + first, self.keys + first, dtype=np.int64)
        wanted = [f"{PARAMETERS[name]}=" for name in source if PARAMETERS[name]]
        what = " or ".join(f"{INPUTS[name].split(' (')[0]} ({PARAMETERS[name]}=)" for name in source
                           if PARAMETERS[name])
        raise ValueError(f"{who} reads {what}; the call gives {', '.join(f'{g}=' for g in self.given())} only: "
                         f"pass {' or '.join(wanted)} (refpos does not read one input for another)")

    def _input(self, name: str, side: str, padding_idx: int | None) -> Any:
        start = self.past if side == "query" else 0
        if name in ("position_ids", "decoder_position_ids"):  # the keys' ids: the call's own when nothing is cached
            return self.positions if side == "query" or self.past == 0 else None
        if name == "row_ids":  # ids counted from padding_idx + 1: the position is the id less that
            ids = self._input("position_ids", side, padding_idx)
            if ids is None:
                return None
            if padding_idx is None:
                raise ValueError("row_ids needs the padding token (padding_idx): the ids count from it plus one")
            return ids - (padding_idx + 1)
        if name == "key_index":
            return derived(name, np.arange(start, self.keys, dtype=np.int64), None)
        if name in ("cache_position", "slot_plus_one"):
            if self.cache_position is not None:
                slots = self.cache_position if side == "query" else np.arange(self.keys, dtype=np.int64)
            elif self.attention_mask is not None:  # the mask's length counts the cached tokens
                slots = np.arange(start, self.keys, dtype=np.int64)
            else:
                return None
            return derived(name, slots, None)
        if name in DERIVED and self.attention_mask is not None:  # a count of the mask's ones
            return derived(name, None, self.attention_mask)[..., start:]
        if name in COUNTS and self.input_ids is not None and side == "query":
            if padding_idx is None:
                raise ValueError(f"{name} needs the padding token (padding_idx)")
            return counted_ids(self.input_ids, padding_idx, self.past, name)
        return None


def _mask(value: Any) -> np.ndarray:
    arr = np.asarray(to_numpy(value))
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iuf" or arr.ndim not in (1, 2) or (arr.size and not np.isin(arr, (0, 1)).all()):
        raise ValueError(f"attention_mask must hold 0 and 1 only (ints, bools or exact floats), of shape (T_k,) or "
                         f"(B, T_k); got dtype {arr.dtype} shape {arr.shape}")
    return arr.astype(np.int64)


__all__ = ["COUNTS", "DERIVED", "INPUTS", "PARAMETERS", "PLAIN", "SLOT_AGAINST_INDEX", "USES", "Given", "Source",
           "check_reads", "counted_ids", "derived", "shown"]
