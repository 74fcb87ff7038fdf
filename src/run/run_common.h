#pragma once
// What the solo run loop (src/run/run.cpp) and the population run loop (src/run/run_population.cpp)
// share: the run folder, the event reporter, how predictions are scored, the fold plans, the pooled
// out-of-sample predictions, and ModelRecorder, the files and decisions of one model in its folder
// (metrics.jsonl, curves, best / last checkpoints, patience, the test of the best weights).
#include <chrono>
#include <cmath>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "data/panel.h"
#include "eval/folds.h"
#include "eval/jsonl.h"
#include "eval/plots.h"
#include "mlalpha/config.h"
#include "mlalpha/run.h"
#include "model/layout.h"
#include "predict/predict.h"

namespace mlalpha {

// Creates folders and, when destroyed, removes those it created that are still empty: an error before
// anything was written leaves nothing behind.
class CreatedDirs {
 public:
  void create(const std::filesystem::path& dir);
  ~CreatedDirs();

 private:
  std::vector<std::filesystem::path> created_;
};

// The run files in `dir`, its fold-k and member-XX folders (fold-k/member-XX too) and its ensemble folder.
std::vector<std::filesystem::path> run_files(const std::filesystem::path& dir);
// Refuses an out_dir that already holds a run unless options say to overwrite (then its run files are
// removed) or resume.
void claim_out_dir(const std::filesystem::path& out, const RunOptions& options);

class Reporter {
 public:
  explicit Reporter(const RunOptions& o) : opt_(o) {}
  // Passes the event on; a callback that returns false requests a stop (stop_requested).
  void emit(const RunEvent& e) {
    if (opt_.callback && !opt_.callback(e)) stop_ = true;
  }
  // member -1: not about one member of a population.
  void message(const std::string& m, int fold, int64_t step, int member = -1, const std::string& member_name = "");
  bool stop_requested() const { return stop_ || (opt_.stop && opt_.stop->load()); }

