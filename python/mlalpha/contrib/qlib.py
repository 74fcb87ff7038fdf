"""mlalpha.contrib.qlib.MambaAlpha: the engine as a Qlib model (qlib.model.base.ModelFT).

    from mlalpha.contrib.qlib import MambaAlpha
    model = MambaAlpha(d_model=32, layers=2, steps=300, lr=1e-3, seq_len=32, device="auto")
    model.fit(dataset)                      # a qlib DatasetH (or TSDatasetH) with "train" and "valid" segments
    score = model.predict(dataset, "test")  # pd.Series "score", indexed like the segment
    model.finetune(new_dataset)             # continue from the fitted weights on new segments (rolling retrains)

Settings are the engine's TOML keys (docs/config.md): a keyword is a key's name in [model], [train], [split] or
[run] (searched in that order, so `seed` is train.seed), or one of ml-alpha's processing keys of [data]
(feature_norm, robust_clip, target_norm, nan_fill, target_scale), or pass `config={"section.key": v}`. The data
come from the dataset, so the other [data] keys are not taken, nor the split boundaries, which are Qlib's
segments: fit concatenates the train and valid frames into one panel and sets split.train_end to the valid
segment's first date (its time index) and split.valid_end to T (no test range): the engine trains on Qlib's
train segment and picks the best weights (run.metric) and stops early on Qlib's valid segment.
"""
from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Mapping

try:
    from qlib.data.dataset import DatasetH, TSDatasetH
    from qlib.data.dataset.handler import DataHandlerLP
    from qlib.model.base import ModelFT as _QlibModelFT
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
# ml-alpha's own processing of the dataset's frames (docs/data.md, "Normalisation"), taken as model settings.
_PROCESSING = ("data.feature_norm", "data.robust_clip", "data.target_norm", "data.nan_fill", "data.target_scale")
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
        if full is None and f"data.{name}" in _PROCESSING:
            full = f"data.{name}"
        if full is None and f"data.{name}" in keys:
            full = f"data.{name}"  # refused below, by its own name
        if full is None:
            hint = next((h for s in _SECTIONS + ("data",) for h in [_core.suggest_run_config_key(f"{s}.{name}")]
                         if h and (not h.startswith("data.") or h in _PROCESSING)), "")
            raise ValueError(f"MambaAlpha: unknown setting '{name}' (a key of [model], [train], [split] or [run], or "
                             f"one of ml-alpha's processing keys: {', '.join(k[5:] for k in _PROCESSING)})"
                             + (f"; did you mean '{hint.split('.', 1)[1]}' ({hint})?" if hint else ""))
    if full.startswith("data.") and full not in _PROCESSING:
        raise ValueError(f"MambaAlpha: '{full}' is not taken: the data come from the Qlib dataset (ml-alpha's "
                         f"processing is: {', '.join(k[5:] for k in _PROCESSING)}; or process in the handler with "
                         "Qlib's processors, e.g. CSZScoreNorm, CSRankNorm)")
    if full in _FROM_DATASET:
        raise ValueError(f"MambaAlpha: '{full}' is not taken: the split is the dataset's train and valid segments")
    return full


def _frame(dataset: DatasetH, segment, col_set, data_key) -> pd.DataFrame:
    """A segment of the dataset as the handler's DataFrame, for a DatasetH and a TSDatasetH alike: a TSDatasetH's
    prepare returns a TSDataSampler (its own windows, for its own sequence models), while the engine windows the
    frame itself (train.seq_len)."""
    slc = dataset.segments[segment] if isinstance(segment, str) and segment in dataset.segments else segment
    return DatasetH._prepare_seg(dataset, slc, col_set=col_set, data_key=data_key)


