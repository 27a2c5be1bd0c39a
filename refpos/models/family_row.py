"""One row of the family table: a :class:`Family` — the columns, what each holds, and the rules each value obeys.

The table (:mod:`refpos.models.families`, ``refpos/models/data/families.toml``) is rows of these. The columns of
the encoding, the stacks and the facts of each kind (``encoding``, ``stacks``, ``switch``, ``input``, ``encoder``,
``decoder``, and a sub-table per kind with facts) are :mod:`refpos.models.facts`'; the others:

``layout``
    ``"half"`` (``rotate_half`` with ``x[..., :d/2]``, ``cat(freqs, freqs)``), ``"interleaved"`` (``rotate_half``
    on ``x[..., ::2]`` with ``repeat_interleave`` tables, ``rotate_every_two``, or complex pairs
    ``view_as_complex`` as in Llama 4 and DeepSeek-V2), ``"deinterleaved"`` (``apply_rotary_pos_emb_interleave``:
    interleaved input regrouped half-split), or ``"rope_interleave"`` (the config key ``rope_interleave``,
    default true, chooses between the last two, as DeepSeek-V3's attention does).
``rope_layers``
    Which layers rotate: ``"all"``; ``"no_rope_layers"`` (a 0/1 list, 1 = rotate; absent: every layer but each
    ``no_rope_layer_interval``-th, default 4); ``"sliding"`` (only ``sliding_attention`` layers, and only
    when ``sliding_window`` is set); ``"sliding_or_dense_prefix"`` (those, and the layers whose MLP is dense,
    ``mlp_layer_types``, when ``prefix_dense_sliding_window_pattern`` is 1); ``"sliding_or_no_window"``
    (sliding layers, or every layer when ``sliding_window`` is null); ``"sliding_type"`` (the
    ``sliding_attention`` layers, whatever the window);
    ``"theta_list"`` (``layer_rope_theta[i]`` is layer ``i``'s base, 0: no RoPE; absent: every layer at the
    config's base); ``"theta_flags"`` (a non-zero ``layer_rope_theta[i]`` rotates at the config's base, 0: no
    RoPE; absent: none on every 4th layer counted back from the last); ``"scaling_list"`` (every layer rotates,
    those ``rope_scaling_layers`` lists with the rope dict's scaling, the others plain at the same base).
    :mod:`refpos.models.schedule` evaluates them.
``layer_pattern``
    How the model's config class fills an absent ``layer_types`` (a :class:`LayerPattern`): every ``n``-th
    layer ``full_attention`` (``n`` read from ``key``, default ``every``; with ``offset = r`` the layers with
    ``i % n == r``, default ``n - 1`` (none when ``r >= n``), ``r`` read from ``offset_key`` when set, from
    layer ``start`` on), the
    layers a config key lists (``indices``, dotted for a nested key, ``one_based`` when the list counts from
    1; ``absent``: the type of every layer when that key is missing; ``listed``: the type of the listed
    layers, default ``full_attention``), or one character per layer in a string
    key (``chars = {M = "mamba", …}`` with ``key``); the others are ``other`` (default ``sliding_attention``).
``types_key``
    The config key holding the layer types when it is not ``layer_types`` (Nemotron-H: ``layers_block_type``).
``count``
    ``"layer_types"``: the number of layers is the length of the layer types (the layer-count key is ignored, as
    the config class does); ``"per_encoder"``: the layer-count key is a dict of each encoder's count (LXMERT's
    language, vision and cross-modality layers), and the layers are all of them; ``"blocks_per_stage"``: the
    layers are the sum of the config's ``blocks_per_stage`` (SAM 2's Hiera, stages of their own block counts);
    ``"each_stack"``: every stack of an encoder–decoder row is one transformer built from the whole flat config, its
    layer count and geometry read as a single stack's (Pocket TTS's codec: an encoder half and a decoder half of
    ``num_hidden_layers`` each).
``stages``
    Stages of their own depth, heads and width (SegFormer, CvT, MobileViT): where the config (or the code) states
    each stage's layer count, heads and width (``{layers, heads, widths, head_dim, count}``, a
    :class:`refpos.models.stages.StageRule`); the layers are every stage's, each of layer type ``stage_<s>``.
``width_factor``
    The attention's input is this many times the hidden width (Zamba2's shared attention runs on
    ``[hidden; embeddings]``: 2), so its head size is ``width_factor · hidden_size / num_attention_heads``.
``no_attention``
    Layer types without attention, and so without positions (Mamba, linear attention, convolutions), with
    the kind the schedule names them by: Qwen3-Next's ``linear_attention`` layers are ``"linear"``.
``query_scale``
    A position-dependent multiplier of the query, the name of a rule of :mod:`refpos.models.query_scales`:
    ``"llama4_temperature"`` (Llama 4's NoPE layers) or ``"llama_4_scaling_beta"`` (every layer, Ministral-3).
``placement``
    Where the code puts the rotated channels when the config does not say (otherwise: first, or last for
    ``qk_rope_head_dim`` MLA configs).
``rope_dict``
    Rope-dict keys the model's own rotary module reads beyond transformers' shared rules:
    ``"ntk_alpha"`` (``"dynamic"`` with ``alpha`` is a fixed NTK base), ``"longrope_mscale"``
    (``short_mscale`` / ``long_mscale``).
``multi_axis``
    The text RoPE takes several position axes (M-RoPE); :mod:`refpos.models.mrope_hf` resolves the families it
    models and reports the others' multi-axis keys as not modelled.
``unmodelled``
    Something the code does with positions that refpos does not model; reported as not modelled, and
    :func:`refpos.model_positions` refuses the layers.
``cross_attention``
    A cross-attention in the decoder's layers beside their self-attention, whose queries and keys carry no
    positions (Dia's decoder, BLT's byte stacks): ``{keys, queries, every_key, all_key, all_default, alone}``,
    read by :func:`refpos.models.cross.read_cross`; each is a record of ``decoder.cross``.
``stage_unmodelled``
    A composite's own stage, outside its language model and its parts, that does something with positions
    refpos does not model (X-CLIP's multi-frame transformer over its tower's outputs): reported as not modelled
    under ``model_type``, the layers of the language model and the parts answered as they are.
``note``
    Something the code does that leaves positions as resolved (a mixer beside the attention, keys shared
    between layers); shown in the resolution's notes.
``release``
    The transformers release the row's ``source`` was read from (default ``"5.24"``).
``versions``
    Where a later release changed the family's position code: release range (``"<5.25"``) → the columns of that
    range, with its own ``source`` and ``release``; the row itself holds for every other release
    (:mod:`refpos.models.releases` chooses by the config's ``transformers_version``).
``output``
    What a stage after a stack's last layer adds to the tokens it makes from the stack's output, as a kind whose
    records are added to tokens (``encoding`` and its facts; Granite-Docling's connector: a fixed 2-D sin–cos of
    the pixel-shuffled grid): its records are the stack ``<stack>.output``, after the stack's layers.
``ignores``
    Config keys whose names say positions but that the family's code does not read for them (MPT's
    ``learned_pos_emb``, ChatGLM's ``original_rope``): read without effect, with a note.
``architectures``
    ``{<class name> = "<what it adds>"}``: the model classes built around the row's network that add positions
    refpos does not model (SpeechT5's task models and their prenets); a config whose ``architectures`` names one
    is refused by :func:`refpos.model_positions` under that key, the row's own network answered otherwise.

A row's ``source`` cites a file of transformers' tree (``<dir>/modeling_<name>.py: <functions>``) or, for a model
that ships its own code, a public copy of that code or vLLM's implementation of the family
(``github:<owner>/<repo>/<path>: <functions>``, ``hf:`` for a hub repository; several citations ``; ``-separated:
:data:`SOURCE_FORM`). The rows of those models name the keys their code reads under its own names (the ``rope``
facts ``theta_key``, ``fraction_key``, ``head_dim_key``, ``length_key``, ``ratio_key``, ``rule_key``:
:class:`refpos.models.kinds.rope.RopeFacts`; docs/families.md#models-that-ship-their-own-code).

"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from refpos.models import query_scales
from refpos.models.cross import CrossFacts
from refpos.models.facts import STACKS, StackFacts, Switch
from refpos.models.kinds.registry import KINDS
from refpos.models.kinds.rope import CONFIG_KEY, RopeFacts
from refpos.models.layer_pattern import LayerPattern
from refpos.models.releases import VERSION
from refpos.models.stages import StageRule
from refpos.pairs import PARTIAL_PLACEMENTS

LAYOUT_RULES = ("half", "interleaved", "deinterleaved", "rope_interleave")
LAYER_RULES = ("all", "no_rope_layers", "sliding", "sliding_or_no_window", "sliding_type", "theta_list", "theta_flags",
               "scaling_list", "sliding_or_dense_prefix")
ROPE_DICT_RULES = ("ntk_alpha", "longrope_mscale")
PLACEMENTS = PARTIAL_PLACEMENTS
#: the source of a row built from conventions a caller states (``refpos.model_positions(assume=…)``)
STATED = "stated by the caller"
#: where the table lives, as error messages name it
TABLE_PATH = "refpos/models/data/families.toml"
#: a section path of the ``parts`` column (``vision_config``, ``thinker_config.vision_config``)
PART_PATH = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")
_FUNCTIONS = r"\w+(\.\w+)?(, \w+(\.\w+)?)*"
#: a file of transformers' tree: ``<dir>/modeling_<name>.py: <function>[, <function or Class.method>]``
TRANSFORMERS_SOURCE = re.compile(rf"[a-z0-9_]+/modeling_[a-z0-9_]+\.py: {_FUNCTIONS}")
#: a public copy of a model's own code, where the code ships outside transformers: the hub (``hf:``) or GitHub
#: (``github:``) repository, the file's path in it and the functions read, ``; ``-separated when several were read
PUBLIC_SOURCE = re.compile(rf"(hf|github):[\w.-]+/[\w.-]+/[\w./-]+\.py: {_FUNCTIONS}")
#: a row's ``source``: one file of transformers' tree, or one or more public copies of the model's own code
SOURCE_FORM = re.compile(rf"{TRANSFORMERS_SOURCE.pattern}|{PUBLIC_SOURCE.pattern}(; {PUBLIC_SOURCE.pattern})*")


class UnknownFamilyWarning(UserWarning):
    """A ``model_type`` the family table does not know: its pair layout and layer schedule are assumed."""


@dataclass(frozen=True)
class Family:
    """One row of the family table (see the module docstring for the columns)."""

    model_type: str
    source: str
    layout: str | None = None
    rope_layers: str = "all"
    layer_pattern: LayerPattern | None = None
    no_attention: tuple[tuple[str, str], ...] = ()
    query_scale: str | None = None
    placement: str | None = None
    rope_dict: frozenset[str] = frozenset()
    multi_axis: bool = False
    unmodelled: str | None = None
    stage_unmodelled: str | None = None
    #: the cross-attention of the decoder's layers, without positions (:mod:`refpos.models.cross`), if any
    cross_attention: CrossFacts | None = None
    note: str | None = None
    #: the encoding and facts of every stack unless ``encoder`` / ``decoder`` / ``predictor`` / ``spatial`` /
    #: ``temporal`` override them
    positions: StackFacts = field(default_factory=StackFacts)
    stacks: str = "decoder"
    encoder: StackFacts | None = None
    decoder: StackFacts | None = None
    predictor: StackFacts | None = None
    spatial: StackFacts | None = None
    temporal: StackFacts | None = None
    switch: Switch | None = None
    types_key: str = "layer_types"
    count: str | None = None
    #: stages of their own depth, heads and width (:mod:`refpos.models.stages`), where the row states them
    stages: StageRule | None = None
    width_factor: int = 1
    #: what every stack adds to its input before its first layer (a kind whose hook is ``input``), if anything
    input: StackFacts | None = None
    #: ``(key, value when absent)``: the bool config key that turns the input embedding on
    input_when: tuple[str, bool] | None = None
    #: what every stack adds to its input beside ``input``, each with the bool config key that turns it on and its
    #: value when absent (or always on): LayoutLMv3's 1-D learned table beside its box rows, and its patches' table
    #: where ``visual_embed``; built as the site's next records, turned off with ``input`` too
    input_beside: tuple[tuple[StackFacts, tuple[str, bool] | None], ...] = ()
    #: stack -> its own input embedding, where a stack's sub-table states one (Informer's decoder continues the
    #: encoder's positions)
    stack_inputs: tuple[tuple[str, StackFacts], ...] = ()
    #: what a stage after every stack's last layer adds to the tokens it makes (a kind whose hook is ``input``)
    output: StackFacts | None = None
    #: section path -> the model type the composite's config class builds there, whatever the section says
    parts: tuple[tuple[str, str], ...] = ()
    #: section path -> the model type it builds there when the section states none (else the section's)
    part_defaults: tuple[tuple[str, str], ...] = ()
    #: section path -> the inputs its positions are read from, overriding its own row's (π0.5's action expert)
    part_reads: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: the transformers release the row's source was read from
    release: str = "5.24"
    #: release range -> the row of that range (its own source and release), where the code changed between releases
    versions: tuple[tuple[str, Family], ...] = ()
    #: config keys whose names say positions but that the family's code does not read for them (its source says so)
    ignores: tuple[str, ...] = ()
    #: model class -> what it adds around the row's network that refpos does not model (a config naming it refused)
    architectures: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        checks = {"layout": self.layout in (None, *LAYOUT_RULES) and (self.layout is not None or not self.has_rope),
                  "rope_layers": self.rope_layers in LAYER_RULES,
                  "query_scale": self.query_scale in (None, *query_scales.QUERY_SCALES),
                  "placement": self.placement in (None, *PLACEMENTS),
                  "rope_dict": self.rope_dict <= set(ROPE_DICT_RULES),
                  "source": self.source == STATED or bool(SOURCE_FORM.fullmatch(self.source)),
                  "stacks": self.stacks in STACKS,
                  "count": self.count in (None, "layer_types", "per_encoder", "blocks_per_stage", "each_stack"),
                  "stages": self.stages is None or (self.count is None and self.layer_pattern is None
                                                    and self.types_key == "layer_types"),
                  "encoder": self.encoder is None or "encoder" in STACKS.get(self.stacks, ()),
                  "decoder": self.decoder is None or "decoder" in STACKS.get(self.stacks, ()),
                  "cross_attention": self.cross_attention is None or "decoder" in STACKS.get(self.stacks, ()),
                  "predictor": self.predictor is None or "predictor" in STACKS.get(self.stacks, ()),
                  "spatial": self.spatial is None or "spatial" in STACKS.get(self.stacks, ()),
                  "temporal": self.temporal is None or "temporal" in STACKS.get(self.stacks, ()),
                  "input": self.input is None or KINDS[self.input.encoding].hook == "input",
                  "input_beside": not self.input_beside or (self.input is not None and all(
                      KINDS[site.encoding].hook == "input" for site, _ in self.input_beside)),
                  "output": self.output is None or KINDS[self.output.encoding].hook == "input",
                  "stack_inputs": all(KINDS[site.encoding].hook == "input" and name in STACKS.get(self.stacks, ())
                                      for name, site in self.stack_inputs),
                  "parts": all(PART_PATH.fullmatch(path) for path, _ in self.parts),
                  "part_defaults": all(PART_PATH.fullmatch(path) for path, _ in self.part_defaults),
                  "width_factor": isinstance(self.width_factor, int) and self.width_factor >= 1,
                  "release": isinstance(self.release, str) and bool(VERSION.fullmatch(self.release)),
                  "part_reads": all(PART_PATH.fullmatch(path) for path, _ in self.part_reads),
                  "ignores": all(isinstance(k, str) and CONFIG_KEY.fullmatch(k) for k in self.ignores),
                  "architectures": all(CONFIG_KEY.fullmatch(name) and isinstance(what, str) and what
                                       for name, what in self.architectures)}
        wrong = [name for name, ok in checks.items() if not ok]
        if wrong:
            raise ValueError(f"family {self.model_type!r}: column {wrong[0]} holds a value outside its rule set "
                             f"({getattr(self, wrong[0])!r})")

    @property
    def rope(self) -> RopeFacts:
        """What the family's rotary code fixes beyond the config (the row's ``rope`` sub-table)."""
        return self.positions.facts_of("rope")

    @property
    def unread_keys(self) -> frozenset[str]:
        """Top-level keys no step reads as its own value: those the row ``ignores`` and those its rope facts say
        restate a per-layer-type fact (``rope.restated``, checked by :mod:`refpos.models.restated_keys`)."""
        return frozenset(self.ignores) | {key for key, _ in self.rope.restated} if self.has_rope else \
            frozenset(self.ignores)

    def stack(self, name: str) -> StackFacts:
        """The encoding and facts of stack ``name`` (``"decoder"``, ``"encoder"``, ``"vision"``, …)."""
        override = {"encoder": self.encoder, "decoder": self.decoder, "predictor": self.predictor,
                    "spatial": self.spatial, "temporal": self.temporal}.get(name)
        return override if override is not None else self.positions

    @property
    def encodings(self) -> frozenset[str]:
        """Every encoding a stack of this family can have (its switch included)."""
        found = {self.stack(name).encoding for name in STACKS.get(self.stacks, ())}
        return frozenset(found | ({enc for _, enc in self.switch.values} if self.switch else set()))

    def input_of(self, stack: str) -> StackFacts | None:
        """What stack ``stack`` adds to its input: its own sub-table's ``input``, else the row's."""
        return dict(self.stack_inputs).get(stack, self.input)

    def architecture_gaps(self, cfg: Mapping[str, Any]) -> dict[str, str]:
        """``{"architectures": why}`` where ``cfg``'s ``architectures`` names a class of the row's ``architectures``
        (what that class adds is not modelled), else ``{}``."""
        named = cfg.get("architectures") or []
        gaps = [f"{self.model_type}: {name} {what}" for name, what in self.architectures if name in named]
        return {"architectures": "; ".join(gaps)} if gaps else {}

    def beside_on(self, cfg: Mapping[str, Any], mark: Callable[[str], None]) -> list[StackFacts]:
        """The sites of ``input_beside`` on in ``cfg`` (each's bool key, ``mark`` told it was read; or always)."""
        on = []
        for site, when in self.input_beside:
            if when is not None:
                mark(when[0])
            if when is None or (when[1] if cfg.get(when[0]) is None else cfg.get(when[0]) is True):
                on.append(site)
        return on

    def input_on(self, cfg: Mapping[str, Any], mark: Callable[[str], None] | None = None) -> bool:
        """Whether the row's input embedding is on in ``cfg`` (its ``input_when`` key, or always); ``mark`` is
        told the key read."""
        if self.input is None and not self.stack_inputs:
            return False
        if self.input_when is None:
            return True
        key, absent = self.input_when
        if mark is not None:
            mark(key)
        value = cfg.get(key)
        return absent if value is None else value is True

    @property
    def has_rope(self) -> bool:
        return "rope" in self.encodings

    @property
    def is_default(self) -> bool:
        """True when the row says nothing beyond refpos's defaults (half layout, RoPE on every layer)."""
        return self == Family(self.model_type, self.source, "half")

    def switched(self, cfg: Mapping[str, Any], encoding: str) -> tuple[str | None, str]:
        """The encoding the row's switch key chooses in ``cfg`` (``encoding`` without a switch; ``None`` for a
        value the row does not list) and the value as JSON text (``"true"``, ``"nope"``)."""
        if self.switch is None:
            return encoding, ""
        value: Any = cfg
        for part in self.switch.key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        values = dict(self.switch.values)
        if value is None:  # the class default, or none (refused)
            return values.get(self.switch.absent), self.switch.absent or "null"
        text = value if isinstance(value, str) else json.dumps(value)
        return values.get(text, values.get("*")), text

    def no_attention_kind(self, layer_type: str | None) -> str | None:
        """The kind of a layer type without attention (``"linear"``, ``"mamba"``, ...), or ``None``."""
        return dict(self.no_attention).get(layer_type) if layer_type is not None else None


__all__ = ["LAYER_RULES", "LAYOUT_RULES", "PART_PATH", "PLACEMENTS", "PUBLIC_SOURCE", "ROPE_DICT_RULES", "SOURCE_FORM",
           "STATED", "TABLE_PATH", "TRANSFORMERS_SOURCE", "Family", "UnknownFamilyWarning"]
