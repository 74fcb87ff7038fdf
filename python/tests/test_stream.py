"""What a date's prediction is, from Python, and the streaming predictor (Model.stream): window-mode scores do
not depend on where the frame starts; carry mode is what the stream computes; streamed bars (arrays or one-date
DataFrames) equal Model.predict on the whole history; a saved stream resumes bit-exactly; bad bars are refused
and change nothing; observed in oos_pred.csv is 1 exactly for the frame's rows."""
import os

import numpy as np
import pytest

import mlalpha

pd = pytest.importorskip("pandas", reason="pandas is not installed")

SETTINGS = {
    "model": {"d_model": 16, "layers": 1, "head_dim": 8, "d_state": 8, "chunk": 8},
    "train": {"batch": 4, "seq_len": 10, "steps": 12, "warmup": 2, "log_every": 4},
    "run": {"eval_every": 6, "device": os.environ.get("MLALPHA_TEST_DEVICE", "cpu")},
    "data": {"target_norm": "zscore", "feature_norm": "zscore", "nan_fill": "ffill"},
}


def frame(N=4, T=80, seed=0):
    """Qlib's layout with what real data has: an instrument listed late, gaps, a NaN cell."""
    rng = np.random.default_rng(seed)
    dates = pd.date_range("2021-01-01", periods=T, freq="D")
    inst = [f"S{i}" for i in range(N)]
    idx = pd.MultiIndex.from_product([dates, inst], names=["datetime", "instrument"])
    df = pd.DataFrame({"f0": rng.standard_normal(len(idx)), "f1": rng.standard_normal(len(idx))}, index=idx)
    df["ret"] = 0.5 * df["f0"] + 0.1 * rng.standard_normal(len(idx))
    late = (df.index.get_level_values("instrument") == "S2") & (df.index.get_level_values("datetime") < dates[20])
    gap = ((df.index.get_level_values("instrument") == "S1") & df.index.get_level_values("datetime").isin(dates[30:33])) | (
        (df.index.get_level_values("instrument") == "S3") & df.index.get_level_values("datetime").isin(dates[50:53]))
    df = df[~(late | gap)].copy()
    df.loc[(dates[40], "S0"), "f1"] = np.nan
    return df


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    df = frame()
    panel = mlalpha.Panel.from_frame(df, features=["f0", "f1"], targets=["ret"])
    cfg = mlalpha.Config(SETTINGS).replace({"run.out_dir": str(tmp_path_factory.mktemp("run"))})
    run = mlalpha.fit(panel, cfg, device=None)
    return run.best if run.best is not None else run.last


def test_window_scores_do_not_depend_on_where_the_frame_starts(model):
    df = frame()
    full = model.predict(df)
    dates = df.index.get_level_values("datetime").unique()
    for off in (1, 7, 23):
        later = df[df.index.get_level_values("datetime") >= dates[off]]
        part = model.predict(later)
        keep = later.index.get_level_values("datetime") >= dates[off + 9]  # C = seq_len = 10 rows behind each
        np.testing.assert_array_equal(part[keep].to_numpy(), full.loc[later.index[keep]].to_numpy())
        short = ~keep & (later.index.get_level_values("instrument") == "S0")
        assert not np.array_equal(part[short].to_numpy(), full.loc[later.index[short]].to_numpy())


def test_carry_mode_and_its_context(model):
    df = frame()
    window = model.predict(df)
    carry = model.predict(df, mode="carry")
    assert carry.shape == window.shape and not np.allclose(carry.to_numpy(), window.to_numpy())
    with pytest.raises(ValueError, match="mode must be 'window'"):
        model.predict(df, mode="rolling")
    panel = mlalpha.Panel.from_frame(df, features=["f0", "f1"])
    window_context, carry_context = model.context(panel), model.context(panel, "carry")
    assert window_context[0, :12].tolist() == list(range(1, 11)) + [10, 10]   # seq_len = 10: short dates flagged
    assert carry_context[2, -1] == 60 and carry_context[1, -1] == 77          # rows with a feature so far


def bars(df):
    for date, rows in df.groupby(level="datetime", sort=True):
        yield date, rows


