"""A second engine for the survey: vLLM's own model classes, built from each architecture's config on the CPU.

``python -m survey.vllm_engine observe | judge`` (``tox -e survey-vllm``) surveys every architecture of the
installed vLLM's model registry (:mod:`survey.vllm_engine.configs`) as the transformers survey surveys every model
type: a tiny config, vLLM's model built from it with its attention recorded (:mod:`survey.vllm_engine.engine`),
run on probe positions through every rotary module's ``forward_native`` (:mod:`survey.vllm_engine.probe`), and
refpos's per-layer answer for the same config compared by :mod:`survey.compare` with the same bounds
(:mod:`survey.vllm_engine.run`). The rows are stored in ``survey/results/vllm.json``; where the two engines
disagree on a model type, :mod:`survey.vllm_engine.disagreements` lists it with the evidence and the model
authors' code that decides it; ``docs/survey.md`` renders both (:mod:`survey.vllm_engine.table`).

vLLM is installed without its CUDA dependencies (``tox.ini``'s ``[peers] vllm_deps``); nothing under ``refpos/``
imports this package. Its configs are built with the transformers release the transformers survey runs (5.25), past
the range vLLM 0.34 declares (``transformers>=5.16.1,<5.23``), so that both engines read the same config classes.
Measured on the whole registry with 5.22.2, inside that range: the same verdicts on 424 of the 426 architectures
(ExaoneForCausalLM exact → not reached, SarvamMLAForCausalLM wrong → not reached: configs 5.22 builds otherwise or
lacks), and the 37 architectures that stop on a config attribute vLLM reads stop alike: their class defaults lack a
key the published checkpoints state (``head_dim``, ``rotary_dim``, ``block_dim``, …), which no release adds.
"""
