"""``refpos golden model`` and ``refpos check <kind> --config`` for the vision and audio kinds: the registry of
record → contract call (refpos.golden.cases.model_kinds) asked for every kind, its cases checked against the
records' own references, written, verified and checked, and the call files' arguments merged with a config's
layer (contradictions refused by name)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import refpos
from refpos.backend import get_xp
from refpos.check.kinds import BY_KIND, check_call
from refpos.cli import main
from refpos.golden.cases.model_kind_cases import contradictions, kind_model_cases, kind_reasons, layer_arguments
from refpos.golden.cases.model_kinds import ELSEWHERE, MODEL_KINDS
from refpos.models.kinds import KINDS
from refpos.tests.test_kinds_registry import _stack

#: a small config per kind of MODEL_KINDS, and the case ids its golden model writes (model name "m")
CONFIGS = {
    "grid": ({"model_type": "vit", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
              "image_size": 32, "patch_size": 8},
             ["grid/m/vision.input-0/native-4x4", "grid/m/vision.input-0/resampled-3x6"]),
    "bias_table": ({"model_type": "swin", "depths": [2, 2], "num_heads": [2, 4], "window_size": 4, "embed_dim": 16,
                    "image_size": 32, "patch_size": 4},
                   ["bias_table/m/vision-0/table", "bias_table/m/vision-2/table"]),
    "conv_position": ({"model_type": "wav2vec2", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
                       "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4},
                      ["conv_position/m/audio.input-0/frames"]),
    "decomposed": ({"model_type": "sam_vision_model", "num_hidden_layers": 2, "num_attention_heads": 2,
                    "hidden_size": 16, "image_size": 64, "patch_size": 16, "window_size": 2,
                    "global_attn_indexes": [1], "use_rel_pos": True},
                   ["decomposed/m/vision-0/window", "decomposed/m/vision-1/global"]),
    "sincos2d": ({"model_type": "vit_mae", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
                  "image_size": 32, "patch_size": 8}, ["sincos2d/m/vision.input-0/grid-4x4"]),
    "fourier": ({"model_type": "sam", "vision_config": {"num_hidden_layers": 2, "num_attention_heads": 2,
                                                        "hidden_size": 16, "window_size": 2,
                                                        "global_attn_indexes": [1], "image_size": 64},
                 "prompt_encoder_config": {"hidden_size": 16},
                 "mask_decoder_config": {"num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 16}},
                ["fourier/m/prompt_encoder.input-0/points", "fourier/m/mask_decoder-0/grid-4x6"]),
    "sinusoid1d": ({"model_type": "informer", "encoder_layers": 1, "decoder_layers": 1, "d_model": 16,
                    "context_length": 8, "prediction_length": 4},
                   ["sinusoid1d/m/encoder.input-0/frames", "sinusoid1d/m/decoder.input-0/frames"]),
    "vision_rope": ({"model_type": "pixtral", "hidden_size": 64, "head_dim": 16, "num_attention_heads": 4,
                     "num_hidden_layers": 1, "image_size": 64, "patch_size": 16},
                    ["vision_rope/m/vision-0/grid-4x6"]),
    "axis_tables": ({"model_type": "pix2struct_vision_model", "num_hidden_layers": 2, "num_attention_heads": 2,
                     "hidden_size": 16, "seq_len": 16}, ["axis_tables/m/vision.input-0/patches"]),
    "tiled_grid": ({"model_type": "mllama_vision_model", "num_hidden_layers": 2, "attention_heads": 2,
                    "hidden_size": 16, "image_size": 28, "patch_size": 14}, ["tiled_grid/m/vision.input-0/tiles"]),
    "box_tables": ({"model_type": "layoutlm", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
                    "max_position_embeddings": 32, "max_2d_position_embeddings": 24},
                   ["box_tables/m/encoder.input-0/boxes"]),
    "layout_bias": ({"model_type": "layoutlmv3", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 12,
                     "coordinate_size": 2, "shape_size": 2, "max_position_embeddings": 32, "pad_token_id": 1,
                     "max_2d_position_embeddings": 1024}, ["layout_bias/m/encoder-0/pairs"]),
    "shaw_key": ({"model_type": "wav2vec2-bert", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 16,
                  "position_embeddings_type": "relative_key", "left_max_position_embeddings": 6,
                  "right_max_position_embeddings": 2}, ["shaw_key/m/audio-0/frames"]),
}

#: kind -> the record's own computation of a case's call (where the record has one)
OWN = {
    "grid": lambda layer, a: layer.reference(a["table"], tuple(a["grid"])),
    "bias_table": lambda layer, a: layer.bias(table=a.get("table")),
    "sincos2d": lambda layer, a: layer.reference(
        **({"mask": a["mask"]} if "mask" in a else {"height": a["height"], "width": a["width"]})),
    "fourier": lambda layer, a: layer.reference(get_xp().asarray(a["gaussian"]), points=get_xp().asarray(a["points"]),
                                                image_size=a["image_size"])
    if "points" in a else layer.reference(get_xp().asarray(a["gaussian"]), grid=(4, 6)),  # the backend's array
    "sinusoid1d": lambda layer, a: layer.reference(positions=a["positions"]),
    "decomposed": lambda layer, a: layer.reference(a["attn"], a["q"], a["rel_pos_h"], a["rel_pos_w"]),
    "axis_tables": lambda layer, a: layer.reference(a["indices"], *(_wide(a[k], layer.dim) for k in (
        "row_table", "column_table")))[:, :a["row_table"].shape[1]],
    "box_tables": lambda layer, a: layer.reference(*(_wide(a[f"{t}_table"], layer.dim) for t in "xyhw"),
                                                   a["bbox"])[..., :a["x_table"].shape[1]],
    "layout_bias": lambda layer, a: layer.bias_at(a["rel_table"], a.get("x_table"), a.get("y_table"), a["positions"],
                                                  a.get("bbox")),
    "shaw_key": lambda layer, a: np.nan_to_num(layer.reference(a["q"], a["table"]), neginf=0.0),  # 0 across blocks
}


def _wide(table: np.ndarray, dim: int) -> np.ndarray:
    """A seeded table of a few channels widened to the record's width with zeros (the record checks its width)."""
    return np.concatenate([table, np.zeros((table.shape[0], dim - table.shape[1]))], axis=1)


