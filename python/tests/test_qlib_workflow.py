"""MambaAlpha in Qlib's own workflow, against the real pyqlib, offline: `qrun` on the workflow YAML of
docs/python.md (DatasetH and TSDatasetH) over a Qlib data folder written here (qlib_market.py), then what it
recorded read back (the model in params.pkl, SignalRecord's pred.pkl, SigAnaRecord's IC, PortAnaRecord's
backtest); R.save_objects and the records in process; finetune (ModelFT); processing as model settings; the
reweighter refusal; get_params / set_params and scikit-learn's clone; the calendar PortAnaRecord needs past the
predictions. scripts/test_python.sh installs pyqlib and fails without it
(MLALPHA_SKIP_QLIB=1 opts out); here a missing pyqlib skips, saying so."""
import os
import pathlib
import pickle
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from extras import import_or_skip

pd = pytest.importorskip("pandas")
import_or_skip("qlib, qlib.workflow.record_temp, qlib.contrib.strategy", "QLIB", "pip install pyqlib==0.9.7")
from qlib.data.dataset import DatasetH, TSDatasetH  # noqa: E402
from qlib.data.dataset.handler import DataHandlerLP  # noqa: E402
from qlib.data.dataset.loader import StaticDataLoader  # noqa: E402

from qlib_market import write_market

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
DEVICE = os.environ.get("MLALPHA_TEST_DEVICE", "cpu")


def workflow_yaml() -> str:
    text = DOC.read_text()
    section = text[text.index("### A Qlib workflow: `qrun`"):]
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    return write_market(tmp_path_factory.mktemp("market"))


def init_qlib(market, folder: pathlib.Path):
    """Qlib on the market's provider, its experiments in folder/mlruns.db (MLflow's SQLite store, as the workflow
    of docs/python.md uses: MLflow 3.x keeps its file store behind MLFLOW_ALLOW_FILE_STORE)."""
    import qlib
    from qlib.constant import REG_CN

    qlib.init(provider_uri=market["provider_uri"], region=REG_CN,
              exp_manager={"class": "MLflowExpManager", "module_path": "qlib.workflow.expm",
                           "kwargs": {"uri": f"sqlite:///{folder / 'mlruns.db'}", "default_exp_name": "tests"}})


def qrun(yaml_text: str, market, cwd: pathlib.Path):
    """Runs Qlib's `qrun` command (its console script beside this interpreter, else `python -m qlib.cli.run`)."""
    (cwd / "workflow.yaml").write_text(yaml_text)
    exe = shutil.which("qrun", path=os.path.dirname(sys.executable))
    cmd = [exe, "workflow.yaml"] if exe else [sys.executable, "-m", "qlib.cli.run", "workflow.yaml"]
    env = dict(os.environ, QLIB_DATA=market["provider_uri"], FRAME=market["frame"])
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-8000:]
    return out


def recorded(market, cwd: pathlib.Path, experiment: str):
    from qlib.workflow import R

    init_qlib(market, cwd)
    recorders = R.get_exp(experiment_name=experiment, create=False).list_recorders()
    assert len(recorders) == 1, recorders
    return next(iter(recorders.values()))


