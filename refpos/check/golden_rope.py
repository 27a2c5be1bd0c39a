"""``refpos check CASE`` for a RoPE golden case: the diagnosis and the fit of ``refpos check rope --config``.

A candidate checked against a golden case gets every diagnosis it would get with the config (the parity of
docs/diagnosis.md#golden-cases): the case holds the config (``parameters.rope``), the inputs and the length,
so the check runs :func:`refpos.check.run.check_rope` on them (1-D and M-RoPE alike; ``non_finite``, the
catalogue, the M-RoPE mistakes, the fit). The verdict stays the case's own: its comparison under its stored
tolerance decides ``ok``, the error of each pair and whether the pair is within it.

* ``apply`` cases (``apply_rope``): the full check, as ``refpos check rope``;
* ``frequencies`` cases (``rope_frequencies``): the candidate *is* ``ω̂``: each pair against its tolerance,
  the band of the rule it falls in and the keys that reproduce it (:func:`refpos.check.identify.identify_frequencies`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.check.identify import pair_status


def per_channel(cand: np.ndarray, reference: np.ndarray, entry: dict[str, Any], dtype: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The largest error and the largest ratio to the case's tolerance of every channel (last axis)."""
    from refpos.check.stream import block_error
    from refpos.golden.entries import allowed_error

    err = block_error(cand.astype(np.float64), reference.astype(np.float64))
    allowed = np.broadcast_to(allowed_error(reference.astype(np.float64), entry, dtype), err.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((err == 0) & (allowed == 0), 0.0, err / allowed)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    error = np.where(np.isnan(cand) & ~np.isnan(reference), np.nan, err)
    flat = error.shape[-1] if error.ndim else 1
    return error.reshape(-1, flat).max(axis=0), ratio.reshape(-1, flat).max(axis=0)


def _case_profile(rope: Any, positions: np.ndarray, cand: np.ndarray, reference: np.ndarray,
                  entry: dict[str, Any], dtype: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The error profile under the case's own tolerance (by position; M-RoPE also by kind of token) and its
    diagnosis entry."""
    from refpos.check import stream
    from refpos.check.mrope import TokenKinds, token_kinds_text
    from refpos.golden.entries import allowed_error

    cand64, reference64 = cand.astype(np.float64), reference.astype(np.float64)
    rows = stream.as_rows(cand64)  # (1, T, D)
    allowed = np.broadcast_to(allowed_error(reference64, entry, dtype), cand64.shape)
    mrope = rope.mrope_section is not None and positions.ndim >= 2
    per_token = positions.max(axis=0) if mrope else positions
    tally = stream.Tally(cand64.shape)
    tally.add(stream.as_rows(stream.block_error(cand64, reference64)), stream.as_rows(allowed),
              np.broadcast_to(per_token, cand64.shape[:-1]).reshape(rows.shape[:-1]), (0, 0))
    profile, entry_ = tally.profile(), tally.profile_entry()
    if mrope:
        axes = np.broadcast_to(positions, (3, *cand64.shape[:-1])).reshape(3, *rows.shape[:-1])
        kinds = TokenKinds(axes)
        kinds.add(slice(None), slice(None), rows, stream.as_rows(reference64), stream.as_rows(allowed))
        profile["by_token_kind"] = kinds.profile()
        entry_["evidence"] += f"; {token_kinds_text(kinds.profile())}"
    return profile, entry_


def diagnose_rope_case(case: dict[str, Any], inputs: dict[str, np.ndarray], cand: np.ndarray,
                       reference: np.ndarray, entry: dict[str, Any], dtype: str,
                       output: str | None = None) -> dict[str, Any] | None:
    """The diagnosis, error profile and identification of a RoPE case's candidate (``None``: not a RoPE case
    this module diagnoses). ``entry``: the output's tolerance entry, ``dtype`` the candidate's; ``output``: which
    output is compared
    (``cos`` or ``sin`` of a cos-sin case)."""
    from refpos.check.run import check_rope, non_finite
    from refpos.rope.params import rope_config_from_params

    params = case.get("parameters", {})
    function = case.get("function")
    if "rope" not in params or function not in {"apply_rope", "rope_frequencies", "rope_cos_sin"}:
        return None
    rope = rope_config_from_params(params["rope"])
    seq_len = params.get("seq_len")
    if function == "rope_cos_sin":
        return {"diagnosis": [*non_finite(cand.astype(np.float64), reference.astype(np.float64)),
                              *cos_sin_diagnosis(rope, seq_len, inputs["positions"], cand, reference, entry, dtype,
                                                 case.get("primary_output") if output is None else output)]}
    if function == "rope_frequencies" and cand.ndim == 0:  # the attention factor: one number, named by the
        from refpos.golden.entries import allowed_error  # mistakes that change it

        bound = float(allowed_error(reference.astype(np.float64), entry, dtype))
        return {"diagnosis": attention_factor_names(rope, seq_len, float(cand), bound)}
    channel_error, channel_ratio = per_channel(cand, reference, entry, dtype)
    if function == "rope_frequencies":
        from refpos.check.fit_names import frequency_names
        from refpos.check.identify import identify_frequencies
        from refpos.golden.entries import allowed_error

        bound = np.broadcast_to(allowed_error(reference.astype(np.float64), entry, dtype), cand.shape)
        ident = identify_frequencies(rope, seq_len, cand.astype(np.float64), np.asarray(bound), channel_error,
                                     channel_ratio)
        return {**ident, "diagnosis": frequency_names(rope, seq_len, ident)}
    checked = check_rope(cand, inputs["x"], inputs["positions"], rope, seq_len=seq_len, dtype=dtype, diagnose=True)
    out = {key: checked[key] for key in ("diagnosis", "pairs", "fitted", "reference") if key in checked}
    out["pairs"] = pair_status(rope, out["pairs"], channel_error, channel_ratio)
    out["error_profile"], profile = _case_profile(rope, inputs["positions"], cand, reference, entry, dtype)
    out["diagnosis"] = [profile if d["id"] == "error_profile" else d for d in out["diagnosis"]]
    if checked.get("n_nan"):
        out["n_nan"] = checked["n_nan"]
    return out


def attention_factor_names(rope: Any, seq_len: int | None, candidate: float, bound: float) -> list[dict[str, Any]]:
    """The mistakes whose attention factor ``A`` the candidate's equals within ``bound`` (``A`` missing, squared
    …), from the same variants as the ``apply`` case's mutants; ``attention_factor_mismatch`` for another one."""
    import refpos
    from refpos.check.catalogue import known
    from refpos.check.fit_names import variants_of
    from refpos.check.mistakes import Context, RopeCall

    omega, factor = refpos.rope_frequencies(rope, seq_len=seq_len, xp="numpy")
    call = RopeCall(rope, np.zeros(1, dtype=np.int64), seq_len, np.asarray(omega), float(factor))
    found: list[dict[str, Any]] = []
    for mistake_id, variant in variants_of(call, Context(np.zeros(1, dtype=np.int64), 0, 0)):
        a = variant.call.attention_factor
        shown = a != call.attention_factor and abs(candidate - a) <= bound and np.array_equal(variant.call.inv_freq,
                                                                                            call.inv_freq)
        if shown and mistake_id not in {f["id"] for f in found}:
            found.append({"id": known(mistake_id), "evidence": f"the attention factor shows it: {variant.evidence}"})
    if not found and np.isfinite(candidate) and abs(candidate - call.attention_factor) > bound:
        found.append({"id": known("attention_factor_mismatch"), "evidence": (
            f"the attention factor is {candidate:.10g}, the reference's {call.attention_factor:.10g}: another "
            "magnitude rule (none of the catalogue's forms of A)")})
    return found