def test_every_kind_has_a_model_case_builder_or_says_where_or_why():
    assert set(MODEL_KINDS) | set(ELSEWHERE) == set(KINDS), set(KINDS) ^ (set(MODEL_KINDS) | set(ELSEWHERE))
    assert not set(MODEL_KINDS) & set(ELSEWHERE)
    assert set(MODEL_KINDS) == set(BY_KIND) == set(CONFIGS)  # every kind with a check target has model cases


def _arguments(case) -> dict:
    """A case's call as keyword arguments of its contract function."""
    from refpos.check.kinds.call import case_arguments

    check = BY_KIND[case.family]
    signature = {c.__name__: c for c in check.calls}[case.function]
    return case_arguments(case.parameters["call"], case.inputs, signature, case.parameters)


def _check_cases(cases, records) -> None:
    """Each case's output passes its own check and equals the record's own computation within its tolerance."""
    for case in cases:
        arguments = _arguments(case)
        out = case.outputs["out"].array
        assert check_call(BY_KIND[case.family], case.function, arguments, out.astype(np.float32))["ok"], case.id
        layer = records[case.parameters["stack"], case.parameters["layers"][0]]
        assert not contradictions(layer, case.function, arguments)
        if case.family in OWN:
            own = np.asarray(OWN[case.family](layer, arguments))
            atol = case.outputs["out"].tolerance["float64"]["atol"]
            np.testing.assert_allclose(own, out, rtol=0, atol=atol, err_msg=case.id)


@pytest.mark.parametrize("kind", sorted(MODEL_KINDS))
def test_the_kind_s_example_records_get_cases_or_say_why(kind):
    records = KINDS[kind].build(_stack(KINDS[kind]))
    cases, reasons = kind_model_cases(records, "example"), kind_reasons(records)
    assert cases or reasons, kind
    assert all(case.family == kind for case in cases)
    _check_cases(cases, {(r.stack, r.index): r for r in records})


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_a_config_s_layers_of_the_kind_get_their_cases(kind):
    config, ids = CONFIGS[kind]
    positions = refpos.model_positions(config)
    cases = [case for case in kind_model_cases(positions, "m") if case.family == kind]
    assert [case.id for case in cases] == ids
    _check_cases(cases, {(layer.stack, layer.index): layer for layer in positions})


