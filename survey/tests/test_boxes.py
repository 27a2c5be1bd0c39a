"""LayoutLM's box tables in the survey (survey.boxes): fed boxes of its config's rows beside its token ids,
refpos's answer (the 1-D learned table and the box tables at the input) exact, every catalogued mistake of the box
tables graded wrong; the boxes fed are valid rows, differ between x and y, and count up with no token."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey import adaptor, mutants
from survey.boxes import boxes_for, check_boxes
from survey.compare import compare


def test_the_boxes_fed_are_rows_of_their_tables_and_count_up_with_no_token():
    for rows, tokens in ((1024, 8), (16, 8), (8, 3), (64, 1)):
        b = boxes_for(rows, tokens)[0]
        x0, y0, x1, y1 = b.T
        assert b.shape == (tokens, 4) and b.min() >= 0 and b.max() < rows
        assert np.all(x1 > x0) and np.all(y1 > y0) and np.all(x1 - x0 < rows) and np.all(y1 - y0 < rows)
        if tokens > 1:
            assert not any(np.all(np.diff(c) == 1) for c in (x0, y0, x1, y1, y1 - y0, x1 - x0))
    np.testing.assert_array_equal(boxes_for(1024, 8), boxes_for(1024, 8))  # the judge makes them again
    with pytest.raises(ValueError, match="max_2d_position_embeddings"):
        boxes_for(7, 2)


def test_layoutlm_s_answer_is_exact_and_every_box_mistake_is_caught(observed):
    config, probe = observed("layoutlm")
    resolution = adaptor.resolve(config)
    assert resolution.refused is None, resolution.refused
    assert {c.kind for c in resolution.layers} == {"learned", "box_tables"}
    results = compare(resolution, probe).layers
    assert results and all(r.status == "exact" for r in results), [(r.claim, r.status, r.cause) for r in results]
    tried, survived = mutants.survivors(resolution, probe)
    names = [name for name, _ in mutants.mutants(resolution)]
    assert sum(n.startswith("box tables:") for n in names) == 7
    assert tried >= 9 and survived == []


def test_a_claim_reading_other_modules_or_no_boxes_is_not_passed(observed):
    config, probe = observed("layoutlm")
    claim = next(c for c in adaptor.resolve(config).layers if c.kind == "box_tables")
    record = claim.params["record"]
    other = dataclasses.replace(record, x="no_such_table", y="no_such_table_y", h="h0", w="w0")
    moved = dataclasses.replace(claim, params={**claim.params, "record": other})
    assert check_boxes(moved, probe).status == "mismatch"
    fewer = dataclasses.replace(record, rows=record.rows // 2)  # other boxes than those fed
    changed = dataclasses.replace(claim, params={**claim.params, "record": fewer, "reads": fewer.reads_at})
    assert check_boxes(changed, probe).status == "mismatch"
