"""The records model_positions builds for the vision, audio and time-series rows of every kind but the grid (its own
module), against the models transformers builds from the same config (anchors env).

Each test is parametrized over the family table's rows of one kind, so that a new row is anchored by adding it:

* networks without attention (``no_attention = {network = …}``): the model has no attention module at all;
* fixed 2-D sin–cos (``sincos2d``): ViT-MAE's table is the record's grid, column block first; DETR's sine map of a
  mask is the record's variant, its encoder and decoder layers and heads the model's, its object queries the
  model's table;
* decomposed relative positions: every attention module's ``rel_pos_h`` / ``rel_pos_w`` has the record's rows, its
  window the record's, its heads the record's; the absolute grid the model's ``pos_embed``;
* SAM's Fourier features: the Gaussian matrix is ``(2, m)``, the image-wide features the record's, the mask
  decoder's blocks and heads the model's;
* 1-D sinusoids and tables at an audio or time-series input: the model's table is the record's, row by row, and
  each stack's attention modules the record's layers.

Counts and shapes are exact; values within 1e-6 of their largest entry (transformers computes them in float32).
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import refpos
from refpos.models import families
from refpos.models.families import FAMILY_ROWS

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

from refpos.tests.model_anchors import (  # noqa: E402  (after the importorskip of torch)
    attention_modules,
    build,
    heads_of,
    position_tables,
    small_config,
)

#: float32 sines of arguments up to a few hundred: well within 1e-6 of the largest entry
VALUE_TOLERANCE = 1e-6
#: a small config's overrides per kind of model (keys the class must have to build at all)
DETR_SMALL = {"use_timm_backbone": False, "use_pretrained_backbone": False, "backbone": None, "num_queries": 5,
              "backbone_config": {"model_type": "resnet", "embedding_size": 8, "hidden_sizes": [8, 16],
                                  "depths": [1, 1], "out_features": ["stage2"]}}
TIME_SERIES_SMALL = {"prediction_length": 4, "context_length": 16}


def _rows(predicate) -> list[str]:
    return [row.model_type for row in FAMILY_ROWS if predicate(row)]


def _site(row, name: str) -> str | None:
    site = row.input_of(name) if row.stacks != "none" else None
    return None if site is None else site.encoding


NETWORK_ROWS = _rows(lambda row: "network" in dict(row.no_attention) and row.input is None)
SINCOS_ROWS = _rows(lambda row: "sincos2d" in row.encodings or (row.input is not None
                    and row.input.encoding == "sincos2d"))
DECOMPOSED_ROWS = _rows(lambda row: "decomposed" in row.encodings)
FOURIER_ROWS = _rows(lambda row: "fourier" in row.encodings or (row.input is not None
                     and row.input.encoding == "fourier"))
SEQUENCE_ROWS = _rows(lambda row: any(_site(row, name) in ("sinusoid1d", "sinusoidal", "learned")
                                      for name in ("audio", "vision", "encoder", "decoder"))
                      or "sinusoid1d" in row.encodings)


def _config(model_type: str, **override):
    extra = {**(DETR_SMALL if "detr" in model_type or ("transformer" in model_type and "series" not in model_type)
                else {}), **(TIME_SERIES_SMALL if "prediction_length" in _defaults(model_type) else {})}
    return small_config(model_type, **{**extra, **override})


def _defaults(model_type: str) -> dict:
    return transformers.AutoConfig.for_model(model_type).to_dict()


def _layers_by_stack(model) -> dict[str, list]:
    """The attention modules of each layer, grouped by the layer that holds them (its dotted name)."""
    layers: dict[str, list] = {}
    for name, module in attention_modules(model):
        layers.setdefault(name.rsplit(".", 1)[0], []).append(module)
    return layers


def _check_layers(model, positions, stacks: dict[str, str]) -> None:
    """Each refpos stack has as many records as the model has layers holding attention under its prefix, every one
    with the head count refpos's geometry reads."""
    layers = _layers_by_stack(model)
    for stack, prefix in stacks.items():
        held = [modules for name, modules in layers.items() if name.split(".")[0] == prefix or prefix == ""]
        assert len(held) == len(positions.stack(stack)), (stack, sorted(layers))


