"""mlalpha.Model: trained weights with their settings and feature statistics, the command line's
safetensors checkpoints (docs/checkpoints.md)."""
from __future__ import annotations

import os

import numpy as np

from . import _core
from ._panel import Panel, _as_float32

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib


def _is_frame(data) -> bool:
    try:
        import pandas as pd
    except ImportError:
        return False
    return isinstance(data, pd.DataFrame)


class Model:
    """A trained model. mlalpha.load(path) reads a checkpoint of `ml-alpha train` or Model.save."""

    def __init__(self, core: "_core.Model"):
        self._core = core

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Model":
        return cls(_core.Model.load(os.fspath(path)))

    def save(self, path: str | os.PathLike) -> None:
        """Writes the checkpoint (and its optimizer sidecar when the model has one) atomically."""
        self._core.save(os.fspath(path))

    def predict(self, data, t0: int = 0, t1: int | None = None, device: str = "auto", tf32: bool = False) -> np.ndarray:
        """Predictions for time steps [t0, t1) (NaN elsewhere), windows of the training length.

        data: a Panel -> (N, T, K), or a DataFrame aligned to its rows when it came from Panel.from_frame;
        a DataFrame (long, as Panel.from_frame takes; the model's feature columns) -> a DataFrame aligned to
        its rows, one column per target; features as an array, (N, T, F) -> (N, T, K) or (T, F) -> (T, K).
        """
        if _is_frame(data):
            if not self.feature_names:
                raise ValueError("predict: the model records no feature names; build the panel with Panel.from_frame(df, features=[...])")
            data = Panel.from_frame(data, self.feature_names, None, _n_targets=self.K)
        if isinstance(data, Panel):
            panel, series = data, False
        else:
            x = _as_float32(data, "x")
            if x.ndim not in (2, 3):
                raise ValueError(f"predict: features must have shape (T, F) or (N, T, F), got {x.shape}")
            series = x.ndim == 2
            y = np.full(x.shape[:-1] + (self.K,), np.nan, dtype=np.float32)
            panel = Panel.from_numpy(x, y)
        pred = self._core.predict(panel._core, t0, -1 if t1 is None else t1, device, tf32)
        if panel._frame is not None:
            return panel.to_frame(pred, self.target_names or [f"y{k}" for k in range(self.K)])
        return pred[0] if series else pred

    @property
    def config(self) -> dict:
        """The model and training settings, as {"model": {...}, "train": {...}}."""
        return tomllib.loads(self._core.config_toml())

    step = property(lambda self: self._core.step, doc="training steps behind these weights")
    parameters = property(lambda self: self._core.parameters, doc="trainable parameters")
    fold = property(lambda self: self._core.fold, doc="the walk-forward fold it was trained in")
    F = property(lambda self: self._core.F, doc="input features")
    K = property(lambda self: self._core.K, doc="targets")
    feature_names = property(lambda self: list(self._core.feature_names))
    target_names = property(lambda self: list(self._core.target_names))

    def __repr__(self) -> str:
        return f"mlalpha.Model(F={self.F}, K={self.K}, step={self.step}, parameters={self.parameters})"


def load(path: str | os.PathLike) -> Model:
    """Reads a checkpoint (`best.safetensors`, `last.safetensors`, or one written by Model.save)."""
    return Model.load(path)
