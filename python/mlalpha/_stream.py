"""mlalpha.Stream: a trained model (or a population's ensemble) advanced one bar at a time (docs/python.md,
"Streaming"; the engine's StreamPredictor, include/mlalpha/stream.h)."""
from __future__ import annotations

import math
import os

import numpy as np

from . import _core
from ._panel import Panel, _as_float32, _frame_values


def _names(instruments) -> list[str]:
    if isinstance(instruments, str):
        raise ValueError(f"instruments: give a list of names, not one string ({instruments!r})")
    names = [str(i) for i in instruments]
    if not names:
        raise ValueError("instruments: give at least one instrument")
    return names


def _time_value(t) -> float:
    """A bar's time as the engine orders it: a number as itself, a date or datetime as seconds since
    1970-01-01T00:00:00Z (a time without a zone taken as UTC, as the CSV reader does); None: no time."""
    if t is None:
        return math.nan
    if isinstance(t, (bool, np.bool_)):
        raise ValueError(f"time: expected a number or a date, got {t!r}")
    if isinstance(t, (int, float, np.integer, np.floating)):
        return float(t)
    import pandas as pd

    if isinstance(t, str):
        try:
            return float(t)
        except ValueError:
            pass
    try:
        ts = pd.Timestamp(t)
    except (ValueError, TypeError) as e:
        raise ValueError(f"time: {t!r} is neither a number nor a date ({e})") from None
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return ts.value / 1e9