def _close(theirs, ours, *, largest_angle: float = 1.0) -> None:
    """Equal within the float32 bound of a sine table whose largest angle is ``largest_angle`` (at least the
    tolerance of its largest entry): the angle ``p·ω`` computed in float32 carries a relative error of at most
    ``2^-24`` from ω and ``2^-24`` from the product, and sin and cos half an ulp each, so
    ``|Δ| ≤ 2·largest_angle·2^-24 + 2^-24 ≤ 4·largest_angle·2^-24``."""
    theirs = np.asarray(theirs.detach() if torch.is_tensor(theirs) else theirs, dtype=np.float64)
    ours = np.asarray(ours, dtype=np.float64)
    assert theirs.shape == ours.shape
    bound = max(VALUE_TOLERANCE * max(1.0, float(np.abs(ours).max())), 4 * largest_angle * 2.0**-24)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=bound)


# ------------------------------------------------------------------------------------------ no attention
#: a row whose switch answers only the networks it names is asked about one of them (timm's backbone: a ResNet,
#: built without its pretrained weights); its class default names none and is refused
NAMED_NETWORKS = {"timm_backbone": {"backbone": "resnet18", "use_pretrained_backbone": False}}


@pytest.mark.parametrize("model_type", NETWORK_ROWS)
def test_a_network_without_attention_has_none(model_type):
    config = small_config(model_type, **NAMED_NETWORKS.get(model_type, {}))
    (record,) = refpos.model_positions(config.to_dict())
    assert record.kind == "no_attention" and not record.attention
    model = build(config)
    found = [name for name, module in model.named_modules() if isinstance(module, torch.nn.MultiheadAttention)
             or any(word in type(module).__name__ for word in ("Attention", "Attn"))]
    assert not found, f"{model_type} has attention modules {found[:3]}"
    assert not position_tables(model)
    if model_type in NAMED_NETWORKS:
        assert not refpos.model_positions(small_config(model_type).to_dict()).complete


# ------------------------------------------------------------------------------------------ sin–cos
@pytest.mark.parametrize("model_type", SINCOS_ROWS)
def test_sincos2d_records_are_the_model_s(model_type):
    config = _config(model_type)
    positions = refpos.model_positions(config.to_dict())
    model = build(config)
    records = [r for r in positions if r.kind == "sincos2d"]
    assert records
    if records[0].at == "input":  # a fixed table at the input (ViT-MAE)
        (site,) = records
        embeddings = next(m for m in model.modules() if type(m).__name__.endswith("Embeddings"))
        embeddings.patch_embeddings.projection._is_hf_initialized = False  # run the model's own initialisation
        embeddings.initialize_weights()
        table = embeddings.position_embeddings.detach()[0]
        _close(table, site.reference(height=site.grid[0], width=site.grid[1]))
        _check_layers(model, positions, {"vision": ""})
        return
    mask = torch.ones(1, 3, 5, dtype=torch.int64)
    mask[0, 2:, 3:] = 0
    module = next(m for m in model.modules() if type(m).__name__.endswith("SinePositionEmbedding"))
    if "shape" in inspect.signature(module.forward).parameters:
        theirs = module(shape=(1, 1, 3, 5), device="cpu", dtype=torch.float64, mask=mask)
    else:  # the older form: the feature map and its mask
        theirs = module(torch.zeros(1, 1, 3, 5, dtype=torch.float64), mask)
    theirs = theirs[0].permute(1, 2, 0)
    _close(theirs, records[0].reference(mask=mask[0].numpy()))
    _check_layers(model, positions, {"encoder": "encoder", "decoder": "decoder"})
    for record in positions.stack("decoder"):
        if record.kind == "sincos2d":
            assert record.query_rows == model.query_position_embeddings.num_embeddings
            default = families.FAMILIES[model_type].decoder.facts_of("sincos2d").queries_default
            assert default == _defaults(model_type)["num_queries"]
    heads = {heads_of(m) for _, m in attention_modules(model, within="encoder")}
    assert heads == {config.encoder_attention_heads}


