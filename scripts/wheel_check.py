"""What scripts/test_wheel.sh runs with an installed wheel, in a fresh virtual environment with no compiler on
PATH: the README's Python snippet, then training, prediction, checkpoints and the stream on a synthetic panel,
asserting results a broken or partly linked engine would not give.

Usage: python wheel_check.py README.md [--cpu-only]   (run outside the repository, so that `import mlalpha`
is the installed package). --cpu-only: the wheel has no GPU code; device="gpu" must be refused.
"""
import argparse
import os
import pathlib
import re
import sys
import tempfile
import time

import numpy as np


def fail(msg: str) -> None:
    sys.exit(f"wheel_check: {msg}")


def readme_snippet(readme: pathlib.Path) -> str:
    """The README's Python example: the first python block of its "## Python" section."""
    text = readme.read_text()
    section = text.split("\n## Python\n", 1)
    if len(section) != 2:
        fail(f"{readme} has no '## Python' section")
    m = re.search(r"^```python\n(.*?)^```", section[1], re.S | re.M)
    if not m:
        fail(f"{readme}'s Python section has no python block")
    return m.group(1)


def synthetic(N=12, T=400, F=4, seed=7):
    """A panel whose target is learnable from the current row: y = 0.6 x0 - 0.3 x1 x2 + noise."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, T, F)).astype(np.float32)
    y = (0.6 * x[..., 0] - 0.3 * x[..., 1] * x[..., 2] + 0.1 * rng.standard_normal((N, T))).astype(np.float32)
    return x, y[..., None]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("readme", type=pathlib.Path)
    ap.add_argument("--cpu-only", action="store_true")
    args = ap.parse_args()

    import mlalpha

    # The installed package, not a source tree's: the wheel is what is tested.
    where = pathlib.Path(mlalpha.__file__).resolve()
    if pathlib.Path(sys.prefix).resolve() not in where.parents:
        fail(f"mlalpha was imported from {where}, not from this environment ({sys.prefix})")
    print(f"wheel_check: mlalpha {where.parent}")

    work = pathlib.Path(tempfile.mkdtemp(prefix="wheel-check-"))
    os.chdir(work)  # the snippet writes m.safetensors where it runs

    t = time.perf_counter()
    ns: dict = {}
    exec(compile(readme_snippet(args.readme), f"{args.readme}:Python", "exec"), ns)
    pred, y = ns["pred"], ns["y"]
    if pred.shape != y.shape or not np.isfinite(pred).all():
        fail(f"README snippet: predictions of shape {pred.shape} (want {y.shape}), all finite: {np.isfinite(pred).all()}")
    ic = mlalpha.metrics(pred, y)["ic"]
    if not ic > 0.5:  # y = 0.5 x0: 300 steps learn it
        fail(f"README snippet: IC {ic:.3f} (want > 0.5)")
    print(f"wheel_check: README snippet ran in {time.perf_counter() - t:.1f} s, IC {ic:.3f}")

    # Training on the CPU, on two worker threads; the last 100 dates are the test split.
    x, y = synthetic()
    N, T, _ = x.shape
    panel = mlalpha.Panel.from_numpy(x, y)
    cfg = mlalpha.Config(model={"d_model": 32, "layers": 2, "head_dim": 16, "d_state": 16, "chunk": 16},
                         train={"batch": 8, "seq_len": 32, "steps": 200, "lr": 2e-3, "warmup": 10},
                         run={"eval_every": 50})
    t = time.perf_counter()
    run = mlalpha.fit(panel, cfg, device="cpu", threads=2)
    model = run.best if run.best is not None else run.last
    pred = model.predict(panel, device="cpu")
    if pred.shape != (N, T, 1) or not np.isfinite(pred).all():
        fail(f"predict: shape {pred.shape} (want {(N, T, 1)}), all finite: {np.isfinite(pred).all()}")
    test_ic = mlalpha.metrics(pred, y, t0=T - 100)["ic"]
    if not test_ic > 0.5:
        fail(f"trained model: test IC {test_ic:.3f} (want > 0.5: the target is a function of the current row)")
    print(f"wheel_check: trained {cfg['train.steps']} steps and predicted in {time.perf_counter() - t:.1f} s, "
          f"test IC {test_ic:.3f}")

    # A checkpoint written and read back predicts the same bits.
    model.save(work / "model.safetensors")
    again = mlalpha.load(work / "model.safetensors").predict(panel, device="cpu")
    if not np.array_equal(again, pred):
        fail("a saved and loaded checkpoint predicts differently")

    # The stream: one bar at a time, each bar's rows equal predict's for that date (window: the same bits;
    # carry: the chunked forward against the step recurrence, within float32 rounding).
    names = [f"S{i}" for i in range(N)]
    for mode in ("window", "carry"):
        want = model.predict(x, device="cpu", mode=mode)
        s = model.stream(names, mode=mode, device="cpu")
        got = np.stack([s.step(x[:, b], time=b).to_numpy() for b in range(T)], axis=1)
        if got.shape != want.shape or not np.isfinite(got).all():
            fail(f"stream ({mode}): rows of shape {got.shape} (want {want.shape}), all finite: {np.isfinite(got).all()}")
        if mode == "window" and not np.array_equal(got, want):
            fail(f"stream (window): bars differ from predict's rows by up to {np.abs(got - want).max():.3g}")
        if mode == "carry" and not np.allclose(got, want, rtol=1e-5, atol=1e-6):
            fail(f"stream (carry): bars differ from predict's rows by up to {np.abs(got - want).max():.3g}")
        if s.bars != T or s.last_time != T - 1:
            fail(f"stream ({mode}): {s.bars} bars, last time {s.last_time} (want {T}, {T - 1})")
    print(f"wheel_check: streamed {T} bars of {N} instruments (window, carry) equal to predict's rows")

    if args.cpu_only:
        try:
            mlalpha.fit(panel, cfg.replace(train={"steps": 20}), device="gpu")
        except (RuntimeError, ValueError) as e:
            if "no GPU support" not in str(e):
                fail(f"device='gpu' on the CPU-only wheel: the error does not say why: {e}")
            print(f"wheel_check: device='gpu' refused: {e}")
        else:
            fail("device='gpu' trained on a wheel built without GPU code")
    print("wheel_check: ok")


if __name__ == "__main__":
    main()
