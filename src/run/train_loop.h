#pragma once
// The one step loop of a run: the models of one engine (a solo run's fold, a population's members of a fold,
// or of every fold with run.parallel_folds) stepped together from where their folders stand, each recorded by
// its ModelRecorder; evaluation cadence, early stopping (a member's freezes it), periodic saves, the stop
// flag and run.stop_after.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/run_records.h"
#include "config/members.h"
#include "data/panel.h"
#include "mlalpha/run.h"
#include "run/folds.h"
#include "run/reporter.h"
#include "run/run_folder.h"
#include "train/engine.h"

namespace mlalpha {

// What every part of one invocation shares.
struct RunContext {
  const RunConfig& cfg;
  const Panel& panel;  // as read
  int folds = 1;
  uint64_t fingerprint = 0;
  bool described = false;  // the data settings load the panel (checkpoints record them)
  bool population = false; // models live in member-XX folders
  Reporter& rep;
  CreatedDirs& dirs;
  EngineOptions engine;
  const RunLock& lock;  // checked before each save: the folder must still be this run's
};

// One model of an engine: its member, its fold's data, and where its folder stands.
struct ModelSlot {
  MemberSpec spec;
  const FoldData* data = nullptr;
  std::optional<Member> member;  // checked on the raw panel before the folder was touched (check_engine)
  ModelState state;         // present: a resume continues it (or tests it again when finished)
  std::string checkpoint;   // the checkpoint it continues from
  bool finished = false;    // done in an earlier invocation whatever train.steps says (an older format's folds)
};
// The folder of a model: its fold's folder, or the member's folder below it in a population.
std::filesystem::path model_dir(const RunContext& c, const ModelSlot& slot);
// True when the model trains no further step in this invocation.
bool slot_finished(const RunConfig& cfg, const ModelSlot& slot);

// A model after the loop, and its best weights' predictions (N, T, K) over its fold's scored range (empty when
// no validation ran; filled only where a summary uses them).
struct Trained {
  MemberSpec spec;
  const FoldData* data = nullptr;
  FoldResult res;
  std::vector<float> best_pred;
  // Walk-forward populations: the best weights' predictions (N, T, K) over the fold's validation range, which
  // the run's leaderboard pools over the folds to rank the members (empty otherwise).
  std::vector<float> valid_pred;
  bool trained = false;  // it took steps in this invocation (false: tested again only)
};

// Trains the slots together to train.steps; `stopped` is set when the callback or the stop flag ended it,
// `paused` when run.stop_after did.
std::vector<Trained> train_models(RunContext& c, std::vector<ModelSlot> slots, bool& stopped, bool& paused);

}  // namespace mlalpha
