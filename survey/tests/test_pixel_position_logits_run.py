"""Position terms added inside an attention's own forward, observed in runs (survey/pixel_logits.py): on a small
torch attention the recorded logits are its bias exactly, its mask left out and its weights restored; on
transformers' Swin (a gathered table), Swin v2 (an MLP of log-spaced offsets) and ViTDet with decomposed tables
(resampled at the second size) refpos's answer is exact, every catalogued mistake told apart, and a deliberately
wrong claim graded wrong."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")

import refpos  # noqa: E402
from survey import pixel_compare  # noqa: E402
from survey.pixel_logits import position_logits  # noqa: E402
from survey.pixels import STACK  # noqa: E402


class Attention(torch.nn.Module):
    """Logits ``q·kᵀ + bias + mask``, the bias a parameter added in the forward (``fused``: one ``qkv``
    projection and a term ``q·r`` per key instead)."""

    def __init__(self, fused: bool = False):
        super().__init__()
        self.fused = fused
        if fused:
            self.qkv = torch.nn.Linear(4, 12)
        else:
            self.query, self.key = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
        self.bias = torch.nn.Parameter(torch.randn(3, 3, dtype=torch.float64))
        self.rows = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))

    def forward(self, x, attention_mask=None):
        q, k = self.qkv(x).split(4, dim=-1)[:2] if self.fused else (self.query(x), self.key(x))
        scores = q @ k.transpose(-1, -2) + (q @ self.rows.T if self.fused else self.bias)
        if attention_mask is not None:
            scores = scores + attention_mask
        return torch.nn.functional.softmax(scores, dim=-1) @ x


class Model(torch.nn.Module):
    def __init__(self, fused: bool = False):
        super().__init__()
        self.attn = Attention(fused).double()

    def forward(self, x):
        return self.attn(x, torch.full((3, 3), -100.0, dtype=torch.float64))


@pytest.mark.parametrize("fused", [False, True])
def test_the_logits_are_the_terms_added_inside_the_forward(fused):
    torch.manual_seed(0)
    model = Model(fused)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    recorded, raised = position_logits(model, {"x": torch.randn(1, 3, 4, dtype=torch.float64)}, ["attn"])
    logits, rows, query = recorded["attn"]
    assert raised == ""
    expected = query.astype(np.float64) @ model.attn.rows.detach().numpy().T if fused else \
        model.attn.bias.detach().numpy()
    # no mask and q·kᵀ = 0: the bias exactly, the term q·r up to the order of its four products
    np.testing.assert_allclose(logits[0], np.broadcast_to(expected, (3, 3)), rtol=0, atol=0 if not fused else 1e-14)
    assert list(rows) == [0, 1, 2] and query.shape == (4,)
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name


def test_a_forward_that_raises_records_nothing_and_says_what_it_raised():
    """A forward that fails with the projections replaced leaves no logits, and its error is kept for the row's
    cause (a swallowed error would read as "no softmax called"); the weights come back as they were."""
    torch.manual_seed(0)
    model = Model()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    recorded, raised = position_logits(model, {"x": torch.randn(1, 3, 5, dtype=torch.float64)}, ["attn"])
    assert recorded == {} and raised.startswith("RuntimeError: ")
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name


def _judged(observation, name):
    from survey.run import judge_quietly

    seen = observation(name)
    assert STACK in seen.stacks, seen.row.cause
    return seen, judge_quietly(seen)


@pytest.mark.parametrize(("name", "tried"), [("donut-swin", 48), ("swinv2", 84),
                                             ("vitdet[use_relative_position_embeddings=true]", 32)])
def test_terms_inside_attention_are_exact_on_transformers(observation, name, tried):
    _seen, row = _judged(observation, name)
    assert row.status == "exact", row.cause
    assert row.mutants >= tried and not row.survived


@pytest.mark.parametrize(("name", "kind", "wrong"), [
    ("donut-swin", "bias_table", {"window": (6, 6)}),
    ("swinv2", "bias_table", {"pretrained_window": (8, 8)}),
    ("vitdet[use_relative_position_embeddings=true]", "decomposed", {"grid": (13, 13)}),
    ("vitdet[use_relative_position_embeddings=true]", "decomposed", {"head_dim": 32}),
])
def test_a_wrong_claim_inside_attention_is_graded_wrong(observation, name, kind, wrong):
    seen, _ = _judged(observation, name)
    records = list(refpos.model_positions(seen.config).layers)
    target = next(r for r in records if r.kind == kind)
    claim = dataclasses.replace(target, **wrong)
    outcomes = pixel_compare.judge_records([claim if r is target else r for r in records], seen.stacks[STACK])
    assert "wrong" in [o.status for o in outcomes], wrong
