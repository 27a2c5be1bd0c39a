"""The survey's comparison can fail: a deliberately wrong claim is a mismatch, the correct one is exact.

For one model of each encoding (transformers' own code, tiny geometry), the claim a correct resolver makes
is written here from refpos's functions and the config's values, and checked exact within the survey's
bounds (the bound admits the correct form); then one thing about it is changed (a layout, a base, an
offset, a bucket count, a slope, which layers attend) and the comparison must report a mismatch.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

import refpos
from survey.claims import LayerClaim, Resolution
from survey.compare import compare


def statuses(claims: list[LayerClaim], probe) -> set[str]:
    return {r.status for r in compare(Resolution(tuple(claims)), probe).layers}


def rope_claims(config: dict, **change) -> list[LayerClaim]:
    rope = dataclasses.replace(refpos.models.hf_layers(config)[0].rope, **change)
    n = config.get("num_hidden_layers") or config["n_layer"]
    return [LayerClaim("decoder", i, "rope", rope=rope) for i in range(n)]


@pytest.mark.parametrize("change", [{}, {"layout": "interleaved"}, {"theta": 20000.0}],
                         ids=["correct", "layout", "theta"])
@pytest.mark.parametrize("name", ["llama", "gptj"])  # GPT-J hands its layers (sin, cos), not (cos, sin)
def test_rope_claims(observed, name, change):
    config, probe = observed(name)
    if name == "gptj":
        change = {"layout": "half"} if change.get("layout") else change
    found = statuses(rope_claims(config, **change), probe)
    assert found == {"exact"} if not change else "mismatch" in found, found


def test_a_layer_said_to_have_no_positions_or_no_attention_is_caught(observed):
    config, probe = observed("llama")
    claims = rope_claims(config)
    assert statuses([dataclasses.replace(claims[0], kind="none", rope=None), *claims[1:]], probe) == {
        "exact", "mismatch"}
    assert "mismatch" in statuses([LayerClaim("decoder", 0, "no_attention"), *claims[1:]], probe)
    assert "mismatch" in statuses(claims[:-1], probe)  # a layer refpos forgot


def test_layers_without_attention(observed):
    config, probe = observed("qwen3_next")
    schedule = refpos.models.hf_layers(config)
    correct = [LayerClaim("decoder", x.index, "rope", rope=x.rope) if x.attention else
               LayerClaim("decoder", x.index, "no_attention") for x in schedule]
    assert statuses(correct, probe) == {"exact"}
    rope = next(x.rope for x in schedule if x.attention)
    every = [LayerClaim("decoder", x.index, "rope", rope=rope) for x in schedule]  # linear layers said to rotate
    assert "mismatch" in statuses(every, probe)


def learned_claims(config: dict, offset: int, rows: tuple[str, ...] = ("position_ids",)) -> list[LayerClaim]:
    """A learned table at the decoder's input read at ``rows`` (the ids passed, else the slot; OPT's: else the
    mask's count) plus ``offset``."""
    return [LayerClaim("decoder", i, "learned", params={"offset": offset, "table_size": config["n_positions"]},
                       reads={"rows": rows}) for i in range(config["n_layer"])]


@pytest.mark.parametrize(("name", "offset"), [("gpt2", 0), ("opt", 2)])
def test_learned_offsets(observed, name, offset):
    config, probe = observed(name)
    rows = ("position_ids",)
    if name == "opt":  # given no ids (a case of the survey), OPT reads its table at the mask's count
        config = {**config, "n_layer": config["num_hidden_layers"],
                  "n_positions": config["max_position_embeddings"] + 2}
        rows = ("position_ids", "mask_count")
        assert "mismatch" in statuses(learned_claims(config, offset), probe)  # the slot: wrong at the padding
    assert statuses(learned_claims(config, offset, rows), probe) == {"exact"}
    assert "mismatch" in statuses(learned_claims(config, 2 - offset, rows), probe)
    assert "mismatch" in statuses([LayerClaim("decoder", i, "none") for i in range(config["n_layer"])], probe)


