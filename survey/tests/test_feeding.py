"""survey.feeding (what a row's model is fed in place of the probe's ids) and survey.class_defaults (the config
classes that refuse their own defaults): each applies to the model types it names and to no other."""

from __future__ import annotations

import types

import pytest

from survey import class_defaults, feeding


def test_every_feeding_says_why_and_what_it_builds():
    for row, how in feeding.FEEDINGS.items():
        assert how.why and how.builds, row
        assert how.ids or how.beside or how.withheld or how.composite, row


def test_a_feeding_applies_to_its_row_and_the_model_it_names_only():
    clvp_encoder = types.SimpleNamespace(model_type="clvp_encoder")
    assert feeding.feeding("clvp", clvp_encoder) is feeding.FEEDINGS["clvp"]
    assert feeding.feeding("clvp_encoder", clvp_encoder) is None  # the encoder's own row is fed as before
    assert feeding.feeding("clvp", types.SimpleNamespace(model_type="clvp")) is None  # the composite itself
    assert feeding.feeding("dia", types.SimpleNamespace(model_type="dia_decoder")) is None
    assert feeding.feeding("llama", types.SimpleNamespace(model_type="llama")) is None


def test_fed_reshapes_the_ids_adds_what_is_beside_and_hides_what_is_withheld():
    torch = pytest.importorskip("torch", reason="wraps a torch module: pip install torch")
    import inspect

    seen = {}

    class Model(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, extra=None):
            seen.update(input_ids=input_ids, position_ids=position_ids, extra=extra)
            return input_ids

    how = feeding.Feeding("test", "x", ids=lambda config, ids: ids[..., None],
                          beside=lambda config, ids: {"extra": ids.shape[-1]}, withheld=("position_ids",))
    wrapped = feeding.wrap(Model(), None, how)
    assert list(inspect.signature(wrapped.forward).parameters) == ["input_ids", "attention_mask"]
    ids = torch.arange(6)[None]
    wrapped(ids, position_ids=ids)
    assert seen["input_ids"].shape == (1, 6, 1) and seen["position_ids"] is None and seen["extra"] == 6
    plain = feeding.wrap(Model(), None, feeding.Feeding("test", "x", ids=lambda config, ids: ids))
    plain(ids, position_ids=ids + 1)
    assert torch.equal(seen["position_ids"], ids + 1)


def test_class_defaults_build_a_refusing_class_and_leave_others_as_their_defaults():
    pytest.importorskip("transformers", reason="builds transformers' configs")
    from huggingface_hub.errors import StrictDataclassClassValidationError
    from transformers import AutoConfig

    for model_type, (why, _) in class_defaults.ARGUMENTS.items():
        assert why
        # a class that builds from its defaults needs no entry
        with pytest.raises((ValueError, StrictDataclassClassValidationError)):
            AutoConfig.for_model(model_type)
        assert class_defaults.for_model(model_type).model_type == model_type
    assert class_defaults.for_model("llama").to_dict() == AutoConfig.for_model("llama").to_dict()
