"""Panel.from_frame on long pandas frames (Qlib's (datetime, instrument) MultiIndex, or columns) and
predictions aligned to the frame's rows."""
import os

import numpy as np
import pytest

import mlalpha

pd = pytest.importorskip("pandas", reason="pandas is not installed")

SMALL = {
    "model": {"d_model": 16, "layers": 1, "head_dim": 8, "d_state": 8, "chunk": 16},
    "train": {"batch": 4, "seq_len": 32, "steps": 20, "warmup": 5, "log_every": 5},
    # MLALPHA_TEST_DEVICE=gpu runs the suite's training on the GPU (scripts/test_python.sh on a GPU machine).
    "run": {"eval_every": 10, "device": os.environ.get("MLALPHA_TEST_DEVICE", "cpu")},
}


def long_frame(N=3, T=120, seed=0):
    rng = np.random.default_rng(seed)
    dates = pd.date_range("2020-01-01", periods=T, freq="D")
    inst = [f"SH60000{i}" for i in range(N)]
    idx = pd.MultiIndex.from_product([dates, inst], names=["datetime", "instrument"])
    df = pd.DataFrame({"f0": rng.standard_normal(len(idx)), "f1": rng.standard_normal(len(idx))}, index=idx)
    df["ret"] = 0.5 * df["f0"] + 0.1 * rng.standard_normal(len(idx))
    return df


def test_multiindex_labels_and_values():
    df = long_frame(N=2, T=5)
    p = mlalpha.Panel.from_frame(df, features=["f0", "f1"], targets=["ret"])
    assert p.shape == (2, 5, 2, 1)
    assert p.times == [f"2020-01-0{d}" for d in range(1, 6)] and p.instruments == ["SH600000", "SH600001"]
    assert p.feature_names == ["f0", "f1"] and p.target_names == ["ret"]
    row = df.loc[(pd.Timestamp("2020-01-03"), "SH600001")]
    np.testing.assert_array_equal(p.x[1, 2], np.float32(row[["f0", "f1"]].to_numpy()))
    assert p.y[1, 2, 0] == np.float32(row["ret"])


def test_unsorted_columns_and_missing_rows():
    df = long_frame(N=2, T=6).reset_index().rename(columns={"datetime": "time"})
    shuffled = df.sample(frac=1.0, random_state=1)
    dropped = shuffled.drop(shuffled.index[(shuffled["time"] == "2020-01-04") & (shuffled["instrument"] == "SH600000")])
    a = mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"])
    b = mlalpha.Panel.from_frame(dropped, ["f0", "f1"], ["ret"])
    assert a.times == b.times and a.instruments == b.instruments  # sorted, whatever the row order
    assert np.isnan(b.x[0, 3]).all() and np.isnan(b.y[0, 3]).all()  # the missing row
    mask = np.ones((2, 6), dtype=bool)
    mask[0, 3] = False
    np.testing.assert_array_equal(a.x[mask], b.x[mask])


def test_frame_errors():
    df = long_frame(N=2, T=4)
    with pytest.raises(ValueError, match="'g' not in the frame"):
        mlalpha.Panel.from_frame(df, ["f0", "g"], ["ret"])
    bad = df.copy()
    bad.iloc[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"feature column 'f0' at row \(2020-01-02 00:00:00, SH600001\) is inf"):
        mlalpha.Panel.from_frame(bad, ["f0", "f1"], ["ret"])
    txt = df.copy()
    txt["f1"] = "a"
    with pytest.raises(TypeError, match="feature column 'f1' has dtype"):
        mlalpha.Panel.from_frame(txt, ["f0", "f1"], ["ret"])
    with pytest.raises(ValueError, match="appears in more than one row"):
        mlalpha.Panel.from_frame(pd.concat([df, df.iloc[:1]]), ["f0", "f1"], ["ret"])
    with pytest.raises(ValueError, match="neither a \\(datetime, instrument\\) MultiIndex"):
        mlalpha.Panel.from_frame(df.reset_index(drop=True), ["f0", "f1"], ["ret"])


