"""mlalpha.fit: a training run in the engine (run_training), its models and records."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import _core
from ._config import Config
from ._model import Model, _device
from ._panel import Panel

try:
    import pandas as _pd
except ImportError:
    _pd = None


def _table(rows: list[dict]):
    """A DataFrame when pandas is importable, else the list of dicts."""
    return _pd.DataFrame(rows) if _pd is not None else rows


def _eval_row(fold: int, e: dict) -> dict:
    m = e["metrics"]
    row = {"fold": fold, "step": e["step"], "value": e["value"], "best": e["best"]}
    row.update({k: m[k] for k in _core.metric_names()})  # the engine's table of metrics, in its order
    row["points"] = m["points"]
    return row


@dataclass
class Fold:
    """One fold of a run (a single split is fold 0)."""
    fold: int
    split: dict          # {"train": (t0, t1), "valid": ..., "test": ...} time indices
    steps: int           # the last step trained
    best_step: int
    best_value: float    # run.metric at best_step
    early_stopped: bool
    stopped: bool
    test: dict | None    # metrics of the best weights on the test range
    best: Model | None
    last: Model | None
    history: list[dict] = field(repr=False)
    evaluations: list[dict] = field(repr=False)


@dataclass
class Run:
    """What fit returns. best / last: the models of the last fold (the latest data)."""
    folds: list[Fold]
    config: Config
    dir: str | None      # the run folder, None when fit used a temporary one
    stopped: bool        # the callback, Ctrl-C or the stop flag ended it before the planned end
    interrupted: bool    # Ctrl-C (SIGINT) ended it
    # Walk-forward only: metrics of the pooled out-of-sample predictions (out_dir/oos_pred.csv) and the
    # mean / sample std over the folds of each test metric; None for a single split.
    oos: dict | None = None
    fold_test_mean: dict | None = None
    fold_test_std: dict | None = None
    # Populations (train.models > 1 or [sweep]): every trained member (name, fold, settings, dir, steps,
    # best_step, best_value, early_stopped, test, oos), folds stays empty; the mean-ensemble's metrics
    # (test range, else validation; walk-forward: pooled over the folds) and leaderboard.csv's rows.
    members: list[dict] = field(default_factory=list, repr=False)
    ensemble: dict | None = None
    leaderboard_rows: list[dict] = field(default_factory=list, repr=False)
    # Walk-forward: the pooled out-of-sample predictions as a DataFrame (kept when the run folder is temporary).
    oos_pred: Any = field(default=None, repr=False)

    @property
    def leaderboard(self):
        """leaderboard.csv: members best first (rank, member, the varied settings, best_step, valid_<metric>,
        test_<metric>... or, walk-forward, folds and oos_<metric>..., dir), the ensemble last; a DataFrame
        when pandas is importable."""
        return _table(self.leaderboard_rows)

    @property
    def best(self) -> Model | None:
        return self.folds[-1].best if self.folds else None

    @property
    def last(self) -> Model | None:
        return self.folds[-1].last if self.folds else None

    @property
    def history(self):
        """Every training step: fold, step, loss, lr, grad_norm, skipped."""
        return _table([{"fold": f.fold, **p} for f in self.folds for p in f.history])

    @property
    def evaluations(self):
        """Every validation: fold, step, value (run.metric), best, mse, ic, rank_ic, icir, dir_acc, ls_mean,
        ls_std, ls_sharpe, turnover, mse_zero, mse_mean, points."""
        return _table([_eval_row(f.fold, e) for f in self.folds for e in f.evaluations])


def _leaderboard_rows(board: dict) -> list[dict]:
    """The engine's leaderboard (its columns and rows of cells) as dicts, cells turned into numbers where they are
    numbers (empty cells None): the same table leaderboard.csv holds, handed over as data."""

    def value(cell: str):
        if cell == "":
            return None
        try:
            return int(cell)
        except ValueError:
            pass
        try:
            return float(cell)
        except ValueError:
            return cell

    columns = board["columns"]
    return [{k: value(v) for k, v in zip(columns, row)} for row in board["rows"]]


def _load_if(path: str) -> Model | None:
    return Model.load(path) if os.path.exists(path) else None


def _oos_frame(csv_path: str, panel: Panel):
    """Run.oos_pred: the pooled out-of-sample predictions the engine wrote (<prefix>.csv with its fold and observed
    columns, <prefix>.npy with the exact floats) as a DataFrame with columns fold, observed, pred_<target>...: for a
    panel from a frame, indexed like that frame's rows inside the pooled range (in the frame's order, so
    df.join(run.oos_pred) lines up); otherwise by (time, instrument), as the CSV. None without pandas."""
    if _pd is None or not csv_path or not os.path.exists(csv_path):
        return None
    pred = np.load(csv_path[:-4] + ".npy")  # (N, T, K)
    table = _pd.read_csv(csv_path, usecols=["time", "instrument", "fold", "observed"],
                         dtype={"time": str, "instrument": str}, keep_default_na=False)
    # The CSV names a time step or instrument by its label, or by its index when the panel has none.
    t_of = {label: k for k, label in enumerate(panel.times or [str(t) for t in range(panel.T)])}
    i_of = {label: k for k, label in enumerate(panel.instruments or [str(i) for i in range(panel.N)])}
    t = table["time"].map(t_of).to_numpy()
    i = table["instrument"].map(i_of).to_numpy()
    names = [f"pred_{n}" for n in (panel.target_names or [f"y{k}" for k in range(panel.K)])]
    fold = table["fold"].to_numpy(dtype=np.int64)
    observed = table["observed"].to_numpy(dtype=np.int64)
    if panel._frame is None:
        out = _pd.DataFrame(pred[i, t], columns=names,
                            index=_pd.MultiIndex.from_arrays([table["time"], table["instrument"]], names=["time", "instrument"]))
        out.insert(0, "observed", observed)
        out.insert(0, "fold", fold)
        return out
    index, i_slot, t_slot = panel._frame
    row_of = np.full((panel.N, panel.T), -1, dtype=np.int64)
    row_of[i, t] = np.arange(len(table))
    rows = row_of[i_slot, t_slot]
    keep = rows >= 0
    out = _pd.DataFrame(pred[i_slot[keep], t_slot[keep]], columns=names, index=index[keep])
    out.insert(0, "observed", observed[rows[keep]])
    out.insert(0, "fold", fold[rows[keep]])
    return out


# The engine names settings as the TOML file and the command line do; fit's arguments have Python names.
_FLAG_WORDS = [(re.compile(r"--resume (\S+?):"), r"resume=\1:"), (re.compile(r"--resume "), "resume="),
               (re.compile(r"\(--steps N\)"), "(train={'steps': N})"), (re.compile(r"--steps N"), "train={'steps': N}"),
               (re.compile(r"\(--warmup\)"), "(train.warmup)"), (re.compile(r"drop run\.out_dir / -o"), "drop out_dir=")]


def _python_error(message: str, device_given: bool, out_dir_given: bool) -> str:
    """An engine error in the words of fit's arguments: device='gpu' for run.device = 'gpu' when device= set it,
    out_dir= for run.out_dir, resume= for --resume, train={'steps': N} for --steps N."""
    if device_given:
        message = re.sub(r"run\.device = '(\w+)'", r"device='\1'", message)
        message = message.replace("(use 'auto' or 'cpu')", "(use device='auto' or device='cpu')")
    if out_dir_given:
        message = re.sub(r"run\.out_dir = '", "out_dir='", message)
    for pattern, words in _FLAG_WORDS:
        message = pattern.sub(words, message)
    return message


class _Progress:
    """A tqdm bar over the training steps of each fold, when tqdm is installed."""

    def __init__(self, steps: int):
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        self._tqdm, self._steps, self._bar = tqdm, steps, None
        self._shown = 0  # the latest step shown: a population's members all log the same steps

    def __call__(self, e: dict) -> None:
        if self._tqdm is None:
            return
        if e["kind"] == "fold_start":
            self.close()
            self._bar = self._tqdm(total=self._steps, initial=e["start_step"], desc=f"fold {e['fold']}" if e["folds"] > 1 else "train")
            self._shown = e["start_step"]
        elif e["kind"] == "log" and self._bar is not None and e["points"]:
            new = [p for p in e["points"] if p["step"] > self._shown]
            if new:
                self._bar.update(len(new))
                self._shown = new[-1]["step"]
                self._bar.set_postfix(loss=f"{new[-1]['loss']:.4g}")
        elif e["kind"] == "fold_end":
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def fit(panel: Panel, config: Config | dict | None = None, device: str | None = None,
        callback: Callable[[dict], Any] | None = None, out_dir: str | os.PathLike | None = None,
        overwrite: bool = False, progress: bool = False, resume: str | os.PathLike | None = None,
        threads: int | None = None, logger: Any = None) -> Run:
    """Trains on `panel` in the engine, as `ml-alpha train` does (walk-forward folds included).

    device: "auto" | "cpu" | "gpu"; None keeps the config's run.device (default auto).
    threads: the CPU backend's worker threads (run.threads; 0: every CPU this process may use, at most 64);
    None keeps the config's (default 0). The results do not depend on it, and a resume may change it.
    callback(event: dict) is called at each fold start, log point (every train.log_every steps), validation
    and message; returning False stops the run after the current step (as Ctrl-C does). Every event carries
    "global_step": fold × train.steps + step, which keeps growing across walk-forward folds (what
    optuna's trial.report needs). The engine's warnings ("warning: ..." messages) are also issued as Python
    warnings (UserWarning).
    logger: an object with log_metrics(metrics: dict, step: int) (and, optionally, log_params(params: dict),
    log_artifacts(dir: str, files: list[str]) and finish()), e.g. mlalpha.loggers.MLflowLogger() or
    TensorBoardLogger(log_dir): the training records, every validation's metrics, and at the end the test (and
    pooled out-of-sample) metrics and the run folder's plots, tables and records go to it (docs/python.md,
    "Loggers").
    out_dir: the run folder; None uses the config's run.out_dir when it was set, otherwise a temporary folder
    removed once the models are loaded (Run.dir is then None). A folder that holds a run is refused unless
    overwrite=True (its old files are moved aside and go once the new run has ended, or come back when it fails)
    or resume names it (not both: resume continues the run, overwrite replaces it).
    Ctrl-C (KeyboardInterrupt) while the engine trains stops it after the current step: fit returns the Run
    with stopped and interrupted True and `last` holding the weights of that step.
    resume: continue a run in its own folder (as `ml-alpha train --resume`): its run folder, or a last.safetensors
    in it; the run's recorded settings govern, and out_dir, when given, must be that folder. run.stop_after = N in config ends a call after N steps, to be resumed;
    run.save_every = N also saves `last` every N steps, so a crashed or killed call resumes from its last save.
    """
    if not isinstance(panel, Panel):
        raise TypeError(f"fit: panel must be an mlalpha.Panel (Panel.from_numpy), got {type(panel).__name__}")
    if config is None:
        config = Config()
    elif isinstance(config, dict):
        config = Config(config)
    elif not isinstance(config, Config):
        raise TypeError(f"fit: config must be an mlalpha.Config or a dict, got {type(config).__name__}")
    changes: dict[str, Any] = {}
    if device is not None:
        changes["run.device"] = _device(device, "fit")
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"fit: threads must be an int (0: every CPU), got {threads!r}")
        changes["run.threads"] = threads
    tmp = None
    resume = "" if resume is None else os.fspath(resume)
    if out_dir is not None:
        changes["run.out_dir"] = os.fspath(out_dir)
    elif resume:
        pass  # the run's own folder, from its record
    elif "run.out_dir" not in config.given:
        tmp = tempfile.mkdtemp(prefix="mlalpha-run-")
        changes["run.out_dir"] = tmp
    if changes:
        config = config.replace(changes)

    steps = int(config["train.steps"])
    bar = _Progress(steps) if progress else None
    if logger is not None:
        if not callable(getattr(logger, "log_metrics", None)):
            raise TypeError(f"fit: logger must have a log_metrics(metrics: dict, step: int) method, got {type(logger).__name__}")
        if callable(getattr(logger, "log_params", None)):
            logger.log_params({f"{sec}.{k}": v for sec, d in config.to_dict().items() for k, v in d.items()})

    def on_event(e: dict):
        e["global_step"] = e["fold"] * steps + e["step"]
        if e["kind"] == "message" and e["message"].startswith("warning: "):
            warnings.warn(e["message"][len("warning: "):], UserWarning, stacklevel=2)
        if bar is not None:
            bar(e)
        if logger is not None:
            _log_event(logger, e, steps)
        return True if callback is None else callback(e)

    try:
        try:
            result, _, interrupted = _core.fit(config._cfg, panel._core, on_event, overwrite, resume,
                                               threading.current_thread() is threading.main_thread())
        except ValueError as err:
            raise ValueError(_python_error(str(err), device is not None, out_dir is not None)) from None
        folds = [Fold(fold=f["fold"], split=f["split"], steps=f["steps"], best_step=f["best_step"],
                      best_value=f["best_value"], early_stopped=f["early_stopped"], stopped=f["stopped"],
                      test=f["test"], best=_load_if(os.path.join(f["dir"], "best.safetensors")),
                      last=_load_if(os.path.join(f["dir"], "last.safetensors")), history=f["history"],
                      evaluations=f["evaluations"]) for f in result["folds"]]
        board = _leaderboard_rows(result["leaderboard"])
        oos_file = result["oos_file"]
        if oos_file is None and result["members"] and result["ensemble"] is not None:  # a walk-forward population
            pooled = os.path.join(result["dir"], "ensemble", "pred.csv")
            oos_file = pooled if any(m["oos"] is not None for m in result["members"]) else None
        oos_pred = _oos_frame(oos_file, panel) if oos_file else None
        if logger is not None:
            _log_result(logger, result, steps)  # before a temporary run folder goes
    finally:
        if bar is not None:
            bar.close()
        if logger is not None and callable(getattr(logger, "finish", None)):
            logger.finish()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    wf = len(result["folds"]) > 1 or result["oos"] is not None
    return Run(folds=folds, config=config, dir=None if tmp else result["dir"],
               stopped=bool(result["stopped"]) or interrupted, interrupted=interrupted, oos=result["oos"],
               fold_test_mean=result["fold_test_mean"] if wf else None,
               fold_test_std=result["fold_test_std"] if wf else None, members=result["members"],
               ensemble=result["ensemble"], leaderboard_rows=board, oos_pred=oos_pred)


def _log_event(logger, e: dict, steps: int) -> None:
    """The records a logger receives, at global steps (growing across walk-forward folds): train/loss, train/lr,
    train/grad_norm at each training step and valid/<metric> for every metric of each validation; a population's
    member prefixes its name (member-03/valid/ic)."""
    prefix = f"{e['member_name']}/" if e.get("member_name") else ""
    base = e["fold"] * steps
    if e["kind"] == "log":
        for point in e["points"]:
            logger.log_metrics({f"{prefix}train/loss": point["loss"], f"{prefix}train/lr": point["lr"],
                                f"{prefix}train/grad_norm": point["grad_norm"]}, base + point["step"])
    elif e["kind"] == "eval":
        m = e["evaluation"]["metrics"]
        values = {f"{prefix}valid/{k}": float(m[k]) for k in _core.metric_names()}
        logger.log_metrics({k: v for k, v in values.items() if np.isfinite(v)}, e["global_step"])


# What a logger gets of the run folder: the plots, tables and records; not the checkpoints, arrays or the lock.
_ARTIFACT_SUFFIXES = (".svg", ".csv", ".json", ".jsonl")


def _run_files(run_dir: str) -> list[str]:
    """The run folder's files a logger keeps, as paths relative to it (fold-0/curves.svg), sorted."""
    out = []
    for root, _, names in os.walk(run_dir):
        out += [os.path.relpath(os.path.join(root, n), run_dir) for n in names if n.endswith(_ARTIFACT_SUFFIXES)]
    return sorted(out)