 private:
  const RunOptions& opt_;
  bool stop_ = false;
};

// How the run scores predictions: run.quantiles, the periods per year, and the training-mean baseline.
struct ScoreSpec {
  int quantiles = 5;
  double periods_per_year = NAN;
  std::vector<double> train_mean;  // (K)
};
// The spec of a fold trained on `split`'s training range of `panel` (the raw panel: its time axis).
ScoreSpec score_spec(const RunConfig& cfg, const Panel& panel, const Split& split);
// The windows a model of `tc` predicts [t0, t1) of `norm` with.
PredictSpec predict_spec(const TrainConfig& tc, const Panel& norm, int t0, int t1);
// Metrics of pred (N, T, K) against norm's targets over [t0, t1).
MetricsResult score_range(const std::vector<float>& pred, const Panel& norm, const ScoreSpec& sc, int t0, int t1);

// "1.23 s": for the progress messages of long preparations.
std::string seconds_text(double seconds);
std::string seconds_text(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

struct FoldPlan {
  int fold = 0;
  Split split;
  FeatureStats stats;
  std::filesystem::path dir;
  double read_seconds = -1;  // >= 0: the run read the panel from the data settings in that time (reported)
};
// Every fold of cfg's split on `panel`, checked (the training length, finite targets) and with its feature
// statistics fitted; fold f's folder is out_dir/fold-f for walk-forward runs, out_dir otherwise.
std::vector<FoldPlan> plan_folds(const RunConfig& cfg, const Panel& panel, double load_seconds);

// The pooled out-of-sample predictions of a walk-forward run: each fold's test block, predicted by that
// fold's best weights, copied into one (N, T, K) array; the fold of each time step is remembered.
class OosPool {
 public:
  OosPool(const Panel& p, const RunConfig& cfg);
  // pred (N, T, K): the fold's predictions, used over its test block.
  void add(const FoldPlan& plan, const std::vector<float>& pred);
  bool any() const { return t0_ < t1_; }
  // Writes <prefix>.csv / .npy and scores the pooled predictions; mse_mean uses each time step's own
  // fold's training mean.
  OosSummary write(const std::filesystem::path& prefix) const;

 private:
  const Panel& p_;
  const RunConfig& cfg_;
  std::vector<float> pred_;   // (N, T, K)
  std::vector<int> fold_;     // (T): the fold whose test block holds t; -1 outside every test block
  std::vector<double> base_;  // (T, K): that fold's training mean
  int t0_ = INT_MAX, t1_ = 0;  // the pooled range [first test step, last test end)
};

// One model's side of a run loop, in its folder: its training records (metrics.jsonl, curves.svg, the
// history), its validations with the best checkpoint by run.metric (best.safetensors, best.json),
// patience, and at the end last.safetensors, the test of the best weights and long_short.svg. With
// run.save_every the loop also saves last.safetensors along the way (save) with last.json, where the model
// stood at that step (the best and patience's count as of it: best.json may name a later best by the time
// a crashed run resumes from that checkpoint). The trainer stays with the loop; the recorder reaches it
// through `Access`.
class ModelRecorder {
 public:
  struct Access {
    std::function<TrainPoint(int64_t)> point;  // the record of step s
    // Predictions (N, T, K) for the spec's range with the live weights, or with `params` when non-null.
    std::function<std::vector<float>(const PredictSpec&, const std::vector<float>*)> predict;
    std::function<TrainState()> state;
  };
  struct Where {
    const FoldPlan* plan = nullptr;
    const Panel* raw = nullptr;  // the run's panel, as read (the plots' time labels)
    std::filesystem::path dir;  // the model's folder
    int folds = 1;
    int member = -1;  // -1: a solo run
    std::string member_name;
  };
  // start > 0: a resumed run. metrics.jsonl keeps its records up to step `start` (later ones, logged
  // after the last save by an invocation that crashed, are dropped: the resume logs those steps again) and
  // is appended to; the best and patience's count come from last.json when it is at step `start` (a
  // periodic save), otherwise from best.json, and the best weights from best.safetensors.
  ModelRecorder(const RunConfig& cfg, const TrainConfig& tc, const Panel& norm, const ScoreSpec& sc, Where where,
                CheckpointMeta meta, Access access, int64_t start);
  // Reads the records of every step up to s and reports them as one log event.
  void log(int64_t s, Reporter& rep);
  // Validates at step s (a new best writes best.safetensors and best.json) and reports it; true when
  // run.patience evaluations went by without improvement before train.steps (res().early_stopped is set
  // and the early stop reported).
  bool validate(int64_t s, Reporter& rep);
  // Writes last.safetensors, curves.svg, the test of the best weights (into res().test, its predictions
  // into *test_pred) and long_short.svg; `steps` is the last step trained. Returns the files written, as
  // the fold_end message says them.
  std::string finish(int64_t steps, std::vector<float>* test_pred);
  // run.save_every: writes last.safetensors at step s (atomically, as finish does), then last.json and
  // curves.svg; the records up to s must have been logged.
  void save(int64_t s);
  // A model that finished in an earlier invocation (a resumed population's frozen member): the test of the
  // best weights into res().test and *test_pred as finish does, without writing a file.
  void retest(int64_t steps, std::vector<float>* test_pred);
  FoldResult& res() { return res_; }
  const std::vector<float>& best_params() const { return best_params_; }
  // run.patience's count: evaluations since the best. A resumed population member continues its count.
  int bad_evals() const { return bad_evals_; }
  void continue_patience(int bad_evals) { bad_evals_ = bad_evals; }

 private:
  // An event of this model at step s (its fold and, in a population, its member).
  RunEvent event(RunEvent::Kind kind, int64_t s) const;

  const RunConfig& cfg_;
  const TrainConfig& tc_;
  const Panel& norm_;
  const ScoreSpec& sc_;
  Where where_;
  CheckpointMeta meta_;
  Access access_;
  ModelLayout layout_;
  JsonlWriter jsonl_;
  CurvesPlot plot_;
  FoldResult res_;
  std::vector<float> best_params_;
  MetricsResult best_eval_;  // the best validation of this invocation (its long-short plot when there is no test)
  int bad_evals_ = 0;
  int64_t reported_ = 0;
};

// last.json of a model's folder: {"step", "metric", "best_step", "best_value", "bad_evals"}, written by
// ModelRecorder::save next to last.safetensors.
constexpr const char* kLastStateFile = "last.json";

}  // namespace mlalpha
