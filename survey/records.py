"""What one probe records (:mod:`survey.probe` runs the model, :mod:`survey.recorder` records it): each eager
attention call, embedding lookup, bias builder's and rotary apply function's call of one forward (:class:`Run`),
the other inputs a model was run with (:class:`Case`), and all of one model's runs (:class:`Probe`). These are
the records the observation store keeps (:mod:`survey.store`) and the comparison reads (:mod:`survey.observed`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Call:
    """One call of an eager attention function."""

    path: str  # the calling module's qualified name in the model
    layer: tuple[str, int] | None  # (layer list's path, index) of the outermost layer list being run
    query: np.ndarray  # (B, H, T, d) as handed to attention (float64 copy of the float32 tensor)
    key: np.ndarray
    mask: np.ndarray | None
    tensors: dict[str, np.ndarray]  # other tensor arguments (position_bias, ...)
    scaling: float | None


@dataclass
class Lookup:
    """One ``torch.nn.functional.embedding`` call: the table (parameter name), its rows, what it read."""

    table: str
    indices: np.ndarray
    rows: int
    vectors: np.ndarray
    trained: bool  # the table is a trainable parameter (a learned table; a frozen one holds a sinusoid)


@dataclass
class Built:
    """One call of an ALiBi builder or a bucket function: its name, its scalar and tensor arguments, its
    result, and the layer being run (as :attr:`Call.layer`)."""

    name: str
    arguments: dict[str, Any]
    output: np.ndarray
    layer: tuple[str, int] | None
    #: of a bucket function: its output for the relative positions :data:`SWEEP` (the other arguments as
    #: given), where a sequence of a few tokens reaches only the exact buckets of short distances
    swept: np.ndarray | None = None
    #: the module whose forward called it: a layer's attention, or a stack that computes one bias for all its
    #: layers before running them (MPNet's encoder)
    caller: str = ""


@dataclass
class Applied:
    """One call of a modeling module's rotary apply function (``apply_rotary_pos_emb`` ...): the query (and
    key, where it takes both) before and after, the layer being run (as :attr:`Call.layer`) and the module
    that called it (``caller``: a layer's attention, or its indexer). The input is the query as the projection
    made it, before any regrouping of its channels: where a channel permutation is visible."""

    name: str
    before: list[np.ndarray]
    after: list[np.ndarray]
    layer: tuple[str, int] | None
    caller: str = ""
    #: digests (:func:`digest`, leading axes of size 1 dropped) of the call's other tensor arguments: the
    #: tables it rotates by (RoFormer's sinusoid table, read from an embedding, is a rotation's table)
    tables: list[str] = field(default_factory=list)


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)
    #: attention module path -> the hidden states it was handed (first tensor argument)
    inputs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    #: attention module path -> names of the rotary keyword arguments replaced by the identity
    neutralized: dict[str, list[str]] = field(default_factory=dict)
    #: module path -> the tensor keyword arguments it was handed (alibi, position_bias, ...)
    handed: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    lookups: list[Lookup] = field(default_factory=list)
    #: rows of a parameter or buffer read by indexing it with integer positions (CTRL's sinusoid table,
    #: ``pos_encoding[position_ids, :]``): where a table is read without an embedding call
    indexed: list[Lookup] = field(default_factory=list)
    positional: dict[str, np.ndarray] = field(default_factory=dict)  # module path -> output
    builders: list[Built] = field(default_factory=list)
    applied: list[Applied] = field(default_factory=list)
    #: attention module path -> a digest of each hidden-state input (:func:`digest`): whether two runs' layers
    #: read the same input, kept where the inputs themselves are not
    digests: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Case:
    """One more forward of the probe's tokens with other inputs, and what the model did with them.

    Each case states every input a layer could read its positions from, so that a claim is graded on the one
    its record says it reads: ``position_ids`` (what was passed; None where the model was left to choose),
    ``slots`` (each token's slot: its index plus the tokens already cached, transformers' ``cache_position``)
    and ``attention_mask`` (the 2-D mask passed over every key, cached ones first; None where none was).
    ``run`` holds the calls of the case's last forward (the decoding step for ``decoding``); its hidden-state
    inputs are kept as digests only. ``error`` says why the model did not run it (a table of fewer rows, a
    cache the model does not take)."""

    name: str
    position_ids: np.ndarray | None
    slots: np.ndarray
    attention_mask: np.ndarray | None
    run: Run | None = None
    error: str = ""
    #: the tokens run (the probe's own, or more for a decoding case's prefill)
    input_ids: np.ndarray | None = None
    #: how many of the last tokens were the run's queries (one for a decoding step; 0: every token)
    queries: int = 0
    #: the indices of the keys the calls keep (None: every key): a cache padded with zeros is stored without them
    kept: np.ndarray | None = None
    #: the token the first slots hold in place of the probe's (a padded batch passed without its mask), or a
    #: decoding step's (a finished sequence's); None: the probe's own tokens
    padding_token: int | None = None


@dataclass
class Probe:
    """What one model's forward passes showed."""

    positions: np.ndarray  # what run A passed as position ids (or the model's own 0..T-1)
    position_ids_taken: bool
    a: Run
    b: Run  # every position 0, rotary tables the identity
    c: Run  # run A's positions, rotary tables the identity (for models whose layer inputs depend on positions)
    #: for a model that takes no position ids: the same tokens after :data:`SHIFT` others, so they sit at
    #: positions SHIFT ... SHIFT + T - 1 (None where position ids are taken)
    d: Run | None
    #: other tokens at run A's positions (to tell a position bias from a content one)
    e: Run | None
    module_types: dict[str, str]  # attention module path -> class name (inline ones where no call was made)
    input_ids: np.ndarray
    #: positional-embedding module path -> (class name, whether it has trainable parameters)
    positional: dict[str, tuple[str, bool]] = field(default_factory=dict)
    #: where run A passed position ids: the same tokens without them, at the model's own positions (a learned
    #: table is read at those plus the family's offset: RoBERTa counts from padding_idx + 1); None otherwise
    own: Run | None = None
    #: the same tokens with other inputs (:func:`cases_for`): thresholds crossed, left padding, packed
    #: sequences, a decoding step whose id is not its slot
    cases: list[Case] = field(default_factory=list)
    #: the engine whose code ran (transformers here; another engine fills the same records)
    engine: str = "transformers"
    #: what the model changed of its own accord during the run (:func:`switched`: BigBird's attention type)
    notes: list[str] = field(default_factory=list)
    #: a document model's relative-bias tables, by parameter name (:func:`survey.layout_bias.bias_weights`)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
