// train.state = "carry" through the public run API on the GPU backend (docs/config.md, "Stateful training"), the
// twin of test_carry_run (CPU):
// - a carry run stopped (run.stop_after) and resumed from its `last` files ends bitwise as the run trained straight
//   through, walk-forward folds included, fp32 and bf16;
// - a population keeps its states per member: member r is bitwise the solo run of seed + r;
// - a data-parallel run of one rank (the NCCL path: the sampler's lane split, the states gathered for `last`)
//   equals the plain run bitwise, and resumes bitwise;
// - validation and test score in mode carry on the GPU engine: a model loaded from the best checkpoint scores the
//   run's test mse in mode carry; the GPU run's scores are close to the CPU run's of the same settings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "carry_run_util.h"
#include "compute_util.h"
#include "core/error.h"
#include "dist/nccl.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "test_files.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

class CarryRunGpu : public ::testing::Test {
 protected:
  RunConfig config(const std::string& name, const std::vector<std::string>& extra = {}) {
    return test::carry_run_config(tmp_.path / name, "gpu", extra);
  }
  RunResult run(const RunConfig& c, RunOptions o = {}) { return run_training(c, o); }
  fs::path at(const std::string& rel) const { return tmp_.path / rel; }
  test::TempDir tmp_;
};

TEST_F(CarryRunGpu, AResumedRunEndsAsTheStraightOne) {
  for (const char* precision : {"fp32", "bf16"}) {
    const std::string p = precision, pr = std::string("train.precision=\"") + precision + "\"";
    const std::vector<std::string> wf = {"split.walk_forward_folds=2", "split.walk_forward_train_size=160",
                                         "split.walk_forward_test_size=60", pr};
    run(config("straight-" + p, wf));
    std::vector<std::string> stop = wf;
    stop.push_back("run.stop_after=10");
    run(config("split-" + p, stop));
    RunOptions o;
    o.resume = at("split-" + p).string();
    run(parse_run_config("", "test", {}), o);
    for (const char* fold : {"fold-0", "fold-1"})
      test::expect_same_carry_state(at("straight-" + p + "/" + fold + "/last.safetensors"),
                        at("split-" + p + "/" + fold + "/last.safetensors"));
    EXPECT_EQ(test::read_bytes(at("straight-" + p + "/oos_pred.csv")), test::read_bytes(at("split-" + p + "/oos_pred.csv")))
        << precision;
  }
}

TEST_F(CarryRunGpu, PopulationMembersKeepTheirOwnStates) {
  run(config("pop", {"train.models=2"}));
  run(config("solo", {"train.seed=2"}));  // member 1 trains with seed + 1
  test::expect_same_carry_state(at("pop/member-01/last.safetensors"), at("solo/last.safetensors"));
  const Checkpoint m0 = load_checkpoint(at("pop/member-00/last.safetensors").string());
  const Checkpoint m1 = load_checkpoint(at("pop/member-01/last.safetensors").string());
  EXPECT_NE(m0.state.carry_ssm, m1.state.carry_ssm);
}

// The data-parallel path with a world of one: the rank's lanes are the whole sampler's, the communicator's
// all-reduce runs in the step, and `last` is the plain run's bit for bit; a data-parallel resume continues it.
TEST_F(CarryRunGpu, AWorldOfOneEqualsThePlainRunAndResumes) {
  try {
    dist::NcclLib lib;
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable NCCL: " << e.what();
  }
  run(config("plain"));
  RunOptions o;
  o.data_parallel = true;
  run(config("dp"), o);
  test::expect_same_carry_state(at("plain/last.safetensors"), at("dp/last.safetensors"));
  run(config("dp-split", {"run.stop_after=10"}), o);
  RunOptions r = o;
  r.resume = at("dp-split").string();
  run(parse_run_config("", "test", {}), r);
  test::expect_same_carry_state(at("plain/last.safetensors"), at("dp-split/last.safetensors"));
}

// The GPU engine scores validation and test in mode carry: the loaded best model's carry-mode test mse (on the GPU)
// is the run's, the window-mode one is not; and the run is the CPU run's up to the backends' rounding.
TEST_F(CarryRunGpu, EvaluatesInCarryModeLikeTheCpuRun) {
  const RunResult r = run(config("eval"));
  const Model m = Model::load(r.folds[0].dir + "/best.safetensors");
  EXPECT_EQ(m.train_config().state, StateMode::Carry);
  const Panel p = load_panel(m.data_config());
  const TimeRange test_range = split_range(r.folds[0].split, "test", p.T);
  const double carry = m.evaluate(p, test_range, test::on_gpu(), {}, PredictMode::carry).mean.mse;
  const double window = m.evaluate(p, test_range, test::on_gpu(), {}, PredictMode::window).mean.mse;
  EXPECT_DOUBLE_EQ(carry, r.folds[0].test.mean.mse);
  EXPECT_NE(window, r.folds[0].test.mean.mse);
  const RunResult c = run(config("cpu", {"run.device=\"cpu\"", "run.threads=2"}));
  // Loose: the two backends' weights part by ~1e-5 over the steps (test_carry_training_gpu bounds that), and a
  // validation near a tie may pick another best step.
  EXPECT_NEAR(r.folds[0].test.mean.mse, c.folds[0].test.mean.mse, 5e-2 * c.folds[0].test.mean.mse);
  EXPECT_NEAR(r.folds[0].test.mean.ic, c.folds[0].test.mean.ic, 2e-2);
  std::printf("test mse GPU %.6g CPU %.6g, ic GPU %.6g CPU %.6g\n", r.folds[0].test.mean.mse, c.folds[0].test.mean.mse,
              r.folds[0].test.mean.ic, c.folds[0].test.mean.ic);
}

}  // namespace
}  // namespace mlalpha