class MambaAlpha(_QlibModelFT):
    """A Mamba2 model trained by the ml-alpha engine, as a Qlib model (fit(dataset), predict(dataset, segment),
    finetune(dataset)).

    Learned state (Qlib dumps attributes whose names do not start with "_"): `model` (an mlalpha.Model, the best
    weights on the valid segment) and `run` (the mlalpha.Run: history, evaluations). The engine's settings are
    `engine_config` (an mlalpha.Config; `config` is Qlib's Serializable.config method, which its recorder calls).
    Pickling keeps the model as its safetensors checkpoint bytes, so Qlib's recorder saves and loads it.
    get_params() / set_params(**p) read and change the keyword settings, as scikit-learn's estimators do.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, device: str = "auto", **settings: Any):
        # Kept as given, the very objects: scikit-learn's clone checks that get_params returns them unchanged.
        self.params = {"config": config, "device": device, **settings}
        self._configure()
        self.model: Model | None = None
        self.run: Run | None = None
        self.features: list[str] = []
        self.targets: list[str] = []

    def _configure(self) -> None:
        """settings and engine_config from params, every value checked by the engine now; its messages name the
        keyword that was given."""
        given = {k: v for k, v in self.params.items() if k not in ("config", "device")}
        merged = dict(self.params["config"] or {})
        merged.update(given)
        keyword = {}
        settings = {}
        for k, v in merged.items():
            full = _resolve(k)
            settings[full], keyword[full] = v, k
        settings["run.device"] = self.params["device"]
        keyword["run.device"] = "device"
        try:
            engine_config = Config(settings)
        except ValueError as e:
            named = [f"{keyword[k]}={settings[k]!r}" for k in settings if re.search(rf"\b{re.escape(k)}\b", str(e))]
            raise ValueError(f"MambaAlpha({', '.join(named)}): {e}" if named else f"MambaAlpha: {e}") from None
        self.settings, self.engine_config = settings, engine_config

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's arguments: config, device and the keyword settings, as given (the same objects, as
        scikit-learn's estimator contract asks, so sklearn.base.clone works)."""
        return dict(self.params)

    def set_params(self, **params: Any) -> "MambaAlpha":
        """Changes keyword settings (or config / device) for the next fit; checked now. A fitted model keeps its
        weights until it is fitted again."""
        old = self.params
        self.params = {**old, **params}
        try:
            self._configure()
        except Exception:
            self.params = old
            raise
        return self

    @staticmethod
    def _split_frame(df: pd.DataFrame, what: str) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Qlib's two-level columns (group, name) as (features, labels)."""
        if not isinstance(df.columns, pd.MultiIndex) or "feature" not in df.columns.get_level_values(0):
            raise ValueError(f"MambaAlpha: the {what} frame has no 'feature' column group; columns: {list(df.columns[:10])}")
        return df["feature"], df["label"] if "label" in df.columns.get_level_values(0) else None

    def fit(self, dataset: DatasetH, reweighter=None, out_dir: str | os.PathLike | None = None, **fit_kwargs) -> "MambaAlpha":
        """Trains on the dataset's "train" segment, validating on "valid" (DataHandlerLP.DK_L: the learn
        processors' output). A TSDatasetH gives its frames too (the engine makes its own windows of train.seq_len,
        which defaults to the dataset's step_len there). out_dir keeps the run folder; fit_kwargs go to mlalpha.fit
        (callback, progress, logger). reweighter: refused (NotImplementedError): the engine's losses weigh every
        (instrument, date) alike."""
        self._check_reweighter(reweighter)
        return self._train(dataset, {}, out_dir, fit_kwargs, "fit")

    def finetune(self, dataset: DatasetH, steps: int | None = None, reweighter=None,
                 out_dir: str | os.PathLike | None = None, **fit_kwargs) -> "MambaAlpha":
        """Continues training from the fitted weights on the dataset's "train" and "valid" segments (what Qlib's
        rolling and online workflows call on a ModelFT): the engine starts from `model` (train.init) with a fresh
        optimiser and schedule of `steps` steps (None: train.steps); the new best weights replace `model`. The
        features must be those the model was fitted on."""
        if self.model is None:
            raise ValueError("MambaAlpha.finetune: the model is not fitted (call fit(dataset) first)")
        self._check_reweighter(reweighter)
        with tempfile.TemporaryDirectory(prefix="mlalpha-finetune-") as d:
            init = os.path.join(d, "init.safetensors")
            self.model.save(init)
            extra = {"train.init": init}
            if steps is not None:
                extra["train.steps"] = int(steps)
            return self._train(dataset, extra, out_dir, fit_kwargs, "finetune")

    @staticmethod
    def _check_reweighter(reweighter) -> None:
        if reweighter is not None:
            raise NotImplementedError(
                f"MambaAlpha does not take sample weights ({type(reweighter).__name__} given): the engine's losses weigh "
                "every (instrument, date) alike. Fit without the reweighter, or drop the rows you would weigh down "
                "from the handler (docs/python.md, \"Qlib\")")

    def _train(self, dataset: DatasetH, extra: dict, out_dir, fit_kwargs: dict, what: str) -> "MambaAlpha":
        df_train = _frame(dataset, "train", ["feature", "label"], DataHandlerLP.DK_L)
        df_valid = _frame(dataset, "valid", ["feature", "label"], DataHandlerLP.DK_L)
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
        features = [str(c) for c in x_tr.columns]
        if what == "finetune" and features != self.features:
            raise ValueError(f"MambaAlpha.finetune: the dataset's features {features[:5]}... differ from those the model "
                             f"was fitted on {self.features[:5]}...")
        self.features = features
        self.targets = [str(c) for c in y_tr.columns]
        frame = pd.concat([pd.concat([x_tr, y_tr], axis=1), pd.concat([x_va, y_va], axis=1)])
        frame.columns = self.features + self.targets
        panel = Panel.from_frame(frame, features=self.features, targets=self.targets)
        # split.train_end: the time index of the valid segment's first date on the panel's (chronological) axis.
        axis = frame.index.get_level_values("datetime").unique().sort_values()
        changes = {"split.train_end": int(axis.searchsorted(t_valid.min())), "split.valid_end": panel.T, **extra}
        if isinstance(dataset, TSDatasetH) and "train.seq_len" not in self.settings:
            changes["train.seq_len"] = int(dataset.step_len)
        cfg = self.engine_config.replace(changes)
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
        x = _frame(dataset, segment, "feature", DataHandlerLP.DK_I)
        if x.empty:
            return pd.Series([], index=x.index, name="score", dtype=np.float32)
        context = self.model.seq_len - 1
        first = x.index.get_level_values("datetime").min()
        last = x.index.get_level_values("datetime").max()
        hist = _frame(dataset, slice(None, last), "feature", DataHandlerLP.DK_I) if context else x
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

    # Pickling (Qlib's recorder saves models with pickle): the engine's model as its checkpoint bytes; the
    # settings are made again from params.
    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("model", "run", "engine_config")}
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
        self._configure()
        self.run = None
        self.model = None
        if blob is not None:
            with tempfile.TemporaryDirectory(prefix="mlalpha-") as d:
                path = os.path.join(d, "model.safetensors")
                with open(path, "wb") as f:
                    f.write(blob)
                self.model = Model.load(path)
