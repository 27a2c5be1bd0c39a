"""Anchors: the models that ship their own code (``refpos/data/remote_configs.json``), each real config resolved by its
family row, against a re-implementation of its source's math (:mod:`refpos.tests.remote_models`, torch float64).

* RoPE families: every layer's query rotated (and scaled: Qwen's log-n) at probe positions up to the model's
  declared length, at the lengths its code's rules depend on (Qwen's NTK steps, InternLM2's and DeciLM's dynamic
  NTK), against the family's rotary code;
* ChatGLM-6B: both axes of the 2-D positions;
* ALiBi families (Baichuan's 13B, Jais): the bias at every query and key position;
* the families refpos refuses (TeleChat: ``"refused"`` in the config's entry): refused as they are, and the reason
  measured: the rotation a caller could state instead against the family's code.

Tolerance: both sides compute in float64, from the same formula in another order of operations. The inverse
frequencies agree to a few ulps (a power against a reciprocal of a power: 3ε; the stepped or dynamic base θα^(d/(d−2))
one more ε each for the power and the product; interpolation's division 1ε), so an angle p·ω agrees to
(6 p ω_max + 2)ε, and a rotated component x₁cos φ − x₂sin φ to (|x₁| + |x₂|)(|Δφ| + 2ε) plus the rounding of its
three operations, 3ε(|x₁| + |x₂|): at most 2 max|x| (6 p ω_max + 5) ε with ε = 2⁻⁵³. Qwen's log-n factor
(ln(p + 1)/ln L₀ against ``math.log(p + 1, L₀)``, each within 2ε) adds 4ε of the rotated value. The ALiBi slopes are
the same float operations on both sides, and a product slope × distance rounds once: 2ε |bias|.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import refpos
from refpos.rope.two_d import apply_rope_2d
from refpos.tests import remote_models as remote

torch = pytest.importorskip("torch", reason="the remote-code anchors compare with torch re-implementations")

pytestmark = pytest.mark.anchors

CONFIGS = json.loads((Path(refpos.__file__).parent / "data" / "remote_configs.json").read_text(encoding="utf8"))
PROBES = (0, 1, 2, 7, 100, 1000, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193, 16383, 32766, 65535,
          131071)
EPS = 2.0**-53
#: Qwen's log-n table ends at position 32766 (``range(1, 32768)``): its code runs no longer sequence
QWEN_TABLE = 32767


def declared_length(config: dict) -> int:
    """The positions the model's code can be given: its table length (ChatGLM2+'s ``seq_length``; Qwen's log-n table)
    or its declared length; the probes stay below it."""
    if config["model_type"] == "qwen":
        return QWEN_TABLE
    for key in ("seq_length", "max_position_embeddings", "n_positions", "max_sequence_length"):
        if config.get(key):
            return config[key]
    return 131072


def lengths(config: dict) -> list[int]:
    """The first-pass lengths a rule of the family depends on: below and past its training length, or one."""
    if config["model_type"] == "qwen":
        l0 = config["seq_length"]
        return [l0, l0 + 1, 2 * l0 + 1, QWEN_TABLE]
    if (config.get("rope_scaling") or {}).get("type") == "dynamic":
        limit = config["max_position_embeddings"]
        return [limit, 3 * limit]
    return [declared_length(config)]


def refpos_query(layer, x: np.ndarray, positions: np.ndarray, length: int) -> np.ndarray:
    """What refpos's record of the layer hands to attention for ``x`` ``(T, D)`` at ``positions``."""
    if layer.kind == "rope_2d":
        return refpos.to_numpy(apply_rope_2d(x, positions, layer.rope, seq_len=length))
    out = refpos.to_numpy(refpos.apply_rope(x, positions, layer.rope, seq_len=length))
    return out if layer.query_scale is None else out * layer.query_scale(positions)[:, None]


