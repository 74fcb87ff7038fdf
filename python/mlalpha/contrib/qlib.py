"""mlalpha.contrib.qlib.MambaAlpha: the engine as a Qlib model (qlib.model.base.Model).

    from mlalpha.contrib.qlib import MambaAlpha
    model = MambaAlpha(d_model=32, layers=2, steps=300, lr=1e-3, seq_len=32, device="auto")
    model.fit(dataset)                      # a qlib DatasetH with "train" and "valid" segments
    score = model.predict(dataset, "test")  # pd.Series "score", indexed like the segment

Settings are the engine's TOML keys (docs/config.md): a keyword is a key's name in [model], [train],
[split] or [run] (searched in that order, so `seed` is train.seed), or pass `config={"section.key": v}`.
The data come from the dataset, so [data] keys are not taken, nor the split boundaries, which are Qlib's
segments: fit concatenates the train and valid frames into one panel and sets split.train_end to the first
time of the valid segment (a time value) and split.valid_end to T (no test range): the engine trains on
Qlib's train segment and picks the best weights (run.metric) and stops early on Qlib's valid segment.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Mapping

try:
    from qlib.data.dataset import DatasetH
    from qlib.data.dataset.handler import DataHandlerLP
    from qlib.model.base import Model as _QlibModel
except ImportError as e:  # pyqlib missing or broken: say which module failed
    raise ImportError(f"mlalpha.contrib.qlib needs pyqlib (pip install pyqlib): importing it failed ({e})") from e

import numpy as np
import pandas as pd

from .. import _core
from .._config import Config
from .._model import Model
from .._panel import Panel
from .._run import Run, fit as _fit

_SECTIONS = ("model", "train", "split", "run")  # where a short keyword is looked up, in this order
_FROM_DATASET = ("split.train_end", "split.valid_end", "split.walk_forward_folds")


def _resolve(name: str) -> str:
    """A keyword (`lr`) or dotted name (`train.lr`) as the engine's "section.key"."""
    keys = _core.run_config_keys()
    if "." in name:
        if name not in keys:
            hint = _core.suggest_run_config_key(name)
            raise ValueError(f"MambaAlpha: unknown config key '{name}'" + (f"; did you mean '{hint}'?" if hint else ""))
        full = name
    else:
        full = next((f"{s}.{name}" for s in _SECTIONS if f"{s}.{name}" in keys), None)
        if full is None:
            hint = next((h for s in _SECTIONS for h in [_core.suggest_run_config_key(f"{s}.{name}")] if h), "")
            raise ValueError(f"MambaAlpha: unknown setting '{name}' (a key of [model], [train], [split] or [run])"
                             + (f"; did you mean '{hint.split('.', 1)[1]}' ({hint})?" if hint else ""))
    if full.startswith("data."):
        raise ValueError(f"MambaAlpha: '{full}' is not taken: the data come from the Qlib dataset")
    if full in _FROM_DATASET:
        raise ValueError(f"MambaAlpha: '{full}' is not taken: the split is the dataset's train and valid segments")
    return full


