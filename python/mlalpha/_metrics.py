"""mlalpha.metrics: the engine's metrics (docs/metrics.md) on arrays."""
from __future__ import annotations

import numpy as np

from . import _core
from ._panel import _as_float32


def metrics(pred, y, t0: int = 0, t1: int | None = None, min_pairs: int = 3, quantiles: int = 5,
            periods_per_year: float | None = None, train_mean=None) -> dict:
    """IC, rank IC, ICIR, directional accuracy, MSE and the portfolio metrics of `pred` against `y` over
    time steps [t0, t1) (docs/metrics.md).

    pred and y have one shape: (N, T, K), (N, T) (one target) or (T,) (one series). NaN in either removes
    that point. quantiles: groups per time step (ls_mean, ls_std, ls_sharpe, turnover, quantile_means);
    periods_per_year annualises ls_sharpe (None: NaN); train_mean (one value per target, or a scalar for
    one target) is the constant predictor behind mse_mean (None: NaN). Returns the means over the targets
    plus "points", "steps", "portfolio_steps", "per_target" and "long_short" (per target, the long-short
    series of [t0, t1), NaN where a time step formed no portfolios).
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
    base = [] if train_mean is None else [float(v) for v in np.atleast_1d(np.asarray(train_mean, dtype=np.float64))]
    ppy = float("nan") if periods_per_year is None else float(periods_per_year)
    return _core.metrics(np.ascontiguousarray(p), np.ascontiguousarray(t), t0, -1 if t1 is None else t1, min_pairs,
                         quantiles, ppy, base)
