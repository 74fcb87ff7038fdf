"""The mlalpha package against the engine: panels, configs, a CPU run, checkpoints shared with the
command line (MLALPHA_BIN), metrics."""
import json
import os
import re
import signal
import struct
import subprocess

import numpy as np
import pytest

import mlalpha

SMALL = {
    "model": {"d_model": 16, "layers": 1, "head_dim": 8, "d_state": 8, "chunk": 16},
    "train": {"batch": 4, "seq_len": 32, "steps": 30, "warmup": 5, "log_every": 5, "seed": 3},
    # MLALPHA_TEST_DEVICE=gpu runs the suite's training on the GPU (scripts/test_python.sh on a GPU machine).
    "run": {"eval_every": 10, "device": os.environ.get("MLALPHA_TEST_DEVICE", "cpu")},
}


def make_arrays(N=4, T=240, F=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, T, F)).astype(np.float32)
    y = (0.5 * x[..., :1] - 0.3 * x[..., 1:2] + 0.1 * rng.standard_normal((N, T, 1))).astype(np.float32)
    return x, y


@pytest.fixture(scope="module")
def arrays():
    return make_arrays()


@pytest.fixture(scope="module")
def run(arrays):
    x, y = arrays
    return mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL))


def cli():
    path = os.environ.get("MLALPHA_BIN", "")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("MLALPHA_BIN does not name the ml-alpha command (scripts/test.sh sets it to build/ml-alpha)")
    return path


def safetensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file (8-byte header length, JSON header, data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


# --- panels -------------------------------------------------------------------------------------------

def test_from_numpy_shapes():
    x, y = make_arrays(N=3, T=50, F=2)
    assert mlalpha.Panel.from_numpy(x, y).shape == (3, 50, 2, 1)
    assert mlalpha.Panel.from_numpy(x, y[..., 0]).shape == (3, 50, 2, 1)          # (N, T) targets
    assert mlalpha.Panel.from_numpy(x[0], y[0]).shape == (1, 50, 2, 1)            # one series (T, F), (T, K)
    assert mlalpha.Panel.from_numpy(x[0], y[0, :, 0]).shape == (1, 50, 2, 1)      # (T,) targets
    p = mlalpha.Panel.from_numpy(x.astype(np.float64), y, times=range(50), instruments=["a", "b", "c"],
                                 feature_names=["f0", "f1"], target_names=["ret"])
    assert p.times[:2] == ["0", "1"] and p.instruments == ["a", "b", "c"] and p.target_names == ["ret"]
    np.testing.assert_array_equal(p.x, x)  # float64 converted to float32 exactly (the values were float32)
    np.testing.assert_array_equal(p.y, y)


def test_from_numpy_keeps_nan():
    x, y = make_arrays(N=2, T=20, F=2)
    x[0, 3, 1] = np.nan
    y[1, 4, 0] = np.nan
    p = mlalpha.Panel.from_numpy(x, y)
    assert np.isnan(p.x[0, 3, 1]) and np.isnan(p.y[1, 4, 0])


def test_from_numpy_errors():
    x, y = make_arrays(N=2, T=20, F=2)
    with pytest.raises(TypeError, match="float array.*int64"):
        mlalpha.Panel.from_numpy(x.astype(np.int64), y)
    with pytest.raises(TypeError, match="dtype object"):
        mlalpha.Panel.from_numpy(x.astype(object), y)
    bad = x.copy()
    bad[1, 7, 0] = np.inf
    with pytest.raises(ValueError, match=r"x: feature value at \[1, 7, 0\] is \+inf"):
        mlalpha.Panel.from_numpy(bad, y)
    with pytest.raises(ValueError, match=r"outside the float32 range"), np.errstate(over="ignore"):
        mlalpha.Panel.from_numpy(np.full((2, 20, 2), 1e300), y)
    with pytest.raises(ValueError, match=r"disagree on T \(20 vs 19\)"):
        mlalpha.Panel.from_numpy(x, y[:, :19])
    with pytest.raises(ValueError, match=r"disagree on N \(2 vs 1\)"):
        mlalpha.Panel.from_numpy(x, y[:1])
    with pytest.raises(ValueError, match=r"shape \(T, F\) for one series or \(N, T, F\)"):
        mlalpha.Panel.from_numpy(x[0, :, 0], y[0])
    with pytest.raises(ValueError, match="instrument labels"):
        mlalpha.Panel.from_numpy(x, y, instruments=["a"])


# --- configs ------------------------------------------------------------------------------------------

def test_config_forms_agree():
    a = mlalpha.Config({"train": {"lr": 2e-3}, "model": {"layers": 1}})
    b = mlalpha.Config({"train.lr": 2e-3, "model.layers": 1})
    c = mlalpha.Config(train={"lr": 2e-3}, model={"layers": 1})
    assert a.to_toml() == b.to_toml() == c.to_toml()
    assert a["train.lr"] == pytest.approx(2e-3) and a["model.layers"] == 1
    assert set(a.given) == {"train.lr", "model.layers"}
    assert mlalpha.Config()["train.lr"] == pytest.approx(1e-3)  # the engine's default


def test_config_unknown_key_suggests():
    with pytest.raises(ValueError, match=r"unknown key 'train.lerning_rate'; did you mean 'train.lr'\?"):
        mlalpha.Config({"train": {"lerning_rate": 1e-3}})
    with pytest.raises(ValueError, match="model.d_state"):
        mlalpha.Config(model={"d_state": 0})  # the engine's range check names the key


def test_config_population():
    c = mlalpha.Config(train={"models": 3}, sweep={"lr": [1e-3, 3e-4], "warmup": 5}, run={"parallel_folds": True},
                       split={"walk_forward_folds": 2})
    assert c["train.models"] == 3 and c["run.parallel_folds"] is True
    assert c["sweep.lr"] == pytest.approx([1e-3, 3e-4])
    assert c["sweep.warmup"] == [5]  # a single value is a list of one
    assert c["sweep.clip"] == []  # not swept
    assert {"train.models", "sweep.lr", "sweep.warmup"} <= set(c.given)
    with pytest.raises(ValueError, match=r"run.parallel_folds = true trains walk-forward folds together, but "
                                         r"split.walk_forward_folds = 0 gives a single split, so it would do nothing"):
        mlalpha.Config(train={"models": 3}, run={"parallel_folds": True})
    assert mlalpha.Config(c.to_dict()).to_toml() == c.to_toml()
    with pytest.raises(ValueError, match=r"sweep\.lr\[1\] = 0 must be a finite number > 0"):
        mlalpha.Config(sweep={"lr": [1e-3, 0]})
    with pytest.raises(ValueError, match=r"did you mean 'sweep\.lr'\?"):
        mlalpha.Config(sweep={"learning_rate": [1e-3]})


def test_config_from_toml(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[data]\nsource = \"csv\"\ncsv = \"d.csv\"\nfeature_columns = [\"a\"]\n"
                    "target_columns = [\"r\"]\n[train]\nsteps = 120\n")
    c = mlalpha.Config.from_toml(path, train={"lr": 5e-4})
    assert c["train.steps"] == 120 and c["train.lr"] == pytest.approx(5e-4)
    assert c["data.csv"] == str(tmp_path / "d.csv")  # relative to the file, as on the command line
    # An override resolves against the working directory, made absolute (a run's records name their data
    # wherever they are read).
    assert c.replace(data={"csv": "e.csv"})["data.csv"] == os.path.join(os.getcwd(), "e.csv")


# --- a run on the CPU ---------------------------------------------------------------------------------

def test_fit_cpu(run, arrays):
    x, y = arrays
    assert not run.stopped and len(run.folds) == 1
    assert run.last.step == 30 and run.best is not None
    assert [e["step"] for e in run.folds[0].evaluations] == [10, 20, 30]
    hist = run.history
    assert len(hist) == 30 and list(hist["step"]) == list(range(1, 31))
    assert np.all(np.isfinite(hist["loss"]))
    ev = run.evaluations
    assert list(ev["step"]) == [10, 20, 30] and ev["ic"].iloc[-1] > 0.3  # the targets are a linear function of x
    pred = run.best.predict(mlalpha.Panel.from_numpy(x, y))
    assert pred.shape == (4, 240, 1) and pred.dtype == np.float32 and np.all(np.isfinite(pred))
    np.testing.assert_array_equal(run.best.predict(x), pred)       # an ndarray of features gives the same
    np.testing.assert_array_equal(run.best.predict(x[1]), pred[1])  # (T, F) -> (T, K)
    part = run.best.predict(x, t0=100, t1=150)
    assert np.isnan(part[:, :100]).all() and np.isnan(part[:, 150:]).all() and np.isfinite(part[:, 100:150]).all()


def test_fit_callback_stops_and_sees_events(arrays):
    x, y = arrays
    kinds = []

    def cb(e):
        kinds.append(e["kind"])
        return not (e["kind"] == "log" and e["step"] >= 10)

    r = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), callback=cb)
    assert r.stopped and not r.interrupted and r.last.step == 10
    assert kinds[:2] == ["start", "fold_start"] and "log" in kinds