@pytest.mark.parametrize("dataset_class", ["DatasetH", "TSDatasetH"])
def test_qrun_workflow_trains_saves_scores_and_backtests(market, tmp_path, dataset_class):
    text = workflow_yaml().replace("device: auto", f"device: {DEVICE}")
    if dataset_class == "TSDatasetH":
        text = text.replace("    class: DatasetH\n", "    class: TSDatasetH\n").replace(
            "      handler:\n", "      step_len: 20\n      handler:\n", 1)
        assert "TSDatasetH" in text and "step_len: 20" in text
    qrun(text, market, tmp_path)
    rec = recorded(market, tmp_path, "mamba_alpha")
    # The model, pickled by R.save_objects (Serializable.to_pickle calls its config method), predicts again.
    model = rec.load_object("params.pkl")
    assert type(model).__name__ == "MambaAlpha" and model.model is not None
    if dataset_class == "TSDatasetH":
        assert model.engine_config["train.seq_len"] == 32  # given: the dataset's step_len only fills a gap
    pred = rec.load_object("pred.pkl")
    assert list(pred.columns) == ["score"] and list(pred.index.names) == ["datetime", "instrument"]
    test_dates = market["dates"][240:]
    assert len(pred) == len(test_dates) * 8 and np.isfinite(pred["score"].to_numpy()).all()
    assert pred.index.get_level_values("datetime").min() == test_dates[0]
    # SigAnaRecord: the daily IC of the scores against the label (f0 carries the label: it is learnt).
    ic = rec.load_object("sig_analysis/ic.pkl")
    print(f"{dataset_class}: mean daily IC {ic.mean():.3f} over {len(ic)} dates")
    assert len(ic) == len(test_dates) and ic.mean() > 0.5
    # PortAnaRecord: the top-3 strategy traded every test date on the provider's prices.
    report = rec.load_object("portfolio_analysis/report_normal_1day.pkl")
    assert {"return", "bench", "cost", "turnover"} <= set(report.columns)
    # (through the day after the last prediction: PortAnaRecord's default end_time, the trade of the last signal)
    assert len(report) == len(test_dates) + 1 and (report["turnover"] > 0).any()
    analysis = rec.load_object("portfolio_analysis/port_analysis_1day.pkl")
    excess = analysis.loc[("excess_return_without_cost", "annualized_return"), "risk"]
    print(f"{dataset_class}: annualised excess return without cost {excess:.2f}")
    assert excess > 0  # the signal is real: buying the top predictions beats the market's mean


def make_dataset(market, cls=DatasetH, **kwargs):
    frame = pd.read_pickle(market["frame"])
    handler = DataHandlerLP(data_loader=StaticDataLoader(config=frame))
    return cls(handler=handler, segments=market["segments"], **kwargs)


SMALL = dict(d_model=16, layers=1, steps=120, lr=3e-3, seq_len=32, batch=8, eval_every=40, target_scale="std",
             device=DEVICE)


def test_save_objects_and_records_in_process(market, tmp_path):
    from qlib.workflow import R
    from qlib.workflow.record_temp import PortAnaRecord, SigAnaRecord, SignalRecord
    from mlalpha.contrib.qlib import MambaAlpha

    init_qlib(market, tmp_path)
    dataset = make_dataset(market)
    model = MambaAlpha(**SMALL)
    with R.start(experiment_name="in_process"):
        model.fit(dataset)
        R.save_objects(**{"model.pkl": model})
        rec = R.get_recorder()
        SignalRecord(model=model, dataset=dataset, recorder=rec).generate()
        SigAnaRecord(recorder=rec, ana_long_short=True, ann_scaler=252).generate()
        PortAnaRecord(recorder=rec, config={
            "strategy": {"class": "TopkDropoutStrategy", "module_path": "qlib.contrib.strategy",
                         "kwargs": {"signal": "<PRED>", "topk": 3, "n_drop": 1}},
            "backtest": {"start_time": None, "end_time": None, "account": 1e8, "benchmark": "SH000300",
                         "exchange_kwargs": {"deal_price": "close", "open_cost": 0.0005, "close_cost": 0.0015,
                                             "min_cost": 5}}}).generate()
        back = rec.load_object("model.pkl")
        np.testing.assert_array_equal(back.predict(dataset).to_numpy(), model.predict(dataset).to_numpy())
        assert rec.load_object("sig_analysis/ic.pkl").mean() > 0.5
        assert "report_normal_1day.pkl" in str(rec.list_artifacts("portfolio_analysis"))
    # The engine's settings are engine_config; config stays Qlib's Serializable.config, which to_pickle calls.
    assert callable(model.config) and model.engine_config["train.steps"] == 120
    model.to_pickle(tmp_path / "m.pkl")
    assert pickle.loads((tmp_path / "m.pkl").read_bytes()).model.step == model.model.step


