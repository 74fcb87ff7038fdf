// Run folders of the record format before run.json still resume (checkpoint/run_records.h): the folders in
// tests/fixtures/old_runs were written by ml-alpha before it (make_old_runs.cpp.txt there says how) — a solo
// run stopped by run.stop_after, one that crashed after a periodic save (last.json), a population
// (population.json, member.json), a walk-forward solo run stopped in fold 1 (folds.json) and a walk-forward
// population. Each is copied, resumed with this build and must end bitwise as the same run trained straight
// through by this build: the last and best weights, the AdamW moments, metrics.jsonl, the summaries. The
// resumed folder then holds the current records, and a further resume of the finished run is refused.
// The fixtures were trained by the reference CPU model (the only one then), so the straight runs and the
// resumes select it (run.cpu_kernels = "reference"): the fast model computes the same function with other
// roundings, and a run continues bitwise only on the model that began it.
// One exception, by design: the validation scores that old build recorded before the resume (in metrics.jsonl,
// best_value in folds.csv, valid_<metric> in leaderboard.csv) were computed with its evaluation windows (tiled
// from the range's start), not each date's own window (docs/data.md, "What a date's prediction is"), so those
// values are not compared; everything computed after the resume is.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "mlalpha/run.h"
#include "test_files.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

// The settings the fixtures were written with (make_old_runs.cpp.txt), into `out`, plus `extra`.
RunConfig fixture_config(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> ov = {"run.device=\"cpu\"", "data.instruments=4", "data.timesteps=300", "data.n_features=3",
                                 "model.d_model=8",    "model.head_dim=4",   "model.d_state=4",    "model.layers=1",
                                 "model.chunk=8",      "train.batch=4",      "train.seq_len=16",   "train.steps=30",
                                 "train.warmup=2",     "train.log_every=1",  "run.eval_every=5",
                                 "run.cpu_kernels=\"reference\""};
  ov.insert(ov.end(), extra.begin(), extra.end());
  return parse_run_config("", "fixture", ov, "", {{ConfigSetting::Kind::text, "run.out_dir", out.string(), ""}});
}

class OldRuns : public ::testing::Test {
 protected:
  // A copy of fixture `name` in the temporary folder: the fixtures in the source tree are never written.
  fs::path copy_of(const std::string& name) {
    const fs::path from = fs::path(MLALPHA_SOURCE_DIR) / "tests/fixtures/old_runs" / name, to = tmp_.path / name;
    fs::copy(from, to, fs::copy_options::recursive);
    return to;
  }
  // The straight run of the same settings.
  fs::path straight(const std::string& name, const std::vector<std::string>& extra) {
    const fs::path out = tmp_.path / ("straight_" + name);
    run_training(fixture_config(out, extra));
    return out;
  }
  test::TempDir tmp_;
};

// The step of a metrics.jsonl record ("{\"step\":12,..."), or -1.
int64_t record_step(const std::string& line) {
  const size_t at = line.find("\"step\":");
  return at == std::string::npos ? -1 : std::stoll(line.substr(at + 7));
}

// metrics.jsonl without its test records: an invocation that ends early (run.stop_after) tests its best weights
// there, in the middle of the file. The validation records of steps up to `old_steps` (the old build's) keep only
// their step. The sign strategy's metrics (ts_*) are left out: the fixtures' records predate them, and a resume
// appends records that have them.
std::string train_and_valid_records(const fs::path& jsonl, int64_t old_steps = 0) {
  std::istringstream in(test::read_bytes(jsonl));
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"split\":\"test\"") != std::string::npos) continue;
    if (line.find("\"split\":\"valid\"") != std::string::npos && record_step(line) <= old_steps)
      line = "valid record of step " + std::to_string(record_step(line)) + " (the old build's scores)";
    const size_t a = line.find(",\"ts_mean\":"), b = line.find(",\"quantile_means\":");
    if (a != std::string::npos && b != std::string::npos && a < b) line.erase(a, b - a);
    kept += line + "\n";
  }
  return kept;
}

// The last step the fixture's model folder `rel` (under tests/fixtures/old_runs) recorded.
int64_t fixture_steps(const fs::path& rel) {
  const fs::path jsonl = fs::path(MLALPHA_SOURCE_DIR) / "tests/fixtures/old_runs" / rel / "metrics.jsonl";
  std::istringstream in(test::read_bytes(jsonl));
  int64_t last = 0;
  for (std::string line; std::getline(in, line);) last = std::max(last, record_step(line));
  return last;
}

// last.safetensors (weights, moments, counters), best.safetensors and the training and validation records of
// two model folders agree (a: the straight run; b: the resumed fixture `rel`).
void expect_same_model(const fs::path& a, const fs::path& b, const fs::path& rel) {
  const Checkpoint x = load_checkpoint((a / "last.safetensors").string()), y = load_checkpoint((b / "last.safetensors").string());
  EXPECT_EQ(x.state.step, y.state.step) << b;
  EXPECT_EQ(x.state.params, y.state.params) << b;
  EXPECT_EQ(x.state.m, y.state.m) << b;
  EXPECT_EQ(x.state.v, y.state.v) << b;
  EXPECT_EQ(load_checkpoint_weights((a / "best.safetensors").string()).params,
            load_checkpoint_weights((b / "best.safetensors").string()).params)
      << b;
  const int64_t old_steps = fixture_steps(rel);
  EXPECT_GT(old_steps, 0) << rel;
  EXPECT_EQ(train_and_valid_records(a / "metrics.jsonl", old_steps), train_and_valid_records(b / "metrics.jsonl", old_steps))
      << b;
}

