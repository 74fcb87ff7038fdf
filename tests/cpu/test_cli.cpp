// The `ml-alpha` command end to end (CPU backend): synth → train on .npy with validation → eval →
// predict; resume is bit-exact; bad input fails with a message and a non-zero exit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/bench.h"
#include "cli/commands.h"
#include "data/npy.h"
#include "mlalpha/device.h"
#include "mlalpha/error.h"
#include "checkpoint/checkpoint.h"
#include "test_files.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

struct Result {
  int code;
  std::string out;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlalpha_cli_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // env: variables set for the command ("RANK=1 WORLD_SIZE=2"), or empty.
  Result run(const std::string& args, const std::string& env = "") {
    const std::string log = (dir_ / "cmd.log").string();
    const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(MLALPHA_BIN) + " " + args + " > " +
                            log + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
  }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// The last "valid" record's ic in metrics.jsonl.
double last_valid_ic(const std::string& jsonl) {
  std::ifstream in(jsonl);
  double ic = -2;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"split\":\"valid\"") != std::string::npos) {
      const size_t at = line.find("\"ic\":");
      if (at != std::string::npos) ic = std::stod(line.substr(at + 5));
    }
  return ic;
}

TEST_F(Cli, SynthTrainEvalPredictOnNpy) {
  Result r = run("synth -o " + p("data") + " --instruments 12 --timesteps 500 --features 4 --format npy");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string data = "--set data.source=npy --set data.features=" + p("data/features.npy") +
                           " --set data.targets=" + p("data/targets.npy");
  r = run("train " + data + " --device cpu --steps 150 --eval-every 50 --log-every 50 --d-model 16 --head-dim 8 "
          "-B 8 -L 48 --lr 3e-3 -o " + p("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* f : {"run/best.safetensors", "run/best.safetensors.optim.safetensors", "run/last.safetensors",
                        "run/metrics.jsonl", "run/curves.svg"})
    EXPECT_TRUE(fs::exists(p(f))) << f << "\n" << r.out;
  const double ic = last_valid_ic(p("run/metrics.jsonl"));
  std::printf("validation IC after 150 steps: %.4f\n", ic);
  EXPECT_GT(ic, 0.3) << "the synthetic signal was not learned:\n" << r.out;

  r = run("eval " + data + " --device cpu --checkpoint " + p("run/best.safetensors") + " --split valid");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| 0 |"), std::string::npos) << r.out;

  r = run("predict " + data + " --device cpu --checkpoint " + p("run/best.safetensors") + " --split test -o " + p("pred"));
  ASSERT_EQ(r.code, 0) << r.out;
  const NpyArray pred = read_npy(p("pred.npy"));
  EXPECT_EQ(pred.shape, (std::vector<int64_t>{12, 500, 1}));
  std::ifstream csv(p("pred.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "time,instrument,observed,context,pred_0,target_0");
  // Mode carry: the state carried from each instrument's first row; the context column counts its rows.
  r = run("predict " + data + " --device cpu --checkpoint " + p("run/best.safetensors") +
          " --split all --mode carry -o " + p("carry"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = test::read_csv_rows(p("carry.csv"));
  ASSERT_EQ(rows.size(), size_t(12) * 500 + 1);
  EXPECT_EQ(rows.back()[3], "500");
  r = run("predict " + data + " --device cpu --checkpoint " + p("run/best.safetensors") + " --mode stateful -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--mode must be 'window'"), std::string::npos) << r.out;
}

TEST_F(Cli, ResumeIsBitExact) {
  const std::string common = "train --device cpu --instruments 4 --timesteps 300 --features 3 --d-model 16 "
                             "--head-dim 8 -B 4 -L 32 --steps 40 --eval-every 0 --log-every 10 ";
  ASSERT_EQ(run(common + "-o " + p("straight")).code, 0);
  Result r = run(common + "--stop-after 20 -o " + p("half"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run(common + "--resume " + p("half/last.safetensors") + " -o " + p("half"));
  ASSERT_EQ(r.code, 0) << r.out;
  const Checkpoint a = load_checkpoint(p("straight/last.safetensors"));
  const Checkpoint b = load_checkpoint(p("half/last.safetensors"));
  EXPECT_EQ(a.state.step, 40);
  EXPECT_EQ(b.state.step, 40);
  EXPECT_EQ(a.state.params, b.state.params) << "20 + resume + 20 differs from 40 straight";
  EXPECT_EQ(a.state.m, b.state.m);
  EXPECT_EQ(a.state.v, b.state.v);
}

// --save-every N saves the last checkpoint every N steps (run.save_every) with state.json; N < 0 is refused.
TEST_F(Cli, SaveEverySavesAlongTheWay) {
  const std::string common = "train --device cpu --instruments 4 --timesteps 300 --features 3 --d-model 16 "
                             "--head-dim 8 -B 4 -L 32 --steps 40 --eval-every 0 --log-every 10 ";
  Result r = run(common + "--save-every 15 --stop-after 35 -o " + p("saves"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream f(p("saves/state.json"));
  const std::string last((std::istreambuf_iterator<char>(f)), {});
  EXPECT_NE(last.find("\"step\":35"), std::string::npos) << last;  // the save at the stop, after the one at 30
  EXPECT_EQ(load_checkpoint(p("saves/last.safetensors")).state.step, 35);
  r = run(common + "--save-every -1 -o " + p("neg"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("run.save_every: value -1 is out of range"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("neg")));
}

// A population stopped by --stop-after continues from its run folder alone (its settings are recorded
// there) or from a member's checkpoint with the same options, and ends as the uninterrupted population.
TEST_F(Cli, PopulationResumeIsBitExact) {
  const std::string common = "train --device cpu --instruments 4 --timesteps 300 --features 3 --d-model 16 "
                             "--head-dim 8 -B 4 -L 32 --steps 40 --eval-every 10 --log-every 10 ";
  ASSERT_EQ(run(common + "--models 2 -o " + p("straight")).code, 0);
  Result r = run(common + "--models 2 --stop-after 20 -o " + p("half"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--resume " + p("half")), std::string::npos) << r.out;
  r = run("train --device cpu --stop-after 10 --resume " + p("half"));  // the settings come from the folder
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(load_checkpoint(p("half/member-00/last.safetensors")).state.step, 30) << r.out;
  r = run(common + "--models 2 --resume " + p("half/member-01/last.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("leaderboard"), std::string::npos) << r.out;
  for (const char* m : {"member-00", "member-01"}) {
    const Checkpoint a = load_checkpoint(p("straight/") + m + "/last.safetensors");
    const Checkpoint b = load_checkpoint(p("half/") + m + "/last.safetensors");
    EXPECT_EQ(b.state.step, 40) << m;
    EXPECT_EQ(a.state.params, b.state.params) << m << ": 20 + 10 + 10 differs from 40 straight";
    EXPECT_EQ(a.state.m, b.state.m) << m;
  }
  r = run(common + "--models 3 --resume " + p("half"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("train.models = 3 but the run was trained with 2"), std::string::npos) << r.out;
}

// --batch time (cross-sectional batches) with --loss ic trains and resumes bit-exactly; a --batch that is
// neither an integer nor 'time', and ic without time batches, are refused naming the setting.
TEST_F(Cli, TimeBatchesWithIcLoss) {
  const std::string common = "train --device cpu --instruments 6 --timesteps 200 --features 3 --d-model 16 "
                             "--head-dim 8 -B time --set train.dates=2 --set train.instruments=4 --loss ic -L 32 "
                             "--steps 30 --warmup 2 --eval-every 0 --log-every 10 ";
  Result r = run(common + "-o " + p("straight"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step 30/30"), std::string::npos) << r.out;
  ASSERT_EQ(run(common + "--stop-after 15 -o " + p("half")).code, 0);
  r = run(common + "--resume " + p("half/last.safetensors") + " -o " + p("half"));
  ASSERT_EQ(r.code, 0) << r.out;
  const Checkpoint a = load_checkpoint(p("straight/last.safetensors"));
  const Checkpoint b = load_checkpoint(p("half/last.safetensors"));
  EXPECT_EQ(a.meta.train.batch_mode, BatchMode::Time);
  EXPECT_EQ(a.meta.train.instruments, 4);
  EXPECT_EQ(a.state.params, b.state.params) << "15 + resume + 15 differs from 30 straight";

  r = run("train --device cpu -B tim --steps 30 -o " + p("x"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("'tim' is neither an integer (windows per step) nor 'time'"), std::string::npos) << r.out;
  r = run("train --device cpu -B 8 --loss ic --steps 30 -o " + p("x"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("train.loss = 'ic' correlates predictions across the instruments of one date"),
            std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("x")));
}

TEST_F(Cli, BadInputFailsClearlyAndLeavesNothingBehind) {
  Result r = run("train --set train.lerning_rate=1 -o " + p("x"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("unknown key 'train.lerning_rate'"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("x")));

  r = run("train --set data.source=npy --set data.features=" + p("missing.npy") + " --set data.targets=" +
          p("missing.npy") + " -o " + p("y"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("missing.npy"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("y")));

  std::ofstream(p("bad.toml")) << "[model]\nd_model = 30\nhead_dim = 16\n";
  r = run("train --config " + p("bad.toml") + " -o " + p("z"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("model.head_dim = 16 must divide d_inner"), std::string::npos) << r.out;

  r = run("train --lr -1 -o " + p("z"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("train.lr must be a finite number > 0"), std::string::npos) << r.out;
}

// Reads a whole file (empty when missing).
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* kSmall = "train --device cpu --instruments 4 --features 3 --head-dim 8 -B 4 --warmup 2 --log-every 10 ";

// Data-parallel runs that cannot start fail before anything is written: more --gpus than the host has, --gpus
// inside a launcher's rank, a rank without its GPU or its peers (a population too: it is no longer refused as
// such, it needs the GPU like one model).
TEST_F(Cli, DataParallelSetupErrors) {
  Result r = run(std::string(kSmall) + "--steps 20 --gpus 999 -o " + p("a"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--gpus 999: this host shows"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("a")));

  r = run(std::string(kSmall) + "--steps 20 --gpus 2 -o " + p("b"), "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("already rank 1 of 2 (torchrun variables)"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("b")));

  r = run(std::string(kSmall) + "--steps 20 --models 2 -o " + p("c"), "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(r.out.find("population"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 0 of 2"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("c")));

  // No GPU (CI), or a GPU but no way to reach rank 1 (no MLALPHA_DIST_ID_FILE, MASTER_ADDR): an error either way.
  r = run(std::string(kSmall) + "--steps 20 -o " + p("d"), "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("rank 0 of 2"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("d")));

  r = run(std::string(kSmall) + "--steps 20 -o " + p("e"), "RANK=0 WORLD_SIZE=2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("LOCAL_RANK"), std::string::npos) << r.out;
}

TEST_F(Cli, AnExistingRunIsNeverLost) {
  ASSERT_EQ(run(std::string(kSmall) + "--steps 20 --eval-every 10 --timesteps 300 -o " + p("run")).code, 0);
  const std::string jsonl = slurp(p("run/metrics.jsonl"));
  ASSERT_FALSE(jsonl.empty());
  // A bad setting fails before any output is opened: metrics.jsonl keeps every byte.
  Result r = run(std::string(kSmall) + "--steps 20 --metric sharpe -o " + p("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("run.metric must be one of mse, ic, rank_ic, icir, dir_acc, ls_mean, ls_std, ls_sharpe, turnover, "
                       "mse_zero, mse_mean, ts_mean, ts_std, ts_sharpe, ts_hit, ts_max_dd, q1 .. q5, got 'sharpe'"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(p("run/metrics.jsonl")), jsonl);
  // A valid run into the same folder is refused unless told to overwrite or resume.
  r = run(std::string(kSmall) + "--steps 20 -o " + p("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("already holds a run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(p("run/metrics.jsonl")), jsonl);
  r = run(std::string(kSmall) + "--steps 30 --eval-every 10 --overwrite -o " + p("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(load_checkpoint(p("run/last.safetensors")).state.step, 30);
  // A late error (the window is longer than the training range) leaves no folder behind.
  r = run(std::string(kSmall) + "--steps 20 --timesteps 300 -L 250 -o " + p("deep/er/run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("train.seq_len = 250 is longer than the training range"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("deep")));
}

TEST_F(Cli, ResumeIsGovernedByTheCheckpoint) {
  ASSERT_EQ(run(std::string(kSmall) + "--steps 40 --eval-every 0 --stop-after 20 --timesteps 300 -L 32 --d-model 16 -o " +
                p("run")).code, 0);
  const std::string small_model = " --timesteps 300 -L 32 --d-model 16";
  // Other data or another model: refused, naming the setting.
  Result r = run(std::string(kSmall) + "--steps 40 --noise 0.5" + small_model + " --resume " + p("run/last.safetensors") + " -o " + p("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("data.noise = 0.5 but the run was trained with"), std::string::npos) << r.out;
  r = run(std::string(kSmall) + "--steps 40 --timesteps 300 -L 32 --d-model 32 --resume " + p("run/last.safetensors") + " -o " + p("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("model.d_model = 32"), std::string::npos) << r.out;
  // Without data flags the recorded data is used; the run finishes at the checkpoint's train.steps.
  r = run("train --device cpu --resume " + p("run/last.safetensors") + " -o " + p("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(load_checkpoint(p("run/last.safetensors")).state.step, 40);
  // A finished run is not stretched silently ...
  r = run("train --device cpu --resume " + p("run/last.safetensors") + " -o " + p("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("the run is finished"), std::string::npos) << r.out;
  // ... only by an explicit, logged change.
  r = run("train --device cpu --steps 50 --resume " + p("run/last.safetensors") + " -o " + p("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("resume: train.steps: 40 -> 50 (set explicitly)"), std::string::npos) << r.out;
  EXPECT_EQ(load_checkpoint(p("run/last.safetensors")).state.step, 50);
}

TEST_F(Cli, EvalUsesTheCheckpointsData) {
  ASSERT_EQ(run(std::string(kSmall) + "--steps 20 --eval-every 0 --timesteps 400 -o " + p("run")).code, 0);
  Result r = run("eval --device cpu --checkpoint " + p("run/last.safetensors") + " --split valid");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("data: as recorded in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("time steps [280, 340)"), std::string::npos) << r.out;  // T = 400: valid is [0.7T, 0.85T)
}

// eval and predict process the data as the training did; predict writes the processed targets.
TEST_F(Cli, EvalAndPredictKeepTheTrainingsProcessing) {
  ASSERT_EQ(run(std::string(kSmall) + "--steps 10 --eval-every 0 --timesteps 300 --set data.feature_norm=zscore "
                "--set data.target_norm=rank -o " + p("run")).code, 0);
  Result r = run("eval --device cpu --checkpoint " + p("run/last.safetensors") + " --split valid");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("eval --device cpu --checkpoint " + p("run/last.safetensors") + " --split valid --set data.feature_norm=rank");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("data.feature_norm = 'rank' but " + p("run/last.safetensors") + " was trained with 'zscore'"),
            std::string::npos) << r.out;
  r = run("predict --device cpu --checkpoint " + p("run/last.safetensors") + " --split test -o " + p("pred"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream csv(p("pred.csv"));
  std::string line;
  std::getline(csv, line);
  int rows = 0;
  for (; std::getline(csv, line); ++rows) {
    const double target = std::stod(line.substr(line.rfind(',') + 1));
    // The rank of 4 instruments: −1, −1/3, 1/3 or 1, not a raw target.
    EXPECT_NEAR(std::abs(std::abs(target) - 2.0 / 3) - 1.0 / 3, 0.0, 1e-6) << line;
  }
  EXPECT_GT(rows, 0);
}

TEST_F(Cli, EvalWarnsWhenTheRangeOverlapsTheTrainingRange) {
  ASSERT_EQ(run(std::string(kSmall) + "--steps 20 --eval-every 10 --timesteps 400 -o " + p("run")).code, 0);
  Result r = run("eval --device cpu --checkpoint " + p("run/best.safetensors") + " --split train");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: the evaluated train range [0, 280) overlaps the checkpoint's training range [0, 280) "
                       "in 280 time steps"),
            std::string::npos)
      << r.out;
  // A split that moves valid_end into the training range of the checkpoint: the overlap is named.
  r = run("eval --device cpu --checkpoint " + p("run/best.safetensors") + " --split valid --set split.train_end=0.5");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: the evaluated valid range [200, 340) overlaps the checkpoint's training range [0, 280) "
                       "in 80 time steps"),
            std::string::npos)
      << r.out;
  r = run("eval --device cpu --checkpoint " + p("run/best.safetensors") + " --split test");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;
  // The portfolio table and the notes on what is undefined here (synthetic times are not dates).
  EXPECT_NE(r.out.find("| target | q1 | q2 | q3 | q4 | q5 | ls_mean | ls_std | ls_sharpe | turnover | dates |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ls_sharpe is NaN: the time labels are not dates"), std::string::npos) << r.out;
  r = run("eval --device cpu --checkpoint " + p("run/best.safetensors") +
          " --split test --set run.periods_per_year=252 --set run.quantiles=3 --long-short-svg " + p("ls.svg"));
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(fs::exists(p("ls.svg"))) << r.out;
  std::ifstream svg(p("ls.svg"));
  std::stringstream ss;
  ss << svg.rdbuf();
  EXPECT_NE(ss.str().find("cumulative long-short return: test range of "), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("top minus bottom of 3 prediction groups per date"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("<path d='"), std::string::npos);  // 4 instruments, 3 quantiles: every date forms portfolios
  EXPECT_EQ(r.out.find("ls_sharpe is NaN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| target | q1 | q2 | q3 | ls_mean |"), std::string::npos) << r.out;
  r = run("predict --device cpu --checkpoint " + p("run/best.safetensors") + " --split all -o " + p("pred"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: the predicted all range [0, 400) overlaps"), std::string::npos) << r.out;
}

// SIGTERM and SIGHUP (a closed terminal) end a run like Ctrl-C: the current step finishes, `last` is saved, and
// stderr says so and how to continue; the exit status is 128 + the signal.
TEST_F(Cli, SigtermAndSighupSaveTheLastCheckpoint) {
  for (const int sig : {SIGTERM, SIGHUP}) {
    const std::string name = sig == SIGTERM ? "TERM" : "HUP", out = p("run" + name);
    const std::string cmd = std::string(MLALPHA_BIN) + " " + kSmall + "--steps 1000000 --eval-every 0 -o " + out +
                            " > " + p("log") + " 2>&1 & pid=$!; sleep 3; kill -" + name + " $pid; wait $pid";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << slurp(p("log"));
    EXPECT_NE(slurp(p("log")).find("interrupted at step"), std::string::npos) << slurp(p("log"));
    EXPECT_NE(slurp(p("log")).find("stopped by SIG" + name), std::string::npos) << slurp(p("log"));
    EXPECT_NE(slurp(p("log")).find("--resume " + out), std::string::npos) << slurp(p("log"));
    const Checkpoint c = load_checkpoint(out + "/last.safetensors");
    EXPECT_GT(c.state.step, 0);
  }
}

// `train ... | head -n 5`: the closed output does not kill the run; it saves `last`, stops writing to stdout and
// says so on stderr.
TEST_F(Cli, AClosedOutputEndsTheRunSavingTheLastCheckpoint) {
  const std::string cmd = "bash -c '" + std::string(MLALPHA_BIN) + " " + kSmall +
                          "--steps 1000000 --eval-every 0 -o " + p("run") + " 2> " + p("err") +
                          " | head -n 5 > " + p("head") + "; exit ${PIPESTATUS[0]}'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGPIPE) << slurp(p("err"));
  EXPECT_NE(slurp(p("err")).find("stopped by SIGPIPE (the output was closed) at step"), std::string::npos)
      << slurp(p("err"));
  const std::string head = slurp(p("head"));
  EXPECT_EQ(std::count(head.begin(), head.end(), '\n'), 5) << head;
  const Checkpoint c = load_checkpoint(p("run/last.safetensors"));
  EXPECT_GT(c.state.step, 0);
  EXPECT_FALSE(fs::exists(p("run/run.lock")));
}

// Two runs started together into one new folder: one trains, the other is refused (the folder is locked, or
// by the time it looks, holds a run); the log holds one run's records.
TEST_F(Cli, TwoRunsIntoOneFolderCannotBothWriteIt) {
  const std::string one = std::string(MLALPHA_BIN) + " " + kSmall + "--steps 200 --eval-every 0 -o " + p("run");
  const std::string cmd = "bash -c '" + one + " > " + p("a") + " 2>&1 & a=$!; " + one + " > " + p("b") +
                          " 2>&1 & b=$!; wait $a; ra=$?; wait $b; rb=$?; echo $ra $rb > " + p("codes") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string codes = slurp(p("codes"));
  EXPECT_TRUE(codes == "0 1\n" || codes == "1 0\n") << codes << slurp(p("a")) << slurp(p("b"));
  const std::string refused = codes == "0 1\n" ? slurp(p("b")) : slurp(p("a"));
  // The holder named by its pid, or not yet (the refused run read the lock before the holder wrote its pid).
  EXPECT_TRUE(refused.find("is in use by process") != std::string::npos ||
              refused.find("is in use by another process") != std::string::npos ||
              refused.find("already holds a run") != std::string::npos)
      << refused;
  std::ifstream jsonl(p("run/metrics.jsonl"));
  int steps = 0;
  for (std::string line; std::getline(jsonl, line);) steps += line.find("\"loss\"") != std::string::npos;
  EXPECT_EQ(steps, 200) << "every step once";
}

// Flag values are taken as typed: a path with a backslash stays one (TOML would read \t as a tab), as does a
// bare word given with --set.
TEST_F(Cli, FlagValuesAreTakenVerbatim) {
  const std::string odd = p("runs\\test");  // runs\test
  Result r = run(std::string(kSmall) + "--steps 5 --eval-every 0 -o '" + odd + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "runs\\test" / "last.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "runs\ttest"));
  r = run(std::string(kSmall) + "--steps 5 --eval-every 0 --set 'run.out_dir=" + p("set\\dir") + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "set\\dir" / "last.safetensors"));
  r = run(std::string(kSmall) + "--steps 5 --lr 1e-400 -o " + p("tiny"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--lr"), std::string::npos) << r.out;
}

TEST_F(Cli, CountsThatOverflowAreRefused) {
  Result r = run("train --steps 99999999999999999999 -o " + p("x"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("ml-alpha: error: --steps: '99999999999999999999' is out of range"), std::string::npos) << r.out;
  EXPECT_EQ(r.code, 1);
  r = run("train --set train.steps=99999999999999999999 -o " + p("x"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("train.steps: value 99999999999999999999 is out of range"), std::string::npos) << r.out;
  r = run("train --steps 100 --warmup 100 -o " + p("x"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("train.warmup = 100 must be less than train.steps = 100"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("x")));
}

// --sweep KEY=V1,V2,... becomes the override sweep.KEY=[...]; bad parts are named.
std::string sweep_error(const std::string& arg) {
  try {
    sweep_override(arg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SweepOption, BecomesAnOverride) {
  EXPECT_EQ(sweep_override("lr=1e-3,3e-4"), "sweep.lr=[0.001, 0.0003]");
  EXPECT_EQ(sweep_override("weight_decay=0,.5,+2"), "sweep.weight_decay=[0, 0.5, 2]");  // written as TOML reads it
  EXPECT_EQ(sweep_override("clip=1"), "sweep.clip=[1]");
  EXPECT_EQ(sweep_override("warmup=0,20,100"), "sweep.warmup=[0, 20, 100]");
  EXPECT_EQ(sweep_overrides({"lr=1e-3", "clip=0.5,1"}), (std::vector<std::string>{"sweep.lr=[0.001]", "sweep.clip=[0.5, 1]"}));
}

TEST(SweepOption, BadPartsAreNamed) {
  EXPECT_NE(sweep_error("lr=1e-3,abc").find("'abc' in 'lr=1e-3,abc' is not a number"), std::string::npos);
  EXPECT_NE(sweep_error("warmup=10,2.5").find("'2.5' in 'warmup=10,2.5' is not an integer"), std::string::npos);
  EXPECT_NE(sweep_error("lr=1e-3,,3e-4").find("has an empty value"), std::string::npos);
  EXPECT_NE(sweep_error("lr=").find("has an empty value"), std::string::npos);
  EXPECT_NE(sweep_error("lr").find("expected KEY=V1,V2,..."), std::string::npos);
  EXPECT_NE(sweep_error("learning_rate=1e-3").find("unknown key 'learning_rate' in 'learning_rate=1e-3'; did you mean 'lr'?"),
            std::string::npos)
      << sweep_error("learning_rate=1e-3");
  EXPECT_NE(sweep_error("beta1=0.9").find("KEY is one of lr, weight_decay, clip, warmup"), std::string::npos);
  EXPECT_NE(sweep_error("warmup=99999999999999999999").find("out of range for an integer"), std::string::npos);
  std::string twice;
  try {
    sweep_overrides({"lr=1e-3", "lr=2e-3"});
  } catch (const Error& e) {
    twice = e.what();
  }
  EXPECT_NE(twice.find("--sweep lr is given twice"), std::string::npos) << twice;
}

// The options reach the configuration: each bad value below is refused by the config's own checks (before
// any data is read or any output made), which only happens when the option set the key.
TEST_F(Cli, PopulationOptions) {
  Result r = run("train --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--models"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--sweep KEY=V1,V2,..."), std::string::npos) << r.out;
  r = run("train --steps 100 --sweep warmup=10,500 -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("sweep.warmup[1] = 500 must be less than train.steps = 100"), std::string::npos) << r.out;
  r = run("train --sweep lr=1e-3 --sweep clip=1,inf -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("sweep.clip[1] = inf must be finite"), std::string::npos) << r.out;
  r = run("train --sweep lr=1e-3,1e-3 -o " + p("x"));
  EXPECT_NE(r.out.find("sweep.lr[1] = 0.001 repeats sweep.lr[0]"), std::string::npos) << r.out;
  r = run("train --models 5000 -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("train.models must be in [1, 4096]"), std::string::npos) << r.out;
  r = run("train --models two -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--models: 'two' is not an integer"), std::string::npos) << r.out;
  r = run("train --sweep lr=1e-3,fast -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("ml-alpha: error: --sweep: 'fast' in 'lr=1e-3,fast' is not a number"), std::string::npos) << r.out;
  r = run("train --sweep learning_rate=1e-3 -o " + p("x"));
  EXPECT_NE(r.out.find("did you mean 'lr'?"), std::string::npos) << r.out;
  r = run("train --sweep lr=1e-3 --sweep lr=2e-3 -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--sweep lr is given twice"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("x")));
}

// predict / eval / info with a population's run folder: the members' mean (all of them: the run's own
// ensemble/pred.npy, bit for bit), a selection of them, and the refusals.
TEST_F(Cli, PredictAndEvalWithAPopulationsMembers) {
  Result r = run("train --device cpu --instruments 4 --timesteps 300 --features 3 --d-model 16 --head-dim 8 -B 4 "
                 "-L 32 --steps 20 --warmup 2 --eval-every 10 --log-every 10 --models 3 -o " + p("pop"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("predict --device cpu --checkpoint " + p("pop") + " -o " + p("all"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the mean of 3 members of " + p("pop") + " (member-00, member-01, member-02)"), std::string::npos)
      << r.out;
  const std::vector<float> mine = read_npy(p("all.npy")).data.to_vector(),
                           run_pred = read_npy(p("pop/ensemble/pred.npy")).data.to_vector();
  ASSERT_EQ(mine.size(), run_pred.size());
  EXPECT_EQ(std::memcmp(mine.data(), run_pred.data(), mine.size() * sizeof(float)), 0);
  std::ifstream a(p("all.csv")), b(p("pop/ensemble/pred.csv"));
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());

  r = run("predict --device cpu --checkpoint " + p("pop") + " --members top:2 -o " + p("top"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the mean of 2 members"), std::string::npos) << r.out;
  r = run("eval --device cpu --checkpoint " + p("pop") + " --members member-02,member-00 --split valid");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(member-00, member-02) on the valid split"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 0 |"), std::string::npos) << r.out;
  r = run("info --checkpoint " + p("pop"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("population of 3 members"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| member-01 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid_ic"), std::string::npos) << r.out;

  r = run("predict --device cpu --checkpoint " + p("pop") + " --members top:4 -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("top:4 but " + p("pop/leaderboard.csv") + " ranks 3 members"), std::string::npos) << r.out;
  r = run("eval --device cpu --checkpoint " + p("pop") + " --members member-09");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("no member 'member-09'; its members: member-00, member-01, member-02"), std::string::npos) << r.out;
  r = run("eval --device cpu --checkpoint " + p("pop/member-00"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("holds no population run"), std::string::npos) << r.out;
  r = run("eval --device cpu --checkpoint " + p("pop/member-00/best.safetensors") + " --members top:1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--members chooses the members of a population run folder"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("x.npy")));
}

// --precision P and its older spelling --tf32, as precision_flag reads them.
std::string precision_error(const std::string& precision, bool tf32) {
  try {
    precision_flag(precision, tf32);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PrecisionOption, AliasAndConflicts) {
  EXPECT_EQ(precision_flag("", false), std::nullopt);  // neither: the config decides
  EXPECT_EQ(precision_flag("", true), Precision::TF32);
  EXPECT_EQ(precision_flag("fp32", false), Precision::FP32);
  EXPECT_EQ(precision_flag("tf32", false), Precision::TF32);
  EXPECT_EQ(precision_flag("bf16", false), Precision::BF16);
  EXPECT_EQ(precision_flag("tf32", true), Precision::TF32);  // the same thing twice
  EXPECT_EQ(precision_error("bf16", true),
            "--tf32 (the older spelling of --precision tf32) contradicts --precision bf16: give only --precision");
  EXPECT_NE(precision_error("fp32", true).find("contradicts --precision fp32"), std::string::npos);
  EXPECT_EQ(precision_error("fp16", false), "--precision must be 'fp32', 'tf32' or 'bf16', got 'fp16'");
}

// --precision reaches train.precision: bad values and conflicts fail before any output, the checkpoint
// records the precision (info shows it), a resume keeps it or changes it when told, and the CPU says it
// computes fp32 regardless. bench and eval read the flag too.
TEST_F(Cli, PrecisionOption) {
  Result r = run("train --help");
  EXPECT_NE(r.out.find("--precision fp32|tf32|bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fp32 master weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--tf32"), std::string::npos) << r.out;
  r = run("train --precision fp16 -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("ml-alpha: error: --precision must be 'fp32', 'tf32' or 'bf16', got 'fp16'"), std::string::npos)
      << r.out;
  r = run("train --precision bf16 --tf32 -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--tf32 (the older spelling of --precision tf32) contradicts --precision bf16"), std::string::npos)
      << r.out;
  r = run("train --set train.precision=\"half\" -o " + p("x"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("train.precision: must be one of 'fp32', 'tf32', 'bf16', got 'half'"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("x")));
  r = run("bench --precision fp16");  // the flag is read before the GPU is looked for
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--precision must be 'fp32', 'tf32' or 'bf16', got 'fp16'"), std::string::npos) << r.out;
  r = run("bench --help");
  EXPECT_NE(r.out.find("--precision fp32|tf32|bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("without it S and M run fp32, L tf32 and then fp32"), std::string::npos) << r.out;

  // A config file's older run.tf32 = true gives way to the flag.
  std::ofstream(p("old.toml")) << "[run]\ntf32 = true\n";
  r = run(std::string(kSmall) + "--config " + p("old.toml") + " --precision bf16 --steps 20 --stop-after 10 "
          "--timesteps 300 -o " + p("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("device cpu (fp32: train.precision = bf16 applies to the GPU only)"), std::string::npos) << r.out;
  r = run("info --checkpoint " + p("run/last.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("precision = 'bf16'"), std::string::npos) << r.out;
  // The devices line: a CPU-only build says what it is, not "0 devices".
  EXPECT_EQ(r.out.rfind(gpu_support_built() ? "CUDA devices: " + std::to_string(gpu_devices().size()) + "\n"
                                            : std::string("CUDA devices: none (a CPU-only build"), 0),
            0u) << r.out;
  r = run("train --device cpu --stop-after 5 -o " + p("run") + " --resume " + p("run/last.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("train.precision = bf16 applies"), std::string::npos) << r.out;  // the checkpoint's
  EXPECT_EQ(r.out.find("resume: train.precision"), std::string::npos) << r.out;
  r = run("train --device cpu --tf32 -o " + p("run") + " --resume " + p("run/last.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("resume: train.precision: 'bf16' -> 'tf32' (set explicitly)"), std::string::npos) << r.out;
  EXPECT_EQ(load_checkpoint(p("run/last.safetensors")).state.step, 20);
  // eval and predict on the CPU compute in fp32: a --precision that would do nothing is refused.
  r = run("eval --device cpu --precision bf16 --checkpoint " + p("run/last.safetensors") + " --split valid");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--precision bf16 is for the GPU; on the CPU eval and predict must compute in fp32"),
            std::string::npos) << r.out;

  // A population records it in run.json; its resume takes the older spelling as well.
  r = run(std::string(kSmall) + "--models 2 --steps 20 --stop-after 10 --timesteps 300 -o " + p("pop"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("train --device cpu --set run.tf32=true --resume " + p("pop"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("resume: train.precision: 'fp32' -> 'tf32' (set explicitly)"), std::string::npos) << r.out;
  EXPECT_NE(slurp(p("pop/run.json")).find("precision = 'tf32'"), std::string::npos);
}

// The number printed right after the first `key` at or after `from`; NaN when there is none.
double number_after(const std::string& out, const std::string& key, size_t from = 0) {
  const size_t at = from == std::string::npos ? from : out.find(key, from);
  if (at == std::string::npos) return std::nan("");
  return std::stod(out.substr(at + key.size()));
}

// The end of a run is printed from what run_training returns: each fold's best step and value and its test
// metrics, the mean ± std over the folds and the pooled out-of-sample metrics, the same numbers folds.json holds.
TEST_F(Cli, TrainPrintsTheRunsResult) {
  Result r = run(std::string(kSmall) + "--timesteps 400 -L 32 --d-model 16 --steps 20 --eval-every 10 "
                 "--set split.walk_forward_folds=2 -o " + p("wf"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(p("wf/folds.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["folds"].size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const nlohmann::json& f = j["folds"][k];
    const std::string best = "fold " + std::to_string(k) + ": best " + j["metric"].get<std::string>() + " ";
    EXPECT_NEAR(number_after(r.out, best), f["best_value"].get<double>(), 1e-4) << r.out;
    EXPECT_EQ(number_after(r.out, "at step ", r.out.find(best)), f["best_step"].get<double>());
    const std::string prefix = "fold " + std::to_string(k) + ": ";
    EXPECT_NEAR(number_after(r.out, prefix + "test  mse "), f["test_metrics"]["mse"].get<double>(),
                1e-4 * f["test_metrics"]["mse"].get<double>()) << r.out;
  }
  EXPECT_NE(r.out.find("folds: metric mean ± std over the folds"), std::string::npos) << r.out;
  const double ic_mean = j["mean_test_metrics"]["ic"], ic_std = j["std_test_metrics"]["ic"];
  EXPECT_NEAR(number_after(r.out, "\n  ic "), ic_mean, 1e-5) << r.out;
  EXPECT_NEAR(number_after(r.out, "± ", r.out.find("\n  ic ")), ic_std, 1e-5) << r.out;
  EXPECT_NEAR(number_after(r.out, "pooled out-of-sample (" + p("wf/oos_pred.csv") + "): mse "),
              j["oos_metrics"]["mse"].get<double>(), 1e-4 * j["oos_metrics"]["mse"].get<double>()) << r.out;

  // A single split: the best and the test line, no fold prefix and no walk-forward summary.
  r = run(std::string(kSmall) + "--timesteps 300 -L 32 --d-model 16 --steps 20 --eval-every 10 -o " + p("one"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream best(p("one/best.json"));
  const nlohmann::json b = nlohmann::json::parse(best);
  EXPECT_EQ(number_after(r.out, " at step "), b["step"].get<double>()) << r.out << b.dump();
  EXPECT_GT(number_after(r.out, "\ntest  mse "), 0) << r.out;
  EXPECT_EQ(r.out.find("folds: metric mean"), std::string::npos) << r.out;

  // A population: each member's best and test, the ensemble, and the leaderboard file.
  r = run(std::string(kSmall) + "--timesteps 300 -L 32 --d-model 16 --steps 20 --eval-every 10 --sweep lr=1e-3,2e-3 -o " +
          p("pop"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* m : {"member-00 (lr=0.001): best ", "member-01 (lr=0.002): best "}) {
    std::ifstream member_best(p("pop/") + std::string(m, 9) + "/best.json");
    const nlohmann::json mb = nlohmann::json::parse(member_best);
    EXPECT_NEAR(number_after(r.out, m + mb["metric"].get<std::string>() + " "), mb["value"].get<double>(), 1e-4) << r.out;
  }
  EXPECT_GT(number_after(r.out, "mean-ensemble of the members' best weights (test range): mse "), 0) << r.out;
  EXPECT_NE(r.out.find("leaderboard: " + p("pop/leaderboard.csv")), std::string::npos) << r.out;
}

TEST_F(Cli, OutputComesBeforeTheError) {
  // stdout is flushed before the error goes to stderr, so a combined log reads in order.
  const Result r = run("train --device cpu --warmup 400");
  EXPECT_NE(r.code, 0);
  const size_t data_line = r.out.find("ml-alpha train"), error = r.out.find("ml-alpha: error:");
  ASSERT_NE(error, std::string::npos) << r.out;
  EXPECT_TRUE(data_line == std::string::npos || data_line < error) << r.out;
}

// --threads on train, eval and predict (run.threads): the same bits on 1 and 2 threads, the engine's threads in
// the log, a count out of range refused before anything is written.
TEST_F(Cli, ThreadsFlag) {
  const std::string small = "--device cpu --steps 30 --warmup 5 --eval-every 10 --d-model 16 --head-dim 8 --instruments 4 --timesteps 300 ";
  Result r = run("train " + small + "--threads 1 -o " + p("one"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cpu engine (1 thread)"), std::string::npos) << r.out;
  r = run("train " + small + "--threads 2 -o " + p("two"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cpu engine (2 threads)"), std::string::npos) << r.out;
  const Checkpoint a = load_checkpoint(p("one/last.safetensors")), b = load_checkpoint(p("two/last.safetensors"));
  EXPECT_TRUE(a.state.params == b.state.params && a.state.m == b.state.m && a.state.v == b.state.v);
  r = run("predict --device cpu --threads 2 --checkpoint " + p("one/best.safetensors") + " --split all -o " + p("pred2"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("predict --device cpu --threads 1 --checkpoint " + p("one/best.safetensors") + " --split all -o " + p("pred1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(test::read_bytes(p("pred1.npy")) == test::read_bytes(p("pred2.npy")));
  r = run("eval --device cpu --threads 1 --checkpoint " + p("one/best.safetensors") + " --split test");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("train " + small + "--threads 65 -o " + p("bad"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("run.threads must be 0 (every CPU this process may use) or 1 to 64, got 65"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(p("bad")));
  r = run("eval --device cpu --threads 100 --checkpoint " + p("one/best.safetensors") + " --split test");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("run.threads must be 0 (every CPU this process may use) or 1 to 64, got 100"), std::string::npos)
      << r.out;
}

// bench --device cpu: the CPU table (one row per configuration and thread count, the scaling column) and the
// bit check across thread counts; GPU-only options refused.
TEST_F(Cli, BenchOnTheCpu) {
  Result r = run("bench --device cpu --configs default --threads 1,2 --steps 3 --warmup 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| fast      | default |   1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| fast      | default |   2 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.00x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("default: the weights after 2 steps, against 1 thread(s): 1 same 2 same"), std::string::npos) << r.out;
  r = run("bench --device cpu --configs default --threads 0");
  EXPECT_NE(r.out.find("--threads takes thread counts from 1 to 64, got '0'"), std::string::npos) << r.out;
  r = run("bench --device cpu --models 4");
  EXPECT_NE(r.out.find("--models and --precision are for the GPU"), std::string::npos) << r.out;
  r = run("bench --device cpu --configs XL");
  EXPECT_NE(r.out.find("unknown configuration 'XL'"), std::string::npos) << r.out;
}

// The long-window cases of bench: 65,536 tokens a step, D 256, 4 layers, in three window shapes;
// an unknown name lists every configuration.
TEST(BenchShapes, LongWindowCasesHoldOneTokenCount) {
  for (const char* name : {"W256", "W16K", "W64K"}) {
    const BenchShape& s = bench_shape(name);
    EXPECT_EQ(s.B * s.L, 65536) << name;
    EXPECT_EQ(s.D, 256) << name;
    EXPECT_EQ(s.NL, 4) << name;
  }
  EXPECT_EQ(bench_shape("W64K").B, 1);
  try {
    bench_shape("XL");
    ADD_FAILURE() << "no error for an unknown configuration";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected default, S, M, L, W256, W16K or W64K"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlalpha
