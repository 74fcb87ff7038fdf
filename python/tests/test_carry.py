"""train.state = "carry" from Python (docs/config.md, "Stateful training"): the setting goes through the Config like
any other key, the checkpoint records it, and Model.predict defaults to mode carry for such a model (window for a
zero-state one)."""

import os

import numpy as np
import pytest

import mlalpha

SMALL = {
    "model": {"d_model": 16, "layers": 1, "head_dim": 8, "d_state": 8, "chunk": 16},
    "train": {"batch": 4, "seq_len": 16, "steps": 12, "warmup": 2, "log_every": 4, "seed": 3},
    # MLALPHA_TEST_DEVICE=gpu trains on the GPU (scripts/test_python.sh on a GPU machine).
    "run": {"eval_every": 6, "device": os.environ.get("MLALPHA_TEST_DEVICE", "cpu")},
}


def arrays(N=4, T=200, F=3, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, T, F)).astype(np.float32)
    y = (0.5 * x[..., :1] + 0.1 * rng.standard_normal((N, T, 1))).astype(np.float32)
    return x, y


def fit(state):
    x, y = arrays()
    cfg = {**SMALL, "train": {**SMALL["train"], "state": state}}
    return mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(cfg)), mlalpha.Panel.from_numpy(x, y)


def test_carry_trained_model_predicts_in_carry_by_default():
    run, panel = fit("carry")
    model = run.best
    assert model.config["train"]["state"] == "carry"
    default = model.predict(panel)
    np.testing.assert_array_equal(default, model.predict(panel, mode="carry"))
    assert not np.array_equal(default, model.predict(panel, mode="window"), equal_nan=True)


def test_zero_state_model_predicts_in_window_by_default():
    run, panel = fit("zero")
    model = run.best
    assert model.config["train"]["state"] == "zero"
    np.testing.assert_array_equal(model.predict(panel), model.predict(panel, mode="window"))


def test_bad_state_names_the_key_and_values():
    with pytest.raises(Exception) as e:
        mlalpha.Config({"train": {"state": "warm"}})
    assert "state" in str(e.value) and "'zero', 'carry'" in str(e.value)
