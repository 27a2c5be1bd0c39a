"""``refpos check grid`` of the grid's other forms: a video clip's rows (TimeSformer, ViViT), the tables between
a stack's layers (YOLOS) and a windowed grid (SAM 2's Hiera), each a call of its own
(:mod:`refpos.check.kinds.grid`).

For every mistake of :mod:`refpos.encodings.grid_clips_mistakes`, :mod:`~refpos.encodings.grid_mid_mistakes` and
:mod:`~refpos.encodings.grid_windowed_mistakes`: a candidate computed that wrong way is outside the bound and named
by it; a port computing in float32 passes and is named nothing; an answer no mistake explains is reported as
unrecognised. The reference is the model record's (:class:`refpos.models.kinds.grid.GridLayer`, which the anchors
compare with transformers), bad inputs are refused naming the parameter, and the command line does the same.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from refpos.check.kinds import check_kind
from refpos.check.kinds.grid import GRID_CHECK, clip_position_rows, mid_position_tables, windowed_position_grid
from refpos.check.shared.arrays import Unusable
from refpos.cli import main
from refpos.encodings.grid import resample_position_table
from refpos.encodings.grid_clips import patch_major_rows
from refpos.encodings.grid_clips_mistakes import CLIP_MISTAKES, identify_clip
from refpos.encodings.grid_mid_mistakes import MID_MISTAKES, identify_mid
from refpos.encodings.grid_mistakes import UNRECOGNISED
from refpos.encodings.grid_windowed import windowed_position_grid as hiera_rows
from refpos.encodings.grid_windowed_mistakes import WINDOWED_MISTAKES, identify_windowed
from refpos.models import model_positions
from refpos.tests.kind_checks import call_file

RNG = np.random.default_rng(2037)


def _clip(grid, frames, *, side=4, time=4, layout="patch_major", tubelet=1, depth=1, mode="nearest"):
    arguments = {"table": RNG.standard_normal((1 + depth * side * side, 8)), "grid": list(grid), "frames": frames,
                 "way": {"mode": mode}, "layout": layout}
    if layout == "patch_major" and time:
        arguments["time_table"] = RNG.standard_normal((time, 8))
    if layout == "tubelets":
        arguments["tubelet"] = tubelet
    return ("clip_position_rows", arguments)


#: calls of each form, seeded: TimeSformer at another patch count (shrinking, growing, more and fewer frames than
#: its time table), at the same count in another shape, at its native clip; ViViT's tubelet frames at the native
#: grid and one tubelet frame resampled; YOLOS's tables (a CLS row, a 5 × 7 grid, 3 detection rows) at a grid
#: that grows and one that shrinks; Hiera's default 7 × 7 background and 8 × 8 window, and a 5 × 9 background
CALLS = [
    _clip((3, 6), 4), _clip((7, 5), 8, side=5, time=3), _clip((5, 3), 4, time=6), _clip((2, 8), 3),
    _clip((4, 4), 4),
    _clip((4, 4), 4, layout="tubelets", tubelet=2, depth=2, mode="bicubic"),
    _clip((3, 3), 6, side=3, layout="tubelets", tubelet=2, depth=3, mode="bicubic"),
    _clip((6, 4), 2, layout="tubelets", tubelet=2, mode="bicubic"),
    ("mid_position_tables", {"tables": RNG.standard_normal((3, 1 + 35 + 3, 8)), "grid": [9, 4],
                             "way": {"mode": "bicubic"}, "prefix_tokens": 1, "suffix_tokens": 3,
                             "source_grid": [5, 7]}),
    ("mid_position_tables", {"tables": RNG.standard_normal((2, 1 + 35 + 3, 8)), "grid": [3, 3],
                             "way": {"mode": "bicubic"}, "prefix_tokens": 1, "suffix_tokens": 3,
                             "source_grid": [5, 7]}),
    ("windowed_position_grid", {"background": RNG.standard_normal((49, 8)), "window": RNG.standard_normal((64, 8)),
                                "grid": [32, 48], "source_grid": [7, 7], "window_side": 8}),
    ("windowed_position_grid", {"background": RNG.standard_normal((45, 8)), "window": RNG.standard_normal((16, 8)),
                                "grid": [24, 16], "source_grid": [5, 9], "window_side": 4}),
]
NEW = {**CLIP_MISTAKES, **MID_MISTAKES, **WINDOWED_MISTAKES}
IDENTIFY = {"clip_position_rows": identify_clip, "mid_position_tables": identify_mid,
            "windowed_position_grid": identify_windowed}


def _float32_port(function: str, a: dict) -> np.ndarray:
    """The call computed in float32 throughout from float32 inputs (the encodings' functions keep the dtype)."""
    f32 = {k: v.astype(np.float32) if isinstance(v, np.ndarray) else v for k, v in a.items()}
    if function == "windowed_position_grid":
        return np.asarray(hiera_rows(f32["background"], f32["window"], tuple(a["grid"]),
                                     source_grid=tuple(a["source_grid"]), window_side=a["window_side"]))
    if function == "mid_position_tables":
        return np.stack([np.asarray(resample_position_table(t, tuple(a["grid"]), mode="bicubic", prefix_tokens=1,
                                                            suffix_tokens=3, source_grid=tuple(a["source_grid"])))
                         for t in f32["tables"]])
    table, grid = f32["table"], tuple(a["grid"])
    side = int(np.sqrt((table.shape[0] - 1) // (a["frames"] // a.get("tubelet", 1)
                                                if a["layout"] == "tubelets" else 1)))
    if a["layout"] == "tubelets":
        if table.shape[0] != 1 + side * side:  # tubelet frames: the table as it is
            return table
        return np.asarray(resample_position_table(table, grid, mode="bicubic", prefix_tokens=1))
    rows = table if grid[0] * grid[1] == side * side else np.asarray(
        resample_position_table(table, grid, mode="nearest", prefix_tokens=1))
    return np.asarray(patch_major_rows(rows[0], rows[1:], a["frames"], f32.get("time_table")))


