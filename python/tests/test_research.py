"""The research workflow in pandas: times read as the CSV reader reads them, metrics on frames per date, the
walk-forward out-of-sample predictions as a frame, joinable predictions, the engine's refusals and warnings in
Python's words, loggers, the target scale."""
import os

import numpy as np
import pytest

import mlalpha

from test_basic import SMALL, make_arrays

pd = pytest.importorskip("pandas", reason="pandas is not installed")


def frame(N=4, T=160, seed=0, dates=None, scale=1.0):
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2021-01-01", periods=T) if dates is None else dates
    idx = pd.MultiIndex.from_product([dates, [f"S{i}" for i in range(N)]], names=["datetime", "instrument"])
    df = pd.DataFrame({"f0": rng.standard_normal(len(idx)), "f1": rng.standard_normal(len(idx))}, index=idx)
    df["ret"] = scale * (0.5 * df["f0"] + 0.3 * rng.standard_normal(len(idx)))
    return df


# --- times --------------------------------------------------------------------------------------------------

def test_text_dates_are_parsed_or_refused_never_sorted_as_text():
    df = frame(N=2, T=3).reset_index()
    df["time"] = df["datetime"].dt.strftime("%b %d %Y")  # 'Jan 01 2021': alphabetical order is not time order
    df = df.drop(columns="datetime")
    df["time"] = df["time"].replace({"Jan 01 2021": "Apr 01 2021"})  # Apr comes first alphabetically
    with pytest.raises(ValueError, match=r"from_frame: time 'Apr 01 2021' is not a number or an ISO 8601 date; "
                                         r"pass time_format=\"%b %d %Y\""):
        mlalpha.Panel.from_frame(df, ["f0"], ["ret"])
    p = mlalpha.Panel.from_frame(df, ["f0"], ["ret"], time_format="%b %d %Y")
    assert p.times == ["Jan 04 2021", "Jan 05 2021", "Apr 01 2021"] and p._core.times_are_dates


def test_numbers_yyyymmdd_datetimes_and_mixtures():
    base = frame(N=2, T=3).reset_index().drop(columns="datetime")
    num = base.assign(time=np.repeat([10.0, 1.5, 2.0], 2))  # numbers: 10 after 2 (text would put "10.0" first)
    p = mlalpha.Panel.from_frame(num, ["f0"], ["ret"])
    assert p.times == ["1.5", "2.0", "10.0"] and not p._core.times_are_dates
    ymd = base.assign(time=np.repeat([20210105, 20201231, 20210104], 2))  # integers that are dates
    p = mlalpha.Panel.from_frame(ymd, ["f0"], ["ret"])
    assert p.times == ["20201231", "20210104", "20210105"] and p._core.times_are_dates
    ts = base.assign(time=np.repeat(pd.to_datetime(["2021-01-05 15:00", "2021-01-05 09:30", "2021-01-06 09:30"])
                                    .tz_localize("US/Eastern"), 2))
    p = mlalpha.Panel.from_frame(ts, ["f0"], ["ret"])
    assert p.times == ["2021-01-05T09:30:00-05:00", "2021-01-05T15:00:00-05:00", "2021-01-06T09:30:00-05:00"]
    with pytest.raises(ValueError, match=r"time '2021-01-05' is an ISO 8601 date, but 2 other times are not \(e\.g\. 'x'\)"):
        mlalpha.Panel.from_frame(base.assign(time=np.repeat(["2021-01-05", "x", "y"], 2)), ["f0"], ["ret"])
    # A two-digit year that wraps (1960 read as 2060) is refused, not sorted to the end.
    wrap = base.assign(time=np.repeat(["31/12/99", "01/01/60", "02/01/60"], 2))
    with pytest.raises(ValueError, match=r"time '01/01/60' read with time_format = \"%d/%m/%y\" is 2060-01-01, after "
                                         r"this year.*use %Y"):
        mlalpha.Panel.from_frame(wrap, ["f0"], ["ret"], time_format="%d/%m/%y")