def test_fit_callback_error_propagates(arrays):
    x, y = arrays

    def cb(e):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), callback=cb)


def test_fit_ctrl_c_stops_after_current_step(arrays):
    x, y = arrays

    def cb(e):
        if e["kind"] == "log" and e["step"] == 5:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C in a terminal or a notebook sends
        return True

    r = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), callback=cb)
    assert r.stopped and r.interrupted
    assert 5 <= r.last.step < 30
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler is back


def test_fit_writes_run_folder(tmp_path, arrays):
    x, y = arrays
    r = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), out_dir=tmp_path / "run")
    assert r.dir == str(tmp_path / "run")
    assert (tmp_path / "run" / "best.safetensors").exists() and (tmp_path / "run" / "metrics.jsonl").exists()
    # An existing run is refused by default, as by the command; overwrite=True replaces it.
    before = (tmp_path / "run" / "metrics.jsonl").read_bytes()
    with pytest.raises(ValueError, match="overwrite=True"):
        mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), out_dir=tmp_path / "run")
    assert (tmp_path / "run" / "metrics.jsonl").read_bytes() == before
    r2 = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), out_dir=tmp_path / "run", overwrite=True)
    assert r2.dir == str(tmp_path / "run") and r2.last is not None


def test_fit_rejects_bad_input(arrays):
    x, y = arrays
    with pytest.raises(TypeError, match="Panel"):
        mlalpha.fit(x, mlalpha.Config(SMALL))
    with pytest.raises(ValueError, match="train.seq_len"):  # windows longer than the training range
        mlalpha.fit(mlalpha.Panel.from_numpy(x[:, :20], y[:, :20]), mlalpha.Config(SMALL))


def test_predict_precision_and_its_tf32_alias(run, arrays):
    x, _ = arrays
    model = run.best
    fp32 = model.predict(x, device="cpu")
    for p in ("fp32", "tf32", "bf16"):  # the CPU computes fp32 whatever the precision says
        np.testing.assert_array_equal(model.predict(x, device="cpu", precision=p), fp32)
    np.testing.assert_array_equal(model.predict(x, device="cpu", tf32=True), fp32)
    np.testing.assert_array_equal(model.predict(x, device="cpu", precision="tf32", tf32=True), fp32)  # the same twice
    with pytest.raises(ValueError, match=r"Model\.predict: precision must be 'fp32', 'tf32' or 'bf16', got 'fp16'"):
        model.predict(x, device="cpu", precision="fp16")
    with pytest.raises(ValueError, match=r"got 'BF16'"):
        model.predict(x, device="cpu", precision="BF16")
    with pytest.raises(ValueError, match=r"precision must be .* got 16"):
        model.predict(x, device="cpu", precision=16)
    with pytest.raises(ValueError, match=r"tf32=True \(the older spelling of precision='tf32'\) contradicts "
                                         r"precision='bf16': give only precision"):
        model.predict(x, device="cpu", precision="bf16", tf32=True)
    with pytest.raises(ValueError, match="contradicts precision='fp32'"):
        model.predict(x, device="cpu", precision="fp32", tf32=True)
    with pytest.raises(ValueError, match="tf32 must be True or False"):
        model.predict(x, device="cpu", tf32="yes")
    with pytest.raises(ValueError, match="precision must be 'fp32', 'tf32' or 'bf16', got 'half'"):
        model._core.predict(mlalpha.Panel.from_numpy(*arrays)._core, 0, -1, "cpu", "half")  # the engine checks too


