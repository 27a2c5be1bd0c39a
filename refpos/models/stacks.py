"""The layers of one stack whose encoding is not RoPE: their geometry from the config, their records from the
family's facts (:mod:`refpos.models.facts`).

A stack's geometry is read from the first present key of each list of
:data:`refpos.models.facts.GEOMETRY_KEYS` (transformers' config classes name them differently: GPT-2's
``n_layer`` / ``n_head`` / ``n_embd``, BART's ``encoder_layers`` / ``encoder_attention_heads`` /
``d_model``, T5's ``num_layers`` / ``num_heads``). Every key read is recorded by the :class:`KeyReader`, so
what was not read can be reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refpos.encodings.alibi import alibi_slopes
from refpos.encodings.deberta import deberta_attention_span, deberta_pos_att_type
from refpos.encodings.t5 import check_bucket_args
from refpos.models.facts import GEOMETRY_KEYS, AbsoluteFacts, AlibiFacts, DebertaFacts, T5Facts
from refpos.models.records import AbsoluteLayer, LayerRecord, NoPositions, round_to
from refpos.models.records_relative import AlibiLayer, DebertaLayer, T5Layer
from refpos.validation import check_bool, check_int

#: T5's bucket keys and the default its config class gives the distance
T5_KEYS = ("relative_attention_num_buckets", "relative_attention_max_distance")
T5_MAX_DISTANCE_DEFAULT = 128


@dataclass
class KeyReader:
    """Reads keys (dotted for nested ones, ``attn_config.alibi``) of one config and remembers each key read."""

    cfg: Mapping[str, Any]
    prefix: str = ""
    used: set[str] = field(default_factory=set)

    def get(self, key: str, default: Any = None) -> Any:
        """The value at ``key`` (``None`` and missing give ``default``); the key counts as read."""
        self.used.add(self.prefix + key)
        value: Any = self.cfg
        for part in key.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return default
            value = value[part]
        return default if value is None else value

    def first(self, keys: tuple[str, ...]) -> tuple[str, Any] | None:
        """``(key, value)`` of the first of ``keys`` present and not null; every key tried counts as read."""
        for key in keys:
            value = self.get(key)
            if value is not None:
                return key, value
        return None

    def count(self, keys: tuple[str, ...], what: str, *, minimum: int = 1) -> int:
        """A positive integer from the first present of ``keys``; a ``ValueError`` naming them when none is."""
        found = self.first(keys)
        if found is None:
            raise ValueError(f"{keys[0]}: the config gives no {what} (none of {list(keys)})")
        return check_int(self.prefix + found[0], found[1], minimum=minimum)


@dataclass(frozen=True)
class Geometry:
    """A stack's layer count, head count and width."""

    layers: int
    heads: int
    width: int

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


def geometry(reader: KeyReader, role: str) -> Geometry:
    """The geometry of a stack (``role``: ``"single"``, ``"encoder"`` or ``"decoder"``)."""
    keys = GEOMETRY_KEYS[role]
    return Geometry(reader.count(keys["layers"], "layer count"), reader.count(keys["heads"], "head count"),
                    reader.count(keys["width"], "hidden width"))


# ----------------------------------------------------------------------------------------------- ALiBi
def family_slopes(n_heads: int, facts: AlibiFacts,
                  max_bias: float = 8.0) -> tuple[tuple[float, ...], tuple[float, ...]]:
    r"""The family's slopes: exact, and as its code computes them (in float32, then rounded to its dtype).

    ``recurrence``: the official recurrence (:func:`refpos.encodings.alibi_slopes`), which BLOOM and Falcon compute as
    powers of a float32 base: :math:`\hat m_h = \mathrm{fl}_{32}(\mathrm{fl}_{32}(b)^h)`, :math:`b = 2^{-8/c}`
    (and :math:`2^{-4/c}` for the extra heads); ``mpt``: over the next power of two :math:`n' \ge n`,
    :math:`m_h = 2^{-\beta h / n'}` (:math:`h = 1 … n'`, :math:`\beta` = ``alibi_bias_max``), the odd entries
    before the even ones for :math:`n' \ne n`, the first :math:`n` kept, computed in float32 as
    :math:`1/2^{\mathrm{fl}_{32}(h)\,\mathrm{fl}_{32}(\beta/n')}` (transformers' ``build_mpt_alibi_tensor``).
    """
    one = np.float32(1.0)
    if facts.slopes == "recurrence":
        exact = [float(m) for m in alibi_slopes(n_heads, xp="numpy")]
        c = 1 << (n_heads.bit_length() - 1)
        base, extra = np.float32(2.0 ** (-8.0 / c)), np.float32(2.0 ** (-4.0 / c))
        computed = [base ** np.float32(h) for h in range(1, c + 1)]
        computed += [extra ** np.float32(h) for h in range(1, 2 * min(c, n_heads - c), 2)]
    else:
        padded = 1 << (n_heads - 1).bit_length()
        exact = [2.0 ** (-max_bias * h / padded) for h in range(1, padded + 1)]
        step = np.float32(max_bias / padded)
        computed = [one / np.float32(2.0) ** (np.float32(h) * step) for h in range(1, padded + 1)]
        if padded != n_heads:
            exact, computed = ((v[1::2] + v[0::2])[:n_heads] for v in (exact, computed))
    rounded = round_to(np.asarray(computed, dtype=np.float64), facts.dtype)
    return tuple(exact), tuple(float(m) for m in rounded)