def rope_error(config: dict, seed: int = 0) -> tuple[float, float]:
    """(max |refpos − source| over the probes and lengths, the largest ratio of the error to its bound)."""
    resolved = refpos.model_positions(config)
    layer = resolved.layers[0]
    assert layer.kind in ("rope", "rope_2d"), (layer.kind, getattr(layer, "reason", ""))
    worst, ratio = 0.0, 0.0
    for length in lengths(config):
        probes = np.array([p for p in PROBES if p < min(length, declared_length(config))], dtype=np.int64)
        head = 2 * layer.rope.head_dim if layer.kind == "rope_2d" else layer.rope.head_dim
        x = np.random.default_rng(seed).standard_normal((probes.size, head))
        positions = np.stack([probes, probes[::-1]]) if layer.kind == "rope_2d" else probes
        ours = refpos_query(layer, x, positions, length)
        theirs = remote.reference(config, torch.from_numpy(x), torch.from_numpy(positions), length).numpy()
        inv, _ = refpos.rope_frequencies(layer.rope, seq_len=length)
        w_max = float(np.max(refpos.to_numpy(inv)))
        p = positions.max(axis=0) if positions.ndim == 2 else positions
        bound = 2 * np.abs(x).max() * (6 * p * w_max + 5) * EPS + 4 * EPS * np.abs(theirs).max()  # (T,)
        error = np.abs(ours - theirs).max(axis=-1)
        worst, ratio = max(worst, float(error.max())), max(ratio, float((error / bound).max()))
    return worst, ratio


REFUSED = sorted(n for n, e in CONFIGS.items() if e.get("refused"))
ROPE = sorted(n for n, e in CONFIGS.items()
              if n not in REFUSED and refpos.model_positions(e["config"]).layers[0].kind != "alibi")
ALIBI = sorted(n for n in CONFIGS if n not in ROPE and n not in REFUSED)


@pytest.mark.parametrize("name", ROPE)
def test_rotation_matches_the_family_s_own_code(name):
    config = CONFIGS[name]["config"]
    resolved = refpos.model_positions(config)
    assert not [k for k, why in resolved.not_modelled.items() if "positional by its name" in why]
    error, ratio = rope_error(config)
    assert ratio <= 1.0, (error, ratio)


@pytest.mark.parametrize("name", ALIBI)
def test_alibi_matches_the_family_s_own_code(name):
    config = CONFIGS[name]["config"]
    layer = refpos.model_positions(config).layers[0]
    q = np.array([0, 1, 7, 100, 2047], dtype=np.int64)
    k = np.arange(2048, dtype=np.int64)
    ours = layer.bias_at(q, k, rounded=False)
    theirs = remote.alibi_bias(len(layer.slopes), torch.from_numpy(q), torch.from_numpy(k)).numpy()
    visible = k[None, :] <= q[:, None]  # the causal mask: ALiBi forms agree where a query sees the key
    error = np.abs(np.where(visible, ours - theirs, 0.0)).max()
    assert error <= 2 * EPS * np.abs(theirs).max(), error


def test_the_anchor_breaks_on_a_wrong_reading():
    """Each meaning of ChatGLM's ``rope_ratio`` read as the other, and Qwen without its steps, fail the anchor."""
    glm4 = CONFIGS["THUDM/glm-4-9b-chat"]["config"]
    assert rope_error({**glm4, "_name_or_path": "THUDM/chatglm2-6b-32k"} | {"model_type": "chatglm"})[1] <= 1.0
    wrong = dict(glm4, _name_or_path="THUDM/glm-4-9b-chat")
    resolved = refpos.model_positions({**wrong, "_name_or_path": "THUDM/chatglm2-6b-32k"})
    x = np.random.default_rng(0).standard_normal((3, 128))
    positions = np.array([1, 100, 4096])
    theirs = remote.reference(wrong, torch.from_numpy(x), torch.from_numpy(positions), 4097).numpy()
    ours = refpos_query(resolved.layers[0], x, positions, 4097)
    assert np.abs(ours - theirs).max() > 0.1  # positions divided by 500 where the code multiplies the base
    qwen = CONFIGS["Qwen/Qwen-7B-Chat"]["config"]
    flat = refpos.model_positions(dict(qwen, use_dynamic_ntk=False)).layers[0]
    x = np.random.default_rng(0).standard_normal((2, 128))
    theirs = remote.reference(qwen, torch.from_numpy(x), torch.tensor([1, 20000]), QWEN_TABLE).numpy()
    assert np.abs(refpos_query(flat, x, np.array([1, 20000]), QWEN_TABLE) - theirs).max() > 0.1


def stated_error(config: dict, rope: refpos.RopeConfig, length: int) -> float:
    """max |Δ| of the query rotated by ``rope`` (a rotation a caller states) against the family's code at a first pass
    of ``length`` tokens, at the probes below it."""
    probes = np.array([p for p in PROBES if p < length], dtype=np.int64)
    x = np.random.default_rng(0).standard_normal((probes.size, rope.head_dim))
    ours = refpos.to_numpy(refpos.apply_rope(x, probes, rope, seq_len=length))
    theirs = remote.reference(config, torch.from_numpy(x), torch.from_numpy(probes), length).numpy()
    return float(np.abs(ours - theirs).max())


