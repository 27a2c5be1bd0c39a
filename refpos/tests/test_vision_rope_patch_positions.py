"""One mapping from a vision-RoPE layer record to its patches' positions
(:meth:`refpos.models.kinds.vision_rope.VisionRopeLayer.patch_positions`), read by the survey's comparison
(survey/pixel_kinds/vision_rope.py) and by ``refpos golden model`` (refpos/golden/cases/model_kinds.py).

Every family row of the ``vision_rope`` kind is built from a config stating the keys its facts name, and the
positions its distinct layers give over a set of grids and merge sizes are pinned by digest: the digests are those of
the positions the survey's own mapping gave before both callers read this method (the golden cases' positions were
the same, Llama 4's square read at 4 × 4 where its label said 4 × 6). A grid no form reads (a video for an image
form, a grid of no whole merge blocks) is a ``ValueError`` naming ``grid``.
"""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest

from refpos.models import families
from refpos.models.kinds.record import Stack
from refpos.models.kinds.registry import KINDS
from refpos.models.view import ConfigView
from refpos.rope.vision3d import VisionRope3D

KIND = KINDS["vision_rope"]
GRIDS = [(1, 4, 6), (1, 4, 4), (2, 4, 6), (1, 6, 6), (3, 2, 2)]
#: row/stack-layer -> the digest of its positions over GRIDS × merges 1, 2 (each row's distinct layers)
PINNED = {
    "eomt_dinov3/vision-0": "b6c08b5d1e930a3d",
    "mlcd_vision_model/vision-0": "7f8709ce25e2c1b2",
    "muse_glimmer_vision/vision-0": "979d82536d962ffc",
    "muse_spark_vision/vision-0": "979d82536d962ffc",
    "ovis2_5_vision/vision-0": "0623eeed31db24ed",
    "paddleocr_vl_vision/vision-0": "7f8709ce25e2c1b2",
    "sam3_vit_model/vision-0": "2c8e801f2e8bb9d2",
    "sam3_vit_model/vision-1": "a776c20bf5fcaad8",
    "sapiens2/vision-0": "b6c08b5d1e930a3d",
    "step3p5_vision/vision-0": "7f8709ce25e2c1b2",
    "video_llama_3_vision/vision-0": "0623eeed31db24ed",
    "dots3_note_vision_encoder/vision-0": "0623eeed31db24ed",
    "exaone4_5_vision/vision-0": "0623eeed31db24ed",
    "glm5_next_vision/vision-0": "0623eeed31db24ed",
    "glm_ocr_vision/vision-0": "0623eeed31db24ed",
    "lfm3_vl_vision/vision-0": "0623eeed31db24ed",
    "qwen2_vl_vision/vision-0": "0623eeed31db24ed",
    "qwen2_5_vl_vision/vision-0": "0623eeed31db24ed",
    "qwen3_vl_vision/vision-0": "0623eeed31db24ed",
    "qwen3_vl_moe_vision/vision-0": "0623eeed31db24ed",
    "glm4v_vision/vision-0": "0623eeed31db24ed",
    "glm4v_moe_vision/vision-0": "0623eeed31db24ed",
    "qwen3_5_vision/vision-0": "0623eeed31db24ed",
    "qwen3_5_moe_vision/vision-0": "0623eeed31db24ed",
    "ernie4_5_vl_moe_vision/vision-0": "0623eeed31db24ed",
    "qwen2_5_omni_vision_encoder/vision-0": "0623eeed31db24ed",
    "qwen3_omni_moe_vision_encoder/vision-0": "0623eeed31db24ed",
    "pixtral/vision-0": "7f8709ce25e2c1b2",
    "llama4_vision_model/vision-0": "44ad07c78800ac0b",
    "minimax_m3_vl_vision/vision-0": "7d81592887c9d1da",
    "cohere_compass_vision/vision-0": "0623eeed31db24ed",
    "dinov3_vit/vision-0": "b6c08b5d1e930a3d",
    "gemma4_vision/vision-0": "7f8709ce25e2c1b2",
    "inkling2_vision/vision-0": "afa1160f460cf726",
    "kimi_k25_vision/vision-0": "7f8709ce25e2c1b2",
    "llava_onevision1_5_vision/vision-0": "0623eeed31db24ed",
}


def vision_rope_rows() -> list[tuple[str, str, dict]]:
    """``(model type, stack, facts)`` of every family row (or row's stack) of the ``vision_rope`` kind."""
    out = []
    for name, table in families.ROW_TABLES.items():
        if table.get("encoding") == "vision_rope" and "vision_rope" in table:
            out.append((name, "vision", table["vision_rope"]))
        out += [(name, stack, sub["vision_rope"]) for stack, sub in table.items()
                if isinstance(sub, dict) and "vision_rope" in sub]
    return out


