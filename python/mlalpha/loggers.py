"""Loggers for mlalpha.fit(..., logger=...): the training records, every validation's metrics, the test metrics
and the run's files sent to an experiment tracker. Each imports its tracker only when it is made, so mlalpha
needs neither.

A logger is any object with log_metrics(metrics: dict[str, float], step: int); log_params(params: dict),
log_artifacts(dir: str, files: list[str]) and finish() are called when present. Steps are fit's global steps
(fold × train.steps + step), which keep growing across walk-forward folds. When the run ends, log_metrics gets
the test metrics (test/<metric>), a walk-forward run's pooled out-of-sample ones (oos/<metric>) and a
population's ensemble (ensemble/<metric>); log_artifacts gets the run folder and its plots, tables and records
(curves.svg, long_short.svg, metrics.jsonl, folds.csv, leaderboard.csv, ...: every .svg, .csv, .json and
.jsonl, as paths relative to the folder; not the checkpoints), called before a temporary run folder is removed.

    run = mlalpha.fit(panel, cfg, logger=mlalpha.loggers.MLflowLogger(experiment="alpha"))
    run = mlalpha.fit(panel, cfg, logger=mlalpha.loggers.TensorBoardLogger("tb/run1"))
"""
from __future__ import annotations

import os
import shutil
from typing import Any


def _writer_folder(writer: Any, sub: str) -> str | None:
    """`sub` inside the folder a SummaryWriter writes to (torch: log_dir; tensorboardX: logdir, get_logdir())."""
    folder = getattr(writer, "log_dir", None) or getattr(writer, "logdir", None)
    if folder is None and callable(getattr(writer, "get_logdir", None)):
        folder = writer.get_logdir()
    return os.path.join(os.fspath(folder), sub) if isinstance(folder, (str, os.PathLike)) else None


class MLflowLogger:
    """Logs to MLflow (pip install mlflow): the run's settings as parameters, the records and the test metrics as
    metrics ("/" written as "."), the run folder's plots, tables and records as artifacts (fold-k/ kept).

    experiment: the experiment's name (None: MLflow's active or default one); run_name names the MLflow run;
    tracking_uri: where MLflow writes (None: MLFLOW_TRACKING_URI or ./mlruns). A run already active (mlflow.start_run
    by the caller) is logged into and left open; otherwise this logger starts one and ends it when fit returns.
    """

    def __init__(self, experiment: str | None = None, run_name: str | None = None, tracking_uri: str | None = None):
        try:
            import mlflow
        except ImportError as e:
            raise ImportError(f"MLflowLogger needs mlflow (pip install mlflow): importing it failed ({e})") from e
        self._mlflow = mlflow
        if tracking_uri is not None:
            mlflow.set_tracking_uri(tracking_uri)
        if experiment is not None:
            mlflow.set_experiment(experiment)
        self._owned = mlflow.active_run() is None
        self.run = mlflow.start_run(run_name=run_name) if self._owned else mlflow.active_run()
        self.run_id = self.run.info.run_id

    def log_params(self, params: dict[str, Any]) -> None:
        # MLflow keeps parameter values as text of at most 6000 characters; lists are written as text.
        self._mlflow.log_params({k: str(v)[:6000] for k, v in params.items()}, run_id=self.run_id)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        if metrics:
            self._mlflow.log_metrics({k.replace("/", "."): float(v) for k, v in metrics.items()}, step=int(step),
                                     run_id=self.run_id)

    def log_artifacts(self, run_dir: str, files: list[str]) -> None:
        # Each file under its own sub-folder of the MLflow run's artifacts (fold-0/curves.svg stays fold-0/).
        client = self._mlflow.MlflowClient()
        for rel in files:
            sub = os.path.dirname(rel)
            client.log_artifact(self.run_id, os.path.join(run_dir, rel), sub or None)

    def finish(self) -> None:
        if self._owned and self._mlflow.active_run() is not None and self._mlflow.active_run().info.run_id == self.run_id:
            self._mlflow.end_run()


class TensorBoardLogger:
    """Logs scalars for TensorBoard: `writer` is an object with add_scalar(tag, value, step) (a
    torch.utils.tensorboard.SummaryWriter or a tensorboardX one); without it, one is made for `log_dir` from
    torch.utils.tensorboard, else tensorboardX (pip install tensorboard, or tensorboardX).

    TensorBoard has no artifact store: the run's files are copied beside the event files, into
    <the writer's folder>/run_files/ (the writer's log_dir, logdir or get_logdir()); `files_dir` names another
    folder. A writer without a folder, and no files_dir, gets the scalars only."""

    def __init__(self, log_dir: str | None = None, writer: Any = None, files_dir: str | None = None):
        if writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                try:
                    from tensorboardX import SummaryWriter
                except ImportError as e:
                    raise ImportError("TensorBoardLogger needs torch (torch.utils.tensorboard) or tensorboardX "
                                      f"(pip install tensorboardX), or pass writer=: importing them failed ({e})") from e
            writer = SummaryWriter(log_dir)
        if not callable(getattr(writer, "add_scalar", None)):
            raise TypeError(f"TensorBoardLogger: writer must have add_scalar(tag, value, step), got {type(writer).__name__}")
        self.writer = writer
        self.files_dir = files_dir if files_dir is not None else _writer_folder(writer, "run_files")

    def log_params(self, params: dict[str, Any]) -> None:
        if callable(getattr(self.writer, "add_text", None)):
            self.writer.add_text("config", "\n".join(f"    {k} = {v}" for k, v in params.items()), 0)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, float(value), int(step))

    def log_artifacts(self, run_dir: str, files: list[str]) -> None:
        if self.files_dir is None:
            return
        for rel in files:
            dest = os.path.join(self.files_dir, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(os.path.join(run_dir, rel), dest)

    def finish(self) -> None:
        if callable(getattr(self.writer, "flush", None)):
            self.writer.flush()