# ------------------------------------------------------------------------------------------ decomposed
@pytest.mark.parametrize("model_type", DECOMPOSED_ROWS)
def test_decomposed_records_are_the_model_s(model_type):
    defaults = _defaults(model_type)
    switch = families.FAMILIES[model_type].switch.key
    facts = families.FAMILIES[model_type].positions.facts_of("decomposed")
    override = {switch: True, "image_size": 32, "patch_size": 8}
    if facts.window in defaults:  # windowed layers where the config class has windows (SegGPT's are all global)
        override.update({facts.window: 2, facts.layers: [1]})
    override.update({key: 32 for key in ("pretrain_image_size",) if key in defaults})
    config = small_config(model_type, **override)
    positions = refpos.model_positions(config.to_dict())
    records = [r for r in positions if r.kind == "decomposed"]
    model = build(config)
    tables = [(m.rel_pos_h.shape, m.rel_pos_w.shape, heads_of(m)) for m in model.modules() if hasattr(m, "rel_pos_h")]
    assert tables == [((r.table_rows[0], r.head_dim), (r.table_rows[1], r.head_dim), r.n_heads) for r in records]
    windows = [m.window_size for m in model.modules() if (hasattr(m, "window_size") and hasattr(m, "attn"))
               or (type(m).__name__.endswith("Layer") and hasattr(m, "window_size"))]
    assert [w > 0 for w in windows] == [r.windowed for r in records] or (not windows and not any(
        r.windowed for r in records) and facts.window not in defaults)  # no window anywhere in its code: global
    grid = [r for r in positions if r.kind == "grid"]
    if grid:
        shape = next(s for n, s in position_tables(model).items() if "pos_embed" in n or "position_embeddings" in n)
        assert int(np.prod(shape[:-1])) == grid[0].table_rows and shape[-1] == grid[0].dim


# ------------------------------------------------------------------------------------------ Fourier
#: the composites whose parts are the Fourier rows (a prompt encoder and a mask decoder are built inside them)
FOURIER_COMPOSITES = sorted(row.model_type for row in FAMILY_ROWS if set(dict(row.parts).values()) & set(FOURIER_ROWS))
#: SAM's vision tower shrunk (its ViT's keys); SAM 3's composites shrink their ViT backbone instead
SAM_VISION = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 64, "patch_size": 16,
              "window_size": 2, "global_attn_indexes": [1], "num_pos_feats": 16, "output_channels": 32}
SAM3_VISION = {"backbone_config": {"model_type": "sam3_vit_model", "hidden_size": 32, "num_hidden_layers": 2,
                                   "num_attention_heads": 2, "intermediate_size": 16, "window_size": 2,
                                   "global_attn_indexes": [1]}}