def records_of(table: dict) -> list:
    """The layer records of a two-layer tower of 4 heads of 16 channels stating every key the facts name."""
    facts = KIND.read_facts("row", table)
    config: dict = {"depth": 2, "embed_dim": 64, "num_heads": 4}
    config |= {key: 2 for key in facts.layers} | {key: 64 for key in facts.width} | {key: 4 for key in facts.heads}
    if facts.registers:
        config[facts.registers] = 2
    if facts.queries:
        config |= {facts.queries[0]: 3, facts.queries[1]: 1}
    if facts.conv_layers:
        config[facts.conv_layers[0]] = ["full_attention", facts.conv_layers[1]]
    if facts.windows:
        config |= {facts.windows[0]: 4, facts.windows[1]: [1], facts.grid[0]: 80, facts.grid[1]: 16}
    if facts.window_order:
        config[facts.window_order] = 4
    if facts.side:
        config |= {facts.side[0]: 64, facts.side[1]: 16}
    if facts.rope_type:
        config["rope_parameters"] = {"rope_type": facts.rope_type, "rope_theta": 10000.0}
    records = KIND.build(Stack(ConfigView(config), "vision", "single", None, facts, None))
    return [r for r in records if r.kind == "vision_rope"]


def digest(record) -> str:
    """The positions over :data:`GRIDS` and merge sizes 1 and 2, a grid the record does not read as ``none``."""
    h = hashlib.sha256()
    for grid, merge in itertools.product(GRIDS, (1, 2)):
        try:
            positions = record.patch_positions(grid, merge)
        except ValueError:
            positions = None
        h.update(b"none" if positions is None else np.ascontiguousarray(positions, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


ROWS = vision_rope_rows()


def test_every_vision_rope_row_is_pinned_or_3d_by_index():
    keys = {f"{name}/{stack}" for name, stack, _ in ROWS}
    assert {key.rsplit("-", 1)[0] for key in PINNED} == keys - {"vjepa2/encoder", "vjepa2/predictor"}


@pytest.mark.parametrize(("name", "stack", "table"), ROWS, ids=[f"{n}/{s}" for n, s, _ in ROWS])
def test_a_row_s_positions_are_the_pinned_ones(name, stack, table):
    records = records_of(table)
    assert records
    if isinstance(records[0].rope, VisionRope3D) and records[0].rope.kind == "vjepa2":
        return  # test_vjepa2_positions
    found = {digest(r) for r in records}
    pinned = {v for k, v in PINNED.items() if k.rsplit("-", 1)[0] == f"{name}/{stack}"}
    assert found == pinned, (name, stack)


def test_vjepa2_positions_decompose_token_indices_along_the_config_side():
    """V-JEPA 2's token i at (i // g², (i mod g²) // g, i mod g), g = crop_size // patch_size (4 here) whatever the
    clip fed: a 6 × 6 clip's tokens run past the first frame's 16."""
    record = next(r for name, _, table in ROWS if name == "vjepa2" for r in records_of(table))
    assert record.side == 4
    native = record.patch_positions((2, 4, 4))
    assert native.tolist()[:5] == [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 3], [0, 1, 0]]
    assert native.tolist()[16] == [1, 0, 0] and len(np.unique(native, axis=0)) == 32
    other = record.patch_positions((1, 6, 6))
    assert other.tolist()[16] == [1, 0, 0] and other.tolist()[35] == [2, 0, 3]
    kept = record.patch_positions((2, 4, 4), ids=np.array([3, 17]))
    assert kept.tolist() == [[0, 0, 3], [1, 0, 1]]


def test_a_grid_the_form_does_not_read_is_refused_naming_grid():
    tables = {name: table for name, _, table in ROWS}
    qwen, = {r.params()["form"]: r for r in records_of(tables["qwen2_vl_vision"])}.values()
    with pytest.raises(ValueError, match="spatial_merge_size"):
        qwen.patch_positions((1, 3, 5), 2)
    with pytest.raises(ValueError, match="grid"):
        qwen.patch_positions((1, 4))
    llama = records_of(tables["llama4_vision_model"])[0]
    with pytest.raises(ValueError, match="grid: the llama4 form reads one square image"):
        llama.patch_positions((1, 4, 6))
    dinov3 = records_of(tables["dinov3_vit"])[0]
    with pytest.raises(ValueError, match="grid: the dinov3 form reads one image"):
        dinov3.patch_positions((2, 4, 4))
    with pytest.raises(ValueError, match="padding: only the gemma4 form"):
        qwen.patch_positions((1, 4, 4), 2, padding=2)
    gemma = records_of(tables["gemma4_vision"])[0]
    assert gemma.patch_positions((1, 2, 2), padding=1).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [-1, -1]]