def cos_sin_diagnosis(rope: Any, seq_len: int | None, positions: np.ndarray, cand: np.ndarray,
                      reference: np.ndarray, entry: dict[str, Any], dtype: str, output: str) -> list[dict[str, Any]]:
    """The catalogue for a ``cos`` or ``sin`` table: every mistake whose variant's table
    equals the candidate within the case's tolerance (the variants of :mod:`refpos.check.rope_mistakes`, their
    tables by :meth:`refpos.check.mistakes.RopeCall.tables`; per pair ``(T, m)`` or full width ``(T, 2m)``, as
    the candidate is). A table holds one of the two numbers of each pair, so the fit of the angle needs the
    apply case (the rotated ``x``)."""
    from refpos.check.catalogue import known
    from refpos.check.fit_names import variants_of
    from refpos.check.mistakes import Context, RopeCall
    from refpos.golden.entries import allowed_error
    from refpos.pairs import split_pairs

    found: list[dict[str, Any]] = []
    call = RopeCall.of(rope, positions, seq_len)
    tokens = np.arange(cand.shape[-2])
    context = Context(tokens, int(np.min(positions)), int(np.max(positions)))
    which = 1 if output == "sin" else 0

    def table(c: RopeCall) -> np.ndarray:
        full = c.tables()[which]  # (T, w) in the layout's order
        if full.shape == cand.shape:
            return np.asarray(full, dtype=np.float64)
        return np.asarray(split_pairs(full, c.rope.layout, side="written")[0], dtype=np.float64)  # (T, m)

    own = table(call)
    for mistake_id, variant in variants_of(call, context):
        if mistake_id in {f["id"] for f in found}:
            continue
        try:
            mutant = table(variant.call)
        except (ValueError, TypeError):
            continue
        if mutant.shape != cand.shape or np.array_equal(mutant, own):
            continue
        allowed = np.broadcast_to(allowed_error(mutant, entry, dtype), mutant.shape)
        if np.all(np.abs(cand.astype(np.float64) - mutant) <= allowed):
            found.append({"id": known(mistake_id), "evidence": f"the {output} table {variant.evidence}"})
    return found


#: what a table check's result carries of its fit (:mod:`refpos.check.fit_tables`)
TABLE_FIT_KEYS = ("pairs", "fitted", "reference", "heads", "wrong_heads", "bucket_map")


def table_case_fit(checked: dict[str, Any], cand: np.ndarray, reference: np.ndarray, entry: dict[str, Any],
                   dtype: str, sinusoid_layout: str | None) -> dict[str, Any]:
    """The diagnosis and the fit of a table check (ALiBi, T5, DeBERTa, sinusoid) for a golden case's result; a
    sinusoid's pairs judged under the case's tolerance (its ``(sin, cos)`` channels in ``sinusoid_layout``)."""
    out = {"diagnosis": checked["diagnosis"], **{k: checked[k] for k in TABLE_FIT_KEYS if k in checked}}
    if sinusoid_layout is not None and "pairs" in out:
        from refpos.pairs import pair_channels

        error, ratio = per_channel(cand, reference, entry, dtype)
        _, _, sin_ch, cos_ch = pair_channels(sinusoid_layout, cand.shape[-1])
        out["pairs"] = [{**p, "max_error": max(float(error[sin_ch[k]]), float(error[cos_ch[k]])),
                         "ok": bool(max(float(ratio[sin_ch[k]]), float(ratio[cos_ch[k]])) <= 1.0)}
                        for k, p in enumerate(out["pairs"])]
    return out
