#pragma once
// One model's side of the run loop, in its folder (a solo run's fold folder, a member's member-XX folder): its
// training records (metrics.jsonl, curves.svg, the history), its validations with the best checkpoint by
// run.metric (best.safetensors, best.json) and run.patience's count, and at each save last.safetensors with
// state.json, where the model stood at that step (checkpoint/run_records.h). At the end it tests the best
// weights and plots their long-short return. The engine stays with the loop; the recorder reaches it through
// `Access`.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_records.h"
#include "data/panel.h"
#include "eval/jsonl.h"
#include "eval/plots.h"
#include "mlalpha/run.h"
#include "model/layout.h"
#include "predict/window_plan.h"
#include "run/folds.h"
#include "run/reporter.h"

namespace mlalpha {

class ModelRecorder {
 public:
  struct Access {
    std::function<TrainPoint(int64_t)> point;  // the record of step s
    // Predictions (N, T, K) of the dates [t0, t1) in the model's evaluation mode (evaluation_mode: window, or
    // carry for a carry-trained model), with the live weights or with `params` when non-null.
    std::function<std::vector<float>(int t0, int t1, const std::vector<float>*)> predict;
    std::function<TrainState()> state;
    std::function<void()> before_save;  // throws when the run folder is no longer this run's (RunLock::check)
  };
  struct Where {
    const FoldPlan* plan = nullptr;
    const Panel* raw = nullptr;  // the run's panel, as read (the plots' time labels)
    std::filesystem::path dir;   // the model's folder
    int member = -1;             // -1: a solo run
    std::string member_name;
  };
  // start > 0: a resumed model standing at step `start`, `state` its folder's record. metrics.jsonl keeps its
  // records up to step `start` (later ones, logged after the last save by an invocation that crashed, are
  // dropped: the resume logs those steps again) and is appended to; the best and patience's count are the
  // state's when it describes step `start`, otherwise best.json's (and the count restarts).
  ModelRecorder(const RunConfig& cfg, const TrainConfig& tc, const Panel& norm, const ScoreSpec& sc, Where where,
                CheckpointMeta meta, Access access, int64_t start, const ModelState& state);
  // Reads the records of every step up to s and reports them as one log event.
  void log(int64_t s, Reporter& rep);
  // Validates at step s (a new best writes best.safetensors and best.json) and reports it; true when
  // run.patience evaluations went by without improvement before train.steps (res().early_stopped is set
  // and the early stop reported).
  bool validate(int64_t s, Reporter& rep);
  // Writes last.safetensors with state.json, curves.svg, the test of the best weights (into res().test, its
  // predictions into *test_pred) and long_short.svg; `steps` is the last step trained. Returns the files
  // written, as the fold_end message says them.
  // last.safetensors and state.json join `set`: the caller commits it, every model's of a population in one step.
  std::string finish(int64_t steps, std::vector<float>* test_pred, AtomicFileSet& set);
  // run.save_every: writes curves.svg and adds last.safetensors and state.json at step s to `set`, as finish
  // does; the records up to s must have been logged.
  void save(int64_t s, AtomicFileSet& set);
  // A model that finished in an earlier invocation: the test of the best weights into res().test and
  // *test_pred as finish does, without writing a file.
  void retest(int64_t steps, std::vector<float>* test_pred);
  FoldResult& res() { return res_; }
  const std::vector<float>& best_params() const { return best_params_; }

 private:
  RunEvent event(RunEvent::Kind kind, int64_t s) const;
  void save_last(int64_t s, AtomicFileSet& set);  // last.safetensors with its sidecar and state.json, one step
  std::vector<float> test(std::vector<float>* test_pred);

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

}  // namespace mlalpha
