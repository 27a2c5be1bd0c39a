"""The survey: refpos's per-layer resolution of every transformers model type, measured against transformers.

``python -m survey run`` (``tox -e survey``) builds every model type of the installed transformers'
``CONFIG_MAPPING_NAMES`` from its config class's defaults, shrunk to a tiny geometry
(:mod:`survey.tiny`), asks refpos what each layer does with positions (:mod:`survey.adaptor`), runs the
model's own code with its attention recorded (:mod:`survey.probe`) and compares the two layer by layer
(:mod:`survey.compare`). The result is one row per model type (:mod:`survey.run`), stored in
``survey/results/`` and rendered as ``docs/survey.md`` (:mod:`survey.table`).

The survey needs torch and transformers; refpos does not, and nothing under ``refpos/`` imports this package.
"""
