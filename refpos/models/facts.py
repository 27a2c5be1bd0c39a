"""The family table's facts beyond RoPE: which encoding each stack has, and what the model's code fixes about it.

A row of the family table (:mod:`refpos.models.families`) names its ``encoding`` and its ``stacks``; the
encodings other than RoPE carry the facts their model's code fixes in a sub-table of that name. Each fact
is checked against its rule set here; :mod:`refpos.models.stacks` reads the config keys they point to.

``encoding``
    ``"rope"`` (the default), ``"alibi"``, ``"t5"`` (bucketed relative bias), ``"learned"`` (absolute table),
    ``"sinusoidal"`` (absolute sinusoid), ``"deberta"`` (DeBERTa-v2 relative positions), ``"none"`` (attention
    without positions) or ``"no_attention"`` (every layer without attention: Mamba, RWKV, …).
``stacks``
    ``"decoder"`` (the default: a decoder-only model), ``"encoder"`` or ``"encoder-decoder"``.
``switch``
    A config key that chooses the encoding: ``{key = "alibi", values = {true = "alibi", false = "rope"},
    absent = "false"}`` (Falcon). ``key`` may be dotted (``attn_config.alibi``); each value is written as
    JSON text (``true``, ``"nope"`` is written ``nope``; ``"*"``: any other value the key holds); a value the
    row does not list refuses the stack, naming the key. ``absent``: the value the config class assumes without
    the key.
``alibi``
    ``form`` (``key_index``: :math:`+m_h j`, BLOOM and Falcon; ``key_index_end``: :math:`m_h (j - j_{last})`,
    MPT), ``slopes`` (``recurrence``: the official recurrence; ``mpt``: :math:`2^{-b h / n'}` over the next
    power of two :math:`n'`, odd entries first, ``b`` = ``attn_config.alibi_bias_max``), ``before_scale``
    (Falcon adds the bias inside the :math:`1/\\sqrt{d}` scale) and ``dtype``: what the code rounds the slopes
    and the products slope × position to (BLOOM and MPT float32, Falcon bfloat16).
``t5``
    ``tables``: ``"first"`` (layer 0 of each stack owns the bucket table, the others reuse it: T5) or
    ``"every"`` (every layer owns one: umT5).
``deberta``
    ``version``: ``"v2"`` (DeBERTa-v2/v3: log buckets ``position_buckets`` and ``share_att_key`` are read) or
    ``"v1"`` (its code reads neither).
``learned`` / ``sinusoidal``
    ``table``: the config key of the table's length (a list: the first present); ``dim``: the key of its
    width when it is not the stack's; ``offset``: added to every position (OPT and BART: 2), or
    ``offset_key``: the position offset is that key plus one (``pad_token_id``: M2M100, RoBERTa count
    positions from ``padding_idx + 1``); a sinusoid's ``layout`` (``concat``, ``interleaved``) and ``spacing``
    (``paper``, ``tensor2tensor``) as in :mod:`refpos.encodings.sinusoidal`.
``rope``
    What a family's rotary code fixes beyond the config (:class:`RopeFacts`): a hard-coded base (GPT-J's
    10000), defaults of ``rotary_dim`` (GPT-J 64), of ``partial_rotary_factor`` (GPT-NeoX 0.25, GLM 0.5) and of
    the head sizes (Gemma 4: 256, full attention 512), whether its default init honours a partial rotary
    span, rope types it renames or accepts (Phi-3: ``yarn`` is ``longrope``, only ``default`` and
    ``longrope``), and Gemma 3's legacy per-layer form (the sliding layers' base in ``local_theta_key``).
``encoder`` / ``decoder``
    A sub-table that overrides ``encoding`` and its facts for one stack (Whisper: a sinusoid for the encoder,
    a learned table for the decoder).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from refpos.encodings.alibi import FORMS as ALIBI_FORMS
from refpos.encodings.sinusoidal import LAYOUTS as SINUSOID_LAYOUTS
from refpos.encodings.sinusoidal import SPACINGS

#: role → config keys of a stack's layer count, head count and width, the first present wins; ``decoder`` and
#: ``encoder`` are the stacks of an encoder–decoder model, ``single`` the one stack of any other model
GEOMETRY_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "single": {"layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
               "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads"),
               "width": ("hidden_size", "n_embd", "n_embed", "d_model", "dim", "emb_dim")},
    "encoder": {"layers": ("encoder_layers", "num_layers", "num_hidden_layers"),
                "heads": ("encoder_attention_heads", "num_heads", "num_attention_heads"),
                "width": ("d_model", "hidden_size")},
    "decoder": {"layers": ("decoder_layers", "num_decoder_layers", "num_layers", "num_hidden_layers"),
                "heads": ("decoder_attention_heads", "num_heads", "num_attention_heads"),
                "width": ("d_model", "hidden_size")},
}
ENCODINGS = ("rope", "alibi", "t5", "learned", "sinusoidal", "deberta", "none", "no_attention")
STACKS = {"decoder": ("decoder",), "encoder": ("encoder",), "encoder-decoder": ("encoder", "decoder")}
ALIBI_SLOPES = ("recurrence", "mpt")
#: what a family rounds its ALiBi slopes and products to (float64: not rounded)
ALIBI_DTYPES = ("float64", "float32", "bfloat16")
T5_TABLES = ("first", "every")


def _check(where: str, ok: bool, what: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"{where}: {what} holds a value outside its rule set ({value!r})")


@dataclass(frozen=True)
class AlibiFacts:
    """How a family's code builds its ALiBi bias (see the module docstring)."""

    form: str = "key_index"
    slopes: str = "recurrence"
    before_scale: bool = False
    dtype: str = "float32"

    def check(self, where: str) -> None:
        _check(where, self.form in (*ALIBI_FORMS, "key_index_end"), "alibi.form", self.form)
        _check(where, self.slopes in ALIBI_SLOPES, "alibi.slopes", self.slopes)
        _check(where, isinstance(self.before_scale, bool), "alibi.before_scale", self.before_scale)
        _check(where, self.dtype in ALIBI_DTYPES, "alibi.dtype", self.dtype)


