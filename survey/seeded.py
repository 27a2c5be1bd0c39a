"""Seeded random inputs: the same values for a seed and a shape on every call and in every process, so that the
runs of one observation (and a stored observation and a rerun) see the same inputs."""

from __future__ import annotations

from typing import Any


def seeded_normal(seed: int, *shape: int) -> Any:
    """Standard normal float32 values of ``shape`` drawn from a generator seeded with ``seed``."""
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def seeded_uniform(seed: int, *shape: int) -> Any:
    """Uniform float32 values in [0, 1) of ``shape`` drawn from a generator seeded with ``seed``."""
    import torch

    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))
