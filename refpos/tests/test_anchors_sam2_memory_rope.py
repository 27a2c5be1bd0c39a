r"""The rotation of SAM 2's video memory attention (SAM 2 video, SAM 3 tracker video, EdgeTAM video), against the
modules transformers builds (anchors env).

The three composites are refused by name (refpos/models/data/families.toml: ``sam2_video``, ``sam3_tracker_video``,
``edgetam_video``): their memory attention runs only frame by frame over an inference session. What the refusal
states of its rotation is checked here: the memory attention's position ids are the 0-based rows and columns of the
fixed ``memory_attention_rope_feat_sizes`` grid (``[W, H]``: ``H`` rows of ``W`` columns, row-major), and its rotary
module and apply function turn a query by refpos's vision RoPE form ``sam3`` (column angles first,
:math:`\theta^{-4j'/D}`, adjacent pairs) at those coordinates, ``D`` the memory attention's head size; the keys of the
cross-attention to the memories repeat the same rotation for each memory frame and leave the object pointers' keys
(the last ``num_k_exclude_rope``) as they are (EdgeTAM: the rotation of its ``memory_attention_rope_k_sizes`` grid on
each memory's spatial tokens, its leading tokens and the pointers unrotated).

Tolerance: the vision RoPE bound of a float32 port (refpos/rope/vision_bound.py, per token), the modules computing
in float32; the unrotated keys exact. Each catalogued vision RoPE mistake that applies lies outside it.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from refpos.mistake_match import within
from refpos.rope.vision import VisionRope, sam3_patch_positions
from refpos.rope.vision_mistakes import VISION_ROPE_MISTAKES, VisionRopeInputs

torch = pytest.importorskip("torch", reason="torch is not installed (the anchors extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (the anchors extra)")
pytestmark = pytest.mark.anchors

MODELS = ("sam2_video", "sam3_tracker_video", "edgetam_video")
#: the fixed grid ``[W, H]`` the memory attention is built for here: 4 rows of 6 columns
GRID = [6, 4]


def _prefix(model_type: str) -> str:
    return {"sam2_video": "Sam2Video", "sam3_tracker_video": "Sam3TrackerVideo", "edgetam_video": "EdgeTamVideo"}[
        model_type]


def _built(model_type: str):
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    config = transformers.AutoConfig.for_model(model_type)
    config.memory_attention_rope_feat_sizes = list(GRID)  # SAM 3 tracker video derives it from its image size
    if model_type == "edgetam_video":
        config.memory_attention_rope_k_sizes = [3, 2]
    name = _prefix(model_type)
    rotary = getattr(module, f"{name}VisionRotaryEmbedding")(config)
    attention = getattr(module, f"{name}MemoryAttention")
    return module, config, rotary, attention


def _head(config) -> int:
    return config.memory_attention_hidden_size // (config.memory_attention_downsample_rate
                                                   * config.memory_attention_num_attention_heads)


def _turned(x: np.ndarray, positions: np.ndarray, rope: VisionRope) -> tuple[np.ndarray, np.ndarray, VisionRopeInputs]:
    inputs = VisionRopeInputs(x, positions, rope)
    out, bound = inputs.reference()
    return out, bound, inputs


@pytest.mark.parametrize("model_type", MODELS)
def test_the_memory_attention_turns_by_the_sam3_form_on_its_fixed_grid(model_type):
    module, config, rotary, attention = _built(model_type)
    theirs_ids = attention.precompute_positions(config).numpy()
    ours_ids = sam3_patch_positions(GRID[1], GRID[0])  # (h, w) of H rows of W columns, row-major
    assert np.array_equal(theirs_ids[:, ::-1].astype(np.float64), ours_ids)  # theirs: (w, h)
    head = _head(config)
    rope = VisionRope("sam3", head, float(config.rope_parameters["rope_theta"]))
    n = len(ours_ids)
    q = np.random.default_rng(5).standard_normal((n, head)).astype(np.float32).astype(np.float64)
    cos, sin = rotary(torch.zeros(1), attention.precompute_positions(config))
    query = torch.from_numpy(q).float()[None, None]
    if model_type == "edgetam_video":
        theirs, _ = module.apply_rotary_pos_emb_2d_self_attn(query, query, cos[None], sin[None])
    else:
        theirs, _ = module.apply_rotary_pos_emb_2d(query, query, cos[None], sin[None])
    theirs = theirs[0, 0].double().numpy()
    ours, bound, inputs = _turned(q, ours_ids, rope)
    assert within(theirs, ours, bound), float(np.abs(theirs - ours).max())
    caught = []
    for mistake in VISION_ROPE_MISTAKES:
        wrong = mistake.compute(inputs)
        if wrong is not None:
            assert not within(theirs, wrong[0], wrong[1]), mistake.name
            caught.append(mistake.name)
    assert {"axes_swapped", "layout_swapped", "direction_reversed"} <= set(caught)


@pytest.mark.parametrize("model_type", ("sam2_video", "sam3_tracker_video"))
def test_the_memory_keys_repeat_the_rotation_and_leave_the_pointers(model_type):
    module, config, rotary, attention = _built(model_type)
    head, pointers, frames = _head(config), 2, 2
    rope = VisionRope("sam3", head, float(config.rope_parameters["rope_theta"]))
    grid = sam3_patch_positions(GRID[1], GRID[0])
    n = len(grid)
    rng = np.random.default_rng(6)
    q = rng.standard_normal((n, head)).astype(np.float32).astype(np.float64)
    k = rng.standard_normal((frames * n + pointers, head)).astype(np.float32).astype(np.float64)
    cos, sin = rotary(torch.zeros(1), attention.precompute_positions(config))
    _, theirs = module.apply_rotary_pos_emb_2d(torch.from_numpy(q).float()[None, None],
                                               torch.from_numpy(k).float()[None, None], cos[None], sin[None],
                                               num_k_exclude_rope=pointers, repeat_freqs_k=True)
    theirs = theirs[0, 0].double().numpy()
    for f in range(frames):
        ours, bound, _ = _turned(k[f * n:(f + 1) * n], grid, rope)
        assert within(theirs[f * n:(f + 1) * n], ours, bound), f
    assert np.array_equal(theirs[frames * n:], k[frames * n:])  # the object pointers' keys: unrotated
    # the wrong reading: the memory frames' keys at consecutive rows of one tall grid (not repeated)
    tall = sam3_patch_positions(frames * GRID[1], GRID[0])
    wrong, bound, _ = _turned(k[:frames * n], tall, rope)
    assert not within(theirs[:frames * n], wrong, bound)


def test_edgetam_rotates_each_memory_s_spatial_tokens_by_its_k_grid():
    module, config, rotary, attention = _built("edgetam_video")
    head, pointers, frames, leading = _head(config), 2, 2, 3
    rope = VisionRope("sam3", head, float(config.rope_parameters["rope_theta"]))
    k_sizes = config.memory_attention_rope_k_sizes
    ids, ids_k = attention.precompute_positions(config), attention.precompute_positions(config, is_key=True)
    grid = sam3_patch_positions(k_sizes[1], k_sizes[0])
    assert np.array_equal(ids_k.numpy()[:, ::-1].astype(np.float64), grid)
    m = len(grid)
    rng = np.random.default_rng(7)
    q = rng.standard_normal((GRID[0] * GRID[1], head)).astype(np.float32).astype(np.float64)
    group = leading + m
    k = rng.standard_normal((frames * group + pointers, head)).astype(np.float32).astype(np.float64)
    cos, sin = rotary(torch.zeros(1), ids)
    cos_k, sin_k = rotary(torch.zeros(1), ids_k)
    _, theirs = module.apply_rotary_pos_emb_2d_cross_attn(
        torch.from_numpy(q).float()[None, None], torch.from_numpy(k).float()[None, None], cos[None], sin[None],
        cos_k[None], sin_k[None], num_k_exclude_rope=pointers, repeat_freqs_k=frames)
    theirs = theirs[0, 0].double().numpy()
    for f in range(frames):
        start = f * group
        assert np.array_equal(theirs[start:start + leading], k[start:start + leading])  # leading tokens: unrotated
        ours, bound, _ = _turned(k[start + leading:start + group], grid, rope)
        assert within(theirs[start + leading:start + group], ours, bound), f
    assert np.array_equal(theirs[frames * group:], k[frames * group:])
