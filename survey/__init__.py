"""The survey: refpos's per-layer resolution of every transformers model type, measured against transformers.

``python -m survey run`` (``tox -e survey``) builds every model type of the installed transformers'
``CONFIG_MAPPING_NAMES`` from its config class's defaults, shrunk to a tiny geometry
(:mod:`survey.tiny`), asks refpos what each layer does with positions (:mod:`survey.adaptor`), runs the
model's own code with its attention recorded (:mod:`survey.probe`) and compares the two layer by layer
(:mod:`survey.compare`). The result is one row per model type (:mod:`survey.run`), stored in
``survey/results/`` and rendered as ``docs/survey.md`` (:mod:`survey.table`).

``tox -e survey`` runs it in two steps (:mod:`survey.stored`): ``python -m survey observe --jobs N`` runs
transformers' side in N processes and stores each model type's observation (:mod:`survey.store`); ``python -m
survey judge`` asks refpos about every stored observation and writes the table in minutes, without running a
model: rerun it after each change of refpos. ``python -m survey run`` does both in one process.

The survey needs torch and transformers; refpos does not, and nothing under ``refpos/`` imports this package.
"""
