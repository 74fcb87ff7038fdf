"""mlalpha.metrics: the engine's metrics (docs/metrics.md) on arrays or pandas frames."""
from __future__ import annotations

import numpy as np

from . import _core
from ._panel import _as_float32, _frame_axes, _single_series_times


def _is_pandas(obj) -> bool:
    try:
        import pandas as pd
    except ImportError:
        return False
    return isinstance(obj, (pd.DataFrame, pd.Series))


def _frames_to_cubes(pred, y, time: str, instrument: str, time_format):
    """pred and y (DataFrames or Series, long: a (datetime, instrument) MultiIndex or time / instrument columns, or
    one series: a DatetimeIndex or a time column) as
    (N, T, K) arrays on one axis: the union of their rows, NaN where one of them has no row (that point is left
    out), times ordered by the engine's parser. Returns the arrays and the time steps' labels and values."""
    import pandas as pd

    def frame(obj, name):
        df = obj.to_frame() if isinstance(obj, pd.Series) else obj
        single = _single_series_times(df, time, instrument)
        if single is not None:  # one series: indexed by its times alone
            if single is not df.index:
                df = df.drop(columns=time)
            return checked(df.set_axis(pd.Index(single, name="datetime"), axis=0), name)
        if not isinstance(df.index, pd.MultiIndex):
            missing = [c for c in (time, instrument) if c not in df.columns]
            if missing:
                raise ValueError(f"metrics: {name} has neither a (datetime, instrument) MultiIndex nor the column(s) "
                                 f"{', '.join(map(repr, missing))}, nor is it one series (a DatetimeIndex, or a "
                                 f"{time!r} column without an {instrument!r} column)")
            df = df.set_index([time, instrument])
        if df.index.nlevels != 2:
            raise ValueError(f"metrics: {name}'s index must have two levels (datetime, instrument), got {df.index.nlevels}")
        return checked(df, name)

    def checked(df, name):
        if df.index.has_duplicates:
            raise ValueError(f"metrics: {name} has a (time, instrument) row more than once, e.g. {df.index[df.index.duplicated()][0]}")
        bad = [c for c in df.columns if df[c].dtype.kind not in "fiub"]
        if bad:
            raise TypeError(f"metrics: {name} column {bad[0]!r} has dtype {df[bad[0]].dtype}; values must be numbers or NaN")
        return df

    p, t = frame(pred, "pred"), frame(y, "y")
    if p.shape[1] != t.shape[1]:
        raise ValueError(f"metrics: pred has {p.shape[1]} column(s) ({', '.join(map(str, p.columns))}) and y has "
                         f"{t.shape[1]} ({', '.join(map(str, t.columns))}); they pair up by position, one per target")
    if p.index.nlevels != t.index.nlevels:
        raise ValueError(f"metrics: pred is {'one series' if p.index.nlevels == 1 else 'a panel'} and y is "
                         f"{'one series' if t.index.nlevels == 1 else 'a panel'} (by their index); give both alike")
    names = list(p.index.names)
    t.index = t.index.set_names(names)
    K = p.shape[1]
    both = pd.concat([p.set_axis([f"p{k}" for k in range(K)], axis=1),
                      t.set_axis([f"y{k}" for k in range(K)], axis=1)], axis=1, join="outer")
    levels = names if all(n is not None for n in names) else None
    if levels is None:
        both.index = both.index.set_names(["datetime", "instrument"])
    times, instruments, t_slot, i_slot, fmt = _frame_axes(both, time, instrument, time_format, "metrics")
    N, T = max(len(instruments), 1), len(times)  # no instrument names: one series
    pc = np.full((N, T, K), np.nan, dtype=np.float32)
    yc = np.full((N, T, K), np.nan, dtype=np.float32)
    pc[i_slot, t_slot] = both[[f"p{k}" for k in range(K)]].to_numpy(dtype=np.float64, na_value=np.nan)
    yc[i_slot, t_slot] = both[[f"y{k}" for k in range(K)]].to_numpy(dtype=np.float64, na_value=np.nan)
    values, _ = _core.parse_times(times, fmt, "metrics")
    return pc, yc, list(times), np.asarray(values), fmt