def _log_result(logger, result: dict, steps: int) -> None:
    """The run's outcome, once it has ended: each fold's test metrics (test/<metric>, at its last global step), a
    walk-forward run's pooled out-of-sample metrics (oos/<metric>), a population's members' test and pooled
    metrics (member-03/test/<metric>, member-03/oos/<metric>) and its mean-ensemble's (ensemble/<metric>), at the
    run's last global step; then, when the logger has log_artifacts(dir, files), the run folder's plots, tables
    and records (_run_files)."""
    def values(prefix: str, m: dict | None) -> dict:
        if m is None:
            return {}
        named = {f"{prefix}{k}": float(m[k]) for k in _core.metric_names()}
        return {k: v for k, v in named.items() if np.isfinite(v)}

    ends = [f["fold"] * steps + f["steps"] for f in result["folds"]]
    ends += [m["fold"] * steps + m["steps"] for m in result["members"]]
    last = max(ends, default=0)
    tested = [(values("test/", f["test"]), f["fold"] * steps + f["steps"]) for f in result["folds"]]
    tested += [(values(f"{m['name']}/test/", m["test"]), m["fold"] * steps + m["steps"]) for m in result["members"]]
    for metrics, step in tested:
        if metrics:
            logger.log_metrics(metrics, step)
    pooled = values("oos/", result["oos"])
    for m in result["members"]:
        pooled.update(values(f"{m['name']}/oos/", m["oos"]))
    pooled.update(values("ensemble/", result["ensemble"]))
    if pooled:
        logger.log_metrics(pooled, last)
    if callable(getattr(logger, "log_artifacts", None)) and result["dir"] and os.path.isdir(result["dir"]):
        logger.log_artifacts(result["dir"], _run_files(result["dir"]))
