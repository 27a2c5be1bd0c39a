"""The slot plus one (``slot_plus_one``): PaliGemma's 1-indexed positions, which it builds when no ids are passed
(``arange(T) + past_seen_tokens + 1``), and all ColPali's language model turns by when called as its forward is
declared.

* the source reads the slot plus one from ``cache_position=``, from the attention mask's length, and for a fresh
  call; after ``position_ids`` it is read only where no ids are given;
* the rows: ColPali's language model, and PaliGemma's, read ``("position_ids", "slot_plus_one")``; a wrong offset
  (the slot) is told apart.
"""

from __future__ import annotations

import numpy as np
import pytest

import refpos
from refpos.models.kinds import KINDS
from refpos.models.sources import PARAMETERS, Given

TEXT = {"model_type": "gemma", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16}
VLM = {"model_type": "paligemma", "text_config": TEXT}


def test_the_slot_plus_one_from_every_input_that_gives_the_slot():
    source = ("slot_plus_one",)
    assert Given.of(cache_position=[3, 4, 5]).read(source, "query").tolist() == [4, 5, 6]
    assert Given.of(cache_position=[3, 4, 5]).read(source, "key").tolist() == [1, 2, 3, 4, 5, 6]
    assert Given.of(attention_mask=[1, 1, 1, 1], length=2).read(source, "query").tolist() == [3, 4]
    assert Given.of(length=3).read(source, "query").tolist() == [1, 2, 3]  # fresh: what PaliGemma builds
    assert Given.of(length=3).read(("position_ids", "cache_position"), "query").tolist() == [0, 1, 2]
    assert Given.of(length=3).read(("position_ids", "slot_plus_one"), "query").tolist() == [1, 2, 3]
    assert Given.of(positions=[7, 8, 9]).read(("position_ids", "slot_plus_one"), "query").tolist() == [7, 8, 9]
    assert PARAMETERS["slot_plus_one"] == "cache_position"
    with pytest.raises(ValueError, match="cache_position="):
        Given.of(positions=[1, 2]).read(source, "query")
    assert "slot_plus_one" in KINDS["rope"].reads


def test_colpali_and_paligemma_read_the_slot_plus_one():
    colpali = refpos.model_positions({"model_type": "colpali", "vlm_config": VLM})
    assert colpali.complete and colpali.summary() == "decoder layers 0-1: rope ×2"
    layer = colpali.layers[0]
    assert dict(layer.reads)["rotation"] == ("position_ids", "slot_plus_one")
    slots = np.arange(4)
    assert layer.rotation_positions(cache_position=slots).tolist() == [1, 2, 3, 4]
    paligemma = refpos.model_positions(VLM).layers[0]  # PaliGemmaModel.forward builds the same when given no ids
    assert dict(paligemma.reads)["rotation"] == ("position_ids", "slot_plus_one")
    # one place off: the slot plus one and the slot rotate a query differently
    q = np.random.default_rng(0).standard_normal((4, layer.rope.head_dim))
    turned = refpos.to_numpy(refpos.apply_rope(q, layer.rotation_positions(cache_position=slots), layer.rope))
    assert not np.allclose(turned, refpos.to_numpy(refpos.apply_rope(q, slots, layer.rope)))
