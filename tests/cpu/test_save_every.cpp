// run.save_every (docs/config.md [run]): a run saves last.safetensors, its optimizer sidecar and what a
// resume needs every N steps, so a crash between two saves loses only the steps since the last one. The
// crash is an exception thrown from the callback; the resume from the files it left must end bitwise as the
// uninterrupted run (weights, AdamW moments, best checkpoint, metrics.jsonl), solo and as a population.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "core/error.h"
#include "mlalpha/run.h"
#include "population_fixture.h"
#include "checkpoint/checkpoint.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

class SaveEvery : public test::PopulationFixture {};

struct Crash : std::runtime_error {
  Crash() : std::runtime_error("simulated crash") {}
};

std::string file_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

nlohmann::json json_of(const fs::path& p) { return nlohmann::json::parse(file_text(p)); }

int64_t max_logged_step(const fs::path& jsonl) {
  std::ifstream f(jsonl);
  int64_t m = 0;
  for (std::string line; std::getline(f, line);) m = std::max(m, nlohmann::json::parse(line).value("step", int64_t(0)));
  return m;
}

// Options whose callback throws at the first log event of step >= at: an exception escaping run_training,
// as a crash ends a process mid-run.
RunOptions crashing_at(int64_t at) {
  RunOptions o;
  o.callback = [at](const RunEvent& e) {
    if (e.kind == RunEvent::Kind::log && e.step >= at) throw Crash();
    return true;
  };
  return o;
}

// Each validation's (member, step) -> whether it was a new best, as the eval events tell it.
using Bests = std::map<std::pair<int, int64_t>, bool>;
RunOptions recording(Bests& out) {
  RunOptions o;
  o.callback = [&out](const RunEvent& e) {
    if (e.kind == RunEvent::Kind::eval) out[{e.member, e.step}] = e.evaluation.best;
    return true;
  };
  return o;
}

// last.safetensors and its sidecar in `a` and `b` hold the same weights, moments and counters, bitwise.
void expect_same_last(const fs::path& a, const fs::path& b) {
  const Checkpoint x = load_checkpoint((a / "last.safetensors").string());
  const Checkpoint y = load_checkpoint((b / "last.safetensors").string());
  EXPECT_EQ(x.state.step, y.state.step) << b;
  EXPECT_EQ(x.state.adam_step, y.state.adam_step) << b;
  EXPECT_EQ(x.state.params, y.state.params) << b;
  EXPECT_EQ(x.state.m, y.state.m) << b;
  EXPECT_EQ(x.state.v, y.state.v) << b;
}

TEST_F(SaveEvery, ASoloRunCrashedBetweenSavesResumesBitExactly) {
  // Validation every 5 steps with patience: a best after the save at step 10 (at step 15, before the crash
  // at 17) is in best.json when the run resumes from step 10, and patience's count must continue as of step 10.
  const std::vector<std::string> s = {"run.eval_every=5", "run.patience=3", "run.metric=\"mse\"", "train.log_every=1"};
  Bests full_bests, rest_bests;
  const RunResult full = run_training(config("full", s), recording(full_bests));
  EXPECT_EQ(json_of(dir_ / "full" / "state.json").value("step", 0), full.folds.at(0).steps)
      << "run.save_every = 0 saves only at the end";

  std::vector<std::string> with_saves = s;
  with_saves.push_back("run.save_every=10");
  EXPECT_THROW(run_training(config("crash", with_saves), crashing_at(17)), Crash);
  const fs::path d = dir_ / "crash";
  // The files of the save at step 10 are intact; steps 11..17 were logged after it.
  EXPECT_EQ(load_checkpoint((d / "last.safetensors").string()).state.step, 10);
  EXPECT_TRUE(fs::exists(d / "last.safetensors.optim.safetensors"));
  EXPECT_EQ(json_of(d / "state.json").value("step", 0), 10);
  EXPECT_EQ(max_logged_step(d / "metrics.jsonl"), 17);
  ASSERT_EQ(json_of(d / "best.json").value("step", 0), 15)
      << "the case of a best after the last save is only tested when the validation at step 15 improved";
  {  // a kill in the middle of a record leaves a torn last line
    std::ofstream f(d / "metrics.jsonl", std::ios::app);
    f << "{\"step\":18,\"loss\":0.";
  }

  // A resume may change run.save_every.
  std::vector<std::string> other = s;
  other.push_back("run.save_every=7");
  RunOptions ro = recording(rest_bests);
  ro.resume = (d / "last.safetensors").string();
  const RunResult rest = run_training(config("crash", other), ro);
  // The resumed validations compare against the best as of step 10: step 15 is a new best again.
  ASSERT_TRUE(full_bests.count({-1, 15}) && full_bests.at({-1, 15}));
  for (const auto& [at, best] : full_bests)
    if (at.second > 10) EXPECT_EQ(rest_bests.count(at) ? int(rest_bests.at(at)) : -1, int(best)) << "step " << at.second;
  ASSERT_EQ(rest.folds.size(), 1u);
  ASSERT_EQ(full.folds.size(), 1u);
  EXPECT_EQ(rest.folds[0].steps, full.folds[0].steps);
  EXPECT_EQ(rest.folds[0].early_stopped, full.folds[0].early_stopped);
  EXPECT_EQ(rest.folds[0].best_step, full.folds[0].best_step);
  expect_same_last(dir_ / "full", d);
  EXPECT_EQ(load_checkpoint_weights((dir_ / "full/best.safetensors").string()).params,
            load_checkpoint_weights((d / "best.safetensors").string()).params);
  EXPECT_EQ(file_text(dir_ / "full/best.json"), file_text(d / "best.json"));
  // Records past the save were dropped on resume and logged again: one record per step, as uninterrupted.
  EXPECT_EQ(file_text(dir_ / "full/metrics.jsonl"), file_text(d / "metrics.jsonl"));
}

