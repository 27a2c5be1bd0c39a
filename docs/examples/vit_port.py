"""A port of ViT's position grid that resamples bilinearly (ViT's code resamples bicubic): the CLS row kept, the
4 × 4 grid of the golden case's table resized to the 3 × 6 patch grid with half-pixel centres."""
import sys

import numpy as np

table, out = np.load(sys.argv[1]), sys.argv[2]
cls, grid = table[:1], table[1:].reshape(4, 4, -1)


def taps(n_in: int, n_out: int) -> list[tuple[int, int, float]]:
    """Each output index's two input indices and weight: source s = (i + 1/2)·n_in/n_out − 1/2, clamped at 0."""
    out = []
    for i in range(n_out):
        s = max((i + 0.5) * n_in / n_out - 0.5, 0.0)
        j = min(int(s), n_in - 1)
        out.append((j, min(j + 1, n_in - 1), s - j))
    return out


rows = np.stack([(1 - w) * grid[a] + w * grid[b] for a, b, w in taps(4, 3)])          # (3, 4, C)
both = np.stack([(1 - w) * rows[:, a] + w * rows[:, b] for a, b, w in taps(4, 6)], 1)  # (3, 6, C)
np.save(out, np.concatenate([cls, both.reshape(18, -1)]).astype(np.float32))