# --- metrics on frames --------------------------------------------------------------------------------------

def test_metrics_of_frames_are_per_date():
    df = frame(N=12, T=60, seed=3)
    pred = (df["f0"] + 0.8 * np.random.default_rng(1).standard_normal(len(df))).rename("pred_ret").to_frame()
    # What a researcher computes by hand: the mean over dates of each date's cross-sectional Pearson IC.
    by_hand = pred["pred_ret"].groupby(level="datetime").corr(df["ret"]).mean()
    m = mlalpha.metrics(pred, df[["ret"]])
    assert m["ic"] == pytest.approx(by_hand, abs=1e-5) and m["steps"] == 60
    pooled = np.corrcoef(pred["pred_ret"], df["ret"])[0, 1]  # what treating the frame as one date would give
    assert abs(m["ic"] - pooled) > 1e-3
    # Rows in any order, Series in, a row missing in pred: the same pairs by (date, instrument).
    shuffled = pred.sample(frac=1.0, random_state=0)
    assert mlalpha.metrics(shuffled["pred_ret"], df["ret"])["ic"] == pytest.approx(m["ic"], abs=1e-12)
    assert mlalpha.metrics(pred.iloc[1:], df[["ret"]])["points"] == len(df) - 1
    # t0 / t1 as dates: the first date at or after each.
    dates = df.index.get_level_values("datetime").unique()
    part = mlalpha.metrics(pred, df[["ret"]], t0=str(dates[20].date()), t1=dates[40])
    by_hand = pred["pred_ret"].groupby(level="datetime").corr(df["ret"]).iloc[20:40].mean()
    assert part["steps"] == 20 and part["ic"] == pytest.approx(by_hand, abs=1e-5)
    with pytest.raises(ValueError, match="they pair up by position"):
        mlalpha.metrics(pred, df[["ret", "f0"]])


# --- walk-forward out-of-sample predictions ------------------------------------------------------------------

def test_oos_pred_is_a_frame_aligned_to_the_input_kept_with_a_temporary_folder():
    df = frame(N=4, T=220, seed=5).sample(frac=1.0, random_state=3)  # rows in any order
    panel = mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"])
    cfg = mlalpha.Config(SMALL).replace(split={"walk_forward_folds": 2}, train={"steps": 20})
    run = mlalpha.fit(panel, cfg)
    assert run.dir is None  # the temporary folder is gone; the predictions stayed
    oos = run.oos_pred
    assert list(oos.columns) == ["fold", "observed", "pred_ret"]
    in_range = df.index.get_level_values("datetime") >= pd.Timestamp(panel.times[run.folds[0].split["test"][0]])
    assert oos.index.equals(df.index[in_range])  # the input's rows in the pooled range, in the input's order
    assert set(oos["fold"]) == {0, 1} and (oos["observed"] == 1).all()
    # Each row is its fold model's prediction of its test block, to the bit.
    for f in run.folds:
        mine = oos[oos["fold"] == f.fold]
        t0, t1 = f.split["test"]
        theirs = f.best.predict(panel, t0=t0, t1=t1).loc[mine.index, "pred_ret"]
        np.testing.assert_array_equal(mine["pred_ret"].to_numpy(), theirs.to_numpy())
    joined = df.join(run.oos_pred)
    assert joined["pred_ret"].notna().sum() == in_range.sum()
    # A panel from arrays: rows by (time, instrument), as the CSV.
    x, y = make_arrays()
    plain = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg)
    assert list(plain.oos_pred.index.names) == ["time", "instrument"] and len(plain.oos_pred) == 4 * sum(
        f.split["test"][1] - f.split["test"][0] for f in plain.folds)


# --- refusals, warnings and errors in Python's words --------------------------------------------------------

