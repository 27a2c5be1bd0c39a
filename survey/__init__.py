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

Each layer is graded on the input its record says it reads (:mod:`survey.sources`: the position ids, the
token's slot, the attention mask's running count), on run A and on every case of :mod:`survey.cases`; every
exact answer is then changed one way at a time (:mod:`survey.mutants`) and each wrong answer must come out
wrong, else the row is not exact. Each transformers release has its own table
(``survey/results/transformers-<version>.json``, ``tox -e survey-5.24``, ``tox -e survey`` for the newest);
the page has a column per release and the model types that changed between them. ``observe`` runs on any
``concurrent.futures`` executor: processes here (``--jobs``, :mod:`survey.workers`: a process killed while
observing, as by the kernel's out-of-memory killer, leaves its model type unstored and named, and the run goes on)
or a dask.distributed cluster (``--dask tcp://HOST:PORT``); an observation records the engine whose code ran
(``transformers``; another engine fills the same records).

A model whose forward takes pixel values, audio or features instead of token ids is run on seeded inputs at its
native size and at a size that forces its position encoding to be resampled (:mod:`survey.pixels`, in float64
where its code runs in it), each position site's weights and what it adds recorded, and judged kind by kind
(:mod:`survey.pixel_compare`, :mod:`survey.pixel_kinds`: one comparison record per kind, each with its ``refpos
check`` target's reference, bound and catalogued mistakes as the wrong answers the observation must tell apart).

The survey needs torch and transformers; refpos does not, and nothing under ``refpos/`` imports this package.
"""