class Stream:
    """Model.stream(instruments) / Ensemble.stream(instruments): each .step(x) takes one bar (one raw row per
    instrument, the model's feature columns, unprocessed) and returns the predictions, processed and filled exactly
    as Model.predict processes that date of a panel; they equal Model.predict(mode=...) on the whole history so far.

    mode "carry" (the default): the model's state carried bar to bar, O(1) a bar; "window": each bar from the
    window of the last train.seq_len rows. A row with no finite feature (or an instrument missing from a DataFrame
    bar) is absent: its prediction is NaN and, in carry mode, its state waits. ±Inf is refused.
    """

    def __init__(self):
        raise TypeError("create a stream with Model.stream(instruments) or Ensemble.stream(instruments)")

    @classmethod
    def _of(cls, core, model) -> "Stream":
        self = cls.__new__(cls)
        self._core = core
        self._targets = list(core.target_names) or [f"y{k}" for k in range(core.K)]
        # pred_<target>, as Model.predict's frames and `ml-alpha stream`'s columns: joins the bar's frame.
        self._columns = [f"pred_{t}" for t in self._targets]
        return self

    instruments = property(lambda self: list(self._core.instruments), doc="the stream's instruments, in order")
    F = property(lambda self: self._core.F, doc="input features")
    K = property(lambda self: self._core.K, doc="targets")
    feature_names = property(lambda self: list(self._core.feature_names))
    target_names = property(lambda self: list(self._targets))
    mode = property(lambda self: self._core.mode, doc="'carry' or 'window'")
    bars = property(lambda self: self._core.bars, doc="bars stepped since the stream began (warm-up included)")
    on_gpu = property(lambda self: self._core.on_gpu)
    checkpoint_hash = property(lambda self: self._core.checkpoint_hash,
                               doc="the weights and settings a saved state is bound to")

    @property
    def last_time(self) -> float | None:
        """The last bar's time as a number (seconds since the epoch for dates), None when no bar gave one."""
        t = self._core.last_time
        return None if math.isnan(t) else t

    @property
    def context(self) -> np.ndarray:
        """(I,) the rows behind each instrument's last prediction: window: up to train.seq_len (fewer: a shorter
        history than the model was trained on); carry: its present rows so far."""
        return self._core.context()

    def step(self, x, time=None, present=None):
        """One bar. x: a (I, F) array in the stream's instrument order, or a DataFrame of one date (rows indexed by
        instrument, by Qlib's (datetime, instrument) MultiIndex, or with an 'instrument' column; the model's
        feature columns; instruments without a row are absent at this bar). time: the bar's time (a number, a date
        or a Timestamp; with a (datetime, instrument) index, that date); when given it must be after the last
        bar's. present: (I,) booleans, False marking an instrument absent whatever its row holds.
        Returns a DataFrame, one column pred_<target> per target (as Model.predict's): indexed like x for a
        DataFrame, by the instruments otherwise."""
        import pandas as pd

        if isinstance(x, pd.DataFrame):
            return self._step_frame(x, time, present)
        arr = _as_float32(x, "x")
        mask = None if present is None else np.ascontiguousarray(np.asarray(present, dtype=bool), dtype=np.uint8)
        out = self._core.step(arr, mask, _time_value(time))
        return pd.DataFrame(out, index=pd.Index(self.instruments, name="instrument"), columns=self._columns)

    def _step_frame(self, df, time, present):
        import pandas as pd

        if present is not None:
            raise ValueError("step: with a DataFrame, an instrument is absent by having no row; `present` is for arrays")
        idx = df.index
        if isinstance(idx, pd.MultiIndex):
            if idx.nlevels != 2:
                raise ValueError(f"step: a MultiIndex must have two levels (datetime, instrument), got {idx.nlevels}")
            names = list(idx.names)
            t_level = names.index("datetime") if "datetime" in names else 0
            dates = idx.get_level_values(t_level).unique()
            if len(dates) != 1:
                raise ValueError(f"step: a DataFrame bar holds one date, this one {len(dates)} ({list(dates[:3])}, ...)")
            if time is None:
                time = dates[0]
            inst = idx.get_level_values(1 - t_level)
        elif "instrument" in df.columns:
            inst = pd.Index(df["instrument"])
        else:
            inst = idx
        features = self.feature_names
        if not features:
            raise ValueError("step: the model records no feature names; pass the bar as a (instruments, features) array")
        values = _frame_values(df, features, "feature")
        names = [str(i) for i in inst]
        slot = np.array([self._core.index_of(n) for n in names], dtype=np.int64)
        if (slot < 0).any():
            unknown = [n for n, s in zip(names, slot) if s < 0]
            raise ValueError(f"step: instrument(s) {unknown[:5]} are not in the stream ({len(self.instruments)} "
                             "instruments); add them with set_instruments")
        if len(np.unique(slot)) != len(slot):
            dup = pd.Index(names)[pd.Index(names).duplicated()][0]
            raise ValueError(f"step: instrument {dup!r} has more than one row in this bar")
        x = np.full((len(self.instruments), self.F), np.nan, dtype=np.float32)
        x[slot] = values
        out = self._core.step(x, None, _time_value(time))
        return pd.DataFrame(out[slot], index=df.index, columns=self._columns)

    def reset(self, instruments=None) -> None:
        """Every instrument, or the named ones, back to no history."""
        if instruments is None:
            self._core.reset()
        else:
            self._core.reset_names(_names(instruments))

    def set_instruments(self, instruments) -> None:
        """The stream's instruments become these: kept ones keep their state, new ones start with none (in window
        mode their past bars read as missing rows), the others are dropped."""
        self._core.set_instruments(_names(instruments))

    def warm_up(self, data, features=None) -> None:
        """Steps every date of `data` (a Panel, or a long DataFrame as Panel.from_frame takes it, with the model's
        feature columns) and discards the predictions; its instruments must be the stream's."""
        if not isinstance(data, Panel):
            names = features or self.feature_names
            if not names:
                raise ValueError("warm_up: the model records no feature names; pass a Panel or features=[...]")
            data = Panel.from_frame(data, features=names, targets=None, _n_targets=self.K)
        self._core.warm_up(data._core)

    def save(self, path: str | os.PathLike) -> None:
        """The whole state to `path`, atomically, bound to the model's weights and settings."""
        self._core.save(os.fspath(path))

    def load(self, path: str | os.PathLike) -> None:
        """Continues the stream saved in `path` (same model and mode): its instruments, bars and last time."""
        self._core.load(os.fspath(path))

    def __repr__(self) -> str:
        return f"mlalpha.Stream(mode={self.mode!r}, instruments={len(self.instruments)}, bars={self.bars})"