def test_threads_change_no_bit(run, arrays):
    """fit(threads=) and predict(threads=) set the CPU's worker threads; the results are the same bits on any
    count (the training above ran on every CPU)."""
    x, y = arrays
    one = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), threads=1)
    assert one.config["run.threads"] == 1
    pred = run.best.predict(x, device="cpu")
    np.testing.assert_array_equal(one.best.predict(x, device="cpu", threads=1), pred)
    np.testing.assert_array_equal(run.best.predict(x, device="cpu", threads=2), pred)
    with pytest.raises(TypeError, match=r"fit: threads must be an int"):
        mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), threads=1.5)
    with pytest.raises(ValueError, match=r"run.threads must be 0 \(every CPU this process may use\) or 1 to 64, got 65"):
        mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), threads=65)
    with pytest.raises(TypeError, match=r"Model.predict: threads must be an int"):
        run.best.predict(x, device="cpu", threads="2")
    # The engine's message names the Python argument (resolved once, mlalpha/compute.h).
    with pytest.raises(ValueError, match=r"^threads must be 0 \(every CPU this process may use\) or 1 to 64, got 100$"):
        run.best.predict(x, device="cpu", threads=100)


def test_config_precision_round_trips(arrays, tmp_path):
    assert mlalpha.Config()["train.precision"] == "fp32"
    for p in ("fp32", "tf32", "bf16"):
        c = mlalpha.Config(train={"precision": p})
        assert c["train.precision"] == p and "train.precision" in c.given
        assert mlalpha.Config(c.to_dict())["train.precision"] == p
        assert f"precision = '{p}'" in c.to_toml()
    old = mlalpha.Config(run={"tf32": True})  # the older spelling
    assert old["train.precision"] == "tf32" and "train.precision" in old.given and "run.tf32" not in old.given
    assert "tf32 =" not in old.to_toml()
    with pytest.raises(ValueError, match=r"run.tf32 = true contradicts train.precision = \"bf16\""):
        mlalpha.Config(train={"precision": "bf16"}, run={"tf32": True})
    with pytest.raises(ValueError, match=r"train.precision: must be one of 'fp32', 'tf32', 'bf16', got 'fp16'"):
        mlalpha.Config(train={"precision": "fp16"})
    # A run records it: the config it ran with, its checkpoints, and a resume continues in it.
    x, y = arrays
    cfg = mlalpha.Config(SMALL).replace(train={"precision": "bf16"}, run={"stop_after": 10})
    r = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg, out_dir=tmp_path / "run")
    assert r.config["train.precision"] == "bf16"
    assert r.last.config["train"]["precision"] == "bf16"
    back = mlalpha.load(tmp_path / "run" / "last.safetensors")
    assert back.config["train"]["precision"] == "bf16"
    r2 = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), mlalpha.Config(SMALL), resume=tmp_path / "run" / "last.safetensors")
    assert r2.last.step == 30 and r2.last.config["train"]["precision"] == "bf16"


# --- checkpoints --------------------------------------------------------------------------------------

def test_save_load_round_trip(run, arrays, tmp_path):
    x, _ = arrays
    path = tmp_path / "m.safetensors"
    run.best.save(path)
    back = mlalpha.load(path)
    assert back.step == run.best.step and back.parameters == run.best.parameters
    assert back.config == run.best.config
    np.testing.assert_array_equal(back.predict(x), run.best.predict(x))
    with pytest.raises(ValueError, match="features"):
        back.predict(x[..., :2])  # the model takes 3 features


def test_load_missing_file_is_value_error(tmp_path):
    with pytest.raises(ValueError):
        mlalpha.load(tmp_path / "none.safetensors")