TEST_F(SaveEvery, APopulationCrashedBetweenSavesResumesBitExactly) {
  // Patience 2 every 5 steps at a high rate: members freeze before the save at step 20 (a periodic save
  // finishes them) and after it; the crash comes at step 23.
  const std::vector<std::string> s = {"run.patience=2", "run.eval_every=5", "train.lr=0.1", "train.models=6",
                                      "train.log_every=1"};
  Bests full_bests, rest_bests;
  const RunResult full = run_training(config("full", s), recording(full_bests));

  std::vector<std::string> with_saves = s;
  with_saves.push_back("run.save_every=10");
  EXPECT_THROW(run_training(config("crash", with_saves), crashing_at(23)), Crash);
  const fs::path d = dir_ / "crash";
  int finished_before = 0;
  for (const MemberResult& m : full.members) {
    const fs::path md = d / m.name;
    const nlohmann::json st = json_of(md / "state.json");
    const int64_t saved = load_checkpoint((md / "last.safetensors").string()).state.step;
    EXPECT_EQ(st.value("step", int64_t(-1)), saved) << m.name << ": state.json and last.safetensors agree";
    if (m.early_stopped && m.steps <= 20) {
      ++finished_before;
      EXPECT_TRUE(st.value("early_stopped", false)) << m.name;
      EXPECT_EQ(saved, m.steps) << m.name;
      EXPECT_EQ(file_text(md / "metrics.jsonl"), file_text(dir_ / "full" / m.name / "metrics.jsonl"))
          << m.name << ": a member that froze before the save is finished by it";
    } else {
      EXPECT_FALSE(st.value("early_stopped", true)) << m.name;
      EXPECT_EQ(saved, 20) << m.name;
    }
  }
  EXPECT_GE(finished_before, 1) << "the finish of a frozen member by a periodic save is only tested when one froze";

  RunConfig again = parse_run_config("", "test", {"run.device=\"cpu\"", "run.save_every=5"});
  RunOptions ro = recording(rest_bests);
  ro.resume = d.string();
  const RunResult rest = run_training(again, ro);
  for (const auto& [at, best] : full_bests)
    if (at.second > 20)
      EXPECT_EQ(rest_bests.count(at) ? int(rest_bests.at(at)) : -1, int(best)) << "member " << at.first << " step " << at.second;
  ASSERT_EQ(rest.members.size(), full.members.size());
  for (size_t m = 0; m < full.members.size(); ++m) {
    const MemberResult &a = full.members[m], &b = rest.members[m];
    EXPECT_EQ(a.steps, b.steps) << a.name;
    EXPECT_EQ(a.early_stopped, b.early_stopped) << a.name;
    EXPECT_EQ(a.best_step, b.best_step) << a.name;
    expect_same_last(fs::path(a.dir), fs::path(b.dir));
    EXPECT_EQ(load_checkpoint_weights(a.dir + "/best.safetensors").params,
              load_checkpoint_weights(b.dir + "/best.safetensors").params)
        << a.name;
    EXPECT_EQ(file_text(fs::path(a.dir) / "metrics.jsonl"), file_text(fs::path(b.dir) / "metrics.jsonl")) << a.name;
  }
  EXPECT_EQ(rest.ensemble.mean.ic, full.ensemble.mean.ic);
}

TEST_F(SaveEvery, ANegativeIntervalIsRefused) {
  auto refusal = [&](const RunConfig& c) {
    try {
      run_training(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // In a setting the parser refuses it, naming the key; set in the struct, validation does.
  const std::string parsed = [&] {
    try {
      config("bad", {"run.save_every=-1"});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  }();
  EXPECT_NE(parsed.find("run.save_every: value -1 is out of range"), std::string::npos) << parsed;
  RunConfig c = config("bad");
  c.run.save_every = -1;
  const std::string direct = refusal(c);
  EXPECT_NE(direct.find("run.save_every must be >= 0"), std::string::npos) << direct;
  EXPECT_FALSE(fs::exists(dir_ / "bad"));
}

}  // namespace
}  // namespace mlalpha
