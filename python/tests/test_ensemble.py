"""mlalpha.Ensemble on a small CPU population: the mean of the members' Model.predict, bit for bit the run's
own ensemble/pred.npy for all members, a selection by rank or by name, and the refusals."""
import os

import numpy as np
import pytest

import mlalpha

from test_basic import SMALL, make_arrays


def mean_of(models, data, t0, t1):
    """The members' Model.predict summed in float64 in the given order, rounded once to float32."""
    total = sum(m.predict(data, t0, t1, device="cpu").astype(np.float64) for m in models)
    return (total / len(models)).astype(np.float32)


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    x, y = make_arrays()
    panel = mlalpha.Panel.from_numpy(x, y)
    config = mlalpha.Config({**SMALL, "train": {**SMALL["train"], "models": 2}, "sweep": {"lr": [1e-3, 3e-3]}})
    run = mlalpha.fit(panel, config, out_dir=tmp_path_factory.mktemp("ens") / "pop")
    return run, panel


def test_predict_precision(population):
    run, panel = population
    ens = mlalpha.Ensemble.load(run.dir)
    fp32 = ens.predict(panel, device="cpu")
    assert np.array_equal(ens.predict(panel, device="cpu", precision="bf16"), fp32, equal_nan=True)  # the CPU: fp32
    assert np.array_equal(ens.predict(panel, device="cpu", tf32=True), fp32, equal_nan=True)
    with pytest.raises(ValueError, match=r"Ensemble\.predict: precision must be 'fp32', 'tf32' or 'bf16', got 'fp8'"):
        ens.predict(panel, device="cpu", precision="fp8")
    with pytest.raises(ValueError, match="contradicts precision='bf16'"):
        ens.predict(panel, device="cpu", precision="bf16", tf32=True)


def test_all_members_are_the_runs_ensemble(population):
    run, panel = population
    ens = mlalpha.Ensemble.load(run.dir)
    assert len(ens) == 4 and ens.names == ["member-00", "member-01", "member-02", "member-03"]
    assert ens.checkpoints[0] == os.path.join(run.dir, "member-00", "best.safetensors")
    assert sorted(ens.ranks) == [1, 2, 3, 4] and ens.fold == 0
    assert ens.F == 3 and ens.K == 1
    pred = ens.predict(panel, 0, None, device="cpu")
    assert pred.shape == (panel.N, panel.T, panel.K)
    own = np.load(os.path.join(run.dir, "ensemble", "pred.npy"))
    t0 = int(np.argmax(~np.isnan(own[0, :, 0])))  # the run's ensemble covers its test range
    # on the device the run trained and predicted on (MLALPHA_TEST_DEVICE): the CPU's and the GPU's fp32
    # predictions differ in the last bits, the same device's are bitwise equal
    test = ens.predict(panel, t0, None, device=SMALL["run"]["device"])
    assert t0 > 0 and np.array_equal(test, own, equal_nan=True)
    test = ens.predict(panel, t0, None, device="cpu")
    assert np.array_equal(pred, mean_of(ens.models, panel, 0, None), equal_nan=True)
    # Features as an array, as Model.predict takes them.
    assert np.array_equal(ens.predict(panel.x[0], t0, None, device="cpu"), test[0], equal_nan=True)


def test_top_k_and_named_members(population):
    run, panel = population
    top = mlalpha.Ensemble.load(run.dir, members="top:2")
    assert sorted(top.ranks) == [1, 2] and top.names == sorted(top.names)
    by_hand = [mlalpha.load(p) for p in top.checkpoints]
    assert np.array_equal(top.predict(panel, 100, 200, device="cpu"), mean_of(by_hand, panel, 100, 200), equal_nan=True)
    two = mlalpha.Ensemble.load(run.dir, members=["member-03", "member-01"])
    assert two.names == ["member-01", "member-03"]
    members = [mlalpha.load(os.path.join(run.dir, m, "best.safetensors")) for m in ("member-01", "member-03")]
    assert np.array_equal(two.predict(panel, device="cpu"), mean_of(members, panel, 0, None), equal_nan=True)
    one = mlalpha.Ensemble.load(run.dir, members="member-02")
    assert np.array_equal(one.predict(panel, device="cpu"), one.models[0].predict(panel, device="cpu"), equal_nan=True)


def test_refusals_say_what_is_wrong(population, tmp_path):
    run, _ = population
    with pytest.raises(ValueError, match="top:5 but .* ranks 4 members"):
        mlalpha.Ensemble.load(run.dir, members="top:5")
    with pytest.raises(ValueError, match="no member 'member-9'; its members: member-00, member-01"):
        mlalpha.Ensemble.load(run.dir, members=["member-9"])
    with pytest.raises(ValueError, match="holds no population run"):
        mlalpha.Ensemble.load(tmp_path)
    with pytest.raises(ValueError, match="members: 'all', 'top:K' or a list"):
        mlalpha.Ensemble.load(run.dir, members=3)