def alibi_layers(stack: str, shape: Geometry, facts: AlibiFacts, max_bias: float = 8.0) -> list[LayerRecord]:
    slopes, computed = family_slopes(shape.heads, facts, max_bias)
    return [AlibiLayer(stack, i, None, slopes=slopes, computed_slopes=computed, form=facts.form,
                       before_scale=facts.before_scale, dtype=facts.dtype, head_dim=shape.head_dim)
            for i in range(shape.layers)]


# -------------------------------------------------------------------------------------------------- T5
def t5_layers(reader: KeyReader, stack: str, shape: Geometry, facts: T5Facts, *,
              bidirectional: bool) -> list[LayerRecord]:
    """T5 layers: ``relative_attention_num_buckets`` (required) and ``relative_attention_max_distance``
    (default 128, as T5's config class)."""
    buckets = reader.count((T5_KEYS[0],), "bucket count", minimum=2)
    distance = check_int(T5_KEYS[1], reader.get(T5_KEYS[1], T5_MAX_DISTANCE_DEFAULT), minimum=1)
    check_bucket_args(bidirectional, buckets, distance)
    return [T5Layer(stack, i, None, n_heads=shape.heads, bidirectional=bidirectional, num_buckets=buckets,
                    max_distance=distance, owns_table=facts.tables == "every" or i == 0,
                    table_layer=i if facts.tables == "every" else 0) for i in range(shape.layers)]


# ------------------------------------------------------------------------------ learned and sinusoidal
def absolute_layers(reader: KeyReader, stack: str, shape: Geometry, encoding: str,
                    facts: AbsoluteFacts) -> list[LayerRecord]:
    """Learned or sinusoidal layers: the table's length and width, and the position offset (``offset``, or
    ``offset_key`` + 1)."""
    size = None
    if facts.table:
        found = reader.first(facts.table)
        if found is None and encoding == "learned":
            raise ValueError(f"{facts.table[0]}: the config gives no position-table length (none of "
                             f"{list(facts.table)})")
        size = None if found is None else check_int(reader.prefix + found[0], found[1], minimum=1)
    dim = shape.width if facts.dim is None else reader.count((facts.dim,), "position-table width")
    offset = facts.offset
    if facts.offset_key is not None:
        offset = check_int(reader.prefix + facts.offset_key, reader.get(facts.offset_key, 0), minimum=0) + 1
    if encoding == "sinusoidal" and dim % 2:
        raise ValueError(f"the sinusoid's width {dim} is odd: refpos builds even widths only")
    if size is not None and encoding == "learned":
        size += facts.offset  # the offset rows come on top of the stated length (OPT, BART)
    return [AbsoluteLayer(stack, i, None, encoding_name=encoding, dim=dim, offset=offset, table_size=size,
                          layout=facts.layout, spacing=facts.spacing, base=facts.base)
            for i in range(shape.layers)]


# --------------------------------------------------------------------------------------------- DeBERTa
#: DeBERTa's keys with the defaults its config class and attention code give them
DEBERTA_DEFAULTS = {"relative_attention": False, "position_buckets": -1, "max_relative_positions": -1,
                    "max_position_embeddings": 512, "pos_att_type": None, "share_att_key": False,
                    "position_biased_input": True}


def deberta_layers(reader: KeyReader, stack: str, shape: Geometry, facts: DebertaFacts) -> list[LayerRecord]:
    """DeBERTa layers: the keys of :data:`DEBERTA_DEFAULTS` (v1 reads neither ``position_buckets`` nor
    ``share_att_key``), checked as :class:`refpos.encodings.deberta.DeBERTa` checks them."""
    read = {key: default if facts.version == "v1" and key in ("position_buckets", "share_att_key") else
            reader.get(key, default) for key, default in DEBERTA_DEFAULTS.items()}
    for key in ("relative_attention", "share_att_key", "position_biased_input"):
        check_bool(reader.prefix + key, read[key])
    terms = deberta_pos_att_type(read["pos_att_type"])
    buckets = check_int(reader.prefix + "position_buckets", read["position_buckets"])
    distance = check_int(reader.prefix + "max_relative_positions", read["max_relative_positions"])
    length = check_int(reader.prefix + "max_position_embeddings", read["max_position_embeddings"], minimum=1)
    deberta_attention_span(buckets, distance, length)  # the span's own checks, naming the key
    return [DebertaLayer(stack, i, None, pos_att_type=terms, position_buckets=buckets,
                         max_relative_positions=distance, max_position_embeddings=length,
                         share_att_key=read["share_att_key"], relative_attention=read["relative_attention"],
                         position_biased_input=read["position_biased_input"], n_heads=shape.heads,
                         head_dim=shape.head_dim, version=facts.version) for i in range(shape.layers)]


def none_layers(stack: str, shape: Geometry) -> list[LayerRecord]:
    return [NoPositions(stack, i, None) for i in range(shape.layers)]


__all__ = ["DEBERTA_DEFAULTS", "T5_KEYS", "Geometry", "KeyReader", "absolute_layers",
           "alibi_layers", "deberta_layers", "family_slopes", "geometry", "none_layers", "t5_layers"]