def t5_claims(config: dict, num_buckets: int) -> list[LayerClaim]:
    def buckets(bidirectional):
        return lambda q, k: refpos.to_numpy(refpos.encodings.t5_bucket(
            np.asarray(k)[None, :] - np.asarray(q)[:, None], bidirectional=bidirectional, num_buckets=num_buckets,
            max_distance=config["relative_attention_max_distance"]))
    return [LayerClaim(stack, i, "t5", params={"owns_table": i == 0, "table_layer": 0,
                                               "buckets": buckets(stack == "encoder")})
            for stack, n in (("encoder", config["num_layers"]), ("decoder", config["num_decoder_layers"]))
            for i in range(n)]


def test_t5_buckets(observed):
    config, probe = observed("t5")
    assert statuses(t5_claims(config, config["relative_attention_num_buckets"]), probe) == {"exact"}
    assert "mismatch" in statuses(t5_claims(config, config["relative_attention_num_buckets"] // 2), probe)
    everyone = [dataclasses.replace(c, params={**c.params, "owns_table": True})
                for c in t5_claims(config, config["relative_attention_num_buckets"])]
    assert "mismatch" in statuses(everyone, probe)  # umT5's rule on a T5 model


def alibi_claims(config: dict, slopes: np.ndarray) -> list[LayerClaim]:
    def bias(q, k):
        return np.broadcast_to(slopes[:, None, None] * np.asarray(k, dtype=np.float64)[None, None, :],
                               (slopes.size, len(q), len(k)))
    # BLOOM's keys count the attention mask's ones (a masked token inside the sequence shows it)
    return [LayerClaim("decoder", i, "alibi", params={"bias": bias}, reads={"key": ("mask_cumsum",)})
            for i in range(config["n_layer"])]


def test_alibi_slopes(observed):
    config, probe = observed("bloom")
    slopes = refpos.to_numpy(refpos.encodings.alibi_slopes(config["n_head"]))
    assert statuses(alibi_claims(config, slopes), probe) == {"exact"}
    assert "mismatch" in statuses(alibi_claims(config, slopes[::-1].copy()), probe)


def test_a_query_scale_is_compared_from_its_value_at_position_0(observed):
    """Beam's layers without RoPE scale the query by (1 + (p + 1)/2048)^0.1, which is not 1 at position 0:
    the reference (run at position 0) carries that scale and the comparison divides it out. A scale that is
    off by its value at 0 (p instead of p + 1) is caught."""
    config, probe = observed("beam")
    answer = refpos.model_positions(config)
    claims = [LayerClaim("decoder", r.index, "rope" if r.kind == "rope" else "none",
                         rope=getattr(r, "rope", None), query_scale=r.query_scale) for r in answer.layers]
    assert any(c.query_scale is not None for c in claims)
    assert statuses(claims, probe) == {"exact"}

    def off_by_one(p):
        return np.exp(0.1 * np.log1p(np.asarray(p, dtype=np.float64) / 2048.0))
    wrong = [dataclasses.replace(c, query_scale=off_by_one) if c.query_scale is not None else c for c in claims]
    assert "mismatch" in statuses(wrong, probe)


def test_only_the_attention_modules_that_ran_are_layers(observed):
    """FLAVA computes attention inline and runs its text encoder alone on token ids: its image encoder's
    attention modules never ran, so they are no layers refpos must resolve."""
    from survey import adaptor

    config, probe = observed("flava")
    assert probe.module_types and not any(path.startswith("image_model") for path in probe.module_types)
    assert "mismatch" not in {r.status for r in compare(adaptor.resolve(config), probe).layers}


def test_hooks_are_removed_when_the_forward_raises():
    """survey.probe.removed: a model that raises mid-run leaves no hook behind for the next run."""
    torch = pytest.importorskip("torch", reason="the survey's runs need torch")
    from survey.probe import removed

    class Failing(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("broken model")

    model = Failing()
    handles = [model.register_forward_hook(lambda *a: None), model.register_forward_pre_hook(lambda *a: None)]
    with pytest.raises(RuntimeError, match="broken model"), removed(handles):
        model(torch.zeros(1))
    assert not model._forward_hooks and not model._forward_pre_hooks
