"""mlalpha.metrics: the engine's metrics (docs/metrics.md) on arrays."""
from __future__ import annotations

import numpy as np

from . import _core
from ._panel import _as_float32


def metrics(pred, y, t0: int = 0, t1: int | None = None, min_pairs: int = 3) -> dict:
    """IC, rank IC, ICIR, directional accuracy and MSE of `pred` against `y` over time steps [t0, t1).

    pred and y have one shape: (N, T, K), (N, T) (one target) or (T,) (one series). NaN in either removes
    that point. Returns the means over the targets plus "points", "steps" and "per_target".
    """
    p = _as_float32(pred, "pred")
    t = _as_float32(y, "y")
    if p.shape != t.shape:
        raise ValueError(f"metrics: pred {p.shape} and y {t.shape} differ in shape")
    if p.ndim == 1:
        p, t = p[None, :, None], t[None, :, None]
    elif p.ndim == 2:
        p, t = p[:, :, None], t[:, :, None]
    elif p.ndim != 3:
        raise ValueError(f"metrics: pred and y must be (N, T, K), (N, T) or (T,), got {p.shape}")
    return _core.metrics(np.ascontiguousarray(p), np.ascontiguousarray(t), t0, -1 if t1 is None else t1, min_pairs)
