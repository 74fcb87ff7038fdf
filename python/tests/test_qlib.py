"""mlalpha.contrib.qlib.MambaAlpha against the real pyqlib: the Qlib snippet of docs/python.md is run, then
its predictions are checked (index, IC). Skipped, with the reason, only where pyqlib cannot be imported and
scripts/test_python.sh did not require it."""
import pathlib
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

from extras import import_or_skip

pd = pytest.importorskip("pandas")
# the modules the adapter and the snippet use: a missing or broken pyqlib skips, unless the test script required it
import_or_skip("qlib.data.dataset, qlib.data.dataset.handler, qlib.data.dataset.loader, qlib.model.base", "QLIB",
               "pip install pyqlib==0.9.7")

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def _qlib_snippet() -> str:
    text = DOC.read_text()
    section = text[text.index("\n## Qlib"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def fitted():
    ns: dict = {}
    exec(compile(_qlib_snippet(), f"{DOC}:Qlib", "exec"), ns)
    return ns


def test_predict_is_aligned_to_the_segment(fitted):
    from qlib.data.dataset.handler import DataHandlerLP

    score, dataset = fitted["score"], fitted["dataset"]
    seg = dataset.prepare("test", col_set="feature", data_key=DataHandlerLP.DK_I)
    assert isinstance(score, pd.Series) and score.name == "score"
    assert score.index.equals(seg.index)
    assert list(score.index.names) == ["datetime", "instrument"]
    assert len(score) == 60 * 8 and np.isfinite(score.to_numpy()).all()


def test_predictions_track_the_label(fitted):
    from qlib.data.dataset.handler import DataHandlerLP

    score, dataset = fitted["score"], fitted["dataset"]
    label = dataset.prepare("test", col_set="label", data_key=DataHandlerLP.DK_L)["LABEL0"].reindex(score.index)
    ic = score.groupby(level="datetime").corr(label).mean()   # mean daily cross-sectional IC
    print(f"daily IC on the test segment: {ic:.3f}")
    assert ic > 0.5, ic
    # The engine validated on Qlib's valid segment (60 dates x 8 instruments) and trained before it.
    run = fitted["model"].run
    assert run.folds[0].split["valid"][1] - run.folds[0].split["valid"][0] == 60
    assert run.folds[0].split["train"] == (0, 180) or list(run.folds[0].split["train"]) == [0, 180]
    assert run.folds[0].test is None or not run.folds[0].test


def test_pickle_round_trip_keeps_the_predictions(fitted):
    model, dataset = fitted["model"], fitted["dataset"]
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(dataset, "test").to_numpy(), fitted["score"].to_numpy())


def test_a_date_scores_the_same_in_any_segment_one_day_included(fitted):
    # Each date is scored from the window of its last seq_len rows (docs/data.md), read from the dataset before
    # the segment: the test segment, a one-day segment (Qlib's online and rolling updates) and the whole
    # history give every date the same score, row for row.
    from qlib.data.dataset.handler import DataHandlerLP

    model, dataset, score = fitted["model"], fitted["dataset"], fitted["score"]
    full = dataset.prepare(slice(None, None), col_set="feature", data_key=DataHandlerLP.DK_I).copy()
    full.columns = [str(c) for c in full.columns]
    whole = model.model.predict(full).iloc[:, 0]
    whole = pd.Series(whole.to_numpy(), index=full.index).reindex(score.index)
    np.testing.assert_array_equal(score.to_numpy(), whole.to_numpy())
    dates = score.index.get_level_values("datetime").unique().sort_values()
    for d in (dates[0], dates[17], dates[-1]):
        one = model.predict(dataset, slice(d, d))
        assert len(one) == 8 and np.isfinite(one.to_numpy()).all()
        np.testing.assert_array_equal(one.to_numpy(), score.xs(d, level="datetime", drop_level=False).to_numpy())


def test_settings_map_to_the_engine_keys():
    from mlalpha.contrib.qlib import MambaAlpha

    m = MambaAlpha(d_model=8, steps=50, seed=4, gap=1, eval_every=0, device="cpu", config={"model.layers": 1})
    assert m.settings == {"model.d_model": 8, "train.steps": 50, "train.seed": 4, "split.gap": 1,
                          "run.eval_every": 0, "model.layers": 1, "run.device": "cpu"}
    assert m.engine_config["model.d_model"] == 8 and m.engine_config["train.seed"] == 4
    with pytest.raises(ValueError, match="did you mean 'lr'"):
        MambaAlpha(lrr=1e-3)
    with pytest.raises(ValueError, match="the dataset's train and valid segments"):
        MambaAlpha(train_end=0.5)
    with pytest.raises(ValueError, match="data come from the Qlib dataset"):
        MambaAlpha(config={"data.source": "csv"})


def test_import_mlalpha_does_not_need_qlib():
    # A fresh interpreter where importing qlib fails: mlalpha imports, mlalpha.contrib.qlib says why not.
    code = ("import sys; sys.modules['qlib'] = None\n"
            "import mlalpha, mlalpha.contrib\n"
            "try:\n    import mlalpha.contrib.qlib\nexcept ImportError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "ERR mlalpha.contrib.qlib needs pyqlib (pip install pyqlib)" in out, out
