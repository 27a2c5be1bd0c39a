"""``refpos check tiled_grid`` beyond what refpos/tests/test_check_kinds.py asks every kind (every mistake named, the
reference and its float32 storage passing, an unexplained output said close to none, the command): a float32 port
computed in float32 passes within the derived bound, each catalogued mistake lies far outside it, and bad input is
refused naming the parameter, by the command with exit status 2 and one line."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.check.kinds import BY_KIND, check_kind
from refpos.check.shared.arrays import Unusable
from refpos.cli import main
from refpos.encodings.tiled_grid_mistakes import TILED_GRID_MISTAKES, identify_tiled_grid
from refpos.tests.kind_checks import call_file

CHECK = BY_KIND["tiled_grid"]
FUNCTION, ARGUMENTS = CHECK.examples()[0]


def _float32_port(a: dict) -> np.ndarray:
    """The formula computed in float32 throughout: tanh, the mix, the pre-tile rows and their sum."""
    f = np.float32
    tiles, (rows, width) = a["max_num_tiles"], a["embedding"].shape
    t, t_pre = np.tanh(f(a["gate"])), np.tanh(f(a["pre_gate"]))
    grid = (f(1) - t) * a["embedding"].astype(f) + t * a["tile_table"][a["aspect_ratio_id"]].astype(f).reshape(
        tiles, rows, width)
    grid[:, 1:] += (t_pre * a["pre_table"][a["aspect_ratio_id"]].astype(f).reshape(tiles, width))[:, None]
    return grid


def test_a_float32_port_passes_and_each_mistake_is_far_outside():
    for function, arguments in CHECK.examples():
        inputs = CHECK.inputs(function, arguments)
        reference, bound = inputs.reference()
        port = _float32_port(arguments)
        result = check_kind("tiled_grid", function, arguments, port)
        assert result["ok"] and result["max_ratio"] < 1.0, result["max_ratio"]
        assert identify_tiled_grid(port, inputs) is None
        for mistake in TILED_GRID_MISTAKES:
            wrong = mistake.compute(inputs)
            assert wrong is not None and np.max(np.abs(wrong[0] - reference) / bound) > 1e4, mistake.name


@pytest.mark.parametrize(("change", "name"), [
    ({"aspect_ratio_id": 9}, "aspect_ratio_id"), ({"aspect_ratio_id": 1.0}, "aspect_ratio_id"),
    ({"max_num_tiles": 3}, "tile_table"), ({"post_table": np.ones((9, 5))}, "post_table"),
    ({"gate": "0.4"}, "gate"), ({"pre_gate": None}, "pre_gate"), ({"embedding": np.ones(5)}, "embedding"),
])
def test_bad_input_is_refused_naming_the_parameter(change, name, tmp_path, capsys):
    reference, _ = CHECK.reference(CHECK.inputs(FUNCTION, ARGUMENTS))
    with pytest.raises(Unusable, match=name):
        check_kind("tiled_grid", FUNCTION, {**ARGUMENTS, **change}, reference)
    if isinstance(change.get(next(iter(change))), np.ndarray):
        return  # the call file below holds the scalars; arrays are refused above
    call = call_file(tmp_path, FUNCTION, {**ARGUMENTS, **change})
    np.save(tmp_path / "y.npy", reference)
    assert main(["check", "tiled_grid", "--call", str(call), "--candidate", str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err
    assert name in err and len(err.strip().splitlines()) == 1, err
