// train.state = "carry" through the public run API on the CPU backend (docs/config.md, "Stateful training"):
// - a carry run stopped (run.stop_after) and resumed ends bitwise as the run trained straight through, walk-forward
//   folds included (each fold its own lanes, from zero);
// - a population keeps its states per member: member r is bitwise the solo run of seed + r;
// - validation and test score in mode carry, the checkpoint records the state, and a model loaded from it
//   predicts in carry by default;
// - time batches with the IC loss: stopped and resumed, bitwise as the straight run.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "carry_run_util.h"
#include "compute_util.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "test_files.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

class CarryRun : public ::testing::Test {
 protected:
  RunConfig config(const std::string& name, const std::vector<std::string>& extra = {}) {
    return test::carry_run_config(tmp_.path / name, "cpu", extra);
  }
  RunResult run(const RunConfig& c, std::vector<std::string>* messages = nullptr, RunOptions o = {}) {
    o.callback = [messages](const RunEvent& e) {
      if (e.kind == RunEvent::Kind::message && messages) messages->push_back(e.message);
      return true;
    };
    return run_training(c, o);
  }
  fs::path at(const std::string& rel) const { return tmp_.path / rel; }
  test::TempDir tmp_;
};

TEST_F(CarryRun, AResumedRunEndsAsTheStraightOne) {
  const std::vector<std::string> wf = {"split.walk_forward_folds=2", "split.walk_forward_train_size=160", "split.walk_forward_test_size=60"};
  std::vector<std::string> messages;
  run(config("straight", wf), &messages);
  bool said = false;
  for (const std::string& m : messages) said = said || m.find("validation and test predict in mode carry") != std::string::npos;
  EXPECT_TRUE(said) << "the run's log names the carry evaluation";
  run(config("split", {"split.walk_forward_folds=2", "split.walk_forward_train_size=160", "split.walk_forward_test_size=60", "run.stop_after=10"}));
  RunOptions o;
  o.resume = at("split").string();
  run(parse_run_config("", "test", {}), nullptr, o);
  for (const char* fold : {"fold-0", "fold-1"})
    test::expect_same_carry_state(at(std::string("straight/") + fold + "/last.safetensors"),
                      at(std::string("split/") + fold + "/last.safetensors"));
  EXPECT_EQ(test::read_bytes(at("straight/oos_pred.csv")), test::read_bytes(at("split/oos_pred.csv")));
}

TEST_F(CarryRun, PopulationMembersKeepTheirOwnStates) {
  run(config("pop", {"train.models=2"}));
  run(config("solo", {"train.seed=2"}));  // member 1 trains with seed + 1
  test::expect_same_carry_state(at("pop/member-01/last.safetensors"), at("solo/last.safetensors"));
  const Checkpoint m0 = load_checkpoint(at("pop/member-00/last.safetensors").string());
  const Checkpoint m1 = load_checkpoint(at("pop/member-01/last.safetensors").string());
  EXPECT_NE(m0.state.carry_ssm, m1.state.carry_ssm);
}

// The run scores its validation and test in mode carry: a model loaded from its best checkpoint gives the same test
// score in carry mode (and by default), another one in window mode.
TEST_F(CarryRun, EvaluatesInCarryModeAndSaysSoInTheCheckpoint) {
  const RunResult r = run(config("eval"));
  const Model m = Model::load(r.folds[0].dir + "/best.safetensors");
  EXPECT_EQ(m.train_config().state, StateMode::Carry);
  EXPECT_EQ(default_predict_mode(m.train_config()), PredictMode::carry);
  std::string note;
  EXPECT_EQ(resolve_predict_mode("", m.train_config(), "--mode", &note), PredictMode::carry);
  EXPECT_NE(note.find("train.state = 'carry'"), std::string::npos) << note;
  EXPECT_EQ(resolve_predict_mode("window", m.train_config(), "--mode"), PredictMode::window);
  const Panel p = load_panel(m.data_config());
  const TimeRange test_range = split_range(r.folds[0].split, "test", p.T);
  const double carry = m.evaluate(p, test_range, test::on_cpu(2), {}, PredictMode::carry).mean.mse;
  const double window = m.evaluate(p, test_range, test::on_cpu(2), {}, PredictMode::window).mean.mse;
  EXPECT_DOUBLE_EQ(carry, r.folds[0].test.mean.mse);
  EXPECT_NE(window, r.folds[0].test.mean.mse);
  // A zero-state run's checkpoint has no state field and defaults to window.
  const RunResult z = run(config("zero", {"train.state=\"zero\""}));
  const Model mz = Model::load(z.folds[0].dir + "/best.safetensors");
  EXPECT_EQ(default_predict_mode(mz.train_config()), PredictMode::window);
  EXPECT_TRUE(load_checkpoint(z.folds[0].dir + "/last.safetensors").state.carry_ssm.empty());
}

// Time batches with the IC loss and carried states (data/carry_sampler_time.h) through the run: stopped and resumed,
// the run ends bitwise as the straight one, and its test scores in mode carry.
TEST_F(CarryRun, TimeBatchesWithTheIcLossResumeBitwise) {
  const std::vector<std::string> tb = {"train.batch=\"time\"", "train.dates=2", "train.instruments=3",
                                       "train.loss=\"ic\"", "run.metric=\"ic\""};
  std::vector<std::string> split = tb;
  split.push_back("run.stop_after=10");
  const RunResult straight = run(config("time", tb));
  run(config("time-split", split));
  RunOptions o;
  o.resume = at("time-split").string();
  const RunResult resumed = run(parse_run_config("", "test", {}), nullptr, o);
  test::expect_same_carry_state(at("time/last.safetensors"), at("time-split/last.safetensors"));
  EXPECT_EQ(straight.folds[0].test.mean.ic, resumed.folds[0].test.mean.ic);
  EXPECT_TRUE(std::isfinite(straight.folds[0].test.mean.ic));
  const Model m = Model::load(straight.folds[0].dir + "/best.safetensors");
  EXPECT_EQ(m.train_config().batch_mode, BatchMode::Time);
  EXPECT_EQ(default_predict_mode(m.train_config()), PredictMode::carry);
  const Panel p = load_panel(m.data_config());
  const TimeRange test_range = split_range(straight.folds[0].split, "test", p.T);
  EXPECT_DOUBLE_EQ(m.evaluate(p, test_range, test::on_cpu(2), {}, PredictMode::carry).mean.ic,
                   straight.folds[0].test.mean.ic);
}

}  // namespace
}  // namespace mlalpha