// A CSV's rows without the columns named `name` or starting with `prefix`.
std::vector<std::vector<std::string>> without_columns(std::vector<std::vector<std::string>> rows, const std::string& prefix) {
  if (rows.empty()) return rows;
  for (size_t c = rows[0].size(); c-- > 0;)
    if (rows[0][c].rfind(prefix, 0) == 0)
      for (auto& r : rows)
        if (r.size() > c) r.erase(r.begin() + ptrdiff_t(c));
  return rows;
}

// A CSV's rows without the columns that name folders (the two runs live in different ones).
std::vector<std::vector<std::string>> rows_without_dirs(const fs::path& csv) {
  auto rows = test::read_csv_rows(csv);
  if (rows.empty()) return rows;
  const auto dir = std::find(rows[0].begin(), rows[0].end(), "dir");
  if (dir == rows[0].end()) return rows;
  const size_t at = size_t(dir - rows[0].begin());
  for (auto& r : rows)
    if (r.size() > at) r.erase(r.begin() + ptrdiff_t(at));
  return rows;
}

TEST_F(OldRuns, ASoloRunResumesFromItsCheckpoint) {
  const std::vector<std::string> settings = {"run.patience=3", "run.metric=\"mse\""};
  const fs::path ref = straight("solo", settings), old = copy_of("solo");
  RunOptions o;
  o.resume = (old / "last.safetensors").string();
  // Its [run] settings were not recorded: the caller gives them, as it did.
  const RunResult r = run_training(fixture_config(old, settings), o);
  ASSERT_EQ(r.folds.size(), 1u);
  expect_same_model(ref, old, "solo");
  EXPECT_TRUE(fs::exists(old / "run.json") && fs::exists(old / "state.json"));
  // Recorded now: a further resume needs no settings, and is refused as the run is finished.
  RunOptions again;
  again.resume = old.string();
  EXPECT_TRUE(test::contains(test::error_of([&] { run_training(parse_run_config("", "t", {}), again); }),
                             "the run is finished"));
}

TEST_F(OldRuns, ASoloRunThatCrashedAfterAPeriodicSaveResumesFromThatSave) {
  const fs::path ref = straight("solo_saved", {"run.save_every=5"}), old = copy_of("solo_saved");
  ASSERT_TRUE(fs::exists(old / "last.json"));
  RunOptions o;
  o.resume = (old / "last.safetensors").string();
  run_training(fixture_config(old, {"run.save_every=5"}), o);
  expect_same_model(ref, old, "solo_saved");
}

TEST_F(OldRuns, APopulationResumesFromItsFolder) {
  const std::vector<std::string> settings = {"train.models=2", "run.patience=2", "train.lr=0.05"};
  const fs::path ref = straight("population", settings), old = copy_of("population");
  ASSERT_TRUE(fs::exists(old / "population.json"));
  RunOptions o;
  o.resume = old.string();
  const RunResult r =
      run_training(parse_run_config("", "t", {"run.device=\"cpu\"", "run.cpu_kernels=\"reference\""}), o);  // population.json governs
  ASSERT_EQ(r.members.size(), 2u);
  for (const char* m : {"member-00", "member-01"}) {
    expect_same_model(ref / m, old / m, fs::path("population") / m);
    EXPECT_TRUE(fs::exists(old / m / "state.json")) << m;
  }
  EXPECT_TRUE(fs::exists(old / "run.json"));
  EXPECT_EQ(without_columns(rows_without_dirs(ref / "leaderboard.csv"), "valid_"),
            without_columns(rows_without_dirs(old / "leaderboard.csv"), "valid_"));
}

TEST_F(OldRuns, AWalkForwardRunResumesAtItsFold) {
  const std::vector<std::string> wf = {"split.walk_forward_folds=2", "split.walk_forward_train_size=60", "train.steps=10"};
  const fs::path ref = straight("walk_forward", wf), old = copy_of("walk_forward");
  RunOptions o;
  o.resume = (old / "fold-1/last.safetensors").string();
  const RunResult r = run_training(fixture_config(old, wf), o);
  ASSERT_EQ(r.folds.size(), 1u);  // fold 1: fold 0 had finished
  for (const char* f : {"fold-0", "fold-1"}) expect_same_model(ref / f, old / f, fs::path("walk_forward") / f);
  EXPECT_EQ(test::read_bytes(ref / "oos_pred.csv"), test::read_bytes(old / "oos_pred.csv"));
  EXPECT_EQ(without_columns(test::read_csv_rows(ref / "folds.csv"), "best_value"),
            without_columns(test::read_csv_rows(old / "folds.csv"), "best_value"));
}

TEST_F(OldRuns, AWalkForwardPopulationResumesAtItsFold) {
  const std::vector<std::string> wf = {"split.walk_forward_folds=2", "split.walk_forward_train_size=60", "train.steps=10",
                                       "train.models=2"};
  const fs::path ref = straight("walk_forward_population", wf), old = copy_of("walk_forward_population");
  RunOptions o;
  o.resume = old.string();
  const RunResult r = run_training(parse_run_config("", "t", {"run.device=\"cpu\"", "run.cpu_kernels=\"reference\""}), o);
  EXPECT_EQ(r.members.size(), 4u);  // both folds' members: fold 0's tested again
  for (const char* m : {"fold-0/member-00", "fold-0/member-01", "fold-1/member-00", "fold-1/member-01"})
    expect_same_model(ref / m, old / m, fs::path("walk_forward_population") / m);
  EXPECT_EQ(without_columns(rows_without_dirs(ref / "leaderboard.csv"), "valid_"),
            without_columns(rows_without_dirs(old / "leaderboard.csv"), "valid_"));
  EXPECT_EQ(test::read_bytes(ref / "ensemble/pred.csv"), test::read_bytes(old / "ensemble/pred.csv"));
}

}  // namespace
}  // namespace mlalpha
