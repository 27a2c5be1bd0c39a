"""What an adapter of the spec suite may declare in ``INFO``, and what each declaration does to the suite.

One record per declaration (:data:`DECLARATIONS`): its key, the values it takes, its default, and what the
suite does with it. The table of spec_tests/README.md ("What an adapter declares") is rendered from these
records (:func:`markdown_table`; ``spec_tests/test_meta_contract.py`` fails when the two drift apart), and
every reader of ``INFO`` goes through the functions below, which raise :class:`DeclarationError` naming the
key for a value outside the record (a typo is never read as "everything"); the suite reports it as a usage
error.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from refpos.golden.exact.forms import FORMS, check_forms
from refpos.golden.exact.ulp import check_dtype
from refpos.pairs import PARTIAL_PLACEMENTS
from refpos.rope.config import LAYOUTS, ROPE_TYPES


class DeclarationError(ValueError):
    """An ``INFO`` declaration outside its record (the spec suite stops with it as a usage error)."""


@dataclass(frozen=True)
class Declaration:
    """One ``INFO`` key: the values it may take (a list of them when ``many``), its default and its effect."""

    key: str
    values: tuple[str, ...]
    default: str
    effect: str
    many: bool = False
    default_values: tuple[str, ...] = ()  # a list declaration's values when left out (empty: all of them)
    mapping: bool = False  # a dict {rule: {key: value}} instead of names


#: the functions whose results depend on RoPE tables the library computes itself (frequencies, angles)
TABLE_FUNCTIONS = ("rope_frequencies", "rope_cos_sin", "apply_rope", "apply_rope_complex", "rope_rotation_matrix",
                   "rope_attention_logits", "rope_dynamic_ntk_frequencies")

DECLARATIONS: dict[str, Declaration] = {d.key: d for d in (
    Declaration("rope_types", ROPE_TYPES, "every rule", many=True,
                effect="the RoPE strategies draw only these rules; a test that needs another is skipped with "
                       "that reason before it draws"),
    Declaration("rope_layouts", LAYOUTS, "every layout", many=True,
                effect="the strategies draw only these layouts; a test that needs another (the layout "
                       "conjugacy needs two) is skipped with that reason before it draws; golden cases in another "
                       "layout are replayed in a declared one through the fixed permutation (the layout cases "
                       "are not)"),
    Declaration("rope_placements", PARTIAL_PLACEMENTS, "first and last",
                many=True, effect="the partial-rotary placements drawn (`[]`: no partial rotary)"),
    Declaration("mrope", ("contiguous", "interleaved", "hw_alternating", "four_rows"), "contiguous and interleaved",
                many=True, default_values=("contiguous", "interleaved"),
                effect="the M-RoPE assignments drawn (docs/mrope.md#the-math; `hw_alternating`: dicts with "
                       "`mrope_assignment`, ERNIE-4.5-VL's); `four_rows`: also dicts of four "
                       "sections with positions `(4, ..., T)`, rows t, h, w, e (ggml's `rope_multi`); `[]`: no "
                       "M-RoPE (its tests are skipped with that reason before they draw)"),
    Declaration("vision_forms", ("qwen2_vl", "pixtral", "llama4", "axial"), "every form", many=True,
                effect="the vision RoPE forms drawn by `spec_tests/test_vision_rope.py` (`[]`: no vision RoPE)"),
    Declaration("rope_constants", (*ROPE_TYPES, "*"), "none", mapping=True,
                effect="values the library hard-codes, per rule (`\"*\"`: every rule), e.g. "
                       "`{\"llama3\": {\"factor\": 8.0}}` for Meta's `apply_scaling`: the strategies draw "
                       "those keys at those values, so no drawn example is discarded for them"),
    Declaration("rope_tables", ("computed", "input"), "computed",
                effect="`input`: the rotation takes cos/sin tables as inputs (ONNX `RotaryEmbedding`, "
                       "`cos_sin_cache` kernels): the adapter provides `apply_rope_tables` and none of the "
                       "functions that compute tables, and the matrix credits it with the rotation only"),
    Declaration("forms", tuple(FORMS), "every form the dtype admits", many=True,
                effect="the forms of the computation (docs/conventions.md#tolerances): the tolerance of "
                       "angle-derived values is the bound of these (a kind left out: every form of it the "
                       "dtype admits); the header prints the bound in force; goldens admit every form"),
    Declaration("seq_len", ("argument", "positions"), "argument",
                effect="`positions`: the library takes the length L of dynamic NTK and LongRoPE from the "
                       "batch's positions (max + 1) and has no seq_len: the suite drops seq_len where it is "
                       "that length or the rule does not depend on L, and otherwise discards the example "
                       "with that reason (spec_tests/length_from_positions.py)"),
    Declaration("negative_positions", ("error", "rotate"), "error",
                effect="`error`: a negative position is a `ValueError`; `rotate`: position −δ rotates by "
                       "the angle −δ·ω (llama.cpp's K-shift), tested as the inverse of +δ"),
)}


def _declared(impl: ModuleType) -> dict[str, Any]:
    declared = getattr(impl, "INFO", None)
    return dict(declared) if isinstance(declared, dict) else {}


def _name(impl: ModuleType) -> str:
    return getattr(impl, "__name__", repr(impl))


def declared_list(impl: ModuleType, key: str) -> tuple[str, ...] | None:
    """The values the adapter lists under ``key`` (a ``many`` declaration), ``None`` when it leaves it out."""
    record = DECLARATIONS[key]
    declared = _declared(impl)
    if key not in declared:
        return None
    values = declared[key]
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise DeclarationError(f"{_name(impl)}: INFO[{key!r}] must be a list of names, got {values!r}")
    unknown = [v for v in values if v not in record.values]
    if unknown:
        raise DeclarationError(f"{_name(impl)}: INFO[{key!r}] has {unknown}; allowed: {record.values}")
    return tuple(values)


def declared_value(impl: ModuleType, key: str) -> str:
    """The one value the adapter declares under ``key`` (its default when left out)."""
    record = DECLARATIONS[key]
    value = _declared(impl).get(key, record.default)
    if value not in record.values:
        raise DeclarationError(f"{_name(impl)}: INFO[{key!r}] is {value!r}; allowed: {record.values}")
    return value


#: rope keys a library may hard-code (its rule's numbers and the base); the geometry is drawn, never fixed
CONSTANT_KEYS = ("rope_theta", "factor", "original_max_position_embeddings", "max_position_embeddings", "beta_fast",
                 "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate", "low_freq_factor",
                 "high_freq_factor", "short_factor", "long_factor", "short_mscale", "long_mscale", "dynamic_rule",
                 "softmax_mscale")


def declared_constants(impl: ModuleType, rope_type: str) -> dict[str, Any]:
    """The rope keys ``impl`` hard-codes for ``rope_type`` (``INFO["rope_constants"]``: the rule's entry over
    the ``"*"`` entry); ``{}`` when it declares none."""
    declared = _declared(impl).get("rope_constants", {})
    if not isinstance(declared, dict):
        raise DeclarationError(f"{_name(impl)}: INFO['rope_constants'] must be a dict {{rule: {{key: value}}}}, got "
                               f"{type(declared).__name__}")
    out: dict[str, Any] = {}
    for rule in ("*", rope_type):
        values = declared.get(rule, {})
        if not isinstance(values, dict):
            raise DeclarationError(f"{_name(impl)}: INFO['rope_constants'][{rule!r}] must be a dict of rope keys")
        unknown = [k for k in values if k not in CONSTANT_KEYS]
        if unknown:
            raise DeclarationError(f"{_name(impl)}: INFO['rope_constants'][{rule!r}] has {unknown}; a library may "
                                   f"hard-code {CONSTANT_KEYS}")
        out.update(values)
    return out


def check_declarations(impl: ModuleType) -> None:
    """Every declaration of ``impl`` read once (a usage error names a bad one), and what they imply: an
    adapter whose rotation takes its tables (``rope_tables = "input"``) provides no function that computes
    them, since the tables it would return are someone else's."""
    for key, record in DECLARATIONS.items():
        if record.mapping:
            constants = _declared(impl).get(key, {})
            unknown = [rule for rule in constants if rule not in record.values] if isinstance(constants, dict) else []
            if unknown:
                raise DeclarationError(f"{_name(impl)}: INFO[{key!r}] names {unknown}; allowed: {record.values}")
            for rule in record.values:
                declared_constants(impl, rule)
        else:
            declared_list(impl, key) if record.many else declared_value(impl, key)
    forms = declared_list(impl, "forms")
    if forms is not None:
        try:
            check_forms(check_dtype(_declared(impl).get("dtype", "float64")), forms)
        except ValueError as exc:
            raise DeclarationError(f"{_name(impl)}: INFO['forms']: {exc}") from None
    if declared_value(impl, "rope_tables") == "input":
        computing = [name for name in TABLE_FUNCTIONS if callable(getattr(impl, name, None))]
        if computing:
            raise DeclarationError(
                f"{_name(impl)}: INFO['rope_tables'] = 'input' (its rotation takes the tables) but it provides "
                f"{computing}, which compute tables: provide apply_rope_tables only, or declare 'computed'")


def markdown_table() -> str:
    """The declarations as the table of spec_tests/README.md."""
    rows = ["| `INFO` key | values | default | what the suite does with it |", "|---|---|---|---|"]
    for record in DECLARATIONS.values():
        values = ", ".join(f"`{v}`" for v in record.values)
        kind = "a list of " if record.many else ("a dict keyed by " if record.mapping else "")
        rows.append(f"| `{record.key}` | {kind}{values} | {record.default} | "
                    f"{record.effect} |")
    return "\n".join(rows)
