r"""The RoPE of the DeepSeek Sparse Attention (DSA) indexer: DeepSeek-V3.2, GLM-5 (``glm_moe_dsa``) and A.X-K2.

A DSA layer scores every key for every query with a small *indexer* before its attention, and attends to the
``index_topk`` best keys only. The indexer has its own heads, of ``index_head_dim`` channels, and rotates their
first ``qk_rope_head_dim`` channels with the model's rotary tables (the same ω and attention factor as the
main attention, whatever its ``rope_type``), leaving the rest unrotated:

.. math:: \tilde q = (R_{p}\,q_{[0, d)},\ q_{[d, D_I)}), \qquad d = \text{qk\_rope\_head\_dim},\
          D_I = \text{index\_head\_dim},

with the pairs laid out as the family's indexer code does (one record of :data:`INDEXER_ROPES` per family):

=================  ================  ==========================================================================
model_type         layout            transformers 5.24
=================  ================  ==========================================================================
``deepseek_v32``   ``half``          ``DeepseekV32Indexer.forward``: ``apply_rotary_pos_emb`` (rotate_half), while
                                     the main MLA attention reads interleaved pairs
``glm_moe_dsa``    ``deinterleaved`` ``GlmMoeDsaIndexer.forward``: ``apply_rotary_pos_emb_interleave`` (pairs
                                     ``(2j, 2j+1)`` in, written half-split)
``axk2``           ``half``          ``AXK2Indexer.forward`` (transformers 5.25): ``apply_rotary_pos_emb``
                                     (rotate_half), while the main MLA attention de-interleaves its pairs
=================  ================  ==========================================================================

GLM-5 runs its own indexer on the layers ``indexer_types`` marks ``"full"``; a ``"shared"`` layer reuses the top-k
of the full layer before it and rotates nothing of its own (:func:`indexer_layers`).

The indexer's scores are dot products of rotated queries and keys, so a layout and its de-interleaved twin
give the same scores; the record states what the code writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from refpos.models.kinds.rope import RopeLayer
from refpos.models.records import LayerRecord
from refpos.rope.config import RopeConfig
from refpos.validation import check_int


@dataclass(frozen=True)
class IndexerRope:
    """How one family's DSA indexer rotates: its pair layout and the code it was read from."""

    family: str
    layout: str
    source: str
    #: which layers run an indexer: ``"every"``, or ``"indexer_types"`` (GLM-5's full / shared list)
    layers: str = "every"


#: model_type -> its indexer's RoPE
INDEXER_ROPES: dict[str, IndexerRope] = {row.family: row for row in (
    IndexerRope("deepseek_v32", "half", "deepseek_v32/modeling_deepseek_v32.py: DeepseekV32Indexer.forward"),
    IndexerRope("glm_moe_dsa", "deinterleaved", "glm_moe_dsa/modeling_glm_moe_dsa.py: GlmMoeDsaIndexer.forward",
                layers="indexer_types"),
    IndexerRope("axk2", "half", "axk2/modeling_axk2.py: AXK2Indexer.forward"),
)}


def indexer_rope(config: Mapping[str, Any], main: RopeConfig) -> RopeConfig | None:
    """The indexer's :class:`RopeConfig` of a DSA model, from its config and its main attention's RoPE ``main``
    (the same ω and attention factor); ``None`` for a family without a DSA indexer.

    Raises
    ------
    ValueError
        ``index_head_dim`` or ``qk_rope_head_dim`` missing or not an int, or the rotated part wider than the head.
    """
    row = INDEXER_ROPES.get(config.get("model_type"))  # type: ignore[arg-type]
    if row is None:
        return None
    if not isinstance(main, RopeConfig):
        raise TypeError(f"main must be a RopeConfig, got {type(main).__name__}")
    head = check_int("index_head_dim", config.get("index_head_dim"), minimum=2)
    rotated = check_int("qk_rope_head_dim", config.get("qk_rope_head_dim"), minimum=2)
    if rotated > head:
        raise ValueError(f"qk_rope_head_dim={rotated} exceeds index_head_dim={head}: the indexer rotates the first "
                         f"qk_rope_head_dim channels of its heads")
    return dataclasses.replace(main, head_dim=head, rotary_dim=rotated, partial_rotary_factor=None,
                               placement="first", layout=row.layout)


def with_indexers(layers: list[LayerRecord], config: Mapping[str, Any]) -> list[LayerRecord]:
    """The layer records with each RoPE layer that runs an indexer holding its indexer's RoPE (a DSA family's
    decoder; every other config's records unchanged)."""
    if config.get("model_type") not in INDEXER_ROPES:
        return layers
    runs = indexer_layers(config, len(layers))
    return [dataclasses.replace(layer, indexer=indexer_rope(config, layer.rope))
            if isinstance(layer, RopeLayer) and runs[layer.index] else layer for layer in layers]


def indexer_layers(config: Mapping[str, Any], n_layers: int) -> tuple[bool, ...]:
    r"""Which of the ``n_layers`` layers run an indexer of their own (and so its RoPE).

    DeepSeek-V3.2: every layer. GLM-5: the layers whose ``indexer_types`` entry is ``"full"``; without the list,
    transformers derives it from ``index_topk_pattern`` (``F``/``S`` per layer), else layer ``i`` is full when
    :math:`\max(i - o + 1, 0) \bmod f = 0` with ``f = max(index_topk_freq, 1)`` (1) and
    ``o = index_skip_topk_offset`` (2) (``GlmMoeDsaConfig.__post_init__``).
    """
    n_layers = check_int("n_layers", n_layers, minimum=0)
    row = INDEXER_ROPES.get(config.get("model_type"))  # type: ignore[arg-type]
    if row is None:
        return (False,) * n_layers
    if row.layers == "every":
        return (True,) * n_layers
    types = config.get("indexer_types")
    if types is None and config.get("index_topk_pattern") is not None:
        pattern = config["index_topk_pattern"]
        types = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern] if isinstance(pattern, str) else pattern
    if types is None:
        freq = max(check_int("index_topk_freq", config.get("index_topk_freq", 1)), 1)
        offset = check_int("index_skip_topk_offset", config.get("index_skip_topk_offset", 2))
        return tuple(max(i - offset + 1, 0) % freq == 0 for i in range(n_layers))
    if not isinstance(types, (list, tuple)) or len(types) != n_layers or any(t not in ("full", "shared")
                                                                              for t in types):
        raise ValueError(f"indexer_types must list 'full' or 'shared' for each of the {n_layers} layers, got "
                         f"{types!r}")
    return tuple(t == "full" for t in types)