def _wrong_outputs():
    for function, arguments in CALLS:
        inputs = GRID_CHECK.inputs(function, arguments)
        for name in NEW:
            wrong = GRID_CHECK.wrong(inputs, name)
            if wrong is not None:
                yield function, arguments, inputs, name, wrong


def test_every_new_mistake_is_outside_the_bound_and_named():
    """Each mistake, wherever its inputs can show it, is beyond 100 bounds from the reference (or of another shape)
    and named by its id, by the command's diagnosis and by its form's identifier; every mistake is shown."""
    named, nearest = set(), np.inf
    for function, arguments, inputs, name, wrong in _wrong_outputs():
        reference, bound = GRID_CHECK.reference(inputs)
        if wrong.shape == reference.shape:
            nearest = min(nearest, float(np.max(np.abs(wrong - reference))) / bound)
        result = check_kind("grid", function, arguments, wrong)
        assert not result["ok"]
        assert [d["id"] for d in result["diagnosis"]] == [name], (function, name, result["diagnosis"])
        assert IDENTIFY[function](wrong, inputs) == name
        named.add(name)
    assert named == set(NEW), sorted(set(NEW) - named)
    assert nearest > 100, nearest


def test_the_grid_s_own_mistakes_are_named_on_every_form():
    """The image catalogue's mistakes made on the table each form resamples (laid over the clip, on every table,
    on the background) are named by their own ids."""
    named = set()
    for function, arguments in CALLS:
        inputs = GRID_CHECK.inputs(function, arguments)
        for name in ("grid_bilinear_for_bicubic", "grid_cls_resampled", "grid_axes_swapped"):
            wrong = GRID_CHECK.wrong(inputs, name)
            if wrong is not None:
                assert [d["id"] for d in check_kind("grid", function, arguments, wrong)["diagnosis"]] == [name]
                named.add((function, name))
    assert {f for f, _ in named} == set(IDENTIFY)


@pytest.mark.parametrize(("function", "arguments"), CALLS, ids=lambda v: v if isinstance(v, str) else "")
def test_a_float32_port_passes_and_is_named_nothing(function, arguments):
    inputs = GRID_CHECK.inputs(function, arguments)
    reference, bound = GRID_CHECK.reference(inputs)
    port = _float32_port(function, arguments)
    assert port.dtype == np.float32 and port.shape == reference.shape
    assert float(np.max(np.abs(port.astype(np.float64) - reference))) <= bound
    assert IDENTIFY[function](port, inputs) is None
    result = check_kind("grid", function, arguments, port)
    assert result["ok"] and result["diagnosis"] == [] and result["max_ratio"] <= 1.0


