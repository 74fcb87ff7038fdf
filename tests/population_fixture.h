#pragma once
// The population suites' fixture: a fresh temporary folder per test and small runs into it.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "mlalpha/run.h"
#include "checkpoint/checkpoint.h"

namespace mlalpha::test {

class PopulationFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mlalpha_pop_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // The settings of every run but its folder: a small CPU run (30 steps, validation every 10).
  virtual std::vector<std::string> settings() const {
    return {"run.device=\"cpu\"", "data.instruments=6", "data.timesteps=240", "data.n_features=3",
            "model.d_model=16", "model.head_dim=8", "model.layers=1", "train.batch=4",
            "train.seq_len=24", "train.steps=30", "train.warmup=2", "train.log_every=10",
            "run.eval_every=10"};
  }
  // settings() with `extra`, into dir_/name.
  RunConfig config(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> ov = settings();
    ov.push_back("run.out_dir=\"" + (dir_ / name).string() + "\"");
    ov.insert(ov.end(), extra.begin(), extra.end());
    return parse_run_config("", "test", ov);
  }
  std::filesystem::path dir_;
};

// A checkpoint's weights (table.total()).
inline std::vector<float> checkpoint_params(const std::filesystem::path& p) {
  return load_checkpoint_weights(p.string()).params;
}

// The same on the GPU: a 60-step run of a two-layer model (validation every 10 steps).
class GpuRunFixture : public PopulationFixture {
 protected:
  std::vector<std::string> settings() const override {
    return {"run.device=\"gpu\"", "data.instruments=8", "data.timesteps=400", "data.n_features=4",
            "model.d_model=32", "model.head_dim=16", "model.layers=2", "train.batch=8",
            "train.seq_len=48", "train.steps=60", "train.warmup=5", "train.log_every=10",
            "run.eval_every=10"};
  }
};

}  // namespace mlalpha::test
