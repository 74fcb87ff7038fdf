"""A small market for Qlib's offline workflow tests: prices in Qlib's own binary data layout (what
`qlib.init(provider_uri=...)` reads and the backtest of PortAnaRecord trades on) and the dataset's frame
(Qlib's two-level feature / label columns) as a pickle a StaticDataLoader loads. Qlib's data download is not
reachable here, so the provider is written the way Qlib's dump_bin writes one: calendars/day.txt,
instruments/all.txt and features/<instrument>/<field>.day.bin (float32: the first calendar index, then values).
"""
from __future__ import annotations

import pathlib

import numpy as np
import pandas as pd

INSTRUMENTS = [f"SH60000{i}" for i in range(8)]
BENCH = "SH000300"  # Qlib's default benchmark code: the mean of the instruments' returns here


def write_market(root: pathlib.Path, days: int = 330, frame_days: int = 320, seed: int = 0) -> dict:
    """Writes the provider under root/qlib_data and the frame to root/frame.pkl; returns their paths, the dates
    and the segment boundaries (train 180 dates, valid 60, test the rest of the frame's dates). The label of date t
    is the next date's return; feature f0 is that return plus noise (learnable), f1..f3 are noise. The provider's
    calendar runs `days - frame_days` dates past the frame, as a backtest's last day needs the day after."""
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2020-01-01", periods=days)
    ret = 0.01 * rng.standard_normal((days, len(INSTRUMENTS)))
    close = 10.0 * np.exp(np.cumsum(ret, axis=0))
    bench = 1000.0 * np.exp(np.cumsum(ret.mean(axis=1)))

    data = root / "qlib_data"
    (data / "calendars").mkdir(parents=True, exist_ok=True)
    (data / "instruments").mkdir(exist_ok=True)
    (data / "calendars" / "day.txt").write_text("".join(f"{d:%Y-%m-%d}\n" for d in dates))
    names = INSTRUMENTS + [BENCH]
    (data / "instruments" / "all.txt").write_text("".join(f"{n}\t{dates[0]:%Y-%m-%d}\t{dates[-1]:%Y-%m-%d}\n" for n in names))
    for name, c in zip(names, list(close.T) + [bench]):
        folder = data / "features" / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        change = np.concatenate([[np.nan], c[1:] / c[:-1] - 1.0])
        for field, v in {"close": c, "open": c, "high": c, "low": c, "vwap": c, "factor": np.ones_like(c),
                         "volume": np.full_like(c, 1e6), "change": change}.items():
            np.concatenate([[0.0], v]).astype("<f4").tofile(folder / f"{field}.day.bin")

    fd = dates[:frame_days]
    label = close[1:frame_days + 1] / close[:frame_days] - 1.0  # (frame_days, N): the next date's return
    index = pd.MultiIndex.from_product([fd, INSTRUMENTS], names=["datetime", "instrument"])
    f0 = label + 0.003 * rng.standard_normal(label.shape)
    x = np.stack([f0] + [rng.standard_normal(label.shape) for _ in range(3)], axis=-1).reshape(-1, 4)
    frame = pd.concat({"feature": pd.DataFrame(x.astype(np.float32), index=index, columns=["f0", "f1", "f2", "f3"]),
                       "label": pd.DataFrame({"LABEL0": label.reshape(-1).astype(np.float32)}, index=index)}, axis=1)
    frame.to_pickle(root / "frame.pkl")
    return {"provider_uri": str(data), "frame": str(root / "frame.pkl"), "dates": fd,
            "segments": {"train": (fd[0], fd[179]), "valid": (fd[180], fd[239]), "test": (fd[240], fd[-1])}}