@pytest.mark.parametrize(("function", "arguments"), CALLS, ids=lambda v: v if isinstance(v, str) else "")
def test_an_answer_no_mistake_explains_is_unrecognised(function, arguments):
    inputs = GRID_CHECK.inputs(function, arguments)
    reference, _ = GRID_CHECK.reference(inputs)
    shifted = reference.copy()
    shifted.flat[shifted.size // 2] += 0.5  # one entry off
    assert IDENTIFY[function](shifted, inputs) == UNRECOGNISED
    result = check_kind("grid", function, arguments, shifted)
    assert not result["ok"] and [d["id"] for d in result["diagnosis"]] == ["closest_mistake"]


# --------------------------------------------------------------------------- the reference is the record's
def test_the_clip_reference_is_the_record_s():
    """TimeSformer's and ViViT's records (GridLayer.clip_rows, compared with transformers by the anchors) answer
    what the check computes."""
    timesformer = model_positions({"model_type": "timesformer", "num_hidden_layers": 1, "num_attention_heads": 2,
                                   "hidden_size": 8, "image_size": 16, "patch_size": 4,
                                   "num_frames": 4}).stack("vision.input")[0]
    checked = 0
    for function, a in CALLS[:5]:
        if a["table"].shape[0] != 17 or a["time_table"].shape[0] != 4:  # the record's 4 × 4 grid and 4 frames
            continue
        checked += 1
        ours = GRID_CHECK.reference(GRID_CHECK.inputs(function, a))[0]
        record = np.asarray(timesformer.clip_rows(a["table"], tuple(a["grid"]), a["frames"], a["time_table"]))
        np.testing.assert_array_equal(ours, record)
    assert checked == 3
    vivit = model_positions({"model_type": "vivit", "num_hidden_layers": 1, "num_attention_heads": 2,
                             "hidden_size": 8, "image_size": 16, "tubelet_size": [2, 4, 4],
                             "num_frames": 4}).stack("vision.input")[0]
    function, a = CALLS[5]
    np.testing.assert_array_equal(GRID_CHECK.reference(GRID_CHECK.inputs(function, a))[0],
                                  np.asarray(vivit.clip_rows(a["table"], (4, 4), 4)))


def test_the_mid_and_windowed_references_are_the_records():
    yolos = model_positions({"model_type": "yolos", "num_hidden_layers": 4, "num_attention_heads": 2,
                             "hidden_size": 8, "image_size": [20, 28], "patch_size": 4,
                             "num_detection_tokens": 3}).stack("vision.input")[0]
    function, a = CALLS[8]
    np.testing.assert_array_equal(GRID_CHECK.reference(GRID_CHECK.inputs(function, a))[0],
                                  np.asarray(yolos.mid_tables(a["tables"], (9, 4))))
    function, a = CALLS[10]
    np.testing.assert_array_equal(GRID_CHECK.reference(GRID_CHECK.inputs(function, a))[0], np.asarray(
        hiera_rows(a["background"], a["window"], (32, 48), source_grid=(7, 7), window_side=8)))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("call", "changes", "error", "message"), [
    (clip_position_rows, {"layout": "frames"}, ValueError, "layout must be one of"),
    (clip_position_rows, {"frames": 0}, ValueError, "frames must be >= 1"),
    (clip_position_rows, {"frames": 2.0}, TypeError, "frames must be an int"),
    (clip_position_rows, {"grid": [3]}, TypeError, r"grid must be a pair"),
    (clip_position_rows, {"grid": [3, -6]}, ValueError, r"grid\[1\] must be >= 1"),
    (clip_position_rows, {"time_table": np.zeros((4, 5))}, ValueError, r"time_table must have shape \(rows, 8\)"),
    (clip_position_rows, {"tubelet": 2}, ValueError, "tubelet: a clip laid out patch by patch"),
    (clip_position_rows, {"way": {"mode": "nearest", "keep_extra": False}}, ValueError, "way: a clip's CLS row"),
    (clip_position_rows, {"table": np.zeros((16, 8))}, ValueError, "source_grid: the table's 15 cells"),
    (clip_position_rows, {"table": np.zeros((17, 8), dtype=np.int64)}, TypeError, "table"),
    (mid_position_tables, {"tables": np.zeros((39, 8))}, ValueError, "tables must have 3 axes"),
    (mid_position_tables, {"prefix_tokens": -1}, ValueError, "prefix_tokens must be >= 0"),
    (windowed_position_grid, {"grid": [30, 48]}, ValueError, "grid: the window table of 8 × 8 cells"),
    (windowed_position_grid, {"window": np.zeros((49, 8))}, ValueError, r"window must have shape \(64, 8\)"),
    (windowed_position_grid, {"window_side": True}, TypeError, "window_side must be an int"),
])
def test_bad_inputs_are_refused_naming_the_parameter(call, changes, error, message):
    function, arguments = next((f, a) for f, a in CALLS if f == call.__name__)
    with pytest.raises(error, match=message):
        call(**{**arguments, **changes})
    with pytest.raises(Unusable, match=f"{function}: "):
        check_kind("grid", function, {**arguments, **changes}, np.zeros(3))