@pytest.mark.parametrize("mode", ["carry", "window"])
def test_streamed_bars_equal_predict_on_the_whole_history(model, mode):
    df = frame()
    want = model.predict(df, mode=mode)
    s = model.stream(["S0", "S1", "S2", "S3"], mode=mode, device="cpu")
    got = pd.concat([s.step(rows) for _, rows in bars(df)])
    assert list(got.columns) == ["pred_ret"] and got.index.equals(df.index.sort_values())
    want = want.loc[got.index]
    if mode == "window":
        pd.testing.assert_frame_equal(got, want)  # the same columns as predict's, the same numbers
    else:
        np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-5, atol=1e-6)
    assert s.bars == 80 and s.last_time == pd.Timestamp(df.index[-1][0]).value / 1e9
    assert s.context.tolist() == ([10] * 4 if mode == "window" else [80, 77, 60, 77])


def test_array_bars_save_load_and_bad_input(model, tmp_path):
    df = frame()
    panel = mlalpha.Panel.from_frame(df, features=["f0", "f1"])
    x = panel.x  # (N, T, F)
    a = model.stream(panel.instruments, device="cpu")
    straight = np.stack([a.step(x[:, t], time=t).to_numpy() for t in range(80)])
    b = model.stream(panel.instruments, device="cpu")
    first = [b.step(x[:, t], time=t).to_numpy() for t in range(50)]
    b.save(tmp_path / "state")
    c = model.stream(["other"], device="cpu")
    c.load(tmp_path / "state")
    assert c.instruments == panel.instruments and c.bars == 50 and c.last_time == 49
    # Refused bars change nothing.
    bad = x[:, 50].copy()
    bad[1, 0] = np.inf
    with pytest.raises(ValueError, match="instrument 'S1', feature 'f0' is \\+inf"):
        c.step(bad, time=50)
    with pytest.raises(ValueError, match="is not after the last bar's"):
        c.step(x[:, 50], time=49)
    with pytest.raises(ValueError, match="x must have shape"):
        c.step(x[:3, 50], time=50)
    with pytest.raises(ValueError, match="not in the stream"):
        c.step(df.xs(df.index[-1][0], level="datetime", drop_level=False).rename(index={"S3": "S9"}))
    rest = [c.step(x[:, t], time=t).to_numpy() for t in range(50, 80)]
    np.testing.assert_array_equal(np.stack(first + rest), straight)
    other = mlalpha.load(model_path(tmp_path, model))
    assert other.stream(panel.instruments).checkpoint_hash == c.checkpoint_hash


def model_path(tmp_path, model):
    path = tmp_path / "copy.safetensors"
    model.save(path)
    return path


def test_warm_up_and_new_instruments(model):
    df = frame()
    dates = df.index.get_level_values("datetime").unique()
    history, live = df[df.index.get_level_values("datetime") < dates[60]], df[df.index.get_level_values("datetime") >= dates[60]]
    a = model.stream(["S0", "S1", "S2", "S3"], device="cpu")
    a.warm_up(history)
    b = model.stream(["S0", "S1", "S2", "S3"], device="cpu")
    for _, rows in bars(history):
        b.step(rows)
    for _, rows in bars(live):
        pd.testing.assert_frame_equal(a.step(rows), b.step(rows))
    a.set_instruments(["S0", "S4"])
    assert a.context.tolist() == [80, 0]
    with pytest.raises(ValueError, match="give a list of names"):
        model.stream("S0")


def test_observed_in_the_pooled_predictions_is_the_frames_rows(tmp_path):
    df = frame()
    panel = mlalpha.Panel.from_frame(df, features=["f0", "f1"], targets=["ret"])
    cfg = mlalpha.Config(SETTINGS).replace({"run.out_dir": str(tmp_path / "wf"), "split.walk_forward_folds": 2,
                                            "split.walk_forward_train_size": 20, "train.steps": 6, "run.eval_every": 3})
    mlalpha.fit(panel, cfg, device=None)
    oos = pd.read_csv(tmp_path / "wf" / "oos_pred.csv", dtype={"time": str})
    rows = set(zip(df.index.get_level_values("datetime").strftime("%Y-%m-%d"), df.index.get_level_values("instrument")))
    observed = [(t, i) in rows for t, i in zip(oos["time"], oos["instrument"])]
    assert oos["observed"].tolist() == [int(o) for o in observed]
    assert not all(observed), "the frame's missing rows are in the file, unobserved"
    assert (oos["context"] == 10).all()