def test_fit_and_predict_aligned_to_the_frame():
    df = long_frame()
    r = mlalpha.fit(mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"]), mlalpha.Config(SMALL))
    shuffled = df.sample(frac=1.0, random_state=2)
    pred = r.best.predict(shuffled)  # features taken by the model's names
    assert isinstance(pred, pd.DataFrame) and list(pred.columns) == ["pred_ret"]
    joined = shuffled.join(pred)  # the prediction column joins the input frame
    assert list(joined.columns) == ["f0", "f1", "ret", "pred_ret"]
    np.testing.assert_array_equal(joined["pred_ret"].to_numpy(), pred["pred_ret"].to_numpy())
    assert pred.index.equals(shuffled.index)
    ordered = r.best.predict(mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"]))
    pd.testing.assert_frame_equal(pred.loc[df.index], ordered)  # the same numbers, whatever the row order
    arr = r.best.predict(mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"]).x)  # an array: (N, T, K) back
    assert arr.shape == (3, 120, 1)
    np.testing.assert_array_equal(arr[1, 5, 0], ordered.loc[(pd.Timestamp("2020-01-06"), "SH600001"), "pred_ret"])


def test_frame_dates_are_a_parsed_time_axis():
    # Dates from a frame are read as dates (not text): a date split picks the first date on or after it,
    # and labels out of order are refused from arrays.
    rng = np.random.default_rng(4)
    dates = pd.bdate_range("2021-01-01", periods=200)
    idx = pd.MultiIndex.from_product([dates, ["a", "b", "c", "d"]], names=["datetime", "instrument"])
    df = pd.DataFrame({"f0": rng.standard_normal(len(idx)), "ret": rng.standard_normal(len(idx))}, index=idx)
    p = mlalpha.Panel.from_frame(df, features=["f0"], targets=["ret"])
    assert p._core.times_are_dates
    cfg = mlalpha.Config(SMALL).replace({"split.train_end": "2021-07-01", "split.valid_end": 1.0, "train.steps": 10})
    run = mlalpha.fit(p, cfg)
    assert run.folds[0].split["train"][1] == int(np.searchsorted(dates, pd.Timestamp("2021-07-01")))
    x = rng.standard_normal((2, 3, 1)).astype(np.float32)
    with pytest.raises(ValueError, match=r"chronological order: times\[2\] = '2021-01-01' is not after"):
        mlalpha.Panel.from_numpy(x, x, times=["2021-01-02", "2021-01-03", "2021-01-01"])
    assert not mlalpha.Panel.from_numpy(x, x, times=["t0", "t1", "t2"])._core.times_are_dates  # plain labels


def test_one_series_with_a_datetime_index():
    # One instrument's frame, indexed by its dates alone (no instrument level), is a panel of N = 1, as a CSV file
    # read with data.instrument_column = "": from_frame, fit, predict and metrics take it as they take a panel.
    rng = np.random.default_rng(5)
    dates = pd.bdate_range("2021-01-01", periods=200)
    df = pd.DataFrame({"f0": rng.standard_normal(200), "f1": rng.standard_normal(200)}, index=dates)
    df["ret"] = 0.5 * df["f0"] + 0.1 * rng.standard_normal(200)
    p = mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"])
    assert p.shape == (1, 200, 2, 1) and p.instruments == []
    assert p.times[:2] == ["2021-01-01", "2021-01-04"] and p._core.times_are_dates
    np.testing.assert_array_equal(p.x[0], df[["f0", "f1"]].to_numpy(dtype=np.float32))
    np.testing.assert_array_equal(p.y[0, :, 0], df["ret"].to_numpy(dtype=np.float32))
    # The same series with a time column, rows shuffled: the same panel.
    col = df.sample(frac=1.0, random_state=1).rename_axis("time").reset_index()
    q = mlalpha.Panel.from_frame(col, ["f0", "f1"], ["ret"])
    assert q.times == p.times
    np.testing.assert_array_equal(q.x, p.x)

    r = mlalpha.fit(p, mlalpha.Config(SMALL))
    pred = r.best.predict(df)
    assert list(pred.columns) == ["pred_ret"] and pred.index.equals(df.index)
    arr = r.best.predict(p.x[0])  # (T, F) -> (T, K): the same numbers
    np.testing.assert_array_equal(pred["pred_ret"].to_numpy(), arr[:, 0])
    assert np.isfinite(arr[31:]).all()

    m = mlalpha.metrics(pred, df[["ret"]])
    ref = mlalpha.metrics(arr[:, 0], df["ret"].to_numpy(dtype=np.float32))
    assert m["points"] == ref["points"] == np.isfinite(arr[:, 0]).sum() > 150
    assert m["mse"] == pytest.approx(ref["mse"], rel=1e-6) and m["ts_mean"] == pytest.approx(ref["ts_mean"], rel=1e-6)
    # A date bound on the series' own axis.
    later = mlalpha.metrics(pred, df[["ret"]], t0="2021-06-01")
    assert later["points"] == np.isfinite(arr[int(np.searchsorted(dates, pd.Timestamp("2021-06-01"))):, 0]).sum()
    with pytest.raises(ValueError, match="pred is one series and y is a panel"):
        mlalpha.metrics(pred, pd.concat({"A": df[["ret"]]}, names=["instrument"]).swaplevel())
    with pytest.raises(ValueError, match="time 2021-01-04 appears in more than one row of the series"):
        mlalpha.Panel.from_frame(pd.concat([df, df.iloc[1:2]]), ["f0", "f1"], ["ret"])
