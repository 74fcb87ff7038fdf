"""The plots a run writes, rendered to PNG as a browser would draw them (cairosvg) and checked the way a person
looks at them: the title inside the picture, nothing running off its edges, dates under the long-short axis, the
units on it. MLALPHA_PLOT_DIR=<folder> keeps the PNGs there to look at."""
import io
import os
import pathlib
import shutil

import numpy as np
import pytest

import mlalpha

from extras import import_or_skip
from test_basic import SMALL

cairosvg = import_or_skip("cairosvg", "RENDER", "pip install cairosvg")
pd = pytest.importorskip("pandas")
from PIL import Image  # noqa: E402  (cairosvg's own dependency)


def render(svg: pathlib.Path) -> np.ndarray:
    """The SVG as an RGB array, with the picture's own size; kept under MLALPHA_PLOT_DIR when set."""
    png = cairosvg.svg2png(url=str(svg))
    keep = os.environ.get("MLALPHA_PLOT_DIR")
    if keep:
        out = pathlib.Path(keep) / (svg.parent.name + "_" + svg.stem + ".png")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(png)
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def ink(img: np.ndarray) -> np.ndarray:
    """Where something dark is drawn (text, axes, lines)."""
    return img.min(axis=2) < 160


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    rng = np.random.default_rng(0)
    dates = pd.bdate_range("2019-01-01", periods=420)
    idx = pd.MultiIndex.from_product([dates, [f"S{i}" for i in range(8)]], names=["datetime", "instrument"])
    df = pd.DataFrame({"f0": rng.standard_normal(len(idx)), "f1": rng.standard_normal(len(idx))}, index=idx)
    df["ret"] = 0.01 * (0.5 * df["f0"] + 0.5 * rng.standard_normal(len(idx)))
    out = tmp_path_factory.mktemp("plots") / "a_run_folder_with_a_rather_long_name_to_test_the_title_fitting"
    cfg = mlalpha.Config(SMALL).replace(split={"walk_forward_folds": 2}, data={"target_norm": "zscore"},
                                        train={"steps": 40})
    mlalpha.fit(mlalpha.Panel.from_frame(df, ["f0", "f1"], ["ret"]), cfg, out_dir=out)
    return out


@pytest.mark.parametrize("name", ["long_short.svg", "fold-0/long_short.svg", "fold-1/curves.svg"])
def test_the_plots_read_at_a_glance(run_dir, name):
    svg = run_dir / name
    text = svg.read_text()
    img = render(svg)
    h, w, _ = img.shape
    dark = ink(img)
    assert dark[8:40].any(), "no title"
    # Nothing runs off the picture: the outer columns and rows stay background.
    assert not dark[:, :3].any() and not dark[:, -3:].any() and not dark[-3:].any(), "something is cut at an edge"
    if "long_short" in name:
        assert (w, h) == (960, 440)
        assert "(z-score units)" in text and "not returns" in text  # the targets were normalised per date
        assert ">date</text>" in text and ">2019-" not in text.split("date</text>")[0][-40:]
        assert any(f">{y}-{m:02d}</text>" in text for y in (2019, 2020) for m in range(1, 13))  # months on the axis
        below = dark[h - 56:h - 30, 84:w - 32]  # the tick labels under the plot area
        assert below.any(), "no labels under the x axis"
    else:
        assert (w, h) == (960, 640)
        assert "training mse, z-score targets" in text and "validation ic" in text
    if name == "long_short.svg":  # the pooled walk-forward backtest, its folds marked
        assert "pooled out-of-sample" in text and ">fold 1</text>" in text


def test_a_person_can_keep_them(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MLALPHA_PLOT_DIR", str(tmp_path / "png"))
    render(run_dir / "long_short.svg")
    assert (tmp_path / "png" / f"{run_dir.name}_long_short.png").stat().st_size > 10000
    shutil.rmtree(tmp_path / "png")