def test_degenerate_runs_are_refused_and_warnings_are_python_warnings():
    x, y = make_arrays(N=1, T=200)
    one = mlalpha.Panel.from_numpy(x, y)
    ic_loss = mlalpha.Config(SMALL).replace(train={"loss": "ic", "batch": "time"}, run={"metric": "mse"})
    with pytest.raises(ValueError, match=r"train.loss = 'ic' needs >= 3 instruments with finite targets on a date.*"
                                         r"the panel has N = 1 \(a single series\)"):
        mlalpha.fit(one, ic_loss)
    with pytest.raises(ValueError, match=r"data.feature_norm = 'zscore' processes each feature across the instruments"):
        mlalpha.fit(one, mlalpha.Config(SMALL).replace(data={"feature_norm": "zscore"}))
    x2, y2 = make_arrays(N=2, T=200)
    with pytest.warns(UserWarning, match=r"data.feature_norm = 'rank' across N = 2 instruments"):
        mlalpha.fit(mlalpha.Panel.from_numpy(x2, y2),
                    mlalpha.Config(SMALL).replace(data={"feature_norm": "rank"}, run={"metric": "mse"}))
    # Every instrument with the same features: the model ranks nothing, the IC is NaN at every validation.
    x4, y4 = make_arrays(N=4, T=200)
    x4[1:] = x4[0]
    with pytest.raises(ValueError, match=r"run.metric = 'ic' was NaN at every validation of the model"):
        mlalpha.fit(mlalpha.Panel.from_numpy(x4, y4), mlalpha.Config(SMALL))


# device='gpu' where there is none: no GPU on this machine, or (a CPU-only engine) no GPU support in the build.
NO_GPU = (r"device='gpu' but (no CUDA device was found \(use device='auto' or device='cpu'\)|"
          r"this build of ml-alpha has no GPU support \(it was built without the CUDA toolkit\))")


@pytest.mark.skipif(os.environ.get("MLALPHA_TEST_DEVICE") == "gpu", reason="a GPU is present: device='gpu' is valid")
def test_errors_name_the_python_arguments(tmp_path):
    x, y = make_arrays()
    panel = mlalpha.Panel.from_numpy(x, y)
    with pytest.raises(ValueError, match=NO_GPU):
        mlalpha.fit(panel, mlalpha.Config(SMALL), device="gpu")
    model = mlalpha.fit(panel, mlalpha.Config(SMALL).replace(train={"steps": 10})).last
    # predict and stream take device= too: the same sentence, in the argument's words.
    with pytest.raises(ValueError, match="^" + NO_GPU):
        model.predict(panel, device="gpu")
    with pytest.raises(ValueError, match="^" + NO_GPU):
        model.stream(["a", "b"], device="gpu")
    with pytest.raises(ValueError, match=r"^resume=" + str(tmp_path / "none") + ": no such checkpoint or run folder"):
        mlalpha.fit(panel, mlalpha.Config(SMALL), resume=tmp_path / "none")


def test_bad_predict_and_device_arguments_are_sentences():
    # Each names the Python argument and what it takes (not the engine's setting, nor the binding's signatures).
    x, y = make_arrays()
    panel = mlalpha.Panel.from_numpy(x, y)
    with pytest.raises(ValueError, match=r"^fit: device must be 'auto', 'cpu' or 'gpu', got 'tpu'$"):
        mlalpha.fit(panel, mlalpha.Config(SMALL), device="tpu")
    model = mlalpha.fit(panel, mlalpha.Config(SMALL).replace(train={"steps": 10})).last
    with pytest.raises(ValueError, match=r"^Model.predict: device must be 'auto', 'cpu' or 'gpu', got 'tpu'$"):
        model.predict(panel, device="tpu")
    with pytest.raises(ValueError, match=r"^Model.stream: device must be 'auto', 'cpu' or 'gpu', got 0$"):
        model.stream(["a"], device=0)
    with pytest.raises(TypeError, match=r"^Model.predict: t0 must be a time step index \(an int\), got '2021-01-01' "
                                        r"\(str\); for a date, give its index in the panel's times"):
        model.predict(panel, t0="2021-01-01")
    with pytest.raises(TypeError, match=r"^Model.predict: t1 must be a time step index \(an int, or None for the end\), "
                                        r"got 1.5 \(float\)"):
        model.predict(panel, t1=1.5)
    with pytest.raises(ValueError, match=r"^Model.predict: t0 = 1099511627776 is far outside any panel's time steps$"):
        model.predict(panel, t0=2**40)
    pred = model.predict(panel, t0=np.int64(200), t1=None)  # numpy integers are indices too
    assert np.isnan(pred[:, :200]).all() and np.isfinite(pred[:, 200:]).all()


