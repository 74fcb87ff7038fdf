#pragma once
// The records of a run folder (docs/checkpoints.md, "Run folders"): what a resume continues from, the same for
// a solo run and a population (a solo run is a population of one whose model folder is the fold's folder).
//   <out_dir>/run.json          {"format": 2, "config": every setting as TOML (to_toml), "described": the data
//                               settings load the data (false: a panel built in memory), "fingerprint": the
//                               data's, "population": member-XX folders hold the models, "complete": false
//                               from the start of an invocation until every output of the finished run is
//                               written (absent in older folders: complete)}
//   <model folder>/state.json   where a model stood when its last.safetensors was written: {"step", "metric",
//                               "best_step", "best_value", "bad_evals" (run.patience's count), "early_stopped"}
// Run folders written before run.json (format 1) still resume: a population's population.json (the same fields
// but "population"), its members' member.json {"step", "early_stopped", "bad_evals"} and the last.json
// {"step", "metric", "best_step", "best_value", "bad_evals"} of a periodic save; a solo run's settings were
// recorded in its checkpoints only (run_record.h).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "mlalpha/config.h"

namespace mlalpha {

constexpr const char* kRunFile = "run.json";
constexpr const char* kModelStateFile = "state.json";
constexpr const char* kLegacyPopulationFile = "population.json";  // format 1
constexpr const char* kLegacyMemberFile = "member.json";          // format 1
constexpr const char* kLegacyLastFile = "last.json";              // format 1

struct RunFolderRecord {
  int format = 2;  // 2: run.json; 1: population.json
  RunConfig config;
  bool described = false;
  uint64_t fingerprint = 0;
  bool population = false;
  bool complete = true;
};
void write_run_record(const std::filesystem::path& out_dir, const RunConfig& cfg, bool described, uint64_t fingerprint,
                      bool population, bool complete);
// run.json, else population.json; none when the folder holds neither. A record that does not read is an error
// naming the file.
std::optional<RunFolderRecord> read_run_record(const std::filesystem::path& out_dir);
// Whether `dir` holds a run record (run.json or population.json).
bool holds_run_record(const std::filesystem::path& dir);

// Where one model stood at its last save.
struct ModelState {
  bool present = false;    // false: the model has not trained in this folder yet
  int64_t step = 0;        // the step of its last.safetensors
  bool early_stopped = false;  // run.patience froze it at `step`
  int bad_evals = 0;       // evaluations since its best (run.patience's count)
  // The best as of `step` (state.json; a format-1 last.json at that step). Without it the best is best.json's,
  // which may name a later best when an invocation crashed after its last save.
  bool best_known = false;
  std::string metric;
  int64_t best_step = 0;   // 0: no validation yet
  double best_value = NAN;
};
void write_model_state(const std::filesystem::path& model_dir, const ModelState& s);
// state.json's text (a run commits it with last.safetensors, in one step).
std::string model_state_text(const ModelState& s);
// state.json, else member.json with last.json (format 1); `present` false when none is there.
ModelState read_model_state(const std::filesystem::path& model_dir);

}  // namespace mlalpha
