r"""refpos.encodings.tiled_grid against transformers 5.25's Llama 3.2 Vision tower (``mllama_vision_model``): the
gated grid (``MllamaPrecomputedPositionEmbedding``), the gated aspect-ratio rows
(``MllamaPrecomputedAspectRatioEmbedding``) and, in the whole tower (``MllamaVisionModel``), what the tokens gain
before the local encoder and before the global one.

Every module is built from a small config (448 → 28 pixels, 14-pixel patches: 4 patches and the class row a tile,
4 tiles, the default 8 aspect ratios: ids 0 … 8) with seeded tables and seeded, non-zero gates, and fed zeros (the
module's output is then what it adds) at several aspect-ratio ids. In the tower, with the patch projection and the
class vector zeroed, the input of ``layernorm_pre`` is what the tokens gain before the local encoder, and the
global encoder's input minus ``layernorm_post``'s output what they gain before the global one. Tolerance: the
bound of refpos/encodings/tiled_grid_mistakes.py (module docstring), a float32 port's; every wrong variant lies
outside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.tiled_grid import aspect_ratio_rows, gated_tile_grid, tiled_input_positions
from refpos.encodings.tiled_grid_mistakes import aspect_ratio_bound, input_bound, input_mistakes, tile_grid_bound
from refpos.tests.kind_checks import transformers_object as _import

torch = pytest.importorskip("torch", reason="Mllama anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="Mllama anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

#: tiles, width, the aspect-ratio ids fed, and the gates (grid, pre-tile, post-tile)
TILES, D, IDS = 4, 8, (0, 1, 5, 8)
GATE, PRE_GATE, POST_GATE = 0.7, 0.45, -0.9


def _config():
    return _import("mllama.configuration_mllama:MllamaVisionConfig")(
        hidden_size=D, attention_heads=2, num_hidden_layers=1, num_global_layers=1, intermediate_size=16,
        image_size=28, patch_size=14, max_num_tiles=TILES, intermediate_layers_indices=[0], vision_output_dim=2 * D)


def _seeded(module, seed: int, gate: float) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
        module.gate.fill_(gate)


def _weights(module) -> dict[str, np.ndarray]:
    return {name: p.detach().double().numpy() for name, p in module.named_parameters()}


def _worst(observed: np.ndarray, reference: np.ndarray, bound: np.ndarray) -> float:
    assert observed.shape == reference.shape
    return float(np.max(np.abs(observed - reference) / bound))


def _outside(observed: np.ndarray, wrong: np.ndarray, bound: np.ndarray) -> bool:
    return wrong.shape != observed.shape or bool(np.any(np.abs(observed - wrong) > bound))


@pytest.mark.parametrize("aspect_ratio_id", IDS)
def test_gated_grid_matches_transformers(aspect_ratio_id: int):
    module = _import("mllama.modeling_mllama:MllamaPrecomputedPositionEmbedding")(_config()).eval()
    _seeded(module, 1, GATE)
    w = _weights(module)
    with torch.no_grad():
        out = module(torch.zeros(1, TILES, 5, D), torch.tensor([[aspect_ratio_id]])).double().numpy()[0]
    args = (w["embedding"], w["tile_embedding.weight"], GATE, aspect_ratio_id, TILES)
    reference, bound = gated_tile_grid(*args), tile_grid_bound(*args)
    assert _worst(out, reference, bound) <= 1.0
    assert np.max(np.abs(out - reference)) > 0  # a float32 run: the bound is what is tested
    t = np.tanh(GATE)
    tiles = w["tile_embedding.weight"][aspect_ratio_id].reshape(TILES, 5, D)
    other = w["tile_embedding.weight"][(aspect_ratio_id + 1) % 9].reshape(TILES, 5, D)
    wrong = {"gate not tanh'd": (1 - GATE) * w["embedding"] + GATE * tiles,
             "(1 - tanh g) missing": w["embedding"] + t * tiles, "tile grid of another id": (1 - t) * w["embedding"]
             + t * other, "gates swapped": t * w["embedding"] + (1 - t) * tiles,
             "grid row read patch by patch": (1 - t) * w["embedding"] + t * w["tile_embedding.weight"][
                 aspect_ratio_id].reshape(5, TILES, D).transpose(1, 0, 2)}
    for name, value in wrong.items():
        assert _outside(out, value, bound), name


@pytest.mark.parametrize("aspect_ratio_id", IDS)
def test_aspect_ratio_rows_match_transformers(aspect_ratio_id: int):
    module = _import("mllama.modeling_mllama:MllamaPrecomputedAspectRatioEmbedding")(_config()).eval()
    _seeded(module, 2, POST_GATE)
    table = _weights(module)["embedding.weight"]
    with torch.no_grad():
        out = module(torch.zeros(1, TILES, 3, D), torch.tensor([[aspect_ratio_id]])).double().numpy()[0]
    reference = aspect_ratio_rows(table, POST_GATE, aspect_ratio_id, TILES)[:, None, :].repeat(3, axis=1)
    bound = aspect_ratio_bound(table, POST_GATE, aspect_ratio_id, TILES)[:, None, :].repeat(3, axis=1)
    assert _worst(out, reference, bound) <= 1.0
    for name, value in {"gate not tanh'd": POST_GATE / np.tanh(POST_GATE) * reference,
                        "no gate": reference / np.tanh(POST_GATE),
                        "another id": aspect_ratio_rows(table, POST_GATE, (aspect_ratio_id + 1) % 9, TILES)[
                            :, None, :].repeat(3, axis=1)}.items():
        assert _outside(out, value, bound), name


def _tower(aspect_ratio_id: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The tower's weights, and the inputs of ``layernorm_pre`` and of the global encoder and ``layernorm_post``'s
    output, fed zero-weight patches of 4 tiles at ``aspect_ratio_id``."""
    model = _import("mllama.modeling_mllama:MllamaVisionModel")(_config()).eval()
    for module, seed, gate in ((model.gated_positional_embedding, 3, GATE),
                               (model.pre_tile_positional_embedding, 4, PRE_GATE),
                               (model.post_tile_positional_embedding, 5, POST_GATE)):
        _seeded(module, seed, gate)
    with torch.no_grad():
        model.patch_embedding.weight.zero_()
        model.class_embedding.zero_()
    seen: dict[str, np.ndarray] = {}

    def keep(name: str, output: bool):
        def hook(module, args, out=None):
            seen[name] = (out if output else args[0]).detach().double().numpy()
        return hook

    model.layernorm_pre.register_forward_pre_hook(keep("local input", False))
    model.layernorm_post.register_forward_hook(keep("local output", True))
    model.global_transformer.register_forward_pre_hook(keep("global input", False))
    pixels = torch.randn(1, 1, TILES, 3, 28, 28, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        model(pixels, torch.tensor([[aspect_ratio_id]]), torch.ones(1, 1, TILES, dtype=torch.long))
    weights = {name: p.detach().double().numpy() for name, p in model.named_parameters()}
    return weights, seen


@pytest.mark.parametrize("aspect_ratio_id", IDS[1:])
def test_tower_rows_before_each_encoder(aspect_ratio_id: int):
    w, seen = _tower(aspect_ratio_id)
    grid = (w["gated_positional_embedding.embedding"], w["gated_positional_embedding.tile_embedding.weight"], GATE)
    pre = (w["pre_tile_positional_embedding.embedding.weight"], PRE_GATE)
    post = (w["post_tile_positional_embedding.embedding.weight"], POST_GATE)
    args = (*grid, *pre, aspect_ratio_id, TILES)
    observed = seen["local input"][0]
    reference, bound = tiled_input_positions(*args), input_bound(*args)
    assert _worst(observed, reference, bound) <= 1.0
    for name, wrong in input_mistakes(*grid, *pre, *post, aspect_ratio_id, TILES).items():
        assert wrong is None or _outside(observed, wrong, bound), name
    # before the global encoder: every row of a tile (5 tokens, 3 padding rows to 8) gains the post-tile row
    gained = (seen["global input"][0] - seen["local output"][0]).reshape(TILES, 8, D)
    rows = aspect_ratio_rows(*post, aspect_ratio_id, TILES)[:, None, :].repeat(8, axis=1)
    noise = 2 * 2.0**-24 * np.abs(seen["global input"][0]).reshape(TILES, 8, D)  # the sum and the subtraction
    post_bound = aspect_ratio_bound(*post, aspect_ratio_id, TILES)[:, None, :] + noise
    assert _worst(gained, rows, post_bound) <= 1.0
    swapped = aspect_ratio_rows(*pre, aspect_ratio_id, TILES)[:, None, :].repeat(8, axis=1)
    padding_skipped = rows.copy()
    padding_skipped[:, 5:] = 0
    for name, wrong in {"pre table after the local encoder": swapped, "padding rows gain none": padding_skipped,
                        "another id": aspect_ratio_rows(*post, aspect_ratio_id % 8 + 1, TILES)[:, None, :].repeat(
                            8, axis=1)}.items():
        assert _outside(gained, wrong, post_bound), name