@pytest.mark.parametrize("model_type", FOURIER_COMPOSITES)
def test_sam_fourier_records_are_the_model_s(model_type):
    """A SAM-style model: its Gaussian matrix is (2, m) for both Fourier records, its image-wide features the
    record's, its mask decoder's blocks and heads the record's."""
    config = small_config(model_type, vision_config=SAM3_VISION if model_type.startswith("sam3") else SAM_VISION,
                          prompt_encoder_config={"hidden_size": 32, "image_size": 64, "patch_size": 16},
                          mask_decoder_config={"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                                               "mlp_dim": 16, "iou_head_hidden_dim": 16})
    positions = refpos.model_positions(config.to_dict())
    model = build(config)
    gaussian = model.shared_image_embedding.positional_embedding.detach()
    prompts, = positions.stack("prompt_encoder.input")
    grid_records = positions.stack("mask_decoder")
    assert tuple(gaussian.shape) == (2, prompts.m) == (2, grid_records[0].m)
    side = config.prompt_encoder_config.image_size // config.prompt_encoder_config.patch_size
    theirs = model.get_image_wide_positional_embeddings()[0].permute(1, 2, 0)
    _close(theirs, grid_records[0].reference(gaussian.numpy(), grid=(side, side)))
    blocks = model.mask_decoder.transformer.layers
    assert len(blocks) == len(grid_records)
    assert {heads_of(block) for block in blocks} == {config.mask_decoder_config.num_attention_heads}


# ------------------------------------------------------------------------------------------ 1-D tables
def _table_of(model, record):
    """The model's table of the record's stack: its rows as the model adds them (a buffer, a frozen table, or the
    module called on positions 0 … n − 1)."""
    prefix = record.stack.split(".")[0]
    owner = model
    for part in (prefix,) if hasattr(model, prefix) and prefix in ("encoder", "decoder") else ():
        owner = getattr(model, part)
    found = [(n, m) for n, m in owner.named_modules() if any(
        word in type(m).__name__ for word in ("Positional", "PositionEmbedding", "Sinusoid", "PositionEncoding"))]
    tensors = {n: t for n, t in owner.named_parameters()} | {n: t for n, t in owner.named_buffers()}
    for name in ("embed_positions.weight", "embed_positions.weights", "positional_embedding.positional_embedding",
                 "pos_emb.positional_embedding", "positional_encoder.position_enc", "embed_positions.pe"):
        if name in tensors:
            return tensors[name].detach(), found
    if hasattr(owner, "embeddings") and torch.is_tensor(getattr(owner.embeddings, "position_embeddings", None)):
        return owner.embeddings.position_embeddings[0].double(), found
    return None, found


@pytest.mark.parametrize("model_type", SEQUENCE_ROWS)
def test_sequence_tables_are_the_model_s(model_type):
    config = _config(model_type)
    positions = refpos.model_positions(config.to_dict())
    refused = [r for r in positions if r.kind in ("refused", "unknown")]
    if refused and not families.FAMILIES[model_type].unmodelled:  # a mask reported not modelled leaves records
        pytest.fail(f"{model_type}: {positions.not_modelled}")
    model = build(config)
    records = [r for r in positions if r.kind in ("sinusoid1d", "sinusoidal", "learned")]
    for record in {r.stack: r for r in records}.values():
        table, modules = _table_of(model, record)
        if record.kind == "learned":
            assert table is None or tuple(table.shape) == (record.table_size, record.dim)
            weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding)
                       and m.weight.shape == (record.table_size, record.dim)]
            assert weights, f"no table of {record.table_size} × {record.dim} in {model_type}"
            continue
        if record.kind == "sinusoidal":
            _close(table, record.sinusoid(np.arange(table.shape[0])), largest_angle=table.shape[0])
            continue
        if record.at == "relative":  # the conformers' table of signed distances L − 1 … −(L − 1)
            length = 5
            module = next(m for _, m in modules if "RelPositional" in type(m).__name__)
            theirs = module(torch.zeros(1, length, record.dim, dtype=torch.float64))
            _close(theirs[0], record.reference(left=length - 1, right=length - 1), largest_angle=length)
            continue
        theirs = _module_rows(table, modules, record)
        _close(theirs, record.reference(positions=np.arange(record.past, record.past + theirs.shape[0])))


def _module_rows(table, modules, record):
    """The rows the model adds at positions past … past + n − 1 (n = 6)."""
    n = 6
    if table is not None and record.variant != "canary":
        return table.reshape(-1, table.shape[-1])[record.past:record.past + n] if record.variant != "patchtst" \
            else table.reshape(-1, table.shape[-1])
    module = modules[0][1]
    if record.variant == "canary":
        return module(torch.arange(n))
    if record.variant == "timesfm":
        return module(n)[0] if module(n).ndim == 3 else module(n)
    raise AssertionError(f"no table found for {record.stack} ({record.variant})")


#: the encoder–decoder forecasters, whose decoder's positions continue after the context
TIME_SERIES_ROWS = [t for t in SEQUENCE_ROWS if "lags_sequence" in _defaults(t)]