# --- loggers ------------------------------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.params, self.metrics, self.finished = {}, [], False

    def log_params(self, params):
        self.params.update(params)

    def log_metrics(self, metrics, step):
        self.metrics.append((step, dict(metrics)))

    def finish(self):
        self.finished = True

    def log_artifacts(self, run_dir, files):
        # Read while fit runs: a temporary run folder is removed once fit returns.
        self.files = {f: open(os.path.join(run_dir, f), "rb").read() for f in files}


def test_a_logger_sees_every_fold_at_growing_steps(tmp_path):
    x, y = make_arrays()
    rec = Recorder()
    cfg = mlalpha.Config(SMALL).replace(split={"walk_forward_folds": 2}, train={"steps": 20})
    run = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg, logger=rec)
    assert rec.finished and rec.params["train.steps"] == 20
    train_steps = [s for s, m in rec.metrics if "train/loss" in m]
    assert train_steps == list(range(1, 41))  # fold 1's steps 1..20 logged as 21..40
    valid = [(s, m) for s, m in rec.metrics if "valid/ic" in m]
    assert [s for s, _ in valid] == [10, 20, 30, 40] and "valid/mse" in valid[0][1]
    # At the end: each fold's test metrics at its last step, the pooled out-of-sample metrics, the run's files.
    test = [(s, m) for s, m in rec.metrics if "test/ic" in m]
    assert [s for s, _ in test] == [20, 40]
    for (_, m), fold in zip(test, run.folds):
        assert m["test/ic"] == fold.test["ic"] and m["test/mse"] == fold.test["mse"]
    oos = [(s, m) for s, m in rec.metrics if "oos/ic" in m]
    assert len(oos) == 1 and oos[0][0] == 40 and oos[0][1]["oos/ic"] == run.oos["ic"]
    assert {"folds.csv", "folds.json", "oos_pred.csv", "long_short.svg", "run.json", "fold-0/curves.svg",
            "fold-0/metrics.jsonl", "fold-1/best.json"} <= set(rec.files)
    assert not [f for f in rec.files if f.endswith((".safetensors", ".npy", ".lock"))]
    assert rec.files["folds.csv"].startswith(b"fold,") and rec.files["fold-1/curves.svg"].startswith(b"<svg")
    # TensorBoard: any writer with add_scalar; the files are copied beside its event files.
    scalars = []

    class Writer:
        log_dir = str(tmp_path / "tb")

        def add_scalar(self, tag, value, step):
            scalars.append((tag, step, value))

    run = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg, out_dir=tmp_path / "run",
                      logger=mlalpha.loggers.TensorBoardLogger(writer=Writer()))
    assert ("train/loss", 40) in [(t, s) for t, s, _ in scalars] and ("valid/ic", 30) in [(t, s) for t, s, _ in scalars]
    assert ("test/ic", 40, run.folds[1].test["ic"]) in scalars and ("oos/mse", 40, run.oos["mse"]) in scalars
    for f in ("fold-0/metrics.jsonl", "folds.json", "long_short.svg"):
        assert (tmp_path / "tb" / "run_files" / f).read_bytes() == (tmp_path / "run" / f).read_bytes()
    assert not (tmp_path / "tb" / "run_files" / "fold-0" / "best.safetensors").exists()
    with pytest.raises(TypeError, match="log_metrics"):
        mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg, logger=object())


