"""Loggers for mlalpha.fit(..., logger=...): the training records and every validation's metrics sent to an
experiment tracker. Each imports its tracker only when it is made, so mlalpha needs neither.

A logger is any object with log_metrics(metrics: dict[str, float], step: int); log_params(params: dict) and
finish() are called when present. Steps are fit's global steps (fold × train.steps + step), which keep growing
across walk-forward folds.

    run = mlalpha.fit(panel, cfg, logger=mlalpha.loggers.MLflowLogger(experiment="alpha"))
    run = mlalpha.fit(panel, cfg, logger=mlalpha.loggers.TensorBoardLogger("tb/run1"))
"""
from __future__ import annotations

from typing import Any


class MLflowLogger:
    """Logs to MLflow (pip install mlflow): the run's settings as parameters, the records as metrics.

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

    def finish(self) -> None:
        if self._owned and self._mlflow.active_run() is not None and self._mlflow.active_run().info.run_id == self.run_id:
            self._mlflow.end_run()


class TensorBoardLogger:
    """Logs scalars for TensorBoard: `writer` is an object with add_scalar(tag, value, step) (a
    torch.utils.tensorboard.SummaryWriter or a tensorboardX one); without it, one is made for `log_dir` from
    torch.utils.tensorboard, else tensorboardX (pip install tensorboard, or tensorboardX)."""

    def __init__(self, log_dir: str | None = None, writer: Any = None):
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

    def log_params(self, params: dict[str, Any]) -> None:
        if callable(getattr(self.writer, "add_text", None)):
            self.writer.add_text("config", "\n".join(f"    {k} = {v}" for k, v in params.items()), 0)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, float(value), int(step))

    def finish(self) -> None:
        if callable(getattr(self.writer, "flush", None)):
            self.writer.flush()