def test_tsdataseth_predictions_are_the_datasets(market):
    from mlalpha.contrib.qlib import MambaAlpha

    plain, ts = make_dataset(market), make_dataset(market, TSDatasetH, step_len=20)
    settings = {k: v for k, v in SMALL.items() if k != "seq_len"}
    a = MambaAlpha(**settings).fit(plain)
    b = MambaAlpha(**settings).fit(ts)
    assert a.engine_config["train.seq_len"] == 64 and b.run.config["train.seq_len"] == 20  # the dataset's step_len
    score = b.predict(ts, "test")
    seg = ts.prepare("test", col_set="feature", data_key=DataHandlerLP.DK_I)  # a TSDataSampler
    # The same rows as the sampler's (Qlib's sequence models index their scores by get_index(), instrument-major;
    # these come in the frame's order), every one scored.
    assert isinstance(score, pd.Series) and score.index.sort_values().equals(seg.get_index().sort_values())
    assert np.isfinite(score.reindex(seg.get_index()).to_numpy()).all()


def test_finetune_continues_from_the_fitted_weights(market):
    from qlib.model.base import ModelFT
    from mlalpha.contrib.qlib import MambaAlpha

    dataset = make_dataset(market)
    model = MambaAlpha(**SMALL).fit(dataset)
    assert isinstance(model, ModelFT)
    before = model.predict(dataset).to_numpy()
    # A step with a learning rate far below the weights' rounding: the fine-tuned model is the fitted one.
    model.set_params(lr=1e-30, warmup=0)
    model.finetune(dataset, steps=1)
    assert model.run.folds[0].steps == 1
    np.testing.assert_array_equal(model.predict(dataset).to_numpy(), before)
    # Rolling forward: later segments, a real learning rate; the run starts from the weights it had.
    later = DatasetH(handler=DataHandlerLP(data_loader=StaticDataLoader(config=pd.read_pickle(market["frame"]))),
                     segments={"train": (market["dates"][40], market["dates"][239]),
                               "valid": (market["dates"][240], market["dates"][279]),
                               "test": (market["dates"][280], market["dates"][-1])})
    model.set_params(lr=1e-3)
    model.finetune(later)
    first_loss = float(model.run.history["loss"].iloc[0])
    fresh = MambaAlpha(**{**SMALL, "lr": 1e-3}).fit(later)
    assert first_loss < float(fresh.run.history["loss"].iloc[0])  # it did not start from scratch
    with pytest.raises(ValueError, match="not fitted"):
        MambaAlpha(**SMALL).finetune(dataset)


def test_processing_settings_reweighter_and_params(market):
    from qlib.data.dataset.weight import Reweighter
    from mlalpha.contrib.qlib import MambaAlpha

    m = MambaAlpha(feature_norm="rank", target_norm="zscore", nan_fill="ffill", **{k: v for k, v in SMALL.items()
                                                                                    if k != "target_scale"})
    assert m.settings["data.feature_norm"] == "rank" and m.settings["data.target_norm"] == "zscore"
    m.fit(make_dataset(market))
    assert m.model.config["train"]["steps"] == 120
    with pytest.raises(ValueError, match=r"'data.csv' is not taken: the data come from the Qlib dataset \(ml-alpha's "
                                         r"processing is: feature_norm, .*CSZScoreNorm, CSRankNorm"):
        MambaAlpha(csv="x.csv")
    with pytest.raises(ValueError, match=r"MambaAlpha\(feature_norm='minmax'\): .*data.feature_norm: must be one of "
                                         r"'global', 'zscore', 'rank', 'robust', got 'minmax'"):
        MambaAlpha(feature_norm="minmax")

    class Halves(Reweighter):
        def __init__(self):  # Reweighter's own __init__ refuses to run: a subclass says how it weighs
            pass

        def reweight(self, data):
            return pd.Series(0.5, index=data.index)

    with pytest.raises(NotImplementedError, match=r"MambaAlpha does not take sample weights \(Halves given\)"):
        MambaAlpha(**SMALL).fit(make_dataset(market), reweighter=Halves())

    params = MambaAlpha(d_model=8, lr=1e-3, config={"train.seed": 3}, device="cpu").get_params()
    assert params == {"config": {"train.seed": 3}, "device": "cpu", "d_model": 8, "lr": 1e-3}
    est = MambaAlpha(**params)
    assert est.set_params(lr=2e-3, layers=3) is est
    assert est.engine_config["train.lr"] == pytest.approx(2e-3) and est.engine_config["model.layers"] == 3
    with pytest.raises(ValueError, match=r"MambaAlpha\(lr=-1\): train.lr must be a finite number > 0"):
        est.set_params(lr=-1)
    assert est.get_params()["lr"] == 2e-3  # a refused change leaves the settings as they were