def test_a_logger_gets_a_populations_end():
    x, y = make_arrays()
    rec = Recorder()
    run = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL).replace(train={"models": 2, "steps": 20}),
                      logger=rec)
    logged = {}
    for step, m in rec.metrics:
        logged.update({k: (step, v) for k, v in m.items()})
    for member in run.members:
        assert logged[f"{member['name']}/test/ic"] == (20, member["test"]["ic"])
    assert logged["ensemble/mse"] == (20, run.ensemble["mse"])
    assert {"leaderboard.csv", "leaderboard.json", "ensemble/pred.csv", "member-01/curves.svg"} <= set(rec.files)


def test_mlflow_logger(tmp_path):
    mlflow = pytest.importorskip("mlflow", reason="mlflow is not installed (pyqlib brings it)")
    x, y = make_arrays()
    logger = mlalpha.loggers.MLflowLogger(experiment="mlalpha-test", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    fit = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), logger=logger)
    run = mlflow.get_run(logger.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["train.steps"] == "30" and "valid.ic" in run.data.metrics
    history = mlflow.MlflowClient().get_metric_history(logger.run_id, "train.loss")
    assert sorted(m.step for m in history) == list(range(1, 31))
    # The test metrics, and the run's files as artifacts (its checkpoints left out).
    assert run.data.metrics["test.ic"] == pytest.approx(fit.folds[0].test["ic"], rel=1e-12)
    assert run.data.metrics["test.mse"] == pytest.approx(fit.folds[0].test["mse"], rel=1e-12)
    names = [a.path for a in mlflow.MlflowClient().list_artifacts(logger.run_id)]
    assert {"curves.svg", "long_short.svg", "metrics.jsonl", "best.json", "run.json"} <= set(names)
    assert not [n for n in names if n.endswith(".safetensors")]
    svg = mlflow.artifacts.download_artifacts(run_id=logger.run_id, artifact_path="curves.svg", dst_path=str(tmp_path / "dl"))
    assert open(svg).read().startswith("<svg")


# --- the target scale ---------------------------------------------------------------------------------------

def test_target_scale_predicts_in_the_targets_units():
    df = frame(N=6, T=200, seed=7, scale=0.01)  # daily-return-sized targets
    panel = mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"])
    run = mlalpha.fit(panel, mlalpha.Config(SMALL).replace(data={"target_scale": "std"}, train={"steps": 60}))
    pred = run.best.predict(panel)["pred_ret"]
    assert 0.3 < pred.std() / df["ret"].std() < 3  # in the targets' units, not the unit-scaled ones
    assert mlalpha.metrics(pred.to_frame(), df[["ret"]])["mse"] < mlalpha.metrics(0 * pred.to_frame(), df[["ret"]])["mse"]


# --- data paths ---------------------------------------------------------------------------------------------

def test_a_checkpoints_data_resolve_from_any_folder(tmp_path):
    exe = os.environ.get("MLALPHA_BIN", "")
    if not exe or not os.access(exe, os.X_OK):
        pytest.skip("MLALPHA_BIN does not name the ml-alpha command (scripts/test.sh sets it to build/ml-alpha)")
    import subprocess

    x, y = make_arrays()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    np.save(tmp_path / "a" / "x.npy", x)
    np.save(tmp_path / "a" / "y.npy", y)
    # Trained with paths relative to the folder it ran in ...
    train = subprocess.run([exe, "train", "--device", "cpu", "--steps", "10", "--set", "data.source=npy", "--set",
                            "data.features=x.npy", "--set", "data.targets=y.npy", "-o", "run"], cwd=tmp_path / "a",
                           capture_output=True, text=True)
    assert train.returncode == 0, train.stderr
    # ... evaluated from another folder, with the data the checkpoint recorded: found.
    ev = subprocess.run([exe, "eval", "--device", "cpu", "--checkpoint", "../a/run/best.safetensors", "--split", "test"],
                        cwd=tmp_path / "b", capture_output=True, text=True)
    assert ev.returncode == 0, ev.stdout + ev.stderr
    assert "data: as recorded in" in ev.stdout
    assert mlalpha.load(tmp_path / "a" / "run" / "best.safetensors").step > 0
