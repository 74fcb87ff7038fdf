"""mlalpha.Model: trained weights with their settings and feature statistics, the command line's
safetensors checkpoints (docs/checkpoints.md)."""
from __future__ import annotations

import os

import numpy as np

from . import _core
from ._panel import Panel, _as_float32
from ._stream import Stream, _names

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


_PRECISIONS = ("fp32", "tf32", "bf16")


def _precision(precision, tf32, what: str) -> str:
    """The GPU precision asked of `what` (Model.predict, ...): precision ("fp32" | "tf32" | "bf16", None:
    fp32), or tf32=True, its older spelling (the same as precision="tf32")."""
    if not isinstance(tf32, bool):
        raise ValueError(f"{what}: tf32 must be True or False (or give precision='tf32'), got {tf32!r}")
    if precision is None:
        return "tf32" if tf32 else "fp32"
    if not isinstance(precision, str) or precision not in _PRECISIONS:
        raise ValueError(f"{what}: precision must be 'fp32', 'tf32' or 'bf16', got {precision!r}")
    if tf32 and precision != "tf32":
        raise ValueError(f"{what}: tf32=True (the older spelling of precision='tf32') contradicts "
                         f"precision={precision!r}: give only precision")
    return precision


def _threads(threads, what):
    """threads=None (every CPU) or a count: the CPU's worker threads (0: every CPU; results do not depend on it)."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"{what}: threads must be an int (0 or None: every CPU), got {threads!r}")
    return int(threads)


_MODES = ("window", "carry")
_DEVICES = ("auto", "cpu", "gpu")


def _device(device, what: str) -> str:
    """device= of predict and stream, checked here so that the message names the Python argument."""
    if not isinstance(device, str) or device not in _DEVICES:
        raise ValueError(f"{what}: device must be 'auto', 'cpu' or 'gpu', got {device!r}")
    return device


def _step_index(value, name: str, what: str, optional: bool) -> int:
    """t0 / t1 as the engine takes them: a time step index (t1 None: the panel's end, -1)."""
    if value is None and optional:
        return -1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what}: {name} must be a time step index (an int{', or None for the end' if optional else ''}), "
                        f"got {value!r} ({type(value).__name__}); for a date, give its index in the panel's times "
                        f"(panel.times.index('2021-01-04'))")
    if not -2**31 <= int(value) < 2**31:  # the engine's time indices are 32-bit
        raise ValueError(f"{what}: {name} = {int(value)} is far outside any panel's time steps")
    return int(value)


def _default_mode(model) -> str:
    """The mode a Model (or an Ensemble, by its first member) predicts in when none is given: 'carry' for a model
    trained with train.state = 'carry' (it learned with the state it carries live), else 'window'."""
    first = model if isinstance(model, Model) else model.models[0]
    return "carry" if first.config.get("train", {}).get("state") == "carry" else "window"


def _predict(model, data, t0, t1, device, precision, tf32, what, mode=None, threads=None):
    """Model.predict / Ensemble.predict: `model` has feature_names, target_names, K and _core.predict."""
    if mode is None:
        mode = _default_mode(model)
    precision = _precision(precision, tf32, what)
    threads = _threads(threads, what)
    device = _device(device, what)
    t0, t1 = _step_index(t0, "t0", what, False), _step_index(t1, "t1", what, True)
    if mode not in _MODES:
        raise ValueError(f"{what}: mode must be 'window' (each date from the window of its last train.seq_len rows, "
                         f"the default) or 'carry' (the state carried from each instrument's first row), got {mode!r}")
    if _is_frame(data):
        if not model.feature_names:
            raise ValueError("predict: the model records no feature names; build the panel with Panel.from_frame(df, features=[...])")
        data = Panel.from_frame(data, model.feature_names, None, _n_targets=model.K)
    if isinstance(data, Panel):
        panel, series = data, False
    else:
        x = _as_float32(data, "x")
        if x.ndim not in (2, 3):
            raise ValueError(f"predict: features must have shape (T, F) or (N, T, F), got {x.shape}")
        series = x.ndim == 2
        y = np.full(x.shape[:-1] + (model.K,), np.nan, dtype=np.float32)
        panel = Panel.from_numpy(x, y)
    # The engine resolves device=, precision= and threads= once; its messages name these arguments.
    pred = model._core.predict(panel._core, t0, t1, device, precision, mode, threads)
    if panel._frame is not None:
        # pred_<target>: joins the input frame (df.join(pred)) without clashing with its target column.
        return panel.to_frame(pred, [f"pred_{n}" for n in (model.target_names or [f"y{k}" for k in range(model.K)])])
    return pred[0] if series else pred


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

    def predict(self, data, t0: int = 0, t1: int | None = None, device: str = "auto", precision: str | None = None,
                tf32: bool = False, mode: str | None = None, threads: int | None = None) -> np.ndarray:
        """Predictions for time steps [t0, t1) (NaN elsewhere), each date as `mode` says (docs/data.md, "What a
        date's prediction is"): "window" scores each date from the window of its last train.seq_len rows, so a
        date's score does not depend on where `data` starts (a date with fewer rows before it gets the shorter
        window); "carry" carries the state from each instrument's first row over its rows that have a feature (a
        missing row gets no prediction), as Model.stream does. None (the default): "carry" for a model trained
        with train.state = "carry", else "window" (what the run validated with).

        data: a Panel -> (N, T, K), or a DataFrame aligned to its rows when it came from Panel.from_frame;
        a DataFrame (long, as Panel.from_frame takes; the model's feature columns) -> a DataFrame aligned to
        its rows, one column pred_<target> per target (so df.join(pred) works); features as an array,
        (N, T, F) -> (N, T, K) or (T, F) -> (T, K).

        precision: the GPU's arithmetic (docs/config.md, train.precision): "fp32" (None, the default: fp32
        accuracy), "tf32" (GEMMs and SSD chunk products single-pass tf32 on the tensor cores) or "bf16"
        (bf16 GEMM operands and SSD chunk products with fp32 accumulation). The CPU computes fp32 whatever
        it says. Not the precision the model was trained in (config["train"]["precision"]) unless given.
        tf32=True is the older spelling of precision="tf32"; with another precision it is a ValueError.
        threads: the CPU's worker threads when it predicts there (None or 0: every CPU this process may use,
        at most 64); the predictions do not depend on it.
        """
        return _predict(self, data, t0, t1, device, precision, tf32, "Model.predict", mode, threads)

    def context(self, panel: Panel, mode: str = "window") -> np.ndarray:
        """(N, T) int32: the rows behind each date's prediction in `mode` (window: min(seq_len, t + 1), fewer than
        seq_len flagging a date with a shorter history than the model was trained on; carry: the instrument's rows
        with a feature up to t); the `context` column of `ml-alpha predict`'s CSV."""
        if mode not in _MODES:
            raise ValueError(f"Model.context: mode must be 'window' or 'carry', got {mode!r}")
        return self._core.context(panel._core, mode)

    def stream(self, instruments, mode: str = "carry", device: str = "auto", threads: int = 0,
               precision: str = "fp32") -> "Stream":
        """A streaming predictor for these instruments (names): .step(x) takes one bar's raw features and returns
        the predictions (mlalpha.Stream; docs/python.md, "Streaming")."""
        device = _device(device, "Model.stream")
        core = _core.Stream(self._core, _names(instruments), mode, device, int(threads), precision)
        return Stream._of(core, self)

    @property
    def config(self) -> dict:
        """The model and training settings, as {"model": {...}, "train": {...}}."""
        return tomllib.loads(self._core.config_toml())

    step = property(lambda self: self._core.step, doc="training steps behind these weights")
    seq_len = property(lambda self: self._core.seq_len,
                       doc="train.seq_len: the rows behind each date's prediction in mode 'window'")
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