def _time_index(bound, times, values, fmt, name) -> int:
    """t0 / t1 given as a time step index, or as a time (a date string, a pandas Timestamp, a number on a numeric
    axis): the first time step at or after it."""
    if bound is None:
        return -1
    if isinstance(bound, (int, np.integer)) and not isinstance(bound, bool):
        return int(bound)
    try:
        import pandas as pd

        if isinstance(bound, (pd.Timestamp, np.datetime64)) or hasattr(bound, "isoformat"):
            text = pd.Timestamp(bound).isoformat()
            fmt = ""
        else:
            text = str(bound)
    except ImportError:
        text = str(bound)
    try:
        (value,), _ = _core.parse_times([text], fmt, f"metrics: {name}")
    except ValueError as e:
        raise ValueError(f"metrics: {name} = {bound!r} is neither a time step index nor a time of the frames' axis ({e})") from None
    return int(np.searchsorted(values, value, side="left"))


def metrics(pred, y, t0=0, t1=None, min_pairs: int = 3, quantiles: int = 5, periods_per_year: float | None = None,
            train_mean=None, *, time: str = "time", instrument: str = "instrument", time_format: str | None = None) -> dict:
    """IC, rank IC, ICIR, directional accuracy, MSE, the portfolio metrics and the sign strategy's (ts_*) of
    `pred` against `y` over time steps [t0, t1) (docs/metrics.md).

    Arrays: pred and y have one shape: (N, T, K), (N, T) (one target) or (T,) (one series).
    pandas: DataFrames or Series in the long layout of Panel.from_frame (a (datetime, instrument) MultiIndex, or
    `time` and `instrument` columns; one series: a DatetimeIndex or a `time` column), one column per target,
    paired by position (pred_ret with ret); rows are matched by (time, instrument), and the cross-sections are
    the dates (times read as from_frame reads them).
    t0 and t1 may then be times ("2021-01-01", a Timestamp): the first date at or after each.
    NaN in either removes that point. quantiles: groups per time step (ls_mean, ls_std, ls_sharpe, turnover,
    quantile_means); periods_per_year annualises ls_sharpe and ts_sharpe (None: NaN); train_mean (one value per
    target, or a scalar for one target) is the constant predictor behind mse_mean (None: NaN). Returns the means
    over the targets plus "points", "steps", "portfolio_steps", "per_target" and "long_short" (per target, the
    long-short series of [t0, t1), NaN where a time step formed no portfolios).
    """
    if _is_pandas(pred) or _is_pandas(y):
        if not (_is_pandas(pred) and _is_pandas(y)):
            raise TypeError("metrics: give pred and y both as pandas frames (or Series), or both as arrays")
        p, t, times, values, fmt = _frames_to_cubes(pred, y, time, instrument, time_format)
        t0 = _time_index(t0, times, values, fmt, "t0")
        t1 = _time_index(t1, times, values, fmt, "t1")
        t0 = 0 if t0 < 0 else t0
    else:
        p = _as_float32(pred, "pred")
        t = _as_float32(y, "y")
        if not isinstance(t0, (int, np.integer)) or not (t1 is None or isinstance(t1, (int, np.integer))):
            raise TypeError("metrics: with arrays, t0 and t1 are time step indices (times need frames)")
        if p.shape != t.shape:
            raise ValueError(f"metrics: pred {p.shape} and y {t.shape} differ in shape")
        if p.ndim == 1:
            p, t = p[None, :, None], t[None, :, None]
        elif p.ndim == 2:
            p, t = p[:, :, None], t[:, :, None]
        elif p.ndim != 3:
            raise ValueError(f"metrics: pred and y must be (N, T, K), (N, T) or (T,), got {p.shape}")
        t1 = -1 if t1 is None else t1
    base = [] if train_mean is None else [float(v) for v in np.atleast_1d(np.asarray(train_mean, dtype=np.float64))]
    ppy = float("nan") if periods_per_year is None else float(periods_per_year)
    return _core.metrics(np.ascontiguousarray(p), np.ascontiguousarray(t), int(t0), int(t1), min_pairs, quantiles, ppy,
                         base)
