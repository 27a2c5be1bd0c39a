"""The position terms an attention adds in its own forward, judged on hand-made runs (no torch): Swin's gathered
table and Swin v2's continuous bias (``bias_table``), SAM's decomposed tables (``decomposed``) observed as the
logits with the key projection zero (survey/pixel_logits.py). refpos's own output is graded exact, every
catalogued mistake's output and a deliberately wrong claim wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import refpos
from survey.pixel_kinds import COMPARISONS, compare_bias_table
from survey.pixel_kinds.decomposed import compare_decomposed
from survey.pixels import Capture, PixelRun, Site

RNG = np.random.default_rng(41)
SWIN = {"model_type": "swin", "depths": [1], "num_heads": [2], "embed_dim": 8, "window_size": 3, "image_size": 24,
        "patch_size": 4}
SWINV2 = dict(SWIN, model_type="swinv2")
SAM = {"model_type": "sam_vision_model", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
       "image_size": 32, "patch_size": 8, "window_size": 2, "global_attn_indexes": [1]}


def record_of(config, kind, index=0):
    return [r for r in refpos.model_positions(config).layers if r.kind == kind][index]


def logits_capture(terms, rows=None, query=None, windows=2):
    """The logits of ``terms`` ``(H, N, N)`` as an attention over ``windows`` windows records them in a float64
    run (the other windows' matrices after the first's), at query rows ``rows``."""
    rows = np.arange(terms.shape[1]) if rows is None else np.asarray(rows)
    matrices = np.concatenate([terms] * windows)[:, rows]
    return Capture(logits=matrices, logit_rows=rows, query=query)


def stored(shape):
    """Seeded weights as a float32 run stores them (float32 values, held in float64)."""
    return RNG.standard_normal(shape).astype(np.float32).astype(np.float64)


def swin_run(record, observed_as):
    from refpos.encodings.bias_table_mistakes import BiasTableInputs

    table = stored((25, 2))
    inputs = BiasTableInputs("swin", record.window, table=table)
    path = "encoder.layers.0.blocks.0.attention.self.relative_position_bias_table"
    site = Site(path, "encoder.layers.0.blocks.0.attention.self", False, {path: table.astype(np.float32)},
                captures={"native": logits_capture(observed_as(inputs), rows=[0, 4, 8])})
    return inputs, PixelRun("SwinModel", "pixel_values", {"native": [1, 3, 24, 24]}, [site],
                            attention=["SwinSelfAttention"], dtype="float64")


def swinv2_run(record, observed_as):
    from refpos.encodings.bias_table_mistakes import BiasTableInputs

    w1, b1, w2 = stored((2, 16)), stored(16), 0.3 * stored((16, 2))
    inputs = BiasTableInputs("swinv2", record.window, mlp=(w1, b1, w2), pretrained_window=record.pretrained_window)
    path = "encoder.layers.0.blocks.0.attention.self.continuous_position_bias_mlp"
    site = Site(path, "encoder.layers.0.blocks.0.attention.self", True,
                {f"{path}.0.weight": w1.T.astype(np.float32), f"{path}.0.bias": b1.astype(np.float32),
                 f"{path}.2.weight": w2.T.astype(np.float32)},
                captures={"native": logits_capture(observed_as(inputs))})
    return inputs, PixelRun("Swinv2Model", "pixel_values", {"native": [1, 3, 24, 24]}, [site],
                            attention=["Swinv2SelfAttention"], dtype="float64")


@pytest.mark.parametrize(("config", "build"), [(SWIN, swin_run), (SWINV2, swinv2_run)])
def test_a_bias_gathered_inside_attention_is_exact_and_each_mistake_is_wrong(config, build):
    from refpos.check.kinds import BY_KIND

    record = record_of(config, "bias_table")
    _inputs, run = build(record, lambda inputs: inputs.reference())
    outcome = compare_bias_table(record, run, run.sites)
    assert outcome.status == "exact" and outcome.survived == [] and outcome.tried >= 4, outcome
    check = BY_KIND["bias_table"]
    shown = 0
    for name in check.mistakes:
        inputs, wrong_run = build(record, lambda inputs, name=name: inputs.reference()
                                  if check.wrong(inputs, name) is None else check.wrong(inputs, name))
        if check.wrong(inputs, name) is None:
            continue
        shown += 1
        assert compare_bias_table(record, wrong_run, wrong_run.sites).status == "wrong", name
    assert shown == outcome.tried


def test_a_wrong_bias_table_claim_is_graded_wrong():
    record = record_of(SWIN, "bias_table")
    _inputs, run = swin_run(record, lambda inputs: inputs.reference())
    for claim in (dataclasses.replace(record, window=(2, 2)), dataclasses.replace(record, n_heads=3),
                  dataclasses.replace(record, form="swinv2")):
        assert COMPARISONS["bias_table"].judge(claim, run, run.sites).status == "wrong", claim
    record = record_of(SWINV2, "bias_table")
    _inputs, run = swinv2_run(record, lambda inputs: inputs.reference())
    claim = dataclasses.replace(record, pretrained_window=(6, 6))
    assert COMPARISONS["bias_table"].judge(claim, run, run.sites).status == "wrong"


def sam_run(observed_as, table_rows=None, shapes=(("native", (1, 3, 32, 32)), ("resampled", (1, 3, 32, 48)))):
    """SAM's two layers (a window of 2, the 4 × 4 patch grid); the global layer's tables of ``table_rows`` rows
    (resampled where not 7); each layer's logits those of ``observed_as(terms inputs)``."""
    from refpos.encodings.decomposed_mistakes import DecomposedInputs

    sites, inputs = [], []
    for layer, (rows, grids) in enumerate(((3, {"native": (2, 2), "resampled": (2, 2)}),
                                           (table_rows or 7, {"native": (4, 4), "resampled": (4, 6)}))):
        owner = f"vision_encoder.layers.{layer}.attn"
        query = RNG.standard_normal(8).astype(np.float32)
        tables = {axis: stored((rows, 4)).astype(np.float32) for axis in "hw"}
        captures = {}
        for size, _shape in shapes:
            grid = grids[size]
            n = grid[0] * grid[1]
            terms = DecomposedInputs(np.broadcast_to(query.astype(np.float64).reshape(2, 1, 4), (2, n, 4)),
                                     tables["h"].astype(np.float64), tables["w"].astype(np.float64), grid, grid)
            inputs.append(terms)
            captures[size] = logits_capture(np.asarray(observed_as(terms)), query=query)
        for axis in "hw":
            sites.append(Site(f"{owner}.rel_pos_{axis}", owner, False, {f"{owner}.rel_pos_{axis}": tables[axis]},
                              captures=captures if axis == "h" else {s: Capture() for s, _ in shapes}))
    return inputs, PixelRun("SamVisionModel", "pixel_values", {s: list(shape) for s, shape in shapes}, sites,
                            attention=["SamVisionAttention"], dtype="float64")