@pytest.mark.parametrize("name", REFUSED)
def test_telechat_is_refused_and_a_stated_rotation_shows_why(name):
    """TeleChat's base steps from ``max(L, training_seqlen)`` over a length its file fixes, and its cos and sin carry
    a magnitude past ``training_seqlen``: refpos refuses it (strict too). What a caller could state instead — plain
    RoPE at the code's base 10⁴, or that base raised by the step its file takes at the training length — agrees with
    the code only on some lengths, and which ones depends on the release (the 7B steps from 4096, the 12B from 8192):
    at twice the training length every statement is off."""
    config = CONFIGS[name]["config"]
    resolved = refpos.model_positions(config)
    assert all(layer.kind == "refused" for layer in resolved) and "NTK step" in resolved.not_modelled["model_type"]
    with pytest.raises(ValueError, match="strict: not modelled"):
        refpos.model_positions(config, strict=True)
    head, trained = config["hidden_size"] // config["n_head"], config["training_seqlen"]
    plain = refpos.RopeConfig(head_dim=head, theta=10000.0)
    alpha = remote.qwen_ntk_alpha(trained, remote.TELECHAT_STEP_FROM[config["hidden_size"]])  # the same step rule
    stepped = refpos.RopeConfig(head_dim=head, theta=10000.0 * alpha ** (head / (head - 2)))
    bound = 2 * 4 * (6 * trained + 5) * EPS * 10  # the anchor's bound at |x| ≤ 4 (ω ≤ 1), and a factor 10 to spare
    at_training = {"plain": stated_error(config, plain, trained), "stepped": stated_error(config, stepped, trained)}
    assert min(at_training.values()) <= bound, at_training  # one statement holds up to the training length …
    assert max(at_training.values()) > 0.1 or alpha == 1, at_training  # … and which one depends on the release
    for rope in (plain, stepped):
        assert stated_error(config, rope, 2 * trained) > 0.1  # past it none does


@pytest.mark.parametrize("length", [1, 2047, 2048, 2049, 4096, 4097, 8192, 8193, 2048 * 2**28, 2048 * 2**28 + 1])
def test_qwen_steps_match_its_code(length):
    """The step ``alpha`` of :mod:`refpos.rope.rules.step` is ``QWenModel.get_ntk_alpha``'s at every doubling and
    either side of it (to 2²⁸ L₀; ``math.log`` rounds the ratio 2²⁹ up, a length no Qwen model runs)."""
    from refpos.rope.rules.step import step_alpha

    assert step_alpha(length, 2048) == remote.qwen_ntk_alpha(length, 2048)


#: the keys positional by name that the rows of transformers' families leave unread in their config class's default
#: config, where the row is otherwise answered: each a real gap the resolution reports (no other key may be reported:
#: the rule does not flood). A row whose code is refused by name (its ``model_type`` not modelled) leaves the keys of
#: what it does unread by definition, and is not listed.
DEFAULT_GAPS = {
    "pegasus_x": "max_position_embeddings: its global–local attention's encoder stack is refused, the table unread",
    "patchtsmixer": "positional_encoding_type: the table's form, not read (sincos modelled, random not)",
}


def test_the_rule_reports_only_real_gaps_on_every_row_s_default_config():
    """The one rule over the default config of every transformers family row: a key positional by name is left
    unread only where the row's family really does something refpos does not model (:data:`DEFAULT_GAPS`), or where
    the row's code is refused by name as a whole; every listed gap is still found (a stale entry fails)."""
    transformers = pytest.importorskip("transformers", reason="the default configs are transformers' config classes")
    from refpos.models.families import FAMILY_ROWS, TRANSFORMERS_SOURCE
    from refpos.models.position_keys import BY_NAME

    flagged = {}
    for row in (r for r in FAMILY_ROWS if TRANSFORMERS_SOURCE.fullmatch(r.source)):
        try:
            default = transformers.AutoConfig.for_model(row.model_type).to_dict()
            resolved = refpos.model_positions(default)
        except (ValueError, KeyError, TypeError):  # a class this transformers lacks, or a default that cannot run
            continue
        found = sorted(key for key, why in resolved.not_modelled.items() if why == BY_NAME)
        refused_code = any(key == "model_type" or key.endswith(".model_type") for key in resolved.not_modelled)
        if found and not refused_code:
            flagged[row.model_type] = found
    assert set(flagged) <= set(DEFAULT_GAPS), {k: v for k, v in flagged.items() if k not in DEFAULT_GAPS}
    assert set(DEFAULT_GAPS) <= set(flagged), sorted(set(DEFAULT_GAPS) - set(flagged))  # modelled now: stale
