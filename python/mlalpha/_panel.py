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


class Panel:
    """A panel for the engine. Build it with Panel.from_numpy (or Panel.from_frame when it exists).

    The values are copied into the engine's panel (a std::vector), so later changes to the source
    arrays do not reach it.
    """

    def __init__(self, core: "_core.Panel"):
        self._core = core

    @classmethod
    def from_numpy(cls, x, y, times: Sequence | None = None, instruments: Sequence | None = None,
                   feature_names: Sequence[str] | None = None, target_names: Sequence[str] | None = None) -> "Panel":
        """x (N, T, F) with y (N, T, K) or (N, T); or one series: x (T, F) with y (T, K) or (T,).

        NaN is allowed in both (NaN targets are masked, NaN features get the training mean); ±Inf, integer
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

    def __repr__(self) -> str:
        return "mlalpha.Panel(N={}, T={}, F={}, K={})".format(*self.shape)