def judge_sam(records, run):
    sites, outcomes = list(run.sites), []
    for record in records:
        outcomes.append(compare_decomposed(record, run, sites))
        sites = [s for s in sites if s.path not in outcomes[-1].sites]
    return outcomes, sites


@pytest.mark.parametrize("table_rows", [None, 9])
def test_decomposed_terms_are_exact_and_each_mistake_is_wrong(table_rows):
    from refpos.encodings.decomposed_mistakes import DECOMPOSED_MISTAKES

    records = [r for r in refpos.model_positions(SAM).layers if r.kind == "decomposed"]
    _inputs, run = sam_run(lambda terms: terms.terms(), table_rows)
    outcomes, left = judge_sam(records, run)
    assert [o.status for o in outcomes] == ["exact", "exact"] and left == [], outcomes
    assert all(o.survived == [] for o in outcomes)
    for name, mistake in DECOMPOSED_MISTAKES.items():
        inputs, wrong_run = sam_run(lambda terms, m=mistake: m.compute(terms) if m.applies(terms) else terms.terms(),
                                    table_rows)
        if not any(mistake.applies(i) for i in inputs):
            continue
        outcomes, _ = judge_sam(records, wrong_run)
        assert "wrong" in [o.status for o in outcomes], name


def test_a_wrong_decomposed_claim_is_graded_wrong():
    records = [r for r in refpos.model_positions(SAM).layers if r.kind == "decomposed"]
    _inputs, run = sam_run(lambda terms: terms.terms())
    window, overall = records
    for claim in (dataclasses.replace(window, grid=(3, 3)), dataclasses.replace(overall, n_heads=4),
                  dataclasses.replace(overall, head_dim=2), dataclasses.replace(window, windowed=False, grid=(4, 4))):
        outcomes, _ = judge_sam([claim if r.index == claim.index else r for r in records], run)
        assert "wrong" in [o.status for o in outcomes], claim
