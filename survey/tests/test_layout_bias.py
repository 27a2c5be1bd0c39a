"""LayoutLMv3's relative layout bias in the survey (survey.layout_bias): its bucket tables kept with the probe,
refpos's answer (the box rows and the 1-D learned table at the input, the layout bias in every layer) exact, every
mutant graded wrong, and a claim with the wrong tables, bucket functions or boxes not passed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey import adaptor, mutants
from survey.compare import compare
from survey.layout_bias import check_layout_bias


def test_layoutlmv3_s_answer_is_exact_and_every_mutant_is_caught(observed):
    config, probe = observed("layoutlmv3")
    assert sorted(name.rsplit(".", 2)[-2] for name in probe.weights) == ["rel_pos_bias", "rel_pos_x_bias",
                                                                         "rel_pos_y_bias"]
    resolution = adaptor.resolve(config)
    assert resolution.refused is None, resolution.refused
    assert {c.kind for c in resolution.layers} == {"learned", "box_tables", "layout_bias"}
    results = compare(resolution, probe).layers
    assert results and all(r.status == "exact" for r in results), [(r.claim, r.status, r.cause) for r in results]
    bias = [r for r in results if r.claim == "layout_bias" and r.error]  # the bias's (beside each layer's q and k)
    assert len(bias) == config["num_hidden_layers"] and all(r.error < 1e-6 for r in bias)  # float32 rounding
    tried, survived = mutants.survivors(resolution, probe)
    names = [name for name, _ in mutants.mutants(resolution)]
    assert sum(n.startswith("layout bias:") for n in names) == 12
    assert survived == [] and tried >= 19


def test_a_claim_with_other_tables_functions_or_boxes_is_not_passed(observed):
    config, probe = observed("layoutlmv3")
    resolution = adaptor.resolve(config)
    claim = next(c for c in resolution.layers if c.kind == "layout_bias")
    path = "encoder.layer"
    record = claim.params["record"]

    def check(**changes):
        changed = dataclasses.replace(record, **changes)
        return check_layout_bias(dataclasses.replace(claim, params={**claim.params, "record": changed,
                                                                    "bias": changed.bias_at}), probe, path)

    assert check().status == "exact"
    assert check(rel="no_such_table").status == "mismatch"
    assert check(max_distance=record.max_distance + 1).status == "mismatch"  # past the 8 tokens: the swept function
    assert check(y_corner=1).status == "mismatch"
    fewer = dataclasses.replace(claim, params={**claim.params, "box_rows": claim.params["box_rows"] // 2})
    assert check_layout_bias(fewer, probe, path).status == "mismatch"  # other boxes than those fed
    shifted = dataclasses.replace(claim, params={**claim.params, "bias": lambda *a: np.asarray(
        record.bias_at(*a)) + 1e-5})
    assert check_layout_bias(shifted, probe, path).status == "mismatch"  # 1e-5 is many float32 bounds