def test_python_checkpoint_read_by_cli(run, tmp_path):
    exe = cli()
    path = tmp_path / "py.safetensors"
    run.best.save(path)
    out = subprocess.run([exe, "info", "--checkpoint", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # The command reads the settings and the tensors Python wrote: SMALL's model, F = 3 inputs.
    assert "d_model = 16" in out.stdout and "steps = 30" in out.stdout
    assert re.search(r"input_proj\.weight\s+\(16, 3\)", out.stdout), out.stdout


def test_cli_training_matches_python_bitwise(arrays, tmp_path):
    """`ml-alpha train` on the same data (.npy files) and settings gives the same weights, bit for bit, and
    its checkpoint predicts in Python exactly what the command's `predict` writes."""
    exe = cli()
    x, y = arrays
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    cfg = mlalpha.Config(SMALL)
    (tmp_path / "c.toml").write_text(cfg.to_toml())
    r = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg, out_dir=tmp_path / "py")
    cmd = [exe, "train", "--config", str(tmp_path / "c.toml"), "--set", "data.source=\"npy\"",
           "--set", f"data.features=\"{tmp_path / 'x.npy'}\"", "--set", f"data.targets=\"{tmp_path / 'y.npy'}\"",
           "--set", f"run.out_dir=\"{tmp_path / 'cli'}\""]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    for name in ("best.safetensors", "last.safetensors"):
        a, b = safetensors(tmp_path / "py" / name), safetensors(tmp_path / "cli" / name)
        assert a.keys() == b.keys() and len(a) > 0
        for k in a:
            assert a[k] == b[k], f"{name}: tensor {k} differs"
    cli_model = mlalpha.load(tmp_path / "cli" / "best.safetensors")
    out = subprocess.run([exe, "predict", "--checkpoint", str(tmp_path / "cli" / "best.safetensors"), "--config",
                          str(tmp_path / "c.toml"), "--set", "data.source=\"npy\"",
                          "--set", f"data.features=\"{tmp_path / 'x.npy'}\"",
                          "--set", f"data.targets=\"{tmp_path / 'y.npy'}\"", "--split", "all",
                          "-o", str(tmp_path / "pred")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "pred.npy"), cli_model.predict(x))
    np.testing.assert_array_equal(cli_model.predict(x), r.best.predict(x))


# --- metrics ------------------------------------------------------------------------------------------

def test_metrics_hand_made():
    # Two time steps, three instruments: IC_t = +1 then -1 (Pearson of a line), so ic = 0.
    y = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], dtype=np.float32)[:, :, None]
    pred = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]], dtype=np.float32)[:, :, None]
    m = mlalpha.metrics(pred, y)
    assert m["ic"] == pytest.approx(0.0) and m["rank_ic"] == pytest.approx(0.0)
    assert m["mse"] == pytest.approx((0 + 0 + 0 + 4 + 0 + 4) / 6)
    assert m["dir_acc"] == pytest.approx(1.0)  # every sign agrees
    assert m["points"] == 6 and m["steps"] == 2
    m = mlalpha.metrics(2 * y, y)
    assert m["ic"] == pytest.approx(1.0) and m["mse"] == pytest.approx(14 / 3)


def test_metrics_portfolios():
    # Four instruments, two dates, two quantiles: groups {lowest two} {highest two} by prediction.
    pred = np.array([[1.0, 4.0], [2.0, 3.0], [3.0, 2.0], [4.0, 1.0]], dtype=np.float32)
    y = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [5.0, 6.0]], dtype=np.float32)
    m = mlalpha.metrics(pred, y, quantiles=2, periods_per_year=4, train_mean=1.0)
    # date 0: bottom {0, 1} → 0.5, top {2, 5} → 3.5, ls 3; date 1: bottom {6, 3} → 4.5, top {2, 1} → 1.5, ls -3
    assert m["quantile_means"] == pytest.approx([2.5, 2.5])
    assert m["ls_mean"] == pytest.approx(0.0)
    assert m["ls_std"] == pytest.approx(np.sqrt(18.0))
    assert m["ls_sharpe"] == pytest.approx(0.0)
    assert m["turnover"] == pytest.approx(1.0)  # the top pair changes completely
    assert m["long_short"][0] == pytest.approx([3.0, -3.0])
    assert m["mse_zero"] == pytest.approx(np.mean(y.astype(np.float64) ** 2))
    assert m["mse_mean"] == pytest.approx(np.mean((y.astype(np.float64) - 1.0) ** 2))
    assert m["portfolio_steps"] == 2
    bare = mlalpha.metrics(pred, y, quantiles=2)
    assert np.isnan(bare["ls_sharpe"]) and np.isnan(bare["mse_mean"])


def test_metrics_nan_and_shapes():
    y = np.arange(12, dtype=np.float64).reshape(3, 4)
    pred = y.copy()
    pred[0, 0] = np.nan  # removes that point
    m = mlalpha.metrics(pred, y)
    assert m["points"] == 11 and m["ic"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="differ in shape"):
        mlalpha.metrics(pred, y[:, :3])
    with pytest.raises(TypeError, match="pred: expected a float array"):
        mlalpha.metrics(np.zeros((3, 4), dtype=np.int32), y)


def test_fit_progress_bar_is_optional(arrays):
    x, y = arrays
    cfg = mlalpha.Config(SMALL).replace(train={"steps": 10})
    r = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg, progress=True)  # tqdm when installed, else nothing
    assert r.last.step == 10