@dataclass(frozen=True)
class T5Facts:
    """Which layers of a stack own a bucket table."""

    tables: str = "first"

    def check(self, where: str) -> None:
        _check(where, self.tables in T5_TABLES, "t5.tables", self.tables)


@dataclass(frozen=True)
class DebertaFacts:
    """Which DeBERTa attention the family's code runs."""

    version: str = "v2"

    def check(self, where: str) -> None:
        _check(where, self.version in ("v1", "v2"), "deberta.version", self.version)


@dataclass(frozen=True)
class AbsoluteFacts:
    """A learned table or a sinusoid added to a stack's input (see the module docstring)."""

    #: config keys of the table's length, the first present wins (``["n_positions", "max_position_embeddings"]``)
    table: tuple[str, ...] = ()
    offset: int = 0
    offset_key: str | None = None
    layout: str = "concat"
    spacing: str = "paper"
    base: float = 10000.0
    #: the config key of the table's width when it is not the stack's (ALBERT, ELECTRA: ``embedding_size``)
    dim: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.table, str):
            object.__setattr__(self, "table", (self.table,))
        elif isinstance(self.table, list):
            object.__setattr__(self, "table", tuple(self.table))

    def check(self, where: str, encoding: str) -> None:
        _check(where, isinstance(self.offset, int) and self.offset >= 0, f"{encoding}.offset", self.offset)
        _check(where, self.offset == 0 or self.offset_key is None, f"{encoding}.offset_key (with offset)",
               self.offset_key)
        _check(where, self.layout in SINUSOID_LAYOUTS, f"{encoding}.layout", self.layout)
        _check(where, self.spacing in SPACINGS, f"{encoding}.spacing", self.spacing)
        _check(where, all(isinstance(k, str) for k in self.table), f"{encoding}.table", self.table)
        _check(where, encoding != "learned" or bool(self.table), "learned.table (required)", self.table)


@dataclass(frozen=True)
class Switch:
    """A config key choosing the encoding: value (JSON text) → encoding; ``absent``: the class default."""

    key: str
    values: tuple[tuple[str, str], ...]
    absent: str

    def check(self, where: str) -> None:
        _check(where, all(enc in ENCODINGS for _, enc in self.values), "switch.values", dict(self.values))
        _check(where, self.absent in dict(self.values), "switch.absent (one of its values)", self.absent)


@dataclass(frozen=True)
class StackFacts:
    """What one stack's attention does with positions: its encoding and that encoding's facts."""

    encoding: str = "rope"
    alibi: AlibiFacts | None = None
    t5: T5Facts | None = None
    learned: AbsoluteFacts | None = None
    sinusoidal: AbsoluteFacts | None = None
    deberta: DebertaFacts | None = None

    def check(self, where: str) -> None:
        _check(where, self.encoding in ENCODINGS, "encoding", self.encoding)
        for name in ("alibi", "t5", "deberta"):
            facts = getattr(self, name)
            if facts is not None:
                facts.check(where)
        for name in ("learned", "sinusoidal"):
            facts = getattr(self, name)
            if facts is not None:
                facts.check(where, name)

    def facts_of(self, encoding: str) -> Any:
        """The facts of ``encoding`` (its defaults when the row gives none; ``None`` for RoPE and the rest)."""
        given = getattr(self, encoding, None) if encoding in FACT_TABLES else None
        if given is not None or encoding not in FACT_TABLES:
            return given
        return FACT_TABLES[encoding]()