class MambaAlpha(_QlibModel):
    """A Mamba2 model trained by the ml-alpha engine, as a Qlib model (fit(dataset), predict(dataset, segment)).

    Learned state (Qlib dumps attributes whose names do not start with "_"): `model` (an mlalpha.Model,
    the best weights on the valid segment) and `run` (the mlalpha.Run: history, evaluations). Pickling keeps
    the model as its safetensors checkpoint bytes, so Qlib's recorder can save and load it.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, device: str = "auto", **settings: Any):
        merged = dict(config or {})
        merged.update(settings)
        self.settings = {_resolve(k): v for k, v in merged.items()}
        self.settings["run.device"] = device
        self.config = Config(self.settings)  # checks every value now, with the engine's messages
        self.model: Model | None = None
        self.run: Run | None = None
        self.features: list[str] = []
        self.targets: list[str] = []

    @staticmethod
    def _split_frame(df: pd.DataFrame, what: str) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Qlib's two-level columns (group, name) as (features, labels)."""
        if not isinstance(df.columns, pd.MultiIndex) or "feature" not in df.columns.get_level_values(0):
            raise ValueError(f"MambaAlpha: the {what} frame has no 'feature' column group; columns: {list(df.columns[:10])}")
        return df["feature"], df["label"] if "label" in df.columns.get_level_values(0) else None

    def fit(self, dataset: DatasetH, reweighter=None, out_dir: str | os.PathLike | None = None, **fit_kwargs) -> "MambaAlpha":
        """Trains on the dataset's "train" segment, validating on "valid" (DataHandlerLP.DK_L: the learn
        processors' output). out_dir keeps the run folder; fit_kwargs go to mlalpha.fit (callback, progress)."""
        if reweighter is not None:
            raise NotImplementedError("MambaAlpha: sample weights (reweighter) are not supported by the engine's loss")
        df_train, df_valid = dataset.prepare(["train", "valid"], col_set=["feature", "label"], data_key=DataHandlerLP.DK_L)
        if df_train.empty or df_valid.empty:
            raise ValueError(f"MambaAlpha: the train and valid segments must hold rows (train {len(df_train)}, valid {len(df_valid)})")
        x_tr, y_tr = self._split_frame(df_train, "train")
        x_va, y_va = self._split_frame(df_valid, "valid")
        if y_tr is None or y_va is None:
            raise ValueError("MambaAlpha: the train and valid frames need a 'label' column group")
        t_train = df_train.index.get_level_values("datetime")
        t_valid = df_valid.index.get_level_values("datetime")
        if t_train.max() >= t_valid.min():
            raise ValueError(f"MambaAlpha: the valid segment must start after the train segment ends "
                             f"(train ends {t_train.max()}, valid starts {t_valid.min()})")
        self.features = [str(c) for c in x_tr.columns]
        self.targets = [str(c) for c in y_tr.columns]
        frame = pd.concat([pd.concat([x_tr, y_tr], axis=1), pd.concat([x_va, y_va], axis=1)])
        frame.columns = self.features + self.targets
        panel = Panel.from_frame(frame, features=self.features, targets=self.targets)
        # The first time of the valid segment, as the panel labels it: split.train_end as a time value.
        first_valid = str(pd.Index([t_valid.min()]).astype(str)[0])
        assert first_valid in panel.times, (first_valid, panel.times[:3])
        cfg = self.config.replace({"split.train_end": first_valid, "split.valid_end": panel.T})
        self.run = _fit(panel, cfg, device=None, out_dir=out_dir, **fit_kwargs)
        self.model = self.run.best if self.run.best is not None else self.run.last
        return self

    def predict(self, dataset: DatasetH, segment: str | slice = "test") -> pd.Series:
        """Scores of the segment's rows (DataHandlerLP.DK_I: the infer processors' output), a Series named
        "score" with the segment's (datetime, instrument) index, row for row; only the first target is
        scored. Each date is scored from the window of its last train.seq_len = C rows (docs/data.md, "What a
        date's prediction is"), so the C - 1 dates before the segment are read from the dataset too (those it
        has): a date scores the same in any segment that holds it, and a one-day segment (Qlib's online and
        rolling updates) works."""
        if self.model is None:
            raise ValueError("MambaAlpha: the model is not fitted (call fit(dataset) first)")
        x = dataset.prepare(segment, col_set="feature", data_key=DataHandlerLP.DK_I)
        if x.empty:
            return pd.Series([], index=x.index, name="score", dtype=np.float32)
        context = self.model.seq_len - 1
        first = x.index.get_level_values("datetime").min()
        last = x.index.get_level_values("datetime").max()
        hist = dataset.prepare(slice(None, last), col_set="feature", data_key=DataHandlerLP.DK_I) if context else x
        dates = hist.index.get_level_values("datetime")
        axis = dates.unique().sort_values()
        start = int(axis.searchsorted(first))
        keep_from = axis[max(0, start - context)]
        hist = hist[(dates >= keep_from) & (dates <= last)].copy()
        hist.columns = [str(c) for c in hist.columns]
        t0 = start - max(0, start - context)  # the segment's first date on the history's time axis
        pred = self.model.predict(hist, t0=t0)  # aligned to hist's rows, NaN before t0
        score = pd.Series(pred.iloc[:, 0].to_numpy(), index=hist.index, name="score")
        return score.reindex(x.index)

    # Pickling (Qlib's recorder saves models with pickle): the engine's model as its checkpoint bytes.
    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("model", "run", "config")}
        state["model"] = None
        if self.model is not None:
            with tempfile.TemporaryDirectory(prefix="mlalpha-") as d:
                path = os.path.join(d, "model.safetensors")
                self.model.save(path)
                with open(path, "rb") as f:
                    state["model"] = f.read()
        return state

    def __setstate__(self, state: dict) -> None:
        blob = state.pop("model", None)
        self.__dict__.update(state)
        self.config = Config(self.settings)
        self.run = None
        self.model = None
        if blob is not None:
            with tempfile.TemporaryDirectory(prefix="mlalpha-") as d:
                path = os.path.join(d, "model.safetensors")
                with open(path, "wb") as f:
                    f.write(blob)
                self.model = Model.load(path)