def test_fit_walk_forward_folds(arrays):
    x, y = arrays
    cfg = mlalpha.Config(SMALL).replace(split={"walk_forward_folds": 2}, train={"steps": 10})
    r = mlalpha.fit(mlalpha.Panel.from_numpy(x, y), cfg)
    assert [f.fold for f in r.folds] == [0, 1]
    assert r.folds[0].split["test"][1] <= r.folds[1].split["test"][0]  # fold 0 the earlier test block
    assert r.last.fold == 1 and r.folds[0].last.fold == 0
    assert sorted(set(r.history["fold"])) == [0, 1] and len(r.history) == 20
    # The pooled out-of-sample metrics cover both test blocks; the fold summary averages the fold tests.
    assert r.oos is not None and r.oos["points"] == sum(f.test["points"] for f in r.folds)
    assert r.fold_test_mean["mse"] == pytest.approx(np.mean([f.test["mse"] for f in r.folds]))


def test_from_numpy_reads_float32_in_place():
    x, y = make_arrays(N=2, T=120, F=3)
    p = mlalpha.Panel.from_numpy(x, y)
    assert p._core.borrowed
    assert p._core.x_address == x.ctypes.data and p._core.y_address == y.ctypes.data  # no copy
    x64 = x.astype(np.float64)
    q = mlalpha.Panel.from_numpy(x64, y)                   # converted once, then held by the panel
    assert q._core.x_address != x64.ctypes.data and q._core.y_address == y.ctypes.data
    np.testing.assert_array_equal(q.x, x)
    strided = np.asfortranarray(x)                         # not C-contiguous: converted
    assert mlalpha.Panel.from_numpy(strided, y)._core.x_address != strided.ctypes.data
    del x64, strided
    # (two instruments: the IC is undefined on every date, so the run selects by mse)
    run = mlalpha.fit(q, mlalpha.Config(SMALL).replace(run={"metric": "mse"}))  # the held arrays outlive the caller's names
    assert run.last is not None and np.array_equal(q.x, x)


# --- populations --------------------------------------------------------------------------------------

def population_config(**run):
    return mlalpha.Config({**SMALL, "train": {**SMALL["train"], "models": 2}, "sweep": {"lr": [1e-3, 3e-3]},
                           "run": {**SMALL["run"], **run}})


def test_population_leaderboard_members_and_resume(arrays, tmp_path):
    x, y = arrays
    panel = mlalpha.Panel.from_numpy(x, y)
    full = mlalpha.fit(panel, population_config(), out_dir=tmp_path / "full")
    assert full.folds == []
    assert [m["name"] for m in full.members] == ["member-00", "member-01", "member-02", "member-03"]
    assert full.members[1]["settings"] == {"lr": "0.001", "seed": "4"}
    assert full.members[2]["settings"] == {"lr": "0.003", "seed": "3"}
    assert all(m["steps"] == 30 and m["test"] is not None for m in full.members)
    board = full.leaderboard
    if isinstance(board, list):  # no pandas
        rows, columns = board, list(board[0])
    else:
        rows, columns = board.to_dict("records"), list(board.columns)
    assert columns[:4] == ["rank", "member", "lr", "seed"]
    assert {"best_step", "valid_ic", "test_ic", "test_ls_sharpe", "dir"} <= set(columns)
    assert len(rows) == 5 and [r["rank"] for r in rows[:4]] == [1, 2, 3, 4]
    assert rows[-1]["member"] == "ensemble"
    rank = rows[-1]["rank"]
    assert rank is None or rank != rank  # empty: None, or NaN in a DataFrame
    assert sorted(r["member"] for r in rows[:4]) == [m["name"] for m in full.members]

    # Stopped after 10 steps, then resumed from the run folder: every member ends as in the full run.
    part = mlalpha.fit(panel, population_config(stop_after=10), out_dir=tmp_path / "part")
    assert not part.stopped
    assert all(mlalpha.Model.load(os.path.join(m["dir"], "last.safetensors")).step == 10 for m in part.members)
    resumed = mlalpha.fit(panel, population_config(), resume=tmp_path / "part")
    assert resumed.dir == os.fspath(tmp_path / "part")
    assert [m["steps"] for m in resumed.members] == [30] * 4
    for a, b in zip(full.members, resumed.members):
        assert safetensors(os.path.join(a["dir"], "last.safetensors")) == safetensors(os.path.join(b["dir"], "last.safetensors"))
        assert a["test"]["ic"] == b["test"]["ic"]
