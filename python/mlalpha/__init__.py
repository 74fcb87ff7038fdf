"""ml-alpha from Python: every step (training, prediction, metrics, checkpoints) runs in the C++/CUDA
engine (include/mlalpha/); this package converts arrays and results. docs/python.md shows the API."""
from ._config import Config
from ._panel import Panel
from ._model import Ensemble, Model, load
from ._run import Run, fit
from ._metrics import metrics
from ._stream import Stream
from . import loggers

__all__ = ["Config", "Panel", "Model", "Ensemble", "load", "Run", "fit", "metrics", "Stream", "loggers"]
__version__ = "0.9.0"