def test_a_fixed_table_and_a_large_global_layer_say_why():
    sam = {**CONFIGS["decomposed"][0], "image_size": 1024}  # a 64 × 64 global attention
    reasons = kind_reasons(refpos.model_positions(sam))
    assert "native grid [64, 64] only" in reasons["vision.input layers [0] (grid(fixed))"]
    assert "16777216 (query, key) pairs" in reasons["vision layers [1] (decomposed(global))"]
    oblong = {**CONFIGS["grid"][0], "image_size": [32, 48]}  # a 4 × 6 table: the contract reads square ones
    assert "[4, 6] is not square" in kind_reasons(refpos.model_positions(oblong))[
        "vision.input layers [0] (grid(bicubic))"]


def _write(tmp_path, name, config):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config), encoding="utf8")
    return path


def test_golden_model_of_a_vit_verifies_and_checks(tmp_path, capsys):
    from refpos.encodings.grid_variants import GRID_VARIANTS

    out = tmp_path / "out"
    assert main(["golden", "model", str(_write(tmp_path, "vit", CONFIGS["grid"][0])), "--name", "m",
                 "--out", str(out)]) == 0
    assert "grid/m/vision.input-0/resampled-3x6" in capsys.readouterr().out
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 0
    case = out / "cases/grid/m/vision.input-0/resampled-3x6"
    table = np.load(case / "table.npy")
    np.save(tmp_path / "right.npy", np.load(case / "out.npy").astype(np.float32))
    np.save(tmp_path / "wrong.npy", np.asarray(GRID_VARIANTS["bilinear"].resample(table, (3, 6), prefix_tokens=1)))
    capsys.readouterr()
    cid = "grid/m/vision.input-0/resampled-3x6"
    assert main(["check", cid, str(tmp_path / "right.npy"), "--golden-dir", str(out)]) == 0
    assert main(["check", cid, str(tmp_path / "wrong.npy"), "--golden-dir", str(out)]) == 1
    assert "diagnosis grid_bilinear_for_bicubic" in capsys.readouterr().out


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_golden_model_cases_verify_and_name_a_wrong_candidate(kind, tmp_path, capsys):
    from refpos.check.kinds.target import catalogue_id
    from refpos.golden.files.manifest import load_manifest

    out = tmp_path / "out"
    assert main(["golden", "model", str(_write(tmp_path, kind, CONFIGS[kind][0])), "--name", "m",
                 "--out", str(out), "--no-certify"]) == 0
    assert main(["golden", "verify", "--golden-dir", str(out)]) == 0
    check, named = BY_KIND[kind], []
    for entry in load_manifest(out)["cases"]:
        if entry["family"] != kind:
            continue
        case = next(c for c in kind_model_cases(refpos.model_positions(CONFIGS[kind][0]), "m") if c.id == entry["id"])
        inputs = check.inputs(case.function, _arguments(case))
        for name in check.mistakes:
            wrong = check.wrong(inputs, name)
            if wrong is None or np.shape(wrong) != case.outputs["out"].array.shape \
                    or check.identify(np.asarray(wrong, dtype=np.float64), inputs) != name:
                continue
            np.save(tmp_path / "wrong.npy", np.asarray(wrong, dtype=np.float64))
            capsys.readouterr()
            assert main(["check", case.id, str(tmp_path / "wrong.npy"), "--golden-dir", str(out)]) == 1
            assert f"diagnosis {catalogue_id(kind, name)}" in capsys.readouterr().out
            named.append(name)
            break
    assert named, f"no catalogued mistake of {kind} shown on its model cases"


def test_golden_model_of_a_model_without_cases_exits_2_saying_why(tmp_path, capsys):
    config = {**CONFIGS["decomposed"][0], "use_rel_pos": False}
    assert main(["golden", "model", str(_write(tmp_path, "sam", config)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "native grid [4, 4] only" in err and len(err.strip().splitlines()) == 1


def _call(tmp_path, name, function, args):
    arrays = {k: v for k, v in args.items() if isinstance(v, np.ndarray)}
    for key, value in arrays.items():
        np.save(tmp_path / f"{name}-{key}.npy", value)
    body = {k: {"npy": f"{name}-{k}.npy"} if k in arrays else v for k, v in args.items()}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"function": function, "args": body}), encoding="utf8")
    return str(path)


