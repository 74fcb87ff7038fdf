"""mlalpha.Panel: N instruments x T time steps x F features with K targets (docs/data.md)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import _core


def _as_float32(a, name: str) -> np.ndarray:
    """A C-contiguous float32 array; float32 C-contiguous input is passed on as is, other floats converted."""
    arr = np.asarray(a)
    if arr.dtype.kind != "f":
        raise TypeError(f"{name}: expected a float array (float16/32/64), got dtype {arr.dtype}"
                        + (" (convert integers with .astype(np.float32) if that is what you mean)" if arr.dtype.kind in "iub" else ""))
    return np.ascontiguousarray(arr, dtype=np.float32)


def _labels(values, name: str) -> list[str]:
    if values is None:
        return []
    return [str(v) for v in values]


def _single_series_times(df, time: str, instrument: str):
    """The times of a frame that is one series (what data.instrument_column = "" reads from a CSV file), or None:
    no instrument level or column, and the times in a plain DatetimeIndex (or an index named `time` or
    "datetime") or in the column `time`."""
    import pandas as pd

    idx = df.index
    if isinstance(idx, pd.MultiIndex) or instrument in df.columns:
        return None
    if isinstance(idx, pd.DatetimeIndex) or (idx.name is not None and idx.name in (time, "datetime")):
        return idx
    return pd.Index(df[time]) if time in df.columns else None


def _frame_keys(df, time: str, instrument: str):
    """The (time, instrument) label of every row: from a two-level MultiIndex (Qlib's (datetime,
    instrument); levels found by name, else by position) or from the columns `time` and `instrument`. A single
    series (_single_series_times) has no instrument labels: None."""
    import pandas as pd

    idx = df.index
    if isinstance(idx, pd.MultiIndex):
        if idx.nlevels != 2:
            raise ValueError(f"from_frame: a MultiIndex must have two levels (datetime, instrument), got {idx.nlevels}")
        names = list(idx.names)
        t_level = names.index(time) if time in names else names.index("datetime") if "datetime" in names else 0
        return idx.get_level_values(t_level), idx.get_level_values(1 - t_level)
    single = _single_series_times(df, time, instrument)
    if single is not None:
        return single, None
    missing = [c for c in (time, instrument) if c not in df.columns]
    if not missing:
        return pd.Index(df[time]), pd.Index(df[instrument])
    raise ValueError(f"from_frame: the frame has neither a (datetime, instrument) MultiIndex nor the column(s) "
                     f"{', '.join(map(repr, missing))}, nor is it one series (a DatetimeIndex, or a {time!r} column "
                     f"without an {instrument!r} column); columns: {', '.join(map(str, df.columns[:20]))}")


def _python_words(message: str) -> str:
    """An engine message about the time layout, in the words of the Python argument (time_format=)."""
    return (message.replace("set data.time_format = ", "pass time_format=")
            .replace("leave data.time_format unset", "leave time_format=None")
            .replace("data.time_format", "time_format"))


def _is_yyyymmdd(values: np.ndarray) -> bool:
    """Integers that are all dates written as yyyymmdd (19000101 .. 21001231, valid months and days)."""
    v = values.astype(np.int64)
    if v.size == 0 or v.min() < 19000101 or v.max() > 21001231:
        return False
    import pandas as pd

    return not pd.to_datetime(pd.Series(v).astype(str), format="%Y%m%d", errors="coerce").isna().any()


def _time_axis(labels, time_format: str | None, what: str):
    """The unique time labels of a frame ordered as the CSV reader orders a file's (the engine's parser reads
    them: numbers, ISO 8601, `time_format`; docs/data.md, "Time axis"). Returns (the label of each time step as
    the panel names it, the time step of each given label, the time_format the panel records). pandas datetimes
    are written as ISO 8601 (dates alone when every time is midnight); integers that are all yyyymmdd dates are
    read as dates; labels that mix kinds or that the parser cannot read are refused, naming one."""
    import pandas as pd

    idx = pd.Index(labels)
    fmt = "" if time_format is None else str(time_format)
    if isinstance(idx, pd.DatetimeIndex) or idx.dtype.kind == "M":
        idx = pd.DatetimeIndex(idx)
        if idx.tz is not None:
            text = [t.isoformat() for t in idx]  # 2020-01-02T09:30:00+00:00: the offset kept
        elif (idx == idx.normalize()).all():
            text = list(idx.strftime("%Y-%m-%d"))
        else:
            text = [t.isoformat() for t in idx]
        if fmt:
            raise ValueError(f"{what}: time_format={fmt!r} is for text times; these are pandas datetimes (leave time_format=None)")
    elif idx.dtype.kind in "iu" and not fmt and _is_yyyymmdd(idx.to_numpy()):
        text, fmt = [str(int(v)) for v in idx], "%Y%m%d"
    elif idx.dtype.kind == "f" and not fmt and np.isfinite(idx.to_numpy()).all() and (idx.to_numpy() % 1 == 0).all() \
            and _is_yyyymmdd(idx.to_numpy()):
        text, fmt = [str(int(v)) for v in idx], "%Y%m%d"
    else:
        text = [str(v) for v in idx]
    try:
        values, are_dates = _core.parse_times(text, fmt, what)
    except ValueError as e:  # the engine says where a label is ("at <what>"): a frame's labels have no line
        raise ValueError(_python_words(str(e).replace(f" at {what})", ")"))) from None
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    # Equal values ("2020-01-31" and "2020-01-31T00:00:00Z") are one time step, named by the first in order.
    sorted_values = values[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_values[1:] != sorted_values[:-1]
    step_of_sorted = np.cumsum(first) - 1
    slot = np.empty(len(order), dtype=np.int64)
    slot[order] = step_of_sorted
    names = [text[i] for i in order[first]]
    return names, slot, fmt


def _frame_values(df, columns, what: str) -> np.ndarray:
    """The columns as float32 (rows, len(columns)); errors name the column (and the row for ±Inf)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"from_frame: {what} column(s) {', '.join(map(repr, missing))} not in the frame; "
                         f"columns: {', '.join(map(str, df.columns[:20]))}")
    out = np.empty((len(df), len(columns)), dtype=np.float32)
    for j, c in enumerate(columns):
        col = df[c]
        if col.dtype.kind not in "fiu":
            raise TypeError(f"from_frame: {what} column {c!r} has dtype {col.dtype}; values must be numbers or NaN")
        v = col.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(over="ignore"):
            out[:, j] = v
        bad = np.flatnonzero(np.isinf(out[:, j]))
        if bad.size:
            label = df.index[bad[0]]
            label = "(" + ", ".join(map(str, label)) + ")" if isinstance(label, tuple) else str(label)
            raise ValueError(f"from_frame: {what} column {c!r} at row {label} is {float(v[bad[0]]):g} "
                             "(infinite or outside the float32 range); values must be finite or NaN")
    return out


def _frame_axes(df, time: str, instrument: str, time_format: str | None, what: str):
    """The panel axes of a long frame: (time labels in order, instrument labels sorted, each row's time slot and
    instrument slot, the time_format used); a (time, instrument) seen twice is an error naming it."""
    import pandas as pd

    t_raw, i_raw = _frame_keys(df, time, instrument)
    if t_raw.hasnans or (i_raw is not None and i_raw.hasnans):
        raise ValueError(f"{what}: a time or instrument label is missing (NaN/NaT)")
    t_codes, t_uniques = pd.factorize(t_raw)
    times, slot_of_unique, fmt = _time_axis(t_uniques, time_format, what)
    t_slot = slot_of_unique[t_codes]
    T = len(times)
    if i_raw is None:  # one series: N = 1, its instrument unnamed, as a CSV file read without an instrument column
        dup = np.flatnonzero(np.bincount(t_slot, minlength=T) > 1)
        if dup.size:
            raise ValueError(f"{what}: time {times[int(dup[0])]} appears in more than one row of the series")
        return times, [], t_slot, np.zeros(len(t_slot), dtype=np.int64), fmt
    try:
        instruments = i_raw.unique().sort_values()
    except TypeError as e:
        raise ValueError(f"{what}: instrument labels of mixed kinds cannot be ordered ({e})") from None
    i_slot = instruments.get_indexer(i_raw)
    N = len(instruments)
    flat = i_slot.astype(np.int64) * T + t_slot
    dup = np.flatnonzero(np.bincount(flat, minlength=N * T) > 1)
    if dup.size:
        i, t = divmod(int(dup[0]), T)
        raise ValueError(f"{what}: (time {times[t]}, instrument {instruments[i]}) appears in more than one row")
    return times, [str(v) for v in instruments], t_slot, i_slot, fmt