@pytest.mark.parametrize("model_type", TIME_SERIES_ROWS)
def test_time_series_stacks_start_where_the_row_says(model_type):
    """A forward pass of the model (float32: its scaler computes in it) calls each stack's position module at the
    record's first position (``cache_length``: the decoder continues after the context)."""
    config = _config(model_type)
    records = {r.stack.split(".")[0]: r for r in refpos.model_positions(config.to_dict()) if r.kind == "sinusoid1d"}
    model = build(config).float()
    seen = {}
    for stack in records:
        module = getattr(model, stack).embed_positions
        real = module.forward

        def spy(*args, _stack=stack, _real=real, **kwargs):
            seen[_stack] = kwargs.get("cache_length", 0)
            return _real(*args, **kwargs)

        module.forward = spy
    length, features = config.context_length + max(config.lags_sequence), config.num_time_features
    model(past_values=torch.randn(1, length), past_time_features=torch.randn(1, length, features),
          past_observed_mask=torch.ones(1, length), future_values=torch.randn(1, config.prediction_length),
          future_time_features=torch.randn(1, config.prediction_length, features))
    assert seen == {stack: record.past for stack, record in records.items()}


def test_the_sequence_anchor_fails_on_a_wrong_row(monkeypatch):
    """A row naming another sinusoid, or a decoder that starts at 0, fails the anchors above."""
    row = families.FAMILIES["informer"]
    site = row.input_of("decoder")
    for facts, anchor in (({"variant": "musicgen"}, test_sequence_tables_are_the_model_s),
                          ({"past": None}, test_time_series_stacks_start_where_the_row_says)):
        wrong_site = dataclasses.replace(site, facts=(
            ("sinusoid1d", dataclasses.replace(site.facts_of("sinusoid1d"), **facts)),))
        wrong = dataclasses.replace(row, stack_inputs=(("decoder", wrong_site),))
        monkeypatch.setitem(families.FAMILIES, "informer", wrong)
        with pytest.raises(AssertionError):
            anchor("informer")


def test_the_decomposed_anchor_fails_on_a_wrong_row(monkeypatch):
    """A row reading the window layers as the global ones fails the anchor above."""
    row = families.FAMILIES["sam_vision_model"]
    facts = dataclasses.replace(row.positions.facts_of("decomposed"), listed="window")
    wrong = dataclasses.replace(row, positions=dataclasses.replace(row.positions, facts=(("decomposed", facts),)))
    monkeypatch.setitem(families.FAMILIES, "sam_vision_model", wrong)
    with pytest.raises(AssertionError):
        test_decomposed_records_are_the_model_s("sam_vision_model")


def test_the_network_anchor_fails_on_a_model_with_attention(monkeypatch):
    """A row saying a transformer has no attention fails the anchor above."""
    row = dataclasses.replace(families.FAMILIES["resnet"], model_type="vit")
    monkeypatch.setitem(families.FAMILIES, "vit", row)
    with pytest.raises(AssertionError):
        test_a_network_without_attention_has_none("vit")


def test_the_sincos_anchor_fails_on_a_wrong_variant(monkeypatch):
    """A DETR row naming Deformable DETR's sine (0.5 taken from each count) fails the anchor above."""
    row = families.FAMILIES["detr"]
    encoder = dataclasses.replace(row.encoder, facts=(
        ("sincos2d", dataclasses.replace(row.encoder.facts_of("sincos2d"), variant="deformable_detr")),))
    monkeypatch.setitem(families.FAMILIES, "detr", dataclasses.replace(row, encoder=encoder))
    with pytest.raises(AssertionError):
        test_sincos2d_records_are_the_model_s("detr")



def test_the_fourier_anchor_fails_on_a_wrong_width(monkeypatch):
    """An EdgeTAM mask decoder row reading its features' width from the decoder's MLP fails the anchor above."""
    row = families.FAMILIES["edgetam_mask_decoder"]
    facts = dataclasses.replace(row.positions.facts_of("fourier"), width="mlp_dim")
    wrong = dataclasses.replace(row, positions=dataclasses.replace(row.positions, facts=(("fourier", facts),)))
    monkeypatch.setitem(families.FAMILIES, "edgetam_mask_decoder", wrong)
    with pytest.raises(AssertionError):
        test_sam_fourier_records_are_the_model_s("edgetam")
