"""The timm architectures the ``timm_wrapper`` row states (its ``architecture`` switch), against the networks
transformers' ``TimmWrapperModel`` builds from them (anchors env).

The row answers ``no_attention`` (a convolutional network: no attention, no position) for each architecture its
switch lists, and refuses any other by name. For each listed architecture the anchor builds the wrapper, runs it on
an image, and finds no module whose class is an attention and no parameter or buffer named for positions; the same
anchor fails on a row that lists a timm ViT (attention over a learned ``pos_embed``), and an unlisted architecture
is refused. Counts and names only: no value is compared.
"""

from __future__ import annotations

import dataclasses

import pytest

import refpos
from refpos.models import families

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytest.importorskip("timm", reason="timm is not installed (the wrapper builds its architectures)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import build, position_tables  # noqa: E402  (after the importorskip of torch)

#: the architectures the row states (its switch's values)
LISTED = [value for value, _ in families.FAMILIES["timm_wrapper"].switch.values]
#: a timm architecture with attention and a learned position table
VIT = "vit_tiny_patch16_224"


def _config(architecture: str):
    return transformers.TimmWrapperConfig(architecture=architecture, do_pooling=False,
                                          model_args={"features_only": True})


@pytest.mark.parametrize("architecture", LISTED)
def test_a_listed_architecture_has_no_attention_and_no_position(architecture):
    _has_no_attention_and_no_position(_config(architecture), architecture)


def _has_no_attention_and_no_position(config, architecture: str) -> None:
    """refpos answers ``config`` with one no-attention record, and the network transformers builds from it holds no
    attention module and no position table, and runs on an image of another aspect (no table fixes its size)."""
    (record,) = refpos.model_positions(config.to_dict())
    assert record.kind == "no_attention" and not record.attention, architecture
    model = build(config)
    found = [name for name, module in model.named_modules() if isinstance(module, torch.nn.MultiheadAttention)
             or any(word in type(module).__name__ for word in ("Attention", "Attn"))]
    assert not found, f"{architecture} has attention modules {found[:3]}"
    assert not position_tables(model), architecture
    with torch.no_grad():
        model(torch.zeros(1, 3, 64, 96, dtype=torch.float64))


def test_an_unlisted_architecture_is_refused_by_name():
    positions = refpos.model_positions(_config(VIT).to_dict())
    assert [r.kind for r in positions] == ["refused"] and not positions.complete
    assert f"architecture={VIT}" in positions.not_modelled["architecture"]


def test_the_anchor_fails_on_a_row_listing_a_vit(monkeypatch):
    """A row claiming a timm ViT has no attention fails the anchor above."""
    row = families.FAMILIES["timm_wrapper"]
    switch = dataclasses.replace(row.switch, values=(*row.switch.values, (VIT, "no_attention")))
    monkeypatch.setitem(families.FAMILIES, "timm_wrapper", dataclasses.replace(row, switch=switch))
    with pytest.raises(AssertionError, match="attention modules"):
        test_a_listed_architecture_has_no_attention_and_no_position(VIT)


#: the architectures the ``timm_backbone`` row states (its ``backbone`` switch)
BACKBONES = [value for value, _ in families.FAMILIES["timm_backbone"].switch.values]


@pytest.mark.parametrize("architecture", BACKBONES)
def test_a_listed_backbone_has_no_attention_and_no_position(architecture):
    """``TimmBackbone`` (DETR's and Table Transformer's image backbone) built from each architecture its row lists:
    no attention module, no position table, and it runs on an image of another aspect."""
    config = transformers.TimmBackboneConfig(backbone=architecture, out_indices=(1, 2, 3, 4))
    _has_no_attention_and_no_position(config, architecture)


def test_a_backbone_the_row_does_not_list_or_none_is_refused_by_name():
    for backbone, text in ((VIT, VIT), (None, "null")):
        positions = refpos.model_positions(transformers.TimmBackboneConfig(backbone=backbone).to_dict())
        assert [r.kind for r in positions] == ["refused"] and not positions.complete
        assert f"backbone={text}" in positions.not_modelled["backbone"]