def test_sklearn_clone():
    # scikit-learn's clone rebuilds an estimator from get_params() and checks that the new one returns the very
    # objects it was given (so the config dict is kept as given, never copied).
    from mlalpha.contrib.qlib import MambaAlpha

    base = pytest.importorskip("sklearn.base", reason="scikit-learn is not installed (mlflow, with pyqlib, brings it)")
    est = MambaAlpha(config={"train.seed": 3}, device="cpu", d_model=8, lr=1e-3)
    twin = base.clone(est)
    assert twin is not est and twin.get_params() == {"config": {"train.seed": 3}, "device": "cpu", "d_model": 8, "lr": 1e-3}
    assert twin.get_params()["config"] is not est.get_params()["config"]  # clone's deep copy, kept as given
    assert twin.engine_config["train.seed"] == 3 and twin.engine_config["model.d_model"] == 8
    assert twin.model is None
    plain = base.clone(MambaAlpha())
    assert plain.get_params() == {"config": None, "device": "auto"}
    assert base.clone(est.set_params(lr=2e-3)).engine_config["train.lr"] == pytest.approx(2e-3)


# A PortAnaRecord backtest with end_time None over a provider whose calendar ends `extra` dates after the last
# prediction; prints the report's length, or the error. Run in its own process: Qlib caches a provider's calendar.
_BACKTEST = r"""
import pathlib, sys
import pandas as pd
sys.path.insert(0, sys.argv[1])
from qlib_market import write_market
import qlib
from qlib.constant import REG_CN
from qlib.workflow import R
from qlib.workflow.record_temp import PortAnaRecord

root, extra = pathlib.Path(sys.argv[2]), int(sys.argv[3])
market = write_market(root)
calendar = pathlib.Path(market["provider_uri"]) / "calendars" / "day.txt"
dates = calendar.read_text().splitlines(True)
frame = pd.read_pickle(market["frame"])
calendar.write_text("".join(dates[:len(frame.index.unique(level=0)) + extra]))
qlib.init(provider_uri=market["provider_uri"], region=REG_CN,
          exp_manager={"class": "MLflowExpManager", "module_path": "qlib.workflow.expm",
                       "kwargs": {"uri": f"sqlite:///{root / 'mlruns.db'}", "default_exp_name": "calendar"}})
test = frame.loc[market["segments"]["test"][0]:]
score = test["label"].iloc[:, 0].rename("score").to_frame()  # a perfect signal: only the calendar matters here
with R.start(experiment_name="calendar"):
    rec = R.get_recorder()
    rec.save_objects(**{"pred.pkl": score, "label.pkl": score.rename(columns={"score": "label"})})
    try:
        PortAnaRecord(recorder=rec, config={
            "strategy": {"class": "TopkDropoutStrategy", "module_path": "qlib.contrib.strategy",
                         "kwargs": {"signal": "<PRED>", "topk": 3, "n_drop": 1}},
            "backtest": {"start_time": None, "end_time": None, "account": 1e8, "benchmark": "SH000300",
                         "exchange_kwargs": {"deal_price": "close"}}}).generate()
        print("rows", len(rec.load_object("portfolio_analysis/report_normal_1day.pkl")), "dates", len(test.index.unique(level=0)))
    except IndexError as e:
        print("IndexError:", e)
"""


@pytest.mark.parametrize("extra", [1, 2])
def test_portanarecord_needs_two_calendar_dates_after_the_predictions(tmp_path, extra):
    # What docs/python.md says under the qrun workflow: end_time None ends the backtest on the date after the last
    # prediction, and the backtest reads the date after its end, so the calendar needs two dates past the predictions.
    out = subprocess.run([sys.executable, "-c", _BACKTEST, str(pathlib.Path(__file__).parent), str(tmp_path), str(extra)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    last = out.stdout.strip().splitlines()[-1]
    if extra == 1:
        assert re.fullmatch(r"IndexError: index (\d+) is out of bounds for axis 0 with size \1", last), last
    else:
        assert re.fullmatch(r"rows (\d+) dates (\d+)", last) and int(last.split()[1]) == int(last.split()[3]) + 1, last