@dataclass(frozen=True)
class RopeFacts:
    """What a family's rotary code fixes that its config does not say (see the module docstring)."""

    #: the base the code uses (``theta_fixed``: whatever the config says; else only when the config has none)
    theta: float | None = None
    theta_fixed: bool = False
    rotary_dim: int | None = None
    partial_rotary_factor: float | None = None
    #: the family's default init rotates only the partial span (most classes' default init ignores it)
    partial_honoured: bool = False
    head_dim: int | None = None
    global_head_dim: int | None = None
    #: rope type the code reads as another (Phi-3: yarn → longrope)
    type_aliases: tuple[tuple[str, str], ...] = ()
    #: the rope types the code accepts (empty: any)
    types: tuple[str, ...] = ()
    #: the legacy per-layer form: the sliding layers' base key and default (Gemma 3's rope_local_base_freq, 1e4)
    local_theta_key: str | None = None
    local_theta: float | None = None

    def check(self, where: str) -> None:
        for name in ("theta", "partial_rotary_factor", "local_theta"):
            value = getattr(self, name)
            _check(where, value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                            and value > 0), f"rope.{name}", value)
        for name in ("rotary_dim", "head_dim", "global_head_dim"):
            value = getattr(self, name)
            _check(where, value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0),
                   f"rope.{name}", value)
        _check(where, not self.theta_fixed or self.theta is not None, "rope.theta_fixed (needs theta)",
               self.theta_fixed)
        _check(where, (self.local_theta_key is None) == (self.local_theta is None), "rope.local_theta",
               self.local_theta)


def read_rope(where: str, table: Any) -> RopeFacts:
    """A :class:`RopeFacts` from its TOML table."""
    allowed = {f.name for f in fields(RopeFacts)}
    if not isinstance(table, dict) or set(table) - allowed:
        raise ValueError(f"{where}: rope takes {sorted(allowed)}, got {table!r}")
    values = dict(table)
    if "type_aliases" in values:
        values["type_aliases"] = tuple(sorted(dict(values["type_aliases"]).items()))
    if "types" in values:
        values["types"] = tuple(values["types"])
    facts = RopeFacts(**values)
    facts.check(where)
    return facts


#: the sub-tables of a stack (and the row's top level) that hold an encoding's facts
FACT_TABLES = {"alibi": AlibiFacts, "t5": T5Facts, "learned": AbsoluteFacts, "sinusoidal": AbsoluteFacts,
               "deberta": DebertaFacts}


def read_stack(where: str, table: dict[str, Any]) -> StackFacts:
    """A :class:`StackFacts` from a TOML table holding ``encoding`` and fact sub-tables (other keys ignored)."""
    values: dict[str, Any] = {}
    if "encoding" in table:
        if not isinstance(table["encoding"], str):
            raise ValueError(f"{where}: encoding has the wrong type ({table['encoding']!r})")
        values["encoding"] = table["encoding"]
    for name, kind in FACT_TABLES.items():
        if name not in table:
            continue
        sub = table[name]
        allowed = {f.name for f in fields(kind)}
        if not isinstance(sub, dict) or set(sub) - allowed:
            raise ValueError(f"{where}: {name} takes {sorted(allowed)}, got {sub!r}")
        values[name] = kind(**sub)
    stack = StackFacts(**values)
    stack.check(where)
    return stack


def read_switch(where: str, table: Any) -> Switch:
    """A :class:`Switch` from its TOML table ``{key, values, absent}``."""
    if not isinstance(table, dict) or set(table) != {"key", "values", "absent"} \
            or not isinstance(table["values"], dict) or not isinstance(table["key"], str):
        raise ValueError(f"{where}: switch takes key = \"…\", values = {{value = encoding, …}}, absent = \"…\"; "
                         f"got {table!r}")
    switch = Switch(table["key"], tuple((str(k), v) for k, v in table["values"].items()), str(table["absent"]))
    switch.check(where)
    return switch


__all__ = [
    "ALIBI_DTYPES",
    "ALIBI_SLOPES",
    "ENCODINGS",
    "FACT_TABLES",
    "GEOMETRY_KEYS",
    "STACKS",
    "T5_TABLES",
    "AbsoluteFacts",
    "AlibiFacts",
    "DebertaFacts",
    "RopeFacts",
    "StackFacts",
    "Switch",
    "T5Facts",
    "read_rope",
    "read_stack",
    "read_switch",
]