def test_tubelet_frames_at_another_grid_or_frame_count_are_refused():
    arguments = CALLS[5][1]
    with pytest.raises(ValueError, match=r"grid: a table of 2 tubelet frames is added at its own grid \(4, 4\)"):
        clip_position_rows(**{**arguments, "grid": [3, 5]})
    with pytest.raises(ValueError, match="frames: 5 frames are no whole number of tubelets of 2"):
        clip_position_rows(**{**arguments, "frames": 5})
    with pytest.raises(ValueError, match="time_table: a table of tubelet frames"):
        clip_position_rows(**{**arguments, "time_table": np.zeros((4, 8))})


# --------------------------------------------------------------------------- the command line
@pytest.mark.parametrize("index", [0, 6, 8, 11])
def test_the_command_names_each_form_s_mistake_and_passes_a_float32_port(index, tmp_path, capsys):
    function, arguments = CALLS[index]
    inputs = GRID_CHECK.inputs(function, arguments)
    name = next(n for n in NEW if GRID_CHECK.wrong(inputs, n) is not None)
    call = call_file(tmp_path, function, arguments)
    np.save(tmp_path / "wrong.npy", GRID_CHECK.wrong(inputs, name))
    np.save(tmp_path / "port.npy", _float32_port(function, arguments))
    assert main(["check", "grid", "--call", str(call), "--candidate", str(tmp_path / "wrong.npy"), "--json"]) == 1
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["diagnosis"]] == [name]
    assert main(["check", "grid", "--call", str(call), "--candidate", str(tmp_path / "wrong.npy")]) == 1
    assert f"diagnosis {name}: " in capsys.readouterr().out
    assert main(["check", "grid", "--call", str(call), "--candidate", str(tmp_path / "port.npy")]) == 0
    assert "refpos check grid: OK (float32)" in capsys.readouterr().out


def test_the_command_refuses_a_bad_call_in_one_line(tmp_path, capsys):
    function, arguments = CALLS[0]
    np.save(tmp_path / "y.npy", np.zeros((55, 8)))
    for changes, message in [({"layout": "frames"}, "clip_position_rows: layout must be one of"),
                             ({"frames": 0}, "clip_position_rows: frames must be >= 1"),
                             ({"spin": 1}, "unexpected keyword argument 'spin'")]:
        call = call_file(tmp_path, function, {**arguments, **changes})
        assert main(["check", "grid", "--call", str(call), "--candidate", str(tmp_path / "y.npy")]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_config_fills_in_resample_position_table_calls_only(tmp_path, capsys):
    """docs/grid.md: a call of another form gives every argument; with --config it is refused by name."""
    function, arguments = CALLS[0]
    call = call_file(tmp_path, function, arguments)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "timesformer", "num_hidden_layers": 1, "num_attention_heads": 2,
                                  "hidden_size": 8, "image_size": 16, "patch_size": 4, "num_frames": 4}))
    np.save(tmp_path / "y.npy", np.zeros((55, 8)))
    assert main(["check", "grid", "--config", str(config), "--call", str(call), "--candidate",
                 str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err
    assert "function: the call gives 'clip_position_rows'" in err and len(err.strip().splitlines()) == 1


def test_the_time_table_s_rounding_is_in_the_clip_bound():
    """A time table far larger than the grid: a float32 port's error is the time rows' rounding plus the sum's, past
    u·max|table| + u·max|P| (the bound without the time table's own term) and within the clip's bound."""
    rng, past = np.random.default_rng(5), 0.0
    for _ in range(3):
        arguments = {"table": rng.standard_normal((17, 8)) * 1e-3, "time_table": rng.standard_normal((4, 8)) * 3,
                     "grid": [3, 6], "frames": 4, "way": {"mode": "nearest"}, "layout": "patch_major"}
        reference, bound = GRID_CHECK.reference(GRID_CHECK.inputs("clip_position_rows", arguments))
        error = float(np.max(np.abs(_float32_port("clip_position_rows", arguments).astype(np.float64) - reference)))
        assert error <= bound
        past = max(past, error / (2.0**-24 * (np.abs(arguments["table"]).max() + np.abs(reference).max())))
    assert past > 1.0
