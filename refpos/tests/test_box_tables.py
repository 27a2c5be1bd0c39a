"""The box-tables kind without torch: LayoutLM's row resolved to its input site and its 1-D table, the record's
rows and reference, bad input named, and ``refpos check box_tables`` beyond what refpos/tests/test_check_kinds.py
asks every kind: a port summing in float32 passes within the derived bound, each catalogued mistake lies far
outside it, and bad input is refused naming the parameter, by the command with exit status 2 and one line."""

from __future__ import annotations

import numpy as np
import pytest

from refpos.check.kinds import BY_KIND, check_kind
from refpos.check.shared.arrays import Unusable
from refpos.cli import main
from refpos.encodings.box_tables import box_positions, box_reads
from refpos.encodings.box_tables_mistakes import BOX_TABLES_MISTAKES, identify_box_tables
from refpos.models import model_positions
from refpos.tests.kind_checks import call_file

CHECK = BY_KIND["box_tables"]
FUNCTION, ARGUMENTS = CHECK.examples()[0]
LAYOUTLM = {"model_type": "layoutlm", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
            "max_position_embeddings": 64, "max_2d_position_embeddings": 32}


def test_layoutlm_is_the_learned_table_and_the_box_tables_at_its_input():
    answer = model_positions(LAYOUTLM)
    site = answer.stack("encoder.input")[0]
    assert (site.kind, site.rows, site.dim, site.reads) == ("box_tables", 32, 8, (("rows", ("bbox",)),))
    assert [r.kind for r in answer.stack("encoder")] == ["learned", "learned"]
    assert not answer.not_modelled  # max_2d_position_embeddings is read: no refusal left
    default = model_positions({k: v for k, v in LAYOUTLM.items() if k != "max_2d_position_embeddings"})
    assert default.stack("encoder.input")[0].rows == 1024  # LayoutLMConfig's default


def test_the_record_reads_its_rows_and_refuses_what_is_not_a_row():
    site = model_positions(LAYOUTLM).stack("encoder.input")[0]
    reads = site.reads_at([[[1, 3, 9, 20]]])
    assert {t: [int(i.item()) for i in v] for t, v in reads.items()} == {"x": [1, 9], "y": [3, 20], "h": [17],
                                                                         "w": [8]}
    tables = [np.random.default_rng(i).standard_normal((32, 8)) for i in range(4)]
    np.testing.assert_array_equal(site.reference(*tables, [[[1, 3, 9, 20]]]),
                                  box_positions(*tables, [[[1, 3, 9, 20]]]))
    with pytest.raises(ValueError, match="x_table"):
        site.reference(np.ones((31, 8)), *tables[1:], [[[1, 3, 9, 20]]])
    for bad in ([[1, 3, 32, 20]], [[9, 3, 1, 20]], [[1, -1, 9, 20]]):
        with pytest.raises(ValueError, match="bbox"):
            site.reads_at(bad)
    with pytest.raises(TypeError, match="bbox"):
        box_reads([[1.0, 3.0, 9.0, 20.0]], dict.fromkeys("xyhw", 32))


def _float32_port(a: dict) -> np.ndarray:
    """The six rows read from float32 tables and summed in float32, left to right."""
    f = np.float32
    b = np.asarray(a["bbox"])
    x, y, h, w = (np.asarray(a[f"{t}_table"]).astype(f) for t in "xyhw")
    return (x[b[..., 0]] + y[b[..., 1]] + x[b[..., 2]] + y[b[..., 3]] + h[b[..., 3] - b[..., 1]]
            + w[b[..., 2] - b[..., 0]])


def test_a_float32_port_passes_and_each_mistake_is_far_outside():
    named = set()
    for function, arguments in CHECK.examples():
        inputs = CHECK.inputs(function, arguments)
        reference, bound = inputs.reference()
        port = _float32_port(arguments)
        result = check_kind("box_tables", function, arguments, port)
        assert result["ok"] and result["max_ratio"] < 1.0, result["max_ratio"]
        assert identify_box_tables(port, inputs) is None
        for mistake in BOX_TABLES_MISTAKES:
            wrong = mistake.compute(inputs)
            if wrong is not None:
                named.add(mistake.name)
                assert np.max(np.abs(wrong[0] - reference) / bound) > 1e4, mistake.name
    assert named == {m.name for m in BOX_TABLES_MISTAKES}


@pytest.mark.parametrize(("change", "name"), [
    ({"bbox": [[1, 3, 40, 20]]}, "bbox"), ({"bbox": [[9, 3, 1, 20]]}, "bbox"), ({"bbox": [[1, 3, 9]]}, "bbox"),
    ({"bbox": [[1.0, 3.0, 9.0, 20.0]]}, "bbox"), ({"w_table": np.ones((40, 4))}, "w_table"),
    ({"x_table": np.ones(5)}, "x_table"),
])
def test_bad_input_is_refused_naming_the_parameter(change, name, tmp_path, capsys):
    reference, _ = CHECK.reference(CHECK.inputs(FUNCTION, ARGUMENTS))
    with pytest.raises(Unusable, match=name):
        check_kind("box_tables", FUNCTION, {**ARGUMENTS, **change}, reference)
    if "bbox" not in change:
        return  # the call file below holds the boxes; arrays are refused above
    call = call_file(tmp_path, FUNCTION, {**ARGUMENTS, **change})
    np.save(tmp_path / "y.npy", reference)
    assert main(["check", "box_tables", "--call", str(call), "--candidate", str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err
    assert name in err and len(err.strip().splitlines()) == 1, err