def test_check_config_fills_the_layer_s_arguments_and_refuses_contradictions(tmp_path, capsys):
    from refpos.encodings.grid_variants import GRID_VARIANTS

    vit = str(_write(tmp_path, "vit", CONFIGS["grid"][0]))
    table = np.random.default_rng(0).standard_normal((17, 4))
    right = np.asarray(GRID_VARIANTS["bicubic"].resample(table, (3, 6), prefix_tokens=1))
    np.save(tmp_path / "right.npy", right.astype(np.float32))
    np.save(tmp_path / "wrong.npy", np.asarray(GRID_VARIANTS["bilinear"].resample(table, (3, 6), prefix_tokens=1)))
    call = _call(tmp_path, "ok", "resample_position_table", {"table": table, "grid": [3, 6]})
    assert main(["check", "grid", "--config", vit, "--call", call, "--candidate", str(tmp_path / "right.npy")]) == 0
    assert main(["check", "grid", "--config", vit, "--stack", "vision.input", "--layer", "0", "--call", call,
                 "--candidate", str(tmp_path / "wrong.npy")]) == 1
    assert "grid_bilinear_for_bicubic" in capsys.readouterr().out
    refused = [
        ({"table": table, "grid": [3, 6], "way": {"mode": "bilinear"}}, "way.mode: the call gives 'bilinear'",
         "has 'bicubic'"),
        ({"table": table, "grid": [3, 6], "prefix_tokens": 0}, "prefix_tokens: the call gives 0", "has 1"),
        ({"table": np.zeros((33, 4)), "grid": [3, 6]}, "table shape: the call gives [33, 4]", "[17, 'any']"),
    ]
    for i, (args, given, own) in enumerate(refused):
        call = _call(tmp_path, f"bad{i}", "resample_position_table", args)
        assert main(["check", "grid", "--config", vit, "--call", call, "--candidate",
                     str(tmp_path / "right.npy")]) == 2
        err = capsys.readouterr().err
        assert given in err and own in err and len(err.strip().splitlines()) == 1, err
    for argv, message in [(["--stack", "vision"], "vision layer 0 is none"), (["--stack", "a b"], "a stack name"),
                          (["--layer", "9"], "no layer with --stack None --layer 9")]:
        assert main(["check", "grid", "--config", vit, *argv, "--call", call, "--candidate",
                     str(tmp_path / "right.npy")]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_check_config_of_a_window_bias(tmp_path, capsys):
    swin = str(_write(tmp_path, "swin", CONFIGS["bias_table"][0]))
    layer = refpos.model_positions(CONFIGS["bias_table"][0]).stack("vision")[2]  # stage 1: window 4, 4 heads
    table = np.random.default_rng(1).standard_normal((49, 4))
    np.save(tmp_path / "y.npy", np.asarray(layer.bias(table=table)))
    call = _call(tmp_path, "bias", "window_bias", {"table": table})
    assert main(["check", "bias_table", "--config", swin, "--layer", "2", "--call", call, "--candidate",
                 str(tmp_path / "y.npy")]) == 0
    call = _call(tmp_path, "bias7", "window_bias", {"table": table, "window": [7, 7]})
    assert main(["check", "bias_table", "--config", swin, "--layer", "2", "--call", call, "--candidate",
                 str(tmp_path / "y.npy")]) == 2
    assert "window: the call gives [7, 7], the config's vision layer 2 (bias_table) has [4, 4]" in \
        capsys.readouterr().err
    with pytest.raises(ValueError, match="function: the call gives 'conv_positions'"):
        layer_arguments(layer, "conv_positions", {})


def test_vision_rope_records_with_windows_grids_and_prefixes():
    """A windowed layer rotates its window's places, a fixed grid its scaled coordinates, unrotated tokens before the
    patches sit at (0, 0) (angle 0: the output's first rows are the input's); learned class angles are seeded and
    given to apply_vision_rope_prefixed (the class token turned pair by pair by them); an unrotated class token
    before each frame: one image's, at (0, 0)."""
    import dataclasses

    from refpos.rope.vision import VisionRope

    dinov3 = {"model_type": "dinov3_vit", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
              "num_register_tokens": 2, "image_size": 64, "patch_size": 16}
    layer = next(layer for layer in refpos.model_positions(dinov3) if layer.kind == "vision_rope")
    sam3 = VisionRope("sam3", 16)
    records = [layer, dataclasses.replace(layer, rope=sam3, prefix=0, window=4, index=1),
               dataclasses.replace(layer, rope=sam3, prefix=0, grid=(5, 5), scale=0.5, index=2),
               dataclasses.replace(layer, rope=VisionRope("pixtral", 16), prefix=3, index=3),
               dataclasses.replace(layer, rope=VisionRope("qwen2_vl", 16), prefix=1, prefix_weight="class_pos_emb",
                                   index=4)]
    cases = kind_model_cases(records, "m")
    assert [case.id.rsplit("/", 2)[1:] for case in cases] == [
        ["vision-0", "grid-4x6"], ["vision-1", "window-4x4"], ["vision-2", "grid-5x5"],
        ["vision-3", "grid-4x6-prefix-3"], ["vision-4", "grid-4x6-prefix-1"]]
    assert np.array_equal(cases[2].inputs["positions"][-1], [2.0, 2.0])  # (4·0.5, 4·0.5)
    prefixed = cases[3]
    np.testing.assert_array_equal(prefixed.outputs["out"].array[:3], prefixed.inputs["x"][:3])
    learned = cases[4]  # the class token: pair j = (j, j + 8) turned by α_j
    assert learned.function == "apply_vision_rope_prefixed" and learned.inputs["prefix_angles"].shape == (1, 8)
    alpha, x0 = learned.inputs["prefix_angles"][0], learned.inputs["x"][0]
    turned = np.concatenate([x0[:8] * np.cos(alpha) - x0[8:] * np.sin(alpha),
                             x0[8:] * np.cos(alpha) + x0[:8] * np.sin(alpha)])
    np.testing.assert_allclose(learned.outputs["out"].array[0], turned, atol=1e-14)
    assert not kind_reasons(records)
    per_frame = dataclasses.replace(layer, rope=VisionRope("qwen2_vl", 16), prefix=1, per_frame=True, start=1,
                                    index=5)
    (framed,) = kind_model_cases([per_frame], "m")
    assert framed.function == "apply_vision_rope" and framed.id.endswith("vision-5/grid-4x6-prefix-1")
    np.testing.assert_array_equal(framed.inputs["positions"][:2], [[0, 0], [1, 1]])  # the class token, patch (1, 1)
    np.testing.assert_array_equal(framed.outputs["out"].array[0], framed.inputs["x"][0])
    _check_cases([*cases, framed], {(r.stack, r.index): r for r in [*records, per_frame]})


def _other(value):
    """A value that differs from ``value`` (a contradiction of the record)."""
    if isinstance(value, dict):
        key = next(iter(value))
        return {**value, key: _other(value[key])}
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, list):
        return [_other(v) for v in value]
    return f"not-{value}"


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_check_config_of_every_kind_takes_the_layer_s_arguments(kind, tmp_path, capsys):
    """The call file holds only what the record does not fix; the config supplies the rest (exit 0 on the case's
    output); a fixed argument changed, or an array of another shape than the record's, exits 2 with one line."""
    from refpos.golden.cases.model_kinds import MODEL_KINDS

    config, _ = CONFIGS[kind]
    path = str(_write(tmp_path, "config", config))
    positions = refpos.model_positions(config)
    case = next(c for c in kind_model_cases(positions, "m") if c.family == kind)
    layer = {(r.stack, r.index): r for r in positions}[case.parameters["stack"], case.parameters["layers"][0]]
    _, fixed = MODEL_KINDS[kind].plan(layer)
    free = {k: v for k, v in _arguments(case).items() if k not in fixed and v is not None}
    np.save(tmp_path / "y.npy", case.outputs["out"].array)
    where = ["--stack", layer.stack, "--layer", str(layer.index)]
    call = _call(tmp_path, "free", case.function, free)
    assert main(["check", kind, "--config", path, *where, "--call", call, "--candidate", str(tmp_path / "y.npy")]) == 0
    capsys.readouterr()
    if fixed:
        name = next(iter(fixed))
        wrong = {**free, name: _other(fixed[name])}
    else:
        name, shape = next(iter(MODEL_KINDS[kind].shapes(layer).items()))
        wrong = {**free, name: np.zeros([s + 1 if s > 0 else 3 for s in shape])}
        name += " shape"
    call = _call(tmp_path, "wrong", case.function, wrong)
    assert main(["check", kind, "--config", path, *where, "--call", call, "--candidate", str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err
    assert f"--config: {name}" in err and "the call gives" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_the_reference_adapter_reproduces_the_cases_of_its_contract_functions(kind):
    """Each case is a call of the contract function the spec suite calls (refpos.testing.adapter): the adapter given
    the case's positional arguments returns the output within the float64 tolerance (refpos's own functions, which
    the contract does not hold, are skipped)."""
    from refpos.testing import adapter

    cases = [c for c in kind_model_cases(refpos.model_positions(CONFIGS[kind][0]), "m") if c.family == kind]
    ran = 0
    for case in cases:
        function = getattr(adapter, case.function, None)
        if function is None:
            continue
        args = [case.inputs[a["input"]] if "input" in a else a["value"] for a in case.parameters["call"]["args"]]
        out = np.asarray(function(*args))
        expected = case.outputs["out"].array
        atol = case.outputs["out"].tolerance["float64"]["atol"]
        np.testing.assert_allclose(out, expected, rtol=0, atol=atol, err_msg=case.id)
        ran += 1
    assert ran, kind


def test_the_contract_parameters_are_the_check_s():
    """The parameter table the cases' calls follow (golden layer) is the signature of each check function."""
    import inspect

    from refpos.golden.cases.model_kinds import PARAMETERS

    checked = {c.__name__: c for check in BY_KIND.values() for c in check.calls}
    for function, parameters in PARAMETERS.items():
        signature = inspect.signature(checked[function]).parameters.values()
        assert parameters == tuple(p.name if p.default is inspect.Parameter.empty else (p.name, p.default)
                                   for p in signature), function


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_a_case_s_output_and_bound_are_the_check_s(kind):
    """The record's reference (the formula module's, golden layer) is the check's, output and bound."""
    for case in kind_model_cases(refpos.model_positions(CONFIGS[kind][0]), "m"):
        check = BY_KIND[case.family]
        reference, bound = check.reference(check.inputs(case.function, _arguments(case)))
        np.testing.assert_array_equal(np.asarray(reference, dtype=np.float64), case.outputs["out"].array)
        assert case.outputs["out"].tolerance["float32"]["atol"] >= float(np.max(bound))


def test_check_config_on_a_layer_without_a_contract_call_exits_2_saying_why(tmp_path, capsys):
    sam = str(_write(tmp_path, "sam", CONFIGS["decomposed"][0]))  # its grid: a table added as it is
    np.save(tmp_path / "t.npy", np.zeros((16, 4)))
    call = _call(tmp_path, "fixed", "resample_position_table", {"table": np.zeros((16, 4)), "grid": [4, 4],
                                                                 "way": {"mode": "bicubic"}})
    assert main(["check", "grid", "--config", sam, "--call", call, "--candidate", str(tmp_path / "t.npy")]) == 2
    err = capsys.readouterr().err
    assert "vision.input layer 0 (grid(fixed)) has no contract call: its table is added as it is" in err
    assert len(err.strip().splitlines()) == 1


def test_a_bias_per_head_gets_one_hot_queries_at_scale_one():
    """Phi-4's audio layers (shaw_key term = "bias"): the case's queries are each head's unit vector, its scale 1,
    its table a column per head; the output is the record's bias without the streaming window (no part of the
    call)."""
    from refpos.encodings.shaw_key_bias import streaming_window

    config = {"model_type": "phi4_multimodal_audio", "num_blocks": 1, "num_attention_heads": 2, "hidden_size": 16,
              "bias_max_distance": 3, "bias_symmetric": False, "chunk_size": -1, "left_chunk": 18}
    positions = refpos.model_positions(config)
    (case,) = [case for case in kind_model_cases(positions, "m") if case.family == "shaw_key"]
    arguments = _arguments(case)
    assert arguments["scale"] == 1.0 and arguments["table"].shape == (6, 2) and arguments["q"].shape[-1] == 2
    out = case.outputs["out"].array
    assert check_call(BY_KIND["shaw_key"], case.function, arguments, out.astype(np.float32))["ok"]
    (layer,) = positions.stack("audio")
    frames = arguments["q"].shape[-2]
    own = layer.reference(arguments["q"], arguments["table"]) - streaming_window(frames, -1, 18, layer.block)
    np.testing.assert_allclose(np.nan_to_num(own, neginf=0.0)[:2], out, rtol=0, atol=1e-12)
