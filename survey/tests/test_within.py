"""A part without a model class of its own (SAM's prompt encoder, a T5Gemma module) is run inside the composite
that holds it: its row says so where the part's module ran there, and stays not run, with why, where it did not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from survey import within

torch = pytest.importorskip("torch", reason="runs torch modules: pip install torch")


class Part(torch.nn.Module):
    def forward(self, x):
        return x + 1


class Composite(torch.nn.Module):
    """A composite model with a part that runs (``prompt_encoder``) and one that does not (``head``)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompt_encoder = Part()
        self.vision_tower = Part()
        self.head = Part()

    def forward(self, x):
        return self.vision_tower(self.prompt_encoder(x))


def _observe(ran: bool):
    def observe(holder):
        if ran:
            Composite()(torch.zeros(2))
        return SimpleNamespace(row=SimpleNamespace(observed=["grid"] if ran else [], notes=["run on its pixel_values"]))
    return observe


@pytest.fixture
def one_holder(monkeypatch):
    holder = SimpleNamespace(name="composite", config=lambda: None)
    monkeypatch.setattr(within, "holders", lambda config_class: [holder])
    return holder


@pytest.mark.parametrize(("field", "ran", "expected"), [
    ("prompt_encoder_config", True, "prompt_encoder (Part) ran in Composite's forward, run on its pixel_values"),
    ("vision_config", True, "vision_tower (Part) ran"),
    ("head_config", True, None),
    ("prompt_encoder_config", False, None),
])
def test_a_part_is_run_within_its_composite_only_where_its_module_ran(monkeypatch, one_holder, field, ran, expected):
    monkeypatch.setattr(within, "field_of", lambda holder, config_class: field)
    row = SimpleNamespace(observed=[], cause="", notes=[])
    assert within.observe_within(object(), row, _observe(ran)) is (expected is not None)
    if expected is None:
        assert row.observed == [] and row.notes[-1].startswith("not run within a composite either: composite")
    else:
        assert row.observed == ["run within composite"] and expected in row.cause


def test_the_composites_holding_a_part_are_found_from_their_sub_configs():
    pytest.importorskip("transformers", reason="reads transformers' config classes")
    from transformers import CONFIG_MAPPING

    names = [holder.name for holder in within.holders(CONFIG_MAPPING["sam_prompt_encoder"])]
    assert "sam" in names and "sam_prompt_encoder" not in names
    assert within.field_of(CONFIG_MAPPING["sam"], CONFIG_MAPPING["sam_prompt_encoder"]) == "prompt_encoder_config"


def test_a_part_run_within_its_composite_is_one_encoding_on_the_page():
    from survey import table

    assert table.encoding_of({"observed": ["run within sam"]}) == "run within its composite"
    assert table.encoding_of({"observed": []}) == "not run"
    assert not table.not_run({"observed": ["run within sam_hq"]})


def test_the_hook_is_removed_when_the_composite_fails(monkeypatch, one_holder):
    """The forward hook on every module is process-wide: a composite whose observation raises must not leave it
    behind (every later model would record into a dead list)."""
    monkeypatch.setattr(within, "field_of", lambda holder, config_class: "prompt_encoder_config")
    hooks = torch.nn.modules.module._global_forward_hooks
    before = len(hooks)

    def failing(holder):
        raise RuntimeError("the composite did not build")

    with pytest.raises(RuntimeError, match="did not build"):
        within.observe_within(object(), SimpleNamespace(observed=[], cause="", notes=[]), failing)
    assert len(hooks) == before
