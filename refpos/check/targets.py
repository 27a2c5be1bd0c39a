"""The registry of ``refpos check`` targets: one :class:`CheckTarget` record per target (:data:`TARGETS`).

A target is the first word of ``refpos check TARGET``: what it compares a candidate with. Its record says

==============  ==================================================================================================
field           what it holds
==============  ==================================================================================================
``name``        the word (the kinds' records name it: ``refpos.models.kinds.EncodingKind.check``)
``summary``     one line, for ``refpos check --help`` and the docs
``kinds``       the encoding kinds (:data:`refpos.models.kinds.KINDS`) whose layers it checks: ``--config`` picks
                the first layer of one of them
``flags``       the options it reads beside the candidate (each an option of ``refpos check``)
``streamed``    whether the candidate is read block by block (:func:`refpos.golden.files.npy_file.open_npy`)
``run``         ``Request -> result``: compare and name the mistake (:mod:`refpos.check.shared.request`)
``functions``   the functions of the golden cases it diagnoses (``refpos check CASE``)
``golden``      ``(case, args, inputs, candidate, dtype) -> result``: that diagnosis
==============  ==================================================================================================

The command line (:mod:`refpos.cli.check`) is derived from this table: its dispatch, the kinds each target
picks with ``--config``, which candidates it streams; a word that is not a target is a golden case id
(:func:`refpos.check.case.check_case`). The meta-test (``refpos/tests/test_kinds_registry.py``) asks every kind
for its target here, and ``refpos/tests/test_check_targets.py`` asks every record for its pieces.

The RoPE target and the table targets are packages of their own (:mod:`refpos.check.rope`,
:mod:`refpos.check.tables`); the vision and audio kinds share one target built per kind
(:mod:`refpos.check.kinds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from refpos.check.kinds import KIND_CHECKS, KindCheck
from refpos.check.kinds import target as kind_target
from refpos.check.rope import run as rope
from refpos.check.shared.request import Request
from refpos.check.tables import alibi, deberta, learned, sinusoid, t5


@dataclass(frozen=True)
class CheckTarget:
    """One ``refpos check`` target (the module docstring's table)."""

    name: str
    summary: str
    kinds: tuple[str, ...]
    flags: tuple[str, ...]
    streamed: bool
    run: Callable[[Request], dict[str, Any]]
    functions: tuple[str, ...] = ()
    golden: Callable[..., dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if not self.kinds:
            raise ValueError(f"check target {self.name!r}: name the kinds it checks")
        if bool(self.functions) != (self.golden is not None):
            raise ValueError(f"check target {self.name!r}: golden functions and their diagnosis go together")


#: the options that pick a model's layer (``--config``), which every target with ``--config`` reads
CONFIG_FLAGS = ("--config", "--stack", "--layer", "--assume")


def _kind_target(check: KindCheck) -> CheckTarget:
    """The target of one vision or audio kind: a call file (:mod:`refpos.check.kinds.call`), the arguments it
    leaves out taken from the ``--config`` layer (:func:`refpos.golden.cases.model_kind_cases.layer_arguments`)."""
    return CheckTarget(check.kind, f"the output of {', '.join(check.functions)} given by --call CALL.json (with "
                       "--config: the layer's own arguments)", (check.kind,), ("--call", *CONFIG_FLAGS), False,
                       partial(kind_target.run, check), check.functions, partial(kind_target.golden, check))


def _registry(*targets: CheckTarget) -> Mapping[str, CheckTarget]:
    names = [target.name for target in targets]
    if len(set(names)) != len(names):
        raise ValueError(f"check target names must be unique, got {names}")
    kinds = [kind for target in targets for kind in target.kinds]
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"a kind is checked by one target, got {kinds}")
    return MappingProxyType({target.name: target for target in targets})


#: target name -> its record, in the order ``refpos check --help`` lists them
TARGETS: Mapping[str, CheckTarget] = _registry(
    CheckTarget("rope", "a RoPE output of the --config layer: apply_rope(--input, --positions)", ("rope", "mrope"),
                ("--input", "--positions", "--seq-len", "--layer-type", "--strict", *CONFIG_FLAGS), True, rope.run),
    CheckTarget("alibi", "ALiBi slopes (--heads) or a bias (--q-len × --k-len)", ("alibi",),
                ("--heads", "--q-len", "--k-len", "--form", "--head-dim", *CONFIG_FLAGS), True, alibi.run,
                ("alibi_slopes", "alibi_bias"), alibi.golden),
    CheckTarget("t5", "T5 buckets of --relative (or the --q-len × --k-len grid)", ("t5",),
                ("--relative", "--q-len", "--k-len", "--causal", "--num-buckets", "--max-distance", *CONFIG_FLAGS),
                True, t5.run, ("t5_bucket",), t5.golden),
    CheckTarget("deberta", "DeBERTa log buckets of --relative (or the --q-len × --k-len grid)", ("deberta",),
                ("--relative", "--q-len", "--k-len", "--position-buckets", "--max-relative-positions", *CONFIG_FLAGS),
                True, deberta.run, ("deberta_log_buckets",), deberta.golden),
    CheckTarget("sinusoid", "a sinusoidal table of --positions (or 0 … --length − 1)", ("sinusoidal",),
                ("--dim", "--positions", "--length", "--base", "--layout", "--spacing", *CONFIG_FLAGS), True,
                sinusoid.run, ("sinusoidal",), sinusoid.golden),
    CheckTarget("learned", "the rows of the --config layer's learned table (--table) at --positions", ("learned",),
                ("--table", "--positions", *CONFIG_FLAGS), False, learned.run),
    *(_kind_target(check) for check in KIND_CHECKS),
)
#: target -> the kinds of layer record it checks (what ``--config`` picks)
TARGET_KINDS: Mapping[str, tuple[str, ...]] = MappingProxyType({n: t.kinds for n, t in TARGETS.items()})
#: golden case function -> the target that diagnoses it
FUNCTION_TARGETS: Mapping[str, CheckTarget] = MappingProxyType(
    {function: target for target in TARGETS.values() for function in target.functions})


def target_of(name: str) -> CheckTarget | None:
    """The record of target ``name``; ``None`` for a word that is not a target (a golden case id)."""
    return TARGETS.get(name)


__all__ = ["CONFIG_FLAGS", "FUNCTION_TARGETS", "TARGETS", "TARGET_KINDS", "CheckTarget", "target_of"]
