// The `ml-alpha` command end to end (CPU backend): synth → train on .npy with validation → eval →
// predict; resume is bit-exact; bad input fails with a message and a non-zero exit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "data/npy.h"
#include "train/checkpoint.h"

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

  Result run(const std::string& args) {
    const std::string log = (dir_ / "cmd.log").string();
    const std::string cmd = std::string(MLALPHA_BIN) + " " + args + " > " + log + " 2>&1";
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
  EXPECT_EQ(header, "time,instrument,pred_0,target_0");
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

}  // namespace
}  // namespace mlalpha