class Panel:
    """A panel for the engine: Panel.from_numpy or Panel.from_frame.

    The engine reads the arrays in place: float32 C-contiguous input is not copied (other float dtypes
    are converted once), and the panel keeps the arrays alive. Do not modify them while the panel is
    in use: the checks (shapes, ±Inf) ran when it was made.
    """

    def __init__(self, core: "_core.Panel", frame=None):
        self._core = core
        # From a frame: (the frame's index, instrument slot and time slot of each row), for aligned output.
        self._frame = frame

    @classmethod
    def from_frame(cls, df, features: Sequence[str], targets: Sequence[str] | None = None, time: str = "time",
                   instrument: str = "instrument", time_format: str | None = None, *, _n_targets: int = 0) -> "Panel":
        """A long DataFrame, one row per (time, instrument), indexed by a (datetime, instrument) MultiIndex
        (Qlib's layout) or with `time` and `instrument` columns; or one series (N = 1, as a CSV file read with
        data.instrument_column = ""), one row per time, indexed by a DatetimeIndex or with a `time` column and no
        `instrument` column.

        Times are read as the CSV reader reads them (docs/data.md, "Time axis"), by the engine's own parser:
        pandas datetimes, ISO 8601 text, numbers, integers that are all yyyymmdd dates (20200131), or text in
        `time_format` (strftime-style, "%b %d %Y" for 'Jan 31 2020'); anything else is refused with the
        time_format that would read it, never sorted as text. The panel is the union of the times and
        instruments seen, times in chronological order and instruments sorted (so row order does not
        matter); a missing (time, instrument) row gives NaN features and targets; a (time, instrument) seen
        twice, ±Inf, and non-numeric columns are errors. Labels become strings (dates as 2020-01-01).
        targets=None: no targets (NaN), for prediction.
        """
        features = list(features)
        targets = [] if targets is None else list(targets)
        if not features:
            raise ValueError("from_frame: features must name at least one column")
        if len(df) == 0:
            raise ValueError("from_frame: the frame has no rows")
        times, instruments, t_slot, i_slot, fmt = _frame_axes(df, time, instrument, time_format, "from_frame")
        N, T = max(len(instruments), 1), len(times)  # no instrument names: one series
        xv = _frame_values(df, features, "feature")
        x = np.full((N, T, len(features)), np.nan, dtype=np.float32)
        x[i_slot, t_slot] = xv
        K = len(targets) or max(_n_targets, 1)
        y = np.full((N, T, K), np.nan, dtype=np.float32)
        if targets:
            y[i_slot, t_slot] = _frame_values(df, targets, "target")
        core = _core.panel_from_arrays(x, y, times, instruments, [str(f) for f in features], [str(t) for t in targets],
                                       fmt)
        return cls(core, frame=(df.index, i_slot, t_slot))

    @classmethod
    def from_numpy(cls, x, y, times: Sequence | None = None, instruments: Sequence | None = None,
                   feature_names: Sequence[str] | None = None, target_names: Sequence[str] | None = None) -> "Panel":
        """x (N, T, F) with y (N, T, K) or (N, T); or one series: x (T, F) with y (T, K) or (T,).

        NaN is allowed in both (NaN targets are masked, NaN features are filled as data.nan_fill says); ±Inf, integer
        or object arrays and shapes that disagree raise ValueError / TypeError. Labels become strings;
        times must be in chronological order.
        """
        xa = _as_float32(x, "x")
        ya = _as_float32(y, "y")
        return cls(_core.panel_from_arrays(xa, ya, _labels(times, "times"), _labels(instruments, "instruments"),
                                           _labels(feature_names, "feature_names"), _labels(target_names, "target_names")))

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(N, T, F, K)."""
        c = self._core
        return (c.N, c.T, c.F, c.K)

    N = property(lambda self: self._core.N)
    T = property(lambda self: self._core.T)
    F = property(lambda self: self._core.F)
    K = property(lambda self: self._core.K)
    times = property(lambda self: list(self._core.times))
    instruments = property(lambda self: list(self._core.instruments))
    feature_names = property(lambda self: list(self._core.feature_names))
    target_names = property(lambda self: list(self._core.target_names))

    @property
    def x(self) -> np.ndarray:
        """A copy of the features, (N, T, F)."""
        return self._core.x()

    @property
    def y(self) -> np.ndarray:
        """A copy of the targets, (N, T, K)."""
        return self._core.y()

    def to_frame(self, values: np.ndarray, columns: Sequence[str]):
        """(N, T, K) values as a DataFrame aligned to the rows of the frame this panel came from."""
        import pandas as pd

        if self._frame is None:
            raise ValueError("to_frame: this panel did not come from a DataFrame (Panel.from_frame)")
        index, i_slot, t_slot = self._frame
        return pd.DataFrame(values[i_slot, t_slot], index=index, columns=list(columns))

    def __repr__(self) -> str:
        return "mlalpha.Panel(N={}, T={}, F={}, K={})".format(*self.shape)