class Ensemble:
    """The mean-ensemble of a finished population run (docs/populations.md, "Predicting with the ensemble").

    Ensemble.load(run_dir, members="all" | "top:K" | ["member-00", ...], fold=None) reads the members'
    best.safetensors (last.safetensors for a member without one) from a population's run folder; for a
    walk-forward run give the fold, or the fold's folder (run_dir/fold-k). top:K ranks by that folder's
    leaderboard.csv. The members are averaged in member order, as the run's own ensemble/pred.npy.
    """

    def __init__(self, core: "_core.Ensemble"):
        self._core = core

    @classmethod
    def load(cls, run_dir: str | os.PathLike, members="all", fold: int | None = None) -> "Ensemble":
        if isinstance(members, (list, tuple)):
            if not members or not all(isinstance(m, str) for m in members):
                raise ValueError(f"members: a non-empty list of member names (e.g. ['member-00', 'member-03']), got {members!r}")
            members = ",".join(members)
        elif not isinstance(members, str):
            raise ValueError(f"members: 'all', 'top:K' or a list of member names, got {members!r}")
        return cls(_core.Ensemble.load(os.fspath(run_dir), members, -1 if fold is None else int(fold)))

    def predict(self, data, t0: int = 0, t1: int | None = None, device: str = "auto", precision: str | None = None,
                tf32: bool = False, mode: str | None = None, threads: int | None = None):
        """The mean of the members' Model.predict, with Model.predict's arguments (precision and its older
        spelling tf32 included, mode, threads) and returns."""
        return _predict(self, data, t0, t1, device, precision, tf32, "Ensemble.predict", mode, threads)

    def stream(self, instruments, mode: str = "carry", device: str = "auto", threads: int = 0,
               precision: str = "fp32") -> "Stream":
        """Model.stream for the mean of the members (summed in member order, as Ensemble.predict)."""
        device = _device(device, "Ensemble.stream")
        core = _core.Stream.of_ensemble(self._core, _names(instruments), mode, device, int(threads), precision)
        return Stream._of(core, self)

    @property
    def models(self) -> list[Model]:
        """The members as Models, in averaging order."""
        return [Model(self._core.member(i)) for i in range(self._core.size)]

    names = property(lambda self: list(self._core.names), doc="the members, in averaging order (member order)")
    checkpoints = property(lambda self: list(self._core.checkpoints), doc="the file each member was read from")
    ranks = property(lambda self: list(self._core.ranks), doc="each member's rank in leaderboard.csv (0: none)")
    dir = property(lambda self: self._core.dir, doc="the folder holding the members (the run's, or fold-k/)")
    fold = property(lambda self: self._core.fold, doc="the walk-forward fold (0 for a single split)")
    F = property(lambda self: self._core.member(0).F, doc="input features")
    K = property(lambda self: self._core.member(0).K, doc="targets")
    feature_names = property(lambda self: list(self._core.member(0).feature_names))
    target_names = property(lambda self: list(self._core.member(0).target_names))

    def __len__(self) -> int:
        return self._core.size

    def __repr__(self) -> str:
        return f"mlalpha.Ensemble({self.dir!r}, members={self.names})"
